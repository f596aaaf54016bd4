"""Lesson 1 executed from a clean kernel: its tables carry the reference render's values."""
from __future__ import annotations

import pytest

from lesson_outputs import markdown_outputs, table_rows, tables
from runtime.paths import LESSONS_DIR

LESSON = LESSONS_DIR / "01-answering-from-retrieved-passages.ipynb"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def lesson(book):
    """The session's execution, which replays the transcript: the reference render's
    figures come from the pinned Qwen reader (tests/book_session.py)."""
    return book.lesson(LESSON).nb


def test_every_source_table_has_a_counterpart(lesson):
    expected = {"model", "handbook", "questions", "overlap", "retrieval", "baseline", "budget", "raw_outputs",
                "parsed", "scores", "scores_reference", "screen", "controls", "actions", "policies"}
    assert expected <= set(tables(lesson))
    assert tables(lesson)["model"]["columns"] == ["Model", "Revision", "License", "Use in this course"]


NA = "not applicable"
#: (table, column label, the whole column, or {row number from 0: value} for some rows)
COLUMNS = [
    ("model", "Model", ["Qwen/Qwen2.5-1.5B-Instruct"]),
    ("model", "Revision", ["989aa7980e4cf806f80c7fef2b1adb7bc71aa306"]),
    ("model", "License", ["Apache-2.0"]),
    ("model", "Use in this course", ["abstractive summarization;paraphrasing;long-text generation;"
                                     "question answering;chatbot dialogue"]),
    ("handbook", "Passage ID", [f"H{i:02d}" for i in range(1, 16)]),
    ("questions", "Expected action", ["answer", "answer", "answer", "answer", "abstain", "flag premise"]),
    ("questions", "Gold evidence", ["H08", "H14", "H13", "H12", NA, "H11"]),
    ("questions", "Acceptable short answers", {0: "$150|$150 per week|$150 a week|150 dollars per week", 5: NA}),
    ("overlap", "Shared content words", ["stipend, training", "applications, close", "none",
                                         "certificate, data, experience, need, support", "none", "forklift"]),
    ("overlap", "Gold evidence", {4: NA}),
    ("retrieval", "Retrieved candidates", [
        "H08 (#1, 0.356)", "H14 (#1, 0.572)", "no lexical match",
        "H12 (#1, 0.588); H03 (#2, 0.108); H15 (#3, 0.098)", "H03 (#1, 0.311); H01 (#2, 0.297)",
        "H10 (#1, 0.261); H11 (#2, 0.140); H03 (#3, 0.089)"]),
    ("retrieval", "Gold evidence retrieval", ["rank 1", "rank 1", "not retrieved (all scores 0)", "rank 1", NA,
                                              "rank 2"]),
    ("baseline", "Contains an acceptable short answer", [True, True, False, True, NA, NA]),
    ("baseline", "Sentence returned by the baseline", {
        2: "no sentence (no lexical match)",
        5: "An optional spreadsheet refresher workshop, listed as DSC-105, meets on two Saturday mornings in September."}),
    ("budget", "Prompt tokens", [211, 187, 182, 249, 222, 272]),
    ("budget", "Maximum new tokens", [48] * 6),
    ("raw_outputs", "Raw reader output (⏎ marks a line break)", [
        "Answer: $150 per week ⏎ Sources: H08", "Answer: Applications close on October 15. ⏎ Sources: H14",
        "Answer: NOT IN HANDBOOK ⏎ Sources: none", "Answer: NO PRIOR DATA EXPERIENCE IS REQUIRED ⏎ Sources: H12",
        "Answer: NOT IN HANDBOOK ⏎ Sources: H01", "Answer: NOT IN HANDBOOK ⏎ Sources: H11"]),
    ("raw_outputs", "Output tokens", [15, 16, 13, 17, 15, 15]),
    ("raw_outputs", "EOS emitted", [True] * 6),
    ("raw_outputs", "Hit token cap", [False] * 6),
    ("parsed", "Parsed answer", ["$150 per week", "Applications close on October 15.", "NOT IN HANDBOOK",
                                 "NO PRIOR DATA EXPERIENCE IS REQUIRED", "NOT IN HANDBOOK", "NOT IN HANDBOOK"]),
    ("parsed", "Parsed sources", ["H08", "H14", "none", "H12", "H01", "H11"]),
    ("parsed", "Observed action", ["answer", "answer", "abstain", "answer", "abstain", "abstain"]),
    ("scores", "Action correct", [True, True, False, True, True, False]),
    ("scores_reference", "Reference agreement", ["EM 1; F1 1.00", "EM 0; F1 0.57", "EM 0; F1 0.00", "EM 1; F1 1.00", NA, NA]),
    ("scores", "Reader given retrieved passages", [
        "expected action", "expected action", "reasonable abstention from retrieved passages",
        "expected action", "expected action", "unexpected action"]),
    ("scores_reference", "Retrieval recall at 3", ["gold in top 3", "gold in top 3", "gold not in top 3", "gold in top 3",
                                         NA, "gold in top 3"]),
    ("scores_reference", "End-to-end outcome", ["expected action", "expected action", "failed before reading",
                                      "expected action", "expected action", "unexpected action"]),
    ("screen", "Failed screen checks", ["none"] * 4 + ["abstain_sources_ok"] * 2),
    ("screen", "Surface support screen", ["not flagged by screen"] * 4 + ["held for human review"] * 2),
    ("screen", "Human support review", ["pending"] * 6),
    ("screen", "Cited passage text", {4: "H01: Classes are held at the Riverton Skills Centre on Mill Street in Riverton."}),
    ("controls", "Control", ["control-unsupported-number", "control-unretrieved-citation"]),
    ("controls", "Cited IDs", ["H08", "H14"]),
    ("controls", "Failed screen checks", ["numbers_supported", "cited_retrieved"]),
    ("policies", "Policy", ["observed reader", "always answer", "always abstain"]),
    ("policies", "Exact action matches", [4, 4, 1]),
    ("policies", "Questions", [6, 6, 6]),
    ("policies", "Rows missed", ["Q3, Q6", "Q5, Q6", "Q1, Q2, Q3, Q4, Q6"]),
]


@pytest.mark.parametrize("table, label, expected", COLUMNS, ids=[f"{t}-{label}" for t, label, _ in COLUMNS])
def test_lesson_1_shows_the_reference_render_s_values(lesson, table, label, expected):
    column = [row[label] for row in table_rows(lesson, table)]
    assert (column if isinstance(expected, list) else {row: column[row] for row in expected}) == expected


def test_action_table(lesson):
    actions = {(r["Expected action"], r["Observed action"]): r["Questions"] for r in table_rows(lesson, "actions")}
    assert actions == {("abstain", "abstain"): 1, ("abstain", "answer"): 0,
                       ("abstain", "flag premise"): 0, ("answer", "abstain"): 1, ("answer", "answer"): 3,
                       ("answer", "flag premise"): 0, ("flag premise", "abstain"): 1,
                       ("flag premise", "answer"): 0, ("flag premise", "flag premise"): 0}


def test_the_page_states_its_findings_and_its_mode(lesson):
    """The findings are written prose (each guarded by a check_claim cell, which would have
    stopped this execution had its figures changed); the mode sentence is computed."""
    prose = "\n".join("".join(c["source"]) for c in lesson["cells"] if c["cell_type"] == "markdown")
    for sentence in ("The reader answered three questions and abstained on three",
                     "matched the declared one on 4 of the 6 questions",
                     "Q2 scores exact match\n0 although its answer contains an acceptable variant",
                     "The screen holds two rows, Q5 and Q6",
                     "every one of the six\nreplies parsed", "caps a prompt at 768 tokens and a reply at 48 new tokens"):
        assert " ".join(sentence.split()) in " ".join(prose.split()), sentence
    computed = markdown_outputs(lesson)
    for sentence in ("**Reader mode for this render:** recorded", "989aa7980e4cf806f80c7fef2b1adb7bc71aa306",
                     "transcribed by hand from the printed reference render"):
        assert sentence in computed
