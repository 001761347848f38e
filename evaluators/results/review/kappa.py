"""Agreement between two raters of pass/fail verdicts: Cohen's kappa with a 95% confidence interval.

The rows of the confusion matrix are the person's labels, the columns the judge's verdicts, each
in the order (pass, fail). Kappa is (p_o - p_e) / (1 - p_e): the observed agreement p_o beyond the
agreement p_e two raters with these marginals reach by chance. Its standard error is the
large-sample one of Fleiss, Cohen & Everitt (1969, "Large sample standard errors of kappa and
weighted kappa", Psychological Bulletin 72(5)), the one statsmodels' `cohens_kappa` reports too;
the interval is kappa +- 1.96 SE (normal approximation).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from pydantic import BaseModel

Z_95 = 1.959963984540054
"""The standard normal's 97.5th percentile: a two-sided 95% interval."""


class Confusion(BaseModel):
    """Counts of (person, judge) verdict pairs."""

    pass_pass: int = 0
    """The person said pass, the judge pass."""
    pass_fail: int = 0
    """The person said pass, the judge fail."""
    fail_pass: int = 0
    """The person said fail, the judge pass."""
    fail_fail: int = 0
    """The person said fail, the judge fail."""

    @classmethod
    def of(cls, pairs: Iterable[tuple[bool, bool]]) -> Confusion:
        """The matrix of (person passed, judge passed) pairs."""
        counts = cls()
        for person, judge in pairs:
            name = f"{'pass' if person else 'fail'}_{'pass' if judge else 'fail'}"
            setattr(counts, name, getattr(counts, name) + 1)
        return counts

    @property
    def n(self) -> int:
        """Pairs counted."""
        return self.pass_pass + self.pass_fail + self.fail_pass + self.fail_fail

    def rows(self) -> list[list[int]]:
        """The matrix as rows (person pass, person fail) of columns (judge pass, judge fail)."""
        return [[self.pass_pass, self.pass_fail], [self.fail_pass, self.fail_fail]]


class Agreement(BaseModel):
    """How far a judge agrees with people on `n` labelled verdicts."""

    n: int
    agreement: float | None
    """The share of pairs where both said the same (null when n is 0)."""
    kappa: float | None
    """Cohen's kappa; null when n is 0 or chance agreement is 1 (both raters gave one verdict only)."""
    kappa_low: float | None
    kappa_high: float | None
    """The 95% confidence interval of kappa (null with kappa)."""
    standard_error: float | None


def agreement(matrix: Confusion) -> Agreement:
    """Observed agreement, Cohen's kappa and its 95% interval for `matrix`."""
    n = matrix.n
    if n == 0:
        return Agreement(n=0, agreement=None, kappa=None, kappa_low=None, kappa_high=None, standard_error=None)
    p = [[cell / n for cell in row] for row in matrix.rows()]
    rows = [p[0][0] + p[0][1], p[1][0] + p[1][1]]  # the person's marginals (pass, fail)
    cols = [p[0][0] + p[1][0], p[0][1] + p[1][1]]  # the judge's marginals
    observed = p[0][0] + p[1][1]
    chance = rows[0] * cols[0] + rows[1] * cols[1]
    if math.isclose(chance, 1.0):
        return Agreement(n=n, agreement=observed, kappa=None, kappa_low=None, kappa_high=None, standard_error=None)
    kappa = (observed - chance) / (1 - chance)
    se = math.sqrt(max(0.0, _variance(p, rows, cols, kappa, chance)) / n)
    return Agreement(
        n=n,
        agreement=observed,
        kappa=kappa,
        kappa_low=kappa - Z_95 * se,
        kappa_high=kappa + Z_95 * se,
        standard_error=se,
    )


def _variance(p: list[list[float]], rows: list[float], cols: list[float], kappa: float, chance: float) -> float:
    """N times the variance of kappa, by Fleiss, Cohen & Everitt (1969), equation (13)."""
    diagonal = sum(p[i][i] * (1 - (rows[i] + cols[i]) * (1 - kappa)) ** 2 for i in range(2))
    off = (1 - kappa) ** 2 * sum(p[i][j] * (cols[i] + rows[j]) ** 2 for i in range(2) for j in range(2) if i != j)
    correction = (kappa - chance * (1 - kappa)) ** 2
    return (diagonal + off - correction) / (1 - chance) ** 2
