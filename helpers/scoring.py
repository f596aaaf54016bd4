"""EM and token F1, recall@3, action correctness, outcome labels and policies.

Introduced in lesson 1, "Score answers, actions, and retrieval" and "Count action
choices". The answer metrics follow the official SQuAD evaluation script: normalise,
compare exactly (EM), or count the multiset of shared tokens (F1), keep the best score
over the acceptable variants. Unlike that script there are no globals, and a missing
prediction (an abstention or a parse failure on an answerable question) is scored as
the empty string, i.e. EM 0 and F1 0, never skipped.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
import pandas as pd

from .baseline import contains_variant
from .text import normalize_answer

ACTIONS = ("answer", "abstain", "flag premise")

#: The columns of :func:`score_table`, in order.
SCORE_COLUMNS = ["question_id", "reader_action", "expected_action", "action_correct",
                 "parsed_answer", "exact_match", "f1", "recall_at_3", "reader_given_passages",
                 "reference_agreement", "recall_at_3_label", "end_to_end_outcome",
                 "acceptable_variant_in_answer"]


def exact_match(prediction: str, reference: str) -> int:
    """1 when the normalised strings are equal, else 0."""
    return int(normalize_answer(prediction) == normalize_answer(reference))


def token_f1(prediction: str, reference: str) -> float:
    """Harmonic mean of token precision and recall over the multiset of shared tokens."""
    predicted = normalize_answer(prediction).split()
    gold = normalize_answer(reference).split()
    # An empty side scores 0 here (SQuAD gives 1 when both are empty; no reference of
    # ours is empty, and an empty prediction must not earn credit).
    if not predicted or not gold:
        return 0.0
    overlap = sum((Counter(predicted) & Counter(gold)).values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(predicted)
    recall = overlap / len(gold)
    return 2 * precision * recall / (precision + recall)


def best_reference_scores(answer: str | None, variants: Sequence[str]) -> tuple[float, float]:
    """Best EM and best F1 over the variants; NaN when there is nothing to score against."""
    variants = [v for v in variants if v]
    if answer is None or not variants:
        return (np.nan, np.nan)
    return (
        float(max(exact_match(answer, v) for v in variants)),
        max(token_f1(answer, v) for v in variants),
    )


def answer_contains_variant(answer: str | None, variants: Sequence[str]) -> bool:
    """Whether the normalised answer contains a normalised acceptable variant.

    The baseline's :func:`helpers.baseline.contains_variant`, with "nothing to check"
    (no answer, an empty answer or no variants) read as False.
    """
    return bool(contains_variant(answer or None, variants))


def _reader_given_passages(expected: str, observed: str, recall: object) -> str:
    if expected == "answer" and recall is False and observed == "abstain":
        return "reasonable abstention from retrieved passages"
    return "expected action" if observed == expected else "unexpected action"


def _end_to_end(expected: str, observed: str, recall: object) -> str:
    if expected == "answer" and recall is False:
        return "failed before reading"
    return "expected action" if observed == expected else "unexpected action"


def _recall_label(recall: object) -> str:
    if recall is pd.NA or recall is None:
        return "not applicable"
    return "gold in top 3" if recall else "gold not in top 3"


def score_table(parsed: pd.DataFrame, questions: pd.DataFrame, gold: pd.DataFrame) -> pd.DataFrame:
    """One row per question with every score kept in its own column.

    ``parsed`` comes from :func:`helpers.parsing.parse_outputs`; ``gold`` from
    :func:`helpers.retrieval.gold_ranks`. Only parsed rows whose action is "answer" are
    scored against the references; anything else counts as the empty prediction.
    """
    from .retrieval import recall_at_k

    overlapping = [c for c in ("expected_action", "acceptable_list") if c in parsed.columns]
    merged = parsed.drop(columns=overlapping).merge(
        questions[["question_id", "expected_action", "acceptable_list"]], on="question_id",
        how="left", validate="one_to_one",
    )
    if merged["expected_action"].isna().any():
        unknown = merged.loc[merged["expected_action"].isna(), "question_id"].tolist()
        raise ValueError(f"parsed outputs name questions that are not in the question set: "
                         f"{unknown}")
    recall = recall_at_k(gold.set_index("question_id").loc[merged["question_id"]].reset_index(), 3)
    rows = []
    for row, recall_value in zip(merged.itertuples(index=False), recall.tolist()):
        answered = row.parse_ok and row.observed_action == "answer"
        scored_answer = row.parsed_answer if answered else ""
        em, f1 = best_reference_scores(scored_answer, row.acceptable_list)
        recall_value = pd.NA if recall_value is pd.NA else bool(recall_value)
        if row.expected_action != "answer" or np.isnan(em):
            agreement = "not applicable"
        else:
            agreement = f"EM {em:.0f}; F1 {f1:.2f}"
        rows.append(
            {
                "question_id": row.question_id,
                "reader_action": row.observed_action,
                "expected_action": row.expected_action,
                "action_correct": row.observed_action == row.expected_action,
                "parsed_answer": row.parsed_answer,
                "exact_match": em,
                "f1": f1,
                "recall_at_3": recall_value,
                "reader_given_passages": _reader_given_passages(
                    row.expected_action, row.observed_action, recall_value),
                "reference_agreement": agreement,
                "recall_at_3_label": _recall_label(recall_value),
                "end_to_end_outcome": _end_to_end(row.expected_action, row.observed_action,
                                                  recall_value),
                "acceptable_variant_in_answer": answer_contains_variant(
                    scored_answer, row.acceptable_list),
            }
        )
    frame = pd.DataFrame(rows, columns=SCORE_COLUMNS)
    frame["recall_at_3"] = frame["recall_at_3"].astype("boolean")
    frame["parsed_answer"] = pd.Series([r["parsed_answer"] for r in rows], dtype=object)
    return frame


def action_counts(scores: pd.DataFrame) -> dict[str, int]:
    """How many rows the reader answered, abstained on, flagged, or failed to parse."""
    counts = scores["reader_action"].value_counts()
    return {action: int(counts.get(action, 0)) for action in (*ACTIONS, "parse failure")}


def action_table(scores: pd.DataFrame) -> pd.DataFrame:
    """Expected versus observed action, all nine combinations, zeros included.

    A parse failure is a fourth observed action; its row appears only when it occurs.
    """
    observed = list(ACTIONS)
    if (scores["reader_action"] == "parse failure").any():
        observed.append("parse failure")
    counts = scores.groupby(["expected_action", "reader_action"]).size()
    rows = [
        {"expected_action": e, "observed_action": o, "questions": int(counts.get((e, o), 0))}
        for e in sorted(ACTIONS)
        for o in sorted(observed)
    ]
    return pd.DataFrame(rows)


def policy_table(scores: pd.DataFrame, questions: pd.DataFrame) -> pd.DataFrame:
    """The observed reader beside always-answer and always-abstain, on exact actions."""
    expected = questions.set_index("question_id")["expected_action"]

    def misses(mask: pd.Series) -> str:
        return ", ".join(mask[~mask].index) or "none"

    reader = scores.set_index("question_id")["action_correct"].astype(bool)
    policies = {
        "observed reader": reader,
        "always answer": expected == "answer",
        "always abstain": expected == "abstain",
    }
    return pd.DataFrame(
        [
            {"policy": name, "exact_action_matches": int(mask.sum()),
             "questions": len(questions), "rows_missed": misses(mask)}
            for name, mask in policies.items()
        ]
    )
