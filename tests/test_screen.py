"""The six-check support screen, pinned to the reference render's tables "Cited text and
support-screen labels for every reader output" and "Author-written control strings that
the support screen holds for review"."""
from __future__ import annotations

import pytest

from helpers.parsing import parse_reader_output
from helpers.screen import (CHECKS, control_outputs, failed_checks, numbers_in, screen_label,
                            screen_reply, screen_table, strip_citation_tokens)

PRINTED_SCREEN = {
    # question: (parsed answer, cited IDs, cited passage text, failed checks, label)
    "Q1": ("$150 per week", "H08",
           "H08: Data Support Certificate students receive a training stipend of $150 per "
           "week. Students must attend at least 90 percent of classes to receive it.",
           "none", "not flagged by screen"),
    "Q2": ("Applications close on October 15.", "H14",
           "H14: Applications for both fall programs close on October 15.",
           "none", "not flagged by screen"),
    "Q3": ("NOT IN HANDBOOK", "none", "none", "none", "not flagged by screen"),
    "Q4": ("NO PRIOR DATA EXPERIENCE IS REQUIRED", "H12",
           "H12: No prior data experience is required for the Data Support Certificate. "
           "Applicants need basic spreadsheet skills.",
           "none", "not flagged by screen"),
    "Q5": ("NOT IN HANDBOOK", "H01",
           "H01: Classes are held at the Riverton Skills Centre on Mill Street in Riverton.",
           "abstain_sources_ok", "held for human review"),
    "Q6": ("NOT IN HANDBOOK", "H11",
           "H11: Forklift Operator Licence classes meet on Tuesday and Thursday mornings from "
           "8 a.m. to noon. There are no weekend forklift classes.",
           "abstain_sources_ok", "held for human review"),
}

PRINTED_CONTROLS = [
    ("control-unsupported-number", "The weekly training stipend is $200.", "H08",
     "numbers_supported", "held for human review"),
    ("control-unretrieved-citation", "The stipend is paid weekly.", "H14",
     "cited_retrieved", "held for human review"),
]


def test_screen_table_matches_the_source(parsed, retrieved, handbook):
    screened = screen_table(parsed, retrieved, handbook)
    assert screened["question_id"].tolist() == list(PRINTED_SCREEN)
    for row in screened.itertuples(index=False):
        shown = (row.parsed_answer, row.cited_ids, row.cited_text, row.failed_checks, row.screen_label)
        assert shown == PRINTED_SCREEN[row.question_id], row.question_id
        assert row.human_support_review == "pending"
    # Each check is a column of its own; the screen passes a row that passes all six.
    assert all(screened[check].dtype == bool for check in CHECKS)
    assert (screened["surface_support_screen"] == screened[list(CHECKS)].all(axis=1)).all()


def test_control_strings_match_the_source(retrieved, handbook):
    table = screen_table(control_outputs(), retrieved, handbook)
    shown = [
        (row.control_id, row.parsed_answer, row.cited_ids, row.failed_checks, row.screen_label)
        for row in table.itertuples(index=False)
    ]
    assert shown == PRINTED_CONTROLS
    assert table["question_id"].tolist() == ["Q1", "Q1"]


def test_the_six_checks_their_order_and_the_labels():
    assert CHECKS == ("parsed", "cited_exist", "cited_retrieved", "answer_has_citation",
                      "abstain_sources_ok", "numbers_supported")
    assert (screen_label(True), screen_label(False)) == ("not flagged by screen", "held for human review")
    values = dict.fromkeys(CHECKS, True)
    assert failed_checks(values) == "none"
    values.update(numbers_supported=False, parsed=False)
    assert failed_checks(values) == "parsed, numbers_supported"


# --- numbers_in ------------------------------------------------------------------


@pytest.mark.parametrize(("text", "numbers"), [
    ("$150 per week", ["150"]),
    # H08-style citation tokens are removed before looking for figures.
    ("See H08: $150 per week (H08, H11)", ["150"]),
    ("H08 H14", []),
    # Digits glued to a preceding letter are not figures; a hyphen does not glue.
    ("Room104 and x2", []),
    ("H080 and H1", []),
    ("DSC-105", ["105"]),
    ("9 a.m. to 5 p.m.", ["9", "5"]),
    ("3rd floor", ["3"]),
    # Number words are not numerals: the screen cannot see them.
    ("one hundred fifty dollars", []),
    ("", []),
    (None, []),
])
def test_numbers_in(text, numbers):
    assert numbers_in(text) == numbers


def test_strip_citation_tokens():
    assert strip_citation_tokens("Cited H08, H11 and H123.") == "Cited ,  and H123."


# --- screen_reply on single replies ----------------------------------------------


@pytest.mark.parametrize(("reply", "retrieved_ids", "failed"), [
    ("Answer: $150 per week\nSources: H08", ["H08"], "none"),
    ("Answer: $150 per week", ["H08"], "parsed"),  # a parse failure fails only that
    ("Answer: $150 per week\nSources: none", ["H08"], "answer_has_citation, numbers_supported"),
    ("Answer: NOT IN HANDBOOK\nSources: H01", ["H03", "H01"], "abstain_sources_ok"),
    # A premise flag may cite.
    ("Answer: PREMISE NOT SUPPORTED: no weekend forklift classes\nSources: H11",
     ["H10", "H11", "H03"], "none"),
    ("Answer: $150 per week\nSources: H08, H99", ["H08"], "cited_exist, cited_retrieved"),
    # 90 is in H08, but the answer cites H14 only (which was retrieved).
    ("Answer: Attend 90 percent\nSources: H14", ["H14"], "numbers_supported"),
    # The citation token in the answer is not read as the figure 08.
    ("Answer: $150 per week (H08)\nSources: H08", ["H08"], "none"),
    # A known limit: 90 appears in H08, so a wrong attachment passes the screen.
    ("Answer: $90 per week\nSources: H08", ["H08"], "none"),
])
def test_screen_reply(handbook, reply, retrieved_ids, failed):
    result = parse_reader_output(reply)
    values = screen_reply(result, retrieved_ids, dict(zip(handbook["passage_id"], handbook["text"])))
    assert list(values) == list(CHECKS)
    assert failed_checks(values) == failed
