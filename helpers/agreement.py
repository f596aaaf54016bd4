"""Agreement between a signal and the human support review: the 2x2 table, the two
per-class rates with exact intervals, and the chance-corrected coefficients.

Introduced in lesson 4, "The screen against the review". A *signal* is anything that
marks a reply as suspect: the support screen's "held for human review", a judge's "no".
The human verdict says whether the reply is "not supported", the positive class. A 2x2
table is read per class first: sensitivity (unsupported replies held) and specificity
(supported replies passed), each with an exact interval (:mod:`helpers.validity` builds
on them). The coefficients answer another question, how far two raters agree beyond
chance (lesson 4, "Going further"): Cohen's kappa beside the most its margins allow
(kappa_max), PABAK and Gwet's AC1.

Every function here is pure, and nothing divides by zero quietly: a share with nothing
to count, an interval of no replies, a kappa whose table leaves chance nothing to
explain, each says "undefined" and why, never a number.
"""
from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np
from scipy import stats


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

    @property
    def counts(self) -> tuple[int, int]:
        return self.numerator, self.denominator

    def __str__(self) -> str:
        """How a table shows it: ``38 of 42: 0.90 (0.77 to 0.97)``, or ``undefined: 0 of 0``
        with nothing to count."""
        if self.value is None:
            return f"undefined: {self.numerator} of 0"
        shown = f"{self.numerator} of {self.denominator}: {self.value:.2f}"
        return f"{shown} ({self.interval().text()})"


class Count(Ratio):
    """A count of a whole, as numbers; a table shows it as "k of n" ("undefined" when the
    whole is 0)."""

    def __str__(self) -> str:
        return f"{self.numerator} of {self.denominator}" if self.denominator else "undefined"


def sensitivity(counts: Confusion) -> Ratio:
    """The unsupported replies the signal holds, of all unsupported replies (its recall).
    Lesson 4, "The screen against the review"."""
    return Ratio(counts.flagged_unsupported,
                 counts.flagged_unsupported + counts.passed_unsupported)


def specificity(counts: Confusion) -> Ratio:
    """The supported replies the signal passes, of all supported replies.
    Lesson 4, "The screen against the review"."""
    return Ratio(counts.passed_supported, counts.passed_supported + counts.flagged_supported)


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

    def __str__(self) -> str:
        return self.text()


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


def coefficient_row(counts: Confusion) -> dict:
    """One row of lesson 4's coefficients table: the observed agreement and each
    coefficient (shown "undefined: ..." where it is). Lesson 4, "Going further"."""
    observed = (counts.flagged_unsupported + counts.passed_supported) / counts.rows
    return {"observed": observed, **table_coefficients(counts)}
