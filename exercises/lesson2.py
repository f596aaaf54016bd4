"""Lesson 2's exercises, one checker each (see :mod:`exercises`)."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from helpers import baseline, dense, retrieval, text
from .framework import (TOLERANCE, AnswerShapeError, _all_questions, _asked, _close, _first_hint,
                        _handbook, _id_list, _is_number, _number, _pair, _passage_ids,
                        _passage_texts, _plural, _require_keys, _same_ids, _tfidf, correct,
                        exercise, fixture_cache, hint)


@fixture_cache
def _retriever(name: str):
    """Lesson 2's retriever ``name`` ("dense" or "hybrid"), fitted on the handbook."""
    from runtime import fit_retriever

    return fit_retriever(name, _handbook())


@fixture_cache
def _score_matrices() -> tuple[np.ndarray, np.ndarray]:
    """Dense and tf-idf scores for every question of both sets, in _all_questions order."""
    texts = _all_questions()["question"].tolist()
    return _retriever("dense").score(texts), _tfidf().score(texts)


@fixture_cache
def _mrr(weight: float, question_set: str) -> float:
    """The hybrid's MRR on one question set with dense weight ``weight``, as lesson 2's
    sweep computes it (weight 0 is tf-idf alone, which keeps its zero floor)."""
    subset = _all_questions().query("question_set == @question_set")
    scores = dense.weighted_fusion(*_score_matrices(), weight)[subset.index]
    ranked = retrieval.rank_scores(scores, _tfidf().passage_ids, subset["question_id"].tolist(),
                                   k=None, min_score=0.0 if weight == 0 else -np.inf)
    return dense.retrieval_metrics(retrieval.gold_ranks(ranked, subset))["mrr"]


#: The fewest content words exercise 2.1's question may have.
MIN_CONTENT_WORDS = 3


@exercise("2.1", "A paraphrase of your own", expects="a dict with keys 'passage_id', "
          "'question' and 'answer'")
def own_paraphrase(paraphrase):
    """Lesson 2, exercise 2.1: a new question that its passage answers and shares no content
    word with.

    Checks that the question is new, has at least :data:`MIN_CONTENT_WORDS` content
    words, shares none with the passage, that its answer is words of the passage (a
    question the passage cannot answer is no paraphrase of it; the check cannot read
    meaning, so it asks where the answer is), and that the dense retriever ranks the
    passage in its top three ("Why tf-idf fails Q3 and ranks Q6's gold second",
    "A dense retriever").
    """
    _require_keys(paraphrase, "paraphrase", ("passage_id", "question", "answer"))
    passage_id, question, answer = (paraphrase[k] for k in ("passage_id", "question", "answer"))
    _passage_ids([passage_id])
    if not isinstance(question, str) or not question.strip().endswith("?"):
        return hint("'question' must be a question: a string ending with '?'.")
    if not isinstance(answer, str) or not text.content_words(answer):
        return hint("'answer' must be the words of the passage that answer your question, "
                    "a string with at least one word that is not a stop word.")
    passage = _passage_texts()[passage_id]
    existing = dict(zip(_all_questions()["question"].str.strip().str.lower(),
                        _all_questions()["question_id"]))
    shared = text.shared_content_words(question, passage)
    _first_hint(
        (question.strip().lower() in existing, f"That is {existing.get(question.strip().lower())} "
                                               "from the lesson's question sets; write a question "
                                               "of your own."),
        (len(text.content_words(question)) < MIN_CONTENT_WORDS, "Write a real question: at least "
         f"{MIN_CONTENT_WORDS} content words (not stop words)."),
        (shared, f"Your question shares {', '.join(repr(w) for w in shared)} with {passage_id}; "
                 "find other words for the same thing."),
        (not baseline.contains_variant(passage, [answer]), f"{answer!r} is not in {passage_id}: a "
         "paraphrase asks what its passage says, so give the passage's own words that answer "
         "it. A question the passage cannot answer is not a paraphrase of it, however close "
         "the encoder puts them."))
    ranked = _retriever("dense").rank(_asked("mine", question), k=None)
    rank = int(ranked.loc[ranked["passage_id"] == passage_id, "rank"].iloc[0])
    if rank > 3:
        return hint(f"The encoder ranks {passage_id} at {rank}, outside the top three the "
                    "reader sees: word the question closer to what the passage means.")
    return correct(f"Tf-idf cannot retrieve {passage_id} for it (no shared word); the encoder "
                   f"ranks it at {rank}.")


#: The two questions of exercise 2.2: a course code the handbook has, and one it has not.
CODE_QUESTIONS = ("When does DSC-104 meet?", "When does DSC-106 meet?")


@fixture_cache
def _code_tops() -> dict[str, dict[str, str | None]]:
    """Each retriever's top passage (None: nothing retrieved) for each course-code question."""
    probe = pd.DataFrame({"question_id": list(CODE_QUESTIONS), "question": list(CODE_QUESTIONS)})
    retrievers = {"tf-idf": _tfidf(), "dense": _retriever("dense"), "hybrid": _retriever("hybrid")}
    firsts = {name: retriever.rank(probe, k=1).set_index("question_id")["passage_id"]
              for name, retriever in retrievers.items()}
    return {question: {name: first.get(question) for name, first in firsts.items()}
            for question in CODE_QUESTIONS}


@exercise("2.2", "Course codes through the encoder's eyes", expects="a dict from each "
          "of the two questions to a dict {'tf-idf': ID, 'dense': ID, 'hybrid': ID}")
def code_lookup(code_tops):
    """Lesson 2, exercise 2.2: each retriever's top passage for two course-code questions.

    One code exists (DSC-104, named in H09), one does not (DSC-106); ``None`` stands for
    "nothing retrieved". Recomputed with the lesson's three retrievers ("A hybrid of the
    two").
    """
    _require_keys(code_tops, "code_tops", CODE_QUESTIONS)
    for question, expected in _code_tops().items():
        _require_keys(code_tops[question], f"code_tops[{question!r}]", tuple(expected))
        for name, top in expected.items():
            value = code_tops[question][name]
            if value is not None and not isinstance(value, str):
                raise AnswerShapeError(f"code_tops[{question!r}][{name!r}] must be a passage ID "
                                       f"such as 'H01', or None, not {value!r}")
            if value == top:
                continue
            _passage_ids([] if value is None else [value])
            others = [other for other, t in expected.items() if other != name and t == value]
            _first_hint(
                (top is None, f"{name} retrieves nothing at all for {question!r}: give None."),
                (value is None, f"{name} does retrieve passages for {question!r}: give the one it "
                                "ranks first."),
                (others, lambda: f"For {question!r} you give {name} the passage that "
                                 f"{others[0]} ranks first; rank the question with the {name} "
                                 "retriever itself."))
            return hint(f"{value!r} is not the passage {name} ranks first for {question!r}. "
                        "Rank the question with k=1 (or read rank 1 of a longer list).")
    return correct()


#: The weights exercise 2.3 sweeps: 0, 0.05, ..., 1.
WEIGHT_GRID = tuple(round(0.05 * i, 2) for i in range(21))


def _weights(value: Any, what: str) -> list[float]:
    """The weights of an answer, sorted and distinct: a number or a list of numbers, each on
    :data:`WEIGHT_GRID`."""
    if _is_number(value):
        value = [value]
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise AnswerShapeError(f"{what} must be a list of weights from exercises.WEIGHT_GRID")
    weights = [round(_number(v, f"each weight of {what}"), 2) for v in value]
    off_grid = [w for w in weights if w not in WEIGHT_GRID]
    if off_grid:
        raise AnswerShapeError(f"{what} holds {off_grid[0]}, which is not on the grid "
                               "exercises.WEIGHT_GRID")
    return sorted(set(weights))


@exercise("2.3", "Tune the dense weight on six questions", expects="a dict with keys "
          "'best_on_original' (weights), 'extended_mrr_range' (lowest, highest) and "
          "'best_on_extended' (weights)")
def tune_weight(tuning):
    """Lesson 2, exercise 2.3: the hybrid's dense weight tuned on the original six.

    On the grid :data:`WEIGHT_GRID`, checks every weight that maximises MRR on the
    original six, the lowest and highest extended-set MRR among those weights (within
    :data:`TOLERANCE`), and every weight that maximises MRR on the extended set ("A hybrid
    of the two").
    """
    _require_keys(tuning, "tuning", ("best_on_original", "extended_mrr_range", "best_on_extended"))
    original, extended = ({w: _mrr(w, question_set) for w in WEIGHT_GRID}
                          for question_set in ("original six", "extended"))
    # Every weight at the best MRR of each set (ties within floating-point error).
    best_original, best_extended = ([w for w, v in m.items() if abs(v - max(m.values())) < 1e-12]
                                    for m in (original, extended))
    given = _weights(tuning["best_on_original"], "best_on_original")
    _first_hint(
        (given != best_original and given == best_extended, "Those weights maximise MRR on the "
         "extended set. Tune on the original six questions only, then look at the extended set."))
    _same_ids(given, best_original, lambda worse, _: f"Weight {worse[0]} does not reach the best "
              "MRR on the original six.",
              "More weights tie at the best MRR on the original six than you list: give every one "
              "of them.")
    span = _pair(tuning["extended_mrr_range"], "'extended_mrr_range'", "(lowest, highest)")
    low, high = min(extended[w] for w in best_original), max(extended[w] for w in best_original)
    if not all(_close(v, t, TOLERANCE, "'extended_mrr_range'") for v, t in zip(span, (low, high))):
        return hint("'extended_mrr_range' is the lowest and the highest MRR on the extended "
                    "set among the weights in best_on_original (three decimals).")
    _same_ids(_weights(tuning["best_on_extended"], "best_on_extended"), best_extended,
              "'best_on_extended' lists every weight whose MRR on the extended set is the highest.",
              "More weights tie at the best MRR on the extended set: list all.")
    return correct(f"{len(best_original)} of the {len(WEIGHT_GRID)} weights tie on the "
                   f"original six, and between them the extended MRR spans {high - low:.3f}.")


@exercise("2.4", "A threshold chosen on six questions", expects="a dict with keys 't', "
          "'stopped_with_gold' and 'read_unanswerable'")
def six_question_threshold(threshold):
    """Lesson 2, exercise 2.4: an abstention threshold set on the original six.

    ``t`` must stop every unanswerable question of the six and let every question with a
    gold passage through (read when the hybrid top score is above ``t``); the two lists
    must be what that ``t`` does to the extended set ("Scores of unanswerable
    questions").
    """
    _require_keys(threshold, "threshold", ("t", "stopped_with_gold", "read_unanswerable"))
    t = _number(threshold["t"], "'t'")
    rows = _all_questions().set_index("question_id")
    # Read when the hybrid's top score (at the lesson's weight) is above t.
    reads = pd.Series(dense.weighted_fusion(*_score_matrices()).max(axis=1) > t, index=rows.index)
    six, abstain = rows["question_set"] == "original six", rows["expected_action"] == "abstain"
    gold = rows["gold_passage_id"].notna()
    leaking, lost = list(rows.index[six & abstain & reads]), list(rows.index[six & gold & ~reads])
    _first_hint(
        (leaking, f"With t = {t:g}, {', '.join(leaking)} still reaches the reader: its top score "
                  "is above t. Raise t."),
        (lost, f"With t = {t:g}, {', '.join(lost)} would be stopped although it has a gold "
               "passage. Choose t from the original six so that none is lost."))
    stopped, read = set(rows.index[~six & gold & ~reads]), set(rows.index[~six & abstain & reads])
    given_stopped, given_read = (set(_id_list(threshold[name], name))
                                 for name in ("stopped_with_gold", "read_unanswerable"))
    _first_hint((given_stopped == read and given_read == stopped and stopped != read,
                 "The two lists are swapped."))
    for name, given, expected, what in (
        ("stopped_with_gold", given_stopped, stopped, "extended questions with a gold passage "
         "(answer or flag premise) whose hybrid top score is at or below t"),
        ("read_unanswerable", given_read, read, "extended questions that expect an abstention "
         "whose hybrid top score is above t"),
    ):
        _same_ids(given, expected, lambda extra, missed: f"'{name}' lists the {what}: " + "; ".join(
            filter(None, (f"it misses {_plural(missed, 'question', 'questions')}" if missed else "",
                          f"{_plural(len(extra), 'question does', 'questions do')} not belong"
                          if extra else ""))) + ".")
    return correct(f"Perfect on the six, this t stops {len(stopped)} extended questions that "
                   f"have a gold passage and lets {len(read)} of "
                   f"{int((~six & abstain).sum())} unanswerable ones through.")
