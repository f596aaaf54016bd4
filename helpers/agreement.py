"""Agreement between a signal and the human support review: the 2x2 table read per class,
chance-corrected coefficients, bootstrap intervals, ROC curves, and the misses by reason.

Introduced in lesson 4, "The screen against the review". A *signal* is anything that
marks a reply as suspect: the support screen's "held for human review", a wrong action,
a judge's "no", a similarity below a threshold. The human verdict says whether the reply
is "not supported", the positive class. A 2x2 table is read per class first:
sensitivity (unsupported replies held), specificity (supported replies passed) and the
two predictive values, each with an exact interval; then one coefficient at a time:
Cohen's kappa beside the most its margins allow (kappa_max), PABAK and Gwet's AC1.

Every function here is pure, and nothing divides by zero quietly: a share with nothing
to count, an interval of no replies, a kappa whose table leaves chance nothing to
explain, each says "undefined" and why, never a number.
"""
from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pandas as pd
from scipy import stats

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


def confusion_from_cells(flagged_unsupported: int, flagged_supported: int,
                         passed_unsupported: int, passed_supported: int) -> Confusion:
    """A :class:`Confusion` from four counts, each a whole number of at least 0 (a table
    given as numbers, as in lesson 4's exercises)."""
    cells = (flagged_unsupported, flagged_supported, passed_unsupported, passed_supported)
    for name, value in zip(("flagged_unsupported", "flagged_supported", "passed_unsupported",
                            "passed_supported"), cells):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
                or value < 0:
            raise ValueError(f"{name} must be a count (a whole number >= 0), not {value!r}")
    return Confusion(*(int(v) for v in cells))


def ratings_of(counts: Confusion) -> tuple[list[bool], list[bool]]:
    """The two lists of ratings a table counts: ``flagged`` and ``unsupported``, one pair
    per reply, in the order of the four cells."""
    flagged = ([True] * (counts.flagged_unsupported + counts.flagged_supported)
               + [False] * (counts.passed_unsupported + counts.passed_supported))
    unsupported = ([True] * counts.flagged_unsupported + [False] * counts.flagged_supported
                   + [True] * counts.passed_unsupported + [False] * counts.passed_supported)
    return flagged, unsupported


#: The share of the exact intervals of lesson 4's page.
INTERVAL_LEVEL = 0.95


@dataclass(frozen=True)
class ProportionInterval:
    """An exact (Clopper-Pearson) interval for a share; ``low``/``high`` are None, with a
    ``reason``, when there is nothing to count."""

    low: float | None
    high: float | None
    level: float
    reason: str = ""

    def text(self, digits: int = 2) -> str:
        if self.low is None:
            return f"undefined: {self.reason}"
        return f"{self.low:.{digits}f} to {self.high:.{digits}f}"


def exact_interval(successes: int, trials: int,
                   level: float = INTERVAL_LEVEL) -> ProportionInterval:
    """The Clopper-Pearson (1934) interval for ``successes`` of ``trials``.

    Its ends are quantiles of beta distributions: low = B(a/2; k, n-k+1) (0 when k = 0),
    high = B(1-a/2; k+1, n-k) (1 when k = n), with a = 1 - ``level``. Exact means it
    never covers less than ``level``; with few trials it is wide, as it should be. No
    trials: undefined, with the reason. Lesson 4, "The screen against the review".
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1, got {level}")
    if trials < 0 or not 0 <= successes <= max(trials, 0):
        raise ValueError(f"{successes} successes of {trials} trials is not a share")
    if trials == 0:
        return ProportionInterval(None, None, level, "there is nothing to count (0 of 0)")
    alpha = 1 - level
    low = 0.0 if successes == 0 else float(stats.beta.ppf(alpha / 2, successes,
                                                          trials - successes + 1))
    high = 1.0 if successes == trials else float(stats.beta.ppf(1 - alpha / 2, successes + 1,
                                                                trials - successes))
    return ProportionInterval(low, high, level)


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

    def interval(self, level: float = INTERVAL_LEVEL) -> ProportionInterval:
        """The exact interval of this share (:func:`exact_interval`)."""
        return exact_interval(self.numerator, self.denominator, level)

    def with_interval(self, digits: int = 2, level: float = INTERVAL_LEVEL) -> str:
        """``38 of 42: 0.90 (0.77 to 0.97)``, or ``undefined: 0 of 0`` with nothing to count."""
        if self.value is None:
            return f"undefined: {self.numerator} of 0"
        return (f"{self.numerator} of {self.denominator}: {self.value:.{digits}f} "
                f"({self.interval(level).text(digits)})")


def recall(counts: Confusion) -> Ratio:
    """The share of unsupported replies the signal flags."""
    return Ratio(counts.flagged_unsupported,
                 counts.flagged_unsupported + counts.passed_unsupported)


def precision(counts: Confusion) -> Ratio:
    """The share of flagged replies a person finds unsupported."""
    return Ratio(counts.flagged_unsupported,
                 counts.flagged_unsupported + counts.flagged_supported)


def sensitivity(counts: Confusion) -> Ratio:
    """The unsupported replies the signal holds, of all unsupported replies (its recall).
    Lesson 4, "The screen against the review"."""
    return recall(counts)


def specificity(counts: Confusion) -> Ratio:
    """The supported replies the signal passes, of all supported replies.
    Lesson 4, "The screen against the review"."""
    return Ratio(counts.passed_supported, counts.passed_supported + counts.flagged_supported)


def positive_predictive_value(counts: Confusion) -> Ratio:
    """The held replies a person rejects, of all held replies (its precision).
    Lesson 4, "The screen against the review"."""
    return precision(counts)


def negative_predictive_value(counts: Confusion) -> Ratio:
    """The passed replies a person finds supported, of all passed replies.
    Lesson 4, "The screen against the review"."""
    return Ratio(counts.passed_supported, counts.passed_supported + counts.passed_unsupported)


#: The four per-class rates of a 2x2 table, in the order lesson 4 reports them.
PER_CLASS = {
    "sensitivity": sensitivity,
    "specificity": specificity,
    "ppv": positive_predictive_value,
    "npv": negative_predictive_value,
}


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


def _shares(ratings: list, n: int) -> dict:
    return {c: Fraction(ratings.count(c), n) for c in set(ratings)}


def _checked(first, second) -> tuple[list, list, int]:
    first, second = list(first), list(second)
    if len(first) != len(second):
        raise ValueError(f"{len(first)} ratings against {len(second)}")
    if not first:
        raise ValueError("an agreement coefficient needs at least one rated item")
    return first, second, len(first)


def kappa_max(first: Sequence[Hashable], second: Sequence[Hashable]) -> Kappa:
    """The largest kappa two raters with these category shares could reach.

    Observed agreement can be no larger than the sum, over categories, of the smaller of
    the two raters' shares; kappa_max = (that sum - p_e) / (1 - p_e). A kappa equal to
    its kappa_max means the raters agree as often as their margins allow, and a low one
    then says more about the margins than about the raters (Sim and Wright 2005). The
    result's ``observed`` is that largest agreement. Undefined, as kappa is, when p_e is
    1. Lesson 4, "The screen against the review".
    """
    first, second, n = _checked(first, second)
    one, two = _shares(first, n), _shares(second, n)
    categories = set(one) | set(two)
    expected = sum((one.get(c, 0) * two.get(c, 0) for c in categories), Fraction(0))
    largest = sum((min(one.get(c, 0), two.get(c, 0)) for c in categories), Fraction(0))
    if expected == 1:
        return Kappa(float(largest), 1.0, None, ONE_CATEGORY)
    return Kappa(float(largest), float(expected), float((largest - expected) / (1 - expected)))


def _categories(first: list, second: list, categories) -> list:
    used = set(first) | set(second)
    if categories is None:
        return sorted(used, key=repr)
    categories = list(categories)
    unknown = used - set(categories)
    if unknown:
        raise ValueError(f"ratings outside the categories given: {sorted(unknown, key=repr)}")
    return categories


FEWER_THAN_TWO = "undefined: a coefficient of agreement needs at least two categories to choose from"


def pabak(first: Sequence[Hashable], second: Sequence[Hashable],
          categories: Sequence[Hashable] | None = None) -> Kappa:
    """Prevalence-adjusted, bias-adjusted kappa (Byrt, Bishop and Carlin 1993).

    Kappa with chance agreement fixed at 1/k for k categories, as if each were used
    equally: (k p_o - 1) / (k - 1), which for two categories is 2 p_o - 1. It is the
    Brennan-Prediger coefficient for two raters. ``categories`` lists every category a
    rating could take (default: those used); fewer than two leave nothing to choose
    between, and the result is undefined. Lesson 4, "The screen against the review".
    """
    first, second, n = _checked(first, second)
    k = len(_categories(first, second, categories))
    observed = Fraction(sum(a == b for a, b in zip(first, second)), n)
    if k < 2:
        return Kappa(float(observed), 1.0, None, FEWER_THAN_TWO)
    expected = Fraction(1, k)
    return Kappa(float(observed), float(expected), float((observed - expected) / (1 - expected)))


def gwet_ac1(first: Sequence[Hashable], second: Sequence[Hashable],
             categories: Sequence[Hashable] | None = None) -> Kappa:
    """Gwet's (2008) first-order agreement coefficient, AC1.

    Chance agreement is p_e = sum over categories of pi (1 - pi), divided by k - 1, where
    pi is the mean of the two raters' shares of a category and k the number of
    categories (``categories``, default those used). It stays near p_o when one category
    dominates, where kappa's p_e climbs towards 1. Lesson 4, "The screen against the
    review".
    """
    first, second, n = _checked(first, second)
    listed = _categories(first, second, categories)
    observed = Fraction(sum(a == b for a, b in zip(first, second)), n)
    if len(listed) < 2:
        return Kappa(float(observed), 0.0, None, FEWER_THAN_TWO)
    one, two = _shares(first, n), _shares(second, n)
    mean = {c: (one.get(c, 0) + two.get(c, 0)) / 2 for c in listed}
    expected = sum((pi * (1 - pi) for pi in mean.values()), Fraction(0)) / (len(listed) - 1)
    return Kappa(float(observed), float(expected), float((observed - expected) / (1 - expected)))


def _empty_class(counts: Confusion) -> str:
    """Why kappa says nothing about a signal on this table, or "" when it does."""
    unsupported = counts.flagged_unsupported + counts.passed_unsupported
    supported = counts.flagged_supported + counts.passed_supported
    if counts.rows == 0:
        return "undefined: the table counts no replies"
    if supported == 0 or unsupported == 0:
        missing = "supported" if supported == 0 else "unsupported"
        return (f"undefined: the review has no {missing} reply here, so any signal agrees "
                "with it exactly as often as chance would and kappa is 0 whatever the "
                "signal does")
    return ""


def table_kappa(counts: Confusion) -> Kappa:
    """Cohen's kappa of a signal against the review, from its 2x2 table.

    As :func:`cohen_kappa`, except when the review has no reply in one class (no
    supported reply, or no unsupported one): observed and chance agreement are then
    equal for every signal, kappa is 0 by construction, and the result is undefined
    with that reason instead. Lesson 4, "The screen against the review".
    """
    reason = _empty_class(counts)
    if reason:
        kappa = cohen_kappa(*ratings_of(counts)) if counts.rows else None
        return Kappa(kappa.observed if kappa else 0.0, kappa.expected if kappa else 0.0,
                     None, reason)
    return cohen_kappa(*ratings_of(counts))


def table_kappa_max(counts: Confusion) -> Kappa:
    """:func:`kappa_max` of a 2x2 table, undefined where :func:`table_kappa` is."""
    reason = _empty_class(counts)
    if reason:
        return Kappa(0.0, 0.0, None, reason)
    return kappa_max(*ratings_of(counts))


def table_coefficients(counts: Confusion) -> dict[str, Kappa]:
    """Kappa, kappa_max, PABAK and AC1 of a signal's 2x2 table against the review, each
    over the two classes (not supported, supported) whether or not the table uses both.
    Lesson 4, "The screen against the review"."""
    if counts.rows == 0:
        empty = Kappa(0.0, 0.0, None, "undefined: the table counts no replies")
        return {"kappa": empty, "kappa_max": empty, "pabak": empty, "ac1": empty}
    flagged, unsupported = ratings_of(counts)
    return {"kappa": table_kappa(counts), "kappa_max": table_kappa_max(counts),
            "pabak": pabak(flagged, unsupported, (True, False)),
            "ac1": gwet_ac1(flagged, unsupported, (True, False))}


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


# ------------------------------------------------------------- bootstrap by question


@dataclass(frozen=True)
class TableInterval:
    """A percentile bootstrap interval for a signal's kappa against the review, and what
    happened in the resamples: how many had no supported reply, how many no unsupported
    one (kappa is undefined in both, :func:`table_kappa`), and the unit resampled."""

    low: float | None
    high: float | None
    level: float
    resamples: int
    seed: int
    unit: str
    units: int
    no_supported: int
    no_unsupported: int

    @property
    def undefined(self) -> int:
        """Resamples left out: those with no supported or no unsupported reply (a resample
        with neither has no reply at all, which cannot happen)."""
        return self.no_supported + self.no_unsupported

    @property
    def defined(self) -> int:
        return self.resamples - self.undefined

    def text(self, digits: int = 2) -> str:
        if self.low is None:
            return (f"undefined: kappa is undefined in every one of the {self.resamples:,} "
                    "resamples")
        text = f"{self.low:.{digits}f} to {self.high:.{digits}f}"
        if self.undefined:
            text += (f" (from the {self.defined:,} of {self.resamples:,} resamples with both "
                     "kinds of reply)")
        return text


def _cells(flagged: list[bool], unsupported: list[bool]) -> np.ndarray:
    """One row per reply: 1 in the column of its cell (flagged and unsupported, flagged
    and supported, passed and unsupported, passed and supported)."""
    f = np.array(flagged, dtype=bool)
    u = np.array(unsupported, dtype=bool)
    return np.stack([f & u, f & ~u, ~f & u, ~f & ~u], axis=1).astype(np.int64)


def _kappas_of_cells(cells: np.ndarray) -> np.ndarray:
    """Kappa of each row of 2x2 counts (columns as :func:`_cells`), NaN where the review
    has a class with no members (:func:`table_kappa`)."""
    fu, fs, pu, ps = (cells[:, i].astype(float) for i in range(4))
    n = fu + fs + pu + ps
    flagged, bad = (fu + fs) / n, (fu + pu) / n
    observed = (fu + ps) / n
    expected = flagged * bad + (1 - flagged) * (1 - bad)
    defined = ((fs + ps) > 0) & ((fu + pu) > 0)
    values = np.full(len(cells), np.nan)
    values[defined] = ((observed - expected)[defined] / (1 - expected)[defined])
    return values


def bootstrap_table_values(flagged: Sequence[bool], unsupported: Sequence[bool],
                           units: Sequence[Hashable] | None = None, *,
                           resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0
                           ) -> tuple[np.ndarray, np.ndarray]:
    """Each resample's 2x2 counts (resamples x 4) and kappa (NaN where undefined).

    A resample draws as many ``units`` as there are, with replacement, and takes every
    reply of each unit drawn (``units[i]`` is reply i's unit, a question for instance);
    with ``units`` None each reply is its own unit. Lesson 4, "Resampling questions".
    """
    flagged = _booleans(flagged, "flagged")
    unsupported = _booleans(unsupported, "unsupported")
    if len(flagged) != len(unsupported):
        raise ValueError(f"{len(flagged)} signals but {len(unsupported)} verdicts")
    if not flagged:
        raise ValueError("a bootstrap needs at least one reply")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    units = list(range(len(flagged))) if units is None else list(units)
    if len(units) != len(flagged):
        raise ValueError(f"{len(units)} units for {len(flagged)} replies")
    order = list(dict.fromkeys(units))
    position = {unit: i for i, unit in enumerate(order)}
    per_reply = _cells(flagged, unsupported)
    per_unit = np.zeros((len(order), 4), dtype=np.int64)
    np.add.at(per_unit, [position[u] for u in units], per_reply)
    index = resample_indices(len(order), resamples, seed)
    cells = per_unit[index].sum(axis=1)
    return cells, _kappas_of_cells(cells)


def bootstrap_table_kappa(flagged: Sequence[bool], unsupported: Sequence[bool],
                          units: Sequence[Hashable] | None = None, *, unit: str = "reply",
                          resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0,
                          level: float = BOOTSTRAP_LEVEL) -> TableInterval:
    """Percentile bootstrap interval for a signal's kappa against the review, resampling
    ``units`` (see :func:`bootstrap_table_values`; ``unit`` names them for the text).

    A resample with no supported reply, or no unsupported one, has no kappa to give
    (:func:`table_kappa`): it is counted and left out, never scored 0. The interval is
    then an interval over the resamples that hold both kinds of reply, and the counts
    say how many did not. Lesson 4, "Resampling questions".
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1, got {level}")
    cells, values = bootstrap_table_values(flagged, unsupported, units, resamples=resamples,
                                           seed=seed)
    supported = cells[:, 1] + cells[:, 3]
    bad = cells[:, 0] + cells[:, 2]
    n_units = len(set(units)) if units is not None else len(flagged)
    defined = values[~np.isnan(values)]
    low = high = None
    if defined.size:
        low, high = (float(v) for v in np.quantile(defined, [(1 - level) / 2, (1 + level) / 2]))
    return TableInterval(low, high, level, resamples, seed, unit, n_units,
                         int((supported == 0).sum()), int((bad == 0).sum()))


# ------------------------------------------------------------------- graded signals


@dataclass(frozen=True)
class Auc:
    """The area under a ROC curve, or None with the reason it is undefined."""

    value: float | None
    positives: int
    negatives: int
    reason: str = ""

    def text(self, digits: int = 2) -> str:
        return self.reason if self.value is None else f"{self.value:.{digits}f}"


def _scored(scores: Sequence[float], positives: Sequence[bool]) -> tuple[np.ndarray, np.ndarray]:
    positives = np.array(_booleans(positives, "positives"), dtype=bool)
    scores = np.asarray(scores, dtype=float)
    if scores.shape != positives.shape:
        raise ValueError(f"{scores.size} scores but {positives.size} verdicts")
    if np.isnan(scores).any():
        raise ValueError(f"score {int(np.flatnonzero(np.isnan(scores))[0])} is NaN")
    return scores, positives


def roc_auc(scores: Sequence[float], positives: Sequence[bool]) -> Auc:
    """The area under the ROC curve: the chance that a randomly chosen positive (an
    unsupported reply) scores higher than a randomly chosen negative, ties counting one
    half (the Mann-Whitney form, Hanley and McNeil 1982). Undefined without a positive
    or without a negative. Lesson 4, "A graded signal"."""
    scores, positives = _scored(scores, positives)
    pos, neg = scores[positives], scores[~positives]
    if not pos.size or not neg.size:
        missing = "unsupported" if not pos.size else "supported"
        return Auc(None, int(pos.size), int(neg.size),
                   f"undefined: there is no {missing} reply to rank against the others")
    above = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return Auc(float(above / (pos.size * neg.size)), int(pos.size), int(neg.size))


def roc_points(scores: Sequence[float], positives: Sequence[bool]) -> pd.DataFrame:
    """The ROC curve: for each threshold t (every distinct score, highest first, after an
    infinite one that flags nothing), flagging the replies that score at least t; the
    share of positives flagged (``tpr``) and of negatives flagged (``fpr``), with counts.
    Lesson 4, "A graded signal"."""
    scores, positives = _scored(scores, positives)
    thresholds = np.concatenate([[np.inf], np.unique(scores)[::-1]])
    rows = []
    for t in thresholds:
        flagged = scores >= t
        tp, fp = int((flagged & positives).sum()), int((flagged & ~positives).sum())
        rows.append({"threshold": float(t), "flagged_unsupported": tp, "flagged_supported": fp,
                     "tpr": tp / positives.sum() if positives.any() else np.nan,
                     "fpr": fp / (~positives).sum() if (~positives).any() else np.nan})
    return pd.DataFrame(rows)


def youden_threshold(scores: Sequence[float], positives: Sequence[bool]) -> float:
    """The threshold of :func:`roc_points` with the largest tpr - fpr (Youden's J); among
    ties, the one that flags fewest replies. Needs both classes. Lesson 4, "A graded
    signal"."""
    points = roc_points(scores, positives)
    if points["tpr"].isna().any() or points["fpr"].isna().any():
        raise ValueError("choosing a threshold needs both unsupported and supported replies")
    j = points["tpr"] - points["fpr"]
    best = points[np.isclose(j, j.max())]
    return float(best["threshold"].max())


def split_halves(units: Sequence[Hashable], seed: int) -> tuple[list, list]:
    """The distinct ``units`` (question IDs, say) split into two halves at random with
    ``seed``: sorted, shuffled by a seeded generator, the first half and the rest.
    Lesson 4, "A graded signal"."""
    distinct = sorted(set(units), key=repr)
    order = np.random.default_rng(seed).permutation(len(distinct))
    half = len(distinct) // 2
    return ([distinct[i] for i in sorted(order[:half])],
            [distinct[i] for i in sorted(order[half:])])


# ------------------------------------------------------------------- split by system


def majority_by_group(groups: Sequence[Hashable], unsupported: Sequence[bool]) -> list[bool]:
    """The best signal that knows only each reply's group (the system that wrote it):
    flag every reply of a group in which more than half the replies are unsupported.
    Lesson 4, "Split by system"."""
    unsupported = _booleans(unsupported, "unsupported")
    if len(groups) != len(unsupported):
        raise ValueError(f"{len(groups)} groups for {len(unsupported)} verdicts")
    frame = pd.DataFrame({"group": list(groups), "bad": unsupported})
    mostly_bad = frame.groupby("group", sort=False)["bad"].mean() > 0.5
    return [bool(mostly_bad[g]) for g in groups]


def _short_kappa(counts: Confusion) -> str:
    """Kappa as a table cell: the value, or "undefined:" and the one missing thing."""
    if counts.rows == 0:
        return "undefined: no reply"
    kappa = table_kappa(counts)
    if kappa.value is not None:
        return kappa.text()
    if counts.flagged_supported + counts.passed_supported == 0:
        return "undefined: no supported reply"
    return "undefined: no unsupported reply"


def per_group_table(groups: Sequence[Hashable], flagged: Sequence[bool],
                    unsupported: Sequence[bool], order: Sequence[Hashable]) -> pd.DataFrame:
    """One row per group of ``order``: its 2x2 counts, sensitivity and specificity with
    exact intervals, and kappa ("undefined:" and the class with no members, where the
    group has one; see :func:`table_kappa`). A group with no reply gets a row of zeros. Lesson 4, "Split by
    system"."""
    flagged = _booleans(flagged, "flagged")
    unsupported = _booleans(unsupported, "unsupported")
    if not len(groups) == len(flagged) == len(unsupported):
        raise ValueError(f"{len(groups)} groups, {len(flagged)} signals, "
                         f"{len(unsupported)} verdicts")
    rows = []
    for group in order:
        mask = [g == group for g in groups]
        counts = confusion([f for f, m in zip(flagged, mask) if m],
                           [u for u, m in zip(unsupported, mask) if m])
        rows.append({"group": group, "rows": counts.rows,
                     "flagged_unsupported": counts.flagged_unsupported,
                     "flagged_supported": counts.flagged_supported,
                     "passed_unsupported": counts.passed_unsupported,
                     "passed_supported": counts.passed_supported,
                     "sensitivity": sensitivity(counts).with_interval(),
                     "specificity": specificity(counts).with_interval(),
                     "kappa": _short_kappa(counts)})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------ tables


def confusion_table(counts: Confusion, flagged_label: str, passed_label: str) -> pd.DataFrame:
    """The 2x2 as a table: one row per human verdict, one column per signal value."""
    return pd.DataFrame({
        "human_verdict": ["not supported", "supported"],
        flagged_label: [counts.flagged_unsupported, counts.flagged_supported],
        passed_label: [counts.passed_unsupported, counts.passed_supported],
    })


def agreement_summary(signal: str, flagged: Sequence[bool], unsupported: Sequence[bool], *,
                      units: Sequence[Hashable] | None = None, unit: str = "reply",
                      resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> dict:
    """One row of the agreement tables: the counts; recall and precision; the four
    per-class rates with exact intervals; kappa, kappa_max, PABAK and AC1; and kappa's
    bootstrap interval, resampling ``units`` (default: replies; see
    :func:`bootstrap_table_kappa`). The texts are what the tables show; ``counts``,
    ``kappa_result``, ``coefficients`` and ``interval`` are the objects behind them."""
    counts = confusion(flagged, unsupported)
    coefficients = table_coefficients(counts)
    interval = bootstrap_table_kappa(list(flagged), list(unsupported), units, unit=unit,
                                     resamples=resamples, seed=seed)
    return {
        "signal": signal,
        "rows": counts.rows,
        "flagged_unsupported": counts.flagged_unsupported,
        "flagged_supported": counts.flagged_supported,
        "passed_unsupported": counts.passed_unsupported,
        "passed_supported": counts.passed_supported,
        "recall": recall(counts).text(),
        "precision": precision(counts).text(),
        **{name: rate(counts).with_interval() for name, rate in PER_CLASS.items()},
        **{name: value.text() for name, value in coefficients.items()},
        "kappa_interval": interval.text(),
        "counts": counts,
        "kappa_result": coefficients["kappa"],
        "coefficients": coefficients,
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
