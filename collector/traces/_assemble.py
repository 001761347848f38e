"""Assemble `Trace` records from a classified span tree.

What counts as what (the rules scorers rely on):

- A trace is built from the outermost agent or workflow span. Without one, from the tree's root,
  with the model calls under it as iterations. A root that is not an agent but holds exactly one
  outermost run (a test harness's wrapper span, the OpenAI-Agents bridge's per-trace wrapper)
  gives that run's trace; its attributes (`evaltrace.case_id`, ...) still count.
- A workflow span (a crew, a workflow, a root chain) that holds exactly one run and calls no model
  and no tool itself is a container, not a call: the trace is that run's, with the container's
  input, answer and error where the run's spans record none (CrewAI's crew around its agent).
- A tree of `create_agent` spans alone (an agent being defined, at build time) is no trace.
- A run is one agent span, or a handoff chain: sibling agent spans where each one after the first
  was handed the run by the one before it (that agent's scope holds a tool span whose result names
  it, as the bridge's `handoff to <agent>` span does). A handoff chain is ONE trace, because the
  user started one run and the SDK reports one result: `input` from the first agent, `output`
  from the last, iterations and usage over every agent's model calls, `tool_calls` in the order
  made across the chain (the handed-off agents' calls follow the handoff call, so trajectory and
  step scorers see them without `nested`), `agent_name` the first agent and `handoffs` the agents
  handed to. The handoff call's `child` is the run from the target agent on, and its `handoff`
  flag tells nested traversal that those calls are already in the list.
- Iterations are the model-call spans in the trace's scope, in start order. A model call inside
  another model call, or beside it with the same response id (two instrumentations of one
  request), is merged into it, and a model call inside a tool (a tool's own LLM use) is not an
  iteration of this agent, nor is a model-kind span that only prepared the request of the next
  one (`_model_calls`: one model call, one iteration, its usage counted once).
- Any other nested agent run (agent-as-tool, a workflow's sub-agents, an agent span inside
  another agent) is its own child trace, reachable from `ToolCall.child`: from the tool span it
  runs under, or else from a tool call of its own (named after the agent) placed where it
  started. Its spans never mix into the parent's iterations or usage.
- Traces nest at most `MAX_NESTED_RUNS` deep (a handoff counts a level): a deeper agent span is cut
  (its tool call kept without a child), a deeper handoff starts a run of its own, and the root's
  trace warns, so no walk over nested traces (scorers, writers, serializers) exhausts the stack.
- Usage is summed over this trace's iterations only; agent spans' aggregates are ignored.
- A framework's answer tool (smolagents' `final_answer`) called in the last model call is the
  run's answer, not a tool call (`conventions/answer_tool`); that model call stays an iteration.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Final

from evaltrace.collector.runfiles.spans import Span
from evaltrace.collector.traces import _attributes as A
from evaltrace.collector.traces._calls import tool_calls, tool_schemas
from evaltrace.collector.traces._fields import agent_name, iteration, new_trace, outcome, status
from evaltrace.collector.traces._lenient_json import within_depth
from evaltrace.collector.traces._model_calls import one_per_model_call
from evaltrace.collector.traces._normalized import NormalizedSpan, ToolExec
from evaltrace.collector.traces._pair_calls import ToolSpan
from evaltrace.collector.traces._spanutil import keys_may_contain
from evaltrace.collector.traces._tree import SpanTree
from evaltrace.collector.traces.conventions.answer_tool import take_answer_call
from evaltrace.collector.traces.records import Trace

_Visit = tuple[Span, NormalizedSpan | None, ToolSpan | None]  # a span, the model call and tool span it is in
_Attach = tuple[list[Span], ToolSpan | None]  # nested agent spans whose runs to attach, the tool span they ran under
MAX_NESTED_RUNS: Final = 32
"""Agent runs nested deeper than this are cut, with a warning (real agents nest a few levels)."""


@dataclass(slots=True)
class _Scope:
    """The spans one agent span owns: its model calls and tool executions, nested agents cut out."""

    llms: list[NormalizedSpan] = field(default_factory=list)
    tools: list[ToolSpan] = field(default_factory=list)
    members: list[NormalizedSpan] = field(default_factory=list)
    nested: dict[str, list[NormalizedSpan]] = field(default_factory=dict)
    """Model-kind spans inside each model call (by its span id): other instrumentations of it."""
    depth: int = 0  # how many traces enclose this one's


class Assembler:
    """Builds the traces of one span tree; `classified` maps span id to its `NormalizedSpan`."""

    def __init__(self, tree: SpanTree, classified: dict[str, NormalizedSpan], *, histories: bool = True) -> None:
        self.tree = tree
        self.classified = classified
        self.histories = histories
        """Whether iterations carry their prompts (`input_messages`); see `convert.convert_trace`."""
        self._scopes: dict[str, _Scope] = {}
        self._depths: dict[str, int] = {}  # nested agent span id -> the depth of its run
        self._cut = 0  # agent runs cut past `MAX_NESTED_RUNS` in the current root's trace
        self._split: set[str] = set()  # agents a chain handed to past there (grouping may run twice)
        # Each span's `evaltrace.*` attributes, found once (every root's trace and nested one reads them).
        self._contexts = {span_id: found for span_id, span in tree.spans.items() if (found := _context(span))}

    def traces(self) -> list[Trace]:
        """One trace per root of the tree (normally one), except roots that only define an agent."""
        traces = [self._trace_for_root(root) for root in self.tree.roots if not self._only_defines_agents(root)]
        if traces and self.tree.warnings:
            traces[0].warnings[:0] = self.tree.warnings
        return traces

    def _only_defines_agents(self, root: Span) -> bool:
        """A tree of GenAI `create_agent` spans alone records an agent being built, not a run of it.

        OpenLLMetry's LangChain instrumentation opens one when `create_agent` builds the graph, in a
        trace of its own, before any run: no input, no model call, nothing to score.
        """
        return all(s.attributes.get(A.OPERATION_NAME) == A.CREATE_AGENT_OPERATION for s in self.tree.walk(root))

    def _role(self, span: Span) -> str:
        return self.classified[span.span_id].role

    def _trace_for_root(self, root: Span) -> Trace:
        self._cut, self._split = 0, set()
        trace = self._root_trace(root)
        if self._cut:
            trace.warnings.append(
                f"{self._cut} agent run(s) nested more than {MAX_NESTED_RUNS} deep were cut (their "
                "spans are in the file; the tool calls that started them are kept without their runs)"
            )
        if self._split:
            trace.warnings.append(
                f"{len(self._split)} handoff(s) more than {MAX_NESTED_RUNS} deep were not followed: "
                "the agent handed to starts a run of its own"
            )
        return trace

    def _root_trace(self, root: Span) -> Trace:
        if self._role(root) == "agent":
            contained = self._contained_run(root)
            trace = self.build(root) if contained is None else self._container_trace(root, contained)
        else:
            outermost = self._outermost_agents(root)
            self._depths.update((agent.span_id, 1) for agent in outermost)  # as the root's scope will see them
            runs = self._runs(outermost)
            alone = len(runs) == 1 and not self._has_llm_outside(root, runs[0])
            trace = self._build_run(runs[0]) if alone else self._assemble([root])
        # Context attributes may sit anywhere in the OTel tree (a harness's wrapper span).
        walked = list(self.tree.walk(root))
        _apply_context(trace, [self.classified[s.span_id] for s in walked], self._contexts)
        trace.span_count = len([s for s in walked if s.span_id not in self.tree.placeholders])
        return trace

    def _contained_run(self, top: Span) -> list[Span] | None:
        """The one run inside a workflow span that calls no model and no tool itself (a crew around its agent)."""
        runs = self._runs(self._outermost_agents(top))
        if len(runs) != 1:
            return None
        inside = set().union(*(self.tree.subtree_ids(agent) for agent in runs[0]))
        if any(self._role(s) in ("llm", "tool") for s in self.tree.walk(top) if s.span_id not in inside):
            return None
        return runs[0]

    def _container_trace(self, container: Span, run: list[Span]) -> Trace:
        """The run's trace; the container says what the run's spans leave out (the prompt, the answer, an error)."""
        trace = self._build_run(run)
        outer = self.classified[container.span_id]
        first, last = self.classified[run[0].span_id].agent, self.classified[run[-1].span_id].agent
        # The container's record beats a guess from the model calls (`_fields.outcome`'s fallbacks):
        # CrewAI's model prompt wraps the task in a template; the crew records the task itself.
        if outer.agent is not None and outer.agent.input is not None and (first is None or first.input is None):
            trace.input = outer.agent.input
        if outer.agent is not None and outer.agent.output is not None and (last is None or last.output is None):
            trace.output = outer.agent.output
        if trace.error is None and outer.error is not None:
            trace.error, trace.status = outer.error, status(outer)
        return trace

    def _outermost_agents(self, span: Span) -> list[Span]:
        """The agent spans under `span` with no agent between, depth first (children in start order)."""
        found = []
        children, classified = self.tree.children, self.classified
        stack = list(reversed(children.get(span.span_id, ())))
        while stack:  # a stack, not a recursion per span: this runs over every span of every root
            child = stack.pop()
            if classified[child.span_id].role == "agent":
                found.append(child)
            else:
                stack.extend(reversed(children.get(child.span_id, ())))
        return found

    def _has_llm_outside(self, root: Span, run: list[Span]) -> bool:
        inside = set().union(*(self.tree.subtree_ids(agent) for agent in run))
        return any(self._role(s) == "llm" and s.span_id not in inside for s in self.tree.walk(root))

    # --- runs and handoffs ---------------------------------------------------------------------

    def _runs(self, agents: list[Span]) -> list[list[Span]]:
        """Group agent spans (in start order) into runs: an agent, then each agent it handed off to."""
        runs: list[list[Span]] = []
        for agent in agents:
            if runs and self._continues(runs[-1], agent):
                runs[-1].append(agent)
            else:
                runs.append([agent])
        return runs

    def _continues(self, run: list[Span], agent: Span) -> bool:
        """Whether `run` handed over to `agent` (a level deeper); past `MAX_NESTED_RUNS`, `agent` starts a run."""
        last = self._depths.get(run[0].span_id, 0) + len(run) - 1
        if self._handoff_span(run[-1], agent) is None:
            return False
        if last < MAX_NESTED_RUNS:
            self._depths[agent.span_id] = last + 1  # before its scope is first computed
            return True
        self._split.add(agent.span_id)
        return False

    def _handoff_span(self, agent: Span, target: Span) -> ToolSpan | None:
        """The tool span of `agent` that handed the run to its later sibling `target`, if any."""
        if agent.parent_span_id != target.parent_span_id or target.start_time_ns < agent.start_time_ns:
            return None
        name = agent_name(self.classified[target.span_id])
        for tool in reversed(self._scope(agent).tools):
            result = tool.normalized.tool.result if tool.normalized.tool else None
            if (tool.child is None or tool.handoff) and isinstance(result, str) and result.strip() == name:
                return tool
        return None

    def _build_run(self, run: list[Span]) -> Trace:
        """The trace of a run; each handoff call's child is the run from the target agent on."""
        trace = self._assemble(run[-1:])
        for k in range(len(run) - 2, -1, -1):
            handoff = self._handoff_span(run[k], run[k + 1])
            assert handoff is not None  # `_runs` chained these two agents through this span
            handoff.child, handoff.handoff = trace, True
            trace = self._assemble(run[k:])
        return trace

    # --- scope -------------------------------------------------------------------------------

    def _scope(self, top: Span) -> _Scope:
        """What `top` owns (computed once per span: handoff detection and assembly share it)."""
        known = self._scopes.get(top.span_id)
        if known is not None:
            return known
        head = self.classified[top.span_id]
        scope = _Scope(members=[head], depth=self._depths.get(top.span_id, 0))
        if head.role == "llm":
            scope.llms.append(head)
        self._collect(top, scope, in_llm=head if head.role == "llm" else None)
        scope.llms.sort(key=lambda n: (n.span.start_time_ns, n.span.span_id))
        scope.llms = one_per_model_call(scope.llms, scope.nested)  # each model call once
        scope.tools.sort(key=lambda t: (t.span.start_time_ns, t.span.span_id))
        self._scopes[top.span_id] = scope
        return scope

    def _collect(self, top: Span, scope: _Scope, *, in_llm: NormalizedSpan | None) -> None:
        """Gather `top`'s descendants into `scope`; `in_llm` is the model call they are inside, if any.

        Depth first, children in start order, each span's nested agents attached as runs once every
        other span under it is in. A stack, not a recursion: span nesting is recorded content.
        """
        stack: list[_Visit | _Attach] = []
        self._push_kids(top, scope, (in_llm, None), stack)
        while stack:
            entry = stack.pop()
            if len(entry) == 2:
                agents, owner = entry
                for run in self._runs(agents):
                    self._attach_run(run, scope, owner)
                continue
            span, inside_llm, tool = entry
            normalized = self.classified[span.span_id]
            scope.members.append(normalized)
            if normalized.role == "tool" and tool is None:
                tool = ToolSpan(normalized)
                scope.tools.append(tool)
            elif normalized.role == "llm" and tool is None and inside_llm is None:
                scope.llms.append(normalized)
                inside_llm = normalized
            elif normalized.role == "llm" and tool is None and inside_llm is not None:
                scope.nested.setdefault(inside_llm.span.span_id, []).append(normalized)
            self._push_kids(span, scope, (inside_llm, tool), stack)

    def _push_kids(
        self,
        span: Span,
        scope: _Scope,
        context: tuple[NormalizedSpan | None, ToolSpan | None],
        stack: list[_Visit | _Attach],
    ) -> None:
        """Push `span`'s children to visit in order, after its agents (within `MAX_NESTED_RUNS`) to attach."""
        agents: list[Span] = []
        others: list[_Visit] = []
        for child in self.tree.kids(span):
            if self.classified[child.span_id].role != "agent":
                others.append((child, *context))
            elif scope.depth >= MAX_NESTED_RUNS:  # the runs it holds are cut with it
                self._cut += sum(self.classified[s.span_id].role == "agent" for s in self.tree.walk(child))
            else:
                self._depths.setdefault(child.span_id, scope.depth + 1)  # a chain may have placed it deeper
                agents.append(child)
        if agents:
            stack.append((agents, context[1]))
        stack.extend(reversed(others))

    def _attach_run(self, run: list[Span], scope: _Scope, tool: ToolSpan | None) -> None:
        child = self._build_run(run)
        if tool is not None and tool.child is None:
            tool.child = child
            return
        # No tool span started it (workflow step, agent inside an agent): it gets a tool call of its own.
        head = self.classified[run[0].span_id]
        execution = ToolExec(name=agent_name(head), arguments=None, result=child.output)
        stand_in = NormalizedSpan(span=head.span, role="tool", convention=head.convention, tool=execution)
        stand_in.error = child.error
        scope.tools.append(ToolSpan(stand_in, child=child))

    # --- trace -------------------------------------------------------------------------------

    def build(self, top: Span) -> Trace:
        """The trace whose outermost span is `top`."""
        return self._assemble([top])

    def _assemble(self, tops: list[Span]) -> Trace:
        """The trace of `tops`: one span, or the agents of a handoff chain in order."""
        heads = [self.classified[top.span_id] for top in tops]
        scopes = [self._scope(top) for top in tops]
        if len(scopes) == 1:  # `_scope` sorted them already (the sort below is stable: the same order)
            llms, tools = list(scopes[0].llms), list(scopes[0].tools)
        else:
            llms = sorted((n for s in scopes for n in s.llms), key=lambda n: (n.span.start_time_ns, n.span.span_id))
            tools = sorted((t for s in scopes for t in s.tools), key=lambda t: (t.span.start_time_ns, t.span.span_id))
        members = [m for s in scopes for m in s.members]
        iterations = [iteration(i, n, self.histories) for i, n in enumerate(llms)]
        schemas = tool_schemas(heads, llms)
        warnings: list[str] = []
        calls, answer = take_answer_call(tool_calls(iterations, llms, tools, schemas, warnings), iterations)
        values = outcome(heads, iterations, llms)
        if answer is not None and (values["output"] is None or iterations[-1].output_text == values["output"]):
            values["output"] = answer  # the framework's answer tool, not the last reply's text, ended the run
        attributes: dict[str, Any] = {}
        values["conversation_id"], values["case_id"] = _context_of(members, self._contexts, attributes, None, None)
        for member in members:
            warnings.extend(member.warnings)
        values.update(
            iterations=iterations,
            tool_schemas=schemas,
            tool_calls=calls,
            attributes=attributes,
            warnings=warnings,
            convention="+".join(sorted({m.convention for m in members if m.role != "other"})) or None,
            span_count=len(members),
        )
        return new_trace(tops, heads, self.tree.placeholders, values)


def _context(span: Span) -> list[tuple[str, Any]]:
    """The `evaltrace.*` attributes of `span` a trace takes."""
    attributes = span.attributes
    keys = filter(_EVALTRACE_KEY, attributes) if keys_may_contain(attributes, A.EVALTRACE_PREFIX) else ()
    # A hostile file's deep value would break JSON output: such a value is left out.
    return [(k, attributes[k]) for k in keys if within_depth(attributes[k])]


def _apply_context(trace: Trace, members: list[NormalizedSpan], contexts: dict[str, list[tuple[str, Any]]]) -> None:
    """`_context_of` the members, into `trace` (its own values first)."""
    found = _context_of(members, contexts, trace.attributes, trace.conversation_id, trace.case_id)
    if found != (trace.conversation_id, trace.case_id):
        trace.conversation_id, trace.case_id = found


def _context_of(
    members: list[NormalizedSpan],
    contexts: dict[str, list[tuple[str, Any]]],
    attributes: dict[str, Any],
    conversation_id: str | None,
    case_id: str | None,
) -> tuple[str | None, str | None]:
    """Conversation id, case id and `evaltrace.*` attributes (`contexts` holds a span's); the outermost span wins.

    `attributes` takes the attributes it lacks; the ids given are kept unless `None`.
    """
    for normalized in members:
        if conversation_id is None and normalized.conversation_id:
            conversation_id = normalized.conversation_id
        found = contexts.get(normalized.span.span_id)
        if found:
            for key, value in found:
                attributes.setdefault(key, value)
    if conversation_id is None:
        # Wrapper spans (a test harness's or `evaltrace run`'s root) are not read by any extractor,
        # but a conversation id set on them still groups the run's turns.
        conversation_id = _raw_conversation_id(members)
    recorded = attributes.get(A.CASE_ID)
    if case_id is None and recorded is not None:
        case_id = str(recorded)
    return conversation_id, case_id


# C-level key filter: every span's attributes are scanned for `evaltrace.*` keys on each assembly.
_EVALTRACE_KEY = re.compile(re.escape(A.EVALTRACE_PREFIX)).match


def _raw_conversation_id(members: list[NormalizedSpan]) -> str | None:
    for normalized in members:
        for key in A.CONVERSATION_KEYS:
            value = normalized.span.attributes.get(key)
            if isinstance(value, str) and value:
                return value
    return None
