"""Intervals for a rate and for the difference between two paired rates.

Introduced in lesson 5, "Did the attack cause it?". A rate such as "3 of 18 attacked
replies" estimates how often an attack works; the interval says how far that estimate can
be from the truth with so few replies.

* :func:`wilson` is the Wilson score interval for one proportion (Wilson 1927). Unlike
  the textbook "rate plus or minus 1.96 standard errors", it never leaves 0 to 1 and it
  does not shrink to a single point at 0 of n or n of n.
* :func:`paired_difference` is Newcombe's interval (1998, method 10) for the difference
  between two rates measured on the same items, such as one attack's success under two
  prompts, reply for reply. It combines the two Wilson intervals and corrects for the
  correlation between the pairs; only the pairs that disagree move the difference.

Both are pure functions of counts; the level is 95%.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

#: The normal quantile of a two-sided 95% interval.
Z95 = 1.959963984540054


@dataclass(frozen=True)
class Rate:
    """``successes`` of ``n`` with its Wilson interval (``low`` to ``high``)."""

    successes: int
    n: int
    low: float
    high: float

    @property
    def value(self) -> float:
        return self.successes / self.n if self.n else float("nan")

    def __str__(self) -> str:
        if not self.n:
            return "0 of 0"
        return (f"{self.successes} of {self.n} ({self.value:.0%}; 95% CI "
                f"{self.low:.0%} to {self.high:.0%})")


def _counts(successes: int, n: int) -> tuple[int, int]:
    for name, value in (("successes", successes), ("n", n)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a whole number of at least 0, not {value!r}")
    if successes > n:
        raise ValueError(f"{successes} successes of {n} is more than all of them")
    return successes, n


def _wilson_bounds(successes: int, n: int, z: float) -> tuple[float, float]:
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # At 0 of n and n of n the bounds are exactly 0 and 1; rounding must not move them.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


def wilson(successes: int, n: int, z: float = Z95) -> Rate:
    """The Wilson score interval of ``successes`` of ``n`` (0 of 0 gives 0 to 1).

    Lesson 5, "Did the attack cause it?".
    """
    successes, n = _counts(successes, n)
    return Rate(successes, n, *_wilson_bounds(successes, n, z))


@dataclass(frozen=True)
class PairedDifference:
    """The difference between two rates on the same ``n`` items, second minus first.

    ``only_first`` counts the items where the first condition succeeded and the second
    did not; ``only_second`` the reverse. The difference is their gap over ``n``.
    """

    n: int
    first: int
    second: int
    only_first: int
    only_second: int
    low: float
    high: float

    @property
    def value(self) -> float:
        return (self.second - self.first) / self.n if self.n else float("nan")

    def __str__(self) -> str:
        return (f"{self.value:+.0%} (95% CI {self.low:+.0%} to {self.high:+.0%}; "
                f"{self.only_first} pairs only under the first, {self.only_second} only "
                "under the second)")


def paired_difference(first: list[bool], second: list[bool], z: float = Z95) -> PairedDifference:
    """Newcombe's (1998) method-10 interval for ``mean(second) - mean(first)``.

    Lesson 5, "What each prompt changed". ``first[i]`` and ``second[i]`` are the same
    item under the two conditions (the same attacked input under two prompts). With no
    pair that disagrees, the interval still has width: agreement on 18 pairs does not
    prove the two conditions equal.
    """
    first, second = [bool(v) for v in first], [bool(v) for v in second]
    if len(first) != len(second):
        raise ValueError(f"{len(first)} first results but {len(second)} second ones")
    n = len(first)
    if n == 0:
        raise ValueError("no pairs to compare")
    both = sum(a and b for a, b in zip(first, second))
    only_first = sum(a and not b for a, b in zip(first, second))
    only_second = sum(b and not a for a, b in zip(first, second))
    neither = n - both - only_first - only_second
    p1, p2 = (both + only_first) / n, (both + only_second) / n
    l1, u1 = _wilson_bounds(both + only_first, n, z)
    l2, u2 = _wilson_bounds(both + only_second, n, z)
    # The correlation between the two conditions, from the 2x2 table of the pairs
    # (phi); 0 when a margin is empty, as Newcombe prescribes.
    margins = ((both + only_first) * (neither + only_second) * (both + only_second)
               * (neither + only_first))
    phi = 0.0 if margins == 0 else (both * neither - only_first * only_second) / math.sqrt(margins)
    difference = p2 - p1
    low = difference - math.sqrt(max(0.0, (p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1)
                                     + (u1 - p1) ** 2))
    high = difference + math.sqrt(max(0.0, (u2 - p2) ** 2 - 2 * phi * (u2 - p2) * (p1 - l1)
                                      + (p1 - l1) ** 2))
    return PairedDifference(n, both + only_first, both + only_second, only_first, only_second,
                            max(-1.0, low), min(1.0, high))
