"""The significance tests and confidence intervals of a pass-rate difference, in pure Python.

Paired outcomes (the same cases scored in both runs) use the exact McNemar test: under "no
change", each discordant pair (a regression or a fix) is a fair coin, so the two-sided p-value is
twice the binomial tail of the smaller count (capped at 1), as `statsmodels`' `mcnemar(exact=True)`
computes it. Its interval is Newcombe's hybrid score interval for paired data (method 10 of
Newcombe 1998, Stat Med 17:2635): Wilson intervals of the two marginal pass rates, combined with
the plain phi coefficient of the 2x2 table. Unpaired outcomes use the pooled two-proportion
z-test (`statsmodels`' `proportions_ztest`) and Newcombe's hybrid score interval for independent
proportions (method 10 of Newcombe 1998, Stat Med 17:873; `confint_proportions_2indep`'s
`newcomb`). Every difference is NEW minus BASE. The tests check all of them against
scipy/statsmodels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal

TestName = Literal["mcnemar-exact", "two-proportion-z"]


@dataclass(frozen=True)
class PairedTable:
    """Outcomes of the same cases in two runs: counts of each (base, new) combination."""

    both_passed: int
    regressed: int
    """Passed in BASE, failed in NEW."""
    fixed: int
    """Failed in BASE, passed in NEW."""
    both_failed: int

    @property
    def n(self) -> int:
        """The number of pairs."""
        return self.both_passed + self.regressed + self.fixed + self.both_failed


@dataclass(frozen=True)
class Difference:
    """A pass-rate difference (NEW minus BASE) with its test and interval."""

    test: TestName
    base_rate: float | None
    new_rate: float | None
    delta: float | None
    p_value: float
    ci_low: float | None
    ci_high: float | None
    confidence_level: float


def mcnemar_exact(regressed: int, fixed: int) -> float:
    """The exact two-sided McNemar p-value from the discordant counts (1.0 when there are none)."""
    n = regressed + fixed
    if n == 0:
        return 1.0
    smaller = min(regressed, fixed)
    # Exact integers: the binomial coefficients of the tail, summed and divided by 2^n once.
    term, tail = 1, 1
    for i in range(smaller):
        term = term * (n - i) // (i + 1)
        tail += term
    ratio: float = 2 * tail / 2**n
    return min(1.0, ratio)


def two_proportion_z(base_passed: int, base_n: int, new_passed: int, new_n: int) -> float:
    """The pooled two-proportion z-test's two-sided p-value (1.0 when the pooled rate is 0 or 1)."""
    pooled = (base_passed + new_passed) / (base_n + new_n)
    variance = pooled * (1 - pooled) * (1 / base_n + 1 / new_n)
    if variance <= 0:
        return 1.0  # every outcome the same in both runs: no evidence of a difference
    z = (new_passed / new_n - base_passed / base_n) / math.sqrt(variance)
    return math.erfc(abs(z) / math.sqrt(2))


def wilson(passed: int, n: int, level: float) -> tuple[float, float]:
    """The Wilson score interval of a proportion (no continuity correction)."""
    z = _z(level)
    rate = passed / n
    centre = (rate + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(rate * (1 - rate) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def newcombe_unpaired(base_passed: int, base_n: int, new_passed: int, new_n: int, level: float) -> tuple[float, float]:
    """Newcombe's hybrid score interval of NEW minus BASE for independent samples."""
    p_new, p_base = new_passed / new_n, base_passed / base_n
    l_new, u_new = wilson(new_passed, new_n, level)
    l_base, u_base = wilson(base_passed, base_n, level)
    delta = p_new - p_base
    low = delta - math.sqrt((p_new - l_new) ** 2 + (u_base - p_base) ** 2)
    high = delta + math.sqrt((u_new - p_new) ** 2 + (p_base - l_base) ** 2)
    return low, high


def newcombe_paired(table: PairedTable, level: float) -> tuple[float, float]:
    """Newcombe's hybrid score interval of NEW minus BASE for paired outcomes (method 10, plain phi)."""
    n = table.n
    new_passed = table.both_passed + table.fixed
    base_passed = table.both_passed + table.regressed
    p_new, p_base = new_passed / n, base_passed / n
    l_new, u_new = wilson(new_passed, n, level)
    l_base, u_base = wilson(base_passed, n, level)
    phi = _phi(table)
    delta = p_new - p_base
    d_low_new, d_high_base = p_new - l_new, u_base - p_base
    d_high_new, d_low_base = u_new - p_new, p_base - l_base
    low = delta - math.sqrt(max(0.0, d_low_new**2 - 2 * phi * d_low_new * d_high_base + d_high_base**2))
    high = delta + math.sqrt(max(0.0, d_high_new**2 - 2 * phi * d_high_new * d_low_base + d_low_base**2))
    return low, high


def paired_difference(table: PairedTable, level: float) -> Difference:
    """The McNemar test and the paired interval; rates `None` (p 1.0) when there are no pairs."""
    p_value = mcnemar_exact(table.regressed, table.fixed)
    if table.n == 0:
        return Difference("mcnemar-exact", None, None, None, p_value, None, None, level)
    low, high = newcombe_paired(table, level)
    base_rate = (table.both_passed + table.regressed) / table.n
    new_rate = (table.both_passed + table.fixed) / table.n
    return Difference("mcnemar-exact", base_rate, new_rate, new_rate - base_rate, p_value, low, high, level)


def unpaired_difference(base: tuple[int, int], new: tuple[int, int], level: float) -> Difference:
    """The z-test and Newcombe's interval from `(passed, n)` of each run; `None` rates where n is 0."""
    (base_passed, base_n), (new_passed, new_n) = base, new
    base_rate = base_passed / base_n if base_n else None
    new_rate = new_passed / new_n if new_n else None
    if not base_n or not new_n:
        return Difference("two-proportion-z", base_rate, new_rate, None, 1.0, None, None, level)
    p_value = two_proportion_z(base_passed, base_n, new_passed, new_n)
    low, high = newcombe_unpaired(base_passed, base_n, new_passed, new_n, level)
    delta = new_passed / new_n - base_passed / base_n
    return Difference("two-proportion-z", base_rate, new_rate, delta, p_value, low, high, level)


def _phi(table: PairedTable) -> float:
    """The phi coefficient of the 2x2 table; 0 when a margin is empty (no correlation can be estimated)."""
    a, b, c, d = table.both_passed, table.regressed, table.fixed, table.both_failed
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    return 0.0 if margins == 0 else (a * d - b * c) / math.sqrt(margins)


def _z(level: float) -> float:
    """The two-sided standard normal quantile of a confidence level (1.96 at 0.95)."""
    return NormalDist().inv_cdf(1 - (1 - level) / 2)
