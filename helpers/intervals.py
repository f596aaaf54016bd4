"""Tests and intervals for paired outcomes that come in clusters.

Introduced in lesson 5, "What each prompt changed". Each attacked input is asked under
two prompts, so the comparison is paired: only the inputs on which the two prompts'
outcomes differ say anything about the prompts. And the inputs are not independent:
three wordings at two positions of one attack are six variations of one idea, so the
unit that can be resampled is the attack, not the input.

* :func:`mcnemar_exact` is McNemar's exact test on the discordant pairs: if the prompts
  made no difference, each discordant pair would fall either way with probability one
  half, and the two-sided p-value is the binomial probability of a split at least as
  uneven as the one seen.
* :func:`holm` adjusts the p-values of the comparisons made beside a primary one (Holm
  1979), so that the chance of any false alarm among them stays at the level.
* :func:`cluster_bootstrap` gives an interval for a ratio of sums (a pooled rate, or a
  pooled difference) by resampling whole clusters with replacement. Its two steps serve
  lesson 4's resampling of questions too: :func:`cluster_picks` draws the clusters of
  each resample, :func:`percentile` reads the interval off the resamples' values.

Pure functions of counts and booleans; the bootstrap is seeded, so a page gives the same
interval on every render.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class McNemar:
    """McNemar's exact test on paired outcomes: ``only_first`` pairs succeeded under the
    first condition alone, ``only_second`` under the second alone."""

    only_first: int
    only_second: int
    p: float


def mcnemar_exact(first: Sequence[bool], second: Sequence[bool]) -> McNemar:
    """McNemar's exact two-sided test: ``first[i]`` and ``second[i]`` are the same item
    under two conditions. Lesson 5, "What each prompt changed".

    With ``b`` and ``c`` discordant pairs, ``p = min(1, 2 * P(X <= min(b, c)))`` for
    ``X ~ Binomial(b + c, 1/2)``; with no discordant pair, ``p = 1``.
    """
    if len(first) != len(second):
        raise ValueError(f"{len(first)} first outcomes but {len(second)} second ones")
    b = sum(bool(x) and not bool(y) for x, y in zip(first, second))
    c = sum(bool(y) and not bool(x) for x, y in zip(first, second))
    n = b + c
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1)) / 2 ** n
    return McNemar(b, c, min(1.0, 2 * tail))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment: the smallest p-value times m, the next times m - 1,
    and so on, each at least the one before it and at most 1. Lesson 5, "What each
    prompt changed"."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted, running = [0.0] * len(p_values), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def cluster_picks(clusters: int, resamples: int, seed: int) -> np.ndarray:
    """The clusters of each bootstrap resample (a row each): as many as there are, drawn
    with replacement by their position, from a generator seeded with ``seed``."""
    return np.random.default_rng(seed).integers(0, clusters, (resamples, clusters))


@dataclass(frozen=True)
class Spread:
    """A percentile interval, and how many resamples were left out; ``low`` and ``high``
    are None when every resample was, or when ``reason`` says why there is none. A table
    shows it as "0.12 to 0.40"."""

    low: float | None
    high: float | None
    left_out: int = 0
    reason: str = ""

    def rounded(self, digits: int = 2) -> tuple:
        """``(low, high)`` at ``digits`` decimals, as a sentence quotes them."""
        return tuple(None if end is None else round(end, digits) for end in (self.low, self.high))

    def __str__(self) -> str:
        if self.low is None:
            return self.reason or "undefined: no resample has both kinds of reply"
        dropped = f" ({self.left_out} resamples left out)" if self.left_out else ""
        return f"{self.low:.2f} to {self.high:.2f}{dropped}"


@dataclass(frozen=True)
class Estimate:
    """A figure and its interval, as numbers, with the count it comes from if any. A table
    shows it as "5 of 30: 0.17 (0.05 to 0.33)", signed when it is a difference; with no
    interval (``low`` None: every resample gave the figure) it says so."""

    value: float
    low: float | None
    high: float | None
    count: object = None  # a helpers.agreement.Count, shown before the figure
    signed: bool = False

    def __str__(self) -> str:
        style = "+.2f" if self.signed else ".2f"
        text = (f"{self.value:{style}} (the same in every resample)" if self.low is None else
                f"{self.value:{style}} ({self.low:{style}} to {self.high:{style}})")
        return f"{self.count}: {text}" if self.count else text


def percentile(values: Sequence[float | None], level: float = 0.95) -> Spread:
    """The central ``level`` interval of the defined values, and how many were undefined
    (None or NaN: a resample with nothing to measure is left out, never scored 0).

    Values that every resample gives alike (a share of 0 or 1 does) get none: the interval
    would be that point, not a statement of how sure it is (lesson 4, "Count each reply
    once")."""
    values = np.array([np.nan if v is None else v for v in values], dtype=float)
    kept = values[~np.isnan(values)]
    if not kept.size or kept.min() == kept.max():
        reason = f"none: every resample gives {kept[0]:g}" if kept.size else ""
        return Spread(None, None, int(np.isnan(values).sum()), reason)
    low, high = np.quantile(kept, [(1 - level) / 2, (1 + level) / 2])
    return Spread(float(low), float(high), int(np.isnan(values).sum()))


def cluster_bootstrap(numerators: Sequence[float], denominators: Sequence[float],
                      resamples: int = 10_000, level: float = 0.95, seed: int = 5
                      ) -> tuple[float, float, float]:
    """``sum(numerators) / sum(denominators)`` with a percentile interval from resampling
    the clusters (one numerator and denominator each, such as an attack's caused
    successes and its replies) with replacement. Lesson 5, "Did the attack cause it?".

    Returns ``(estimate, low, high)``. A resample whose denominators sum to 0 is left
    out. When every resample gives the same ratio (one cluster, or a pooled rate of 0 in
    every cluster) there is no interval: ``low`` and ``high`` are None.
    """
    numerators, denominators = np.asarray(numerators, float), np.asarray(denominators, float)
    if len(numerators) != len(denominators) or not len(numerators) or denominators.sum() <= 0:
        raise ValueError("the clusters need as many numerators as denominators, and some "
                         "denominator above 0")
    picks = cluster_picks(len(numerators), resamples, seed)
    bottoms = denominators[picks].sum(axis=1)
    tops = numerators[picks].sum(axis=1)
    spread = percentile([t / b if b > 0 else None for t, b in zip(tops, bottoms)], level)
    return float(numerators.sum() / denominators.sum()), spread.low, spread.high
