"""Agreement and validity statistics (lesson 4): worked by hand, and against independent
implementations.

Independent implementations: statsmodels (``proportion_confint``, ``cohens_kappa`` with its
``kappa_max``, ``fleiss_kappa``), scipy's ``binomtest``, scikit-learn (``cohen_kappa_score``,
``roc_auc_score``), and bootstraps written out here with loops of their own. Published
worked example: the irrCAC package's README (Gwet, github.com/kgwet/irrCAC, "Computing
agreement Coefficients from Contingency tables"), two raters classifying 100 subjects into
three categories (``cont3x3abstractors``): percent agreement 0.89, Cohen's kappa
0.7964094, Gwet's AC1 0.8493305, Brennan-Prediger 0.835. Degenerate tables get a number
only where the formula has one that means something, otherwise "undefined" and why.
"""
from __future__ import annotations

import itertools
import warnings
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest
from sklearn.metrics import cohen_kappa_score, roc_auc_score
from statsmodels.stats.inter_rater import aggregate_raters, cohens_kappa, fleiss_kappa
from statsmodels.stats.proportion import proportion_confint

from helpers import validity
from helpers.intervals import Spread
from helpers.agreement import (ONE_CATEGORY, Confusion, Ratio, coefficient_row, cohen_kappa, confusion,
                               exact_interval, gwet_ac1, kappa_max, pabak, ratings_of,
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
        if all((cells[0] + cells[2], cells[1] + cells[3], cells[0] + cells[1], cells[2] + cells[3])):
            yield Confusion(*cells)


# ------------------------------------------------------------------ the table, per class


def test_confusion_counts_the_four_cells_and_refuses_what_is_not_a_table():
    counts = confusion(FLAGGED, UNSUPPORTED)
    assert counts == Confusion(2, 1, 1, 6) and counts.rows == 10
    assert ratings_of(counts) == ([T, T, T, F, F, F, F, F, F, F], [T, T, F, T, F, F, F, F, F, F])
    with pytest.raises(ValueError, match="2 signals but 3 verdicts"):
        confusion([T, F], [T, F, F])
    with pytest.raises(TypeError, match=r"flagged\[1\] is 'yes'"):
        confusion([T, "yes"], [T, F])


def test_the_two_rates_read_the_table_by_class():
    counts = Confusion(38, 0, 4, 3)  # the screen on the two models' distinct replies
    assert [(r(counts).numerator, r(counts).denominator) for r in (sensitivity, specificity)] \
        == [(38, 42), (3, 3)]
    assert str(specificity(counts)) == "3 of 3: 1.00 (0.29 to 1.00)"
    assert str(sensitivity(counts)) == "38 of 42: 0.90 (0.77 to 0.97)"
    # A class with no members has no rate and no interval.
    nothing = specificity(Confusion(5, 0, 2, 0))
    assert nothing.value is None and nothing.interval().low is None
    assert str(nothing) == "undefined: 0 of 0"
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
        assert (exact_interval(n, n).low, exact_interval(n, n).high) == pytest.approx((0.025 ** (1 / n), 1.0))
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
        assert cohen_kappa(first, second).value == pytest.approx(cohen_kappa_score(first, second))
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
        best = max(cohen_kappa_score(*ratings_of(Confusion(
            fu, flagged_total - fu, bad_total - fu, n - flagged_total - bad_total + fu)))
            for fu in range(max(0, flagged_total + bad_total - n),
                            min(flagged_total, bad_total) + 1))
        assert table_coefficients(counts)["kappa_max"].value == pytest.approx(best)
    # The screen on the models' replies holds no supported reply: kappa is its maximum.
    coefficients = table_coefficients(Confusion(38, 0, 4, 3))
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
    counts = Confusion(*cells)
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
    assert all(c.value is None for c in table_coefficients(Confusion(0, 0, 0, 0)).values())
    assert pabak([T, T], [T, T]).value is None and pabak([T, T], [T, T]).text().startswith("undefined: ")
    assert pabak([T, T], [T, T], (T, F)).value == 1.0
    assert gwet_ac1(["a"], ["a"]).value is None
    with pytest.raises(ValueError, match="outside the categories"):
        pabak(["a"], ["b"], ["a"])
    with pytest.raises(ValueError, match="at least one"):
        gwet_ac1([], [])
    row = coefficient_row(Confusion(38, 0, 4, 3))  # numbers, shown as text only in a table
    assert row["observed"] == pytest.approx(41 / 45) and row["kappa"].value == pytest.approx(0.5588, abs=1e-4)
    assert {key: str(value) for key, value in row.items() if key != "observed"} == {
        "kappa": "0.56", "kappa_max": "0.56", "pabak": "0.82", "ac1": "0.89"}


# ------------------------------------------------------------------ validity


def frame(flagged, unsupported, questions, **more):
    return pd.DataFrame({"held": flagged, "unsupported": unsupported, "question_id": questions, **more})


def test_distinct_replies_count_a_reply_once_per_group_and_question():
    rows = pd.DataFrame({"group": ["a", "a", "a", "b", "a"], "question_id": ["q1", "q1", "q2", "q1", "q1"],
                         "reviewed_reply": ["x", "x", "x", "x", "y"], "review_id": list("RSTUV")})
    assert validity.distinct_replies(rows)["review_id"].tolist() == ["R", "T", "U", "V"]


def test_validity_rows_by_hand():
    row = validity.validity_row(FLAGGED, UNSUPPORTED)
    assert row == {"unsupported": 3, "supported": 7, "sensitivity": Ratio(2, 3),
                   "specificity": Ratio(6, 7), "youden_j": pytest.approx(2 / 3 + 6 / 7 - 1)}
    assert (str(row["sensitivity"]), str(row["specificity"])) == (
        "2 of 3: 0.67 (0.09 to 0.99)", "6 of 7: 0.86 (0.42 to 1.00)")
    # Flagging at random, or everything, is J = 0; no supported reply, no J.
    assert validity.youden_j([T, F, T, F], [T, T, F, F]) == 0
    assert validity.youden_j([T, T], [T, F]) == 0
    assert validity.validity_row([T, F], [T, T])["youden_j"] == "undefined"
    table = validity.validity_table(frame(FLAGGED, UNSUPPORTED, range(10), g=list("ab" * 5)), "g")
    assert table["g"].tolist() == ["a", "b"] and table["unsupported"].tolist() == [1, 2]


def _reference_resamples(questions, resamples, seed):
    """The rows of each resample written out: questions drawn as the helper draws them."""
    order = list(dict.fromkeys(questions))
    draws = np.random.default_rng(seed).integers(0, len(order), (resamples, len(order)))
    return [[i for q in draw for i, u in enumerate(questions) if u == order[q]] for draw in draws]


QUESTIONS = ["q1", "q1", "q2", "q3", "q3", "q3", "q4", "q5", "q5", "q6"]


def test_the_bootstrap_resamples_whole_questions_and_leaves_out_what_it_cannot_score():
    drawn = validity.question_resamples(QUESTIONS, 50, 3)
    assert [list(rows) for rows in drawn] == _reference_resamples(QUESTIONS, 50, 3)
    got = validity.bootstrap_rates(FLAGGED, UNSUPPORTED, QUESTIONS, 400, 3)
    se, sp = [], []
    for rows in _reference_resamples(QUESTIONS, 400, 3):
        f, u = np.array(FLAGGED)[rows], np.array(UNSUPPORTED)[rows]
        se.append((f & u).sum() / u.sum() if u.any() else np.nan)
        sp.append((~f & ~u).sum() / (~u).sum() if (~u).any() else np.nan)
    for key, values in (("sensitivity", se), ("specificity", sp)):
        values = np.array(values)
        low, high = np.quantile(values[~np.isnan(values)], [0.025, 0.975])
        left = int(np.isnan(values).sum())
        assert (got[key].low, got[key].high, got[key].left_out) == (pytest.approx(low), pytest.approx(high), left)
        assert str(got[key]) == f"{low:.2f} to {high:.2f}" + (f" ({left} resamples left out)" if left else "")
    assert got["sensitivity"].left_out > 0 and (got["replies"], got["questions"]) == (10, 6)
    assert validity.percentile([None, np.nan]) == Spread(None, None, 2)
    assert str(validity.percentile([None, np.nan])).startswith("undefined")


def test_the_rogan_gladen_correction():
    # 0.7 passed, Se 0.5, Sp 1: (0.7 + 0.5 - 1) / 0.5 = 0.4; clipped to [0, 1]; J <= 0: None.
    assert validity.corrected_share(0.7, 0.5, 1.0) == pytest.approx(0.4)
    assert validity.corrected_share(0.2, 0.5, 1.0) == 0 and validity.corrected_share(1, 0.9, 0.9) == 1
    assert validity.corrected_share(0.5, 0.5, 0.5) is None
    # Calibrated and applied on the same replies it gives their true share exactly.
    rng = np.random.default_rng(4)
    for _ in range(10):
        bad = rng.random(30) < 0.6
        held = np.where(bad, rng.random(30) < 0.7, rng.random(30) < 0.2)
        replies = frame(held, bad, [f"q{i % 12}" for i in range(30)])
        got = validity.corrected_pass_rate(replies, replies, resamples=50)
        assert got["corrected"] == pytest.approx(got["true_share"]) == pytest.approx(1 - bad.mean())
    # A calibration whose screen has J = 0 corrects nothing.
    flat = frame([F, F, F, F], [T, F, T, F], ["a", "b", "c", "d"])
    assert validity.corrected_pass_rate(flat, flat, resamples=20)["corrected"] is None


def test_auc_and_its_interval_match_scikit_learn():
    rng = np.random.default_rng(2)
    for _ in range(20):
        n = int(rng.integers(6, 40))
        bad = rng.random(n) < 0.5
        if bad.all() or not bad.any():
            continue
        scores = np.round(rng.random(n), 1)  # rounded, so ties happen
        assert validity.auc(scores, bad) == pytest.approx(roc_auc_score(bad, scores))
    # By hand: unsupported 0.9 and 0.4, supported 0.4 and 0.1 win 1 + 1 + 0.5 + 1 of 4 pairs.
    assert validity.auc([0.9, 0.4, 0.4, 0.1], [T, T, F, F]) == pytest.approx(3.5 / 4)
    # Scores that agree to 4 decimals tie, whatever float noise separates them: a copy's
    # distance of 0 and one of 1e-7 (another CPU) count one half, not 1 or 0.
    assert validity.auc([1e-7, 0.0], [T, F]) == 0.5 == validity.auc([-6e-8, 0.0], [T, F])
    assert validity.auc([0.50004, 0.50001], [T, F]) == 0.5
    assert validity.auc([0.5001, 0.5], [T, F]) == 1.0
    assert validity.auc([0.2, 0.3], [T, T]) is None
    scores = np.linspace(0, 1, 10)
    got = validity.auc_interval(scores, UNSUPPORTED, QUESTIONS, 300, 5)
    drawn = [roc_auc_score(np.array(UNSUPPORTED)[r], scores[r]) if 0 < np.array(UNSUPPORTED)[r].sum() < len(r)
             else np.nan for r in _reference_resamples(QUESTIONS, 300, 5)]
    drawn = np.array(drawn)
    low, high = np.quantile(drawn[~np.isnan(drawn)], [0.025, 0.975])
    assert got["interval"].rounded(4) == (round(low, 4), round(high, 4)) and got["unsupported"] == 3


def test_the_system_rule_is_fitted_on_one_half_and_compared_paired():
    first, second = validity.split_halves(["b", "a", "c", "a", "d", "e"])
    assert sorted(first + second) == ["a", "b", "c", "d", "e"] and len(first) == 2
    assert (first, second) == validity.split_halves(["e", "d", "c", "b", "a"])
    fit = pd.DataFrame({"system": ["x", "x", "y", "y"], "unsupported": [T, T, T, F]})
    rule = validity.majority_rule(fit)
    assert rule(pd.DataFrame({"system": ["y", "x", "z"]})).tolist() == [F, T, F]
    other = [T, F, F, T, F, F, F, F, F, F]
    got = validity.paired_difference(FLAGGED, other, UNSUPPORTED, QUESTIONS, 300, 5)
    assert got["difference"] == pytest.approx(validity.youden_j(FLAGGED, UNSUPPORTED)
                                              - validity.youden_j(other, UNSUPPORTED))
    diffs = []
    for rows in _reference_resamples(QUESTIONS, 300, 5):
        one = validity.youden_j(np.array(FLAGGED)[rows], np.array(UNSUPPORTED)[rows])
        two = validity.youden_j(np.array(other)[rows], np.array(UNSUPPORTED)[rows])
        diffs.append(np.nan if one is None else one - two)
    diffs = np.array(diffs)
    low, high = np.quantile(diffs[~np.isnan(diffs)], [0.025, 0.975])
    assert got["interval"].rounded(4) == (round(low, 4), round(high, 4))


def test_agreement_per_class_takes_the_first_reader_as_reference():
    got = validity.agreement_per_class(UNSUPPORTED, FLAGGED)
    assert got == {"unsupported_too": Ratio(2, 3), "supported_too": Ratio(6, 7),
                   "same": Ratio(8, 10)}
    assert {key: str(value) for key, value in got.items()} == {
                   "unsupported_too": "2 of 3: 0.67 (0.09 to 0.99)",
                   "supported_too": "6 of 7: 0.86 (0.42 to 1.00)",
                   "same": "8 of 10: 0.80 (0.44 to 0.97)"}


def test_a_share_at_0_or_1_is_never_given_a_percentile_interval():
    """Every resample that can measure a share of 0 or 1 gives that share, so a percentile
    interval would be the point: the table sends the reader to the exact interval."""
    got = validity.bootstrap_rates([T, T, F, F, F], [T, T, F, F, T], list("abcde"), 300, 2)
    assert got["specificity"].low is None and got["sensitivity"].low is not None
    assert str(got["specificity"]) == "none: every resample gives 1"
    got = validity.bootstrap_rates([F, F, T, F], [T, T, F, F], list("abcd"), 300, 2)
    assert str(got["sensitivity"]) == "none: every resample gives 0"
    assert str(got["specificity"]).startswith("0.")  # 1 of 2, resampled
