"""EM, token F1, outcome labels, the action table and the policy table.

Pinned to the reference render's tables "Action, reference, retrieval, and end-to-end
results kept separate", "Expected versus observed action for all six questions" and
"Observed reader and simple policies scored on the same six questions", and to the
sentences printed under them.
"""
from __future__ import annotations

import math

import pytest

from helpers.parsing import parse_outputs
from helpers.scoring import (
    action_counts,
    action_table,
    best_reference_scores,
    em_zero_reason,
    exact_match,
    policy_table,
    score_table,
    token_f1,
)

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
OUTCOME_COLUMNS = [
    "question_id", "reader_action", "expected_action", "action_correct",
    "reader_given_passages", "reference_agreement", "recall_at_3_label", "end_to_end_outcome",
]

PRINTED_ACTION_TABLE = [
    ("abstain", "abstain", 1),
    ("abstain", "answer", 0),
    ("abstain", "flag premise", 0),
    ("answer", "abstain", 1),
    ("answer", "answer", 3),
    ("answer", "flag premise", 0),
    ("flag premise", "abstain", 1),
    ("flag premise", "answer", 0),
    ("flag premise", "flag premise", 0),
]

PRINTED_POLICIES = [
    ("observed reader", 4, 6, "Q3, Q6"),
    ("always answer", 4, 6, "Q5, Q6"),
    ("always abstain", 1, 6, "Q1, Q2, Q3, Q4, Q6"),
]


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


@pytest.mark.parametrize(
    ("question_id", "em", "f1"),
    [("Q1", 1, 1.0), ("Q2", 0, 4 / 7), ("Q3", 0, 0.0), ("Q4", 1, 1.0)],
)
def test_em_and_f1_per_answer_row(scores, question_id, em, f1):
    row = scores.set_index("question_id").loc[question_id]
    assert row["exact_match"] == em
    assert row["f1"] == pytest.approx(f1, abs=1e-12)


@pytest.mark.parametrize("question_id", ["Q5", "Q6"])
def test_non_answer_rows_are_not_scored(scores, question_id):
    row = scores.set_index("question_id").loc[question_id]
    assert math.isnan(row["exact_match"]) and math.isnan(row["f1"])
    assert row["reference_agreement"] == "not applicable"


def test_the_summary_sentence_figures(scores):
    """3 answers, 3 abstentions, 0 premise flags; 4 of 6 exact; 1 failed before reading."""
    assert action_counts(scores) == {"answer": 3, "abstain": 3, "flag premise": 0,
                                     "parse failure": 0}
    assert int(scores["action_correct"].sum()) == 4
    assert int((scores["end_to_end_outcome"] == "failed before reading").sum()) == 1


def test_em_zero_explanation_matches_the_source(scores):
    reason = em_zero_reason(scores)
    assert reason["rows"] == "Q2"
    assert reason["count"] == 1
    assert reason["reason"] == (
        "Q2 has exact match 0 because the answer contains an acceptable variant but "
        "includes extra words"
    )


def test_action_table_matches_the_source(scores):
    table = action_table(scores)
    assert list(table.columns) == ["expected_action", "observed_action", "questions"]
    assert [tuple(r) for r in table.itertuples(index=False)] == PRINTED_ACTION_TABLE
    assert table["questions"].sum() == 6


def test_policy_table_matches_the_source(scores, questions):
    table = policy_table(scores, questions)
    assert [tuple(r) for r in table.itertuples(index=False)] == PRINTED_POLICIES


# --- parse failures and other reader behaviours ----------------------------------


def test_a_parse_failure_counts_as_the_empty_prediction(source_raw_outputs, questions, gold):
    scores = _scores_with(source_raw_outputs, questions, gold,
                          {"Q1": "Answer: $150 per week\nSources: H08\nHope that helps!"})
    row = scores.set_index("question_id").loc["Q1"]
    assert row["reader_action"] == "parse failure"
    assert row["exact_match"] == 0 and row["f1"] == 0.0
    assert row["reference_agreement"] == "EM 0; F1 0.00"
    assert not row["action_correct"]
    assert row["end_to_end_outcome"] == "unexpected action"
    assert action_counts(scores)["parse failure"] == 1


def test_a_parse_failure_is_a_fourth_observed_action(source_raw_outputs, questions, gold):
    scores = _scores_with(source_raw_outputs, questions, gold,
                          {"Q1": "Answer: $150 per week", "Q5": "NOT IN HANDBOOK"})
    table = action_table(scores)
    assert len(table) == 12
    assert sorted(set(table["observed_action"])) == [
        "abstain", "answer", "flag premise", "parse failure"]
    counts = {(e, o): n for e, o, n in table.itertuples(index=False)}
    assert counts[("answer", "parse failure")] == 1
    assert counts[("abstain", "parse failure")] == 1
    assert counts[("flag premise", "parse failure")] == 0
    assert counts[("answer", "answer")] == 2
    assert table["questions"].sum() == 6
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
    table = action_table(scores)
    counts = {(e, o): n for e, o, n in table.itertuples(index=False)}
    assert counts[("flag premise", "flag premise")] == 1
    assert counts[("flag premise", "abstain")] == 0
    assert policy_table(scores, questions).set_index("policy").at[
        "observed reader", "rows_missed"] == "Q3"


def test_no_em_zero_rows(source_raw_outputs, questions, gold):
    scores = _scores_with(source_raw_outputs, questions, gold,
                          {"Q2": "Answer: Oct. 15\nSources: H14"})
    assert em_zero_reason(scores) == {
        "rows": "", "count": 0,
        "reason": "no correctly handled answer row has exact match 0"}


def test_em_zero_for_two_rows_with_extra_words(source_raw_outputs, questions, gold):
    scores = _scores_with(source_raw_outputs, questions, gold,
                          {"Q1": "Answer: It is $150 per week.\nSources: H08"})
    assert em_zero_reason(scores)["reason"] == (
        "Q1, Q2 have exact match 0 because each answer contains an acceptable variant "
        "but includes extra words")


def test_em_zero_for_wording_differences(source_raw_outputs, questions, gold):
    scores = _scores_with(source_raw_outputs, questions, gold,
                          {"Q1": "Answer: One hundred fifty dollars weekly\nSources: H08"})
    row = scores.set_index("question_id").loc["Q1"]
    assert row["exact_match"] == 0 and 0 < row["f1"] < 1  # "dollars" is shared
    assert em_zero_reason(scores)["reason"] == "Q1, Q2 have exact match 0 for wording differences"


def test_unknown_question_ids_are_rejected(source_raw_outputs, questions, gold):
    outputs = source_raw_outputs.copy()
    outputs.loc[0, "question_id"] = "Q99"
    with pytest.raises(ValueError, match="Q99"):
        score_table(parse_outputs(outputs), questions, gold)


# --- the metrics themselves -------------------------------------------------------


@pytest.mark.parametrize(
    ("prediction", "reference", "em"),
    [
        ("$150 per week", "$150 per week", 1),
        ("150 per week", "$150 per week", 1),       # "$" is a symbol
        ("The $150, per week!", "$150 per week", 1),  # article and punctuation
        ("€150 — per  week", "150 per week", 1),    # Unicode symbol and dash, spaces
        ("Oct. 15", "Oct 15", 1),
        ("NO", "No", 1),
        ("$150 a week", "$150 per week", 0),
        ("$150 per week", "$150", 0),
        ("", "$150", 0),
    ],
)
def test_exact_match(prediction, reference, em):
    assert exact_match(prediction, reference) == em


@pytest.mark.parametrize(
    ("prediction", "reference", "f1"),
    [
        ("Applications close on October 15.", "October 15", 4 / 7),
        ("$150", "$150 per week", 0.5),            # precision 1, recall 1/3
        # Multiset overlap: a repeated token counts only as often as in both.
        ("150 150 150", "150", 0.5),               # precision 1/3, recall 1
        ("week week", "week week", 1.0),           # a set overlap would give 0.5
        ("150 150", "150 150 week", 0.8),          # 2 shared: precision 1, recall 2/3
        ("week week pay", "week pay pay", 2 / 3),  # 2 shared of 3 and 3
        ("the a an", "150", 0.0),                  # only articles: empty after normalising
        ("", "150", 0.0),                          # the empty prediction earns nothing
        ("NOT IN HANDBOOK", "Room 104", 0.0),
    ],
)
def test_token_f1(prediction, reference, f1):
    assert token_f1(prediction, reference) == pytest.approx(f1, abs=1e-12)


def test_best_reference_scores_take_the_best_variant():
    variants = ("$150", "$150 per week", "$150 a week", "150 dollars per week")
    assert best_reference_scores("$150 per week", variants) == (1.0, 1.0)
    em, f1 = best_reference_scores("150 dollars", variants)
    # vs "$150": 2/3; vs "150 dollars per week": precision 1, recall 1/2 -> 2/3.
    assert em == 0.0 and f1 == pytest.approx(2 / 3)
    em, f1 = best_reference_scores("150 dollars a week", variants)
    # "a" goes; vs "150 dollars per week": 3 shared of 3 and 4 -> 6/7.
    assert em == 0.0 and f1 == pytest.approx(6 / 7)
    # EM and F1 may come from different variants.
    em, f1 = best_reference_scores("No", ("No", "no prior data experience is required"))
    assert (em, f1) == (1.0, 1.0)


def test_best_reference_scores_without_references_or_answer():
    assert all(math.isnan(v) for v in best_reference_scores("x", ()))
    assert all(math.isnan(v) for v in best_reference_scores("x", ("",)))
    assert all(math.isnan(v) for v in best_reference_scores(None, ("x",)))
    assert best_reference_scores("", ("x",)) == (0.0, 0.0)
