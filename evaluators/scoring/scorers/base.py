"""The scorer interface and its result type.

A scorer is a small pydantic model whose fields are its configuration (unknown keys rejected),
registered by name. `score(trace, case)` returns a `Score`; `passed=None` means the scorer does
not apply to that entry. Every scorer runs through `run_scorer`, which turns an exception into
an error result: one broken scorer never stops a run and never counts as a pass.

A scorer written in a spec is a check, and a check always applies (docs/scoring.md, "Nothing passes silently"): the spec
loader marks it (`as_spec_check`), a scorer whose evidence was not recorded reports it with
`missing` (a failure for a check, "does not apply" for a reference-free default), and
`run_scorer` turns any `passed=None` a check still returns into a failure, so no spec check can
pass silently. "Does not apply" is left to the reference-free defaults of a run without a spec.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, PrivateAttr
from pydantic_core import to_jsonable_python

from evaltrace.collector.traces.records import Trace

_HASH = "_config_hash"
"""The key of `config_hash`'s digest among a scorer's private attributes: kept with the scorer (so
in the compiled-spec cache too: a 10,000-case spec's 10,000 scorers are hashed once, when it is
compiled, and each hashed again by the report and the score store). A scorer is frozen; a copy with
changes (`model_copy(update=...)`) drops the digest."""


_CANONICAL = json.JSONEncoder(sort_keys=True, default=str, check_circular=False)
"""The configuration's canonical text (what `json.dumps(config, sort_keys=True, default=str)` gives:
the digests of earlier reports stay valid). One encoder for every scorer; a JSON-mode dump has no
cycles to check for."""


class Score(BaseModel):
    """One scorer's verdict on one entry."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    scorer: str
    """Registered name of the scorer."""
    passed: bool | None
    """`True`/`False`, or `None` when the scorer does not apply (or could not run: see `error`)."""
    value: float | None = None
    """A graded value in [0, 1] where the scorer has one."""
    reason: str | None = None
    """Why, in one or two sentences a person can act on."""
    error: str | None = None
    """Set when the scorer failed to run: the entry then fails, it never passes by default."""
    details: dict[str, Any] | None = None
    """Structured extras (per-call findings, judge usage, cache hit)."""


class Scorer(BaseModel, ABC):
    """Base of every scorer: fields are configuration, `name` is the registry key."""

    # Attribute docstrings become field descriptions, which `evaltrace scorers` lists. Validators
    # are built when a scorer is first configured (`defer_build`): a run uses a few of the
    # registered scorers, and building all of them made up a tenth of a small run's start-up.
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True, defer_build=True)

    name: ClassVar[str]
    version: ClassVar[int] = 1
    """Bumped when a scorer's verdicts change for the same input, so old reports can be compared."""
    uses_judge: ClassVar[bool] = False
    """Whether `ascore` asks the LLM judge (the run then opens one judge session for all of them).
    An async custom scorer that does its own I/O keeps the default."""
    reads_histories: ClassVar[bool] = True
    """Whether `score` reads the iterations' prompts (`Iteration.input_messages`). A run whose
    scorers all say no reads traces without them (up to a quarter less work); such a scorer sees
    them as `None`. Custom scorers keep the safe default."""

    _spec_check: bool = PrivateAttr(default=False)
    # Not a field: whether a scorer is a spec check is where it came from, not configuration a
    # spec could set (and a private attribute stays out of `model_dump` and the JSON Schema).

    @property
    def spec_check(self) -> bool:
        """Whether this scorer is a check written in a spec: it then always applies."""
        return self._spec_check

    def as_spec_check(self) -> Self:
        """A copy marked as written in a spec."""
        return self.model_copy().mark_spec_check()

    def mark_spec_check(self) -> Self:
        """This scorer, marked in place as written in a spec; only for one nothing else holds yet.

        The spec loader marks every scorer it builds this way: a copy of each (`as_spec_check`)
        was a fifth of compiling a 10,000-case spec. The mark is part of `config_hash`, so a digest
        computed before is dropped.
        """
        self._spec_check = True
        self._forget_hash()
        return self

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy; with `update`, one whose digest is made again (`config_hash`)."""
        copied = super().model_copy(update=update, deep=deep)
        if update:
            copied._forget_hash()
        return copied

    def _forget_hash(self) -> None:
        if self.__pydantic_private__ is not None:
            self.__pydantic_private__.pop(_HASH, None)

    def configuration_problem(self) -> str | None:
        """Why this configuration checks nothing (a spec naming it is then an error), or `None`.

        Scorers whose options are all optional override it: `output: {}` in a spec is a mistake
        to report when the spec is loaded, not a check that quietly never runs.
        """
        return None

    @abstractmethod
    def score(self, trace: Trace, case: Any | None = None) -> Score:
        """Score one trace against an optional case (the spec's expectations for it)."""

    async def ascore(self, trace: Trace, case: Any | None = None) -> Score:
        """Async entry point; judges override it to run concurrently. Rule scorers stay sync."""
        return self.score(trace, case)

    def config_hash(self, dumped: dict[str, Any] | None = None) -> str:
        """A short, stable hash of the configuration, carried in reports.

        A spec check hashes apart from the same scorer used as a default: its verdicts differ
        where evidence is missing (a failure rather than "does not apply"). `dumped`: the
        configuration's `model_dump(mode="json")` when the caller made it already.
        """
        private = self.__pydantic_private__
        known: str | None = private.get(_HASH) if private is not None else None
        if known is not None:
            return known
        blob = _CANONICAL.encode(self.model_dump(mode="json") if dumped is None else dumped)
        # Read from the private-attribute store directly: `self._spec_check` goes through
        # `BaseModel.__getattr__`, a tenth of this function's time for a 10,000-case spec.
        mark = ":check" if (private or {}).get("_spec_check") else ""
        digest = hashlib.sha256(f"{self.name}:{self.version}{mark}:{blob}".encode()).hexdigest()[:12]
        if private is not None:
            private[_HASH] = digest
        return digest

    def result(
        self, passed: bool | None, value: float | None = None, reason: str | None = None, **details: Any
    ) -> Score:
        """Build this scorer's `Score`."""
        return Score(scorer=self.name, passed=passed, value=value, reason=reason, details=details or None)

    def missing(self, reason: str, **details: Any) -> Score:
        """The result when the evidence this scorer needs was not recorded.

        A spec check fails (value 0) with `reason`, which says what is missing and how to record
        it; a reference-free default does not apply.
        """
        if self._spec_check:
            return self.result(False, 0.0, reason, unrecorded=True, **details)
        return self.result(None, reason=reason, unrecorded=True, **details)


def reads_histories(scorers: Iterable[Scorer]) -> bool:
    """Whether any of `scorers` reads the iterations' prompts (so traces must be read with them)."""
    return any(scorer.reads_histories for scorer in scorers)


def check_applies(scorer: Scorer, score: Score) -> Score:
    """`score`, or for a spec check that did not apply, the failure it stands for."""
    if score.passed is not None or score.error is not None or not scorer.spec_check:
        return score
    why = " ".join((score.reason or "no reason given").split())
    reason = f"{why} A check written in a spec must apply, so this counts as a failure."
    return score.model_copy(
        update={"passed": False, "value": 0.0 if score.value is None else score.value, "reason": reason}
    )


def error_score(name: str, exc: BaseException) -> Score:
    """The result standing in for a scorer that raised."""
    return Score(
        scorer=name, passed=False, reason=f"scorer failed: {type(exc).__name__}: {exc}", error=type(exc).__name__
    )


def run_scorer(scorer: Scorer, trace: Trace, case: Any | None = None) -> Score:
    """Run one scorer, turning any exception (or a result that is not a `Score`) into an error result."""
    try:
        return check_applies(scorer, _checked(scorer, scorer.score(trace, case)))
    except Exception as exc:  # a broken scorer must not stop the run
        return error_score(scorer.name, exc)


async def arun_scorer(scorer: Scorer, trace: Trace, case: Any | None = None) -> Score:
    """Async twin of `run_scorer`."""
    try:
        return check_applies(scorer, _checked(scorer, await scorer.ascore(trace, case)))
    except Exception as exc:  # a broken scorer must not stop the run
        return error_score(scorer.name, exc)


def _checked(scorer: Scorer, result: object) -> Score:
    # Custom scorers are plain Python: one that returns a bool or forgets `return` must give an
    # error result, not crash the report writer later.
    if not isinstance(result, Score):
        raise TypeError(f"{type(scorer).__qualname__}.score returned {type(result).__name__}, not a Score")
    if is_builtin(type(scorer)):
        return result  # the built-in scorers' results are tested to hold what follows
    if result.value is not None and not 0.0 <= result.value <= 1.0:
        raise ValueError(f"{type(scorer).__qualname__}.score gave value {result.value!r}, outside [0, 1]")
    if result.details:
        # The report is JSON: objects it cannot encode are shown by their `str` rather than
        # failing the run when the report is written.
        safe = to_jsonable_python(result.details, fallback=str)
        if safe != result.details:
            return result.model_copy(update={"details": safe})
    return result


def is_builtin(cls: type[Scorer]) -> bool:
    """Whether a scorer class ships with evaltrace (rather than coming from a plugin or a test)."""
    return cls.__module__.startswith("evaltrace.")


_PASS_FIELDS = frozenset(("scorer", "passed", "value", "reason", "details"))


def sure_pass(scorer: Scorer, value: float | None, reason: str, **details: Any) -> Score:
    """`scorer.result(True, value, reason, **details)` built as validation builds it, without validating.

    A columnar form's own values need no checking; per row, validating was a quarter of the `trajectory` form's
    time. The same `Score` (test_columnar_trajectory's `test_a_sure_pass_is_the_validated_score`).
    """
    score = Score.__new__(Score)
    fields = {"scorer": scorer.name, "passed": True, "value": value, "reason": reason, "error": None}
    held = {"__dict__": {**fields, "details": details or None}, "__pydantic_fields_set__": set(_PASS_FIELDS)}
    for slot, value_of_slot in {**held, "__pydantic_extra__": None, "__pydantic_private__": None}.items():
        object.__setattr__(score, slot, value_of_slot)
    return score
