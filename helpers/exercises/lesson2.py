"""Lesson 2's exercises, one checker each (see :mod:`helpers.exercises`)."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from .. import retrieval, text
from .framework import (
    TOLERANCE,
    AnswerShapeError,
    _close,
    _extended_questions,
    _handbook,
    _id_list,
    _number,
    _passage_texts,
    _plural,
    _questions,
    _require_keys,
    _tfidf,
    correct,
    exercise,
    fixture_cache,
    hint,
)


@fixture_cache
def _dense_retriever():
    from .. import dense

    return dense.DenseRetriever.fit(_handbook())


def _all_questions() -> pd.DataFrame:
    return pd.concat([_questions().assign(question_set="original six"),
                      _extended_questions().assign(question_set="extended")],
                     ignore_index=True)


@fixture_cache
def _score_matrices() -> tuple[np.ndarray, np.ndarray]:
    """Dense and tf-idf scores for every question of both sets, in _all_questions order."""
    texts = _all_questions()["question"].tolist()
    return _dense_retriever().score(texts), _tfidf().score(texts)


def _gold_table(scores: np.ndarray, question_set: str, floor: float | None) -> pd.DataFrame:
    everything = _all_questions()
    subset = everything[everything["question_set"] == question_set]
    ranked = retrieval.rank_scores(np.asarray(scores)[subset.index], _tfidf().passage_ids,
                                   subset["question_id"].tolist(), k=None,
                                   min_score=-np.inf if floor is None else floor)
    return retrieval.gold_ranks(ranked, subset)


def _fused(weight: float) -> tuple[np.ndarray, float | None]:
    from .. import dense

    dense_scores, tfidf_scores = _score_matrices()
    # Weight 0 is tf-idf alone, which keeps its zero floor (as in lesson 2's sweep).
    return dense.weighted_fusion(dense_scores, tfidf_scores, weight), (0.0 if weight == 0 else None)


@fixture_cache
def _mrr(weight: float, question_set: str) -> float:
    from .. import dense

    scores, floor = _fused(weight)
    return dense.retrieval_metrics(_gold_table(scores, question_set, floor))["mrr"]


#: The fewest content words exercise 2.1's question may have.
MIN_CONTENT_WORDS = 3


@exercise("2.1", "A paraphrase of your own", expects="a dict with keys 'passage_id' and "
          "'question'")
def own_paraphrase(paraphrase):
    """Lesson 2, exercise 2.1: a new question that shares no content word with its passage.

    Checks that the question is new, has at least :data:`MIN_CONTENT_WORDS` content
    words, shares none with the passage, and that the dense retriever ranks the passage in
    its top three ("Why tf-idf fails Q3 and ranks Q6's gold second", "A dense retriever").
    """
    _require_keys(paraphrase, "paraphrase", ("passage_id", "question"))
    passage_id, question = paraphrase["passage_id"], paraphrase["question"]
    passages = _passage_texts()
    if not isinstance(passage_id, str) or passage_id not in passages:
        return hint(f"{passage_id!r} is not a handbook passage ID (H01 to H{len(passages):02d}).")
    if not isinstance(question, str) or not question.strip().endswith("?"):
        return hint("'question' must be a question: a string ending with '?'.")
    existing = {q.strip().lower(): qid for qid, q in zip(
        _all_questions()["question_id"], _all_questions()["question"])}
    if question.strip().lower() in existing:
        return hint(f"That is {existing[question.strip().lower()]} from the lesson's "
                    "question sets; write a question of your own.")
    words = text.content_words(question)
    if len(words) < MIN_CONTENT_WORDS:
        return hint(f"Write a real question: at least {MIN_CONTENT_WORDS} content words (not "
                    "stop words).")
    shared = text.shared_content_words(question, passages[passage_id])
    if shared:
        return hint(f"Your question shares {', '.join(repr(w) for w in shared)} with "
                    f"{passage_id}; find other words for the same thing.")
    ranked = _dense_retriever().rank(pd.DataFrame({"question_id": ["mine"],
                                                   "question": [question]}), k=None)
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
    from .. import dense

    probe = pd.DataFrame({"question_id": [f"code{i}" for i in range(len(CODE_QUESTIONS))],
                          "question": list(CODE_QUESTIONS)})
    retrievers = {"tf-idf": _tfidf(), "dense": _dense_retriever(),
                  "hybrid": dense.HybridRetriever(_tfidf(), _dense_retriever())}
    tops: dict[str, dict[str, str | None]] = {}
    for qid, question in zip(probe["question_id"], CODE_QUESTIONS):
        tops[question] = {}
        for name, retriever in retrievers.items():
            ranked = retriever.rank(probe, k=1)
            first = ranked.loc[ranked["question_id"] == qid, "passage_id"]
            tops[question][name] = first.iloc[0] if len(first) else None
    return tops


@exercise("2.2", "Course codes through the encoder's eyes", expects="a dict from each "
          "of the two questions to a dict {'tf-idf': ID, 'dense': ID, 'hybrid': ID}")
def code_lookup(code_tops):
    """Lesson 2, exercise 2.2: each retriever's top passage for two course-code questions.

    One code exists (DSC-104, named in H09), one does not (DSC-106); ``None`` stands for
    "nothing retrieved". Recomputed with the lesson's three retrievers ("A hybrid of the
    two").
    """
    _require_keys(code_tops, "code_tops", CODE_QUESTIONS)
    expected = _code_tops()
    passages = _passage_texts()
    for question in CODE_QUESTIONS:
        given = code_tops[question]
        _require_keys(given, f"code_tops[{question!r}]", ("tf-idf", "dense", "hybrid"))
        for name, top in expected[question].items():
            value = given[name]
            if value is not None and not isinstance(value, str):
                return hint(f"Give each retriever's top passage as an ID string such as "
                            f"'H01', or None; code_tops[{question!r}][{name!r}] is {value!r}.")
            if value == top:
                continue
            if value is not None and value not in passages:
                return hint(f"{value!r} is not a handbook passage ID.")
            if top is None:
                return hint(f"{name} retrieves nothing at all for {question!r}: give None.")
            if value is None:
                return hint(f"{name} does retrieve passages for {question!r}: give the one "
                            "it ranks first.")
            others = [other for other, t in expected[question].items() if other != name and t == value]
            if others and value is not None:
                return hint(f"For {question!r} you give {name} the passage that {others[0]} ranks "
                            f"first; rank the question with the {name} retriever itself.")
            return hint(f"{value!r} is not the passage {name} ranks first for {question!r}. "
                        "Rank the question with k=1 (or read rank 1 of a longer list).")
    return correct()


#: The weights exercise 2.3 sweeps: 0, 0.05, ..., 1.
WEIGHT_GRID = tuple(round(0.05 * i, 2) for i in range(21))


def _weights(value: Any, what: str) -> list[float]:
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
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
    original = {w: _mrr(w, "original six") for w in WEIGHT_GRID}
    extended = {w: _mrr(w, "extended") for w in WEIGHT_GRID}

    def best(values: dict[float, float]) -> list[float]:
        top = max(values.values())
        return [w for w, v in values.items() if abs(v - top) < 1e-12]

    best_original, best_extended = best(original), best(extended)
    given = _weights(tuning["best_on_original"], "best_on_original")
    if given != best_original:
        if given == best_extended:
            return hint("Those weights maximise MRR on the extended set. Tune on the original "
                        "six questions only, then look at the extended set.")
        if set(given) < set(best_original):
            return hint("More weights tie at the best MRR on the original six than you "
                        "list: give every one of them.")
        worse = [w for w in given if w not in best_original]
        if worse:
            return hint(f"Weight {worse[0]} does not reach the best MRR on the original six.")
        return hint("List every weight on the grid whose MRR on the original six equals the "
                    "best one.")
    span = tuning["extended_mrr_range"]
    low, high = min(extended[w] for w in best_original), max(extended[w] for w in best_original)
    if not (isinstance(span, (list, tuple)) and len(span) == 2):
        return hint("'extended_mrr_range' is a pair: (lowest, highest).")
    if not (_close(span[0], low, TOLERANCE, "'extended_mrr_range'")
            and _close(span[1], high, TOLERANCE, "'extended_mrr_range'")):
        return hint("'extended_mrr_range' is the lowest and the highest MRR on the extended "
                    "set among the weights in best_on_original (three decimals).")
    given = _weights(tuning["best_on_extended"], "best_on_extended")
    if given != best_extended:
        if set(given) < set(best_extended):
            return hint("More weights tie at the best MRR on the extended set: list all.")
        return hint("'best_on_extended' lists every weight whose MRR on the extended set is "
                    "the highest.")
    return correct(f"{len(best_original)} of the {len(WEIGHT_GRID)} weights tie on the "
                   f"original six, and between them the extended MRR spans {high - low:.3f}.")


@fixture_cache
def _hybrid_top() -> pd.Series:
    from .. import dense

    dense_scores, tfidf_scores = _score_matrices()
    fused = dense.weighted_fusion(dense_scores, tfidf_scores)
    everything = _all_questions()
    return pd.Series(fused.max(axis=1), index=everything["question_id"].tolist())


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
    top = _hybrid_top()
    everything = _all_questions().set_index("question_id")
    six = everything[everything["question_set"] == "original six"]
    leaking = [q for q in six.index if six.loc[q, "expected_action"] == "abstain" and top[q] > t]
    if leaking:
        return hint(f"With t = {t:g}, {', '.join(leaking)} still reaches the reader: its top "
                    "score is above t. Raise t.")
    lost = [q for q in six.index if pd.notna(six.loc[q, "gold_passage_id"]) and top[q] <= t]
    if lost:
        return hint(f"With t = {t:g}, {', '.join(lost)} would be stopped although it has a "
                    "gold passage. Choose t from the original six so that none is lost.")
    ext = everything[everything["question_set"] == "extended"]
    stopped = [q for q in ext.index if pd.notna(ext.loc[q, "gold_passage_id"]) and top[q] <= t]
    read = [q for q in ext.index if ext.loc[q, "expected_action"] == "abstain" and top[q] > t]
    given_stopped = set(_id_list(threshold["stopped_with_gold"], "stopped_with_gold"))
    given_read = set(_id_list(threshold["read_unanswerable"], "read_unanswerable"))
    if given_stopped == set(read) and given_read == set(stopped) and stopped != read:
        return hint("The two lists are swapped.")
    for name, given, expected, what in (
        ("stopped_with_gold", given_stopped, set(stopped),
         "extended questions with a gold passage (answer or flag premise) whose hybrid top "
         "score is at or below t"),
        ("read_unanswerable", given_read, set(read),
         "extended questions that expect an abstention whose hybrid top score is above t"),
    ):
        if given != expected:
            missed, extra = len(expected - given), len(given - expected)
            detail = "; ".join(part for part in (
                f"it misses {_plural(missed, 'question', 'questions')}" if missed else "",
                f"{_plural(extra, 'question does', 'questions do')} not belong" if extra else "",
            ) if part)
            return hint(f"'{name}' lists the {what}: {detail}.")
    return correct(f"Perfect on the six, this t stops {len(stopped)} extended questions "
                   f"that have a gold passage and lets {len(read)} of "
                   f"{int((ext['expected_action'] == 'abstain').sum())} unanswerable ones through.")

