"""The strict two-line parser: the six recorded replies and malformed ones.

The rules under test are those in the module docstring of ``helpers.parsing``: a reply
parses only as ``Answer: <text>`` then ``Sources: none | ID[, ID ...]``; nothing is
repaired.
"""
from __future__ import annotations

import pandas as pd
import pytest

from helpers.parsing import (
    ReplyParseError,
    assert_all_parsed,
    parse_outputs,
    parse_reader_output,
    show_line_breaks,
)

# The reference render's table "Strictly parsed reader outputs".
PRINTED_PARSED = {
    "Q1": ("$150 per week", "H08", "answer", "answer"),
    "Q2": ("Applications close on October 15.", "H14", "answer", "answer"),
    "Q3": ("NOT IN HANDBOOK", "none", "abstain", "answer"),
    "Q4": ("NO PRIOR DATA EXPERIENCE IS REQUIRED", "H12", "answer", "answer"),
    "Q5": ("NOT IN HANDBOOK", "H01", "abstain", "abstain"),
    "Q6": ("NOT IN HANDBOOK", "H11", "abstain", "flag premise"),
}


def test_six_recorded_replies_parse_as_printed(parsed, questions):
    expected_action = dict(zip(questions["question_id"], questions["expected_action"]))
    assert parsed["question_id"].tolist() == list(PRINTED_PARSED)
    assert parsed["parse_ok"].all()
    for row in parsed.itertuples(index=False):
        answer, sources, observed, expected = PRINTED_PARSED[row.question_id]
        assert row.parsed_answer == answer, row.question_id
        shown = ", ".join(row.parsed_sources) if row.parsed_sources else "none"
        assert shown == sources, row.question_id
        assert row.observed_action == observed, row.question_id
        assert expected_action[row.question_id] == expected, row.question_id
        assert row.parse_problem == ""


def test_recorded_replies_show_their_line_break(source_raw_outputs):
    shown = [show_line_breaks(text) for text in source_raw_outputs["raw_output"]]
    assert shown[0] == "Answer: $150 per week ⏎ Sources: H08"
    assert show_line_breaks("a\r\nb") == "a ⏎ b"


def test_parse_outputs_keeps_the_input_columns(source_raw_outputs):
    out = parse_outputs(source_raw_outputs)
    assert out["raw_output"].tolist() == source_raw_outputs["raw_output"].tolist()
    assert {"parse_ok", "parsed_answer", "parsed_sources", "observed_action",
            "parse_problem"} <= set(out.columns)
    # The input frame is not modified.
    assert list(source_raw_outputs.columns) == ["question_id", "raw_output"]


# --- malformed replies: each is a parse failure ---------------------------------


@pytest.mark.parametrize(
    ("reply", "problem_part"),
    [
        ("Answer: $150\n\nSources: H08", "3 lines"),                 # a blank line between
        ("Answer: $150\nSources: H08\nThanks!", "3 lines"),          # a third line
        ("Answer: $150", "no second line"),                          # missing Sources:
        ("Answer: $150\nSee H08", "second line"),                    # wrong second key
        ("answer: $150\nsources: H08", "first line"),                # lower-case keys
        ("ANSWER: $150\nSOURCES: H08", "first line"),                # upper-case keys
        ("Answer: $150\nsources: H08", "second line"),               # one lower-case key
        ("Answer:$150\nSources: H08", "first line"),                 # no space after key
        ("Sources: H08\nAnswer: $150", "first line"),                # swapped lines
        ("Answer:  \nSources: H08", "answer is empty"),              # empty answer
        ("Answer: \nSources: H08", "nothing after"),                 # empty answer
        ("Answer: $150\nSources: ", "second line"),                  # empty Sources
        ("Answer: $150\nSources: H08,", "empty ID"),                 # trailing comma
        ("Answer: $150\nSources: H08,,H11", "empty ID"),             # double comma
        ("Answer: $150\rSources: H08", "no second line"),            # a bare CR
        ("", "empty"),
        ("   \n  ", "empty"),
        (None, "no reply"),
        ("- Answer: $150\n- Sources: H08", "first line"),            # bullets
    ],
)
def test_malformed_replies_fail(reply, problem_part):
    result = parse_reader_output(reply)
    assert result.parse_ok is False
    assert result.action == "parse failure"
    assert result.answer is None
    assert result.sources == ()
    assert problem_part in result.problem


# --- documented acceptances --------------------------------------------------------


def test_crlf_line_end_is_accepted():
    result = parse_reader_output("Answer: $150 per week\r\nSources: H08\r\n")
    assert (result.parse_ok, result.answer, result.sources, result.action) == (
        True, "$150 per week", ("H08",), "answer")


def test_trailing_and_surrounding_spaces_are_trimmed():
    result = parse_reader_output("  Answer: $150 per week   \nSources:   H08 , H11  \n\n")
    assert result.parse_ok
    assert result.answer == "$150 per week"
    assert result.sources == ("H08", "H11")


def test_the_answer_is_not_rewritten():
    """Inner spacing, case and punctuation are kept exactly as the reader wrote them."""
    result = parse_reader_output("Answer: no  prior  DATA, experience.\nSources: H12")
    assert result.answer == "no  prior  DATA, experience."


@pytest.mark.parametrize("none", ["none", "None", "NONE"])
def test_sources_none_means_no_sources(none):
    result = parse_reader_output(f"Answer: NOT IN HANDBOOK\nSources: {none}")
    assert result.parse_ok
    assert result.sources == ()
    assert result.action == "abstain"


def test_sources_are_split_on_commas_only():
    assert parse_reader_output("Answer: x\nSources: H03,H11, H10").sources == ("H03", "H11", "H10")
    # An ID that names no passage parses as written; the screen reports it
    # (test_screen.py::test_an_id_that_does_not_exist).
    assert parse_reader_output("Answer: $150 per week\nSources: H08, H99").sources == ("H08", "H99")
    # Without a comma, two IDs are one (non-existent) ID; the parser does not guess.
    assert parse_reader_output("Answer: x\nSources: H08 H11").sources == ("H08 H11",)


@pytest.mark.parametrize(
    ("answer", "action"),
    [
        ("NOT IN HANDBOOK", "abstain"),
        ("NOT IN HANDBOOK. Ask the desk.", "abstain"),
        ("PREMISE NOT SUPPORTED: there are no weekend forklift classes.", "flag premise"),
        ("PREMISE NOT SUPPORTED", "flag premise"),
        # The prefixes are exact and case-sensitive; anything else is an answer.
        ("not in handbook", "answer"),
        ("The premise is not supported.", "answer"),
        ("Sadly NOT IN HANDBOOK", "answer"),
    ],
)
def test_action_comes_from_the_answer_prefix(answer, action):
    result = parse_reader_output(f"Answer: {answer}\nSources: none")
    assert result.parse_ok
    assert result.action == action
    assert result.answer == answer


# --- assert_all_parsed --------------------------------------------------------------


def test_assert_all_parsed_passes_on_the_recorded_replies(parsed):
    assert_all_parsed(parsed)


def test_assert_all_parsed_names_the_question_and_shows_the_output(source_raw_outputs):
    broken = source_raw_outputs.copy()
    third_line = "Answer: NOT IN HANDBOOK\nSources: none\nI hope this helps."
    broken.loc[broken["question_id"] == "Q3", "raw_output"] = third_line
    broken.loc[broken["question_id"] == "Q5", "raw_output"] = "Answer: NOT IN HANDBOOK"
    with pytest.raises(ReplyParseError) as caught:
        assert_all_parsed(parse_outputs(broken))
    message = str(caught.value)
    assert "2 reader replies did not parse" in message
    assert "Q3:" in message and "Q5:" in message
    assert "Q1:" not in message and "Q6:" not in message
    assert repr(third_line) in message
    assert "3 lines" in message
    assert isinstance(caught.value, AssertionError)


def test_assert_all_parsed_singular_message():
    frame = pd.DataFrame({"question_id": ["Q9"], "raw_output": ["Answer: x\nSources: H01,"]})
    with pytest.raises(ReplyParseError, match=r"1 reader reply did not parse:\nQ9: "):
        assert_all_parsed(parse_outputs(frame))
