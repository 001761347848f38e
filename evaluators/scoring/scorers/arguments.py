"""The scorers' argument settings and the pairing of expected with actual tool calls.

Values are compared by the collector's one argument matcher (`evaltrace.collector.traces.arguments`,
which documents the tolerances: numbers by value, booleans apart, opt-in `trim` and `casefold`);
`ArgumentMatch` is the spec's form of its rules, with per-tool overrides.

Key modes (`ArgumentMatch.mode`) say how the actual key set relates to the expected one:
`exact` (same keys), `subset` (the expected keys are in the actual arguments, extras allowed;
the default), `superset` (the actual keys are all expected, omissions allowed), `ignore`.

Repeated tool names are paired by maximum bipartite matching (Kuhn's augmenting paths,
O(V * E)), never greedily: a greedy pass can use up the one actual call a later expectation
needed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from evaltrace.collector.traces.arguments import (
    KeyMode,
    arguments_match,
    describe_raw,
    is_number,
    iter_argument_diffs,
)
from evaltrace.collector.traces.arguments import short as short
from evaltrace.collector.traces.records import ToolCall
from evaltrace.evaluators.scoring.scorers.base import Scorer


class _Config(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class ArgumentMatchOverride(_Config):
    """Per-tool changes to the default `ArgumentMatch`; unset fields keep the default."""

    mode: KeyMode | None = None
    """Key mode for this tool."""
    trim: bool | None = None
    """Strip whitespace around strings before comparing."""
    casefold: bool | None = None
    """Compare strings case-insensitively."""


class ArgumentMatch(_Config):
    """How expected tool arguments are compared with the recorded ones."""

    mode: KeyMode = "subset"
    """exact: same keys; subset: expected keys present, extras allowed; superset: no unexpected keys; ignore."""
    trim: bool = False
    """Strip whitespace around strings before comparing."""
    casefold: bool = False
    """Compare strings case-insensitively."""
    per_tool: dict[str, ArgumentMatchOverride] = Field(default_factory=dict)
    """Overrides for individual tools, by tool name."""

    def for_tool(self, name: str) -> ArgumentMatch:
        """The settings that apply to tool `name` (its override merged over the defaults)."""
        override = self.per_tool.get(name)
        if override is None:
            return self
        changes = {k: v for k, v in override.model_dump().items() if v is not None}
        return self.model_copy(update={**changes, "per_tool": {}})


class ExpectedCall(_Config):
    """A tool call the agent is expected to make."""

    name: str
    """Tool name."""
    arguments: dict[str, Any] | None = None
    """Expected arguments; `None` means the arguments are not compared."""


class ExpectedCallsScorer(Scorer):
    """The part `tool_correctness` and `trajectory` share: the expected calls, needed to apply at all."""

    expected: list[ExpectedCall] | None = None
    """Expected calls (in order, for the modes that compare it); `None` means there is nothing to compare
    (not applicable)."""

    def configuration_problem(self) -> str | None:
        """No expected calls configured."""
        if self.expected is None:
            return "no expected tool calls are configured: give expected (a case's tool_calls)"
        return None


def argument_diffs(expected: ExpectedCall, call: ToolCall, match: ArgumentMatch) -> list[str]:
    """Why `call`'s arguments do not satisfy `expected` (empty list: they do).

    Args:
        expected: The expected call; its `arguments=None` means "do not compare".
        call: The recorded call (same tool name assumed).
        match: Default settings; `match.per_tool[call.name]` overrides them.

    Returns:
        One message per difference.
    """
    return list(_argument_diffs(expected, call, match))


def call_matches(expected: ExpectedCall, call: ToolCall, match: ArgumentMatch) -> bool:
    """Whether `call` has the expected name and arguments (`argument_diffs` would find nothing).

    The answer of `argument_diffs` without its messages (`arguments_match`): alignment asks every
    expected call about every same-name call and only the answer matters there.
    """
    return expected_matches(expected, call.name, call.arguments, call.arguments_truncated, match)


def expected_matches(expected: ExpectedCall, name: str, arguments: Any, truncated: bool, match: ArgumentMatch) -> bool:
    """`call_matches` of a call given by its name and recorded arguments (a table row's)."""
    if expected.name != name:
        return False
    compared = _compared(expected, match)
    return compared is None or arguments_match(compared[0], arguments, truncated, compared[1])


def _argument_diffs(expected: ExpectedCall, call: ToolCall, match: ArgumentMatch) -> Iterator[str]:
    compared = _compared(expected, match)
    if compared is not None:
        arguments, rules = compared
        yield from iter_argument_diffs(arguments, call.arguments, call.arguments_truncated, rules)


def _compared(expected: ExpectedCall, match: ArgumentMatch) -> tuple[dict[str, Any], ArgumentMatch] | None:
    """The expected arguments and the rules they are compared under; `None`: they are not compared."""
    rules = match.for_tool(expected.name)
    return None if expected.arguments is None or rules.mode == "ignore" else (expected.arguments, rules)


def describe_raw_arguments(call: ToolCall) -> str:
    """A short description of `call`'s arguments when they are not a JSON object."""
    return describe_raw(call.arguments, call.arguments_truncated)


def max_bipartite_matching(
    n_left: int,
    n_right: int,
    compatible: Callable[[int, int], bool],
    candidates: Callable[[int], Iterable[int]] | None = None,
) -> dict[int, int]:
    """A maximum matching between left and right items (Kuhn's augmenting paths, O(V * E)).

    Args:
        n_left: Number of left items (e.g. expected calls).
        n_right: Number of right items (e.g. actual calls).
        compatible: Whether left item i may be paired with right item j; asked only of the pairs
            the search reaches, so a lazy answer (a matcher's) is asked as little as possible.
        candidates: The right items left item i may pair with, ascending (default: all); a
            narrower list (the calls of one tool name) gives the same matching, sooner.

    Returns:
        The pairs as `{left: right}`; its size is the largest possible. Left items are taken in
        turn, each trying right items in ascending order: every caller gets the same pairs.
    """
    search = _Kuhn(compatible, candidates or (lambda i: range(n_right)))
    for i in range(n_left):
        search.augment(i, set())
    return {i: j for j, i in search.owner.items()}


class _Kuhn:
    """The augmenting-path search of `max_bipartite_matching`, from one left item at a time.

    A class, not a recursive closure: a closure that calls itself is a reference cycle per call,
    left for the garbage collector, which then ran many times as often over a scoring's heap.
    """

    def __init__(self, compatible: Callable[[int, int], bool], candidates: Callable[[int], Iterable[int]]) -> None:
        self.compatible, self.candidates = compatible, candidates
        self.owner: dict[int, int] = {}

    def augment(self, i: int, seen: set[int]) -> bool:
        owner = self.owner
        for j in self.candidates(i):
            if j in seen or not self.compatible(i, j):
                continue
            seen.add(j)
            if j not in owner or self.augment(owner[j], seen):
                owner[j] = i
                return True
        return False


def positions(names: list[str]) -> dict[str, list[int]]:
    """Each name's positions in `names`, ascending (the candidates of a matching by name)."""
    found: dict[str, list[int]] = {}
    for j, name in enumerate(names):
        found.setdefault(name, []).append(j)
    return found


def lcs_pairs(n_left: int, n_right: int, compatible: Callable[[int, int], bool]) -> list[tuple[int, int]]:
    """The pairs of a longest common subsequence under `compatible` (order kept on both sides).

    Args:
        n_left: Length of the left sequence.
        n_right: Length of the right sequence.
        compatible: Whether left item i may be paired with right item j.

    Returns:
        `(left, right)` index pairs, increasing on both sides.
    """
    # A compatible pair (k, k) after a prefix of them is in a longest subsequence (any pair using item k
    # on one side can be swapped for it), so the walk below takes it: only the rest needs the table.
    start = 0
    while start < n_left and start < n_right and compatible(start, start):
        start += 1
    pairs = [(k, k) for k in range(start)]
    ok = [[compatible(i, j) for j in range(start, n_right)] for i in range(start, n_left)]
    n_left, n_right = n_left - start, n_right - start
    table = [[0] * (n_right + 1) for _ in range(n_left + 1)]
    for i in range(n_left - 1, -1, -1):
        for j in range(n_right - 1, -1, -1):
            if ok[i][j]:
                table[i][j] = table[i + 1][j + 1] + 1
            else:
                table[i][j] = max(table[i + 1][j], table[i][j + 1])
    i = j = 0
    while i < n_left and j < n_right:
        if ok[i][j] and table[i][j] == table[i + 1][j + 1] + 1:
            pairs.append((i + start, j + start))
            i, j = i + 1, j + 1
        elif table[i + 1][j] >= table[i][j + 1]:
            i += 1
        else:
            j += 1
    return pairs


Arguments = dict[str, Any] | None
"""An expected call's arguments (`None`: not compared)."""


def compared_flags(match: ArgumentMatch, names: list[str], arguments: list[Arguments]) -> list[bool]:
    """Per expected call, whether its arguments are compared (given, and its tool's mode not `ignore`)."""
    if match.per_tool:
        return [
            a is not None and match.for_tool(name).mode != "ignore" for name, a in zip(names, arguments, strict=True)
        ]
    if match.mode == "ignore":
        return [False] * len(arguments)
    return [True] * len(arguments) if None not in arguments else [a is not None for a in arguments]


def canonical_arguments(arguments: Any) -> str:
    """A stable text form of arguments where `1` and `1.0` are the same value (used for redundancy)."""
    return _CANONICAL.encode(_canonical(arguments))


_CANONICAL = json.JSONEncoder(sort_keys=True, default=str)


def _canonical(value: Any) -> Any:
    # Exact types first: every call of every trace passes through here, and arguments decoded
    # from JSON hold nothing else. Subclasses (an IntEnum, an OrderedDict) take the general path.
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is dict:
        return {k if type(k) is str else str(k): _canonical(v) for k, v in value.items()}
    if kind is float:
        return int(value) if value.is_integer() else value
    if kind is list:
        return [_canonical(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    if is_number(value) and float(value).is_integer():
        return int(value)
    return value


def clip(text: str, limit: int = 100) -> str:
    """`text` on one line, cut to `limit` characters (no quoting, unlike `short`)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def format_call(name: str, arguments: Any) -> str:
    """`name(key=value, ...)` for messages."""
    if arguments is None:
        return f"{name}(...)"
    if isinstance(arguments, dict):
        inner = ", ".join(f"{k}={short(v, 30)}" for k, v in arguments.items())
        return f"{name}({inner if len(inner) <= 80 else inner[:77] + '...'})"
    return f"{name}({short(arguments, 40)})"


def call_label(index: int, name: str) -> str:
    """`call #N name` (1-based) for messages that point at one recorded call."""
    return f"call #{index + 1} {name}"
