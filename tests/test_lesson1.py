"""Lesson 1 executed from a clean kernel: its tables carry the reference render's values."""
from __future__ import annotations

import pytest

from helpers.paths import LESSONS_DIR

from lesson_outputs import markdown_outputs, table_rows, tables

LESSON = LESSONS_DIR / "01-answering-from-retrieved-passages.ipynb"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def lesson(book):
    """The session's execution, which replays the transcript: the reference render's
    figures come from the pinned Qwen reader (tests/book_session.py)."""
    return book.lesson(LESSON).nb


def column(nb, table, label):
    return [row[label] for row in table_rows(nb, table)]


def test_every_source_table_has_a_counterpart(lesson):
    expected = {"model", "handbook", "questions", "overlap", "retrieval", "baseline",
                "budget", "raw_outputs", "parsed", "scores", "screen", "controls",
                "actions", "policies"}
    assert expected <= set(tables(lesson))


def test_pinned_model_table(lesson):
    (row,) = table_rows(lesson, "model")
    assert row == {
        "Model": "Qwen/Qwen2.5-1.5B-Instruct",
        "Revision": "989aa7980e4cf806f80c7fef2b1adb7bc71aa306",
        "License": "Apache-2.0",
        "Use in this course": "abstractive summarization;paraphrasing;long-text generation;"
                              "question answering;chatbot dialogue",
    }


def test_handbook_and_questions(lesson):
    assert column(lesson, "handbook", "Passage ID") == [f"H{i:02d}" for i in range(1, 16)]
    questions = table_rows(lesson, "questions")
    assert [q["Expected action"] for q in questions] == [
        "answer", "answer", "answer", "answer", "abstain", "flag premise"]
    assert [q["Gold evidence"] for q in questions] == [
        "H08", "H14", "H13", "H12", "not applicable", "H11"]
    assert questions[0]["Acceptable short answers"] == "$150|$150 per week|$150 a week|150 dollars per week"
    assert questions[5]["Acceptable short answers"] == "not applicable"


def test_overlap_table(lesson):
    assert column(lesson, "overlap", "Shared content words") == [
        "stipend, training", "applications, close", "none",
        "certificate, data, experience, need, support", "none", "forklift"]
    assert column(lesson, "overlap", "Gold evidence")[4] == "NA"


def test_retrieval_table(lesson):
    assert column(lesson, "retrieval", "Retrieved candidates") == [
        "H08 (#1, 0.356)",
        "H14 (#1, 0.572)",
        "no lexical match",
        "H12 (#1, 0.588); H03 (#2, 0.108); H15 (#3, 0.098)",
        "H03 (#1, 0.311); H01 (#2, 0.297)",
        "H10 (#1, 0.261); H11 (#2, 0.140); H03 (#3, 0.089)",
    ]
    assert column(lesson, "retrieval", "Gold evidence retrieval") == [
        "rank 1", "rank 1", "not retrieved (all scores 0)", "rank 1", "not applicable", "rank 2"]


def test_baseline_table(lesson):
    rows = table_rows(lesson, "baseline")
    assert [r["Contains an acceptable short answer"] for r in rows] == [
        True, True, False, True, "NA", "NA"]
    assert rows[2]["Sentence returned by the baseline"] == "no sentence (no lexical match)"
    assert rows[5]["Sentence returned by the baseline"] == (
        "An optional spreadsheet refresher workshop, listed as DSC-105, meets on two "
        "Saturday mornings in September.")


def test_budget_and_raw_outputs(lesson):
    assert column(lesson, "budget", "Prompt tokens") == [211, 187, 182, 249, 222, 272]
    assert column(lesson, "budget", "Maximum new tokens") == [48] * 6
    raw = table_rows(lesson, "raw_outputs")
    assert [r["Raw reader output (`⏎` marks a line break)"] for r in raw] == [
        "Answer: $150 per week ⏎ Sources: H08",
        "Answer: Applications close on October 15. ⏎ Sources: H14",
        "Answer: NOT IN HANDBOOK ⏎ Sources: none",
        "Answer: NO PRIOR DATA EXPERIENCE IS REQUIRED ⏎ Sources: H12",
        "Answer: NOT IN HANDBOOK ⏎ Sources: H01",
        "Answer: NOT IN HANDBOOK ⏎ Sources: H11",
    ]
    assert [r["Output tokens"] for r in raw] == [15, 16, 13, 17, 15, 15]
    assert [r["EOS emitted"] for r in raw] == [True] * 6
    assert [r["Hit token cap"] for r in raw] == [False] * 6


def test_parsed_table(lesson):
    rows = table_rows(lesson, "parsed")
    assert [r["Parsed answer"] for r in rows] == [
        "$150 per week", "Applications close on October 15.", "NOT IN HANDBOOK",
        "NO PRIOR DATA EXPERIENCE IS REQUIRED", "NOT IN HANDBOOK", "NOT IN HANDBOOK"]
    assert [r["Parsed sources"] for r in rows] == ["H08", "H14", "none", "H12", "H01", "H11"]
    assert [r["Observed action"] for r in rows] == [
        "answer", "answer", "abstain", "answer", "abstain", "abstain"]


def test_score_table(lesson):
    rows = table_rows(lesson, "scores")
    assert [r["Action correct"] for r in rows] == [True, True, False, True, True, False]
    assert [r["Reference agreement"] for r in rows] == [
        "EM 1; F1 1.00", "EM 0; F1 0.57", "EM 0; F1 0.00", "EM 1; F1 1.00",
        "not applicable", "not applicable"]
    assert [r["Reader given retrieved passages"] for r in rows] == [
        "expected action", "expected action", "reasonable abstention from retrieved passages",
        "expected action", "expected action", "unexpected action"]
    assert [r["Retrieval recall at 3"] for r in rows] == [
        "gold in top 3", "gold in top 3", "gold not in top 3", "gold in top 3",
        "not applicable", "gold in top 3"]
    assert [r["End-to-end outcome"] for r in rows] == [
        "expected action", "expected action", "failed before reading", "expected action",
        "expected action", "unexpected action"]


def test_screen_and_controls(lesson):
    rows = table_rows(lesson, "screen")
    assert [r["Failed screen checks"] for r in rows] == [
        "none", "none", "none", "none", "abstain_sources_ok", "abstain_sources_ok"]
    assert [r["Surface support screen"] for r in rows] == (
        ["not flagged by screen"] * 4 + ["held for human review"] * 2)
    assert {r["Human support review"] for r in rows} == {"pending"}
    assert rows[4]["Cited passage text"] == (
        "H01: Classes are held at the Riverton Skills Centre on Mill Street in Riverton.")
    controls = table_rows(lesson, "controls")
    assert [(c["Control"], c["Cited IDs"], c["Failed screen checks"]) for c in controls] == [
        ("control-unsupported-number", "H08", "numbers_supported"),
        ("control-unretrieved-citation", "H14", "cited_retrieved"),
    ]


def test_action_and_policy_tables(lesson):
    actions = {(r["Expected action"], r["Observed action"]): r["Questions"]
               for r in table_rows(lesson, "actions")}
    assert len(actions) == 9
    assert actions == {
        ("abstain", "abstain"): 1, ("abstain", "answer"): 0, ("abstain", "flag premise"): 0,
        ("answer", "abstain"): 1, ("answer", "answer"): 3, ("answer", "flag premise"): 0,
        ("flag premise", "abstain"): 1, ("flag premise", "answer"): 0,
        ("flag premise", "flag premise"): 0,
    }
    policies = table_rows(lesson, "policies")
    assert [(p["Policy"], p["Exact action matches"], p["Questions"], p["Rows missed"])
            for p in policies] == [
        ("observed reader", 4, 6, "Q3, Q6"),
        ("always answer", 4, 6, "Q5, Q6"),
        ("always abstain", 1, 6, "Q1, Q2, Q3, Q4, Q6"),
    ]


def test_computed_prose(lesson):
    prose = markdown_outputs(lesson)
    assert "3 answers, 3 abstentions and 0 premise flags" in prose
    assert "matched the declared one on 4 of 6 questions" in prose
    assert "1 row (Q3) failed before reading" in prose
    assert ("Q2 has exact match 0 because the answer contains an acceptable variant but "
            "includes extra words") in prose
    assert "holds 2 of 6 reader rows for review" in prose
    assert "**Reader mode for this render:** recorded" in prose
    assert "989aa7980e4cf806f80c7fef2b1adb7bc71aa306" in prose
