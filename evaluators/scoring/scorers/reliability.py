"""Rule checks of the tools themselves: their names and their descriptions.

These are the deterministic parts of tool name and description reliability: what a model can
only get wrong because the tool definitions invite it. They read the tool definitions recorded
in the trace (`Trace.tool_schemas`) and the names the model actually called.

`tool_name_reliability` fails on a called name that was not offered (reporting the closest
offered name, the usual sign of a hallucinated or misspelt tool) and grades the offered names:
identifier syntax (`[A-Za-z0-9_-]{1,64}`, what the major APIs accept), snake_case (optional),
at most `max_segments` words, and no implementation words (`_with_llm`, `_via_api`, ...).

`tool_description_reliability` grades each offered tool: a description of at least
`min_description_chars`, every parameter described and typed, at most `max_parameters`
parameters and at most `max_optional_parameters` optional ones.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any, ClassVar

from pydantic import Field

from evaltrace.collector.traces.records import ToolSchema, Trace
from evaltrace.evaluators.scoring.columns import RowCalls, columnar_form
from evaltrace.evaluators.scoring.scorers.base import Score, Scorer
from evaltrace.evaluators.scoring.scorers.registry import register
from evaltrace.evaluators.scoring.scorers.schemas import schema_parameters
from evaltrace.evaluators.scoring.scorers.tools import closest_name, offered_tools

_IDENTIFIER = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_SNAKE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")
_IMPLEMENTATION_WORDS = ("with_llm", "via_api", "using_gpt", "with_openai", "via_http", "with_regex", "via_sql")


def name_problems(name: str, rules: ToolNameReliability) -> list[str]:
    """What is wrong with tool name `name` under `rules` (empty: nothing)."""
    problems = []
    if not _IDENTIFIER.match(name):
        problems.append("is not an identifier ([A-Za-z0-9_-], at most 64 characters)")
    if rules.snake_case and not _SNAKE.match(name):
        problems.append("is not snake_case")
    segments = [s for s in re.split(r"[_\-.]|(?<=[a-z])(?=[A-Z])", name) if s]
    if len(segments) > rules.max_segments:
        problems.append(f"has {len(segments)} words (max {rules.max_segments})")
    lowered = name.lower()
    problems += [f"names its implementation ({word!r})" for word in rules.implementation_words if word in lowered]
    return problems


@register
class ToolNameReliability(Scorer):
    """Called tool names exist among the offered tools, and the offered names are clear identifiers."""

    name: ClassVar[str] = "tool_name_reliability"
    reads_histories: ClassVar[bool] = False

    threshold: float = Field(default=0.8, ge=0.0, le=1.0)
    """Minimum fraction of offered names passing every naming check."""
    snake_case: bool = False
    """Also require offered names to be snake_case."""
    max_segments: int = Field(default=7, ge=1)
    """Most words in a name (split on _, -, . and camelCase)."""
    implementation_words: list[str] = Field(default_factory=lambda: list(_IMPLEMENTATION_WORDS))
    """Substrings that reveal how a tool works rather than what it does."""

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        """Check the called names, then grade the offered ones."""
        offered = [s.name for s in trace.tool_schemas]
        called = list(dict.fromkeys(c.name for c in trace.tool_calls))
        if not offered and not called:
            return self.result(None, reason="No tools were offered or called.")
        unknown = []
        if offered:
            for name in called:
                if name not in offered:
                    hint = closest_name(name, offered)
                    unknown.append(f"{name!r} was called but not offered" + (f" (closest: {hint!r})" if hint else ""))
        return self.graded(offered or called, unknown, functools.partial(name_problems, rules=self))

    def graded(self, names: list[str], unknown: list[str], problems_of: Callable[[str], list[str]]) -> Score:
        """The score of the graded names (the offered ones, else the called) and the `unknown` findings."""
        problems = {n: p for n in names if (p := problems_of(n))}
        value = (len(names) - len(problems)) / len(names)
        passed = not unknown and value >= self.threshold
        parts = unknown + [f"{n!r} {', '.join(p)}" for n, p in problems.items()]
        reason = "; ".join(parts) + "." if parts else f"All {len(names)} tool names are clear identifiers."
        return self.result(passed, value, reason, unknown=unknown, problems=problems)


def description_problems(tool: ToolSchema, rules: ToolDescriptionReliability) -> list[str]:
    """What is wrong with `tool`'s description under `rules` (empty: nothing)."""
    problems = []
    if len((tool.description or "").strip()) < rules.min_description_chars:
        problems.append(f"description shorter than {rules.min_description_chars} characters")
    params = tool.parameters or {}
    props = params.get("properties") if isinstance(params.get("properties"), dict) else {}
    assert isinstance(props, dict)
    undocumented = [k for k, v in props.items() if not (isinstance(v, dict) and str(v.get("description", "")).strip())]
    untyped = [k for k, v in props.items() if not (isinstance(v, dict) and _has_type(v))]
    if undocumented:
        problems.append(f"parameters without a description: {', '.join(undocumented)}")
    if untyped:
        problems.append(f"parameters without a type: {', '.join(untyped)}")
    if len(props) > rules.max_parameters:
        problems.append(f"{len(props)} parameters (max {rules.max_parameters})")
    required = params.get("required") if isinstance(params.get("required"), list) else []
    optional = [k for k in props if k not in (required or [])]
    if len(optional) > rules.max_optional_parameters:
        problems.append(f"{len(optional)} optional parameters (max {rules.max_optional_parameters})")
    return problems


def _has_type(prop: dict[str, Any]) -> bool:
    return any(key in prop for key in ("type", "enum", "const", "$ref", "anyOf", "oneOf", "allOf"))


@register
class ToolDescriptionReliability(Scorer):
    """Offered tools are well described: descriptions, documented and typed parameters, few optional ones."""

    name: ClassVar[str] = "tool_description_reliability"
    reads_histories: ClassVar[bool] = False

    threshold: float = Field(default=0.8, ge=0.0, le=1.0)
    """Minimum fraction of tools passing every check."""
    min_description_chars: int = Field(default=20, ge=1)
    """Shortest acceptable tool description."""
    max_parameters: int = Field(default=5, ge=0)
    """Most parameters a tool should take."""
    max_optional_parameters: int = Field(default=3, ge=0)
    """Most optional parameters a tool should take."""

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        """Grade every offered tool definition."""
        tools = trace.tool_schemas
        if not tools:
            return self.result(None, reason="No tool definitions were recorded in the trace.")
        return self.graded([(t.name, description_problems(t, self)) for t in tools])

    def graded(self, findings: list[tuple[str, list[str]]]) -> Score:
        """The score of each offered tool's `(name, problems)`."""
        problems = {name: p for name, p in findings if p}
        value = (len(findings) - len(problems)) / len(findings)
        passed = value >= self.threshold
        parts = [f"{name}: {'; '.join(p)}" for name, p in problems.items()]
        reason = " | ".join(parts) + "." if parts else f"All {len(findings)} tool definitions are well described."
        return self.result(passed, value, reason, problems=problems)


# The columnar forms (see `columns.py`): a sure pass with the reference's exact `Score`, else `None`:
# the offered tools (`tool_schemas` column) and called names, graded by the rules above; a tool's
# grade is kept per scorer, since every row of a run usually offers the same tools.


@columnar_form(ToolNameReliability)
def tool_name_reliability_form(scorer: ToolNameReliability, row: RowCalls) -> Score | None:
    """The passing `Score` of `tool_name_reliability` when every called name was offered and enough names are clear."""
    offered = [tool["name"] for tool in offered_tools(row)]
    called = list(dict.fromkeys(row.names))
    if not offered and not called:
        return None
    if offered and any(name not in offered for name in called):
        return None
    found = scorer.graded(
        offered or called, [], lambda n: _graded(scorer, (n,), functools.partial(name_problems, n, scorer))
    )
    return found if found.passed else None


@columnar_form(ToolDescriptionReliability)
def tool_description_reliability_form(scorer: ToolDescriptionReliability, row: RowCalls) -> Score | None:
    """The passing `Score` of `tool_description_reliability` when enough offered tools are well described."""
    tools = offered_tools(row)
    if not tools:
        return None
    findings = []
    for tool in tools:
        key = (tool["name"], tool["description"], tool["parameters_json"])
        findings.append((tool["name"], _graded(scorer, key, functools.partial(_described, tool, scorer))))
    found = scorer.graded(findings)
    return found if found.passed else None


def _described(tool: dict[str, Any], scorer: ToolDescriptionReliability) -> list[str]:
    """The reference's findings on one offered tool, from its `tool_schemas` entry."""
    parameters = schema_parameters(tool["parameters_json"])
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
