"""Columnar forms of the tool-use rule scorers: validity, correctness, efficiency, tool names and descriptions.

Each answers, like every form, only for a sure pass with the reference's exact `Score` (see
`forms.py`); anything else (a failure, a doubt) is left to the reference. They read the row's
columns: the calls' names, their arguments as JSON text (decoded here, as the trace's decoder
does) and the offered tools (`tool_schemas`). Where the reference's reason or grading is a
function of values the columns hold (names, keys, tool definitions), the form calls that same
function of the reference's module, private there, so that the texts have one source.
With `nested`, a row whose calls started nested agents is left to the reference (their calls count).

`tool_call_validity`: every call of a tool with a schema validates against it (through the
reference's cached validators), every call's tool was offered, and at least one call was checked;
a call that cannot be checked (no schema, arguments not recorded) passes only as a default. A
schema the reference would skip or only partly check (broken, or with patterns the linear-time
engine cannot run) is left to it.
`tool_correctness`: names and order modes are exact from the names. In arguments mode, a call
surely matches an expected one of its name when the expected arguments are not compared, equal
the call's JSON text as the table encodes it, or else are accepted by the collector's argument
matcher on the call's parsed arguments (as in `trajectory`); the form answers when such pairs
account for every call of the shorter side, so the reference's matching count is known.
`tool_efficiency`: calls compared by name and canonical arguments, as the reference does, from the
decoded JSON; a call whose arguments were not recorded, sharing its tool with another, is left to it.
`tool_name_reliability`, `tool_description_reliability`: the offered tools and called names, graded
by the reference's own rules; a tool's grade is kept per scorer, since every row of a run
usually offers the same tools.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import Callable
from typing import Any, Literal

from evaltrace.collector.traces.arguments import arguments_match
from evaltrace.collector.traces.records import ToolSchema, Trace
from evaltrace.collector.traces.table import comparable_text
from evaltrace.evaluators.scoring.columnar.calls import RowCalls
from evaltrace.evaluators.scoring.scorers.arguments import (
    ExpectedCall,
    canonical_arguments,
    format_call,
    lcs_pairs,
    max_bipartite_matching,
)
from evaltrace.evaluators.scoring.scorers.base import Score, Scorer
from evaltrace.evaluators.scoring.scorers.calls import ToolEfficiency, find_loops
from evaltrace.evaluators.scoring.scorers.reliability import (
    ToolDescriptionReliability,
    ToolNameReliability,
    description_problems,
    name_problems,
)
from evaltrace.evaluators.scoring.scorers.tools import (
    ToolCallValidity,
    ToolCorrectness,
    check_json_schema,
    correctness_reason,
    schema_errors,
)

# Every row of a run offers the same few tools: one decoded object per schema text spares a parse
# per row and lets the validator cache (keyed first by the schema object) find it at once.
_PARAMETERS: dict[str, Any] = {}
_PARAMETERS_MAX = 512

_Verdict = Literal["valid", "skipped"]


def _parameters(text: str | None) -> Any:
    """A tool schema's parameters decoded from the table's JSON text (`None`: not recorded)."""
    if text is None:
        return None
    found = _PARAMETERS.get(text)
    if found is None:
        if len(_PARAMETERS) >= _PARAMETERS_MAX:
            _PARAMETERS.clear()
        found = _PARAMETERS[text] = json.loads(text)
    return found


def _offered(row: RowCalls) -> list[dict[str, Any]]:
    """The row's `tool_schemas` column: per offered tool, `name`, `description` and `parameters_json`."""
    tools: list[dict[str, Any]] = row.value("tool_schemas")  # type: ignore[assignment]
    return tools


def _decoded(row: RowCalls) -> list[Any]:
    """Each call's arguments as the trace holds them (`None`: not recorded).

    One parse of all of them as one JSON array (as the trace decoder does): each text is a whole
    JSON value, so the array's items are exactly the values, for one call's overhead.
    """
    texts = row.arguments
    joined: list[Any] = json.loads("[" + ",".join("null" if text is None else text for text in texts) + "]")
    return joined


def tool_call_validity_form(scorer: ToolCallValidity, row: RowCalls, trace: Trace) -> Score | None:
    """The passing `Score` of `tool_call_validity` when every checkable call is valid, else `None`."""
    if scorer.nested and row.nested:
        return None
    names = row.names
    if not names:
        return (
            scorer.result(True, 1.0, "The agent made no tool calls, so none was invalid.")
            if scorer.spec_check
            else None
        )
    tools = _offered(row)
    offered = {tool["name"] for tool in tools}
    schemas = {
        tool["name"]: _parameters(tool["parameters_json"]) for tool in tools if tool["parameters_json"] is not None
    }
    schemas.update(scorer.schemas)
    if not offered and not schemas:
        return None
    known = offered | set(scorer.schemas) if offered else set()
    truncated = row.call_values("arguments_truncated")
    checked = 0
    for name, arguments, cut in zip(names, _decoded(row), truncated, strict=True):
        verdict = _call_verdict(scorer, name, arguments, bool(cut), known, schemas)
        if verdict is None:
            return None
        checked += verdict == "valid"
    if not checked:
        return None
    reason = f"All {checked} checked calls match their tool schemas."
    skipped = len(names) - checked
    if skipped:
        if scorer.spec_check:  # a check fails on a call it could not see
            return None
        reason += f" {skipped} call(s) not checked (no schema, or arguments not recorded)."
    return scorer.result(True, 1.0, reason, invalid=[], checked=checked, skipped=skipped)


def _call_verdict(
    scorer: ToolCallValidity, name: str, arguments: Any, cut: bool, known: set[str], schemas: dict[str, Any]
) -> _Verdict | None:
    """`valid`, `skipped` (nothing to check), or `None`: invalid, or for the reference to say."""
    if known and name not in known:
        return None
    schema = schemas.get(name)
    if schema is None:  # as the reference: a call with no schema is not checked
        return "skipped"
    if arguments is None and not cut:
        return "skipped"
    if cut or not isinstance(schema, dict) or not isinstance(arguments, dict):
        return None
    try:  # broken, or partly uncheckable (the reference skips or notes it): the reference says
        check_json_schema(schema, name)
    except ValueError:
        return None
    if schema_errors(schema, arguments):
        return None
    properties = schema.get("properties")
    if scorer.strict and isinstance(properties, dict) and any(key not in properties for key in arguments):
        return None
    return "valid"


def tool_correctness_form(scorer: ToolCorrectness, row: RowCalls, trace: Trace) -> Score | None:
    """The passing `Score` of `tool_correctness` when its value is known and meets the threshold, else `None`."""
    expected = scorer.expected
    if expected is None or (scorer.nested and row.nested):
        return None
    wanted = [want.name for want in expected]
    names = list(row.names)
    if scorer.mode == "names":
        common: int | None = sum((Counter(wanted) & Counter(names)).values())
    elif scorer.mode == "order":
        common = len(lcs_pairs(len(wanted), len(names), lambda i, j: wanted[i] == names[j]))
    else:
        common = _sure_matches(scorer, expected, row)
    if common is None:
        return None
    total = len(wanted) + len(names)
    value = 1.0 if total == 0 else 2 * common / total
    if value < scorer.threshold:
        return None
    reason = correctness_reason(scorer.mode, wanted, names, common, value)
    return scorer.result(True, value, reason, expected=wanted, actual=names)


def _sure_matches(scorer: ToolCorrectness, expected: list[ExpectedCall], row: RowCalls) -> int | None:
    """The reference's count of matching calls when sure pairs alone reach the most possible, else `None`."""
    if row.truncated:
        return None
    names, texts = row.names, row.arguments
    wanted = [_expected_text(scorer, want) for want in expected]
    asked = _Asked(scorer, expected, texts)

    def sure(i: int, j: int) -> bool:
        want = wanted[i]
        if expected[i].name != names[j]:
            return False
        if want is True or (want is not None and want == texts[j]):
            return True
        return want is not None and asked.matches(i, j)  # equal values may differ in text

    most = min(len(expected), len(names))
    if all(sure(i, i) for i in range(most)):  # the calls in order: the diagonal is a largest matching
        return most
    found = len(max_bipartite_matching(len(expected), len(names), sure))
    return found if found == most else None


class _Asked:
    """Whether expected call `i` matches call `j`, asked of the collector's argument matcher.

    The reference's `call_matches` answer, on the row's arguments parsed once and only if asked.
    """

    def __init__(self, scorer: ToolCorrectness, expected: list[ExpectedCall], texts: list[str | None]) -> None:
        self._scorer, self._expected, self._texts = scorer, expected, texts
        self._values: list[Any] | None = None
        self._known: dict[tuple[int, int], bool] = {}

    def matches(self, i: int, j: int) -> bool:
        found = self._known.get((i, j))
        if found is None:
            want = self._expected[i]
            assert want.arguments is not None  # compared: `_expected_text` gave a text
            if self._values is None:
                self._values = [None if text is None else json.loads(text) for text in self._texts]
            rules = self._scorer.arguments.for_tool(want.name)
            found = self._known[(i, j)] = arguments_match(want.arguments, self._values[j], False, rules)
        return found


def _expected_text(scorer: ToolCorrectness, want: ExpectedCall) -> str | Literal[True] | None:
    """The JSON text a call's arguments must have to surely match `want`; `True`: any; `None`: never sure."""
    if want.arguments is None or scorer.arguments.for_tool(want.name).mode == "ignore":
        return True
    try:  # equal JSON text is an equal value, which matches under every setting
        return comparable_text(want.arguments)
    except (TypeError, ValueError):  # NaN, or not a JSON value: the reference decides
        return None


def tool_efficiency_form(scorer: ToolEfficiency, row: RowCalls, trace: Trace) -> Score | None:
    """The passing `Score` of `tool_efficiency` when repeats and loops are within limits, else `None`."""
    if scorer.nested and row.nested:
        return None
    names = row.names
    if not names:
        return (
            scorer.result(True, 1.0, "The agent made no tool calls, so none was redundant.")
            if scorer.spec_check
            else None
        )
    arguments = _decoded(row)
    if _blind(names, arguments, row.call_values("arguments_truncated")):
        return None  # repeats cannot be ruled out: the reference reports the unrecorded calls
    keys = [
        (name, f"<not recorded #{i}>" if value is None else canonical_arguments(value))
        for i, (name, value) in enumerate(zip(names, arguments, strict=True))
    ]
    redundant = _redundant(scorer, row, keys)
    loops = find_loops(keys)
    longest = max((n for _, n in loops), default=1)
    if len(redundant) > scorer.max_redundant or (scorer.max_loop is not None and longest > scorer.max_loop):
        return None
    parts = []
    if redundant:
        parts.append(f"{len(redundant)} redundant (max {scorer.max_redundant}): " + ", ".join(redundant[:3]))
    for start, n in loops[:3]:
        parts.append(f"loop: {format_call(names[start], arguments[start])} {n} times in a row from #{start + 1}")
    reason = "; ".join(parts) + "." if parts else f"No redundant calls among {len(names)}."
    value = len(set(keys)) / len(names)
    return scorer.result(True, value, reason, redundant=redundant, loops=[[s, n] for s, n in loops])


def _blind(names: list[str], arguments: list[Any], truncated: list[object]) -> bool:
    """Whether a call's arguments were not recorded while another call used the same tool."""
    uses = Counter(names)
    return any(
        value is None and not cut and uses[name] > 1
        for name, value, cut in zip(names, arguments, truncated, strict=True)
    )


def _redundant(scorer: ToolEfficiency, row: RowCalls, keys: list[tuple[str, str]]) -> list[str]:
    """The reference's redundant calls: repeats of an earlier call, but for immediate retries of a failed one."""
    seen: dict[tuple[str, str], int] = {}
    redundant: list[str] = []
    for i, key in enumerate(keys):
        first = seen.get(key)
        if first is None:
            seen[key] = i
            continue
        if not scorer.count_retries and keys[i - 1] == key and _failed(row, i - 1):
            continue  # an immediate retry of a failed call
        redundant.append(f"#{i + 1} repeats #{first + 1} {key[0]}")
    return redundant


def _failed(row: RowCalls, index: int) -> bool:
    """Whether call `index` failed: an error recorded, or a result object whose `error` field is set."""
    if row.call_values("error")[index]:
        return True
    text = row.call_values("result_json")[index]
    result = None if text is None else json.loads(str(text))
    return isinstance(result, dict) and result.get("error") not in (None, False, "")


def tool_name_reliability_form(scorer: ToolNameReliability, row: RowCalls, trace: Trace) -> Score | None:
    """The passing `Score` of `tool_name_reliability` when every called name was offered and enough names are clear."""
    offered = [tool["name"] for tool in _offered(row)]
    called = list(dict.fromkeys(row.names))
    if not offered and not called:
        return None
    if offered and any(name not in offered for name in called):
        return None
    names = offered or called
    problems = {n: p for n in names if (p := _graded(scorer, (n,), functools.partial(name_problems, n, scorer)))}
    value = (len(names) - len(problems)) / len(names)
    if value < scorer.threshold:
        return None
    parts = [f"{n!r} {', '.join(p)}" for n, p in problems.items()]
    reason = "; ".join(parts) + "." if parts else f"All {len(names)} tool names are clear identifiers."
    return scorer.result(True, value, reason, unknown=[], problems=problems)


def tool_description_reliability_form(scorer: ToolDescriptionReliability, row: RowCalls, trace: Trace) -> Score | None:
    """The passing `Score` of `tool_description_reliability` when enough offered tools are well described."""
    tools = _offered(row)
    if not tools:
        return None
    problems: dict[str, list[str]] = {}
    for tool in tools:
        key = (tool["name"], tool["description"], tool["parameters_json"])
        if found := _graded(scorer, key, functools.partial(_described, tool, scorer)):
            problems[tool["name"]] = found
    value = (len(tools) - len(problems)) / len(tools)
    if value < scorer.threshold:
        return None
    parts = [f"{name}: {'; '.join(p)}" for name, p in problems.items()]
    reason = " | ".join(parts) + "." if parts else f"All {len(tools)} tool definitions are well described."
    return scorer.result(True, value, reason, problems=problems)


def _described(tool: dict[str, Any], scorer: ToolDescriptionReliability) -> list[str]:
    """The reference's findings on one offered tool, from its `tool_schemas` entry."""
    parameters = _parameters(tool["parameters_json"])
    schema = ToolSchema.model_construct(name=tool["name"], description=tool["description"], parameters=parameters)
    return description_problems(schema, scorer)


# Every row of a run offers the same few tools, graded the same by the same scorer: each tool's
# findings are kept per scorer object (held, so its id is not reused while the entry lives).
_GRADES: dict[tuple[object, ...], tuple[Scorer, tuple[str, ...]]] = {}
_GRADES_MAX = 4096


def _graded(scorer: Scorer, key: tuple[object, ...], grade: Callable[[], list[str]]) -> list[str]:
    """`grade()`, computed once per scorer object and key."""
    full = (id(scorer), *key)
    found = _GRADES.get(full)
    if found is None or found[0] is not scorer:
        if len(_GRADES) >= _GRADES_MAX:
            _GRADES.clear()
        found = _GRADES[full] = (scorer, tuple(grade()))
    return list(found[1])


FORMS: dict[type[Scorer], Callable[[Any, RowCalls, Trace], Score | None]] = {
    ToolCallValidity: tool_call_validity_form,
    ToolCorrectness: tool_correctness_form,
    ToolEfficiency: tool_efficiency_form,
    ToolNameReliability: tool_name_reliability_form,
    ToolDescriptionReliability: tool_description_reliability_form,
}
"""The forms of this module, by the exact scorer class they answer for (merged into `forms.FORMS`)."""
