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
from dataclasses import asdict, dataclass, replace
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
    values = list(values)
    for position, value in enumerate(values):
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"{name}[{position}] is {value!r}; expected True or False")
    return [bool(value) for value in values]


def _signal_and_verdicts(flagged: Sequence, unsupported: Sequence) -> tuple[list, list]:
    """Both lists checked: True or False each, one signal per verdict."""
    flagged, unsupported = _booleans(flagged, "flagged"), _booleans(unsupported, "unsupported")
    if len(flagged) != len(unsupported):
        raise ValueError(f"{len(flagged)} signals but {len(unsupported)} verdicts")
    return flagged, unsupported


def confusion(flagged: Sequence[bool], unsupported: Sequence[bool]) -> Confusion:
    """Count the four cells; ``flagged[i]`` and ``unsupported[i]`` describe one reply."""
    pairs = list(zip(*_signal_and_verdicts(flagged, unsupported)))
    return Confusion(*(pairs.count(cell) for cell in
                       ((True, True), (True, False), (False, True), (False, False))))


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

    def interval(self, level: float = INTERVAL_LEVEL) -> ProportionInterval:
        """The exact interval of this share (:func:`exact_interval`)."""
        return exact_interval(self.numerator, self.denominator, level)

    def with_interval(self, digits: int = 2, level: float = INTERVAL_LEVEL) -> str:
        """``38 of 42: 0.90 (0.77 to 0.97)``, or ``undefined: 0 of 0`` with nothing to count."""
        if self.value is None:
            return f"undefined: {self.numerator} of 0"
        return (f"{self.numerator} of {self.denominator}: {self.value:.{digits}f} "
                f"({self.interval(level).text(digits)})")


def sensitivity(counts: Confusion) -> Ratio:
    """The unsupported replies the signal holds, of all unsupported replies (its recall).
    Lesson 4, "The screen against the review"."""
    return Ratio(counts.flagged_unsupported,
                 counts.flagged_unsupported + counts.passed_unsupported)


def specificity(counts: Confusion) -> Ratio:
    """The supported replies the signal passes, of all supported replies.
    Lesson 4, "The screen against the review"."""
    return Ratio(counts.passed_supported, counts.passed_supported + counts.flagged_supported)


def positive_predictive_value(counts: Confusion) -> Ratio:
    """The held replies a person rejects, of all held replies (its precision).
    Lesson 4, "The screen against the review"."""
    return Ratio(counts.flagged_unsupported,
                 counts.flagged_unsupported + counts.flagged_supported)


def negative_predictive_value(counts: Confusion) -> Ratio:
    """The passed replies a person finds supported, of all passed replies.
    Lesson 4, "The screen against the review"."""
    return Ratio(counts.passed_supported, counts.passed_supported + counts.passed_unsupported)


#: The four per-class rates of a 2x2 table, in the order lesson 4 reports them.
PER_CLASS = {"sensitivity": sensitivity, "specificity": specificity,
             "ppv": positive_predictive_value, "npv": negative_predictive_value}


# ------------------------------------------------------------------------------ kappa

ONE_CATEGORY = ("undefined: every rating from both sides is the same category, so chance "
                "agreement is already 1 and kappa would be 0/0")


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
    first, second, n, observed = _checked(first, second)
    one, two = _shares(first, n), _shares(second, n)
    expected = sum((one[c] * two.get(c, 0) for c in one), Fraction(0))
    return _coefficient(observed, expected, ONE_CATEGORY)


def _shares(ratings: list, n: int) -> dict:
    return {c: Fraction(ratings.count(c), n) for c in set(ratings)}


def _checked(first, second) -> tuple[list, list, int, Fraction]:
    """Both sides' ratings as lists, how many items they rate, and the share rated alike."""
    first, second = list(first), list(second)
    if len(first) != len(second):
        raise ValueError(f"{len(first)} ratings against {len(second)}")
    if not first:
        raise ValueError("an agreement coefficient needs at least one rated item")
    return first, second, len(first), Fraction(sum(a == b for a, b in zip(first, second)),
                                                len(first))


def _coefficient(observed: Fraction, expected: Fraction, undefined: str) -> Kappa:
    """(observed - expected) / (1 - expected), or undefined, saying why, when chance
    agreement is already 1."""
    if expected == 1:
        return Kappa(float(observed), 1.0, None, undefined)
    return Kappa(float(observed), float(expected), float((observed - expected) / (1 - expected)))


def kappa_max(first: Sequence[Hashable], second: Sequence[Hashable]) -> Kappa:
    """The largest kappa two raters with these category shares could reach.

    Observed agreement can be no larger than the sum, over categories, of the smaller of
    the two raters' shares; kappa_max = (that sum - p_e) / (1 - p_e). A kappa equal to
    its kappa_max means the raters agree as often as their margins allow, and a low one
    then says more about the margins than about the raters (Sim and Wright 2005). The
    result's ``observed`` is that largest agreement. Undefined, as kappa is, when p_e is
    1. Lesson 4, "The screen against the review".
    """
    first, second, n, _ = _checked(first, second)
    one, two = _shares(first, n), _shares(second, n)
    expected = sum((one[c] * two.get(c, 0) for c in one), Fraction(0))
    largest = sum((min(one[c], two.get(c, 0)) for c in one), Fraction(0))
    return _coefficient(largest, expected, ONE_CATEGORY)


def _categories(first: list, second: list, categories) -> list:
    used = set(first) | set(second)
    if categories is None:
        return sorted(used, key=repr)
    categories = list(categories)
    unknown = used - set(categories)
    if unknown:
        raise ValueError(f"ratings outside the categories given: {sorted(unknown, key=repr)}")
    return categories


FEWER_THAN_TWO = ("undefined: a coefficient of agreement needs at least two categories to "
                  "choose from")


def pabak(first: Sequence[Hashable], second: Sequence[Hashable],
          categories: Sequence[Hashable] | None = None) -> Kappa:
    """Prevalence-adjusted, bias-adjusted kappa (Byrt, Bishop and Carlin 1993).

    Kappa with chance agreement fixed at 1/k for k categories, as if each were used
    equally: (k p_o - 1) / (k - 1), which for two categories is 2 p_o - 1. It is the
    Brennan-Prediger coefficient for two raters. ``categories`` lists every category a
    rating could take (default: those used); fewer than two leave nothing to choose
    between, and the result is undefined. Lesson 4, "The screen against the review".
    """
    first, second, _, observed = _checked(first, second)
    # With one category, chance agreement 1/1 is already 1: undefined.
    return _coefficient(observed, Fraction(1, len(_categories(first, second, categories))),
                        FEWER_THAN_TWO)


def gwet_ac1(first: Sequence[Hashable], second: Sequence[Hashable],
             categories: Sequence[Hashable] | None = None) -> Kappa:
    """Gwet's (2008) first-order agreement coefficient, AC1.

    Chance agreement is p_e = sum over categories of pi (1 - pi), divided by k - 1, where
    pi is the mean of the two raters' shares of a category and k the number of
    categories (``categories``, default those used). It stays near p_o when one category
    dominates, where kappa's p_e climbs towards 1. Lesson 4, "The screen against the
    review".
    """
    first, second, n, observed = _checked(first, second)
    listed = _categories(first, second, categories)
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
    if not counts.rows:
        return Kappa(0.0, 0.0, None, reason)
    kappa = cohen_kappa(*ratings_of(counts))
    return replace(kappa, value=None, reason=reason) if reason else kappa


def table_kappa_max(counts: Confusion) -> Kappa:
    """:func:`kappa_max` of a 2x2 table, undefined where :func:`table_kappa` is."""
    reason = _empty_class(counts)
    return Kappa(0.0, 0.0, None, reason) if reason else kappa_max(*ratings_of(counts))


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


# ------------------------------------------------------------- bootstrap by question


@dataclass(frozen=True)
class KappaInterval:
    """A percentile bootstrap interval for kappa, and what happened in the resamples: the
    unit resampled, and how many resamples the second side (the review) rated with one
    category only, by that category; kappa is undefined there (:func:`bootstrap_kappa`)."""

    low: float | None
    high: float | None
    level: float
    resamples: int
    seed: int
    unit: str
    units: int
    one_category: dict

    @property
    def no_supported(self) -> int:
        """Resamples in which the review finds every reply unsupported (rates all True)."""
        return self.one_category.get(True, 0)

    @property
    def no_unsupported(self) -> int:
        """Resamples in which the review finds every reply supported (rates all False)."""
        return self.one_category.get(False, 0)

    @property
    def undefined(self) -> int:
        """Resamples left out: those in which the review gave one category only."""
        return sum(self.one_category.values())

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


def bootstrap_kappa(first: Sequence[Hashable], second: Sequence[Hashable],
                    units: Sequence[Hashable] | None = None, *, unit: str = "reply",
                    resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0,
                    level: float = BOOTSTRAP_LEVEL) -> KappaInterval:
    """Percentile bootstrap interval for Cohen's kappa of ``first`` (a signal, say) against
    ``second`` (the review), resampling ``units``.

    A resample draws as many units as there are, with replacement, and takes every reply
    of each unit drawn (``units[i]`` is reply i's unit, a question for instance; with
    ``units`` None each reply is its own unit); kappa is computed again on it, and the
    interval holds the central ``level`` share of those kappas. A resample in which the
    second side gives every reply one category has no kappa to give: any first side
    agrees with it exactly as often as chance would (:func:`table_kappa`). It is counted
    and left out, never scored 0. Lesson 4, "Resampling questions".
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1, got {level}")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    first, second, n, _ = _checked(first, second)
    units = list(range(n)) if units is None else list(units)
    if len(units) != n:
        raise ValueError(f"{len(units)} units for {n} replies")
    categories = sorted(set(first) | set(second), key=repr)
    code, k = {c: i for i, c in enumerate(categories)}, len(categories)
    position = {u: i for i, u in enumerate(dict.fromkeys(units))}
    # Per unit, its replies' (first, second) pairs counted in a k x k table.
    per_unit = np.zeros((len(position), k * k), dtype=np.int64)
    np.add.at(per_unit, ([position[u] for u in units],
                         [code[a] * k + code[b] for a, b in zip(first, second)]), 1)
    tables = per_unit[resample_indices(len(position), resamples, seed)].sum(axis=1)
    tables = tables.reshape(resamples, k, k)
    total = tables.sum(axis=(1, 2))
    rows, columns = tables.sum(axis=2), tables.sum(axis=1)
    chance = (rows * columns).sum(axis=1)  # p_e = chance / total^2, exactly
    agreed = np.trace(tables, axis1=1, axis2=2)
    alone = columns == total[:, None]  # the second side gave only that category
    defined = ~alone.any(axis=1)
    values = ((total * agreed - chance)[defined] / (total * total - chance)[defined])
    low = high = None
    if values.size:
        low, high = (float(v) for v in np.quantile(values, [(1 - level) / 2, (1 + level) / 2]))
    return KappaInterval(low, high, level, resamples, seed, unit, len(position),
                         {c: int(alone[:, code[c]].sum()) for c in categories
                          if alone[:, code[c]].any()})


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
    group has one; see :func:`table_kappa`). A group with no reply gets a row of zeros.
    Lesson 4, "Split by system"."""
    flagged, unsupported = _signal_and_verdicts(flagged, unsupported)
    if len(groups) != len(flagged):
        raise ValueError(f"{len(groups)} groups for {len(flagged)} signals")
    rows = []
    for group in order:
        mask = [g == group for g in groups]
        counts = confusion([f for f, m in zip(flagged, mask) if m],
                           [u for u, m in zip(unsupported, mask) if m])
        rows.append({"group": group, "rows": counts.rows, **asdict(counts),
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
    """One row of the agreement tables: the counts; the four per-class rates with exact
    intervals; kappa, kappa_max, PABAK and AC1; and kappa's bootstrap interval, resampling
    ``units`` (default: replies; see :func:`bootstrap_kappa`). The texts are what the
    tables show; ``counts``, ``kappa_result``, ``coefficients`` and ``interval`` are the
    objects behind them."""
    counts = confusion(flagged, unsupported)
    coefficients = table_coefficients(counts)
    interval = bootstrap_kappa(flagged, unsupported, units, unit=unit, resamples=resamples,
                               seed=seed)
    return {
        "signal": signal,
        "rows": counts.rows,
        **asdict(counts),
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
    flagged, unsupported = _signal_and_verdicts(flagged, unsupported)
    rows = []
    for reason in order:
        mask = [u and r == reason for r, u in zip(reasons, unsupported)]
        if any(mask):
            caught = sum(f and m for f, m in zip(flagged, mask))
            rows.append({"reason": reason, "unsupported": sum(mask), "flagged": caught,
                         "missed": sum(mask) - caught})
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
