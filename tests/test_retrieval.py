"""The lesson's tf-idf retriever, ranking, gold labels and the overlap table.

The printed figures come from the reference render's tables "Content-word overlap between
each question and its gold passage" and "Tf-idf retrieval results with gold evidence
status". Scores and rankings are checked against a pure-Python computation of the
lesson's formula, on the handbook and on 5,000 synthetic passages.
"""
from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
from sklearn.metrics.pairwise import linear_kernel

from helpers.retrieval import (RANK_COLUMNS, TfidfRetriever, _top, format_candidates, gold_ranks,
                               overlap_table, rank_scores, recall_at_k)
from helpers.text import STOP_WORDS, content_tokens, tokenize

PRINTED_OVERLAP = {"Q1": ("H08", "stipend, training"), "Q2": ("H14", "applications, close"),
                   "Q3": ("H13", "none"), "Q4": ("H12", "certificate, data, experience, need, support"),
                   "Q5": (None, "none"), "Q6": ("H11", "forklift")}

PRINTED_CANDIDATES = {"Q1": "H08 (#1, 0.356)", "Q2": "H14 (#1, 0.572)", "Q3": "no lexical match",
                      "Q4": "H12 (#1, 0.588); H03 (#2, 0.108); H15 (#3, 0.098)",
                      "Q5": "H03 (#1, 0.311); H01 (#2, 0.297)",
                      "Q6": "H10 (#1, 0.261); H11 (#2, 0.140); H03 (#3, 0.089)"}

# The gold evidence label, and recall@3.
PRINTED_GOLD = {"Q1": ("rank 1", True), "Q2": ("rank 1", True), "Q3": ("not retrieved (all scores 0)", False),
                "Q4": ("rank 1", True), "Q5": ("not applicable", pd.NA), "Q6": ("rank 2", True)}

TEXT = pd.Series(["x"]).astype("str").dtype
RANK_DTYPES = {"question_id": TEXT, "passage_id": TEXT, "rank": np.dtype("int64"),
               "score": np.dtype("float64")}


def _table(*questions: str, gold: list | None = None) -> pd.DataFrame:
    table = pd.DataFrame({"question_id": [f"T{i}" for i in range(len(questions))],
                          "question": list(questions)})
    return table if gold is None else table.assign(gold_passage_id=gold)


# --- the printed tables ----------------------------------------------------------


def test_overlap_table_matches_the_source(questions, handbook):
    table = overlap_table(questions, handbook)
    assert table["question_id"].tolist() == list(PRINTED_OVERLAP)
    assert {row.question_id: (row.gold_passage_id, row.shared_content_words)
            for row in table.itertuples(index=False)} == PRINTED_OVERLAP


def test_retrieved_candidates_match_the_source(retrieved, questions):
    shown = format_candidates(retrieved, questions["question_id"].tolist())
    assert shown.to_dict() == PRINTED_CANDIDATES


def test_gold_labels_and_recall_at_3_match_the_source(gold):
    recall = recall_at_k(gold, 3).tolist()
    assert dict(zip(gold["question_id"], zip(gold["gold_retrieval_label"], recall))) == \
        PRINTED_GOLD
    by_question = gold.set_index("question_id")
    assert by_question.at["Q3", "gold_score"] == 0.0 and pd.isna(by_question.at["Q3", "gold_rank"])
    assert (by_question.at["Q6", "gold_rank"], round(by_question.at["Q6", "gold_score"], 3)) == \
        (2, 0.140)
    # The Q6 gold passage ranks second: recalled within 2, not within 1.
    assert [recall_at_k(gold, k).tolist()[5] for k in (2, 1)] == [True, False]


@pytest.mark.parametrize(("question", "gold_id", "label"), [
    # Other passages match, H13 shares no word with the question.
    ("When does the Saturday workshop start?", "H13", "not retrieved (score 0)"),
    # Seven passages name the certificate; H09 is not among the first three.
    ("Data Support Certificate", "H09", "rank {} (outside top 3)"),
])
def test_gold_labels_beyond_the_printed_ones(retriever, question, gold_id, label):
    questions = _table(question, gold=[gold_id])
    ranked_all = retriever.rank(questions, k=None)
    assert not ranked_all.empty
    found = ranked_all.set_index("passage_id")
    rank = found.at[gold_id, "rank"] if gold_id in found.index else None
    assert rank is None or rank > 3
    labelled = gold_ranks(ranked_all, questions)
    assert labelled["gold_retrieval_label"].tolist() == [label.format(rank)]
    assert labelled["gold_score"].item() == (0.0 if rank is None else found.at[gold_id, "score"])
    assert recall_at_k(labelled, 3).tolist() == [False]


# --- idf and scores against independent computations ----------------------------


@pytest.mark.parametrize(("term", "passages"), [
    # Counted by reading the handbook: which passages contain the term.
    ("stipend", {"H08"}),
    ("riverton", {"H01", "H03"}),  # H01 uses it twice; df counts passages.
    ("forklift", {"H03", "H04", "H09", "H11"}),
    ("data", {"H03", "H06", "H08", "H09", "H12", "H15"}),
    ("certificate", {"H03", "H06", "H08", "H09", "H10", "H12", "H15"}),
    ("dsc-104", {"H09"}),
    ("104", {"H13"}),  # "DSC-104" in H09 is one token, so it does not count.
])
def test_idf_is_ln_n_over_df_by_hand_count(retriever, handbook, term, passages):
    found = {pid for pid, text in zip(handbook["passage_id"], handbook["text"]) if term in tokenize(text)}
    assert found == passages
    vocabulary = retriever.vocabulary.set_index("term")
    assert vocabulary.at[term, "document_frequency"] == len(passages)
    assert vocabulary.at[term, "idf"] == pytest.approx(math.log(15 / len(passages)), abs=1e-15)


def _brute_force_scores(passages: list[str], queries: list[str]) -> list[list[float]]:
    """The lesson's formula in pure Python: counts x ln(N/df), idf from the passages only,
    and the cosine of every query with every passage."""
    bags = [Counter(content_tokens(text)) for text in passages]
    df = Counter(term for bag in bags for term in bag)
    idf = {term: math.log(len(bags) / n) for term, n in df.items()}

    def unit(bag: Counter) -> dict[str, float]:
        vector = {t: c * idf[t] for t, c in bag.items() if t in idf}
        norm = math.sqrt(sum(w * w for w in vector.values()))
        return {t: w / norm for t, w in vector.items()} if norm else {}

    vectors = [unit(bag) for bag in bags]
    return [[sum(w * vector.get(t, 0.0) for t, w in query.items()) for vector in vectors]
            for query in (unit(Counter(content_tokens(text))) for text in queries)]


def test_scores_are_the_cosines_of_a_brute_force_computation(retriever, handbook, questions):
    queries = questions["question"].tolist() + handbook["text"].tolist() + ["stipend parking"]
    idf = retriever.idf.copy()
    scores = retriever.score(queries)
    assert scores.shape == (len(queries), 15)
    assert retriever.passage_ids == tuple(handbook["passage_id"])
    np.testing.assert_allclose(scores, _brute_force_scores(handbook["text"].tolist(), queries),
                               rtol=0, atol=1e-12)
    assert scores.min() >= 0.0 and scores.max() <= 1.0 + 1e-12
    np.testing.assert_allclose(np.diag(scores[6:21]), 1.0, atol=1e-12)  # a passage vs itself
    np.testing.assert_array_equal(retriever.idf, idf)  # scoring does not refit the idf


def test_sklearn_tfidf_differs_from_the_lesson_weights(retriever, handbook, questions):
    """Why the retriever is custom rather than scikit-learn's TfidfVectorizer.

    Even with ``smooth_idf=False`` scikit-learn uses ``idf = ln(N/df) + 1``, so a term
    found in every passage keeps weight 1 instead of 0 and every score moves: the
    printed figures (Q1 H08 0.356 ...) come only from ``ln(N/df)``. On this handbook
    the difference is large enough to swap the top two passages for Q5.
    """
    vectorizer = TfidfVectorizer(analyzer=content_tokens, lowercase=False, smooth_idf=False)
    passages = vectorizer.fit_transform(handbook["text"])
    theirs = linear_kernel(vectorizer.transform(questions["question"]), passages)
    ours = retriever.score(questions["question"].tolist())
    ours_idf = retriever.vocabulary.set_index("term").loc[vectorizer.get_feature_names_out(), "idf"]
    np.testing.assert_allclose(vectorizer.idf_, ours_idf + 1.0, atol=1e-12)
    h08 = retriever.passage_ids.index("H08")
    assert round(ours[0, h08], 3) == 0.356 and round(theirs[0, h08], 3) != 0.356  # Q1
    tops = [retriever.passage_ids[int(np.argmax(scores[4]))] for scores in (ours, theirs)]
    assert tops == ["H03", "H01"]  # Q5


# --- ranking rules ---------------------------------------------------------------


@pytest.mark.parametrize(("scores", "k", "min_score", "expected"), [
    # Ties go to the smaller passage ID, whatever the order of the columns.
    ([0.5, 0.9, 0.5, 0.5, 0.0], None, 0.0, ["H02", "H01", "H09", "H10"]),
    ([0.5, 0.9, 0.5, 0.5, 0.0], 2, 0.0, ["H02", "H01"]),  # k cuts through the tie
    ([0.2, 0.1, 0.3, 0.2, 0.05], None, 0.2, ["H10"]),  # the floor is strict
    ([0.0, -0.5, 0.0, 0.1, -0.5], None, -np.inf, ["H01", "H09", "H10", "H02", "H03"]),
    # Scores equal once rounded to 12 decimals are tied.
    ([0.5 + 1e-14, 0.5, 0.0, 0.0, 0.0], None, 0.0, ["H02", "H09"]),
])
def test_rank_scores_rules(scores, k, min_score, expected):
    matrices = [np.array([scores])] + ([sp.csr_matrix([scores])] if min_score >= 0 else [])
    for matrix in matrices:
        ranked = rank_scores(matrix, ["H09", "H02", "H10", "H01", "H03"], ["Q"], k=k, min_score=min_score)
        assert ranked["passage_id"].tolist() == expected
        assert ranked["rank"].tolist() == list(range(1, len(expected) + 1))


def _rule(values, keys, k, min_score):
    """The ranking rule with no shortcut: every score above min_score, sorted."""
    candidates = np.flatnonzero(values > min_score)
    return candidates[np.lexsort((keys[candidates], -np.round(values[candidates], 12)))][:k]


def _long_row(kind: int, rng) -> np.ndarray:
    n = int(rng.choice([4100, 9000, 20000]))
    if kind == 0:  # few distinct values: ties everywhere
        return rng.choice([0.0, 0.1, 0.25, 0.5, 0.9], size=n)
    if kind == 1:  # near-ties closer than the rounding, on both sides of it
        return np.where(rng.random(n) < 0.5, 0.0, 0.5 + rng.integers(-3, 4, size=n) * 3e-13)
    if kind == 2:  # mostly zero, a few positives in one block
        return np.concatenate([np.zeros(10), rng.random(5), np.zeros(n - 15)])
    if kind == 3:  # dense cosines, negatives included
        return rng.normal(size=n)
    values = rng.random(20000) * 0.4
    if kind == 4:  # a NaN hides nothing else
        values[rng.integers(0, 20000, size=3)] = np.nan
        return values
    # The three largest block maxima, and a score below them, equal once rounded.
    values[[1000, 5000, 9000]] = 0.9 + 4e-13
    values[15000] = 0.9 - 4e-13
    return values


@pytest.mark.parametrize("seed", range(12))
def test_top_k_selection_on_long_rows_follows_the_rule(seed):
    """The shortcut through block maxima must never change what the rule selects."""
    rng = np.random.default_rng(seed)
    values = _long_row(seed % 6, rng)
    keys = rng.permutation(len(values))
    if seed % 6 == 5:
        keys = np.arange(len(values))[::-1].copy()  # position 15000 has the smallest key
        assert _rule(values, keys, 3, 0.0).tolist() == [15000, 9000, 5000]
    for k in (1, 3, 7, 60, None):
        for min_score in (0.0, -np.inf, 0.3):
            np.testing.assert_array_equal(_top(values, keys.__getitem__, k, min_score),
                                          _rule(values, keys, k, min_score),
                                          err_msg=f"k={k} min_score={min_score}")


# --- the inverted index -------------------------------------------------------------


def test_vocabulary_is_the_one_count_vectorizer_builds(retriever, handbook):
    """Questions are looked up in the fitted vocabulary; it must be CountVectorizer's."""
    counter = CountVectorizer(analyzer=content_tokens, lowercase=False)
    counts = counter.fit_transform(handbook["text"])
    assert retriever.vocabulary["term"].tolist() == counter.get_feature_names_out().tolist()
    assert retriever.vocabulary["document_frequency"].tolist() == \
        np.bincount(counts.indices, minlength=counts.shape[1]).tolist()
    assert set(retriever.vocabulary["term"]).isdisjoint(STOP_WORDS)


def test_the_index_is_term_major(retriever, handbook):
    """Row t of term_matrix lists the passages that contain t, with their weights."""
    index = retriever.term_matrix
    assert index.shape == (len(retriever.idf), len(handbook))
    terms = retriever.vocabulary["term"].tolist()
    postings = {term: sorted(retriever.passage_ids[i] for i in index[terms.index(term)].indices)
                for term in ("stipend", "forklift")}
    assert postings == {"stipend": ["H08"], "forklift": ["H03", "H04", "H09", "H11"]}
    # The transpose holds the unit-length passage vectors, and no zero is stored.
    norms = np.sqrt(np.asarray(index.multiply(index).sum(axis=0)).ravel())
    np.testing.assert_allclose(norms, 1.0, atol=1e-12)
    assert (index.data != 0).all()
    assert repr(retriever) == \
        f"TfidfRetriever(15 passages, {len(terms)} terms, {index.nnz} postings)"


def test_a_term_in_every_passage_weighs_nothing_and_is_not_stored():
    frame = pd.DataFrame({"passage_id": ["A", "B", "C"],
                          "text": ["course forklift", "course spreadsheet", "course"]})
    retriever = TfidfRetriever.fit(frame)
    assert retriever.vocabulary.set_index("term").at["course", "idf"] == 0.0
    assert retriever.term_matrix.nnz == 2  # forklift in A, spreadsheet in B
    assert retriever.rank(_table("course"), k=None).empty  # C matches only a weightless term


# --- a larger handbook, against the pure-Python formula ---------------------------

_SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "do", "gu"]


def _synthetic_handbook(n_passages: int, n_questions: int, seed: int):
    """Zipf-distributed made-up words, with what a real handbook holds too.

    Stop words, capitals, hyphenated codes, numbers, repeated words, a word found in
    every passage, passages with no content word, and identical passages under
    shuffled IDs (so that equal scores must be ordered by passage ID).
    """
    rng = np.random.default_rng(seed)
    syllables = np.array(_SYLLABLES)
    words = sorted({"".join(syllables[rng.integers(0, len(syllables), size=n)])
                    for n in rng.integers(2, 4, size=1500).tolist()})
    words += [f"dsc-{n}" for n in range(100, 140)] + [str(n) for n in range(50)]
    weights = 1.0 / np.arange(1, len(words) + 1)
    weights /= weights.sum()
    lengths = rng.integers(4, 30, size=n_passages)
    drawn = np.array(words)[rng.choice(len(words), size=int(lengths.sum()), p=weights)]
    stops = np.array(sorted(STOP_WORDS))[rng.integers(0, len(STOP_WORDS), size=6 * n_passages)]
    texts = []
    for i, (end, length) in enumerate(zip(np.cumsum(lengths).tolist(), lengths.tolist())):
        chosen = drawn[end - length:end].tolist() + stops[6 * i:6 * i + i % 6].tolist()
        rng.shuffle(chosen)
        texts.append("Handbook " + " ".join(chosen).capitalize() + ".")
    for position in rng.choice(n_passages, size=20, replace=False).tolist():
        texts[position] = "The and of it? " + "Is it."
    sources = rng.choice(n_passages, size=60, replace=False).tolist()
    for source, targets in zip(sources, rng.choice(n_passages, size=(60, 3)).tolist()):
        for target in targets:
            texts[target] = texts[source]
    ids = [f"S{i:05d}" for i in rng.permutation(n_passages)]
    questions = []
    for i in range(n_questions):
        if i % 3 == 0:  # words of one passage, so that its duplicates tie at the top
            bag = content_tokens(texts[sources[i % len(sources)]])
            chosen = rng.choice(bag, size=min(len(bag), 5)).tolist() if bag else ["zzz"]
        else:
            chosen = np.array(words)[rng.choice(len(words), size=6, p=weights)].tolist()
        questions.append("What about " + " ".join(chosen).upper() + " here?")
    questions += ["", "Where is it?", "unheardof words only"]
    return pd.DataFrame({"passage_id": ids, "text": texts}), _table(*questions)


@pytest.fixture(scope="module")
def synthetic():
    passages, questions = _synthetic_handbook(5000, 30, seed=7)
    scores = _brute_force_scores(passages["text"].tolist(), questions["question"].tolist())
    return passages, questions, TfidfRetriever.fit(passages), scores


@pytest.mark.parametrize("k", [1, 3, 50, None])
def test_rank_matches_a_brute_force_ranking_on_a_larger_handbook(synthetic, k):
    """Every positive score, rounded score descending then passage ID, top k."""
    passages, questions, retriever, scores = synthetic
    expected = []
    for question_id, row in zip(questions["question_id"], scores):
        ranked = sorted((-round(s, 12), pid, s) for pid, s in zip(passages["passage_id"], row) if s > 0)[:k]
        expected += [(question_id, pid, rank, s) for rank, (_, pid, s) in enumerate(ranked, 1)]
    ranked = retriever.rank(questions, k=k)
    got = list(ranked.itertuples(index=False, name=None))
    assert [row[:3] for row in got] == [row[:3] for row in expected]
    np.testing.assert_allclose([row[3] for row in got], [row[3] for row in expected], rtol=0, atol=1e-12)
    # The duplicated passages do tie: some question's top 3 holds equal scores.
    if k == 3:
        assert (ranked.groupby("question_id")["score"].nunique() < 3).any()


def test_one_question_at_a_time_matches_the_batch_product(synthetic):
    """rank() adds up postings per question; score_sparse is one sparse product."""
    _, questions, retriever, _ = synthetic
    texts = questions["question"].tolist()
    together = retriever.rank(questions, k=3)
    one_by_one = pd.concat([retriever.rank(questions.iloc[[i]], k=3)
                            for i in range(len(questions))], ignore_index=True)
    pd.testing.assert_frame_equal(together, one_by_one)
    product = rank_scores(retriever.score_sparse(texts), retriever.passage_ids,
                          questions["question_id"].tolist(), k=3)
    assert product[RANK_COLUMNS[:3]].equals(together[RANK_COLUMNS[:3]])
    np.testing.assert_allclose(product["score"], together["score"], rtol=0, atol=1e-15)
    np.testing.assert_array_equal(retriever.score(texts), retriever.score_sparse(texts).toarray())
    # The query vectors are unit length, or empty when no term of the query is indexed.
    matrix = retriever.query_matrix(texts)
    assert matrix.shape == (len(questions), len(retriever.idf))
    norms = np.sqrt(np.asarray(matrix.multiply(matrix).sum(axis=1)).ravel())
    np.testing.assert_allclose(norms[:-3], 1.0, atol=1e-12)
    assert (norms[-3:] == 0).all()  # "", "Where is it?" and unknown words


# --- the ranking table and bad input ------------------------------------------------


def test_rankings_keep_their_columns_and_dtypes_even_when_empty(retriever, retrieved):
    # None of these has a content word that the handbook uses.
    no_match = _table("", "Where is it at?", "Is there a zeppelin?", "?!", "do you and I")
    assert retriever.score(no_match["question"].tolist()).sum() == 0.0
    frames = [retrieved, retriever.rank(no_match, k=None), retriever.rank(no_match.iloc[:0]),
              rank_scores(np.zeros((0, 2)), ["A", "B"], []), rank_scores(np.zeros((1, 2)), ["A", "B"], ["Q"])]
    for frame in frames:
        assert list(frame.columns) == RANK_COLUMNS
        assert frame.dtypes.to_dict() == RANK_DTYPES
        assert isinstance(frame.index, pd.RangeIndex)
    assert [len(frame) for frame in frames] == [10, 0, 0, 0, 0]


@pytest.mark.parametrize("k", [0, -1, 2.5, True, "3"])
def test_k_must_be_a_positive_whole_number(retriever, questions, k):
    with pytest.raises(ValueError, match="k must be a positive whole number"):
        retriever.rank(questions, k=k)
    with pytest.raises(ValueError, match="k must be a positive whole number"):
        rank_scores(np.ones((1, 2)), ["A", "B"], ["Q"], k=k)


NO_TEXT = pd.DataFrame({"passage_id": ["A", "B"], "text": ["forklift", None]})


@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda r: TfidfRetriever.fit(NO_TEXT.assign(passage_id=["A", "A"], text=["one", "two"])),
     ValueError, "passage IDs must be unique; 'A' repeats"),
    (lambda r: TfidfRetriever.fit(NO_TEXT.iloc[:0]), ValueError, "empty passage table"),
    (lambda r: TfidfRetriever.fit(NO_TEXT), ValueError,
     r"passage 'B' \(row 2, column 'text'\) has no text"),
    (lambda r: TfidfRetriever.fit(NO_TEXT, text_column="body"), KeyError,
     "the passage table has no column 'body'"),
    (lambda r: TfidfRetriever.fit(NO_TEXT.assign(text=["the and", "Is it?"])), ValueError,
     "no passage in column 'text' has a content word"),
    (lambda r: r.rank(pd.DataFrame({"question_id": ["Q1"], "text": ["stipend"]})), KeyError,
     "the question table has no column 'question'"),
    (lambda r: r.rank(_table("stipend", np.nan)), TypeError, "question 'T1' is not text: nan"),
    (lambda r: r.score(["stipend", None]), TypeError, "query 2 is not text: None"),
    (lambda r: rank_scores(np.zeros((2, 3)), ["A", "B", "C"], ["Q1"]), ValueError,
     r"score matrix has shape \(2, 3\), expected \(1 questions, 3 passages\)"),
], ids=["duplicate ID", "empty table", "passage without text", "missing text column",
        "only stop words", "missing question column", "question without text",
        "query without text", "score matrix shape"])
def test_bad_input_is_named(retriever, call, error, message):
    with pytest.raises(error, match=message):
        call(retriever)


def test_a_stop_word_list_can_be_replaced_for_passages_and_queries(retriever, handbook, questions):
    keep_at = STOP_WORDS - {"at"}
    with_at = TfidfRetriever.fit(handbook, stop_words=keep_at)
    assert "at" in set(with_at.vocabulary["term"])
    assert "at" not in set(retriever.vocabulary["term"])  # the default list is untouched
    q3 = questions[questions["question_id"] == "Q3"]
    assert retriever.rank(q3).empty
    ranked = with_at.rank(q3)
    passages = dict(zip(handbook["passage_id"], handbook["text"]))
    assert len(ranked) == 3
    assert all("at" in content_tokens(passages[p], keep_at) for p in ranked["passage_id"])
    # The query side uses the same list: a query of stop words only matches nothing.
    assert with_at.rank(_table("the and of")).empty
    assert not with_at.rank(_table("at")).empty
