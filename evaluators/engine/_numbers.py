"""Run statistics arithmetic: an order-independent float sum and linear-interpolated percentiles."""

from __future__ import annotations

import math
from collections.abc import Sequence


class ExactSum:
    """A sum of floats that does not depend on the order of its terms (nor on how they were split).

    Samples arrive in a different order in every sharded run; a plain float sum would then differ
    in its last bits from run to run (and from a one-process run), and so would the reports.
    Finite terms are summed exactly as integers in units of 2**-1074 (every double is a whole
    number of those), and the sum or mean is rounded once, at the end.
    """

    _UNITS = 1 << 1074

    def __init__(self) -> None:
        self.count = 0
        self.units = 0
        self.special = 0.0
        """The sum of the non-finite terms (inf, nan), which decide the result when present."""

    def add(self, value: float, times: int = 1) -> None:
        """Add `value`, `times` times over."""
        self.count += times
        if math.isfinite(value):
            numerator, denominator = float(value).as_integer_ratio()
            self.units += times * numerator * (self._UNITS // denominator)
        else:  # an inf or nan added to itself is itself
            self.special += value

    def merge(self, other: ExactSum) -> None:
        self.count += other.count
        self.units += other.units
        self.special += other.special

    def total(self) -> float:
        """The sum of the terms, correctly rounded."""
        if self.special != 0.0:  # an inf or nan term (nan compares unequal too)
            return self.special
        return self.units / self._UNITS

    def mean(self) -> float | None:
        """The mean of the terms, correctly rounded; `None` for none."""
        if not self.count:
            return None
        if self.special != 0.0:  # an inf or nan term (nan compares unequal too)
            return self.special / self.count
        return self.units / (self._UNITS * self.count)


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """Linear-interpolated percentile (`fraction` in [0, 1]); `None` for no values."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * fraction
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
