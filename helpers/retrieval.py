"""Tf-idf retrieval fitted on the handbook, ranking, and gold-passage labels.

Introduced in lesson 1, "Retrieve candidate passages".

The weights follow the lesson exactly: raw term counts times ``ln(N / df)``, with the
idf fitted once on the handbook and reused for every question; scores are cosine
similarities in [0, 1]; a passage scoring 0 is never retrieved; ties go to the smaller
passage ID. scikit-learn's CountVectorizer builds the sparse count matrix and scipy's
sparse algebra does the rest, so the same code serves a handbook of 100,000 passages.
(scikit-learn's own TfidfVectorizer adds 1 to every idf, which changes the scores.)
"""
from __future__ import annotations

import functools
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp
from sklearn.feature_extraction.text import CountVectorizer

from .text import content_tokens, shared_content_words

RANK_COLUMNS = ["question_id", "passage_id", "rank", "score"]

#: Scores are rounded to this many decimals before ordering, so that two passages whose
#: scores differ only by floating-point summation order count as tied.
TIE_DECIMALS = 12


def passage_id_order(passage_ids: Sequence[str]) -> np.ndarray:
    """Each passage's position in sorted passage-ID order (the tie-break key)."""
    ids = np.asarray(passage_ids, dtype=str)
    order = np.empty(len(ids), dtype=np.int64)
    order[np.argsort(ids, kind="stable")] = np.arange(len(ids))
    return order


def _top(values: np.ndarray, tie_keys: np.ndarray, k: int | None) -> np.ndarray:
    """Positions of the top ``k`` values, score descending then tie key ascending."""
    rounded = np.round(values, TIE_DECIMALS)
    if k is not None and len(rounded) > k:
        # Keep everything at least as large as the k-th score, ties included, then sort
        # only those few instead of every positive score.
        threshold = np.partition(rounded, len(rounded) - k)[len(rounded) - k]
        candidates = np.flatnonzero(rounded >= threshold)
    else:
        candidates = np.arange(len(rounded))
    order = candidates[np.lexsort((tie_keys[candidates], -rounded[candidates]))]
    return order if k is None else order[:k]


def rank_scores(
    scores: np.ndarray | sp.spmatrix,
    passage_ids: Sequence[str],
    question_ids: Sequence[str],
    k: int | None = 3,
    min_score: float = 0.0,
    id_order: np.ndarray | None = None,
) -> pd.DataFrame:
    """Rank passages per question: score descending, ties by passage ID, top ``k``.

    Only passages scoring strictly more than ``min_score`` are kept; ``k=None`` keeps
    them all. Works for any retriever that gives a (questions x passages) score matrix,
    dense or sparse. ``id_order`` (from :func:`passage_id_order`) may be passed to avoid
    sorting the IDs again on every call. Returns question_id, passage_id, rank
    (1-based), score.
    """
    ids = np.asarray(passage_ids, dtype=object)
    if id_order is None:
        id_order = passage_id_order(passage_ids)
    sparse = sp.issparse(scores)
    if sparse:
        scores = sp.csr_matrix(scores)
    else:
        scores = np.asarray(scores, dtype=float)
    if scores.shape != (len(question_ids), len(ids)):
        raise ValueError(
            f"score matrix has shape {scores.shape}, expected "
            f"({len(question_ids)} questions, {len(ids)} passages)"
        )
    frames = []
    for row, question_id in enumerate(question_ids):
        if sparse:
            start, end = scores.indptr[row], scores.indptr[row + 1]
            columns = scores.indices[start:end]
            values = scores.data[start:end]
        else:
            columns = np.arange(len(ids))
            values = scores[row]
        keep = values > min_score
        columns, values = columns[keep], values[keep]
        order = _top(values, id_order[columns], k)
        frames.append(
            pd.DataFrame(
                {
                    "question_id": question_id,
                    "passage_id": ids[columns[order]].astype(str),
                    "rank": np.arange(1, len(order) + 1, dtype=np.int64),
                    "score": values[order].astype(float),
                }
            )
        )
    if not frames:
        return pd.DataFrame(columns=RANK_COLUMNS)
    ranked = pd.concat(frames, ignore_index=True)
    return ranked.astype({"question_id": "str", "passage_id": "str"})


def _count_vectorizer(stop_words: Collection[str] | None = None) -> CountVectorizer:
    # The analyzer is the lesson's tokenizer without stop words; counts keep repeats.
    analyzer = (content_tokens if stop_words is None
                else functools.partial(content_tokens, stop_words=frozenset(stop_words)))
    return CountVectorizer(analyzer=analyzer, lowercase=False, dtype=np.float64)


@dataclass(frozen=True)
class TfidfRetriever:
    """The lesson's tf-idf retriever; build it with :meth:`fit`."""

    passage_ids: tuple[str, ...]
    vectorizer: CountVectorizer
    idf: np.ndarray
    passage_matrix: sp.csr_matrix  # rows are unit-length tf-idf vectors
    id_order: np.ndarray  # tie-break key of each passage

    @classmethod
    def fit(
        cls, passages: pd.DataFrame, id_column: str = "passage_id", text_column: str = "text",
        stop_words: Collection[str] | None = None,
    ) -> "TfidfRetriever":
        """Fit the idf on ``passages`` once: ``idf = ln(N / df)``.

        ``stop_words`` replaces the lesson's list (:data:`helpers.text.STOP_WORDS`) for
        passages and queries alike; lesson 1's exercises use it to keep *at*.
        """
        if passages.empty:
            raise ValueError("cannot fit a retriever on an empty passage table")
        if passages[id_column].duplicated().any():
            duplicate = passages.loc[passages[id_column].duplicated(), id_column].iloc[0]
            raise ValueError(f"passage IDs must be unique; {duplicate!r} repeats")
        vectorizer = _count_vectorizer(stop_words)
        counts = sp.csr_matrix(vectorizer.fit_transform(passages[text_column].tolist()))
        n_passages = counts.shape[0]
        document_frequency = np.bincount(counts.indices, minlength=counts.shape[1])
        idf = np.log(n_passages / document_frequency)
        weights = counts @ sp.diags(idf)
        return cls(
            passage_ids=tuple(str(pid) for pid in passages[id_column]),
            vectorizer=vectorizer,
            idf=idf,
            passage_matrix=_unit_rows(sp.csr_matrix(weights)),
            id_order=passage_id_order([str(pid) for pid in passages[id_column]]),
        )

    @property
    def vocabulary(self) -> pd.DataFrame:
        """Terms with their document frequency and idf, sorted by term."""
        terms = self.vectorizer.get_feature_names_out()
        n = len(self.passage_ids)
        return pd.DataFrame(
            {"term": terms, "document_frequency": np.rint(n / np.exp(self.idf)).astype(int),
             "idf": self.idf}
        ).sort_values("term", ignore_index=True)

    def query_matrix(self, queries: Sequence[str]) -> sp.csr_matrix:
        """Unit-length tf-idf vectors of the queries; unknown terms are dropped."""
        counts = sp.csr_matrix(self.vectorizer.transform(list(queries)))
        return _unit_rows(sp.csr_matrix(counts @ sp.diags(self.idf)))

    def score_sparse(self, queries: Sequence[str]) -> sp.csr_matrix:
        """Cosine scores as a sparse (queries x passages) matrix; zeros are not stored."""
        scores = sp.csr_matrix(self.query_matrix(queries) @ self.passage_matrix.T)
        scores.eliminate_zeros()
        return scores

    def score(self, queries: Sequence[str]) -> np.ndarray:
        """Cosine scores as a dense (queries x passages) array in ``passage_ids`` order."""
        return self.score_sparse(queries).toarray()

    def rank(
        self,
        questions: pd.DataFrame,
        k: int | None = 3,
        id_column: str = "question_id",
        text_column: str = "question",
    ) -> pd.DataFrame:
        """Top ``k`` passages with a positive score for each question."""
        scores = self.score_sparse(questions[text_column].tolist())
        return rank_scores(scores, self.passage_ids, questions[id_column].tolist(), k=k,
                           id_order=self.id_order)


def _unit_rows(matrix: sp.csr_matrix) -> sp.csr_matrix:
    norms = np.sqrt(np.asarray(matrix.multiply(matrix).sum(axis=1)).ravel())
    scale = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
    return sp.csr_matrix(sp.diags(scale) @ matrix)


def gold_ranks(ranked_all: pd.DataFrame, questions: pd.DataFrame, k: int = 3) -> pd.DataFrame:
    """Rank, score and a label for each question's gold passage.

    ``ranked_all`` is a ranking with every positive-scoring passage (``rank(k=None)``).
    Labels: "not applicable" (no gold passage), "not retrieved (all scores 0)" (the
    question matched no passage at all), "not retrieved (score 0)" (others matched, the
    gold passage did not), "rank N" within the top ``k``, "rank N (outside top k)".
    """
    records = []
    for question in questions.itertuples(index=False):
        gold = question.gold_passage_id
        mine = ranked_all[ranked_all["question_id"] == question.question_id]
        hit = mine[mine["passage_id"] == gold] if gold is not None else mine.iloc[0:0]
        if gold is None or pd.isna(gold):
            label, rank, score = "not applicable", pd.NA, np.nan
        elif hit.empty:
            rank, score = pd.NA, 0.0
            label = "not retrieved (all scores 0)" if mine.empty else "not retrieved (score 0)"
        else:
            rank, score = int(hit["rank"].iloc[0]), float(hit["score"].iloc[0])
            label = f"rank {rank}" if rank <= k else f"rank {rank} (outside top {k})"
        records.append(
            {"question_id": question.question_id, "gold_passage_id": gold,
             "gold_rank": rank, "gold_score": score, "gold_retrieval_label": label}
        )
    frame = pd.DataFrame(records)
    frame["gold_rank"] = frame["gold_rank"].astype("Int64")
    frame["gold_passage_id"] = pd.Series([r["gold_passage_id"] for r in records], dtype=object)
    return frame


def recall_at_k(gold: pd.DataFrame, k: int = 3) -> pd.Series:
    """True when the gold passage ranks within ``k``; NA when there is no gold passage."""
    values = [
        pd.NA if pd.isna(row.gold_passage_id) or row.gold_passage_id is None
        else (not pd.isna(row.gold_rank) and int(row.gold_rank) <= k)
        for row in gold.itertuples(index=False)
    ]
    return pd.Series(values, index=gold.index, dtype="boolean", name=f"recall_at_{k}")


def format_candidates(retrieved: pd.DataFrame, question_ids: Sequence[str],
                      empty: str = "no lexical match") -> pd.Series:
    """``"H12 (#1, 0.588); H03 (#2, 0.108)"`` per question, or ``empty``."""
    out = {}
    for question_id in question_ids:
        rows = retrieved[retrieved["question_id"] == question_id].sort_values("rank")
        out[question_id] = "; ".join(
            f"{r.passage_id} (#{r.rank}, {r.score:.3f})" for r in rows.itertuples()
        ) or empty
    return pd.Series(out, name="retrieved_candidates")


def overlap_table(questions: pd.DataFrame, handbook: pd.DataFrame) -> pd.DataFrame:
    """Content words each question shares with its gold passage ("none" when none).

    Introduced in lesson 1, "Check overlap before retrieval".
    """
    texts = dict(zip(handbook["passage_id"], handbook["text"]))
    rows = []
    for question in questions.itertuples(index=False):
        gold = question.gold_passage_id
        shared = shared_content_words(question.question, texts.get(gold) if gold else None)
        rows.append({"question_id": question.question_id, "gold_passage_id": gold,
                     "shared_content_words": ", ".join(shared) if shared else "none"})
    frame = pd.DataFrame(rows)
    frame["gold_passage_id"] = pd.Series([r["gold_passage_id"] for r in rows], dtype=object)
    return frame
