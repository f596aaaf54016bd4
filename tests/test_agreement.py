"""Agreement statistics on examples worked out by hand, degenerate cases included."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from helpers import agreement
from helpers.agreement import (
    ONE_CATEGORY,
    Confusion,
    Ratio,
    agreement_summary,
    bootstrap_kappa,
    cohen_kappa,
    confusion,
    confusion_table,
    cross_table,
    misses_by_reason,
    misses_table,
    precision,
    recall,
    resample_indices,
)

T, F = True, False
# Ten replies: 2 flagged and unsupported, 1 flagged but supported, 1 unsupported and
# missed, 6 neither.
FLAGGED = [T, T, T, F, F, F, F, F, F, F]
UNSUPPORTED = [T, T, F, T, F, F, F, F, F, F]


def test_confusion_counts_the_four_cells():
    counts = confusion(FLAGGED, UNSUPPORTED)
    assert counts == Confusion(flagged_unsupported=2, flagged_supported=1,
                               passed_unsupported=1, passed_supported=6)
    assert counts.rows == 10


def test_recall_and_precision_by_hand():
    counts = confusion(FLAGGED, UNSUPPORTED)
    assert recall(counts) == Ratio(2, 3) and precision(counts) == Ratio(2, 3)
    assert recall(counts).text() == "2 of 3 (0.67)"


def test_a_ratio_with_nothing_to_count_says_so():
    nothing_flagged = confusion([F, F], [T, F])
    assert precision(nothing_flagged).value is None
    assert precision(nothing_flagged).text() == "undefined (0 of 0)"
    assert recall(confusion([T, F], [F, F])).text() == "undefined (0 of 0)"


def test_confusion_refuses_mismatched_or_non_boolean_input():
    with pytest.raises(ValueError, match="2 signals but 3 verdicts"):
        confusion([T, F], [T, F, F])
    with pytest.raises(TypeError, match=r"flagged\[1\] is 'yes'"):
        confusion([T, "yes"], [T, F])


def test_kappa_on_the_ten_replies_by_hand():
    # p_o = 8/10; each side flags 3 of 10, so p_e = 0.3*0.3 + 0.7*0.7 = 0.58;
    # kappa = (0.8 - 0.58) / (1 - 0.58) = 0.22 / 0.42 = 11/21.
    kappa = cohen_kappa(FLAGGED, UNSUPPORTED)
    assert kappa.observed == pytest.approx(0.8)
    assert kappa.expected == pytest.approx(0.58)
    assert kappa.value == pytest.approx(float(Fraction(11, 21)))


def test_kappa_with_three_categories_by_hand():
    # p_o = 4/6; first side 2/2/2 of 6, second 2/3/1, so p_e = (4 + 6 + 2) / 36 = 1/3;
    # kappa = (2/3 - 1/3) / (2/3) = 1/2.
    first = ["x", "x", "y", "y", "z", "z"]
    second = ["x", "y", "y", "y", "z", "x"]
    assert cohen_kappa(first, second).value == pytest.approx(0.5)


def test_perfect_agreement_is_exactly_one():
    kappa = cohen_kappa([T, F, T, F, F], [T, F, T, F, F])
    assert kappa.value == 1.0 and kappa.observed == 1.0 and kappa.reason == ""


def test_one_category_only_is_undefined_and_says_why():
    # Both sides rate everything "supported": p_o = p_e = 1, kappa = 0/0.
    kappa = cohen_kappa(["supported"] * 4, ["supported"] * 4)
    assert kappa.value is None and kappa.expected == 1.0 and kappa.observed == 1.0
    assert kappa.reason == ONE_CATEGORY and kappa.text() == ONE_CATEGORY
    assert "0/0" in kappa.text()


def test_one_side_constant_gives_zero_not_undefined():
    # p_o = 3/4 and p_e = 1 * 3/4 + 0 * 1/4 = 3/4: no agreement beyond chance.
    assert cohen_kappa([T, T, T, T], [T, T, F, T]).value == 0.0
    # Each side constant, on different categories: p_o = 0 = p_e, so kappa = 0.
    assert cohen_kappa([T, T], [F, F]).value == 0.0


def test_systematic_disagreement_is_minus_one():
    assert cohen_kappa([T, F, T, F], [F, T, F, T]).value == -1.0


def test_kappa_matches_scikit_learn_on_random_ratings():
    rng = np.random.default_rng(7)
    for _ in range(20):
        first = rng.integers(0, 3, size=25).tolist()
        second = [x if rng.random() < 0.6 else int(rng.integers(0, 3)) for x in first]
        assert cohen_kappa(first, second).value == pytest.approx(
            cohen_kappa_score(first, second))


def test_kappa_refuses_empty_or_unequal_input():
    with pytest.raises(ValueError, match="at least one"):
        cohen_kappa([], [])
    with pytest.raises(ValueError, match="2 ratings against 1"):
        cohen_kappa([T, F], [T])


def test_each_bootstrap_value_is_kappa_on_its_resample():
    first = ["x", "x", "y", "y", "z", "z", "x"]
    second = ["x", "y", "y", "y", "z", "x", "x"]
    interval = bootstrap_kappa(first, second, resamples=1, seed=3, level=0.5)
    (index,) = resample_indices(len(first), 1, 3)
    expected = cohen_kappa([first[i] for i in index], [second[i] for i in index])
    assert interval.low == pytest.approx(expected.value)
    assert interval.high == pytest.approx(expected.value)


def test_the_bootstrap_is_seeded_and_brackets_the_estimate():
    point = cohen_kappa(FLAGGED * 3, UNSUPPORTED * 3).value
    one = bootstrap_kappa(FLAGGED * 3, UNSUPPORTED * 3, seed=11)
    again = bootstrap_kappa(FLAGGED * 3, UNSUPPORTED * 3, seed=11)
    other = bootstrap_kappa(FLAGGED * 3, UNSUPPORTED * 3, seed=12)
    assert one == again and one != other
    assert one.low < point < one.high and -1 <= one.low and one.high <= 1
    assert one.resamples == 2000 and one.level == 0.95


def test_resamples_with_one_category_are_counted_and_left_out():
    # One unsupported reply in twenty: many resamples never draw it, so both sides are
    # constant there and kappa is undefined.
    flagged = [T] + [F] * 19
    interval = bootstrap_kappa(flagged, flagged, resamples=500, seed=1)
    assert 0 < interval.undefined < 500
    assert interval.low == interval.high == 1.0
    assert f"{interval.undefined} of 500 resamples undefined" in interval.text()
    constant = bootstrap_kappa([F] * 5, [F] * 5, resamples=50)
    assert constant.low is None and constant.undefined == 50
    assert constant.text().startswith("undefined")


def test_bootstrap_refuses_bad_arguments():
    with pytest.raises(ValueError, match="level"):
        bootstrap_kappa([T, F], [T, F], level=1.5)
    with pytest.raises(ValueError, match="resamples"):
        bootstrap_kappa([T, F], [T, F], resamples=0)
    with pytest.raises(ValueError, match="at least one"):
        bootstrap_kappa([], [])


def test_summary_and_table_carry_the_same_counts():
    row = agreement_summary("screen", FLAGGED, UNSUPPORTED, resamples=200, seed=0)
    assert (row["flagged_unsupported"], row["flagged_supported"], row["passed_unsupported"],
            row["passed_supported"]) == (2, 1, 1, 6)
    assert row["recall"] == "2 of 3 (0.67)" and row["kappa"] == "0.52"
    assert row["sensitivity"].startswith("2 of 3: 0.67 (") and row["specificity"].startswith(
        "6 of 7: 0.86 (")
    assert row["ppv"].startswith("2 of 3: 0.67 (") and row["npv"].startswith("6 of 7: 0.86 (")
    # Both sides flag 3 of 10, so the margins allow perfect agreement; PABAK = 2 * 0.8 - 1.
    assert (row["kappa_max"], row["pabak"]) == ("1.00", "0.60")
    table = confusion_table(row["counts"], "held", "not flagged")
    assert table.to_dict("list") == {"human_verdict": ["not supported", "supported"],
                                     "held": [2, 1], "not flagged": [1, 6]}


def test_misses_by_reason():
    reasons = ["figure", "figure", "ok", "claim", "ok", "abstention"]
    flagged = [T, F, F, F, T, F]
    unsupported = [T, T, F, T, F, T]
    table = misses_by_reason(reasons, flagged, unsupported,
                             ["claim", "figure", "abstention", "never used"])
    assert table.to_dict("records") == [
        {"reason": "claim", "unsupported": 1, "flagged": 0, "missed": 1},
        {"reason": "figure", "unsupported": 2, "flagged": 1, "missed": 1},
        {"reason": "abstention", "unsupported": 1, "flagged": 0, "missed": 1},
    ]
    with pytest.raises(ValueError, match="not in the order given: \\['claim'\\]"):
        misses_by_reason(reasons, flagged, unsupported, ["figure", "abstention"])


def test_misses_table_puts_every_signal_side_by_side():
    reasons = ["figure", "figure", "ok", "claim", "ok", "abstention"]
    unsupported = [T, T, F, T, F, T]
    signals = {"screen": [T, F, F, F, T, F], "judge": [F, F, T, T, F, T]}
    table = misses_table(reasons, unsupported, signals, ["claim", "figure", "abstention"])
    # claim: the screen misses it, the judge flags it; figure: the screen catches one of
    # two, the judge neither; abstention: only the judge flags it.
    assert table.to_dict("records") == [
        {"reason": "claim", "unsupported": 1, "screen": 1, "judge": 0},
        {"reason": "figure", "unsupported": 2, "screen": 1, "judge": 2},
        {"reason": "abstention", "unsupported": 1, "screen": 1, "judge": 0},
    ]
    for name, flagged in signals.items():
        one = misses_by_reason(reasons, flagged, unsupported, ["claim", "figure", "abstention"])
        assert table[name].tolist() == one["missed"].tolist()
    with pytest.raises(ValueError, match="but 2 values of signal 'judge'"):
        misses_table(reasons, unsupported, {"judge": [T, F]}, ["claim"])
    with pytest.raises(ValueError, match="at least one signal"):
        misses_table(reasons, unsupported, {}, ["claim"])


def test_the_lessons_bootstrap_settings_and_the_defaults():
    """Resamples and level default to lesson 4's settings; the seed is always passed
    (exercise 4.4 checks that a student uses the lesson's), so it defaults to 0."""
    default = bootstrap_kappa(FLAGGED * 3, UNSUPPORTED * 3)
    assert (default.seed, default.resamples, default.level) == (
        0, agreement.BOOTSTRAP_RESAMPLES, agreement.BOOTSTRAP_LEVEL)
    lesson = bootstrap_kappa(FLAGGED * 3, UNSUPPORTED * 3, seed=agreement.BOOTSTRAP_SEED)
    assert lesson.seed == agreement.BOOTSTRAP_SEED and (lesson.low, lesson.high) != (
        default.low, default.high)
    summary = agreement_summary("x", FLAGGED * 3, UNSUPPORTED * 3,
                                seed=agreement.BOOTSTRAP_SEED)
    # The summary's interval resamples replies here (no units given), as this one does.
    interval = summary["interval"]
    assert (interval.seed, interval.resamples, interval.level, interval.unit) == (
        agreement.BOOTSTRAP_SEED, agreement.BOOTSTRAP_RESAMPLES, agreement.BOOTSTRAP_LEVEL,
        "reply")
    assert (interval.low, interval.high) == pytest.approx((lesson.low, lesson.high))


def test_cross_table_counts_every_pair_zeros_included():
    table = cross_table(["a", "a", "b"], ["a", "b", "b"], ["a", "b", "c"])
    assert table.to_dict("records") == [
        {"first": "a", "a": 1, "b": 1, "c": 0},
        {"first": "b", "a": 0, "b": 1, "c": 0},
        {"first": "c", "a": 0, "b": 0, "c": 0},
    ]
    with pytest.raises(ValueError, match="outside the categories"):
        cross_table(["a"], ["d"], ["a", "b"])
