"""Columnar forms of `output`, `steps`, `outcome` and `cost`: the run's answer, steps, ending and price.

Answers, like every form, only for a sure pass with the reference's exact `Score` (see `forms.py`),
from the row's columns: the answer is the `output` column, else the last model reply's text (the
model calls' `output_messages`, as `Trace.final_answer`); tool arguments and results are the calls'
JSON text, decoded as the table decoder decodes them.

- `output`: every configured check holds on the answer (a `json_schema` check reads a JSON answer
  inside a code fence, as the reference does).
- `steps`: every required step has its own matching call, no call matches or may match (same name,
  arguments not recorded) a forbidden step, every regex finds a call. Nested agents' calls (with
  `nested`) are in other rows: left to the reference.
- `outcome`: the run's outcome, classified from the columns, is the expected one.
- `cost`: every model call priced from its model and usage, the sum within `max_usd` (with
  `unknown_model: skip`, calls that cannot be priced are left out as the reference leaves them).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, cast

from evaltrace.collector.traces.arguments import arguments_match
from evaltrace.collector.traces.records import Trace, Usage
from evaltrace.evaluators.scoring.columnar.calls import RowCalls
from evaltrace.evaluators.scoring.scorers.arguments import ArgumentMatch, ExpectedCall, clip, max_bipartite_matching
from evaltrace.evaluators.scoring.scorers.base import Score, Scorer
from evaltrace.evaluators.scoring.scorers.limits import Cost
from evaltrace.evaluators.scoring.scorers.outcome import CUT_SHORT, cut_short
from evaltrace.evaluators.scoring.scorers.output import Outcome, Output, StepRegex, Steps, strip_code_fence
from evaltrace.evaluators.scoring.scorers.prices import DEFAULT_PRICES, ModelPrice, call_cost, find_price
from evaltrace.evaluators.scoring.scorers.tools import schema_errors


def final_answer(row: RowCalls) -> str | None:
    """`Trace.final_answer()` from the columns: the output, else the last model reply's text."""
    output = row.value("output")
    if output is not None:
        return cast("str", output)
    replies = cast("list[list[dict[str, Any]] | None]", row.iteration_values("output_messages"))
    for messages in reversed(replies):
        texts = [text for text in map(_message_text, messages or []) if text is not None]
        if texts:
            return "\n".join(texts)
    return None


def _message_text(message: dict[str, Any]) -> str | None:
    """`Message.text`: the text parts joined by newlines, or `None` without one."""
    texts = [part["text"] for part in message["parts"] if part["type"] == "text" and part["text"] is not None]
    return "\n".join(texts) if texts else None


# --- output ---------------------------------------------------------------------------------------


def output_form(scorer: Output, row: RowCalls, trace: Trace) -> Score | None:
    """The passing `Score` of `output` when an answer was recorded and every check holds, else `None`."""
    checks = _output_checks(scorer)
    if not checks:
        return None
    text = final_answer(row)
    if text is None or not _output_holds(scorer, text):
        return None
    return scorer.result(True, 1.0, f"All {checks} output checks passed.", failures=[])


def _as_list(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def _output_checks(scorer: Output) -> int:
    lists = (_as_list(scorer.contains), _as_list(scorer.not_contains), _as_list(scorer.regex))
    return sum(map(len, lists)) + (scorer.equals is not None) + (scorer.json_schema is not None)


def _output_holds(scorer: Output, text: str) -> bool:
    """Whether every configured check holds on `text` (the reference's `_failures` finds none)."""

    def fold(value: str) -> str:
        return value if scorer.case_sensitive else value.casefold()

    folded = fold(text)
    if any(fold(s) not in folded for s in _as_list(scorer.contains)):
        return False
    if any(fold(s) in folded for s in _as_list(scorer.not_contains)):
        return False
    flags = 0 if scorer.case_sensitive else re.IGNORECASE
    if any(re.search(pattern, text, flags) is None for pattern in _as_list(scorer.regex)):
        return False
    if scorer.equals is not None and " ".join(folded.split()) != " ".join(fold(scorer.equals).split()):
        return False
    return scorer.json_schema is None or _valid_json(scorer.json_schema, text)


def _valid_json(schema: dict[str, Any], text: str) -> bool:
    """Whether `text` (inside its code fence, if one wraps it) parses as JSON valid against `schema`."""
    try:
        data = json.loads(strip_code_fence(text))
    except (ValueError, RecursionError):
        return False
    return not schema_errors(schema, data)


# --- steps ----------------------------------------------------------------------------------------


class _Calls:
    """A row's calls as `steps` reads them: names, arguments and results decoded on first use."""

    def __init__(self, row: RowCalls) -> None:
        self.row = row
        self.names = row.names
        self._arguments: list[Any] | None = None
        self._results: list[Any] | None = None

    @property
    def arguments(self) -> list[Any]:
        """Each call's arguments as `ToolCall.arguments` (the table's JSON text decoded)."""
        if self._arguments is None:
            self._arguments = [_decode(text) for text in self.row.arguments]
        return self._arguments

    @property
    def results(self) -> list[Any]:
        """Each call's result as `ToolCall.result`."""
        if self._results is None:
            self._results = [_decode(cast("str | None", text)) for text in self.row.call_values("result_json")]
        return self._results

    def unrecorded(self, j: int) -> bool:
        """Whether call `j`'s arguments were not recorded (null text: no need to decode them)."""
        return self.row.arguments[j] is None and not self.truncated[j]

    @property
    def truncated(self) -> list[bool]:
        """Whether each call's arguments were cut when recorded."""
        return cast("list[bool]", self.row.call_values("arguments_truncated"))


def _decode(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def steps_form(scorer: Steps, row: RowCalls, trace: Trace) -> Score | None:
    """The passing `Score` of `steps` when every step check holds on the row's calls, else `None`."""
    total = len(scorer.contains) + len(scorer.not_contains) + len(scorer.regex)
    if not total or (scorer.nested and _starts_nested_runs(row)):
        return None
    calls = _Calls(row)
    if not _required_made(scorer, calls) or _forbidden_possible(scorer, calls):
        return None
    if not all(_regex_found(item, calls) for item in scorer.regex):
        return None
    return scorer.result(True, 1.0, f"All {total} step checks passed.", failures=[])


def _starts_nested_runs(row: RowCalls) -> bool:
    """Whether a call started a nested agent whose calls `nested` adds (a handoff's are in the row already)."""
    handoffs = row.call_values("handoff")
    return any(
        child is not None and not handoff for child, handoff in zip(row.call_values("child_row"), handoffs, strict=True)
    )


def _matches(want: ExpectedCall, calls: _Calls, j: int, match: ArgumentMatch) -> bool:
    """`call_matches(want, call j, match)` on the columns."""
    if want.name != calls.names[j]:
        return False
    if want.arguments is None:
        return True
    rules = match.for_tool(want.name)
    if rules.mode == "ignore":
        return True
    return arguments_match(want.arguments, calls.arguments[j], calls.truncated[j], rules)


def _required_made(scorer: Steps, calls: _Calls) -> bool:
    """Whether every `contains` step can be paired with a call of its own."""
    want = scorer.contains
    if not want:
        return True
    pairs = max_bipartite_matching(
        len(want), len(calls.names), lambda i, j: _matches(want[i], calls, j, scorer.arguments)
    )
    return len(pairs) == len(want)


def _forbidden_possible(scorer: Steps, calls: _Calls) -> bool:
    """Whether a call matches a `not_contains` step, or may (its tool's arguments were not recorded)."""
    for pattern in scorer.not_contains:
        for j, name in enumerate(calls.names):
            if _matches(pattern, calls, j, scorer.arguments):
                return True
            if pattern.arguments is not None and name == pattern.name and calls.unrecorded(j):
                return True
    return False


def _regex_found(item: StepRegex, calls: _Calls) -> bool:
    """Whether some call has every field `item` gives a pattern for, each matching (`StepRegex.matches`)."""
    patterns = [(field, pattern) for field, pattern in _regex_fields(item) if pattern is not None]
    for j in range(len(calls.names)):
        if all(_search(pattern, _step_text(calls, field, j)) for field, pattern in patterns):
            return True
    return False


def _regex_fields(item: StepRegex) -> tuple[tuple[str, str | None], ...]:
    return (("name", item.name), ("arguments", item.arguments), ("result", item.result))


def _search(pattern: str, text: str | None) -> bool:
    return text is not None and re.search(pattern, text) is not None


def _step_text(calls: _Calls, field: str, j: int) -> str | None:
    """A call's field as `steps` searches it: text as it is, structured values as JSON text."""
    if field == "name":
        return calls.names[j]
    value = calls.arguments[j] if field == "arguments" else calls.results[j]
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


# --- outcome --------------------------------------------------------------------------------------


def outcome_form(scorer: Outcome, row: RowCalls, trace: Trace) -> Score | None:
    """The passing `Score` of `outcome` when the run's outcome is the expected one, else `None`."""
    actual, evidence = _row_outcome(row)
    if actual != scorer.expected:
        return None
    return scorer.result(True, 1.0, f"Outcome {actual} (as expected): {evidence}.", outcome=actual)


def _row_outcome(row: RowCalls) -> tuple[str, str]:
    """`trace_outcome` from the columns: the outcome and its evidence."""
    status, error = cast("str", row.value("status")), cast("str | None", row.value("error"))
    if status == "timeout":
        return "timeout", f"the run timed out{f': {error}' if error else ''}"
    if status == "error" or error:
        return "error", f"the run raised: {error or 'status error'}"
    answer = final_answer(row)
    problem = _failure_evidence(row, answer)
    if problem:
        return "failure", f"the run returned but {problem}"
    if answer is None:
        return "unknown", "no answer was recorded"  # never expected: the reference gives the reason
    return "success", "the run returned normally"


def _failure_evidence(row: RowCalls, answer: str | None) -> str | None:
    """Why a run that returned normally still failed (`outcome.py`'s `_failure_evidence`), or `None`."""
    if answer is not None and not answer.strip():
        return "its final answer is empty"
    errors = cast("list[str | None]", row.iteration_values("error"))
    if errors:
        if errors[-1]:
            return f"its last model call failed: {clip(errors[-1], 80)}"
        stop = cast("list[str | None]", row.iteration_values("stop_reason"))[-1]
        if stop in CUT_SHORT:  # the recorded words (for the reason) read only then
            cut = cut_short(stop, cast("list[list[str]]", row.iteration_values("finish_reasons"))[-1])
            return f"its last model call was cut short ({cut})"
    failed = [error or None for error in cast("list[str | None]", row.call_values("error"))]
    if failed and all(failed):
        first = f"{row.names[0]}: {clip(failed[0] or '', 80)}"
        if len(failed) == 1:
            return f"its only tool call failed ({first})"
        return f"all {len(failed)} tool calls failed ({first}, ...)"
    return None


# --- cost -----------------------------------------------------------------------------------------


def cost_form(scorer: Cost, row: RowCalls, trace: Trace) -> Score | None:
    """The passing `Score` of `cost` when the priced calls are within `max_usd` (or all priced), else `None`."""
    models = cast("list[str | None]", row.iteration_values("model"))
    if not models:
        return None
    usd, unpriced = _estimate(scorer, row, models)
    est = f"estimated ${usd:.4f}"
    if unpriced and (scorer.unknown_model == "fail" or scorer.max_usd is None or len(unpriced) == len(models)):
        return None
    if scorer.max_usd is None:
        if not scorer.spec_check:  # the estimate alone: the reference does not apply
            return None
        return scorer.result(True, None, f"Cost {est}; every model call was priced.", usd=usd)
    if usd > scorer.max_usd:
        return None
    gaps = f" without {len(unpriced)} unpriced call(s): {', '.join(unpriced[:3])}" if unpriced else ""
    return scorer.result(True, None, f"Cost {est}{gaps} within max ${scorer.max_usd:g}.", usd=usd)


def _estimate(scorer: Cost, row: RowCalls, models: list[str | None]) -> tuple[float, list[str]]:
    """`estimate_cost` from the columns: USD of the priced calls, and labels of the others."""
    table = {**DEFAULT_PRICES, **scorer.prices}
    run_models = cast("list[str]", row.value("models"))
    fallback = run_models[0] if len(run_models) == 1 else None
    usages = cast("list[dict[str, int | None]]", row.iteration_values("usage"))
    indexes = cast("list[int]", row.iteration_values("index"))
    usd, unpriced = 0.0, []
    found: dict[str, ModelPrice | None] = {}  # a run calls few models: look each up once
    for recorded, counts, index in zip(models, usages, indexes, strict=True):
        model = recorded or fallback
        price = None
        if model:
            price = found[model] if model in found else found.setdefault(model, find_price(model, table))
        if price is None or (counts["input_tokens"] is None and counts["output_tokens"] is None):
            unpriced.append(f"model call {index} ({model or 'model not recorded'})")
            continue
        usd += call_cost(Usage.model_validate(counts), price)
    return usd, unpriced


FORMS: dict[type[Scorer], Callable[[Any, RowCalls, Trace], Score | None]] = {
    Output: output_form,
    Steps: steps_form,
    Outcome: outcome_form,
    Cost: cost_form,
}
"""The forms of this module by the exact scorer class they answer for (merged into `forms.FORMS`)."""
