"""Agreement between a signal and the human support review: 2x2 counts, recall, precision,
Cohen's kappa with a bootstrap interval, and the misses by reason.

Introduced in lesson 4, "The screen against the review". A *signal* is anything that
marks a reply as suspect: the support screen's "held for human review", a wrong action,
a judge's "no". The human verdict says whether the reply is "not supported". Every
function here is pure; nothing divides by zero quietly: a ratio with nothing to count
says so, and kappa says why when it is undefined.
"""
from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pandas as pd

#: The bootstrap settings of every interval on lesson 4's page and in its exercises: the
#: seed is the year of Cohen's paper, so the intervals come out the same on every render.
#: The functions below take the resamples and level as defaults; the seed is passed
#: explicitly, as lesson 4's exercise 4.4 asks. Lesson 4, "The screen against the review".
BOOTSTRAP_SEED = 1960
BOOTSTRAP_RESAMPLES = 2000
#: The share of resampled kappas the interval holds.
BOOTSTRAP_LEVEL = 0.95


@dataclass(frozen=True)
class Confusion:
    """The 2x2 counts of a signal against the human verdict."""

    flagged_unsupported: int  # the signal flags a reply a person finds unsupported
    flagged_supported: int  # a false alarm: flagged, yet supported
    passed_unsupported: int  # a miss: not flagged, yet unsupported
    passed_supported: int  # not flagged and supported

    @property
    def rows(self) -> int:
        return (self.flagged_unsupported + self.flagged_supported
                + self.passed_unsupported + self.passed_supported)


def _booleans(values: Sequence, name: str) -> list[bool]:
    out = []
    for position, value in enumerate(values):
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"{name}[{position}] is {value!r}; expected True or False")
        out.append(bool(value))
    return out


def confusion(flagged: Sequence[bool], unsupported: Sequence[bool]) -> Confusion:
    """Count the four cells; ``flagged[i]`` and ``unsupported[i]`` describe one reply."""
    flagged = _booleans(flagged, "flagged")
    unsupported = _booleans(unsupported, "unsupported")
    if len(flagged) != len(unsupported):
        raise ValueError(f"{len(flagged)} signals but {len(unsupported)} verdicts")
    pairs = list(zip(flagged, unsupported))
    return Confusion(
        flagged_unsupported=pairs.count((True, True)),
        flagged_supported=pairs.count((True, False)),
        passed_unsupported=pairs.count((False, True)),
        passed_supported=pairs.count((False, False)),
    )


@dataclass(frozen=True)
class Ratio:
    """A share with its counts; ``value`` is None when there is nothing to count."""

    numerator: int
    denominator: int

    @property
    def value(self) -> float | None:
        return None if self.denominator == 0 else self.numerator / self.denominator

    def text(self, digits: int = 2) -> str:
        if self.value is None:
            return f"undefined ({self.numerator} of 0)"
        return f"{self.numerator} of {self.denominator} ({self.value:.{digits}f})"


def recall(counts: Confusion) -> Ratio:
    """The share of unsupported replies the signal flags."""
    return Ratio(counts.flagged_unsupported,
                 counts.flagged_unsupported + counts.passed_unsupported)


def precision(counts: Confusion) -> Ratio:
    """The share of flagged replies a person finds unsupported."""
    return Ratio(counts.flagged_unsupported,
                 counts.flagged_unsupported + counts.flagged_supported)


# ------------------------------------------------------------------------------ kappa

ONE_CATEGORY = (
    "undefined: every rating from both sides is the same category, so chance agreement "
    "is already 1 and kappa would be 0/0"
)


@dataclass(frozen=True)
class Kappa:
    """Cohen's kappa: observed and chance agreement, and kappa or why it is undefined."""

    observed: float
    expected: float
    value: float | None
    reason: str = ""

    def text(self, digits: int = 2) -> str:
        return self.reason if self.value is None else f"{self.value:.{digits}f}"


def cohen_kappa(first: Sequence[Hashable], second: Sequence[Hashable]) -> Kappa:
    """Cohen's (1960) kappa for two ratings of the same items, any number of categories.

    kappa = (p_o - p_e) / (1 - p_e), where p_o is the share of items rated alike and
    p_e the share expected by chance from each side's own category frequencies. Exact
    arithmetic (fractions), so perfect agreement is exactly 1. When both sides give one
    and the same category to everything, p_e = 1 and kappa is 0/0: the result then has
    ``value`` None and says so, rather than returning NaN or raising.
    """
    first, second = list(first), list(second)
    if len(first) != len(second):
        raise ValueError(f"{len(first)} ratings against {len(second)}")
    if not first:
        raise ValueError("kappa needs at least one rated item")
    n = len(first)
    observed = Fraction(sum(a == b for a, b in zip(first, second)), n)
    expected = sum((Fraction(first.count(c), n) * Fraction(second.count(c), n)
                    for c in set(first) | set(second)), Fraction(0))
    if expected == 1:
        return Kappa(float(observed), 1.0, None, ONE_CATEGORY)
    return Kappa(float(observed), float(expected), float((observed - expected) / (1 - expected)))


def resample_indices(n: int, resamples: int, seed: int) -> np.ndarray:
    """Row indices of ``resamples`` bootstrap samples of ``n`` items, drawn with
    replacement from a seeded generator (shape resamples x n)."""
    return np.random.default_rng(seed).integers(0, n, size=(resamples, n))


@dataclass(frozen=True)
class Interval:
    """A percentile bootstrap interval; ``low``/``high`` are None when no resample had a
    defined kappa. ``undefined`` counts the resamples left out (one category only)."""

    low: float | None
    high: float | None
    level: float
    resamples: int
    undefined: int
    seed: int

    def text(self, digits: int = 2) -> str:
        if self.low is None:
            return "undefined (kappa is undefined in every resample)"
        text = f"{self.low:.{digits}f} to {self.high:.{digits}f}"
        if self.undefined:
            text += f" ({self.undefined} of {self.resamples} resamples undefined, left out)"
        return text


def bootstrap_kappa(first: Sequence[Hashable], second: Sequence[Hashable], *,
                    resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0,
                    level: float = BOOTSTRAP_LEVEL) -> Interval:
    """Percentile bootstrap interval for Cohen's kappa: resample items with replacement,
    recompute kappa, take the central ``level`` share of the values.

    Resamples in which kappa is undefined (every rating one category) are counted and
    left out. Small samples give wide intervals; that is the point of showing one.
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1, got {level}")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    first, second = list(first), list(second)
    if len(first) != len(second) or not first:
        cohen_kappa(first, second)  # raises the same error as a point estimate would
    categories = sorted(set(first) | set(second), key=repr)
    code = {c: i for i, c in enumerate(categories)}
    a = np.array([code[x] for x in first])
    b = np.array([code[x] for x in second])
    index = resample_indices(len(a), resamples, seed)
    ra, rb = a[index], b[index]
    n = len(a)
    observed = (ra == rb).sum(axis=1) / n
    # Counts per category on each side, per resample, in integers (no rounding until the end).
    counts_a = np.stack([(ra == k).sum(axis=1) for k in range(len(categories))], axis=1)
    counts_b = np.stack([(rb == k).sum(axis=1) for k in range(len(categories))], axis=1)
    chance_numerator = (counts_a * counts_b).sum(axis=1)  # p_e = this / n^2
    defined = chance_numerator != n * n
    expected = chance_numerator[defined] / (n * n)
    values = (observed[defined] - expected) / (1 - expected)
    undefined = int((~defined).sum())
    if values.size == 0:
        return Interval(None, None, level, resamples, undefined, seed)
    low, high = np.quantile(values, [(1 - level) / 2, (1 + level) / 2])
    return Interval(float(low), float(high), level, resamples, undefined, seed)


# ------------------------------------------------------------------------------ tables


def confusion_table(counts: Confusion, flagged_label: str, passed_label: str) -> pd.DataFrame:
    """The 2x2 as a table: one row per human verdict, one column per signal value."""
    return pd.DataFrame({
        "human_verdict": ["not supported", "supported"],
        flagged_label: [counts.flagged_unsupported, counts.flagged_supported],
        passed_label: [counts.passed_unsupported, counts.passed_supported],
    })


def agreement_summary(signal: str, flagged: Sequence[bool], unsupported: Sequence[bool], *,
                      resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> dict:
    """One row of the agreement table: the counts, recall, precision, kappa, interval."""
    counts = confusion(flagged, unsupported)
    kappa = cohen_kappa(list(flagged), list(unsupported))
    interval = bootstrap_kappa(list(flagged), list(unsupported), resamples=resamples,
                               seed=seed)
    return {
        "signal": signal,
        "rows": counts.rows,
        "flagged_unsupported": counts.flagged_unsupported,
        "flagged_supported": counts.flagged_supported,
        "passed_unsupported": counts.passed_unsupported,
        "passed_supported": counts.passed_supported,
        "recall": recall(counts).text(),
        "precision": precision(counts).text(),
        "kappa": kappa.text(),
        "kappa_interval": interval.text(),
        "counts": counts,
        "kappa_result": kappa,
        "interval": interval,
    }


def misses_by_reason(reasons: Sequence[str], flagged: Sequence[bool],
                     unsupported: Sequence[bool], order: Sequence[str]) -> pd.DataFrame:
    """For each reason of an unsupported reply: how many there are, how many the signal
    flagged and how many it missed. ``order`` lists the reasons to report, in order;
    reasons with no unsupported reply are left out."""
    flagged = _booleans(flagged, "flagged")
    unsupported = _booleans(unsupported, "unsupported")
    rows = []
    for reason in order:
        mask = [u and r == reason for r, u in zip(reasons, unsupported)]
        total = sum(mask)
        if total == 0:
            continue
        caught = sum(f for f, m in zip(flagged, mask) if m)
        rows.append({"reason": reason, "unsupported": total, "flagged": caught,
                     "missed": total - caught})
    unknown = sorted({r for r, u in zip(reasons, unsupported) if u} - set(order))
    if unknown:
        raise ValueError(f"reasons not in the order given: {unknown}")
    return pd.DataFrame(rows, columns=["reason", "unsupported", "flagged", "missed"])


def misses_table(reasons: Sequence[str], unsupported: Sequence[bool],
                 signals: Mapping[str, Sequence[bool]], order: Sequence[str]) -> pd.DataFrame:
    """:func:`misses_by_reason` for several signals at once, side by side: one row per
    reason of an unsupported reply (in ``order``), its count, and one column per signal
    (named as in ``signals``) with how many of those replies that signal missed.

    Every signal must describe the same replies as ``reasons`` and ``unsupported``.
    Lesson 4, "Three signals, one review".
    """
    if not signals:
        raise ValueError("misses_table needs at least one signal")
    table = None
    for name, flagged in signals.items():
        if len(flagged) != len(reasons) or len(unsupported) != len(reasons):
            raise ValueError(f"{len(reasons)} reasons, {len(unsupported)} verdicts, but "
                             f"{len(flagged)} values of signal {name!r}")
        one = misses_by_reason(reasons, flagged, unsupported, order)
        one = one[["reason", "unsupported", "missed"]].rename(columns={"missed": name})
        table = one if table is None else table.merge(
            one, on=["reason", "unsupported"], validate="one_to_one")
    return table.reset_index(drop=True)


def cross_table(first: Sequence[Hashable], second: Sequence[Hashable],
                categories: Sequence[Hashable]) -> pd.DataFrame:
    """Counts of every (first, second) pair of categories, zeros included."""
    if len(first) != len(second):
        raise ValueError(f"{len(first)} ratings against {len(second)}")
    unknown = sorted({*first, *second} - set(categories), key=repr)
    if unknown:
        raise ValueError(f"ratings outside the categories given: {unknown}")
    pairs = list(zip(first, second))
    return pd.DataFrame([{"first": a, **{str(b): pairs.count((a, b)) for b in categories}}
                         for a in categories])
