"""The lesson's tf-idf retriever, ranking, gold labels and the overlap table.

The printed figures come from the reference render's tables "Content-word overlap between
each question and its gold passage" and "Tf-idf retrieval results with gold evidence
status".
"""
from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.metrics.pairwise import linear_kernel

from helpers.retrieval import (
    RANK_COLUMNS,
    TfidfRetriever,
    format_candidates,
    gold_ranks,
    overlap_table,
    rank_scores,
    recall_at_k,
)
from helpers.text import STOP_WORDS, content_tokens, tokenize

PRINTED_OVERLAP = {
    "Q1": ("H08", "stipend, training"),
    "Q2": ("H14", "applications, close"),
    "Q3": ("H13", "none"),
    "Q4": ("H12", "certificate, data, experience, need, support"),
    "Q5": (None, "none"),
    "Q6": ("H11", "forklift"),
}

PRINTED_CANDIDATES = {
    "Q1": "H08 (#1, 0.356)",
    "Q2": "H14 (#1, 0.572)",
    "Q3": "no lexical match",
    "Q4": "H12 (#1, 0.588); H03 (#2, 0.108); H15 (#3, 0.098)",
    "Q5": "H03 (#1, 0.311); H01 (#2, 0.297)",
    "Q6": "H10 (#1, 0.261); H11 (#2, 0.140); H03 (#3, 0.089)",
}

PRINTED_GOLD_LABELS = {
    "Q1": "rank 1",
    "Q2": "rank 1",
    "Q3": "not retrieved (all scores 0)",
    "Q4": "rank 1",
    "Q5": "not applicable",
    "Q6": "rank 2",
}


# --- the printed tables ----------------------------------------------------------


def test_overlap_table_matches_the_source(questions, handbook):
    table = overlap_table(questions, handbook)
    assert table["question_id"].tolist() == list(PRINTED_OVERLAP)
    for row in table.itertuples(index=False):
        gold, shared = PRINTED_OVERLAP[row.question_id]
        assert row.gold_passage_id == gold, row.question_id
        assert row.shared_content_words == shared, row.question_id


def test_retrieved_candidates_match_the_source(retrieved, questions):
    shown = format_candidates(retrieved, questions["question_id"].tolist())
    assert shown.to_dict() == PRINTED_CANDIDATES


def test_retrieved_has_exactly_the_printed_rows(retrieved):
    assert list(retrieved.columns) == RANK_COLUMNS
    assert len(retrieved) == 10
    assert "Q3" not in set(retrieved["question_id"])
    assert retrieved["rank"].dtype.kind == "i"


def test_gold_retrieval_labels_match_the_source(gold):
    assert dict(zip(gold["question_id"], gold["gold_retrieval_label"])) == PRINTED_GOLD_LABELS
    by_question = gold.set_index("question_id")
    assert by_question.at["Q3", "gold_score"] == 0.0
    assert pd.isna(by_question.at["Q3", "gold_rank"])
    assert by_question.at["Q6", "gold_rank"] == 2
    assert round(by_question.at["Q6", "gold_score"], 3) == 0.140


def test_recall_at_3(gold):
    recall = recall_at_k(gold, 3)
    values = dict(zip(gold["question_id"], recall.tolist()))
    assert values["Q1"] is True and values["Q2"] is True and values["Q4"] is True
    assert values["Q6"] is True
    assert values["Q3"] is False
    assert values["Q5"] is pd.NA
    # With k = 1 the Q6 gold passage, ranked second, is no longer recalled.
    assert dict(zip(gold["question_id"], recall_at_k(gold, 1).tolist()))["Q6"] is False


# --- idf and scores against independent computations ----------------------------


@pytest.mark.parametrize(
    ("term", "passages"),
    [
        # Counted by reading the handbook: which passages contain the term.
        ("stipend", {"H08"}),
        ("riverton", {"H01", "H03"}),  # H01 uses it twice; df counts passages.
        ("forklift", {"H03", "H04", "H09", "H11"}),
        ("data", {"H03", "H06", "H08", "H09", "H12", "H15"}),
        ("certificate", {"H03", "H06", "H08", "H09", "H10", "H12", "H15"}),
        ("dsc-104", {"H09"}),
        ("104", {"H13"}),  # "DSC-104" in H09 is one token, so it does not count.
    ],
)
def test_idf_is_ln_n_over_df_by_hand_count(retriever, handbook, term, passages):
    found = {pid for pid, text in zip(handbook["passage_id"], handbook["text"])
             if term in tokenize(text)}
    assert found == passages
    vocabulary = retriever.vocabulary.set_index("term")
    assert vocabulary.at[term, "document_frequency"] == len(passages)
    assert vocabulary.at[term, "idf"] == pytest.approx(math.log(15 / len(passages)), abs=1e-15)


def test_stop_words_are_not_in_the_vocabulary(retriever):
    assert set(retriever.vocabulary["term"]).isdisjoint(STOP_WORDS)


def _brute_force_cosine(passages: list[str], query: str) -> list[float]:
    """Pure-Python tf-idf cosine: counts x ln(N/df), idf from the passages only."""
    counts = [Counter(content_tokens(text)) for text in passages]
    df = Counter(term for bag in counts for term in bag)
    idf = {term: math.log(len(passages) / n) for term, n in df.items()}
    vectors = [{t: c * idf[t] for t, c in bag.items()} for bag in counts]
    q = {t: c * idf[t] for t, c in Counter(content_tokens(query)).items() if t in idf}
    q_norm = math.sqrt(sum(w * w for w in q.values()))
    scores = []
    for vector in vectors:
        p_norm = math.sqrt(sum(w * w for w in vector.values()))
        dot = sum(w * vector.get(t, 0.0) for t, w in q.items())
        scores.append(dot / (p_norm * q_norm) if dot and p_norm and q_norm else 0.0)
    return scores


def test_scores_match_a_brute_force_cosine(retriever, handbook, questions):
    scores = retriever.score(questions["question"].tolist())
    assert scores.shape == (6, 15)
    assert retriever.passage_ids == tuple(handbook["passage_id"])
    for row, question in enumerate(questions["question"]):
        expected = _brute_force_cosine(handbook["text"].tolist(), question)
        np.testing.assert_allclose(scores[row], expected, rtol=0, atol=1e-12)


def test_scores_lie_between_0_and_1(retriever, handbook):
    scores = retriever.score(handbook["text"].tolist())
    assert scores.min() >= 0.0
    assert scores.max() <= 1.0 + 1e-12
    # A passage queried with its own text scores 1 against itself.
    np.testing.assert_allclose(np.diag(scores), 1.0, atol=1e-12)


def test_idf_is_fitted_once_on_the_handbook(retriever, questions):
    """Scoring questions must not change the idf (it is not refitted per query)."""
    before = retriever.idf.copy()
    retriever.score(questions["question"].tolist() + ["stipend stipend parking"])
    np.testing.assert_array_equal(retriever.idf, before)


def test_sklearn_tfidf_differs_from_the_lesson_weights(retriever, handbook, questions):
    """Why the retriever is custom rather than scikit-learn's TfidfVectorizer.

    Even with ``smooth_idf=False`` scikit-learn uses ``idf = ln(N/df) + 1``, so a term
    found in every passage keeps weight 1 instead of 0 and every score moves: the
    printed figures (Q1 H08 0.356 ...) come only from ``ln(N/df)``. On this handbook
    the difference is large enough to swap the top two passages for Q5.
    """
    vectorizer = TfidfVectorizer(analyzer=content_tokens, lowercase=False, smooth_idf=False)
    passages = vectorizer.fit_transform(handbook["text"])
    sk_scores = linear_kernel(vectorizer.transform(questions["question"]), passages)
    ours = retriever.score(questions["question"].tolist())
    terms = list(vectorizer.get_feature_names_out())
    ours_idf = retriever.vocabulary.set_index("term").loc[terms, "idf"].to_numpy()
    np.testing.assert_allclose(vectorizer.idf_, ours_idf + 1.0, atol=1e-12)
    assert not np.allclose(sk_scores, ours, atol=1e-3)
    q1 = questions.index[questions["question_id"] == "Q1"][0]
    h08 = retriever.passage_ids.index("H08")
    assert round(ours[q1, h08], 3) == 0.356
    assert round(sk_scores[q1, h08], 3) != 0.356
    q5 = questions.index[questions["question_id"] == "Q5"][0]
    sk_top = retriever.passage_ids[int(np.argmax(sk_scores[q5]))]
    ours_top = retriever.passage_ids[int(np.argmax(ours[q5]))]
    assert (ours_top, sk_top) == ("H03", "H01")


# --- ranking rules ---------------------------------------------------------------


def _tiny_handbook() -> pd.DataFrame:
    # Three identical passages, listed out of ID order, plus two others.
    return pd.DataFrame(
        {
            "passage_id": ["P3", "P1", "P5", "P2", "P4"],
            "text": [
                "forklift safety course",
                "forklift safety course",
                "spreadsheet basics",
                "forklift safety course",
                "child care room",
            ],
        }
    )


def test_ties_are_broken_by_passage_id():
    retriever = TfidfRetriever.fit(_tiny_handbook())
    questions = pd.DataFrame({"question_id": ["T1"], "question": ["forklift course"]})
    ranked = retriever.rank(questions, k=None)
    assert ranked["passage_id"].tolist() == ["P1", "P2", "P3"]
    assert ranked["rank"].tolist() == [1, 2, 3]
    assert ranked["score"].nunique() == 1
    assert ranked["score"].iloc[0] > 0
    top2 = retriever.rank(questions, k=2)
    assert top2["passage_id"].tolist() == ["P1", "P2"]


def test_rank_scores_tie_break_ignores_input_order():
    scores = np.array([[0.5, 0.9, 0.5, 0.5, 0.0]])
    ranked = rank_scores(scores, ["H09", "H02", "H10", "H01", "H03"], ["Q"], k=None)
    assert ranked["passage_id"].tolist() == ["H02", "H01", "H09", "H10"]


def test_zero_scores_are_never_returned(retriever, questions):
    scores = retriever.score(questions["question"].tolist())
    ranked = retriever.rank(questions, k=None)
    assert (ranked["score"] > 0).all()
    # Every positive score is returned when k is None, and nothing else.
    assert len(ranked) == int((scores > 0).sum())
    q5 = ranked[ranked["question_id"] == "Q5"]
    assert q5["passage_id"].tolist() == ["H03", "H01"]  # only two passages share a word


def test_min_score_is_strict():
    scores = np.array([[0.2, 0.1, 0.3]])
    ranked = rank_scores(scores, ["A", "B", "C"], ["Q"], k=None, min_score=0.2)
    assert ranked["passage_id"].tolist() == ["C"]


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_top_k(retriever, questions, k):
    ranked_all = retriever.rank(questions, k=None)
    ranked = retriever.rank(questions, k=k)
    for question_id, group in ranked_all.groupby("question_id"):
        mine = ranked[ranked["question_id"] == question_id]
        assert len(mine) == min(k, len(group))
        assert mine["passage_id"].tolist() == group["passage_id"].tolist()[:k]
        assert mine["rank"].tolist() == list(range(1, len(mine) + 1))


def test_ranking_is_ordered_by_question_then_rank(retriever, questions):
    shuffled = questions.iloc[::-1].reset_index(drop=True)
    ranked = retriever.rank(shuffled, k=None)
    for _, group in ranked.groupby("question_id", sort=False):
        assert group["score"].is_monotonic_decreasing
        assert group["rank"].tolist() == list(range(1, len(group) + 1))


@pytest.mark.parametrize(
    "query", ["", "Where is it at?", "Is there a zeppelin?", "?!", "do you and I"]
)
def test_queries_without_known_content_words_retrieve_nothing(retriever, query):
    questions = pd.DataFrame({"question_id": ["E1"], "question": [query]})
    assert retriever.score([query]).sum() == 0.0
    ranked = retriever.rank(questions, k=3)
    assert ranked.empty
    assert list(ranked.columns) == RANK_COLUMNS


def test_fit_rejects_duplicate_ids_and_empty_tables():
    frame = pd.DataFrame({"passage_id": ["A", "A"], "text": ["one", "two"]})
    with pytest.raises(ValueError, match="'A'"):
        TfidfRetriever.fit(frame)
    with pytest.raises(ValueError):
        TfidfRetriever.fit(frame.iloc[0:0])


def test_rank_scores_checks_the_shape():
    with pytest.raises(ValueError, match="shape"):
        rank_scores(np.zeros((2, 3)), ["A", "B", "C"], ["Q1"])


# --- gold labels beyond the printed ones ------------------------------------------


def test_gold_label_when_others_match_but_gold_does_not(retriever):
    questions = pd.DataFrame(
        {"question_id": ["G1"], "question": ["When does the Saturday workshop start?"],
         "gold_passage_id": ["H13"]}
    )
    label = gold_ranks(retriever.rank(questions, k=None), questions)
    assert label["gold_retrieval_label"].tolist() == ["not retrieved (score 0)"]
    assert label["gold_score"].tolist() == [0.0]


def test_gold_label_outside_the_top_3(retriever):
    # Seven passages name the certificate; H09 is not among the first three.
    questions = pd.DataFrame(
        {"question_id": ["G2"], "question": ["Data Support Certificate"],
         "gold_passage_id": ["H09"]}
    )
    ranked_all = retriever.rank(questions, k=None)
    rank = int(ranked_all.loc[ranked_all["passage_id"] == "H09", "rank"].iloc[0])
    assert rank > 3
    label = gold_ranks(ranked_all, questions)
    assert label["gold_retrieval_label"].tolist() == [f"rank {rank} (outside top 3)"]
    assert recall_at_k(label, 3).tolist() == [False]


# --- the inverted index -------------------------------------------------------------


def test_vocabulary_is_the_one_count_vectorizer_builds(retriever, handbook):
    """Questions are looked up in the fitted vocabulary; it must be CountVectorizer's."""
    from sklearn.feature_extraction.text import CountVectorizer

    counter = CountVectorizer(analyzer=content_tokens, lowercase=False)
    counts = counter.fit_transform(handbook["text"])
    assert retriever.vocabulary["term"].tolist() == counter.get_feature_names_out().tolist()
    assert retriever.vocabulary["document_frequency"].tolist() == \
        np.bincount(counts.indices, minlength=counts.shape[1]).tolist()


def test_the_index_is_term_major(retriever, handbook):
    """Row t of term_matrix lists the passages that contain t, with their weights."""
    index = retriever.term_matrix
    assert index.shape == (len(retriever.idf), len(handbook))
    terms = retriever.vocabulary["term"].tolist()
    stipend = index[terms.index("stipend")]
    assert [retriever.passage_ids[i] for i in stipend.indices] == ["H08"]
    forklift = index[terms.index("forklift")]
    assert sorted(retriever.passage_ids[i] for i in forklift.indices) == \
        ["H03", "H04", "H09", "H11"]
    # The transpose holds the unit-length passage vectors, and no zero is stored.
    norms = np.sqrt(np.asarray(index.multiply(index).sum(axis=0)).ravel())
    np.testing.assert_allclose(norms, 1.0, atol=1e-12)
    assert (index.data != 0).all()
    assert retriever.index_nbytes == index.data.nbytes + index.indices.nbytes + \
        index.indptr.nbytes
    assert repr(retriever) == \
        f"TfidfRetriever(15 passages, {len(terms)} terms, {index.nnz} postings)"


def test_a_term_in_every_passage_weighs_nothing_and_is_not_stored():
    frame = pd.DataFrame({"passage_id": ["A", "B", "C"],
                          "text": ["course forklift", "course spreadsheet", "course"]})
    retriever = TfidfRetriever.fit(frame)
    vocabulary = retriever.vocabulary.set_index("term")
    assert vocabulary.at["course", "idf"] == 0.0
    assert retriever.term_matrix.nnz == 2  # forklift in A, spreadsheet in B
    questions = pd.DataFrame({"question_id": ["Q"], "question": ["course"]})
    assert retriever.rank(questions, k=None).empty  # C matches only a weightless term


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
    targets = rng.choice(n_passages, size=(60, 3)).tolist()
    for source, these in zip(sources, targets):
        for target in these:
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
    passages = pd.DataFrame({"passage_id": ids, "text": texts})
    table = pd.DataFrame({"question_id": [f"T{i}" for i in range(len(questions))],
                          "question": questions})
    return passages, table


def _brute_force_ranking(passages: pd.DataFrame,
                         questions: pd.DataFrame) -> list[tuple[str, str, int, float]]:
    """The lesson's formula and ranking rules in pure Python: every passage with a
    positive score, per question, rounded score descending then passage ID."""
    bags = [Counter(content_tokens(text)) for text in passages["text"]]
    n = len(bags)
    df = Counter(term for bag in bags for term in bag)
    idf = {term: math.log(n / count) for term, count in df.items()}
    vectors = [{t: c * idf[t] for t, c in bag.items()} for bag in bags]
    norms = [math.sqrt(sum(w * w for w in vector.values())) for vector in vectors]
    by_term: dict[str, list[int]] = {}
    for position, vector in enumerate(vectors):
        for term in vector:
            by_term.setdefault(term, []).append(position)
    ids = passages["passage_id"].tolist()
    rows = []
    for question_id, text in zip(questions["question_id"], questions["question"]):
        q = {t: c * idf[t] for t, c in Counter(content_tokens(text)).items() if t in idf}
        q_norm = math.sqrt(sum(w * w for w in q.values()))
        scored = []
        for position in {p for t in q for p in by_term[t]}:
            dot = sum(w * vectors[position].get(t, 0.0) for t, w in q.items())
            if dot and norms[position] and q_norm:
                scored.append((-round(dot / (norms[position] * q_norm), 12), ids[position],
                               dot / (norms[position] * q_norm)))
        scored.sort()
        for rank, (_, pid, score) in enumerate(scored, start=1):
            rows.append((question_id, pid, rank, score))
    return rows


@pytest.fixture(scope="module")
def synthetic():
    passages, questions = _synthetic_handbook(5000, 30, seed=7)
    return passages, questions, TfidfRetriever.fit(passages)


@pytest.fixture(scope="module")
def brute_force(synthetic):
    passages, questions, _ = synthetic
    return _brute_force_ranking(passages, questions)


@pytest.mark.parametrize("k", [1, 3, 50, None])
def test_rank_matches_a_brute_force_ranking_on_a_larger_handbook(synthetic, brute_force, k):
    _, questions, retriever = synthetic
    expected = [row for row in brute_force if k is None or row[2] <= k]
    ranked = retriever.rank(questions, k=k)
    got = list(ranked.itertuples(index=False, name=None))
    assert [row[:3] for row in got] == [row[:3] for row in expected]
    np.testing.assert_allclose([row[3] for row in got], [row[3] for row in expected],
                               rtol=0, atol=1e-12)
    # The duplicated passages do tie: some question's top 3 holds equal scores.
    if k == 3:
        assert (ranked.groupby("question_id")["score"].nunique() < 3).any()


def test_one_question_at_a_time_matches_the_batch_product(synthetic):
    """rank() adds up postings per question; score_sparse is one sparse product."""
    _, questions, retriever = synthetic
    together = retriever.rank(questions, k=3)
    one_by_one = pd.concat([retriever.rank(questions.iloc[[i]], k=3)
                            for i in range(len(questions))], ignore_index=True)
    pd.testing.assert_frame_equal(together, one_by_one)
    product = rank_scores(retriever.score_sparse(questions["question"].tolist()),
                          retriever.passage_ids, questions["question_id"].tolist(), k=3)
    assert product[RANK_COLUMNS[:3]].equals(together[RANK_COLUMNS[:3]])
    np.testing.assert_allclose(product["score"], together["score"], rtol=0, atol=1e-15)
    dense = retriever.score(questions["question"].tolist())
    assert dense.shape == (len(questions), len(retriever.passage_ids))
    np.testing.assert_array_equal(
        dense, retriever.score_sparse(questions["question"].tolist()).toarray())


def test_query_matrix_rows_are_unit_length_tf_idf_vectors(synthetic):
    _, questions, retriever = synthetic
    matrix = retriever.query_matrix(questions["question"].tolist())
    assert matrix.shape == (len(questions), len(retriever.idf))
    norms = np.sqrt(np.asarray(matrix.multiply(matrix).sum(axis=1)).ravel())
    known = np.array([any(t in retriever.vectorizer.vocabulary_ for t in content_tokens(q))
                      for q in questions["question"]])
    np.testing.assert_allclose(norms[known], 1.0, atol=1e-12)
    assert (norms[~known] == 0).all()
    assert known.sum() < len(questions)  # the empty and unknown questions are there


# --- the top-k selection ------------------------------------------------------------


def _reference_select(values, tie_keys, k, min_score):
    """Every score above min_score through _top: the rule, with no shortcut."""
    from helpers.retrieval import _top

    candidates = np.flatnonzero(values > min_score)
    return candidates[_top(values[candidates], tie_keys[candidates], k)]


@pytest.mark.parametrize("seed", range(12))
def test_fast_selection_equals_the_rule(seed):
    from helpers.retrieval import _select

    rng = np.random.default_rng(seed)
    n = int(rng.choice([4100, 9000, 20000]))
    kind = seed % 4
    if kind == 0:  # few distinct values: ties everywhere
        values = rng.choice([0.0, 0.1, 0.25, 0.5, 0.9], size=n)
    elif kind == 1:  # near-ties closer than the rounding, on both sides of it
        values = 0.5 + rng.integers(-3, 4, size=n) * 3e-13
        values[rng.random(n) < 0.5] = 0.0
    elif kind == 2:  # mostly zero, a few positives in one block
        values = np.zeros(n)
        values[10:15] = rng.random(5)
    else:  # dense cosines, negatives included
        values = rng.normal(size=n)
    tie_keys = rng.permutation(n)
    for k in (1, 3, 7, 60, None):
        for min_score in (0.0, -np.inf, 0.3):
            expected = _reference_select(values, tie_keys, k, min_score)
            got = _select(values, tie_keys.__getitem__, k, min_score)
            np.testing.assert_array_equal(got, expected, err_msg=f"k={k} min={min_score}")


def test_fast_selection_keeps_scores_tied_only_after_rounding():
    """A score just below the k-th largest, equal to it once rounded, still ties."""
    from helpers.retrieval import _select

    rng = np.random.default_rng(3)
    values = rng.random(20000) * 0.4
    values[[1000, 5000, 9000]] = 0.9 + 4e-13  # the three largest block maxima
    values[15000] = 0.9 - 4e-13  # below them, but all four round to 0.900000000000
    keys = np.arange(len(values))[::-1].copy()  # position 15000 has the smallest key
    expected = _reference_select(values, keys, 3, 0.0)
    assert expected.tolist() == [15000, 9000, 5000]
    np.testing.assert_array_equal(_select(values, keys.__getitem__, 3, 0.0), expected)


def test_fast_selection_with_nan_falls_back_to_the_rule():
    from helpers.retrieval import _select

    values = np.linspace(0, 1, 8192)
    values[5] = np.nan
    keys = np.arange(len(values))
    np.testing.assert_array_equal(_select(values, keys.__getitem__, 3, 0.0),
                                  _reference_select(values, keys, 3, 0.0))


# --- the ranking table and bad input ------------------------------------------------


def _expected_dtypes():
    text = pd.Series(["x"]).astype("str").dtype
    return {"question_id": text, "passage_id": text, "rank": np.dtype("int64"),
            "score": np.dtype("float64")}


def test_rankings_keep_their_columns_and_dtypes(retriever, retrieved):
    no_match = pd.DataFrame({"question_id": ["E"], "question": ["zeppelin"]})
    nothing = pd.DataFrame({"question_id": [], "question": []})
    frames = [retrieved, retriever.rank(no_match), retriever.rank(nothing),
              rank_scores(np.zeros((0, 2)), ["A", "B"], []),
              rank_scores(np.zeros((1, 2)), ["A", "B"], ["Q"])]
    for frame in frames:
        assert list(frame.columns) == RANK_COLUMNS
        assert frame.dtypes.to_dict() == _expected_dtypes()
        assert isinstance(frame.index, pd.RangeIndex)
    assert len(frames[1]) == len(frames[2]) == len(frames[3]) == len(frames[4]) == 0


@pytest.mark.parametrize("k", [0, -1, 2.5, True, "3"])
def test_k_must_be_a_positive_whole_number(retriever, questions, k):
    with pytest.raises(ValueError, match="k must be a positive whole number"):
        retriever.rank(questions, k=k)
    with pytest.raises(ValueError, match="k must be a positive whole number"):
        rank_scores(np.ones((1, 2)), ["A", "B"], ["Q"], k=k)


def test_rank_names_a_missing_column_and_a_question_without_text(retriever):
    with pytest.raises(KeyError, match="'question'"):
        retriever.rank(pd.DataFrame({"question_id": ["Q1"], "text": ["stipend"]}))
    table = pd.DataFrame({"question_id": ["Q1", "Q2"], "question": ["stipend", np.nan]})
    with pytest.raises(TypeError, match="question 'Q2' is not text: nan"):
        retriever.rank(table)
    with pytest.raises(TypeError, match="query 2 is not text: None"):
        retriever.score(["stipend", None])


def test_fit_names_the_passage_without_text_and_a_table_without_words():
    frame = pd.DataFrame({"passage_id": ["A", "B"], "text": ["forklift", None]})
    with pytest.raises(ValueError, match=r"passage 'B' \(row 2, column 'text'\) has no text"):
        TfidfRetriever.fit(frame)
    with pytest.raises(KeyError, match="'body'"):
        TfidfRetriever.fit(frame, text_column="body")
    only_stop_words = pd.DataFrame({"passage_id": ["A", "B"], "text": ["the and", "Is it?"]})
    with pytest.raises(ValueError, match="no passage in column 'text' has a content word"):
        TfidfRetriever.fit(only_stop_words)


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
    assert with_at.rank(pd.DataFrame({"question_id": ["x"], "question": ["the and of"]})).empty
    assert not with_at.rank(pd.DataFrame({"question_id": ["x"], "question": ["at"]})).empty
