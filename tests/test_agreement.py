"""Agreement statistics (lesson 4): worked by hand, and against independent implementations.

Independent implementations: statsmodels (``proportion_confint``, ``cohens_kappa`` with its
``kappa_max``, ``fleiss_kappa``), scipy's ``binomtest``, scikit-learn (``cohen_kappa_score``,
``roc_auc_score``, ``roc_curve``). Published worked example: the irrCAC package's README
(Gwet, github.com/kgwet/irrCAC, "Computing agreement Coefficients from Contingency
tables"), two raters classifying 100 subjects into three categories (``cont3x3abstractors``):
percent agreement 0.89, Cohen's kappa 0.7964094, Gwet's AC1 0.8493305, Brennan-Prediger
0.835. Degenerate tables get a number only where the formula has one that means
something, otherwise "undefined" and why, never NaN and never a 0 that describes no signal.
"""
from __future__ import annotations

import itertools
import warnings
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import binomtest
from sklearn.metrics import cohen_kappa_score, roc_auc_score, roc_curve
from statsmodels.stats.inter_rater import aggregate_raters, cohens_kappa, fleiss_kappa
from statsmodels.stats.proportion import proportion_confint

from helpers import agreement
from helpers.agreement import (ONE_CATEGORY, Confusion, agreement_summary, bootstrap_kappa,
                               cohen_kappa, confusion, confusion_from_cells as table,
                               exact_interval, gwet_ac1, kappa_max, negative_predictive_value,
                               pabak, positive_predictive_value, ratings_of, resample_indices,
                               sensitivity, specificity, table_coefficients, table_kappa)

T, F = True, False
# Ten replies: 2 flagged and unsupported, 1 flagged but supported, 1 unsupported and
# missed, 6 neither.
FLAGGED = [T, T, T, F, F, F, F, F, F, F]
UNSUPPORTED = [T, T, F, T, F, F, F, F, F, F]


def matrix(counts: Confusion) -> np.ndarray:
    """The table as statsmodels reads it: rows the signal, columns the review."""
    return np.array([[counts.flagged_unsupported, counts.flagged_supported],
                     [counts.passed_unsupported, counts.passed_supported]])


def random_tables(seed: int, how_many: int = 40):
    rng = np.random.default_rng(seed)
    for _ in range(how_many):
        cells = [int(c) for c in rng.integers(0, 25, size=4)]
        if all((cells[0] + cells[2], cells[1] + cells[3], cells[0] + cells[1],
                cells[2] + cells[3])):
            yield table(*cells)


# ------------------------------------------------------------------ the table, per class


def test_confusion_counts_the_four_cells_and_refuses_what_is_not_a_table():
    counts = confusion(FLAGGED, UNSUPPORTED)
    assert counts == Confusion(2, 1, 1, 6) and counts.rows == 10
    assert ratings_of(counts) == ([T, T, T, F, F, F, F, F, F, F],
                                  [T, T, F, T, F, F, F, F, F, F])
    with pytest.raises(ValueError, match="2 signals but 3 verdicts"):
        confusion([T, F], [T, F, F])
    with pytest.raises(TypeError, match=r"flagged\[1\] is 'yes'"):
        confusion([T, "yes"], [T, F])
    for bad in (-1, True, 1.0):
        with pytest.raises(ValueError, match="flagged_supported must be a count"):
            table(1, bad, 0, 0)


def test_the_four_rates_read_the_table_by_class():
    counts = table(38, 0, 4, 3)  # the screen on lesson 4's earlier review
    rates = [sensitivity, specificity, positive_predictive_value, negative_predictive_value]
    assert [(r(counts).numerator, r(counts).denominator) for r in rates] == [
        (38, 42), (3, 3), (38, 38), (3, 7)]
    assert list(agreement.PER_CLASS.values()) == rates
    assert specificity(counts).with_interval() == "3 of 3: 1.00 (0.29 to 1.00)"
    assert negative_predictive_value(counts).with_interval().startswith("3 of 7: 0.43 (")
    # A class with no members has no rate and no interval.
    nothing = specificity(table(5, 0, 2, 0))
    assert nothing.value is None and nothing.interval().low is None
    assert nothing.with_interval() == "undefined: 0 of 0"
    assert "nothing to count" in nothing.interval().text()
    with pytest.raises(ValueError, match="not a share"):
        exact_interval(4, 3)


@pytest.mark.parametrize("level", [0.95, 0.9])
def test_exact_interval_matches_statsmodels_and_scipy(level):
    for trials in (1, 2, 3, 7, 10, 42, 45, 118):
        for successes in sorted({0, 1, trials // 3, trials // 2, trials - 1, trials}):
            ours = exact_interval(successes, trials, level)
            low, high = proportion_confint(successes, trials, alpha=1 - level, method="beta")
            scipy = binomtest(successes, trials).proportion_ci(level, method="exact")
            assert (ours.low, ours.high) == pytest.approx((low, high), abs=1e-9)
            assert (ours.low, ours.high) == pytest.approx((scipy.low, scipy.high), abs=1e-9)
    # With all n trials successes, the lower end solves p^n = a/2 (Clopper and Pearson).
    for n in (1, 3, 10):
        assert (exact_interval(n, n).low, exact_interval(n, n).high) == pytest.approx(
            (0.025 ** (1 / n), 1.0))
        assert (exact_interval(0, n).low, exact_interval(0, n).high) == pytest.approx(
            (0.0, 1 - 0.025 ** (1 / n)))
    assert exact_interval(3, 3).text() == "0.29 to 1.00"


# ------------------------------------------------------------------ kappa


KAPPA_BY_HAND = {
    # p_o = 8/10; each side flags 3 of 10, so p_e = 0.58 and kappa = 0.22 / 0.42 = 11/21.
    "ten replies": (FLAGGED, UNSUPPORTED, float(Fraction(11, 21))),
    # p_o = 4/6; shares 2/2/2 and 2/3/1 of 6, so p_e = 12/36 and kappa = 1/2.
    "three categories": (list("xxyyzz"), list("xyyyzx"), 0.5),
    "perfect agreement": ([T, F, T, F, F], [T, F, T, F, F], 1.0),
    # One side constant: p_o = p_e = 3/4. Each constant, apart: p_o = p_e = 0.
    "one side constant": ([T, T, T, T], [T, T, F, T], 0.0),
    "both constant, apart": ([T, T], [F, F], 0.0),
    "systematic disagreement": ([T, F, T, F], [F, T, F, T], -1.0),
}


@pytest.mark.parametrize("case", KAPPA_BY_HAND)
def test_kappa_by_hand(case):
    first, second, expected = KAPPA_BY_HAND[case]
    kappa = cohen_kappa(first, second)
    assert kappa.value == pytest.approx(expected) and kappa.reason == ""
    assert kappa.value == pytest.approx(cohen_kappa_score(first, second))


def test_kappa_of_one_category_is_undefined_and_says_why():
    kappa = cohen_kappa(["supported"] * 4, ["supported"] * 4)  # p_o = p_e = 1: 0/0
    assert kappa.value is None and (kappa.observed, kappa.expected) == (1.0, 1.0)
    assert kappa.text() == kappa.reason == ONE_CATEGORY and "0/0" in ONE_CATEGORY
    with pytest.raises(ValueError, match="at least one"):
        cohen_kappa([], [])
    with pytest.raises(ValueError, match="2 ratings against 1"):
        cohen_kappa([T, F], [T])


def test_kappa_and_kappa_max_match_statsmodels_and_scikit_learn():
    rng = np.random.default_rng(7)
    for _ in range(20):
        first = rng.integers(0, 3, size=25).tolist()
        second = [x if rng.random() < 0.6 else int(rng.integers(0, 3)) for x in first]
        assert cohen_kappa(first, second).value == pytest.approx(
            cohen_kappa_score(first, second))
    for counts in random_tables(3):
        flagged, unsupported = ratings_of(counts)
        reference = cohens_kappa(matrix(counts))
        assert table_kappa(counts).value == pytest.approx(reference.kappa)
        assert kappa_max(flagged, unsupported).value == pytest.approx(reference.kappa_max)
        assert table_coefficients(counts)["kappa_max"].value == pytest.approx(reference.kappa_max)


def test_kappa_max_is_the_largest_kappa_the_margins_allow():
    """By brute force: every table with the same margins, scored by scikit-learn."""
    for counts in random_tables(5, 12):
        flagged_total = counts.flagged_unsupported + counts.flagged_supported
        bad_total = counts.flagged_unsupported + counts.passed_unsupported
        n = counts.rows
        best = max(cohen_kappa_score(*ratings_of(table(
            fu, flagged_total - fu, bad_total - fu, n - flagged_total - bad_total + fu)))
            for fu in range(max(0, flagged_total + bad_total - n),
                            min(flagged_total, bad_total) + 1))
        assert table_coefficients(counts)["kappa_max"].value == pytest.approx(best)
    # No signal of lesson 4's earlier review held a supported reply: kappa is its maximum.
    coefficients = table_coefficients(table(38, 0, 4, 3))
    assert coefficients["kappa"].value == pytest.approx(19 / 34)
    assert coefficients["kappa_max"].value == pytest.approx(coefficients["kappa"].value)


def _ac1_from_subjects(flagged: list[bool], unsupported: list[bool]) -> float:
    """Gwet's AC1 in its many-rater form (Gwet 2008, agreement per subject), written
    independently of helpers.agreement."""
    ratings = np.array([flagged, unsupported]).T.astype(int)
    counts = np.stack([(ratings == c).sum(axis=1) for c in (0, 1)], axis=1)
    p_a = ((counts * (counts - 1)).sum(axis=1) / 2).mean()
    pi = counts.sum(axis=0) / counts.sum()
    p_e = (pi * (1 - pi)).sum()
    return (p_a - p_e) / (1 - p_e)


def test_pabak_and_ac1_match_statsmodels_and_the_many_rater_form():
    """For two raters, Fleiss' kappa with uniform chance agreement (Brennan-Prediger) is
    PABAK; statsmodels computes it from the subjects' rating counts."""
    for counts in random_tables(7, 15):
        flagged, unsupported = ratings_of(counts)
        by_subject, _ = aggregate_raters(np.array([flagged, unsupported]).T.astype(int))
        got = table_coefficients(counts)
        assert got["pabak"].value == pytest.approx(fleiss_kappa(by_subject, method="uniform"))
        observed = (counts.flagged_unsupported + counts.passed_supported) / counts.rows
        assert got["pabak"].value == pytest.approx(2 * observed - 1)
        assert got["ac1"].value == pytest.approx(_ac1_from_subjects(flagged, unsupported))


def test_the_published_three_category_example():
    labels, cells = ("Ectopic", "AIU", "NIU"), [[13, 0, 0], [0, 20, 7], [0, 4, 56]]
    first, second = [], []
    for (i, a), (j, b) in itertools.product(enumerate(labels), enumerate(labels)):
        first += [a] * cells[i][j]
        second += [b] * cells[i][j]
    assert len(first) == 100 and gwet_ac1(first, second).observed == pytest.approx(0.89)
    assert gwet_ac1(first, second).value == pytest.approx(0.8493305, abs=5e-8)
    assert pabak(first, second).value == pytest.approx(0.835)
    assert cohen_kappa(first, second).value == pytest.approx(0.7964094, abs=5e-8)


# The degenerate tables: cells, and kappa, kappa_max and PABAK (None where undefined).
DEGENERATE = {
    # No supported reply: every signal agrees with the review exactly as often as chance.
    "no supported reply": ((5, 0, 3, 0), (None, None, 0.25)),
    "no unsupported reply": ((0, 2, 0, 6), (None, None, 0.5)),
    "perfect agreement": ((4, 0, 0, 6), (1.0, 1.0, 1.0)),
    "perfect agreement, one class": ((7, 0, 0, 0), (None, None, 1.0)),
    "all disagreement": ((0, 3, 3, 0), (-1.0, 1.0, -1.0)),
    "all disagreement, one class": ((0, 0, 4, 0), (None, None, -1.0)),
    "a signal that never flags": ((0, 0, 3, 4), (0.0, 0.0, 1 / 7)),
}


@pytest.mark.parametrize("name", DEGENERATE)
def test_degenerate_tables_report_a_number_only_where_one_is_defined(name):
    cells, expected = DEGENERATE[name]
    counts = table(*cells)
    got = table_coefficients(counts)
    for coefficient, value in zip(("kappa", "kappa_max", "pabak"), expected):
        if value is None:
            assert got[coefficient].value is None and got[coefficient].text().startswith(
                "undefined: the review has no "), (name, coefficient)
            assert "kappa is 0 whatever the signal does" in got[coefficient].reason
        else:
            assert got[coefficient].value == pytest.approx(value), (name, coefficient)
    # AC1 has a value on every table with a reply: its p_e is at most 1/2 for two classes.
    flagged, unsupported = ratings_of(counts)
    assert got["ac1"].value == pytest.approx(_ac1_from_subjects(flagged, unsupported))
    # Where kappa is undefined, the references return 0 or NaN: a figure that says
    # nothing about the signal, which is why ours gives the reason instead.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        references = (cohen_kappa_score(flagged, unsupported), cohens_kappa(matrix(counts)).kappa)
    if expected[0] is None:
        assert all(np.isnan(r) or r == 0 for r in references)
    else:
        assert got["kappa"].value == pytest.approx(references[0])


def test_coefficients_of_no_reply_or_one_category_are_undefined():
    assert all(c.value is None for c in table_coefficients(table(0, 0, 0, 0)).values())
    assert pabak([T, T], [T, T]).value is None and pabak([T, T], [T, T]).text().startswith(
        "undefined: ")
    assert pabak([T, T], [T, T], (T, F)).value == 1.0
    assert gwet_ac1(["a"], ["a"]).value is None
    with pytest.raises(ValueError, match="outside the categories"):
        pabak(["a"], ["b"], ["a"])
    with pytest.raises(ValueError, match="at least one"):
        gwet_ac1([], [])


# ------------------------------------------------------------------ the bootstrap


def _reference_bootstrap(first, second, units, resamples, seed, level=0.95):
    """The bootstrap written out: draw units with resample_indices, take every reply of
    each, score scikit-learn's kappa; a resample whose second side has one category is
    left out. Returns (low, high, resamples left out)."""
    order = list(dict.fromkeys(units))
    kappas, left_out = [], 0
    for drawn in resample_indices(len(order), resamples, seed):
        picked = [i for unit in drawn for i, u in enumerate(units) if u == order[unit]]
        a, b = [first[i] for i in picked], [second[i] for i in picked]
        if len(set(b)) == 1:
            left_out += 1
        else:
            kappas.append(cohen_kappa_score(a, b))
    return (*np.quantile(kappas, [(1 - level) / 2, (1 + level) / 2]), left_out)


@pytest.mark.parametrize(("first", "second", "units"), [
    ([T, T, F, F, T, F, T, F, F, T], [T, F, F, T, T, F, T, T, F, F],
     ["q1", "q1", "q2", "q3", "q3", "q3", "q4", "q5", "q5", "q6"]),
    # One supported reply among twenty: many resamples never draw it, and are left out.
    ([T] * 15 + [F] * 5, [T] * 19 + [F], None),
    (list("xxyyzzxxyz"), list("xyyyzxxzyz"), None),  # three categories, replies resampled
])
def test_the_bootstrap_is_kappa_on_the_units_drawn_with_undefined_resamples_left_out(
        first, second, units):
    interval = bootstrap_kappa(first, second, units, resamples=300, seed=4)
    low, high, left_out = _reference_bootstrap(first, second, units or range(len(first)),
                                               300, 4)
    assert (interval.low, interval.high) == pytest.approx((low, high))
    assert interval.undefined == left_out and interval.defined == 300 - left_out
    assert interval.units == len(set(units or range(len(first))))
    if second.count(F) == 1:  # the case with one supported reply
        assert interval.no_supported == left_out > 0 and interval.no_unsupported == 0
        # Scored 0, as a plain bootstrap would score them, they would make the lower end.
        assert interval.low > 0
        assert (f"from the {300 - left_out:,} of 300 resamples with both kinds of reply"
                in interval.text())


def test_the_bootstrap_is_seeded_with_the_lessons_settings_by_default():
    """Resamples and level default to lesson 4's settings; the seed is always passed
    (exercise 4.4 checks that a student uses the lesson's), so it defaults to 0."""
    flagged, unsupported = FLAGGED * 3, UNSUPPORTED * 3
    one = bootstrap_kappa(flagged, unsupported, seed=11)
    assert one == bootstrap_kappa(flagged, unsupported, seed=11) != bootstrap_kappa(
        flagged, unsupported, seed=12)
    assert one.low < cohen_kappa(flagged, unsupported).value < one.high
    default = bootstrap_kappa(flagged, unsupported)
    assert (default.seed, default.resamples, default.level, default.unit) == (
        0, agreement.BOOTSTRAP_RESAMPLES, agreement.BOOTSTRAP_LEVEL, "reply")
    lesson = bootstrap_kappa(flagged, unsupported, seed=agreement.BOOTSTRAP_SEED)
    summary = agreement_summary("x", flagged, unsupported, seed=agreement.BOOTSTRAP_SEED)
    assert summary["interval"] == lesson
    assert (lesson.low, lesson.high) != (default.low, default.high)


def test_a_bootstrap_with_no_defined_resample_says_so_and_bad_arguments_are_refused():
    interval = bootstrap_kappa([T, F], [T, T], resamples=20)
    assert interval.low is None and interval.no_supported == 20
    assert interval.text().startswith("undefined: ")
    for arguments, message in ((dict(level=1.5), "level"), (dict(resamples=0), "resamples"),
                               (dict(units=["q1"]), "1 units for 2 replies")):
        with pytest.raises(ValueError, match=message):
            bootstrap_kappa([T, F], [T, F], **arguments)
    with pytest.raises(ValueError, match="at least one"):
        bootstrap_kappa([], [])


# ------------------------------------------------------------------ tables


def test_summary_confusion_and_cross_tables_carry_the_counts():
    row = agreement_summary("screen", FLAGGED, UNSUPPORTED, resamples=200, seed=0)
    assert (row["flagged_unsupported"], row["flagged_supported"], row["passed_unsupported"],
            row["passed_supported"], row["rows"]) == (2, 1, 1, 6, 10)
    assert row["kappa"] == "0.52" and row["sensitivity"].startswith("2 of 3: 0.67 (")
    assert row["specificity"].startswith("6 of 7: 0.86 (") and row["ppv"].startswith("2 of 3")
    # Both sides flag 3 of 10, so the margins allow perfect agreement; PABAK = 2 * 0.8 - 1.
    assert (row["kappa_max"], row["pabak"]) == ("1.00", "0.60")
    table_ = agreement.confusion_table(row["counts"], "held", "not flagged")
    assert table_.to_dict("list") == {"human_verdict": ["not supported", "supported"],
                                      "held": [2, 1], "not flagged": [1, 6]}
    crossed = agreement.cross_table(["a", "a", "b"], ["a", "b", "b"], ["a", "b", "c"])
    assert crossed.to_dict("records") == [{"first": "a", "a": 1, "b": 1, "c": 0},
                                          {"first": "b", "a": 0, "b": 1, "c": 0},
                                          {"first": "c", "a": 0, "b": 0, "c": 0}]  # zeros too
    with pytest.raises(ValueError, match="outside the categories"):
        agreement.cross_table(["a"], ["d"], ["a", "b"])


def test_misses_by_reason_one_signal_and_several_side_by_side():
    reasons = ["figure", "figure", "ok", "claim", "ok", "abstention"]
    unsupported = [T, T, F, T, F, T]
    signals = {"screen": [T, F, F, F, T, F], "judge": [F, F, T, T, F, T]}
    order = ["claim", "figure", "abstention", "never used"]
    assert agreement.misses_by_reason(reasons, signals["screen"], unsupported, order).to_dict(
        "records") == [{"reason": "claim", "unsupported": 1, "flagged": 0, "missed": 1},
                       {"reason": "figure", "unsupported": 2, "flagged": 1, "missed": 1},
                       {"reason": "abstention", "unsupported": 1, "flagged": 0, "missed": 1}]
    assert agreement.misses_table(reasons, unsupported, signals, order).to_dict("records") == [
        {"reason": "claim", "unsupported": 1, "screen": 1, "judge": 0},
        {"reason": "figure", "unsupported": 2, "screen": 1, "judge": 2},
        {"reason": "abstention", "unsupported": 1, "screen": 1, "judge": 0}]
    with pytest.raises(ValueError, match=r"not in the order given: \['claim'\]"):
        agreement.misses_by_reason(reasons, signals["screen"], unsupported, order[1:])
    with pytest.raises(ValueError, match="but 2 values of signal 'judge'"):
        agreement.misses_table(reasons, unsupported, {"judge": [T, F]}, ["claim"])
    with pytest.raises(ValueError, match="at least one signal"):
        agreement.misses_table(reasons, unsupported, {}, ["claim"])


def test_majority_by_group_and_per_group_tables():
    groups = ["a", "a", "a", "b", "b", "c"]
    unsupported = [T, T, F, F, F, T]
    assert agreement.majority_by_group(groups, unsupported) == [T, T, T, F, F, T]
    rows = agreement.per_group_table(groups, [T, F, F, T, F, T], unsupported,
                                     ["a", "b", "c", "none"])
    a, b, c, empty = rows.to_dict("records")
    assert (a["flagged_unsupported"], a["passed_unsupported"], a["passed_supported"]) == (1, 1, 1)
    assert a["sensitivity"].startswith("1 of 2: 0.50 (") and a["specificity"].startswith("1 of 1")
    assert b["sensitivity"] == "undefined: 0 of 0" and b["kappa"].startswith("undefined: ")
    assert c["kappa"] == "undefined: no supported reply"
    assert empty["rows"] == 0 and empty["kappa"] == "undefined: no reply"


# ------------------------------------------------------------------ a graded signal


def test_auc_and_roc_points_match_scikit_learn():
    rng = np.random.default_rng(2)
    for _ in range(20):
        n = int(rng.integers(6, 40))
        positives = [bool(x) for x in rng.random(n) < 0.5]
        if all(positives) or not any(positives):
            continue
        scores = np.round(rng.random(n), 1)  # rounded, so ties happen
        assert agreement.roc_auc(scores, positives).value == pytest.approx(
            roc_auc_score(positives, scores))
        fpr, tpr, thresholds = roc_curve(positives, scores, drop_intermediate=False)
        points = agreement.roc_points(scores, positives)
        assert points["fpr"].tolist() == pytest.approx(list(fpr))
        assert points["tpr"].tolist() == pytest.approx(list(tpr))
        assert points["threshold"].iloc[1:].tolist() == pytest.approx(list(thresholds[1:]))
    # By hand: positives 0.9 and 0.4, negatives 0.4 and 0.1 win 1 + 1 + 0.5 + 1 of 4 pairs.
    assert agreement.roc_auc([0.9, 0.4, 0.4, 0.1], [T, T, F, F]).value == pytest.approx(3.5 / 4)
    assert agreement.roc_auc([0.2, 0.3], [T, T]).text() == (
        "undefined: there is no supported reply to rank against the others")
    with pytest.raises(ValueError, match="NaN"):
        agreement.roc_auc([0.1, float("nan")], [T, F])


def test_youden_threshold_and_split_halves():
    # Flagging >= 0.8 gives J = 2/3; >= 0.35 gives 1 - 1/3 = 2/3; the tie goes to 0.8.
    assert agreement.youden_threshold([0.9, 0.8, 0.7, 0.35, 0.3, 0.2], [T, T, F, T, F, F]) == 0.8
    with pytest.raises(ValueError, match="both"):
        agreement.youden_threshold([0.1, 0.2], [T, T])
    first, second = agreement.split_halves(["b", "a", "c", "a", "d", "e"], seed=1960)
    assert sorted(first + second) == ["a", "b", "c", "d", "e"] and len(first) == 2
    assert (first, second) == agreement.split_halves(["e", "d", "c", "b", "a"], seed=1960)
    assert agreement.split_halves(list("abcdefgh"), 1) != agreement.split_halves(
        list("abcdefgh"), 2)
