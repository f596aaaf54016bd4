"""Tf-idf retrieval fitted on the handbook, ranking, and gold-passage labels.

Introduced in lesson 1, "Retrieve candidate passages".

The weights follow the lesson exactly: raw term counts times ``ln(N / df)``, with the
idf fitted once on the handbook and reused for every question; scores are cosine
similarities in [0, 1]; a passage scoring 0 is never retrieved; ties go to the smaller
passage ID. (scikit-learn's own TfidfVectorizer adds 1 to every idf, which changes the
scores.)

How the weights are stored. scikit-learn's CountVectorizer counts the terms of every
passage once, at fit, and those of the questions later with the same vocabulary; one
function turns counts into unit-length tf-idf vectors on both sides. The passage
vectors are kept term-major, as an inverted index: row ``t`` of ``term_matrix`` lists
the passages that contain term ``t``, with their weights (the postings of ``t``). One
question is scored by adding up the postings of its own few terms, so its cost follows
the postings it touches rather than the size of the whole matrix; many questions at
once are one sparse product of their (questions x terms) matrix with the index.
``benchmarks/bench_tfidf.py`` measures this on 100,000 synthetic passages beside
scikit-learn and bm25s.
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
    order = np.empty(len(passage_ids), dtype=np.int64)
    order[np.argsort(np.asarray(passage_ids, dtype=str), kind="stable")] = np.arange(len(order))
    return order


def _top(scores: np.ndarray, tie_keys_of, k: int | None, min_score: float = 0.0) -> np.ndarray:
    """Positions of the top ``k`` scores above ``min_score``, best first.

    Order: the score rounded to :data:`TIE_DECIMALS` decimals, descending, then the tie
    key, ascending; ``tie_keys_of(positions)`` gives the keys of some positions (their
    passages' places in passage-ID order). ``k=None`` keeps every score above the floor.
    """
    floor = min_score
    if k is not None and len(scores) > 64 * k:
        # A long row is not sorted whole. Cut into blocks, its k-th largest block maximum
        # is at most its k-th largest score (those k maxima are k of its scores), so only
        # scores reaching that bound, less a margin wider than the rounding, can rank.
        starts = np.arange(0, len(scores), max(64, len(scores) // (32 * k)))
        bound = np.partition(np.fmax.reduceat(scores, starts), -k)[-k]
        floor = max(min_score, bound - 1e-11 * (1.0 + abs(bound)))  # NaN bound: min_score
    candidates = np.flatnonzero(scores > floor)
    rounded = np.round(scores[candidates], TIE_DECIMALS)
    if k is not None and len(candidates) > k:
        reach = rounded >= np.partition(rounded, -k)[-k]  # the k-th score's ties stay
        candidates, rounded = candidates[reach], rounded[reach]
    return candidates[np.lexsort((tie_keys_of(candidates), -rounded))][:k]


def _check_k(k: int | None) -> None:
    if k is not None and (isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1):
        raise ValueError(f"k must be a positive whole number or None (every match), got {k!r}")


def _check_text(text, where: str) -> None:
    if not isinstance(text, str):
        raise TypeError(f"{where} is not text: {text!r}")


def _check_columns(table: pd.DataFrame, what: str, *columns: str) -> None:
    for column in columns:
        if column not in table.columns:
            raise KeyError(f"the {what} table has no column {column!r}")


def _rows(matrix: sp.csr_matrix):
    """Each row of a sparse matrix as (column positions, values)."""
    for start, end in zip(matrix.indptr[:-1].tolist(), matrix.indptr[1:].tolist()):
        yield matrix.indices[start:end], matrix.data[start:end]


def _ranking_frame(question_ids: Sequence, hits: list[tuple[np.ndarray, np.ndarray]],
                   passage_ids: np.ndarray) -> pd.DataFrame:
    """One ranking table from each question's (passage positions, scores), best first:
    question_id and passage_id as text, rank (1-based) as int64, score as float64."""
    counts = np.array([len(positions) for positions, _ in hits], dtype=np.int64)
    positions = np.concatenate([p for p, _ in hits] + [np.zeros(0, dtype=np.int64)])
    scores = np.concatenate([s for _, s in hits] + [np.zeros(0)])
    first_row = np.repeat(np.cumsum(counts) - counts, counts)
    return pd.DataFrame({
        "question_id": pd.array(np.repeat(np.asarray(question_ids, dtype=object), counts),
                                dtype="str"),
        "passage_id": pd.array(passage_ids[positions], dtype="str"),
        "rank": np.arange(1, len(positions) + 1, dtype=np.int64) - first_row,
        "score": scores.astype(np.float64),
    })


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
    dense or sparse (a sparse matrix ranks only the scores it stores). ``id_order``
    (from :func:`passage_id_order`) may be passed to avoid sorting the IDs again on
    every call. Returns question_id, passage_id, rank (1-based), score.
    """
    _check_k(k)
    id_order = passage_id_order(passage_ids) if id_order is None else id_order
    sparse = sp.issparse(scores)
    scores = sp.csr_matrix(scores) if sparse else np.asarray(scores, dtype=float)
    if scores.shape != (len(question_ids), len(passage_ids)):
        raise ValueError(f"score matrix has shape {scores.shape}, expected "
                         f"({len(question_ids)} questions, {len(passage_ids)} passages)")
    # Each question's row as (passage positions, scores); a sparse row holds what it stores.
    rows = _rows(scores) if sparse else ((np.arange(len(passage_ids)), row) for row in scores)
    hits = []
    for columns, values in rows:
        chosen = _top(values, lambda at: id_order[columns[at]], k, min_score)
        hits.append((columns[chosen], values[chosen]))
    return _ranking_frame(question_ids, hits, np.asarray(passage_ids, dtype=object))


def _check_passages(passages: pd.DataFrame, id_column: str, text_column: str) -> None:
    _check_columns(passages, "passage", id_column, text_column)
    if passages.empty:
        raise ValueError("cannot fit a retriever on an empty passage table")
    repeated = passages[id_column].duplicated()
    if repeated.any():
        duplicate = passages.loc[repeated, id_column].iloc[0]
        raise ValueError(f"passage IDs must be unique; {duplicate!r} repeats")
    for row, (pid, text) in enumerate(zip(passages[id_column], passages[text_column]), 1):
        if not isinstance(text, str):
            raise ValueError(f"passage {pid!r} (row {row}, column {text_column!r}) has no "
                             f"text: {text!r}")


def unit_tfidf(counts: sp.csr_matrix, idf: np.ndarray) -> sp.csr_matrix:
    """Raw term counts, one row per text, turned in place into unit-length tf-idf vectors.

    Each count is multiplied by its term's idf; a term found in every passage weighs 0
    and is dropped; then each row is divided by its length (a row left empty stays empty).
    """
    counts.data *= idf[counts.indices]
    counts.eliminate_zeros()
    row_of = np.repeat(np.arange(counts.shape[0]), np.diff(counts.indptr))
    lengths = np.sqrt(np.bincount(row_of, weights=counts.data ** 2, minlength=counts.shape[0]))
    counts.data /= lengths[row_of]
    return counts


@dataclass(frozen=True, eq=False, repr=False)
class TfidfRetriever:
    """The lesson's tf-idf retriever; build it with :meth:`fit`."""

    passage_ids: tuple[str, ...]
    vectorizer: CountVectorizer  # fitted: the tokenizer, and each term's row in vocabulary_
    idf: np.ndarray  # ln(N / df) of each term, in term order
    document_frequency: np.ndarray  # passages containing each term
    # The inverted index, (terms x passages): row t holds the postings of term t, the
    # passages that contain it with their weights in unit-length passage vectors.
    term_matrix: sp.csr_matrix
    id_order: np.ndarray  # tie-break key of each passage
    passage_array: np.ndarray  # passage_ids as an object array

    @classmethod
    def fit(
        cls, passages: pd.DataFrame, id_column: str = "passage_id", text_column: str = "text",
        stop_words: Collection[str] | None = None,
    ) -> "TfidfRetriever":
        """Fit the idf on ``passages`` once: ``idf = ln(N / df)``.

        ``stop_words`` replaces the lesson's list (:data:`helpers.text.STOP_WORDS`) for
        passages and queries alike; lesson 1's exercises use it to keep *at*.
        """
        _check_passages(passages, id_column, text_column)
        # The analyzer is the lesson's tokenizer without stop words; counts keep repeats.
        analyzer = (content_tokens if stop_words is None
                    else functools.partial(content_tokens, stop_words=frozenset(stop_words)))
        vectorizer = CountVectorizer(analyzer=analyzer, lowercase=False, dtype=np.float64)
        try:
            counts = vectorizer.fit_transform(passages[text_column].tolist())
        except ValueError as error:
            if "empty vocabulary" not in str(error):
                raise
            raise ValueError(
                f"no passage in column {text_column!r} has a content word (every token is "
                "a stop word or punctuation), so there is nothing to index") from None
        document_frequency = np.bincount(counts.indices, minlength=counts.shape[1])
        idf = np.log(counts.shape[0] / document_frequency)
        # The unit-length passage vectors, stored term-major: the inverted index.
        term_matrix = unit_tfidf(counts, idf).T.tocsr()
        ids = tuple(str(pid) for pid in passages[id_column])
        return cls(ids, vectorizer, idf, document_frequency, term_matrix,
                   passage_id_order(ids), np.asarray(ids, dtype=object))

    def __repr__(self) -> str:
        return (f"TfidfRetriever({len(self.passage_ids):,} passages, {len(self.idf):,} terms, "
                f"{self.term_matrix.nnz:,} postings)")

    @property
    def vocabulary(self) -> pd.DataFrame:
        """Terms with their document frequency and idf, sorted by term (the order in which
        CountVectorizer numbers them)."""
        return pd.DataFrame({"term": self.vectorizer.get_feature_names_out(),
                             "document_frequency": self.document_frequency.astype(int),
                             "idf": self.idf})

    def query_matrix(self, queries: Sequence[str]) -> sp.csr_matrix:
        """Unit-length tf-idf vectors of the queries, (queries x terms), with the idf of
        the fit; terms the passages never use are dropped."""
        queries = list(queries)
        for row, text in enumerate(queries):
            _check_text(text, f"query {row + 1}")
        return unit_tfidf(self.vectorizer.transform(queries), self.idf)

    def score_sparse(self, queries: Sequence[str]) -> sp.csr_matrix:
        """Cosine scores as a sparse (queries x passages) matrix; zeros are not stored.

        All the queries go through one sparse product with the inverted index.
        """
        scores = (self.query_matrix(queries) @ self.term_matrix).tocsr()
        scores.eliminate_zeros()
        return scores

    def score(self, queries: Sequence[str]) -> np.ndarray:
        """Cosine scores as a dense (queries x passages) array in ``passage_ids`` order."""
        return self.score_sparse(queries).toarray()

    def cosines(self, terms: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """One question's cosine with every passage, from its unit-length tf-idf vector
        (``terms`` and their ``weights``): the postings of its terms, each times the
        question's weight for the term, added up passage by passage."""
        index = self.term_matrix
        postings = [slice(index.indptr[t], index.indptr[t + 1]) for t in terms.tolist()]
        if not postings:  # no term of the question is in the index
            return np.zeros(len(self.passage_ids))
        return np.bincount(
            np.concatenate([index.indices[p] for p in postings]),
            weights=np.concatenate([index.data[p] * w for p, w in zip(postings, weights)]),
            minlength=len(self.passage_ids))

    def rank(
        self,
        questions: pd.DataFrame,
        k: int | None = 3,
        id_column: str = "question_id",
        text_column: str = "question",
    ) -> pd.DataFrame:
        """Top ``k`` passages with a positive score for each question.

        Returns question_id, passage_id, rank (1-based) and score, question by question
        in the table's order, best passage first.
        """
        _check_k(k)
        _check_columns(questions, "question", id_column, text_column)
        question_ids = questions[id_column].tolist()
        hits = self.hits(question_ids, questions[text_column].tolist(), k)
        return _ranking_frame(question_ids, hits, self.passage_array)

    def hits(self, question_ids: Sequence, texts: Sequence[str], k: int | None = 3
             ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each question's top ``k`` passage positions with a positive score, best first,
        and their scores: what :meth:`rank` puts into its table.

        One question at a time, scored through the inverted index (:meth:`cosines`).
        """
        for question_id, text in zip(question_ids, texts):
            _check_text(text, f"question {question_id!r}")
        found = []
        for terms, weights in _rows(self.query_matrix(texts)):
            scores = self.cosines(terms, weights)
            chosen = _top(scores, self.id_order.__getitem__, k)
            found.append((chosen, scores[chosen]))
        return found


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
        hit = mine[mine["passage_id"] == gold]
        if gold is None or pd.isna(gold):
            label, rank, score = "not applicable", pd.NA, np.nan
        elif hit.empty:
            rank, score = pd.NA, 0.0
            label = "not retrieved (all scores 0)" if mine.empty else "not retrieved (score 0)"
        else:
            rank, score = int(hit["rank"].iloc[0]), float(hit["score"].iloc[0])
            label = f"rank {rank}" if rank <= k else f"rank {rank} (outside top {k})"
        records.append({"question_id": question.question_id, "gold_passage_id": gold,
                        "gold_rank": rank, "gold_score": score, "gold_retrieval_label": label})
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
