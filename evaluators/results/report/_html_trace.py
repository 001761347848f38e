"""The HTML report's drill-down: rebuilt traces as trees, read again from the span files at the end.

Why read again. The report's entries carry each sample's input, answer and error but not the
tool calls (the JSON report keeps its keys); the engine does not keep `Trace` objects either. So
the writer notes the trace ids of the entries it shows in full (a bounded set) and, when the
scoring is done, reads the same span files once more (through the traces cache, so a re-read of
a cached run is a table read), stopping as soon as every wanted trace was found. Each tree is
written to the page as soon as its trace arrives: only the id set is held in memory.

What a tree shows: the trace (agent, status, duration, tokens), its input, each iteration (model,
tokens, finish reasons, the text it wrote, its tool calls), tool calls outside any iteration, each
call's arguments, result and error, nested agent runs (to `_MAX_DEPTH`), the answer, the error and
the converter's warnings. Every text is clipped (`_MAX_TEXT`) and made inert by `text`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from evaltrace.collector import Trace
from evaltrace.collector.errors import InputError
from evaltrace.collector.traces.records import Iteration, ToolCall
from evaltrace.evaluators.results.report._html_page import text

_MAX_TEXT = 4000
"""Characters of one input, answer, argument or result shown (the span files have them whole)."""
_MAX_CALLS = 100
"""Tool calls and iterations shown per trace."""
_MAX_DEPTH = 3
"""Nested agent runs shown inside a tool call."""


def find_traces(files: Sequence[Path], wanted: Mapping[str, int], *, cache: bool) -> Iterator[Trace]:
    """The traces of `files` (resolved PATHs) whose ids are in `wanted`, stopping once all were found.

    Raises:
        InputError: a file cannot be read.
    """
    from evaltrace.collector.traces.cache import traces_of

    left = set(wanted)
    traces = traces_of(files, histories=_cached_histories(files) if cache else False, cache=cache)
    try:
        for trace in traces:
            if trace.trace_id in left:
                left.discard(trace.trace_id)
                yield trace
                if not left:
                    return
    finally:
        close = getattr(traces, "close", None)  # stopping early: let a cache build drop its unfinished table
        if close is not None:
            close()


def _cached_histories(files: Sequence[Path]) -> bool:
    """Whether the scoring cached these files with prompts (a judge ran): then reading that table is free."""
    from evaltrace.collector.traces.cache import cache_key, traces_folder

    key = cache_key(files, histories=True, shard=None)
    return key is not None and (traces_folder() / f"{key}.parquet").exists()


def write_trees(
    paths: Sequence[str],
    wanted: Mapping[str, int],
    cache: bool,
    write: Callable[[str], None],
    files: Sequence[Path] | None = None,
) -> tuple[int, str | None]:
    """Write a `<template id="trace-N">` per wanted trace found; returns how many, and why not all (or `None`).

    `files` are `paths` as the scoring resolved them; `None` (a report written afterwards): resolved here.
    """
    from evaltrace.collector.otlp.files.inputs import resolve_paths

    if not wanted:
        return 0, None
    if not paths:
        return 0, "the report names no span files (its inputs' paths), so there are no trace trees to show"
    found = 0
    try:
        for trace in find_traces(resolve_paths(paths) if files is None else files, wanted, cache=cache):
            write(f'<template id="trace-{wanted[trace.trace_id]}">{trace_tree(trace)}</template>\n')
            found += 1
    except (InputError, OSError) as exc:
        return found, f"the span files could not be read again for the trace trees: {exc}"
    if found < len(wanted):
        return found, f"{len(wanted) - found} of {len(wanted)} traces were not found in the span files"
    return found, None


def trace_tree(trace: Trace, depth: int = 0) -> str:
    """One trace as a nested list."""
    items = [f"<li>{_trace_line(trace)}</li>"]
    if trace.input is not None:
        items.append(_leaf("input", trace.input))
    calls = _calls_by_iteration(trace)
    items += [_iteration(it, calls.pop(it.index, []), depth) for it in trace.iterations[:_MAX_CALLS]]
    items += [_tool_call(call, depth) for group in calls.values() for call in group]
    shown = min(len(trace.iterations), _MAX_CALLS) + min(len(trace.tool_calls), _MAX_CALLS)
    hidden = len(trace.iterations) + len(trace.tool_calls) - shown
    if hidden > 0:
        items.append(f'<li class="note">{hidden} more iterations and tool calls not shown</li>')
    answer = trace.final_answer()
    items.append(_leaf("answer", answer) if answer is not None else '<li class="note">no answer recorded</li>')
    if trace.error:
        items.append(_leaf("error", trace.error, css="err"))
    items += [f'<li class="note">warning: {text(w, 500)}</li>' for w in trace.warnings[:20]]
    return f'<ul class="tree">{"".join(items)}</ul>'


def _trace_line(trace: Trace) -> str:
    parts = [f'<span class="kind">trace</span>{text(trace.trace_id)}']
    if trace.agent_name or trace.name:
        parts.append(f"agent {text(trace.agent_name or trace.name, 200)}")
    parts.append(f"status {text(trace.status)}")
    if trace.duration_seconds is not None:
        parts.append(f"{trace.duration_seconds:.3f} s")
    if trace.usage.total_tokens is not None:
        parts.append(f"{trace.usage.total_tokens:,} tokens")
    return " · ".join(parts)


def _calls_by_iteration(trace: Trace) -> dict[int | None, list[ToolCall]]:
    """The trace's tool calls (with their results) by the iteration that requested them, in order."""
    groups: dict[int | None, list[ToolCall]] = {}
    for call in trace.tool_calls[:_MAX_CALLS]:
        groups.setdefault(call.iteration, []).append(call)
    return groups


def _iteration(iteration: Iteration, calls: Sequence[ToolCall], depth: int) -> str:
    head = [f'<span class="kind">iteration {iteration.index}</span>']
    if iteration.model:
        head.append(f"model {text(iteration.model, 200)}")
    if iteration.usage.total_tokens is not None:
        head.append(f"{iteration.usage.total_tokens:,} tokens")
    if iteration.finish_reasons:
        head.append("finish " + text(", ".join(iteration.finish_reasons), 200))
    children = []
    said = iteration.output_text
    if said:
        children.append(_leaf("wrote", said))
    children += [_tool_call(call, depth) for call in calls]
    if iteration.error:
        children.append(_leaf("error", iteration.error, css="err"))
    nested = f'<ul class="tree">{"".join(children)}</ul>' if children else ""
    return f"<li>{' · '.join(head)}{nested}</li>"


def _tool_call(call: ToolCall, depth: int) -> str:
    state = "error" if call.error is not None else "ok"
    head = f'<span class="kind">tool call</span>{text(call.name, 200)} <span class="chip">{state}</span>'
    if call.handoff:
        head += ' <span class="chip">handoff</span>'
    children = [_leaf("arguments", _json(call.arguments), pre=True)]
    if call.result is not None:
        children.append(_leaf("result", _json(call.result), pre=True))
    if call.error is not None:
        children.append(_leaf("error", call.error, css="err"))
    if call.child is not None and call.handoff:  # the target's calls follow this one in the same list
        children.append(f'<li class="note">handed over to {text(call.child.agent_name or call.name, 200)}</li>')
    elif call.child is not None:
        if depth + 1 < _MAX_DEPTH:
            children.append(f"<li>{trace_tree(call.child, depth + 1)}</li>")
        else:
            children.append('<li class="note">nested agent run not shown (too deep)</li>')
    return f'<li>{head}<ul class="tree">{"".join(children)}</ul></li>'


def _leaf(kind: str, value: str, *, css: str = "", pre: bool = False) -> str:
    block = "pre" if pre else "reason"
    return (
        f'<li class="{css}"><span class="kind">{kind}</span><span class="{block}">{text(value, _MAX_TEXT)}</span></li>'
    )


def _json(value: object) -> str:
    if value is None:
        return "(not recorded)"
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, indent=1, default=str)
    except (TypeError, ValueError):
        return repr(value)
