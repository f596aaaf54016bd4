"""Wilson intervals for a rate and Newcombe's interval for a paired difference (lesson 5)."""
from __future__ import annotations

import math

import pytest

from helpers.intervals import paired_difference, wilson


def test_wilson_matches_the_published_example():
    # Newcombe (1998, Statistics in Medicine 17: 857-872), example (a): 81 of 263.
    rate = wilson(81, 263)
    assert (round(rate.low, 4), round(rate.high, 4)) == (0.2553, 0.3662)
    assert rate.value == pytest.approx(81 / 263)


def test_wilson_at_the_edges_stays_inside_zero_and_one_and_keeps_its_width():
    none, every = wilson(0, 6), wilson(6, 6)
    assert none.low == 0.0 and 0.3 < none.high < 0.45
    assert every.high == 1.0 and every.low == pytest.approx(1 - none.high)
    assert wilson(0, 0).low == 0.0 and wilson(0, 0).high == 1.0
    assert str(wilson(3, 18)) == "3 of 18 (17%; 95% CI 6% to 39%)"


@pytest.mark.parametrize(("successes", "n", "message"), [
    (7, 6, "more than all"), (-1, 6, "at least 0"), (True, 6, "whole number"), (1.0, 2, "whole"),
])
def test_wilson_refuses_counts_that_are_not_counts(successes, n, message):
    with pytest.raises(ValueError, match=message):
        wilson(successes, n)


def test_a_paired_difference_reads_the_discordant_pairs():
    first = [True, True, False, False, True, False]
    second = [True, False, True, True, False, False]
    effect = paired_difference(first, second)
    assert (effect.first, effect.second, effect.only_first, effect.only_second) == (3, 3, 2, 2)
    assert effect.value == 0 and effect.low < 0 < effect.high
    swapped = paired_difference(second, first)
    assert swapped.low == pytest.approx(-effect.high) and swapped.high == pytest.approx(-effect.low)


def test_with_nothing_under_the_first_condition_the_upper_bound_is_wilsons():
    """With an empty margin the correlation term is 0 (Newcombe's rule), and when the first
    rate is 0 of n its Wilson lower bound is 0, so the upper limit of the difference is
    the second rate's own Wilson upper bound, a value computed independently here."""
    second = [True] * 4 + [False] * 14
    effect = paired_difference([False] * 18, second)
    assert effect.high == pytest.approx(wilson(4, 18).high)
    upper_first = wilson(0, 18).high
    expected_low = 4 / 18 - math.sqrt((4 / 18 - wilson(4, 18).low) ** 2 + upper_first ** 2)
    assert effect.low == pytest.approx(expected_low)


def test_agreement_on_every_pair_still_leaves_an_interval():
    effect = paired_difference([False] * 18, [False] * 18)
    assert effect.value == 0 and effect.low < 0 < effect.high


def test_a_paired_difference_needs_pairs():
    with pytest.raises(ValueError, match="3 first results but 2"):
        paired_difference([True, False, True], [True, False])
    with pytest.raises(ValueError, match="no pairs"):
        paired_difference([], [])
