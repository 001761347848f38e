"""BASE against NEW: match the entries, count what changed per row, test each row's pass-rate difference.

Entries are matched by case id when every entry of both runs has a unique one (a spec's cases),
else by trace id (scoring without a spec: the same traces scored twice). A row is paired (exact
McNemar, Newcombe's paired interval) when some entries match, over the matched entries whose
outcome applies in both runs; otherwise it is unpaired (two-proportion z-test, Newcombe's
interval) over each run's applicable outcomes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from evaltrace.collector.terminal import plural
from evaltrace.evaluators.results.compare import stats as st
from evaltrace.evaluators.results.compare.model import (
    CaseChange,
    Comparison,
    MatchedBy,
    RateRow,
    ScorerChange,
    StatDelta,
)
from evaltrace.evaluators.results.compare.sides import Outcome, RunStats, Side, SideEntry

Pick = Callable[[SideEntry], Outcome | None]
"""Which outcome of an entry a row compares: the entry's, or one scorer's (`None`: it did not run there)."""


@dataclass(frozen=True)
class CompareOptions:
    """The verdict's settings."""

    alpha: float = 0.05
    """A fall in a pass rate with p below this is a significant regression."""
    strict: bool = False
    """Any regressed case (its outcome, or a scorer's, passed in BASE and fails in NEW) fails the comparison."""


def compare_sides(base: Side, new: Side, options: CompareOptions) -> Comparison:
    """Compare two runs: rows, case changes, statistics, changed scorers and the verdict."""
    matched_by = _matched_by(base, new)
    base_by, new_by = _by_key(base, matched_by), _by_key(new, matched_by)
    pairs = [(key, base_by[key], new_by[key]) for key in base_by if key in new_by]
    level = 1 - options.alpha
    rows, regressions, fixes = [], [], []
    for scorer in [None, *_scorer_names(base, new)]:
        pick = _picker(scorer)
        row, changes = _row(scorer, pick, pairs, (base.entries, new.entries), level)
        row.significant_regression = row.delta is not None and row.delta < 0 and row.p_value < options.alpha
        rows.append(row)
        regressions += [c for c, went_bad in changes if went_bad]
        fixes += [c for c, went_bad in changes if not went_bad]
    # Case by case (in BASE's order), the entry's change before its scorers'.
    position = {key: index for index, (key, _, _) in enumerate(pairs)}
    regressions.sort(key=lambda change: position[change.key])
    fixes.sort(key=lambda change: position[change.key])
    comparison = Comparison(
        base=base.label,
        new=new.label,
        matched_by=matched_by,
        alpha=options.alpha,
        confidence_level=level,
        strict=options.strict,
        rows=rows,
        regressions=regressions,
        regressed_cases=list(dict.fromkeys(change.key for change in regressions)),
        fixes=fixes,
        new_cases=[key for key in new_by if key not in base_by],
        missing_cases=[key for key in base_by if key not in new_by],
        stats=_stat_deltas(base.stats, new.stats),
        changed_scorers=changed_scorers(base, new),
        added_scorers=sorted(_names(new) - _names(base)),
        removed_scorers=sorted(_names(base) - _names(new)),
        regressed=False,
        verdict="",
    )
    comparison.regressed, comparison.verdict = _verdict(comparison)
    return comparison


def changed_scorers(base: Side, new: Side) -> list[ScorerChange]:
    """Scorers both runs used whose version differs, or whose configurations were replaced.

    A scorer a spec configures per case has one configuration per distinct setting. Only adding
    configurations (new cases) or dropping some (removed cases) is not a change; a configuration
    only in BASE beside another only in NEW is (an edited setting), as is any version difference.
    """
    changes = []
    for name in sorted(_names(base) & _names(new)):
        old = {(v, h) for n, v, h in base.scorers if n == name}
        now = {(v, h) for n, v, h in new.scorers if n == name}
        versions_differ = {v for v, _ in old} != {v for v, _ in now}
        if versions_differ or (old - now and now - old):
            changes.append(ScorerChange(scorer=name, base=_configs(old), new=_configs(now)))
    return changes


def _row(
    scorer: str | None,
    pick: Pick,
    pairs: list[tuple[str, SideEntry, SideEntry]],
    sides: tuple[list[SideEntry], list[SideEntry]],
    level: float,
) -> tuple[RateRow, list[tuple[CaseChange, bool]]]:
    """The row of one scorer (or of the entries) and its case changes, each with whether it went bad."""
    if not pairs:
        base_n, base_passed = _applicable(sides[0], pick)
        new_n, new_passed = _applicable(sides[1], pick)
        diff = st.unpaired_difference((base_passed, base_n), (new_passed, new_n), level)
        return _rate_row(scorer, diff, False, base_n, new_n), []
    counts = {"both_passed": 0, "regressed": 0, "fixed": 0, "both_failed": 0}
    changes: list[tuple[CaseChange, bool]] = []
    for key, base_entry, new_entry in pairs:
        before, after = pick(base_entry), pick(new_entry)
        if before is None or after is None or before.passed is None or after.passed is None:
            continue
        kind = _pair_kind(before.passed, after.passed)
        counts[kind] += 1
        if kind in ("regressed", "fixed"):
            changes.append((CaseChange(key=key, scorer=scorer, reason=after.reason), kind == "regressed"))
    table = st.PairedTable(**counts)
    row = _rate_row(scorer, st.paired_difference(table, level), True, table.n, table.n)
    row.regressions, row.fixes = table.regressed, table.fixed
    row.unchanged = table.both_passed + table.both_failed
    return row, changes


def _pair_kind(before: bool, after: bool) -> str:
    if before and after:
        return "both_passed"
    if before:
        return "regressed"
    return "fixed" if after else "both_failed"


def _rate_row(scorer: str | None, diff: st.Difference, paired: bool, n_base: int, n_new: int) -> RateRow:
    fields = dataclasses.asdict(diff)
    del fields["confidence_level"]  # the comparison's, said once beside its rows
    return RateRow(scorer=scorer, paired=paired, n_base=n_base, n_new=n_new, **fields)


def _applicable(entries: list[SideEntry], pick: Pick) -> tuple[int, int]:
    """`(applicable, passed)` outcomes among `entries`."""
    outcomes = [o.passed for o in map(pick, entries) if o is not None and o.passed is not None]
    return len(outcomes), sum(outcomes)


def _picker(scorer: str | None) -> Pick:
    if scorer is None:
        return lambda entry: entry.outcome
    return lambda entry: entry.scorers.get(scorer)


def _verdict(comparison: Comparison) -> tuple[bool, str]:
    """Whether the comparison fails, and why; regressed cases are counted once each, however many rows they hit."""
    significant = [row for row in comparison.rows if row.significant_regression]
    count = len(comparison.regressed_cases)
    cases = plural(count, "case")
    if significant:
        named = ", ".join(_row_name(row) for row in significant)
        regressed = f" ({cases} regressed)" if count else ""
        return True, f"REGRESSION: the pass rate fell significantly (p < {comparison.alpha:g}) for {named}{regressed}"
    if count and comparison.strict:
        return True, f"REGRESSION (--strict): {cases} went from passed to failed"
    if count:
        return False, f"{cases} regressed (not significant at alpha={comparison.alpha:g})"
    return False, "no regression"


def _row_name(row: RateRow) -> str:
    return "the entries" if row.scorer is None else row.scorer


def _matched_by(base: Side, new: Side) -> MatchedBy:
    for side in (base, new):
        ids = [entry.case_id for entry in side.entries]
        if None in ids or len(set(ids)) != len(ids):
            return "trace_id"
    return "case_id"


def _by_key(side: Side, matched_by: MatchedBy) -> dict[str, SideEntry]:
    """The entries by case id or trace id (entries without one, a missing case's trace, are left out)."""
    keyed = {}
    for entry in side.entries:
        key = entry.case_id if matched_by == "case_id" else entry.trace_id
        if key is not None:
            keyed[key] = entry
    return keyed


def _scorer_names(base: Side, new: Side) -> list[str]:
    """Every scorer with a result in either run, in the order first seen (BASE first)."""
    names: dict[str, None] = {}
    for side in (base, new):
        for entry in side.entries:
            names.update(dict.fromkeys(entry.scorers))
    return list(names)


def _names(side: Side) -> set[str]:
    return {name for name, _, _ in side.scorers}


def _configs(configs: set[tuple[int, str]]) -> list[str]:
    return [f"v{version} {digest}" for version, digest in sorted(configs)]


def _stat_deltas(base: RunStats, new: RunStats) -> list[StatDelta]:
    deltas = []
    for name in ("latency_p50_seconds", "latency_p95_seconds", "input_tokens", "output_tokens", "cost_usd"):
        before, after = getattr(base, name), getattr(new, name)
        delta = None if before is None or after is None else after - before
        relative = delta / before if delta is not None and before else None
        deltas.append(StatDelta(name=name, base=before, new=after, delta=delta, relative=relative))
    return deltas
