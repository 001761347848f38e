"""The span tree of one OTel trace, built from spans that arrive in any order.

Spans end child-first and batches and files split traces, so the tree is only built once all
spans of a trace are in hand. A span whose parent was never recorded (the parent never ended:
an abandoned stream, a crash) keeps its place under a placeholder for that parent, so siblings
that shared the missing parent stay together in one trace; the placeholder becomes a root and a
warning says what happened.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from evaltrace.collector.runfiles.spans import Span

MISSING_PARENT_NAME = "(missing parent span)"


@dataclass(slots=True)
class SpanTree:
    """Spans by id, children in start order, and the roots in start order."""

    spans: dict[str, Span]
    children: dict[str, list[Span]]
    roots: list[Span]
    placeholders: set[str] = field(default_factory=set)
    """Ids of the placeholder spans standing in for parents that were never recorded."""
    warnings: list[str] = field(default_factory=list)

    def kids(self, span: Span) -> list[Span]:
        """The children of `span`, in start order."""
        return self.children.get(span.span_id, [])

    def walk(self, span: Span) -> Iterator[Span]:
        """`span` and its descendants, depth first, children in start order."""
        # A stack, not nested generators: each span would resume every generator above it.
        stack = [span]
        children = self.children
        while stack:
            current = stack.pop()
            yield current
            kids = children.get(current.span_id)
            if kids:
                stack.extend(reversed(kids))

    def subtree_ids(self, span: Span) -> set[str]:
        """Ids of `span` and all its descendants."""
        return {s.span_id for s in self.walk(span)}


def _order(span: Span) -> tuple[int, int, str]:
    return span.start_time_ns, span.end_time_ns, span.span_id


def build_tree(spans: list[Span]) -> SpanTree:
    """Build the tree of one trace's spans; duplicates (same span id) keep the first copy."""
    by_id: dict[str, Span] = {}
    for span in spans:
        by_id.setdefault(span.span_id, span)
    tree = SpanTree(spans=by_id, children={}, roots=[])
    missing: dict[str, list[Span]] = {}
    for span in by_id.values():
        parent = span.parent_span_id
        if parent is None or parent == span.span_id:
            tree.roots.append(span)
        elif parent in by_id:
            tree.children.setdefault(parent, []).append(span)
        else:
            missing.setdefault(parent, []).append(span)
    for parent_id, orphans in missing.items():
        placeholder = _placeholder(parent_id, orphans)
        tree.spans[parent_id] = placeholder
        tree.placeholders.add(parent_id)
        tree.children[parent_id] = orphans
        tree.roots.append(placeholder)
        names = ", ".join(sorted(repr(o.name) for o in orphans))
        tree.warnings.append(
            f"parent span {parent_id} was never recorded (did it end?); "
            f"its children {names} are kept under a placeholder"
        )
    for kids in tree.children.values():
        kids.sort(key=_order)
    tree.roots.sort(key=_order)
    _break_cycles(tree)
    return tree


def _placeholder(parent_id: str, orphans: list[Span]) -> Span:
    first = orphans[0]
    return Span(
        trace_id=first.trace_id,
        span_id=parent_id,
        parent_span_id=None,
        name=MISSING_PARENT_NAME,
        kind="INTERNAL",
        status_code="UNSET",
        status_message=None,
        start_time_ns=min(o.start_time_ns for o in orphans),
        end_time_ns=max(o.end_time_ns for o in orphans),
        service_name=first.service_name,
        run_id=first.run_id,
    )


def _break_cycles(tree: SpanTree) -> None:
    # Corrupt ids can form a parent cycle no root reaches; lift one span of each such cycle to a root.
    reached: set[str] = set()
    stack = list(tree.roots)
    while stack:
        span = stack.pop()
        if span.span_id not in reached:
            reached.add(span.span_id)
            stack.extend(tree.kids(span))
    for span_id in sorted(set(tree.spans) - reached):
        if span_id in reached:
            continue
        span = tree.spans[span_id]
        siblings = tree.children.get(span.parent_span_id or "", [])
        if span in siblings:
            siblings.remove(span)
        tree.roots.append(span)
        tree.warnings.append(f"span {span_id} is part of a parent cycle; treated as a root")
        reached |= tree.subtree_ids(span)
