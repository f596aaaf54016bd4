"""The support judge: its prompt, its strict one-word parser, its requests and its replies.

Tests marked ``slow`` run SmolLM2 live.
"""
from __future__ import annotations

import pandas as pd
import pytest

from helpers import judge
from helpers.judge import (
    JUDGE_GRAMMAR,
    JudgeParseError,
    assert_judge_parsed,
    judge_messages,
    judge_requests,
    parse_judge_reply,
)
from helpers.reader import load_reader, read_transcript


@pytest.mark.parametrize(("text", "supported"), [
    ("yes", True), ("no", False), ("  yes\n", True), ("\nno ", False),
])
def test_yes_and_no_parse(text, supported):
    reply = parse_judge_reply(text)
    assert reply.parse_ok and reply.supported is supported and reply.problem == ""


@pytest.mark.parametrize(("text", "problem"), [
    ("Yes", "'Yes' is not exactly 'yes' or 'no'"),
    ("yes.", "not exactly"),
    ("no, it does not", "not exactly"),
    ("yes\nno", "not exactly"),
    ("maybe", "not exactly"),
    ("", "the reply is empty"),
    ("   ", "the reply is empty"),
    (None, "there is no reply"),
])
def test_anything_else_is_a_parse_failure(text, problem):
    reply = parse_judge_reply(text)
    assert not reply.parse_ok and reply.supported is None
    assert problem in reply.problem


def test_the_gate_names_every_failed_row():
    frame = pd.DataFrame({"review_id": ["R1", "R2", "R3"], "judge_raw": ["yes", "Yes.", "x"]})
    parsed = [parse_judge_reply(t) for t in frame["judge_raw"]]
    frame["judge_parse_ok"] = [p.parse_ok for p in parsed]
    frame["judge_problem"] = [p.problem for p in parsed]
    with pytest.raises(JudgeParseError, match=r"2 judge replies did not parse:\nR2: .*'Yes.'"
                                              r"\nR3: "):
        assert_judge_parsed(frame)
    assert_judge_parsed(frame.iloc[:1])  # all parsed: nothing raised


def test_the_prompt_shows_what_the_human_test_shows():
    messages = judge_messages("How much is the weekly training stipend?", "$150 per week",
                              [("H08", "Students receive a training stipend of $150 per week.")])
    assert messages[0] == {"role": "system", "content": judge.JUDGE_SYSTEM_PROMPT}
    user = messages[1]["content"]
    assert user.startswith("CITED PASSAGE:\nH08: Students receive a training stipend")
    assert "QUESTION: How much is the weekly training stipend?\nANSWER: $150 per week\n" in user
    assert user.endswith("Reply yes or no.")
    empty = judge_messages("Q?", "A", [])[1]["content"]
    assert empty.startswith("CITED PASSAGE:\n(no passage was cited)\n")


def test_settings_name_the_grammar_and_drop_the_repetition_penalty():
    settings = judge.judge_settings()
    assert settings["grammar"] == JUDGE_GRAMMAR
    assert settings["decoding"] == "grammar-constrained (llguidance)"
    assert settings["repetition_penalty"] == 1.0 and settings["do_sample"] is False


def test_the_recorder_label_names_the_judge_command_and_its_grammar():
    label = judge.judge_recorder_label()
    assert label.startswith(judge.JUDGE_COMMAND + " (transformers ")
    assert label.endswith(", CPU, greedy under the yes-or-no grammar)")
    assert "llguidance " in label and "helpers.reader" not in label


def _review(rows):
    return pd.DataFrame(rows, columns=["review_id", "question_id", "reviewed_answer",
                                       "reviewed_sources", "verdict"])


def test_requests_cover_yes_no_verdicts_and_share_identical_prompts():
    review = _review([
        ("R1", "Q1", "$150 per week", "H08", "supported"),
        ("R2", "Q1", "NOT IN HANDBOOK", "none", "not applicable"),
        ("R3", "Q1", "$150 per week", "H08", "supported"),       # same prompt as R1
        ("R4", "Q1", "$200", "H08, H99", "not supported"),       # H99 does not exist
    ])
    requests = judge_requests(review, {"Q1": "How much?"}, {"H08": "Stipend $150 per week."})
    assert list(requests["review_id"]) == ["R1", "R3", "R4"]
    assert list(requests["request_id"]) == ["R1", "R1", "R4"]
    user = requests.loc[2, "messages"][1]["content"]
    assert "H08: Stipend $150 per week.\nH99: (no such passage in the handbook)" in user


# --------------------------------------------------------------------- live, slow


@pytest.mark.slow
def test_the_live_judge_replies_yes_or_no_and_replays_from_a_recording(tmp_path):
    live = load_reader(judge.JUDGE_READER, mode="live")
    review = _review([
        ("R1", "Q1", "$150 per week", "H08", "supported"),
        ("R2", "Q1", "$200 per week", "H08", "not supported"),
    ])
    passages = {"H08": "Data Support Certificate students receive a training stipend of "
                       "$150 per week. Students must attend at least 90 percent of classes "
                       "to receive it."}
    requests = judge_requests(review, {"Q1": "How much is the weekly training stipend?"},
                              passages)
    path = tmp_path / "transcript.jsonl"
    entries = judge.record_judge(live, requests, path)
    assert [e.raw_output for e in entries] == [r for r in
                                              judge_replies_live(live, requests)]
    assert all(e.raw_output in ("yes", "no") and e.ended_by_eos for e in entries)
    assert {e.question_id for e in entries} == {"R1", "R2"}
    assert {e.recorded_by for e in entries} == {judge.judge_recorder_label()}
    recorded = load_reader(judge.JUDGE_READER, mode="recorded", transcript=path)
    replayed = judge.judge_replies(recorded, requests)
    assert list(replayed["judge_raw"]) == [e.raw_output for e in entries]
    assert set(replayed["judge_mode"]) == {"recorded"}
    # A changed answer is another request: replay refuses it, naming the row.
    changed = requests.copy()
    changed.at[1, "messages"] = judge_messages("How much is the weekly training stipend?",
                                               "$250 per week",
                                               [("H08", passages["H08"])])
    with pytest.raises(Exception, match="question R2"):
        judge.judge_replies(recorded, changed)
    assert len(read_transcript(path)) == 2
    # Only the requests with no recorded reply are asked again: none here, then one.
    before = path.read_bytes()
    assert judge.record_judge(live, requests, path, only_missing=True) == []
    assert path.read_bytes() == before
    more = pd.concat([requests, changed.iloc[[1]].assign(review_id="R3", request_id="R3")],
                     ignore_index=True)
    added = judge.record_judge(live, more, path, only_missing=True)
    assert [e.question_id for e in added] == ["R3"]
    assert [e.question_id for e in read_transcript(path)] == ["R1", "R2", "R3"]


def judge_replies_live(live, requests):
    return list(judge.judge_replies(live, requests)["judge_raw"])
