"""The spec file: cases, their expectations, the confidence threshold and how repeats aggregate.

A spec is YAML or JSON (docs/scoring.md, "The spec"). Its models are strict: an unknown key is an error naming
the key, never silently ignored. The JSON Schema evaltrace ships (`spec_schema.json`,
`evaltrace schema`) is generated from these models, so editors and the loader agree.

Keys under a case's `expect` are scorer configuration (see `evaluators/scoring/spec/_expect.py` for the
mapping): the keys declared on `Expect` map to the rule scorers, and any other key must be a
registered scorer name whose value is that scorer's config (e.g. a judge's
`task_completion: {tasks: [...]}`).

`repeat` says how several traces of one case (repeated runs) decide the case's outcome:

- `mean` (default): the case contributes its sample pass rate (passed samples / scored samples)
  to the gate's pass rate; the entry counts as passed only when every sample passed.
- `all`: the case passes when every sample passes (contributes 1 or 0).
- `majority`: the case passes when more than half of its samples pass.
- `pass@k`: the case passes when at least one of its first `k` samples (by start time) passes.

`min_samples` (default 1) is the number of samples a case needs: with fewer, the case fails and
is reported as missing samples. Nothing from a spec is ever evaluated as code.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from evaltrace.evaluators.scoring.scorers.arguments import ExpectedCall
from evaltrace.evaluators.scoring.scorers.prices import ModelPrice

TrajectoryMode = Literal["strict", "in_order", "any_order", "superset", "subset", "precision", "recall"]
AggregationRule = Literal["mean", "all", "majority", "pass@k"]
OutcomeLabel = Literal["success", "failure", "error", "timeout"]

StrList = str | list[str]
"""One string or a list of strings."""
RepeatShorthand = Annotated[str, Field(pattern=r"^(mean|all|majority|pass@[1-9][0-9]*)$")]
"""`all`, `mean`, `majority` or `pass@3` in place of a `repeat` object."""
ScorerConfig = dict[str, Any] | None
ScorerRef = str | Annotated[dict[str, ScorerConfig], Field(min_length=1, max_length=1)]
"""A scorer by name, or `{name: {config}}`."""


class _SpecModel(BaseModel):
    # Validators built on first use (`defer_build`, on every model here): a spec read back from the
    # cache is never validated, and building them was half of importing this module.
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True, defer_build=True)


class ExpectedToolCall(ExpectedCall):
    """A tool call the agent is expected to make."""

    # A subclass of the scorers' `ExpectedCall`: pydantic takes an instance of a field's model class
    # (or of a subclass) as it is, so the trajectory checks of a case hold these very objects instead
    # of a validated copy of each call and its arguments (a third of a 10,000-case spec's memory).
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True, defer_build=True)

    name: str = Field(min_length=1)
    """Tool name."""
    arguments: dict[str, Any] | None = None
    """Expected arguments, compared with the argument matcher; omitted = not compared."""


class TrajectoryOptions(_SpecModel):
    """How the actual tool calls are compared with `tool_calls`."""

    mode: TrajectoryMode = "in_order"
    """strict | in_order | any_order | superset | subset | precision | recall."""
    threshold: float | None = Field(default=None, ge=0, le=1)
    """Minimum precision/recall for those modes (default 1.0)."""
    arguments: dict[str, Any] | None = None
    """Argument matcher config: mode (exact|subset|superset|ignore), trim, casefold, per_tool."""


class OutputExpect(_SpecModel):
    """Checks on the final answer text."""

    contains: StrList | None = None
    """Substrings the answer must contain."""
    not_contains: StrList | None = None
    """Substrings the answer must not contain."""
    regex: StrList | None = None
    """Regular expression(s) the answer must match (re.search)."""
    equals: str | None = None
    """The exact answer (surrounding whitespace ignored)."""
    json_schema: dict[str, Any] | None = None
    """A JSON Schema the answer, parsed as JSON, must satisfy."""
    case_sensitive: bool | None = None
    """Compare contains/not_contains/equals case-sensitively (the scorer's default when omitted)."""

    @field_validator("regex")
    @classmethod
    def _check_regex(cls, value: StrList | None) -> StrList | None:
        return valid_regexes(value)


def valid_regexes(value: StrList | None) -> StrList | None:
    """`value` unchanged if each pattern compiles; a `ValueError` naming the first that does not.

    The pattern is shown as written (not its repr, which doubles every backslash).
    """
    for pattern in [value] if isinstance(value, str) else value or []:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"invalid regular expression '{pattern}': {exc.msg}") from None
    return value


class Expect(BaseModel):
    """What a case (or turn) expects; every key becomes scorer configuration."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True, frozen=True, defer_build=True)

    __pydantic_extra__: dict[str, ScorerConfig] = Field(init=False)

    tool_calls: list[ExpectedToolCall] | None = None
    """Expected tool calls, checked by the `trajectory` scorer."""
    trajectory: TrajectoryMode | TrajectoryOptions | None = None
    """How `tool_calls` are compared (default in_order)."""
    tool_correctness: dict[str, Any] | None = None
    """`{mode: names|order|arguments, threshold}` against `tool_calls`."""
    output: OutputExpect | None = None
    """Checks on the final answer."""
    steps: dict[str, Any] | None = None
    """`{contains: [{name, arguments?}], not_contains: [name], regex: [{name?, arguments?, result?}]}`."""
    usage: dict[str, Any] | None = None
    """Token limits, per model and in total."""
    latency: dict[str, Any] | None = None
    """`{max_seconds, max_iteration_seconds}`."""
    cost: dict[str, Any] | None = None
    """`{max_usd, prices: {model: {input_per_mtok, output_per_mtok}}}`."""
    budget: dict[str, Any] | None = None
    """`{max_tool_calls, max_model_calls, max_steps}`."""
    outcome: OutcomeLabel | None = None
    """The expected outcome of the run."""
    answer: dict[str, Any] | None = None
    """`{expected, facts, fields, aliases, weights, threshold}`: the weighted answer_quality score (40/40/20)."""


class RepeatPolicy(_SpecModel):
    """How the samples (repeated runs) of a case decide its outcome."""

    rule: AggregationRule = "mean"
    """mean | all | majority | pass@k."""
    k: int | None = Field(default=None, ge=1)
    """For pass@k: how many of the first samples are considered."""
    min_samples: int = Field(default=1, ge=1)
    """Fewer matching samples than this fails the case."""

    @model_validator(mode="after")
    def _check_k(self) -> RepeatPolicy:
        if self.rule == "pass@k" and self.k is None:
            raise ValueError("rule 'pass@k' needs k (e.g. k: 3)")
        if self.rule != "pass@k" and self.k is not None:
            raise ValueError(f"k only applies to rule 'pass@k', not {self.rule!r}")
        return self


def resolve_repeat(value: RepeatPolicy | str | None) -> RepeatPolicy:
    """The policy a `repeat` value stands for (shorthand strings expanded, `None` = defaults)."""
    if isinstance(value, RepeatPolicy):
        return value
    return _policy_for(value)


@cache
def _policy_for(value: str | None) -> RepeatPolicy:
    # One (frozen) policy per shorthand: the engine and the score store ask for every case's, and
    # a 10,000-case spec without `repeat` built 20,000 equal default policies.
    if value is None:
        return RepeatPolicy()
    if value.startswith("pass@"):
        return RepeatPolicy(rule="pass@k", k=int(value.removeprefix("pass@")))
    rule: AggregationRule = "all" if value == "all" else "majority" if value == "majority" else "mean"
    return RepeatPolicy(rule=rule)


def normalize_input(text: str | None) -> str | None:
    """Whitespace-normalised input: runs of whitespace become one space, ends trimmed."""
    return None if text is None else " ".join(text.split())


class Turn(_SpecModel):
    """One user message of a multi-turn case, with its own expectations."""

    input: str
    """What the user says in this turn."""
    expected_output: str | None = None
    """A reference answer for scorers that use one."""
    expect: Expect | None = None
    """This turn's expectations."""


class Case(_SpecModel):
    """One entry of the spec: an input (or turns) and what the agent is expected to do."""

    id: str = Field(min_length=1)
    """Unique id; traces carrying the span attribute `evaltrace.case_id` with this value match."""
    description: str | None = None
    input: str | None = None
    """The user's message; traces whose whitespace-normalised input equals it match."""
    turns: list[Turn] | None = Field(default=None, min_length=1)
    """For a multi-turn case (instead of input/expect): turns matched in order to one conversation."""
    tier: str | None = None
    """Free-form tier for selection (`--tier smoke`)."""
    tags: list[str] = Field(default_factory=list)
    """Free-form tags for selection (`--tag`)."""
    expected_output: str | None = None
    """A reference answer for scorers that use one."""
    expect: Expect | None = None
    """The expectations, each turned into a scorer."""
    repeat: RepeatPolicy | RepeatShorthand | None = None
    """How repeated runs of this case aggregate (overrides the spec's `repeat`)."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Anything, carried into the report."""

    @model_validator(mode="after")
    def _check_shape(self) -> Case:
        if self.turns is None and self.input is None:
            raise ValueError("a case needs 'input' (or 'turns' for a multi-turn case)")
        if self.turns is not None and (self.input is not None or self.expect is not None):
            raise ValueError("a multi-turn case puts 'input' and 'expect' inside each turn, not on the case")
        return self

    @property
    def is_multi_turn(self) -> bool:
        """Whether the case is matched to a conversation turn by turn."""
        return self.turns is not None


class Spec(_SpecModel):
    """A spec file: the cases, global scorers, the gate's confidence threshold."""

    model_config = ConfigDict(
        extra="forbid", use_attribute_docstrings=True, frozen=True, populate_by_name=True, title="evaltrace spec"
    )

    schema_ref: str | None = Field(default=None, alias="$schema")
    """URL or path of this JSON Schema, for editors."""
    description: str | None = None
    confidence: float | None = Field(default=None, ge=0, le=1)
    """Minimum pass rate of the entries for the gate to pass (default 1.0)."""
    scorers: list[ScorerRef] = Field(default_factory=list)
    """Scorers applied to every entry, by name or `{name: {config}}`."""
    repeat: RepeatPolicy | RepeatShorthand | None = None
    """How repeated runs of a case aggregate (default mean)."""
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    """Model prices (USD per million tokens) for the report's estimated cost, on top of the built-in table."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    cases: list[Case] = Field(min_length=1)

    @model_validator(mode="after")
    def _check_unique_ids(self) -> Spec:
        seen: set[str] = set()
        for case in self.cases:
            if case.id in seen:
                raise ValueError(f"duplicate case id {case.id!r}: case ids must be unique")
            seen.add(case.id)
        return self

    def repeat_for(self, case: Case) -> RepeatPolicy:
        """The repeat policy that applies to `case`."""
        return resolve_repeat(case.repeat if case.repeat is not None else self.repeat)


def spec_json_schema() -> dict[str, Any]:
    """The JSON Schema of spec files, as shipped in `spec_schema.json`."""
    schema = Spec.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema
