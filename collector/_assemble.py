"""Assemble `Trace` records from a classified span tree.

What counts as what (the rules scorers rely on):

- A trace is built from the outermost agent or workflow span. Without one, from the tree's root,
  with the model calls under it as iterations. A root that is not an agent but holds exactly one
  outermost agent (a test harness's wrapper span) gives that agent's trace; its attributes
  (`evaltrace.case_id`, ...) still count.
- Iterations are the model-call spans in the trace's scope, in start order. A model call inside
  another model call (two instrumentations of one request) or inside a tool (a tool's own LLM
  use) is not an iteration of this agent.
- A nested agent span (agent-as-tool, handoff, a workflow's sub-agents) is its own child trace,
  reachable from `ToolCall.child`: from the tool span it runs under, or else from a tool call of
  its own (named after the agent) placed where it started. Its spans never mix into the parent's
  iterations or usage.
- Usage is summed over this trace's iterations only; agent spans' aggregates are ignored.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evaltrace.collector import _attributes as A
from evaltrace.collector._match import Requested, ToolSpan, merge, pair, tool_results, usable_id
from evaltrace.collector._normalized import NormalizedSpan, ToolExec
from evaltrace.collector._spanutil import error_type, ns_to_datetime
from evaltrace.collector._tree import SpanTree
from evaltrace.collector.records import Iteration, ToolCall, ToolSchema, Trace, TraceStatus, Usage
from evaltrace.collector.spans import Span

Classify = Callable[[Span], NormalizedSpan]


@dataclass(slots=True)
class _Scope:
    """The spans one trace owns: its model calls and tool executions, nested agents cut out."""

    llms: list[NormalizedSpan] = field(default_factory=list)
    tools: list[ToolSpan] = field(default_factory=list)
    members: list[NormalizedSpan] = field(default_factory=list)


class Assembler:
    """Builds the traces of one span tree; `classified` maps span id to its `NormalizedSpan`."""

    def __init__(self, tree: SpanTree, classified: dict[str, NormalizedSpan]) -> None:
        self.tree = tree
        self.classified = classified

    def traces(self) -> list[Trace]:
        """One trace per root of the tree (normally one)."""
        traces = [self._trace_for_root(root) for root in self.tree.roots]
        if traces and self.tree.warnings:
            traces[0].warnings[:0] = self.tree.warnings
        return traces

    def _role(self, span: Span) -> str:
        return self.classified[span.span_id].role

    def _trace_for_root(self, root: Span) -> Trace:
        top = root if self._role(root) == "agent" else None
        if top is None:
            agents = self._outermost_agents(root)
            top = agents[0] if len(agents) == 1 and not self._has_llm_outside(root, agents[0]) else root
        trace = self.build(top)
        # Context attributes may sit anywhere in the OTel tree (a harness's wrapper span).
        everything = [self.classified[s.span_id] for s in self.tree.walk(root)]
        _apply_context(trace, everything)
        trace.span_count = len([s for s in self.tree.walk(root) if s.span_id not in self.tree.placeholders])
        return trace

    def _outermost_agents(self, span: Span) -> list[Span]:
        found = []
        for child in self.tree.kids(span):
            found += [child] if self._role(child) == "agent" else self._outermost_agents(child)
        return found

    def _has_llm_outside(self, root: Span, agent: Span) -> bool:
        inside = self.tree.subtree_ids(agent)
        return any(self._role(s) == "llm" and s.span_id not in inside for s in self.tree.walk(root))

    # --- scope -------------------------------------------------------------------------------

    def _collect(self, span: Span, scope: _Scope, *, in_llm: bool, tool: ToolSpan | None) -> None:
        for child in self.tree.kids(span):
            normalized = self.classified[child.span_id]
            if normalized.role == "agent":
                self._attach_agent(normalized, scope, tool)
                continue
            scope.members.append(normalized)
            if normalized.role == "tool" and tool is None:
                own = ToolSpan(normalized)
                scope.tools.append(own)
                self._collect(child, scope, in_llm=in_llm, tool=own)
                continue
            if normalized.role == "llm" and not in_llm and tool is None:
                scope.llms.append(normalized)
                self._collect(child, scope, in_llm=True, tool=tool)
                continue
            self._collect(child, scope, in_llm=in_llm, tool=tool)

    def _attach_agent(self, agent: NormalizedSpan, scope: _Scope, tool: ToolSpan | None) -> None:
        child = self.build(agent.span)
        if tool is not None and tool.child is None:
            tool.child = child
            return
        # No tool span started it (handoff, workflow step): it gets a tool call of its own.
        name = (agent.agent.name if agent.agent else None) or agent.span.name
        execution = ToolExec(name=name, arguments=None, result=child.output)
        stand_in = NormalizedSpan(span=agent.span, role="tool", convention=agent.convention, tool=execution)
        stand_in.error = child.error
        scope.tools.append(ToolSpan(stand_in, child=child))

    # --- trace -------------------------------------------------------------------------------

    def build(self, top: Span) -> Trace:
        """The trace whose outermost span is `top`."""
        head = self.classified[top.span_id]
        scope = _Scope(members=[head])
        if head.role == "llm":
            scope.llms.append(head)
        self._collect(top, scope, in_llm=head.role == "llm", tool=None)
        scope.llms.sort(key=lambda n: (n.span.start_time_ns, n.span.span_id))
        scope.tools.sort(key=lambda t: (t.span.start_time_ns, t.span.span_id))
        trace = Trace(
            trace_id=top.trace_id,
            root_span_id=top.span_id if top.span_id not in self.tree.placeholders else None,
            name=top.name,
            agent_name=head.agent.name if head.agent else None,
            start_time=ns_to_datetime(top.start_time_ns),
            end_time=ns_to_datetime(top.end_time_ns),
            run_id=top.run_id,
            service_name=top.service_name,
        )
        iterations = [_iteration(i, n) for i, n in enumerate(scope.llms)]
        schemas = _schemas(head, scope.llms)
        trace.iterations = iterations
        trace.tool_schemas = schemas
        trace.tool_calls = _tool_calls(iterations, scope.tools, schemas, trace.warnings)
        _fill_outcome(trace, head, iterations)
        _apply_context(trace, scope.members)
        for member in scope.members:
            trace.warnings += member.warnings
        trace.convention = "+".join(sorted({m.convention for m in scope.members if m.role != "other"})) or None
        trace.span_count = len(scope.members)
        return trace


def _iteration(index: int, normalized: NormalizedSpan) -> Iteration:
    llm = normalized.llm
    assert llm is not None
    span = normalized.span
    return Iteration(
        index=index,
        span_id=span.span_id,
        model=llm.model,
        provider=llm.provider,
        input_messages=llm.input_messages,
        output_messages=llm.output_messages,
        tool_calls=[c.model_copy(update={"iteration": index}) for c in llm.tool_calls],
        finish_reasons=list(llm.finish_reasons),
        usage=llm.usage,
        start_time=ns_to_datetime(span.start_time_ns),
        end_time=ns_to_datetime(span.end_time_ns),
        error=normalized.error,
    )


def _schemas(head: NormalizedSpan, llms: list[NormalizedSpan]) -> list[ToolSchema]:
    found: dict[str, ToolSchema] = {}
    sources = [head.agent.tool_schemas if head.agent else []] + [n.llm.tool_schemas for n in llms if n.llm]
    for schemas in sources:
        for schema in schemas:
            found.setdefault(schema.name, schema)
    return list(found.values())


def _tool_calls(
    iterations: list[Iteration], tools: list[ToolSpan], schemas: list[ToolSchema], warnings: list[str]
) -> list[ToolCall]:
    requested = [Requested(c, it.index, pos) for it in iterations for pos, c in enumerate(it.tool_calls)]
    matches = pair(requested, tools)
    by_id, by_name = tool_results([it.input_messages for it in iterations])
    keyed: list[tuple[tuple[int, int, int], ToolCall]] = []
    matched_requests = {r: t for t, r in matches.items()}
    for r_index, req in enumerate(requested):
        t_index = matched_requests.get(r_index)
        call = merge(req, tools[t_index] if t_index is not None else None)
        keyed.append(((req.iteration, 0, req.position), call))
    starts = [it.start_time for it in iterations]
    for t_index, tool in enumerate(tools):
        if t_index in matches:
            continue
        started = ns_to_datetime(tool.span.start_time_ns)
        before = [i for i, s in enumerate(starts) if s is not None and started is not None and s <= started]
        keyed.append(((before[-1] if before else -1, 1, tool.span.start_time_ns), merge(None, tool)))
    keyed.sort(key=lambda item: item[0])
    calls = [call for _, call in keyed]
    _fill_results(calls, by_id, by_name)
    _normalise_arguments(calls, schemas, warnings)
    for iteration in iterations:
        iteration.tool_calls = [c for c in calls if c.iteration == iteration.index]
    return calls


def _fill_results(calls: list[ToolCall], by_id: dict[str, Any], by_name: dict[str, list[Any]]) -> None:
    used: dict[str, int] = {}
    for call in calls:
        key = usable_id(call.call_id)
        if key is not None and key in by_id:
            call.result = by_id[key] if call.result is None else call.result
            continue
        queue = by_name.get(call.name, [])
        position = used.get(call.name, 0)
        if position < len(queue):
            used[call.name] = position + 1
            call.result = queue[position] if call.result is None else call.result


def _normalise_arguments(calls: list[ToolCall], schemas: list[ToolSchema], warnings: list[str]) -> None:
    """A bare value where the tool's schema names exactly one parameter becomes `{param: value}`."""
    by_name = {s.name: s for s in schemas}
    for call in calls:
        args = call.arguments
        if args is None or isinstance(args, dict) or call.arguments_truncated:
            continue
        schema = by_name.get(call.name)
        properties = (schema.parameters or {}).get("properties") if schema else None
        if isinstance(properties, dict) and len(properties) == 1:
            call.arguments = {next(iter(properties)): args}
        elif isinstance(args, str):
            warnings.append(f"tool call {call.name!r}: arguments are text, not a JSON object")


def _fill_outcome(trace: Trace, head: NormalizedSpan, iterations: list[Iteration]) -> None:
    agent = head.agent
    trace.input = agent.input if agent and agent.input is not None else _first_user_text(iterations)
    last = iterations[-1].output_text if iterations else None
    trace.output = agent.output if agent and agent.output is not None else last
    trace.error = head.error
    trace.usage = sum((it.usage for it in iterations), Usage())
    trace.models = list(dict.fromkeys(it.model for it in iterations if it.model))
    trace.status = _status(head)


def _first_user_text(iterations: list[Iteration]) -> str | None:
    for iteration in iterations[:1]:
        for message in reversed(iteration.input_messages or []):
            if message.role == "user" and message.text is not None:
                return message.text
    return None


def _status(head: NormalizedSpan) -> TraceStatus:
    if head.error is None:
        return "success"
    kind = (error_type(head.span) or "") + " " + head.error
    return "timeout" if "timeout" in kind.lower() or "timedout" in kind.lower() else "error"


def _apply_context(trace: Trace, members: list[NormalizedSpan]) -> None:
    """Conversation id, case id and `evaltrace.*` attributes; the outermost span wins on conflicts."""
    for normalized in members:
        if trace.conversation_id is None and normalized.conversation_id:
            trace.conversation_id = normalized.conversation_id
        for key, value in normalized.span.attributes.items():
            if key.startswith(A.EVALTRACE_PREFIX):
                trace.attributes.setdefault(key, value)
    case_id = trace.attributes.get(A.CASE_ID)
    if trace.case_id is None and case_id is not None:
        trace.case_id = str(case_id)
