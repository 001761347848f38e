"""Rule scorers for tool use: argument validity against schemas, and tool correctness.

`tool_call_validity` checks each call against the JSON schema of its tool: the one recorded in
the trace (`Trace.tool_schemas`, what the model was offered) or one given in config. It checks
that the tool exists among the offered tools, then validates the arguments with `jsonschema`
(required parameters, types, enums, ...), and in `strict` mode rejects parameters the schema
does not declare. Arguments that are not a JSON object (raw or truncated text) are invalid.

`tool_correctness` compares the tools used with the expected ones: `names` (F1 over the
multisets of names), `order` (longest common subsequence of names, as `2 * LCS / (|E| + |A|)`)
or `arguments` (names and arguments through the argument matcher, calls paired optimally).
"""

from __future__ import annotations

import difflib
import json
from collections import Counter
from typing import Any, ClassVar, Literal, cast

import numpy as np
from pydantic import Field, field_validator

from evaltrace.collector.traces.records import ToolCall, Trace
from evaltrace.evaluators.scoring._kernels import Ints, by_object, made_once
from evaltrace.evaluators.scoring.columns import BatchCalls, RowCalls, columnar_form, columnar_forms
from evaltrace.evaluators.scoring.scorers.arguments import (
    ArgumentMatch,
    ExpectedCall,
    ExpectedCallsScorer,
    call_label,
    call_matches,
    describe_raw_arguments,
    lcs_pairs,
    max_bipartite_matching,
)
from evaltrace.evaluators.scoring.scorers.base import Score, Scorer, check_applies
from evaltrace.evaluators.scoring.scorers.evidence import RECORD_HINT
from evaltrace.evaluators.scoring.scorers.registry import register
from evaltrace.evaluators.scoring.scorers.schemas import (
    Compiled,
    check_json_schema,
    compiled_errors,
    compiled_schema,
    schema_parameters,
)


def closest_name(name: str, candidates: list[str]) -> str | None:
    """The most similar candidate to `name` (difflib ratio >= 0.6), if any."""
    found = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    return found[0] if found else None


@register
class ToolCallValidity(Scorer):
    """Each tool call's arguments conform to its tool's JSON schema; value = fraction of valid calls."""

    name: ClassVar[str] = "tool_call_validity"
    reads_histories: ClassVar[bool] = False

    schemas: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """JSON schemas of tool arguments by tool name; they take precedence over the schemas recorded in the trace."""
    strict: bool = False
    """Reject arguments the schema does not declare (as if it set additionalProperties: false)."""
    threshold: float = Field(default=1.0, ge=0.0, le=1.0)
    """Minimum fraction of valid calls to pass."""
    nested: bool = False
    """Also check the calls made by nested agents."""

    @field_validator("schemas")
    @classmethod
    def _valid_schemas(cls, value: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for tool, schema in value.items():
            check_json_schema(schema, f"schema of tool {tool!r}")
        return value

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        """Validate every call whose tool has a known schema."""
        offered = {s.name for s in trace.tool_schemas}
        schemas = {s.name: s.parameters for s in trace.tool_schemas if s.parameters is not None}
        return self.graded(offered, schemas, trace.all_tool_calls(nested=self.nested))

    def graded(self, offered: set[str], schemas: dict[str, Any], calls: list[ToolCall]) -> Score:
        """`score` of a trace's offered tools, their recorded schemas and its calls (a table row's, for the form)."""
        schemas.update(self.schemas)
        if not calls:
            if self.spec_check:  # nothing to validate: no call can be invalid
                return self.result(True, 1.0, "The agent made no tool calls, so none was invalid.")
            return self.result(None, reason="The agent made no tool calls to validate.")
        if not offered and not schemas:
            return self.missing(f"No tool schemas were recorded in the trace or given in `schemas`; {RECORD_HINT}.")
        # Existence is only checked against what the model was offered; config schemas alone don't define that.
        known = offered | set(self.schemas) if offered else set()
        compiled: dict[str, Compiled] = {}  # per tool: a trace calls the same tools many times
        findings = [self._check(i, call, known, schemas, compiled) for i, call in enumerate(calls)]
        checked = [f for f in findings if f is not None]
        if not checked:
            names = sorted({c.name for c in calls})
            return self.missing(
                f"No schema is known for any called tool ({', '.join(names)}), "
                f"or their arguments were not recorded; {RECORD_HINT}."
            )
        invalid = [problem for problem in checked if problem]
        value = (len(checked) - len(invalid)) / len(checked)
        passed = value >= self.threshold
        if invalid:
            reason = f"{len(invalid)} of {len(checked)} calls invalid: " + "; ".join(invalid[:3])
        else:
            reason = f"All {len(checked)} checked calls match their tool schemas."
        skipped = len(findings) - len(checked)
        if skipped:
            reason += f" {skipped} call(s) not checked (no schema, or arguments not recorded)."
            if passed and self.spec_check:  # a check cannot vouch for calls it could not see
                passed = False
                reason += f" A spec check must see every call: {RECORD_HINT}, or give their schemas in `schemas`."
        unchecked = [f"tool {tool!r}: {note}" for tool, entry in compiled.items() for note in entry[3]]
        if unchecked:  # patterns of recorded schemas that RE2 cannot run (see `_schema_regex`)
            reason += " Not checked: " + "; ".join(unchecked[:3]) + "."
            return self.result(
                passed, value, reason, invalid=invalid, checked=len(checked), skipped=skipped, unchecked=unchecked
            )
        return self.result(passed, value, reason, invalid=invalid, checked=len(checked), skipped=skipped)

    def _check(
        self,
        index: int,
        call: ToolCall,
        known: set[str],
        schemas: dict[str, dict[str, Any]],
        compiled: dict[str, Compiled],
    ) -> str | None:
        """`None`: not checkable; `""`: valid; else the problem."""
        label = call_label(index, call.name)
        if known and call.name not in known:
            hint = closest_name(call.name, sorted(known))
            return f"{label}: tool was not offered" + (f" (did you mean {hint!r}?)" if hint else "")
        schema = schemas.get(call.name)
        if schema is None:  # no schema (offered with no parameters recorded, or not at all): nothing to check
            return None
        if call.arguments is None and not call.arguments_truncated:
            return None
        if call.arguments_truncated or not isinstance(call.arguments, dict):
            return f"{label}: arguments are not a JSON object ({describe_raw_arguments(call)})"
        entry = compiled.get(call.name)
        if entry is None:
            entry = compiled[call.name] = compiled_schema(schema)
        if entry[1] is not None:
            return None  # the recorded schema itself is broken: not the agent's fault
        errors = compiled_errors(entry, schema, call.arguments)
        if self.strict and isinstance(schema.get("properties"), dict):
            errors += [f"{k}: unexpected parameter" for k in call.arguments if k not in schema["properties"]]
        return f"{label}: " + "; ".join(errors) if errors else ""


ToolCorrectnessMode = Literal["names", "order", "arguments"]


@register
class ToolCorrectness(ExpectedCallsScorer):
    """The agent used the expected tools (by names, names in order, or names and arguments)."""

    name: ClassVar[str] = "tool_correctness"
    reads_histories: ClassVar[bool] = False

    mode: ToolCorrectnessMode = "names"
    """names: F1 over tool names; order: LCS similarity of the name sequences; arguments: F1 over matching calls."""
    threshold: float = Field(default=1.0, ge=0.0, le=1.0)
    """Minimum value to pass."""
    arguments: ArgumentMatch = Field(default_factory=ArgumentMatch)
    """How arguments are compared in `arguments` mode."""
    nested: bool = False
    """Also count the calls made by nested agents."""

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        """Compare the recorded calls with `expected`."""
        return self.graded(trace.all_tool_calls(nested=self.nested))

    def graded(self, actual: list[ToolCall]) -> Score:
        """`score` of a trace's calls (a table row's, for the form)."""
        if self.expected is None:
            return self.result(None, reason="No expected tool calls are configured.")
        expected_names = [e.name for e in self.expected]
        actual_names = [c.name for c in actual]
        common = _common_count(self.mode, self.expected, actual, self.arguments)
        total = len(expected_names) + len(actual_names)
        value = 1.0 if total == 0 else 2 * common / total
        passed = value >= self.threshold
        reason = correctness_reason(self.mode, expected_names, actual_names, common, value)
        return self.result(passed, value, reason, expected=expected_names, actual=actual_names)


def _common_count(mode: str, expected: list[ExpectedCall], actual: list[ToolCall], match: ArgumentMatch) -> int:
    """How many expected calls are accounted for under `mode`."""
    exp_names = [e.name for e in expected]
    act_names = [c.name for c in actual]
    if mode == "names":
        return sum((Counter(exp_names) & Counter(act_names)).values())
    if mode == "order":
        return len(lcs_pairs(len(exp_names), len(act_names), lambda i, j: exp_names[i] == act_names[j]))
    pairs = max_bipartite_matching(len(expected), len(actual), lambda i, j: call_matches(expected[i], actual[j], match))
    return len(pairs)


def correctness_reason(mode: str, expected: list[str], actual: list[str], common: int, value: float) -> str:
    """The reason text of `tool_correctness` for these names (shared with its columnar form)."""
    missing = list((Counter(expected) - Counter(actual)).elements())
    extra = list((Counter(actual) - Counter(expected)).elements())
    parts = [f"{common} of {len(expected)} expected calls matched ({mode} mode, score {value:.2f})"]
    if missing:
        parts.append(f"missing: {', '.join(missing)}")
    if extra:
        parts.append(f"unexpected: {', '.join(extra)}")
    if mode == "order" and not missing and not extra and common < len(expected):
        parts.append(f"order differs: expected {' > '.join(expected)}, got {' > '.join(actual)}")
    if mode == "arguments" and common < len(expected) and not missing:
        parts.append("some calls have different arguments")
    return "; ".join(parts) + "."


# The columnar forms (see `columns.py`): a sure pass with the reference's exact `Score`, else `None`.
# `tool_call_validity`: every call of a tool with a schema validates (cached validators), every call's
# tool was offered, one call at least was checked (an unchecked one passes only a default); any other
# row (a failure, RE2-less patterns, no calls) is graded by the reference's own code.
# `tool_correctness`: the reference's own grading of the row's calls (`ToolCorrectness.graded`); with
# `nested`, a row whose calls started nested agents is left to the reference (their calls count).


def offered_tools(row: RowCalls) -> list[dict[str, Any]]:
    """The row's `tool_schemas` column: per offered tool, `name`, `description` and `parameters_json`."""
    tools: list[dict[str, Any]] = row.batch.array("tool_schemas")[row.index].as_py()  # this row's alone
    return tools


def tool_call_validity_forms(scorers: list[ToolCallValidity], batch: BatchCalls, rows: list[int]) -> list[Score | None]:
    """Per row (with its scorer), the `Score` of `tool_call_validity`: a pass when every checkable call is valid.

    By each scorer's rows at once: each distinct call under each distinct set of offered tools checked
    once (`_counts`), counted per row by array operations; a pass shared by rows of the same counts.
    """
    at, found = np.asarray(rows, np.int64), np.full(len(rows), None, object)
    for scorer, places in by_object(scorers):
        tops = at[places]
        sure = ~batch.rows_nested[tops] if scorer.nested else np.ones(len(tops), bool)  # nested: the reference
        counts = _counts(scorer, batch, tops)
        doubt = sure & ((counts[0] < 0) | ((counts[1] > 0) & scorer.spec_check))  # a check fails unseen calls
        sure, passing = sure & ~doubt, batch.memo(scorer, "passing", run=True)  # `passing`: by counts
        found[places[sure]] = made_once(counts[0][sure] << 32 | counts[1][sure], _validity_pass, scorer, passing)
        for k in places[doubt].tolist():  # the reference's own grading
            found[k] = _validity_graded(scorer, batch, rows[k])
    return cast("list[Score | None]", found.tolist())


def _counts(scorer: ToolCallValidity, batch: BatchCalls, tops: Ints) -> tuple[Ints, Ints]:
    """Per row of `tops`, its calls (checked, skipped) when the reference passes them; checked -1: it may not.

    Each distinct (offered tools, call) pair of the batch checked once (`_checked`, kept for the run by texts).
    """
    calls, owner = batch.calls_of(tops)
    offered = np.asarray(batch.schema_ids, np.int64)[tops][owner]
    pairs = offered << 32 | np.asarray(batch.call_keys, np.int64)[calls]
    distinct, first, inverse = np.unique(pairs, return_index=True, return_inverse=True)
    tools, run = batch.memo(scorer, "tools"), batch.memo(scorer, "verdicts", run=True)  # by tools' and call's texts
    names, texts, cut = batch.names, batch.arguments, batch.call_field("arguments_truncated")
    made = []
    for offered_id, j, index in zip(
        (distinct >> 32).tolist(), calls[first].tolist(), tops[owner[first]].tolist(), strict=True
    ):
        if (known := tools.get(offered_id)) is None:
            known = tools[offered_id] = _known_schemas(scorer, RowCalls(batch, index))
        if (verdict := run.get(key := (known[2], names[j], texts[j], bool(cut[j])))) is None:
            verdict = run[key] = _checked(scorer, known, key[1:])
        made.append(verdict)
    verdict = np.asarray(made, np.int64)[inverse]
    checked = np.bincount(owner, verdict == _VALID, len(tops)).astype(np.int64)
    doubt = np.bincount(owner, verdict == _DOUBT, len(tops)) > 0
    return np.where(doubt | (checked == 0), -1, checked), batch.call_counts[tops] - checked


tool_call_validity_form = columnar_forms(ToolCallValidity, tool_call_validity_forms)


def _validity_graded(scorer: ToolCallValidity, batch: BatchCalls, index: int) -> Score | None:
    """The reference's `Score` by its own code on the row's calls and tools (`_known_schemas`'s: cached validators)."""
    tools, offered, row = batch.memo(scorer, "tools"), batch.schema_ids[index], RowCalls(batch, index)
    if (known := tools.get(offered)) is None:
        known = tools[offered] = _known_schemas(scorer, row)
    calls = row.tool_calls()
    return None if calls is None else check_applies(scorer, scorer.graded(known[0], dict(known[1]), calls))


_VALID, _UNCHECKED, _DOUBT = 0, 1, 2


def _checked(
    scorer: ToolCallValidity, known: tuple[set[str], dict[str, Any], object], call: tuple[str, str | None, bool]
) -> int:
    """`_check` of the call `(name, arguments text, truncated)`: `_VALID`, `_UNCHECKED` or `_DOUBT`."""
    if not known[0] and not known[1]:
        return _DOUBT  # nothing offered nor given: the reference says what is missing
    name, text, cut = call
    arguments = None if text is None else json.loads(text)
    made = ToolCall(name=name, arguments=arguments, arguments_truncated=cut)  # validated: 3x `model_construct`'s speed
    compiled: dict[str, Compiled] = {}
    finding = scorer._check(0, made, known[0], known[1], compiled)
    if finding is None:
        return _UNCHECKED
    # A problem, or a note on the schema (patterns RE2 cannot run): the reference says.
    return _DOUBT if finding or any(entry[3] for entry in compiled.values()) else _VALID


def _known_schemas(scorer: ToolCallValidity, row: RowCalls) -> tuple[set[str], dict[str, Any], tuple[object, ...]]:
    """The tools `_check` takes as known, their schemas (recorded and configured), and the tools' texts."""
    tools = offered_tools(row)
    offered = {tool["name"] for tool in tools}
    recorded = [(tool["name"], tool["parameters_json"]) for tool in tools if tool["parameters_json"] is not None]
    schemas = {name: schema_parameters(text) for name, text in recorded}
    schemas.update(scorer.schemas)
    texts = tuple((tool["name"], tool["parameters_json"]) for tool in tools)
    return (offered | set(scorer.schemas) if offered else set()), schemas, texts


def _validity_pass(scorer: ToolCallValidity, passing: dict[int, Score], key: int) -> Score:
    """The pass of `key`'s counts: checked (high 32 bits), skipped (low)."""
    if (found := passing.get(key)) is None:
        checked, skipped = key >> 32, key & 0xFFFFFFFF
        reason = f"All {checked} checked calls match their tool schemas."
        if skipped:
            reason += f" {skipped} call(s) not checked (no schema, or arguments not recorded)."
        found = passing[key] = scorer.result(True, 1.0, reason, invalid=[], checked=checked, skipped=skipped)
    return found


@columnar_form(ToolCorrectness)
def tool_correctness_form(scorer: ToolCorrectness, row: RowCalls) -> Score | None:
    """The reference's `Score` by its own grading of the row's calls; `None`: it needs the trace."""
    calls = row.tool_calls(scorer.nested)
    return None if calls is None else check_applies(scorer, scorer.graded(calls))
