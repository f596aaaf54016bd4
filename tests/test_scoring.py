"""EM, token F1, outcome labels, the action table and the policy table.

Pinned to the reference render's tables "Action, reference, retrieval, and end-to-end
results kept separate", "Expected versus observed action for all six questions" and
"Observed reader and simple policies scored on the same six questions", and to the
sentences printed under them.
"""
from __future__ import annotations

import math
import re
import string
from collections import Counter

import pytest

from helpers.parsing import parse_outputs
from helpers.scoring import (action_counts, action_table, best_reference_scores,
                             exact_match, policy_table, score_table, token_f1)

PRINTED_OUTCOMES = [
    # question, reader action, expected, correct, given passages, reference, recall@3, end to end
    ("Q1", "answer", "answer", True, "expected action", "EM 1; F1 1.00", "gold in top 3",
     "expected action"),
    ("Q2", "answer", "answer", True, "expected action", "EM 0; F1 0.57", "gold in top 3",
     "expected action"),
    ("Q3", "abstain", "answer", False, "reasonable abstention from retrieved passages",
     "EM 0; F1 0.00", "gold not in top 3", "failed before reading"),
    ("Q4", "answer", "answer", True, "expected action", "EM 1; F1 1.00", "gold in top 3",
     "expected action"),
    ("Q5", "abstain", "abstain", True, "expected action", "not applicable", "not applicable",
     "expected action"),
    ("Q6", "abstain", "flag premise", False, "unexpected action", "not applicable",
     "gold in top 3", "unexpected action"),
]
OUTCOME_COLUMNS = ["question_id", "reader_action", "expected_action", "action_correct",
                   "reader_given_passages", "reference_agreement", "recall_at_3_label", "end_to_end_outcome"]

# Expected action, observed action, questions.
PRINTED_ACTION_TABLE = [("abstain", "abstain", 1), ("abstain", "answer", 0), ("abstain", "flag premise", 0),
                        ("answer", "abstain", 1), ("answer", "answer", 3), ("answer", "flag premise", 0),
                        ("flag premise", "abstain", 1), ("flag premise", "answer", 0),
                        ("flag premise", "flag premise", 0)]

PRINTED_POLICIES = [("observed reader", 4, 6, "Q3, Q6"), ("always answer", 4, 6, "Q5, Q6"),
                    ("always abstain", 1, 6, "Q1, Q2, Q3, Q4, Q6")]


@pytest.fixture(scope="module")
def scores(parsed, questions, gold):
    return score_table(parsed, questions, gold)


def _scores_with(source_raw_outputs, questions, gold, replacements):
    outputs = source_raw_outputs.copy()
    for question_id, raw in replacements.items():
        outputs.loc[outputs["question_id"] == question_id, "raw_output"] = raw
    return score_table(parse_outputs(outputs), questions, gold)


# --- the printed figures ---------------------------------------------------------


def test_outcome_columns_match_the_source(scores):
    table = scores[OUTCOME_COLUMNS].astype({"action_correct": object})
    table["action_correct"] = [bool(v) for v in scores["action_correct"]]
    assert [tuple(row) for row in table.itertuples(index=False)] == PRINTED_OUTCOMES
    assert scores["action_correct"].dtype == bool


def test_em_and_f1_per_row(scores):
    # Q5 and Q6 are not scored: their expected action is not "answer".
    expected = [(1, 1.0), (0, 4 / 7), (0, 0.0), (1, 1.0), (math.nan,) * 2, (math.nan,) * 2]
    # The rows are Q1 to Q6 in order (test_outcome_columns_match_the_source).
    assert scores[["exact_match", "f1"]].to_numpy().tolist() == [
        pytest.approx(pair, abs=1e-12, nan_ok=True) for pair in expected]


def test_action_counts_and_tables_match_the_source(scores, questions):
    """3 answers, 3 abstentions, 0 premise flags; the action table; the policy table."""
    assert action_counts(scores) == {"answer": 3, "abstain": 3, "flag premise": 0, "parse failure": 0}
    table = action_table(scores)
    assert list(table.columns) == ["expected_action", "observed_action", "questions"]
    assert [tuple(r) for r in table.itertuples(index=False)] == PRINTED_ACTION_TABLE
    assert [tuple(r) for r in policy_table(scores, questions).itertuples(index=False)] == \
        PRINTED_POLICIES


# --- parse failures and other reader behaviours ----------------------------------


def test_a_parse_failure_is_an_empty_prediction_and_a_fourth_action(source_raw_outputs, questions, gold):
    scores = _scores_with(source_raw_outputs, questions, gold,
                          {"Q1": "Answer: $150 per week\nSources: H08\nHope that helps!",
                           "Q5": "NOT IN HANDBOOK"})
    row = scores.set_index("question_id").loc["Q1"]
    assert row["reader_action"] == "parse failure"
    assert row["exact_match"] == 0 and row["f1"] == 0.0
    assert row["reference_agreement"] == "EM 0; F1 0.00"
    assert not row["action_correct"]
    assert row["end_to_end_outcome"] == "unexpected action"
    assert action_counts(scores)["parse failure"] == 2
    table = action_table(scores)
    assert len(table) == 12 and table["questions"].sum() == 6
    counts = {(e, o): n for e, o, n in table.itertuples(index=False)}
    assert counts[("answer", "parse failure")] == counts[("abstain", "parse failure")] == 1
    assert counts[("flag premise", "parse failure")] == 0
    assert counts[("answer", "answer")] == 2
    policies = policy_table(scores, questions).set_index("policy")
    assert policies.at["observed reader", "exact_action_matches"] == 2
    assert policies.at["observed reader", "rows_missed"] == "Q1, Q3, Q5, Q6"


def test_flagging_the_premise_is_the_expected_action(source_raw_outputs, questions, gold):
    scores = _scores_with(
        source_raw_outputs, questions, gold,
        {"Q6": "Answer: PREMISE NOT SUPPORTED: there are no weekend forklift classes.\n"
               "Sources: H11"})
    row = scores.set_index("question_id").loc["Q6"]
    assert row["reader_action"] == "flag premise" and row["action_correct"]
    assert row["end_to_end_outcome"] == "expected action"
    assert row["reference_agreement"] == "not applicable"
    counts = {(e, o): n for e, o, n in action_table(scores).itertuples(index=False)}
    assert (counts[("flag premise", "flag premise")], counts[("flag premise", "abstain")]) == (1, 0)
    assert policy_table(scores, questions).set_index("policy").at["observed reader", "rows_missed"] == "Q3"


@pytest.mark.parametrize(("replacements", "em_zero", "contains"), [
    ({}, ["Q2"], [True]),  # lesson 1's render: Q2 carries words the variants lack
    ({"Q2": "Answer: Oct. 15\nSources: H14"}, [], []),
    ({"Q1": "Answer: One hundred fifty dollars weekly\nSources: H08"}, ["Q1", "Q2"],
     [False, True]),
])
def test_right_actions_with_em_zero_and_whether_they_hold_a_variant(
        source_raw_outputs, questions, gold, replacements, em_zero, contains):
    """What lesson 1's sentence on exact match 0 reads from the table: the right answers
    that still score EM 0, and whether each contains an acceptable variant."""
    scores = _scores_with(source_raw_outputs, questions, gold, replacements)
    rows = scores[(scores["expected_action"] == "answer") & scores["action_correct"]
                  & (scores["exact_match"] == 0)]
    assert rows["question_id"].tolist() == em_zero
    assert rows["acceptable_variant_in_answer"].tolist() == contains
    assert (rows["f1"] > 0).all()


def test_unknown_question_ids_are_rejected(source_raw_outputs, questions, gold):
    outputs = source_raw_outputs.copy()
    outputs.loc[0, "question_id"] = "Q99"
    with pytest.raises(ValueError, match="Q99"):
        score_table(parse_outputs(outputs), questions, gold)


# --- the metrics themselves -------------------------------------------------------


def _squad(prediction: str, reference: str) -> tuple[int, float]:
    """EM and F1 as the official SQuAD v1.1 evaluation script computes them (its
    normalisation deletes ASCII punctuation only)."""
    def normalize(text: str) -> str:
        text = "".join(ch for ch in text.lower() if ch not in string.punctuation)
        return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())

    predicted, gold = normalize(prediction).split(), normalize(reference).split()
    same = sum((Counter(predicted) & Counter(gold)).values())
    if same == 0:
        return int(predicted == gold), 0.0
    precision, recall = same / len(predicted), same / len(gold)
    return int(predicted == gold), 2 * precision * recall / (precision + recall)


@pytest.mark.parametrize(("prediction", "reference", "em", "f1"), [
    ("$150 per week", "$150 per week", 1, 1.0),
    ("150 per week", "$150 per week", 1, 1.0),           # "$" is a symbol
    ("The $150, per week!", "$150 per week", 1, 1.0),    # article and punctuation
    ("€150 — per  week", "150 per week", 1, 1.0),        # Unicode symbol and dash, spaces
    ("Oct. 15", "Oct 15", 1, 1.0),
    ("NO", "No", 1, 1.0),
    ("$150 a week", "$150 per week", 0, 0.8),            # 2 shared: precision 1, recall 2/3
    ("Applications close on October 15.", "October 15", 0, 4 / 7),
    ("$150", "$150 per week", 0, 0.5),                   # precision 1, recall 1/3
    # Multiset overlap: a repeated token counts only as often as in both.
    ("150 150 150", "150", 0, 0.5),                      # precision 1/3, recall 1
    ("week week", "week week", 1, 1.0),                  # a set overlap would give 0.5
    ("150 150", "150 150 week", 0, 0.8),                 # precision 1, recall 2/3
    ("week week pay", "week pay pay", 0, 2 / 3),         # 2 shared of 3 and 3
    ("the a an", "150", 0, 0.0),                         # only articles: empty
    ("", "150", 0, 0.0),                                 # the empty prediction earns nothing
    ("NOT IN HANDBOOK", "Room 104", 0, 0.0),
])
def test_exact_match_and_token_f1(prediction, reference, em, f1):
    assert exact_match(prediction, reference) == em
    assert token_f1(prediction, reference) == pytest.approx(f1, abs=1e-12)
    if (prediction + reference).isascii():  # where SQuAD's script deletes the same characters
        assert (em, f1) == pytest.approx(_squad(prediction, reference), abs=1e-12)


VARIANTS = ("$150", "$150 per week", "$150 a week", "150 dollars per week")


@pytest.mark.parametrize(("answer", "variants", "best"), [
    ("$150 per week", VARIANTS, (1.0, 1.0)),
    # vs "$150": 2/3; vs "150 dollars per week": precision 1, recall 1/2 -> 2/3.
    ("150 dollars", VARIANTS, (0.0, 2 / 3)),
    # "a" goes; vs "150 dollars per week": 3 shared of 3 and 4 -> 6/7.
    ("150 dollars a week", VARIANTS, (0.0, 6 / 7)),
    # EM and F1 may come from different variants.
    ("No", ("No", "no prior data experience is required"), (1.0, 1.0)),
    ("", ("x",), (0.0, 0.0)),
    # Nothing to score against, or no answer: NaN.
    ("x", (), (math.nan, math.nan)),
    ("x", ("",), (math.nan, math.nan)),
    (None, ("x",), (math.nan, math.nan)),
])
def test_best_reference_scores_take_the_best_variant(answer, variants, best):
    assert best_reference_scores(answer, variants) == pytest.approx(best, nan_ok=True)
