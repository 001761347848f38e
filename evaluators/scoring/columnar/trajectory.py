"""The columnar form of `trajectory`: the passing `Score` read from a row's columns, or `None`.

Where extra calls are allowed (in_order, superset, recall): every expected call made, in order, by
a call of the same name and matching arguments, no tool name twice; the matching and ordered pairs
are those pairs, and the reason lists the extras. Where a tool name repeats (or, for superset and
recall, the order differs), the pairs are the reference's own alignment functions run on the same
question of each pair (`_aligned`). Otherwise the row's calls match the expected
calls position by position (names equal; arguments matching, or not compared). Then, in every
mode, the value is 1, nothing is missing, late or extra and the ordered pairs are the identity, so
the reference's reason and details follow from the names alone but for the maximum matching: with
no tool name twice it is the identity too; with a repeated name it is what the reference's
matching (`max_bipartite_matching`) makes of the same compatibility.

Arguments match when their JSON text equals the expected arguments encoded as the table encodes
them (equal values, which the argument matcher accepts under every setting: one encoding and one
string comparison for the whole row). Otherwise they may still match (a subset of the keys, the
default; `1` and `1.0`; `trim`): the pair is then asked of the collector's argument matcher
(`arguments_match`, the reference's own) on the row's arguments, parsed once per row and only if a
pair needs them. Not-a-number values, truncated arguments and calls that start nested agents (with
`nested`) are left to the reference.

The matching reads the row's own columns, not the decoded `Trace`: a pair of calls of one name
whose texts are equal matches (call `i` matches expected call `i`, by the position check, and call
`j` holds the same value); other pairs are asked of the matcher as above.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from operator import attrgetter
from typing import Any

from evaltrace.collector.traces.arguments import arguments_match
from evaltrace.collector.traces.records import Trace
from evaltrace.collector.traces.table import comparable_text
from evaltrace.evaluators.scoring.columnar.calls import RowCalls
from evaltrace.evaluators.scoring.scorers.arguments import (
    ArgumentMatch,
    ExpectedCall,
    lcs_pairs,
    max_bipartite_matching,
)
from evaltrace.evaluators.scoring.scorers.base import Score
from evaltrace.evaluators.scoring.scorers.trajectory import Trajectory

_EXTRAS_ALLOWED = ("in_order", "superset", "recall")
"""The modes in which calls beyond the expected ones do not lower the value (`trajectory.py`)."""

_decode = json.JSONDecoder().raw_decode
_NAME = attrgetter("name")
_ARGUMENTS = attrgetter("arguments")
Arguments = dict[str, Any] | None
"""An expected call's arguments (`None`: not compared)."""

# Nothing here is kept per scorer: a spec's scorers each score one trace, so a cache would only
# add objects for the garbage collector to walk. Per row the work is a few C-level list operations.


def trajectory_form(scorer: Trajectory, row: RowCalls, trace: Trace) -> Score | None:
    """The passing `Score` of `trajectory` when the calls are exactly the expected ones, else `None`."""
    expected = scorer.expected
    if expected is None or row.truncated or (scorer.nested and row.nested):
        return None
    names, texts = row.names, row.arguments
    wanted = list(map(_NAME, expected))
    if len(wanted) != len(names):
        return _with_extras(scorer, expected, wanted, names, texts)
    if names != wanted:
        return None
    arguments = list(map(_ARGUMENTS, expected))
    compared = _compared(scorer.arguments, wanted, arguments)
    count = len(names)
    steps = range(count)
    pairs = None
    if not _same_texts(arguments, compared, texts):  # equal values may differ in text: ask the matcher
        pairs = _Pairs(scorer.arguments, names, arguments, compared, texts)
        if not pairs.all_match(zip(steps, steps, strict=True)):
            return None
    if len(set(names)) == count:  # only same-name pairs can match: the identity is forced
        matched = _identity(steps)
    else:
        found = _matching(pairs or _Pairs(scorer.arguments, names, arguments, compared, texts))
        if found is None:
            return None
        matched = found
    why = f"all {count} expected calls matched" if count else "no calls expected or made"
    return _passed(scorer, why, wanted, names, matched, _identity(steps))


def _with_extras(
    scorer: Trajectory, expected: list[ExpectedCall], wanted: list[str], names: list[str], texts: list[str | None]
) -> Score | None:
    """The passing `Score` where extra calls are allowed: every expected call made in order, no name twice."""
    if not wanted or len(wanted) > len(names) or scorer.mode not in _EXTRAS_ALLOWED:
        return None
    if len(set(names)) != len(names):  # which call pairs with which: the reference's own alignment
        return _aligned(scorer, expected, wanted, names, texts)
    position = {name: j for j, name in enumerate(names)}
    pairs: list[list[int]] = []
    for i, name in enumerate(wanted):
        j = position.get(name)
        if j is None:
            return None
        if pairs and j <= pairs[-1][1]:  # out of order: a failure in order, allowed by superset and recall
            return None if scorer.mode == "in_order" else _aligned(scorer, expected, wanted, names, texts)
        pairs.append([i, j])
    arguments = list(map(_ARGUMENTS, expected))
    compared = _compared(scorer.arguments, wanted, arguments)
    if not _same_texts(arguments, compared, [texts[j] for _, j in pairs]):
        asked = _Pairs(scorer.arguments, wanted, arguments, compared, texts)  # `names` by expected call
        if not asked.all_match((i, j) for i, j in pairs):
            return None
    # Only same-name pairs can match and no name is made twice: the matching and the ordered pairs
    # are both these pairs, nothing is missing or late, and every other call is an allowed extra.
    used = {j for _, j in pairs}
    extra = ", ".join(f"#{j + 1} {name}" for j, name in enumerate(names) if j not in used)
    return _passed(scorer, f"extra {extra} (allowed in this mode)", wanted, names, pairs, [list(p) for p in pairs])


def _aligned(
    scorer: Trajectory, expected: list[ExpectedCall], wanted: list[str], names: list[str], texts: list[str | None]
) -> Score | None:
    """The passing `Score` where extra calls are allowed, from the reference's alignment of the row's calls.

    The longest in-order pairing (`lcs_pairs`) and the maximum matching (`max_bipartite_matching`)
    are the reference's functions, asked the reference's question of each pair: same name, and the
    arguments not compared, equal in text, or accepted by the matcher. The answer is given only
    when every expected call is paired (in order, for `in_order`): the value is then 1, nothing is
    missing or late, and the reason lists the calls neither pairing used.
    """
    arguments = list(map(_ARGUMENTS, expected))
    compared = _compared(scorer.arguments, wanted, arguments)
    try:
        encoded = [comparable_text(a) if c else None for a, c in zip(arguments, compared, strict=True)]
    except (TypeError, ValueError):  # not a JSON value, or NaN: the reference decides
        return None
    asked = _Pairs(scorer.arguments, wanted, arguments, compared, texts)  # `names` by expected call

    def compatible(i: int, j: int) -> bool:
        if wanted[i] != names[j]:
            return False
        return not compared[i] or encoded[i] == texts[j] or asked.answer(i, j)

    count = len(wanted)
    ordered = lcs_pairs(count, len(names), compatible)
    matched = max_bipartite_matching(count, len(names), compatible)
    if asked.unsure or (len(ordered) if scorer.mode == "in_order" else len(matched)) != count:
        return None
    used = set(matched.values()) | {j for _, j in ordered}
    extra = ", ".join(f"#{j + 1} {name}" for j, name in enumerate(names) if j not in used)
    why = f"extra {extra} (allowed in this mode)" if extra else f"all {count} expected calls matched"
    return _passed(
        scorer, why, wanted, names, [[i, j] for i, j in sorted(matched.items())], [[i, j] for i, j in ordered]
    )


def _passed(
    scorer: Trajectory,
    why: str,
    wanted: list[str],
    names: list[str],
    matched: list[list[int]],
    ordered: list[list[int]],
) -> Score:
    """The reference's passing `Score`: value 1, its reason (`why`, after the mode) and its details."""
    return scorer.result(
        True,
        1.0,
        f"Passed ({scorer.mode}, score 1.00): {why}.",
        expected=wanted,
        actual=list(names),
        matched=matched,
        in_order=ordered,
    )


def _compared(match: ArgumentMatch, names: list[str], arguments: list[Arguments]) -> list[bool]:
    """Per expected call, whether its arguments are compared (given, and its tool's mode not `ignore`)."""
    if match.per_tool:
        return [
            a is not None and match.for_tool(name).mode != "ignore" for name, a in zip(names, arguments, strict=True)
        ]
    if match.mode == "ignore":
        return [False] * len(arguments)
    return [True] * len(arguments) if None not in arguments else [a is not None for a in arguments]


def _same_texts(arguments: list[Arguments], compared: list[bool], texts: list[str | None]) -> bool:
    """Whether each compared expected call's arguments encode to the text of the call paired with it.

    One encoding and one string comparison: the encoder writes an array as its items' texts joined
    by commas, so the arrays' texts are equal exactly when the items' texts are.
    """
    every = all(compared)
    try:
        text = comparable_text(
            arguments if every else [a if c else None for a, c in zip(arguments, compared, strict=True)]
        )
    except (TypeError, ValueError):  # not a JSON value, or NaN: the reference decides
        return False
    parts = texts if every else ["null" if not c else t for c, t in zip(compared, texts, strict=True)]
    return None not in parts and "[" + ",".join(parts) + "]" == text  # type: ignore[arg-type]


def _matching(pairs: _Pairs) -> list[list[int]] | None:
    """The reference's maximum matching when call `i` is known to match expected call `i` and a name repeats.

    Kuhn's matching takes, for each expected call in turn, the first free compatible call. With
    every diagonal pair compatible and none below it, expected call i finds calls 0..i-1
    incompatible and call i free: the identity. So the pairs below the diagonal are asked first,
    and only if one is compatible is the whole search run (`kuhn_matching`). `None`: unsure.
    """
    if not pairs.crossed():
        return None if pairs.unsure else _identity(range(len(pairs.names)))
    found = kuhn_matching(pairs.names, pairs.compatible)
    return None if pairs.unsure else [[i, j] for i, j in sorted(found.items())]


def _identity(steps: range) -> list[list[int]]:
    """`[[0, 0], [1, 1], ...]`, each pair a list of its own (made in C: ~20,000 times a scoring)."""
    return list(map(list, zip(steps, steps, strict=True)))


class _Pairs:
    """Whether expected call `i` matches call `j` of the same name, each pair asked at most once."""

    def __init__(
        self,
        match: ArgumentMatch,
        names: list[str],
        arguments: list[Arguments],
        compared: list[bool],
        texts: list[str | None],
    ) -> None:
        self._match, self.names, self._arguments, self._compared, self._texts = (
            match,
            names,
            arguments,
            compared,
            texts,
        )
        # With the same keys required at every depth and strings compared as they are, the matcher
        # accepts only values Python finds equal (it is stricter: `True` is not `1`), so unequal
        # values need no asking: one comparison in C, where the matcher walks the values in Python.
        self._plain_exact = not match.per_tool and match.mode == "exact" and not match.trim and not match.casefold
        self._known: dict[tuple[int, int], bool] = {}
        self._values: list[Any] | None = None
        self.unsure = False
        """Set when the row's texts did not parse as one JSON value each (not a table evaltrace wrote)."""

    def all_match(self, pairs: Iterable[tuple[int, int]]) -> bool:
        """Whether expected call `i` matches call `j` for every pair whose arguments are compared.

        Asked of the matcher (on the row's parsed arguments) where the texts were not all equal:
        a subset of the keys, `trim`, numbers by value. The answer is the reference's `call_matches`.
        """
        return all(not self._compared[i] or self.answer(i, j) for i, j in pairs) and not self.unsure

    def crossed(self) -> bool:
        """Whether some expected call `i` matches an earlier call `j` of its name (a pair below the diagonal)."""
        earlier: dict[str, list[int]] = {}
        for i, name in enumerate(self.names):
            before = earlier.setdefault(name, [])
            if any(self.compatible(i, j) for j in before):
                return True
            before.append(i)
        return False

    def compatible(self, i: int, j: int) -> bool:
        """Whether expected call `i` matches call `j` (the two of one name)."""
        texts = self._texts
        if i == j or not self._compared[i] or texts[j] == texts[i]:
            return True  # text i is expected call i's (the position check), so text j is too
        return self.answer(i, j)

    def answer(self, i: int, j: int) -> bool:
        """The matcher's answer for expected call `i` and call `j`, each pair asked at most once."""
        found = self._known.get((i, j))
        if found is None:
            found = self._known[(i, j)] = self._ask(i, j)
        return found

    def _ask(self, i: int, j: int) -> bool:
        values = self._values if self._values is not None else self._parse()
        if values is None:
            self.unsure = True
            return False
        wanted, actual, match = self._arguments[i], values[j], self._match
        assert wanted is not None  # compared
        if self._plain_exact:
            return wanted == actual and arguments_match(wanted, actual, False, match)
        return arguments_match(wanted, actual, False, match.for_tool(self.names[i]))

    def _parse(self) -> list[Any] | None:
        """The row's arguments as the decoder parses them (one `json.loads` of them all), once per row.

        `None` if the texts are not one JSON value each: the decoder refuses such a table.
        """
        texts = self._texts
        present = ["null" if text is None else text for text in texts] if None in texts else texts
        text = "[" + ",".join(present) + "]"  # type: ignore[arg-type]
        try:
            values, end = _decode(text)  # `json.loads` minus its checks for whitespace and bytes
        except ValueError:
            return None
        if end != len(text) or not isinstance(values, list) or len(values) != len(texts):
            return None
        self._values = values
        return values


def kuhn_matching(names: list[str], compatible: Callable[[int, int], bool]) -> dict[int, int]:
    """`max_bipartite_matching(len(names), len(names), compatible)`, asking only the pairs it visits.

    The same augmenting-path search in the same order (left items in turn, each trying right items
    in ascending order), so the same matching; pairs of different names are never compatible, so
    only a name's own positions are tried, and a pair is asked only when the search reaches it.
    """
    search = _Search(names, compatible)
    for i in range(len(names)):
        search.augment(i, set())
    return {i: j for j, i in search.owner.items()}


class _Search:
    """Kuhn's augmenting paths, from one expected call at a time.

    A class, not a recursive closure: a closure that calls itself is a reference cycle per row,
    left for the garbage collector, which then ran many times as often over a scoring's heap.
    """

    def __init__(self, names: list[str], compatible: Callable[[int, int], bool]) -> None:
        self.names, self.compatible = names, compatible
        self.positions: dict[str, list[int]] = {}
        for j, name in enumerate(names):
            self.positions.setdefault(name, []).append(j)
        self.owner: dict[int, int] = {}

    def augment(self, i: int, seen: set[int]) -> bool:
        owner = self.owner
        for j in self.positions[self.names[i]]:
            if j in seen or not self.compatible(i, j):
                continue
            seen.add(j)
            if j not in owner or self.augment(owner[j], seen):
                owner[j] = i
                return True
        return False
