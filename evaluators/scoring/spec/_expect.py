"""From a case's `expect:` (and the spec's `scorers:`) to scorer instances.

Expectations are scorer configuration (see the scoring interface): each `expect` key becomes one
or more scorers whose config carries the expectation, so every scorer is self-contained.

- `tool_calls` (+ `trajectory`: a mode or `{mode, threshold, arguments}`) -> `trajectory`
  with `expected`, `mode`, `threshold`, `arguments`.
- `tool_correctness: {mode, threshold}` -> `tool_correctness` with `expected` from `tool_calls`.
- `output`, `steps`, `usage`, `latency`, `cost`, `budget` -> the scorer of the same name.
- `outcome: success` -> `outcome` with `expected`.
- `answer: {...}` -> `answer_quality`, the weighted groundedness / correctness / completeness score
  (40/40/20 by default) that gates, as in the seed's evaluation; its details carry each axis. A
  case that must pass one axis on its own names it: `expect: {groundedness: {...}}`.
- any other key -> the registered scorer of that name, with the value as its config.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from pydantic import ValidationError

from evaltrace.collector.registry import did_you_mean
from evaltrace.evaluators.errors import SpecError, UnknownScorerError
from evaltrace.evaluators.scoring.scorers.arguments import ArgumentMatch
from evaltrace.evaluators.scoring.scorers.base import Scorer
from evaltrace.evaluators.scoring.scorers.registry import scorer_class, scorer_names
from evaltrace.evaluators.scoring.spec.model import Expect, ScorerRef, TrajectoryOptions

_PASSTHROUGH = ("output", "steps", "usage", "latency", "cost", "budget")
ANSWER_SCORER = "answer_quality"


class ScorerRequest(NamedTuple):
    """A scorer to build: its registered name, its config and the spec key it came from.

    A tuple rather than a frozen dataclass: a 10,000-case spec makes ~35,000 of them.
    """

    name: str
    config: dict[str, Any]
    key: str
    """Spec key path relative to the case (or the spec), e.g. `expect.output`."""


def expect_requests(expect: Expect, prefix: str = "expect") -> list[ScorerRequest]:
    """The scorers a case's (or turn's) `expect` stands for, in a stable order.

    Raises:
        ValueError: `trajectory` or `tool_correctness` without `tool_calls` (the message names the key).
    """
    requests = _tool_requests(expect, prefix)
    for key in _PASSTHROUGH:
        value = getattr(expect, key)
        if value is not None:
            config = value if isinstance(value, dict) else _output_config(value.model_dump(exclude_none=True))
            requests.append(ScorerRequest(key, config, f"{prefix}.{key}"))
    if expect.outcome is not None:
        requests.append(ScorerRequest("outcome", {"expected": expect.outcome}, f"{prefix}.outcome"))
    if expect.answer is not None:
        requests.append(ScorerRequest(ANSWER_SCORER, dict(expect.answer), f"{prefix}.answer"))
    for key, value in (expect.model_extra or {}).items():
        requests.append(ScorerRequest(key, dict(value or {}), f"{prefix}.{key}"))
    return requests


def _tool_requests(expect: Expect, prefix: str) -> list[ScorerRequest]:
    if expect.tool_calls is None:
        for key in ("trajectory", "tool_correctness"):
            if getattr(expect, key) is not None:
                raise ValueError(f"{prefix}.{key}: needs {prefix}.tool_calls (the expected calls)")
        return []
    # The calls themselves: an `ExpectedToolCall` is an `ExpectedCall`, which the scorers' validation
    # takes as it is (no copy of each call and its arguments per scorer).
    expected = list(expect.tool_calls)
    options = expect.trajectory
    if isinstance(options, TrajectoryOptions):
        # `options.model_dump(exclude_none=True)` written out: the serializer's per-call cost was a
        # tenth of loading a 10,000-case spec.
        config: dict[str, Any] = {"expected": expected, "mode": options.mode}
        if options.threshold is not None:
            config["threshold"] = options.threshold
        if options.arguments is not None:
            config["arguments"] = options.arguments
    else:
        config = {"expected": expected, "mode": options or "in_order"}
    requests = [ScorerRequest("trajectory", config, f"{prefix}.tool_calls")]
    if expect.tool_correctness is not None:
        correctness = {"expected": expected, **expect.tool_correctness}
        requests.append(ScorerRequest("tool_correctness", correctness, f"{prefix}.tool_correctness"))
    return requests


def _output_config(config: dict[str, Any]) -> dict[str, Any]:
    # `contains: "18"` is a convenience for `contains: ["18"]`; the scorer takes lists.
    for key in ("contains", "not_contains"):
        if isinstance(config.get(key), str):
            config[key] = [config[key]]
    return config


def scorer_ref_request(ref: ScorerRef, index: int) -> ScorerRequest:
    """The request for one entry of the spec's global `scorers:` list."""
    if isinstance(ref, str):
        return ScorerRequest(ref, {}, f"scorers[{index}]")
    ((name, config),) = ref.items()
    return ScorerRequest(name, dict(config or {}), f"scorers[{index}].{name}")


class ScorerBuilder:
    """Builds the scorers of one spec, once per distinct (name, config).

    A 10,000-case spec asks for the same `usage`, `outcome` or `output` check thousands of times;
    scorers are immutable, so those cases share one instance, as every case shares the spec's
    global scorers. Configs count as the same when their `repr`s are equal: parsed spec values are
    builtins (str, int, float, bool, None, lists, dicts, dates), whose `repr` tells every type and
    value apart (`1`, `1.0`, `True` and `'1'` differ). The trajectory checks carry the case's own
    expected calls, which seldom repeat: they are built each time, since spelling out their
    configs cost more than the few repeats saved.
    """

    _UNSHARED = frozenset({"trajectory", "tool_correctness"})

    def __init__(self) -> None:
        self._built: dict[tuple[str, str], Scorer] = {}
        self._matchers: dict[str, ArgumentMatch] = {}

    def build(self, request: ScorerRequest, where: str) -> Scorer:
        """`build_scorer(request, where)`, or the instance built before for the same name and config."""
        if request.name in self._UNSHARED:
            return build_scorer(self._with_shared_matcher(request), where)
        key = (request.name, repr(request.config))
        scorer = self._built.get(key)
        if scorer is None:
            scorer = self._built[key] = build_scorer(request, where)
        return scorer

    def _with_shared_matcher(self, request: ScorerRequest) -> ScorerRequest:
        """`request` with its trajectory `arguments` settings as one `ArgumentMatch` shared by equal configs.

        The settings seldom differ between cases (`{mode: exact}`): validated once, not once a case.
        Settings that do not validate are left as written, for the scorer's validation to report
        them as it reports any other key.
        """
        arguments = request.config.get("arguments")
        if request.name != "trajectory" or not isinstance(arguments, dict):
            return request
        key = repr(arguments)
        match = self._matchers.get(key)
        if match is None:
            try:
                match = self._matchers[key] = ArgumentMatch.model_validate(arguments)
            except ValidationError:
                return request
        return ScorerRequest(request.name, {**request.config, "arguments": match}, request.key)


def unknown_expect_key(key: str) -> str:
    """`unknown key (did you mean 'x'?): not an expect key (...) nor a registered scorer (...)`."""
    keys = ", ".join(Expect.model_fields)
    hint = did_you_mean(key, [*Expect.model_fields, *scorer_names()])
    return (
        f"unknown key{hint}: not an expect key ({keys}) nor a registered scorer "
        f"(valid scorers: {', '.join(scorer_names())})"
    )


def undeclared_expect_key(key: str) -> str | None:
    """`unknown_expect_key`'s message for a key of `expect` that is no scorer's name, else `None`."""
    return None if key in scorer_names() else unknown_expect_key(key)


def build_scorer(request: ScorerRequest, where: str) -> Scorer:
    """Instantiate the scorer as a spec check; errors name `where` (file and case) and the key.

    Raises:
        SpecError: an unknown scorer name, an invalid config, or a config that checks nothing.
    """
    try:
        cls = scorer_class(request.name)
    except UnknownScorerError as exc:
        declared = request.key.rsplit(".", 1)[-1] in Expect.model_fields
        if request.key.startswith(("expect.", "turns")) and not declared:
            raise SpecError(f"{where}: {request.key}: {unknown_expect_key(request.name)}") from None
        raise SpecError(f"{where}: {request.key}: {exc}") from None
    try:
        scorer = cls.model_validate(request.config)
    except ValidationError as exc:
        raise SpecError(f"{where}: {request.key}: scorer {request.name!r}: {_render(exc)}") from None
    problem = scorer.configuration_problem()
    if problem is not None:
        raise SpecError(f"{where}: {request.key}: scorer {request.name!r}: {problem}")
    # Written in a spec, so a check: it fails, never "does not apply", when its evidence is missing.
    # The scorer was built here and is not shared yet: marked as it is, not copied.
    return scorer.mark_spec_check()


def _render(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        message = str(err["msg"]).removeprefix("Value error, ")
        parts.append(f"{loc}: {message}" if loc else message)
    return "; ".join(parts)
