"""Tf-idf retrieval fitted on the handbook, ranking, and gold-passage labels.

Introduced in lesson 1, "Retrieve candidate passages".

The weights follow the lesson exactly: raw term counts times ``ln(N / df)``, with the
idf fitted once on the handbook and reused for every question; scores are cosine
similarities in [0, 1]; a passage scoring 0 is never retrieved; ties go to the smaller
passage ID. (scikit-learn's own TfidfVectorizer adds 1 to every idf, which changes the
scores.)

How the weights are stored. scikit-learn's CountVectorizer counts the terms of every
passage once, at fit. The weighted, unit-length passage vectors are then kept term-major,
as an inverted index: row ``t`` of ``term_matrix`` lists the passages that contain term
``t``, with their weights (the postings of ``t``). One question is scored by adding up
the postings of its own few terms, so its cost follows the postings it touches rather
than the size of the whole matrix; many questions at once are one sparse product of their
(questions x terms) matrix with the index. ``benchmarks/bench_tfidf.py`` measures this on
100,000 synthetic passages beside scikit-learn and bm25s.
"""
from __future__ import annotations

import functools
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import scipy.sparse as sp
from sklearn.feature_extraction.text import CountVectorizer

from .text import content_tokens, shared_content_words

RANK_COLUMNS = ["question_id", "passage_id", "rank", "score"]

#: Scores are rounded to this many decimals before ordering, so that two passages whose
#: scores differ only by floating-point summation order count as tied.
TIE_DECIMALS = 12

# The dtype pandas gives a column of text (what ``astype("str")`` makes); the ID columns
# of a ranking have it.
_TEXT = pd.api.types.pandas_dtype("str")

# With at least this many scores in a row, the top k are found without partitioning the
# whole row (see _select).
_PRUNE_FROM = 4096


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


def _select(values: np.ndarray, tie_keys_of, k: int | None, min_score: float) -> np.ndarray:
    """Positions in ``values`` of the top ``k`` scores strictly above ``min_score``.

    The order is :func:`_top`'s: rounded score descending, then tie key ascending;
    ``tie_keys_of(positions)`` gives the tie keys of some positions. A long row is first
    cut into blocks: the k-th largest block maximum is reached by at least k values (one
    in each of those blocks), so it is at most the k-th largest value, and only blocks
    whose maximum reaches it (less a margin wider than the rounding) can hold a top
    score. The result is exactly that of :func:`_top` over every score above
    ``min_score``, found without partitioning the whole row.
    """
    n = len(values)
    if k is not None and n >= max(_PRUNE_FROM, 64 * k):
        size = max(64, n // (32 * k))
        whole = n // size * size
        maxima = values[:whole].reshape(-1, size).max(axis=1)
        if whole < n:
            maxima = np.append(maxima, values[whole:].max())
        if not np.isnan(maxima).any():  # a NaN would hide its block's other values
            bound = np.partition(maxima, len(maxima) - k)[len(maxima) - k]
            threshold = bound - 1e-11 * (1.0 + abs(bound))
            hot = np.flatnonzero(maxima >= threshold)
            if threshold > min_score and len(hot) <= len(maxima) // 4:
                candidates = np.concatenate([
                    np.flatnonzero(values[b * size:(b + 1) * size] >= threshold) + b * size
                    for b in hot.tolist()])
                return candidates[_top(values[candidates], tie_keys_of(candidates), k)]
    candidates = np.flatnonzero(values > min_score)
    return candidates[_top(values[candidates], tie_keys_of(candidates), k)]


def _check_k(k: int | None) -> None:
    if k is not None and (isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1):
        raise ValueError(f"k must be a positive whole number or None (every match), got {k!r}")


def _ranking_frame(question_ids: Sequence, hits: list[tuple[np.ndarray, np.ndarray]],
                   passage_ids: np.ndarray) -> pd.DataFrame:
    """One ranking table from each question's (passage positions, scores), best first.

    Built once for all questions, column by column: question_id and passage_id as text,
    rank (1-based) as int64, score as float64.
    """
    counts = np.fromiter((len(columns) for columns, _ in hits), dtype=np.int64,
                         count=len(hits))
    total = int(counts.sum())
    if total:
        columns = np.concatenate([columns for columns, _ in hits])
        scores = np.concatenate([values for _, values in hits]).astype(np.float64)
    else:
        columns, scores = np.zeros(0, dtype=np.int64), np.zeros(0)
    starts = np.cumsum(counts) - counts
    question_column = np.repeat(np.asarray(question_ids, dtype=object), counts)
    return pd.DataFrame(
        {
            "question_id": pd.array(question_column, dtype=_TEXT),
            "passage_id": pd.array(passage_ids[columns], dtype=_TEXT),
            "rank": np.arange(1, total + 1, dtype=np.int64) - np.repeat(starts, counts),
            "score": scores,
        },
        index=pd.RangeIndex(total),
        copy=False,
    )


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
    _check_k(k)
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
    hits = []
    for row in range(len(question_ids)):
        if sparse:
            start, end = scores.indptr[row], scores.indptr[row + 1]
            columns = scores.indices[start:end]
            values = scores.data[start:end]
            chosen = _select(values, lambda at, c=columns: id_order[c[at]], k, min_score)
            hits.append((columns[chosen], values[chosen]))
        else:
            values = scores[row]
            chosen = _select(values, id_order.__getitem__, k, min_score)
            hits.append((chosen, values[chosen]))
    return _ranking_frame(question_ids, hits, ids)


def _count_vectorizer(stop_words: Collection[str] | None = None) -> CountVectorizer:
    # The analyzer is the lesson's tokenizer without stop words; counts keep repeats.
    analyzer = (content_tokens if stop_words is None
                else functools.partial(content_tokens, stop_words=frozenset(stop_words)))
    return CountVectorizer(analyzer=analyzer, lowercase=False, dtype=np.float64)


def _check_passages(passages: pd.DataFrame, id_column: str, text_column: str) -> None:
    for column in (id_column, text_column):
        if column not in passages.columns:
            raise KeyError(f"the passage table has no column {column!r}")
    if passages.empty:
        raise ValueError("cannot fit a retriever on an empty passage table")
    if passages[id_column].duplicated().any():
        duplicate = passages.loc[passages[id_column].duplicated(), id_column].iloc[0]
        raise ValueError(f"passage IDs must be unique; {duplicate!r} repeats")
    not_text = ~passages[text_column].map(lambda text: isinstance(text, str))
    if not_text.any():
        row = int(np.flatnonzero(not_text.to_numpy())[0])
        raise ValueError(
            f"passage {passages[id_column].iloc[row]!r} (row {row + 1}, column "
            f"{text_column!r}) has no text: {passages[text_column].iloc[row]!r}"
        )


def _question_columns(questions: pd.DataFrame, id_column: str,
                      text_column: str) -> tuple[list, list[str]]:
    for column in (id_column, text_column):
        if column not in questions.columns:
            raise KeyError(f"the question table has no column {column!r}")
    return questions[id_column].tolist(), questions[text_column].tolist()


@dataclass(frozen=True, eq=False, repr=False)
class TfidfRetriever:
    """The lesson's tf-idf retriever; build it with :meth:`fit`."""

    passage_ids: tuple[str, ...]
    vectorizer: CountVectorizer  # fitted; its vocabulary_ maps each term to its row
    idf: np.ndarray  # ln(N / df) of each term, in term order
    document_frequency: np.ndarray  # passages containing each term
    # The inverted index, (terms x passages): row t holds the postings of term t, the
    # passages that contain it with their weights in unit-length passage vectors. Its
    # transpose ``term_matrix.T`` is the passage-major view, without a copy.
    term_matrix: sp.csr_matrix
    id_order: np.ndarray  # tie-break key of each passage
    passage_array: np.ndarray = field(repr=False)  # passage_ids as an object array

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
        vectorizer = _count_vectorizer(stop_words)
        try:
            counts = sp.csr_matrix(vectorizer.fit_transform(passages[text_column].tolist()))
        except ValueError as error:
            if "empty vocabulary" not in str(error):
                raise
            raise ValueError(
                f"no passage in column {text_column!r} has a content word (every token is "
                "a stop word or punctuation), so there is nothing to index"
            ) from None
        n_passages, n_terms = counts.shape
        document_frequency = np.bincount(counts.indices, minlength=n_terms)
        idf = np.log(n_passages / document_frequency)
        # Weigh the counts in place, then scale each passage's row to unit length.
        lengths = np.diff(counts.indptr)
        counts.data *= idf[counts.indices]
        squares = np.zeros(n_passages)
        filled = lengths > 0
        squares[filled] = np.add.reduceat(counts.data * counts.data, counts.indptr[:-1][filled])
        norms = np.sqrt(squares)
        scale = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
        counts.data *= np.repeat(scale, lengths)
        # A term found in every passage weighs 0 everywhere: its postings would add nothing.
        counts.eliminate_zeros()
        term_matrix = counts.T.tocsr()
        del counts
        ids = tuple(str(pid) for pid in passages[id_column])
        return cls(
            passage_ids=ids,
            vectorizer=vectorizer,
            idf=idf,
            document_frequency=document_frequency,
            term_matrix=term_matrix,
            id_order=passage_id_order(ids),
            passage_array=np.asarray(ids, dtype=object),
        )

    def __repr__(self) -> str:
        return (f"TfidfRetriever({len(self.passage_ids):,} passages, {len(self.idf):,} terms, "
                f"{self.term_matrix.nnz:,} postings)")

    @property
    def index_nbytes(self) -> int:
        """Bytes held by the inverted index (its weights, passage positions and offsets)."""
        matrix = self.term_matrix
        return matrix.data.nbytes + matrix.indices.nbytes + matrix.indptr.nbytes

    @property
    def vocabulary(self) -> pd.DataFrame:
        """Terms with their document frequency and idf, sorted by term."""
        return pd.DataFrame(
            {"term": self.vectorizer.get_feature_names_out(),
             "document_frequency": self.document_frequency.astype(int), "idf": self.idf}
        ).sort_values("term", ignore_index=True)

    def _question_vector(self, text: str, where: str) -> tuple[np.ndarray, np.ndarray]:
        """Term rows of one question, ascending, and its unit-length tf-idf weights.

        Tokenises with the analyzer the fit used (the lesson's tokenizer and the fit's stop
        words), then looks the tokens up in the fitted vocabulary; unknown terms are dropped.
        """
        if not isinstance(text, str):
            raise TypeError(f"{where} is not text: {text!r}")
        lookup = self.vectorizer.vocabulary_.get
        counts: dict[int, int] = {}
        for token in self.vectorizer.analyzer(text):
            term = lookup(token)
            if term is not None:
                counts[term] = counts.get(term, 0) + 1
        terms = np.fromiter(sorted(counts), dtype=np.int64, count=len(counts))
        weights = np.fromiter((counts[t] for t in terms.tolist()), dtype=np.float64,
                              count=len(terms)) * self.idf[terms]
        norm = np.sqrt(weights @ weights)
        if norm == 0:  # no known term, or only terms found in every passage
            return terms[:0], weights[:0]
        return terms, weights * (1.0 / norm)

    def _scores_of(self, terms: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """Cosine of one question with every passage: the sum of its terms' postings."""
        index = self.term_matrix
        starts, ends = index.indptr[terms], index.indptr[terms + 1]
        passages = np.concatenate([index.indices[s:e] for s, e in zip(starts, ends)],
                                  dtype=np.intp)
        contributions = np.concatenate(
            [index.data[s:e] * w for s, e, w in zip(starts, ends, weights)])
        return np.bincount(passages, weights=contributions, minlength=len(self.passage_ids))

    def query_matrix(self, queries: Sequence[str]) -> sp.csr_matrix:
        """Unit-length tf-idf vectors of the queries, (queries x terms); unknown terms
        are dropped."""
        vectors = [self._question_vector(text, f"query {row + 1}")
                   for row, text in enumerate(queries)]
        indptr = np.zeros(len(vectors) + 1, dtype=np.int64)
        np.cumsum([len(terms) for terms, _ in vectors], out=indptr[1:])
        terms = np.concatenate([terms for terms, _ in vectors] or [np.zeros(0, np.int64)])
        weights = np.concatenate([weights for _, weights in vectors] or [np.zeros(0)])
        return sp.csr_matrix((weights, terms, indptr), shape=(len(vectors), len(self.idf)))

    def score_sparse(self, queries: Sequence[str]) -> sp.csr_matrix:
        """Cosine scores as a sparse (queries x passages) matrix; zeros are not stored.

        All the queries go through one sparse product with the inverted index.
        """
        scores = sp.csr_matrix(self.query_matrix(queries) @ self.term_matrix)
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
        """Top ``k`` passages with a positive score for each question.

        Returns question_id, passage_id, rank (1-based) and score, question by question
        in the table's order, best passage first.
        """
        _check_k(k)
        question_ids, texts = _question_columns(questions, id_column, text_column)
        return _ranking_frame(question_ids, self.hits(question_ids, texts, k), self.passage_array)

    def hits(self, question_ids: Sequence, texts: Sequence[str], k: int | None = 3
             ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each question's chosen passage positions, best first, and their scores.

        What :meth:`rank` puts into its table, without the table: one question at a time,
        each scored through the inverted index and cut to its top ``k`` positive scores.
        """
        found = []
        for question_id, text in zip(question_ids, texts):
            terms, weights = self._question_vector(text, f"question {question_id!r}")
            if len(terms) == 0:
                found.append((terms, weights))
                continue
            scores = self._scores_of(terms, weights)
            chosen = _select(scores, self.id_order.__getitem__, k, 0.0)
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
