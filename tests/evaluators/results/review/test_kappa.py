"""Cohen's kappa and its 95% interval (evaluators/results/review/kappa.py) against statsmodels, on many tables."""

from __future__ import annotations

import itertools
import math
import warnings

import pytest
from statsmodels.stats.inter_rater import cohens_kappa

from evaltrace.evaluators.results.review.kappa import Confusion, agreement

TABLES = [t for t in itertools.product(range(0, 7, 2), range(0, 5), range(0, 5), range(1, 8, 3)) if sum(t) >= 2]


@pytest.mark.parametrize("cells", TABLES)
def test_kappa_and_interval_equal_statsmodels(cells: tuple[int, int, int, int]) -> None:
    matrix = Confusion(pass_pass=cells[0], pass_fail=cells[1], fail_pass=cells[2], fail_fail=cells[3])
    got = agreement(matrix)
    table = matrix.rows()
    n = sum(cells)
    assert got.n == n and got.agreement == pytest.approx((cells[0] + cells[3]) / n)
    rows = [cells[0] + cells[1], cells[2] + cells[3]]
    cols = [cells[0] + cells[2], cells[1] + cells[3]]
    if rows[0] * cols[0] + rows[1] * cols[1] == n * n:  # one verdict only on both sides: undefined
        assert got.kappa is None and got.kappa_low is None
        return
    with warnings.catch_warnings():
        # At kappa 1 (or -1 at the bound) the variance is 0 and rounds below it: statsmodels takes the
        # square root of that (nan, with a warning); kappa.py clips it to 0.
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = cohens_kappa(table)
    assert got.kappa == pytest.approx(expected.kappa)
    if math.isnan(expected.std_kappa):
        assert got.standard_error == pytest.approx(0.0, abs=1e-7) and got.kappa_low == pytest.approx(got.kappa)
        return
    assert got.standard_error == pytest.approx(expected.std_kappa, abs=1e-12)
    assert (got.kappa_low, got.kappa_high) == (pytest.approx(expected.kappa_low), pytest.approx(expected.kappa_upp))


def test_the_matrix_counts_pairs_and_no_pairs_has_no_kappa() -> None:
    pairs = [(True, True), (True, False), (False, True), (False, False), (False, False)]
    assert Confusion.of(pairs).rows() == [[1, 1], [1, 2]]
    empty = agreement(Confusion())
    assert (empty.n, empty.agreement, empty.kappa) == (0, None, None)
