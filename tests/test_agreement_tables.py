"""A 2x2 table read per class, its coefficients, the bootstrap by question and the ROC curve,
each checked against an independent implementation or a published worked example.

Independent implementations: statsmodels (``proportion_confint``, ``cohens_kappa`` with
its ``kappa_max``, ``fleiss_kappa``), scipy's ``binomtest``, scikit-learn
(``cohen_kappa_score``, ``roc_auc_score``, ``roc_curve``). Published worked example: the
irrCAC package's README (Gwet, github.com/kgwet/irrCAC, "Computing agreement Coefficients
from Contingency tables"), whose two raters classify 100 subjects into three categories
(table ``cont3x3abstractors``) with percent agreement 0.89, Cohen's kappa 0.7964094,
Gwet's AC1 0.8493305 and Brennan-Prediger 0.835.

Degenerate tables (a class with no members, perfect agreement, all disagreement, no
replies at all) get a number only where the formula has one that means something, and
otherwise "undefined" with the reason, never NaN and never a 0 that describes no signal.
"""
from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from scipy.stats import binomtest
from sklearn.metrics import cohen_kappa_score, roc_auc_score, roc_curve
from statsmodels.stats.inter_rater import aggregate_raters, cohens_kappa, fleiss_kappa
from statsmodels.stats.proportion import proportion_confint

from helpers.agreement import (
    Confusion,
    bootstrap_kappa,
    bootstrap_table_kappa,
    bootstrap_table_values,
    confusion,
    confusion_from_cells,
    exact_interval,
    gwet_ac1,
    kappa_max,
    majority_by_group,
    negative_predictive_value,
    pabak,
    per_group_table,
    positive_predictive_value,
    ratings_of,
    roc_auc,
    roc_points,
    sensitivity,
    specificity,
    split_halves,
    table_coefficients,
    table_kappa,
    youden_threshold,
)

T, F = True, False


def table(fu, fs, pu, ps) -> Confusion:
    """flagged and unsupported, flagged and supported, passed and unsupported, passed and
    supported."""
    return confusion_from_cells(fu, fs, pu, ps)


def matrix(counts: Confusion) -> np.ndarray:
    """The table as statsmodels reads it: rows the signal (flagged, passed), columns the
    review (not supported, supported)."""
    return np.array([[counts.flagged_unsupported, counts.flagged_supported],
                     [counts.passed_unsupported, counts.passed_supported]])


def random_tables(seed: int, how_many: int = 40):
    rng = np.random.default_rng(seed)
    for _ in range(how_many):
        cells = rng.integers(0, 25, size=4)
        if cells[0] + cells[2] and cells[1] + cells[3] and cells[0] + cells[1] \
                and cells[2] + cells[3]:
            yield table(*(int(c) for c in cells))


# ------------------------------------------------------------------ per class


def test_the_four_rates_read_the_table_by_class():
    counts = table(38, 0, 4, 3)  # the screen on lesson 4's earlier review
    assert (sensitivity(counts).numerator, sensitivity(counts).denominator) == (38, 42)
    assert (specificity(counts).numerator, specificity(counts).denominator) == (3, 3)
    assert (positive_predictive_value(counts).numerator,
            positive_predictive_value(counts).denominator) == (38, 38)
    assert (negative_predictive_value(counts).numerator,
            negative_predictive_value(counts).denominator) == (3, 7)
    assert specificity(counts).with_interval() == "3 of 3: 1.00 (0.29 to 1.00)"
    assert negative_predictive_value(counts).with_interval().startswith("3 of 7: 0.43 (")


@pytest.mark.parametrize("level", [0.95, 0.9])
def test_exact_interval_matches_statsmodels_and_scipy(level):
    for trials in (1, 2, 3, 7, 10, 42, 45, 118):
        for successes in sorted({0, 1, trials // 3, trials // 2, trials - 1, trials}):
            ours = exact_interval(successes, trials, level)
            low, high = proportion_confint(successes, trials, alpha=1 - level, method="beta")
            scipy = binomtest(successes, trials).proportion_ci(level, method="exact")
            assert ours.low == pytest.approx(low, abs=1e-9), (successes, trials)
            assert ours.high == pytest.approx(high, abs=1e-9), (successes, trials)
            assert ours.low == pytest.approx(scipy.low, abs=1e-9)
            assert ours.high == pytest.approx(scipy.high, abs=1e-9)


def test_exact_interval_at_the_ends_has_a_closed_form():
    # With all n trials successes, the lower end solves p^n = a/2 (Clopper and Pearson 1934).
    for n in (1, 3, 10):
        assert exact_interval(n, n).low == pytest.approx(0.025 ** (1 / n))
        assert exact_interval(n, n).high == 1.0
        assert exact_interval(0, n).high == pytest.approx(1 - 0.025 ** (1 / n))
        assert exact_interval(0, n).low == 0.0
    assert exact_interval(3, 3).text() == "0.29 to 1.00"


def test_a_class_with_no_members_has_no_rate_and_no_interval():
    counts = table(5, 0, 2, 0)  # the review finds no reply supported
    assert specificity(counts).value is None
    assert specificity(counts).interval().low is None
    assert specificity(counts).with_interval() == "undefined: 0 of 0"
    assert "nothing to count" in specificity(counts).interval().text()
    assert positive_predictive_value(table(0, 0, 3, 4)).with_interval() == "undefined: 0 of 0"
    with pytest.raises(ValueError, match="not a share"):
        exact_interval(4, 3)
    with pytest.raises(ValueError, match="count"):
        confusion_from_cells(1, -1, 0, 0)
    with pytest.raises(ValueError, match="count"):
        confusion_from_cells(1, True, 0, 0)


# ------------------------------------------------------------------ coefficients


def test_kappa_and_kappa_max_match_statsmodels_and_scikit_learn():
    for counts in random_tables(3):
        flagged, unsupported = ratings_of(counts)
        reference = cohens_kappa(matrix(counts))
        ours = table_kappa(counts)
        assert ours.value == pytest.approx(reference.kappa)
        assert ours.value == pytest.approx(cohen_kappa_score(flagged, unsupported))
        assert kappa_max(flagged, unsupported).value == pytest.approx(reference.kappa_max)
        assert table_coefficients(counts)["kappa_max"].value == pytest.approx(reference.kappa_max)


def test_kappa_max_is_the_largest_kappa_the_margins_allow():
    """An independent check by brute force: every table with the same margins, scored
    by scikit-learn; the largest kappa among them is kappa_max."""
    for counts in list(random_tables(5, 12)):
        flagged_total = counts.flagged_unsupported + counts.flagged_supported
        bad_total = counts.flagged_unsupported + counts.passed_unsupported
        n = counts.rows
        best = -2.0
        for fu in range(max(0, flagged_total + bad_total - n), min(flagged_total, bad_total) + 1):
            other = table(fu, flagged_total - fu, bad_total - fu, n - flagged_total - bad_total + fu)
            best = max(best, cohen_kappa_score(*ratings_of(other)))
        assert table_coefficients(counts)["kappa_max"].value == pytest.approx(best)


def test_kappa_equals_its_maximum_when_one_off_diagonal_cell_is_empty():
    # Lesson 4's earlier review: no signal held a supported reply.
    coefficients = table_coefficients(table(38, 0, 4, 3))
    assert coefficients["kappa"].value == pytest.approx(19 / 34)
    assert coefficients["kappa_max"].value == pytest.approx(coefficients["kappa"].value)


def test_pabak_matches_statsmodels_uniform_fleiss_kappa():
    """For two raters, Fleiss' kappa with uniform chance agreement (Brennan-Prediger) is
    PABAK; statsmodels computes it from the subjects' rating counts."""
    for counts in random_tables(7, 15):
        flagged, unsupported = ratings_of(counts)
        by_subject, _ = aggregate_raters(np.array([flagged, unsupported]).T.astype(int))
        expected = fleiss_kappa(by_subject, method="uniform")
        assert table_coefficients(counts)["pabak"].value == pytest.approx(expected)
        observed = (counts.flagged_unsupported + counts.passed_supported) / counts.rows
        assert table_coefficients(counts)["pabak"].value == pytest.approx(2 * observed - 1)


def _abstractors() -> tuple[list[str], list[str]]:
    """irrCAC's cont3x3abstractors, rows rater A, columns rater B, as two rating lists."""
    labels = ("Ectopic", "AIU", "NIU")
    cells = [[13, 0, 0], [0, 20, 7], [0, 4, 56]]
    first, second = [], []
    for (i, a), (j, b) in itertools.product(enumerate(labels), enumerate(labels)):
        first += [a] * cells[i][j]
        second += [b] * cells[i][j]
    return first, second


def test_the_published_three_category_example():
    first, second = _abstractors()
    assert len(first) == 100
    assert gwet_ac1(first, second).observed == pytest.approx(0.89)
    assert gwet_ac1(first, second).value == pytest.approx(0.8493305, abs=5e-8)
    assert pabak(first, second).value == pytest.approx(0.835)
    from helpers.agreement import cohen_kappa

    assert cohen_kappa(first, second).value == pytest.approx(0.7964094, abs=5e-8)


def _ac1_from_subjects(flagged: list[bool], unsupported: list[bool]) -> float:
    """Gwet's AC1 in its many-rater form (Gwet 2008, agreement per subject), written
    independently of helpers.agreement: per subject, the share of agreeing rater pairs;
    chance from each category's mean share over all ratings."""
    ratings = np.array([flagged, unsupported]).T.astype(int)
    r = ratings.shape[1]
    counts = np.stack([(ratings == c).sum(axis=1) for c in (0, 1)], axis=1)
    p_a = ((counts * (counts - 1)).sum(axis=1) / (r * (r - 1))).mean()
    pi = counts.sum(axis=0) / counts.sum()
    p_e = (pi * (1 - pi)).sum() / (len(pi) - 1)
    return (p_a - p_e) / (1 - p_e)


def test_ac1_matches_its_many_rater_form():
    for counts in random_tables(11, 15):
        assert table_coefficients(counts)["ac1"].value == pytest.approx(
            _ac1_from_subjects(*ratings_of(counts)))


# The degenerate tables: cells, and kappa, kappa_max and PABAK (None where undefined).
DEGENERATE = {
    # No supported reply: every signal agrees with the review exactly as often as chance.
    "no supported reply": ((5, 0, 3, 0), (None, None, 0.25)),
    "no unsupported reply": ((0, 2, 0, 6), (None, None, 0.5)),
    "perfect agreement": ((4, 0, 0, 6), (1.0, 1.0, 1.0)),
    "perfect agreement, one class": ((7, 0, 0, 0), (None, None, 1.0)),
    "all disagreement": ((0, 3, 3, 0), (-1.0, 1.0, -1.0)),
    "all disagreement, one class": ((0, 0, 4, 0), (None, None, -1.0)),
}


@pytest.mark.parametrize("name", DEGENERATE)
def test_degenerate_tables_report_a_number_only_where_one_is_defined(name):
    cells, expected = DEGENERATE[name]
    counts = table(*cells)
    got = table_coefficients(counts)
    for coefficient, value in zip(("kappa", "kappa_max", "pabak"), expected):
        if value is None:
            assert got[coefficient].value is None, (name, coefficient)
            assert got[coefficient].text() == got[coefficient].reason, (name, coefficient)
            assert got[coefficient].reason.startswith("undefined: the review has no ")
        else:
            assert got[coefficient].value == pytest.approx(value), (name, coefficient)
    # AC1 has a value on every table with a reply: its p_e is at most 1/2 for two classes.
    flagged, unsupported = ratings_of(counts)
    assert got["ac1"].value == pytest.approx(_ac1_from_subjects(flagged, unsupported))
    # Where kappa is undefined, the references return 0 or NaN: a figure that says
    # nothing about the signal, which is why ours gives the reason instead.
    if expected[0] is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reference = cohen_kappa_score(flagged, unsupported)
            statsmodels_kappa = cohens_kappa(matrix(counts)).kappa
        assert np.isnan(reference) or reference == 0
        assert np.isnan(statsmodels_kappa) or statsmodels_kappa == 0
    else:
        assert got["kappa"].value == pytest.approx(cohen_kappa_score(flagged, unsupported))


def test_kappa_of_a_class_with_no_members_says_why_for_every_signal():
    # Whatever this signal does, on a review with no supported reply kappa would be 0.
    for cells in ((5, 0, 3, 0), (8, 0, 0, 0), (0, 0, 8, 0)):
        kappa = table_kappa(table(*cells))
        assert kappa.value is None
        assert kappa.text() == kappa.reason
        assert "no supported reply" in kappa.reason and "0 whatever the signal does" in kappa.reason
    # A signal that never flags, on a review with both classes, scores exactly 0: it
    # carries no information, and kappa says so with a number.
    assert table_kappa(table(0, 0, 3, 4)).value == 0.0
    assert all(c.value is None for c in table_coefficients(table(0, 0, 0, 0)).values())


def test_pabak_and_ac1_need_two_categories_to_choose_from():
    assert pabak([T, T], [T, T]).value is None
    assert pabak([T, T], [T, T]).text().startswith("undefined: ")
    assert pabak([T, T], [T, T], (T, F)).value == 1.0
    assert gwet_ac1(["a"], ["a"]).value is None
    with pytest.raises(ValueError, match="outside the categories"):
        pabak(["a"], ["b"], ["a"])
    with pytest.raises(ValueError, match="at least one"):
        gwet_ac1([], [])


# ------------------------------------------------------------------ bootstrap by question


def test_each_resample_is_the_table_of_the_questions_drawn():
    flagged = [T, T, F, F, T, F, T, F, F, T]
    unsupported = [T, F, F, T, T, F, T, T, F, F]
    units = ["q1", "q1", "q2", "q3", "q3", "q3", "q4", "q5", "q5", "q6"]
    cells, values = bootstrap_table_values(flagged, unsupported, units, resamples=50, seed=4)
    order = list(dict.fromkeys(units))
    from helpers.agreement import resample_indices

    for drawn, row, value in zip(resample_indices(len(order), 50, 4), cells, values):
        picked = [i for unit in drawn for i, u in enumerate(units) if u == order[unit]]
        counts = confusion([flagged[i] for i in picked], [unsupported[i] for i in picked])
        assert tuple(row) == (counts.flagged_unsupported, counts.flagged_supported,
                              counts.passed_unsupported, counts.passed_supported)
        kappa = table_kappa(counts).value
        assert (np.isnan(value) and kappa is None) or value == pytest.approx(kappa)


def test_resamples_without_a_supported_reply_are_counted_not_scored_zero():
    # One supported reply among twenty: many resamples never draw it.
    flagged = [T] * 15 + [F] * 5
    unsupported = [T] * 19 + [F]
    interval = bootstrap_table_kappa(flagged, unsupported, resamples=500, seed=1)
    cells, values = bootstrap_table_values(flagged, unsupported, resamples=500, seed=1)
    without = int(((cells[:, 1] + cells[:, 3]) == 0).sum())
    assert interval.no_supported == without > 0 and interval.no_unsupported == 0
    assert interval.undefined == without and interval.defined == 500 - without
    assert np.isnan(values).sum() == without
    # The interval is over the defined resamples only. The plain bootstrap of kappa left
    # out only the resamples where both sides were constant, and scored the others with
    # no supported reply 0: its lower end is that pile of zeros.
    old = bootstrap_kappa(flagged, unsupported, resamples=500, seed=1)
    assert old.undefined < without and old.low == 0.0 and interval.low > 0
    assert f"from the {500 - without:,} of 500 resamples with both kinds of reply" in \
        interval.text()


def test_resampling_replies_agrees_with_the_plain_bootstrap_where_both_classes_are_drawn():
    flagged = [T, T, T, F, F, F, F, F, F, F] * 3
    unsupported = [T, T, F, T, F, F, F, F, F, F] * 3
    ours = bootstrap_table_kappa(flagged, unsupported, resamples=2000, seed=1960)
    plain = bootstrap_kappa(flagged, unsupported, resamples=2000, seed=1960)
    assert ours.undefined == 0
    assert ours.low == pytest.approx(plain.low) and ours.high == pytest.approx(plain.high)
    assert ours.unit == "reply" and ours.units == 30


def test_a_bootstrap_with_no_defined_resample_is_undefined():
    interval = bootstrap_table_kappa([T, F], [T, T], resamples=20)
    assert interval.low is None and interval.no_supported == 20
    assert interval.text().startswith("undefined: ")
    with pytest.raises(ValueError, match="units"):
        bootstrap_table_kappa([T, F], [T, F], ["q1"])


# ------------------------------------------------------------------ graded signal


def test_auc_and_roc_points_match_scikit_learn():
    rng = np.random.default_rng(2)
    for _ in range(20):
        n = int(rng.integers(6, 40))
        positives = [bool(x) for x in rng.random(n) < 0.5]
        if all(positives) or not any(positives):
            continue
        scores = np.round(rng.random(n), 1)  # rounded, so ties happen
        assert roc_auc(scores, positives).value == pytest.approx(roc_auc_score(positives, scores))
        fpr, tpr, thresholds = roc_curve(positives, scores, drop_intermediate=False)
        points = roc_points(scores, positives)
        assert points["fpr"].tolist() == pytest.approx(list(fpr))
        assert points["tpr"].tolist() == pytest.approx(list(tpr))
        assert points["threshold"].iloc[1:].tolist() == pytest.approx(list(thresholds[1:]))


def test_auc_by_hand_and_undefined_with_one_class():
    # Positives 0.9 and 0.4, negatives 0.4 and 0.1: pairs won 1 + 1 + 0.5 (tie) + 1 of 4.
    assert roc_auc([0.9, 0.4, 0.4, 0.1], [T, T, F, F]).value == pytest.approx(3.5 / 4)
    auc = roc_auc([0.2, 0.3], [T, T])
    assert auc.value is None and auc.text() == "undefined: there is no supported reply to rank against the others"
    with pytest.raises(ValueError, match="NaN"):
        roc_auc([0.1, float("nan")], [T, F])


def test_youden_threshold_and_split_halves():
    scores = [0.9, 0.8, 0.7, 0.35, 0.3, 0.2]
    positives = [T, T, F, T, F, F]
    # Flagging >= 0.8 gives J = 2/3; >= 0.35 gives 1 - 1/3 = 2/3; the tie goes to 0.8.
    assert youden_threshold(scores, positives) == 0.8
    with pytest.raises(ValueError, match="both"):
        youden_threshold([0.1, 0.2], [T, T])
    first, second = split_halves(["b", "a", "c", "a", "d", "e"], seed=1960)
    assert sorted(first + second) == ["a", "b", "c", "d", "e"] and len(first) == 2
    assert (first, second) == split_halves(["e", "d", "c", "b", "a"], seed=1960)
    assert split_halves(list("abcdefgh"), seed=1) != split_halves(list("abcdefgh"), seed=2)


# ------------------------------------------------------------------ split by system


def test_majority_by_group_and_per_group_tables():
    groups = ["a", "a", "a", "b", "b", "c"]
    unsupported = [T, T, F, F, F, T]
    assert majority_by_group(groups, unsupported) == [T, T, T, F, F, T]
    flagged = [T, F, F, T, F, T]
    rows = per_group_table(groups, flagged, unsupported, ["a", "b", "c", "none"])
    a, b, c, empty = rows.to_dict("records")
    assert (a["flagged_unsupported"], a["passed_unsupported"], a["passed_supported"]) == (1, 1, 1)
    assert a["sensitivity"].startswith("1 of 2: 0.50 (") and a["specificity"].startswith("1 of 1")
    assert b["sensitivity"] == "undefined: 0 of 0" and b["kappa"].startswith("undefined: ")
    assert c["kappa"] == "undefined: no supported reply"
    assert empty["rows"] == 0 and empty["kappa"] == "undefined: no reply"
