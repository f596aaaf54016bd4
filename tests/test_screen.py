"""The six-check support screen, pinned to the reference render's tables "Cited text and
support-screen labels for every reader output" and "Author-written control strings that
the support screen holds for review"."""
from __future__ import annotations

import pytest

from helpers.parsing import parse_reader_output
from helpers.screen import (
    CHECKS,
    control_outputs,
    failed_checks,
    numbers_in,
    screen_label,
    screen_reply,
    screen_table,
    strip_citation_tokens,
)

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


@pytest.fixture(scope="module")
def texts(handbook):
    return dict(zip(handbook["passage_id"], handbook["text"]))


@pytest.fixture(scope="module")
def screened(parsed, retrieved, handbook):
    return screen_table(parsed, retrieved, handbook)


def test_screen_table_matches_the_source(screened):
    assert screened["question_id"].tolist() == list(PRINTED_SCREEN)
    for row in screened.itertuples(index=False):
        expected = PRINTED_SCREEN[row.question_id]
        shown = (row.parsed_answer, row.cited_ids, row.cited_text, row.failed_checks,
                 row.screen_label)
        assert shown == expected, row.question_id
        assert row.human_support_review == "pending"


def test_screen_table_keeps_each_check_as_a_column(screened):
    for check in CHECKS:
        assert screened[check].dtype == bool
    assert (screened["surface_support_screen"] == screened[list(CHECKS)].all(axis=1)).all()


def test_control_strings_match_the_source(retrieved, handbook):
    controls = control_outputs()
    table = screen_table(controls, retrieved, handbook)
    shown = [
        (row.control_id, row.parsed_answer, row.cited_ids, row.failed_checks, row.screen_label)
        for row in table.itertuples(index=False)
    ]
    assert shown == PRINTED_CONTROLS
    assert table["question_id"].tolist() == ["Q1", "Q1"]


def test_the_six_check_names():
    assert CHECKS == ("parsed", "cited_exist", "cited_retrieved", "answer_has_citation",
                      "abstain_sources_ok", "numbers_supported")


def test_labels():
    assert screen_label(True) == "not flagged by screen"
    assert screen_label(False) == "held for human review"


def test_failed_checks_lists_in_check_order():
    values = dict.fromkeys(CHECKS, True)
    assert failed_checks(values) == "none"
    values.update(numbers_supported=False, parsed=False)
    assert failed_checks(values) == "parsed, numbers_supported"


# --- numbers_in ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "numbers"),
    [
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
    ],
)
def test_numbers_in(text, numbers):
    assert numbers_in(text) == numbers


def test_strip_citation_tokens():
    assert strip_citation_tokens("Cited H08, H11 and H123.") == "Cited ,  and H123."


# --- screen_reply on single replies ----------------------------------------------


def _screen(reply, retrieved_ids, texts):
    result = parse_reader_output(reply)
    return screen_reply(result.answer, result.sources, result.parse_ok, result.action,
                        retrieved_ids, texts)


def test_a_clean_answer_passes_every_check(texts):
    values = _screen("Answer: $150 per week\nSources: H08", ["H08"], texts)
    assert list(values) == list(CHECKS)
    assert all(values.values())


def test_a_parse_failure_fails_only_parsed(texts):
    values = _screen("Answer: $150 per week", ["H08"], texts)
    assert failed_checks(values) == "parsed"


def test_an_answer_without_a_citation(texts):
    values = _screen("Answer: $150 per week\nSources: none", ["H08"], texts)
    assert failed_checks(values) == "answer_has_citation, numbers_supported"


def test_an_abstention_that_cites(texts):
    values = _screen("Answer: NOT IN HANDBOOK\nSources: H01", ["H03", "H01"], texts)
    assert failed_checks(values) == "abstain_sources_ok"


def test_a_premise_flag_may_cite(texts):
    values = _screen("Answer: PREMISE NOT SUPPORTED: no weekend forklift classes\n"
                     "Sources: H11", ["H10", "H11", "H03"], texts)
    assert failed_checks(values) == "none"


def test_an_id_that_does_not_exist(texts):
    values = _screen("Answer: $150 per week\nSources: H08, H99", ["H08"], texts)
    assert failed_checks(values) == "cited_exist, cited_retrieved"


def test_numbers_must_come_from_the_cited_passages(texts):
    # 90 is in H08, but the answer cites H14 only (which was retrieved).
    values = _screen("Answer: Attend 90 percent\nSources: H14", ["H14"], texts)
    assert failed_checks(values) == "numbers_supported"
    # The citation token in the answer is not read as the figure 08.
    values = _screen("Answer: $150 per week (H08)\nSources: H08", ["H08"], texts)
    assert failed_checks(values) == "none"


def test_the_screen_misses_the_right_number_for_the_wrong_item(texts):
    """A known limit: 90 appears in H08, so a wrong attachment passes the screen."""
    values = _screen("Answer: $90 per week\nSources: H08", ["H08"], texts)
    assert failed_checks(values) == "none"
