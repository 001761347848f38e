"""Judge scorers: questions a rule cannot settle, answered by an LLM judge as pass/fail labels.

Every judge scorer is async (`ascore`) and asks the session from `current_judge()` (the engine
opens one per run; outside a session a scorer opens its own from the environment). A judge that
is not set up (no model, a refused connection or key) stops the run when the session opens or
closes (see `judge/session.py`); a verdict that cannot be obtained during a run (timeouts, 429/5xx,
replies that are not verdicts, request budget used up) becomes an error result: `passed=False`
with `error` set, never a pass.
A scorer that lacks what it needs in the trace (no answer, input or arguments recorded) says what
is missing and how to record it: as a check written in a spec it fails, as a scorer used on its
own it does not apply (`passed=None`). Nothing to check at all (no tool call made, nothing failed
to recover from) passes a spec check.

Config fields common to all: `samples` (majority vote over that many verdicts per question,
default the judge's `samples` setting; the agreement such as `2/3` is in the reason and details).
"""

from __future__ import annotations

import asyncio
import json
from abc import abstractmethod
from collections.abc import Sequence
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, Field

from evaltrace.collector.traces.records import Trace
from evaltrace.evaluators.scoring.judge import prompts
from evaltrace.evaluators.scoring.judge.data import (
    argument_context,
    has_arguments,
    has_reasoning,
    reasoning_data,
    schema_data,
    steps_data,
    user_input,
)
from evaltrace.evaluators.scoring.judge.prompts import RenderedPrompt, render
from evaltrace.evaluators.scoring.judge.session import (
    JudgeError,
    JudgeOutcome,
    JudgeSession,
    current_judge,
    judge_session,
)
from evaltrace.evaluators.scoring.judge.settings import JudgeSetupError
from evaltrace.evaluators.scoring.scorers.base import Score, Scorer
from evaltrace.evaluators.scoring.scorers.evidence import (
    RECORD_HINT,
    arguments_not_recorded,
    no_answer,
    no_input,
    unrecorded_arguments,
)
from evaltrace.evaluators.scoring.scorers.registry import register

ReasoningAspect = Literal["coherence", "relevance", "efficiency", "error_recovery"]
_DEFAULT_ASPECTS: tuple[ReasoningAspect, ...] = ("coherence", "relevance", "error_recovery")


class JudgeScorer(Scorer):
    """Base of the judge scorers: session lookup, majority vote, error results."""

    uses_judge: ClassVar[bool] = True
    version: ClassVar[int] = 2  # 2: one-object verdicts only; unrecorded evidence fails a spec check
    reads_histories: ClassVar[bool] = False  # the prompts quote steps and answers, never `input_messages`

    samples: int | None = Field(default=None, ge=1)
    """Verdicts per question for a majority vote; default the judge's `samples` setting."""

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        """Synchronous use outside an event loop (scripts, notebooks without a loop)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.ascore(trace, case))
        raise RuntimeError(f"{self.name} is a judge scorer: inside an event loop, await ascore() instead")

    async def ascore(self, trace: Trace, case: Any | None = None) -> Score:
        """Judge one trace in the current judge session (or a session of its own)."""
        session = current_judge()
        if session is not None:
            return await self._guarded(session, trace, case)
        try:
            async with judge_session() as own:
                return await self._guarded(own, trace, case)
        except JudgeSetupError as exc:
            # A one-off call has no run to stop: the setup problem is this result's error.
            return Score(scorer=self.name, passed=False, reason=f"judge error: {exc}", error=type(exc).__name__)

    async def _guarded(self, session: JudgeSession, trace: Trace, case: Any | None) -> Score:
        try:
            return await self.judge(session, trace, case)
        except JudgeError as exc:
            return Score(
                scorer=self.name,
                passed=False,
                reason=f"judge error: {exc}",
                error=type(exc).__name__,
                details={"judge": {"model": session.settings.model, "error": str(exc)}},
            )

    @abstractmethod
    async def judge(self, session: JudgeSession, trace: Trace, case: Any | None) -> Score:
        """Build the prompts, ask the judge, and turn the verdicts into a `Score`."""

    async def ask(self, session: JudgeSession, prompt: RenderedPrompt) -> JudgeOutcome:
        """One question, with this scorer's majority vote."""
        return await session.classify(prompt, self.samples)

    async def ask_all(self, session: JudgeSession, rendered: Sequence[RenderedPrompt]) -> list[JudgeOutcome]:
        """Several questions at once; the first failure fails them all (no partial verdict)."""
        results = await asyncio.gather(*(self.ask(session, p) for p in rendered), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return [r for r in results if isinstance(r, JudgeOutcome)]

    def verdict(self, session: JudgeSession, outcome: JudgeOutcome, **details: Any) -> Score:
        """The `Score` of a single-question scorer."""
        reason = outcome.reason
        if outcome.samples > 1:
            reason = f"{reason} (judge samples agree {outcome.agreement_text})"
        yes = outcome.agreement if outcome.passed else outcome.samples - outcome.agreement
        return self.result(
            outcome.passed, yes / outcome.samples, reason, judge=_outcome_details(session, outcome), **details
        )


def _outcome_details(session: JudgeSession, outcome: JudgeOutcome) -> dict[str, Any]:
    return {
        "model": session.settings.model,
        "template": outcome.template,
        "template_version": outcome.template_version,
        "samples": outcome.samples,
        "agreement": outcome.agreement_text,
        "cached": outcome.cached,
    }


def _many_details(session: JudgeSession, outcomes: Sequence[JudgeOutcome]) -> dict[str, Any]:
    return {
        "model": session.settings.model,
        "questions": len(outcomes),
        "cached": sum(o.cached for o in outcomes),
        "samples": outcomes[0].samples if outcomes else 0,
    }


def _final_answer_or_score(scorer: JudgeScorer, trace: Trace) -> str | Score:
    # No answer: a failed run fails (there is nothing that could satisfy the check); otherwise
    # the content was just not captured, and the check does not apply.
    answer = trace.final_answer()
    if answer is not None:
        return answer
    if trace.error is not None or trace.status in ("error", "timeout"):
        return scorer.result(False, 0.0, f"the run ended without an answer ({trace.error or trace.status})")
    return scorer.missing(no_answer(trace))


def _as_list(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _non_empty(value: str | list[str]) -> str | list[str]:
    if not [item for item in _as_list(value) if item.strip()]:
        raise ValueError("must name at least one non-empty criterion")
    return value


Rubric = Annotated[str | list[str], AfterValidator(_non_empty)]


@register
class TaskCompletion(JudgeScorer):
    """Pass when the agent completed every task (default: the user's request) within the constraints."""

    name: ClassVar[str] = "task_completion"

    tasks: list[str] | None = None
    """Tasks the run must complete; when omitted, the task is the user's request (case or trace input)."""
    constraints: str | list[str] | None = None
    """Conditions the run must respect while doing so (budget, no booking without confirmation, ...)."""

    async def judge(self, session: JudgeSession, trace: Trace, case: Any | None) -> Score:
        """Ask whether every task was completed."""
        request = user_input(trace, case)
        if not self.tasks and request is None:
            return self.missing(f"no task to judge: no `tasks` configured and {no_input(trace)}")
        criteria = [f"Task: {task}" for task in self.tasks or []]
        criteria += [f"Constraint: {c}" for c in _as_list(self.constraints or [])]
        data = {
            "user_input": request,
            "tool_calls": steps_data(trace),
            "final_answer": trace.final_answer(),
            "run_error": trace.error,
        }
        outcome = await self.ask(session, render(prompts.TASK_COMPLETION, criteria, data))
        return self.verdict(session, outcome)


@register
class ArgumentHallucination(JudgeScorer):
    """Pass when the tool calls' argument values come from the user's input or earlier tool results.

    One verdict per tool call with arguments (calls without captured arguments are skipped), so the
    report names the hallucinated calls and an unchanged call prefix is served from the cache.
    """

    name: ClassVar[str] = "argument_hallucination"

    threshold: float = Field(default=1.0, ge=0, le=1)
    """Fraction of judged calls that must be grounded for a pass (default: all of them)."""

    async def judge(self, session: JudgeSession, trace: Trace, case: Any | None) -> Score:
        """Ask about each call's arguments."""
        if not trace.tool_calls:
            if self.spec_check:
                return self.result(True, 1.0, "no tool call was made: no argument could be invented")
            return self.result(None, None, "the trace has no tool calls")
        request = user_input(trace, case)
        if request is None:
            return self.missing(f"nothing to derive arguments from: {no_input(trace)}")
        indexes = [i for i, call in enumerate(trace.tool_calls) if has_arguments(call)]
        if not indexes:
            unrecorded = unrecorded_arguments(trace.tool_calls)
            if unrecorded:
                return self.missing(arguments_not_recorded(unrecorded))
            if self.spec_check:
                return self.result(True, 1.0, "no tool call took arguments: no argument could be invented")
            return self.result(None, None, "no tool call took arguments")
        rendered = [
            render(prompts.ARGUMENT_HALLUCINATION, [], {"user_input": request, **argument_context(trace, i)})
            for i in indexes
        ]
        outcomes = await self.ask_all(session, rendered)
        calls: list[dict[str, Any]] = [
            {"index": i, "name": trace.tool_calls[i].name, "hallucinated": not o.passed, "reason": o.reason}
            for i, o in zip(indexes, outcomes, strict=True)
        ]
        bad = [c for c in calls if c["hallucinated"]]
        value = 1 - len(bad) / len(calls)
        reason = f"{len(calls) - len(bad)} of {len(calls)} tool calls have grounded arguments"
        if bad:
            reason += "; hallucinated: " + "; ".join(f"#{c['index'] + 1} {c['name']}: {c['reason']}" for c in bad)
        return self.result(value >= self.threshold, value, reason, calls=calls, judge=_many_details(session, outcomes))


@register
class SemanticOutput(JudgeScorer):
    """Pass when the final answer satisfies a rubric (Timbal's `semantic` output validator)."""

    name: ClassVar[str] = "semantic_output"

    rubric: Rubric
    """One sentence, or several that must all hold: "Should give the temperature in Celsius"."""

    async def judge(self, session: JudgeSession, trace: Trace, case: Any | None) -> Score:
        """Ask whether the answer meets the rubric."""
        answer = _final_answer_or_score(self, trace)
        if isinstance(answer, Score):
            return answer
        data = {"user_input": user_input(trace, case), "final_answer": answer}
        outcome = await self.ask(session, render(prompts.SEMANTIC_OUTPUT, _as_list(self.rubric), data))
        return self.verdict(session, outcome)


@register
class SemanticSteps(JudgeScorer):
    """Pass when the tool-call trajectory satisfies a rubric (Timbal's `semantic` steps validator)."""

    name: ClassVar[str] = "semantic_steps"

    rubric: Rubric
    """One sentence, or several: "Should search before answering", "Must not call any tool"."""

    async def judge(self, session: JudgeSession, trace: Trace, case: Any | None) -> Score:
        """Ask whether the steps meet the rubric (no tool calls is a trajectory too)."""
        data = {"user_input": user_input(trace, case), "tool_calls": steps_data(trace), "run_error": trace.error}
        outcome = await self.ask(session, render(prompts.SEMANTIC_STEPS, _as_list(self.rubric), data))
        return self.verdict(session, outcome)


@register
class AnswerMatch(JudgeScorer):
    """Pass when the final answer means the same as the expected answer (semantic equivalence)."""

    name: ClassVar[str] = "answer_match"

    expected: str | None = None
    """The expected answer; when omitted, the case's `expected_output`."""

    async def judge(self, session: JudgeSession, trace: Trace, case: Any | None) -> Score:
        """Ask whether actual and expected answers are equivalent."""
        expected = self.expected if self.expected is not None else getattr(case, "expected_output", None)
        if expected is None:
            return self.result(None, None, "no expected answer (set `expected` or the case's expected_output)")
        if not isinstance(expected, str):
            expected = json.dumps(expected, ensure_ascii=False, sort_keys=True, default=str)
        answer = _final_answer_or_score(self, trace)
        if isinstance(answer, Score):
            return answer
        data = {"question": user_input(trace, case), "actual_answer": answer}
        outcome = await self.ask(session, render(prompts.ANSWER_MATCH, [f"Expected answer: {expected}"], data))
        return self.verdict(session, outcome)


@register
class ReasoningQuality(JudgeScorer):
    """Pass when every requested aspect of the agent's path passes, each judged as its own label.

    `error_recovery` only applies to runs where a model call, a tool call or the run failed.
    """

    name: ClassVar[str] = "reasoning_quality"

    aspects: list[ReasoningAspect] = Field(default_factory=lambda: list(_DEFAULT_ASPECTS), min_length=1)
    """Aspects to judge: coherence, relevance, efficiency, error_recovery."""

    async def judge(self, session: JudgeSession, trace: Trace, case: Any | None) -> Score:
        """Ask one question per applicable aspect."""
        if not has_reasoning(trace):
            return self.missing(f"the trace records neither model replies nor tool calls; {RECORD_HINT}")
        aspects = [a for a in dict.fromkeys(self.aspects) if a != "error_recovery" or trace.has_error()]
        if not aspects:
            if self.spec_check:
                return self.result(True, 1.0, "nothing failed in this run: no error to recover from")
            return self.result(None, None, "error_recovery only applies to runs where something failed")
        data = {
            "user_input": user_input(trace, case),
            "steps": reasoning_data(trace),
            "final_answer": trace.final_answer(),
            "run_error": trace.error,
        }
        outcomes = await self.ask_all(session, [render(prompts.REASONING_ASPECTS[a], [], data) for a in aspects])
        per_aspect = {a: {"passed": o.passed, "reason": o.reason} for a, o in zip(aspects, outcomes, strict=True)}
        failed = [a for a, o in zip(aspects, outcomes, strict=True) if not o.passed]
        value = 1 - len(failed) / len(aspects)
        reason = (
            "failed: " + "; ".join(f"{a}: {per_aspect[a]['reason']}" for a in failed)
            if failed
            else f"passed: {', '.join(aspects)}"
        )
        return self.result(not failed, value, reason, aspects=per_aspect, judge=_many_details(session, outcomes))


@register
class ToolDescriptionQuality(JudgeScorer):
    """Pass when the tool definitions offered to the model are clear (the judged part of tool reliability).

    One verdict per tool; since definitions rarely change between runs, the cache answers most of them.
    """

    name: ClassVar[str] = "tool_description_quality"

    tools: list[str] | None = None
    """Only judge these tools (default: every tool definition recorded in the trace)."""
    criteria: list[str] = Field(default_factory=list)
    """Extra requirements, e.g. "Mentions the units of every numeric parameter"."""
    threshold: float = Field(default=1.0, ge=0, le=1)
    """Fraction of judged tools that must pass (default: all of them)."""

    async def judge(self, session: JudgeSession, trace: Trace, case: Any | None) -> Score:
        """Ask about each tool definition."""
        schemas = {s.name: s for s in trace.tool_schemas if self.tools is None or s.name in self.tools}
        if not schemas:
            return self.missing(f"the trace records no (selected) tool definitions; {RECORD_HINT}")
        names = sorted(schemas)
        rendered = [render(prompts.TOOL_DESCRIPTION, self.criteria, schema_data(schemas[n])) for n in names]
        outcomes = await self.ask_all(session, rendered)
        per_tool = {n: {"passed": o.passed, "reason": o.reason} for n, o in zip(names, outcomes, strict=True)}
        failed = [n for n in names if not per_tool[n]["passed"]]
        value = 1 - len(failed) / len(names)
        reason = f"{len(names) - len(failed)} of {len(names)} tool definitions are clear"
        if failed:
            reason += "; unclear: " + "; ".join(f"{n}: {per_tool[n]['reason']}" for n in failed)
        return self.result(
            value >= self.threshold, value, reason, tools=per_tool, judge=_many_details(session, outcomes)
        )
