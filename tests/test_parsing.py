"""The strict two-line parser: the six recorded replies and malformed ones.

The rules under test are those in the module docstring of ``helpers.parsing``: a reply
parses only as ``Answer: <text>`` then ``Sources: none | ID[, ID ...]``; nothing is
repaired.
"""
from __future__ import annotations

import pandas as pd
import pytest

from helpers.parsing import (ReplyParseError, assert_all_parsed, parse_outputs,
                             parse_reader_output, show_line_breaks)

# The reference render's table "Strictly parsed reader outputs".
PRINTED_PARSED = {"Q1": ("$150 per week", "H08", "answer", "answer"),
                  "Q2": ("Applications close on October 15.", "H14", "answer", "answer"),
                  "Q3": ("NOT IN HANDBOOK", "none", "abstain", "answer"),
                  "Q4": ("NO PRIOR DATA EXPERIENCE IS REQUIRED", "H12", "answer", "answer"),
                  "Q5": ("NOT IN HANDBOOK", "H01", "abstain", "abstain"),
                  "Q6": ("NOT IN HANDBOOK", "H11", "abstain", "flag premise")}


def test_six_recorded_replies_parse_as_printed(source_raw_outputs, parsed, questions):
    expected_action = dict(zip(questions["question_id"], questions["expected_action"]))
    assert parsed["question_id"].tolist() == list(PRINTED_PARSED)
    assert parsed["parse_ok"].all() and (parsed["parse_problem"] == "").all()
    for row in parsed.itertuples(index=False):
        answer, sources, observed, expected = PRINTED_PARSED[row.question_id]
        shown = ", ".join(row.parsed_sources) if row.parsed_sources else "none"
        assert (row.parsed_answer, shown, row.observed_action) == (answer, sources, observed)
        assert expected_action[row.question_id] == expected, row.question_id
    # parse_outputs adds its columns to a copy and keeps the replies as they were.
    assert parsed["raw_output"].tolist() == source_raw_outputs["raw_output"].tolist()
    assert list(source_raw_outputs.columns) == ["question_id", "raw_output"]
    assert show_line_breaks(parsed["raw_output"].iloc[0]) == "Answer: $150 per week ⏎ Sources: H08"
    assert show_line_breaks("a\r\nb") == "a ⏎ b"


# --- malformed replies: each is a parse failure ---------------------------------


@pytest.mark.parametrize(("reply", "problem_part"), [
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
])
def test_malformed_replies_fail(reply, problem_part):
    result = parse_reader_output(reply)
    assert result.parse_ok is False
    assert result.action == "parse failure"
    assert result.answer is None
    assert result.sources == ()
    assert problem_part in result.problem


# --- documented acceptances --------------------------------------------------------


@pytest.mark.parametrize(("reply", "answer", "sources", "action"), [
    ("Answer: $150 per week\r\nSources: H08\r\n", "$150 per week", ("H08",), "answer"),
    # White space around the reply and around each field is trimmed...
    ("  Answer: $150 per week   \nSources:   H08 , H11  \n\n", "$150 per week",
     ("H08", "H11"), "answer"),
    # ...but the answer is otherwise kept as written: inner spacing, case, punctuation.
    ("Answer: no  prior  DATA, experience.\nSources: H12", "no  prior  DATA, experience.",
     ("H12",), "answer"),
    ("Answer: NOT IN HANDBOOK\nSources: none", "NOT IN HANDBOOK", (), "abstain"),
    ("Answer: NOT IN HANDBOOK\nSources: None", "NOT IN HANDBOOK", (), "abstain"),
    ("Answer: NOT IN HANDBOOK\nSources: NONE", "NOT IN HANDBOOK", (), "abstain"),
    # Sources are split on commas only; an ID that names no passage parses as written
    # (the screen reports it), and without a comma two IDs are one.
    ("Answer: x\nSources: H03,H11, H10", "x", ("H03", "H11", "H10"), "answer"),
    ("Answer: x\nSources: H08, H99", "x", ("H08", "H99"), "answer"),
    ("Answer: x\nSources: H08 H11", "x", ("H08 H11",), "answer"),
    # The action comes from exact, case-sensitive answer prefixes.
    ("Answer: NOT IN HANDBOOK. Ask the desk.\nSources: none",
     "NOT IN HANDBOOK. Ask the desk.", (), "abstain"),
    ("Answer: PREMISE NOT SUPPORTED: no weekend classes.\nSources: H11",
     "PREMISE NOT SUPPORTED: no weekend classes.", ("H11",), "flag premise"),
    ("Answer: PREMISE NOT SUPPORTED\nSources: none", "PREMISE NOT SUPPORTED", (),
     "flag premise"),
    ("Answer: not in handbook\nSources: none", "not in handbook", (), "answer"),
    ("Answer: The premise is not supported.\nSources: none", "The premise is not supported.",
     (), "answer"),
    ("Answer: Sadly NOT IN HANDBOOK\nSources: none", "Sadly NOT IN HANDBOOK", (), "answer"),
])
def test_documented_acceptances(reply, answer, sources, action):
    result = parse_reader_output(reply)
    assert (result.parse_ok, result.answer, result.sources, result.action, result.problem) == (
        True, answer, sources, action, "")


# --- assert_all_parsed --------------------------------------------------------------


def test_assert_all_parsed_names_the_question_and_shows_the_output(source_raw_outputs, parsed):
    assert_all_parsed(parsed)  # the recorded replies all parse
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
    assert repr(third_line) in message and "3 lines" in message
    assert isinstance(caught.value, AssertionError)
    one = pd.DataFrame({"question_id": ["Q9"], "raw_output": ["Answer: x\nSources: H01,"]})
    with pytest.raises(ReplyParseError, match=r"1 reader reply did not parse:\nQ9: "):
        assert_all_parsed(parse_outputs(one))
