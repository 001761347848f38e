"""The compare statistics against scipy and statsmodels on known tables (they are not used at run time)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sp
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import confint_proportions_2indep, proportion_confint, proportions_ztest

from evaltrace.evaluators.results.compare.stats import (
    PairedTable,
    mcnemar_exact,
    newcombe_paired,
    newcombe_unpaired,
    paired_difference,
    two_proportion_z,
    unpaired_difference,
    wilson,
)

# (both passed, regressed, fixed, both failed)
PAIRED_TABLES = [
    (10, 15, 5, 20),
    (40, 6, 0, 4),
    (12, 1, 9, 2),
    (30, 0, 0, 0),
    (0, 3, 2, 0),
    (101, 59, 121, 33),
    (5, 0, 7, 1),
    (794, 86, 150, 570),  # Agresti's presidential-approval table
]

UNPAIRED_TABLES = [(45, 50, 30, 50), (9, 10, 10, 10), (1, 20, 7, 25), (300, 1000, 270, 1000), (0, 12, 3, 12)]
LEVELS = [0.95, 0.9, 0.99]


@pytest.mark.parametrize("table", PAIRED_TABLES)
def test_exact_mcnemar_matches_statsmodels(table: tuple[int, int, int, int]) -> None:
    a, b, c, d = table
    expected = mcnemar(np.array([[a, b], [c, d]]), exact=True).pvalue
    assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-12, abs=1e-300)
    # The same thing from scipy: the two-sided binomial test on the discordant pairs.
    if b + c:
        assert mcnemar_exact(b, c) == pytest.approx(sp.binomtest(b, b + c, 0.5).pvalue, rel=1e-12)


def test_exact_mcnemar_on_many_discordant_pairs() -> None:
    # Thousands of pairs: the exact tail still agrees (no overflow, no underflow to a wrong 0).
    assert mcnemar_exact(2300, 2500) == pytest.approx(sp.binomtest(2300, 4800, 0.5).pvalue, rel=1e-9)
    assert mcnemar_exact(0, 2000) == pytest.approx(2 * 0.5**2000, rel=1e-9)
    assert mcnemar_exact(0, 0) == 1.0


@pytest.mark.parametrize("table", UNPAIRED_TABLES[:4])
def test_two_proportion_z_matches_statsmodels(table: tuple[int, int, int, int]) -> None:
    base_passed, base_n, new_passed, new_n = table
    _, expected = proportions_ztest([new_passed, base_passed], [new_n, base_n])
    assert two_proportion_z(base_passed, base_n, new_passed, new_n) == pytest.approx(expected, rel=1e-10)


def test_two_proportion_z_with_identical_all_pass_runs_is_not_significant() -> None:
    # Pooled rate 1: statsmodels divides by zero; no evidence of a difference is p = 1.
    assert two_proportion_z(10, 10, 20, 20) == 1.0


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("passed", "n"), [(0, 10), (3, 10), (10, 10), (81, 263), (1, 2)])
def test_wilson_matches_statsmodels(passed: int, n: int, level: float) -> None:
    expected = proportion_confint(passed, n, alpha=1 - level, method="wilson")
    assert wilson(passed, n, level) == pytest.approx(expected, rel=1e-10, abs=1e-12)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("table", UNPAIRED_TABLES)
def test_newcombe_unpaired_matches_statsmodels(table: tuple[int, int, int, int], level: float) -> None:
    base_passed, base_n, new_passed, new_n = table
    expected = confint_proportions_2indep(
        new_passed, new_n, base_passed, base_n, method="newcomb", compare="diff", alpha=1 - level
    )
    assert newcombe_unpaired(base_passed, base_n, new_passed, new_n, level) == pytest.approx(
        expected, rel=1e-10, abs=1e-12
    )


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("table", PAIRED_TABLES)
def test_newcombe_paired_from_statsmodels_wilson_and_scipy_phi(table: tuple[int, int, int, int], level: float) -> None:
    # Method 10 of Newcombe (1998) built independently: statsmodels' Wilson intervals of the two
    # marginal rates and the correlation of the per-case outcomes (scipy's Pearson r, which is phi).
    a, b, c, d = table
    base = np.array([1] * a + [1] * b + [0] * c + [0] * d)
    new = np.array([1] * a + [0] * b + [1] * c + [0] * d)
    n = len(base)
    p_base, p_new = base.mean(), new.mean()
    l_base, u_base = proportion_confint(base.sum(), n, alpha=1 - level, method="wilson")
    l_new, u_new = proportion_confint(new.sum(), n, alpha=1 - level, method="wilson")
    phi = 0.0 if base.std() == 0 or new.std() == 0 else sp.pearsonr(base, new).statistic
    low = (p_new - p_base) - np.sqrt(
        max(0.0, (p_new - l_new) ** 2 - 2 * phi * (p_new - l_new) * (u_base - p_base) + (u_base - p_base) ** 2)
    )
    high = (p_new - p_base) + np.sqrt(
        max(0.0, (u_new - p_new) ** 2 - 2 * phi * (u_new - p_new) * (p_base - l_base) + (p_base - l_base) ** 2)
    )
    got = newcombe_paired(PairedTable(a, b, c, d), level)
    assert got == pytest.approx((low, high), rel=1e-9, abs=1e-12)
    assert -1.0 <= got[0] <= (c - b) / n <= got[1] <= 1.0


def test_paired_interval_excludes_zero_exactly_when_the_test_is_clearly_significant() -> None:
    # 6 regressions, no fix among 50 cases: McNemar p = 2/64, and the interval lies below zero.
    diff = paired_difference(PairedTable(40, 6, 0, 4), 0.95)
    assert diff.p_value == pytest.approx(0.03125)
    assert diff.delta == pytest.approx(-0.12)
    assert diff.ci_high is not None and diff.ci_high < 0
    # Identical runs: no difference, p 1, and the interval straddles zero.
    same = paired_difference(PairedTable(40, 0, 0, 10), 0.95)
    assert (same.delta, same.p_value) == (0.0, 1.0)
    assert same.ci_low is not None and same.ci_high is not None and same.ci_low < 0 < same.ci_high


def test_differences_without_outcomes_have_no_rate() -> None:
    assert paired_difference(PairedTable(0, 0, 0, 0), 0.95).delta is None
    empty = unpaired_difference((3, 4), (0, 0), 0.95)
    assert (empty.base_rate, empty.new_rate, empty.delta, empty.p_value) == (0.75, None, None, 1.0)
    full = unpaired_difference((45, 50), (30, 50), 0.95)
    assert full.delta == pytest.approx(-0.3)
    assert full.p_value < 0.001
