"""Constrained replies in the transcript: their own key, their own slot, their own replay.

A grammar-constrained reply to a prompt is a different generation from the unconstrained
reply to the same prompt. The key hashes the decoding's name and the grammar, and a new
recording replaces only the entries of the same question, model *and* decoding. Tests
marked ``slow`` run SmolLM2 live.
"""
from __future__ import annotations

import dataclasses

import pytest

from helpers.reader import constrained
from helpers.reader import ReplayError, load_reader, read_transcript, transcript_key
from helpers.reader.__main__ import main as reader_main

from helpers.reader.record import record_into
from helpers.reader.registry import DEFAULT_SETTINGS
from helpers.reader.transcript import (
    UNCONSTRAINED,
    TranscriptError,
    decoding_of,
    describe_difference,
    merge_entries,
    write_transcript,
)
from projects import question_subset

SMOL = "smollm2_135m_instruct"


def _smol_entry(question_id="Q1"):
    return next(e for e in read_transcript() if e.question_id == question_id
                and e.model_id.startswith("HuggingFaceTB") and e.decoding == UNCONSTRAINED)


def _as_constrained(entry, retrieved_ids, raw_output="Answer: $150 per week\nSources: H08",
                    answer_max_tokens=constrained.ANSWER_MAX_TOKENS):
    """The entry re-keyed as a constrained reply (an author-made record, not model output)."""
    grammar = constrained.build_grammar(retrieved_ids, answer_max_tokens=answer_max_tokens)
    settings = constrained.constrained_settings(entry.settings, grammar)
    return dataclasses.replace(
        entry, settings=settings, raw_output=raw_output,
        key=transcript_key(entry.model_id, entry.revision, entry.messages, settings))


def test_plain_greedy_settings_carry_no_decoding_field_so_old_keys_stand():
    assert "decoding" not in DEFAULT_SETTINGS
    assert decoding_of(DEFAULT_SETTINGS) == UNCONSTRAINED
    for entry in read_transcript():
        assert entry.key == transcript_key(entry.model_id, entry.revision, entry.messages,
                                           entry.settings)


def test_constrained_settings_name_the_decoding_and_hash_the_grammar(inputs):
    messages = inputs["messages"].iloc[0]
    grammar = constrained.build_grammar(("H08",))
    settings = constrained.constrained_settings(DEFAULT_SETTINGS, grammar)
    assert decoding_of(settings) == constrained.CONSTRAINED_DECODING
    assert settings["grammar"] == grammar
    assert {k: settings[k] for k in DEFAULT_SETTINGS} == DEFAULT_SETTINGS
    plain = transcript_key("m", "r", messages, DEFAULT_SETTINGS)
    forced = transcript_key("m", "r", messages, settings)
    shorter = transcript_key("m", "r", messages, constrained.constrained_settings(
        DEFAULT_SETTINGS, constrained.build_grammar(("H08",), answer_max_tokens=10)))
    other_ids = transcript_key("m", "r", messages, constrained.constrained_settings(
        DEFAULT_SETTINGS, constrained.build_grammar(("H08", "H14"))))
    assert len({plain, forced, shorter, other_ids}) == 4


def _unconstrained_only():
    """The transcript as it was before any constrained reply was recorded."""
    return [e for e in read_transcript() if e.decoding == UNCONSTRAINED]


def test_merge_keeps_both_decodings_of_one_question():
    entries = _unconstrained_only()
    plain = _smol_entry("Q1")
    forced = _as_constrained(plain, ("H08",))
    merged = merge_entries(entries, [forced])
    assert plain in merged and forced in merged
    assert len(merged) == len(entries) + 1
    # Recording the constrained reply again replaces that reply only.
    again = dataclasses.replace(forced, raw_output="Answer: $150\nSources: H08")
    remerged = merge_entries(merged, [again])
    assert again in remerged and forced not in remerged and plain in remerged
    assert len(remerged) == len(merged)
    # And recording the unconstrained one again leaves the constrained reply alone.
    plain_again = dataclasses.replace(plain, raw_output="changed")
    final = merge_entries(remerged, [plain_again])
    assert plain_again in final and plain not in final and again in final


def test_prompt_passage_ids_reads_the_passages_block(inputs):
    from helpers.reader.transcript import prompt_passage_ids

    for row in inputs.itertuples(index=False):
        assert prompt_passage_ids(row.messages) == tuple(row.retrieved_ids), row.question_id
    q3 = inputs.set_index("question_id").loc["Q3"]
    assert prompt_passage_ids(q3["messages"]) == ()  # "No passages were retrieved."
    assert prompt_passage_ids([{"role": "user", "content": "no such block"}]) == ()


def test_merge_keeps_replies_over_other_passages_beside_each_other(inputs):
    """A recording over the hybrid's passages must not delete lesson 1's tf-idf reply."""
    from helpers.reader.prompts import build_messages

    plain = _smol_entry("Q6")
    q6 = inputs.set_index("question_id").loc["Q6"]
    assert tuple(q6["retrieved_ids"]) != ("H10",)
    other_messages = build_messages("Q6", q6["question"],
                                    [("H10", "Weekend classes are held on Saturday.")])
    other = dataclasses.replace(
        plain, messages=other_messages, raw_output="Answer: Saturday\nSources: H10",
        key=transcript_key(plain.model_id, plain.revision, other_messages, plain.settings))
    merged = merge_entries(_unconstrained_only(), [other])
    assert plain in merged and other in merged
    # Recording over the same passages again replaces that reply alone.
    again = dataclasses.replace(other, raw_output="Answer: On Saturday\nSources: H10")
    remerged = merge_entries(merged, [again])
    assert again in remerged and other not in remerged and plain in remerged


def test_merge_refuses_two_new_entries_for_one_slot():
    plain = _smol_entry("Q1")
    with pytest.raises(TranscriptError, match="two new entries for question Q1"):
        merge_entries([], [plain, dataclasses.replace(plain, raw_output="other")])


@pytest.fixture
def transcript_with_a_constrained_q1(tmp_path):
    path = tmp_path / "reader-transcript.jsonl"
    entries = read_transcript()
    write_transcript(path, merge_entries(entries, [_as_constrained(_smol_entry(), ("H08",))]))
    return path


def test_replay_finds_the_constrained_reply_by_its_own_key(inputs,
                                                           transcript_with_a_constrained_q1):
    recorded = load_reader(SMOL, mode="recorded", transcript=transcript_with_a_constrained_q1)
    row = inputs.iloc[0]
    replayed = constrained.replay_constrained(recorded, row["messages"], row["retrieved_ids"],
                                              "Q1")
    assert replayed.raw_output == "Answer: $150 per week\nSources: H08"
    assert replayed.mode == "recorded" and replayed.grammar_complete is None
    assert replayed.settings["grammar"] == constrained.build_grammar(("H08",))
    # The same prompt without the grammar replays the unconstrained reply.
    assert recorded.generate(row["messages"], "Q1").raw_output == _smol_entry().raw_output


def test_replay_with_another_grammar_is_refused_naming_the_grammar(
        inputs, transcript_with_a_constrained_q1):
    recorded = load_reader(SMOL, mode="recorded", transcript=transcript_with_a_constrained_q1)
    row = inputs.iloc[0]
    with pytest.raises(ReplayError) as caught:
        constrained.replay_constrained(recorded, row["messages"], row["retrieved_ids"], "Q1",
                                       answer_max_tokens=10)
    message = str(caught.value)
    assert "question Q1" in message and "grammar:" in message
    assert "max_tokens=10" not in message  # the grammar is named, not printed
    assert "record --reader smollm2_135m_instruct --constrained" in message


def test_describe_difference_names_each_changed_setting():
    plain = _smol_entry()
    forced = _as_constrained(plain, ("H08",))
    text = describe_difference(forced, plain.model_id, plain.revision, plain.messages,
                               plain.settings)
    assert "decoding: \"grammar-constrained (llguidance)\" recorded, absent now" in text
    assert "grammar:" in text and "characters, sha256" in text
    assert "repetition_penalty" not in text


# --------------------------------------------------------------------- live, slow


@pytest.fixture(scope="module")
def live():
    return load_reader(SMOL, mode="live")


@pytest.mark.slow
def test_recording_constrained_replies_keeps_the_unconstrained_ones(live, inputs, tmp_path):
    path = tmp_path / "reader-transcript.jsonl"
    write_transcript(path, _unconstrained_only())
    before = read_transcript(path)
    one = inputs.iloc[[0]]
    new = record_into(live, one, path, recorded_by="test", constrained=True)
    (entry,) = new
    after = read_transcript(path)
    assert len(after) == len(before) + 1
    assert _smol_entry() in after  # the unconstrained Q1 reply is still there
    assert entry.decoding == constrained.CONSTRAINED_DECODING
    assert entry.settings["grammar"] == constrained.build_grammar(one["retrieved_ids"].iloc[0])
    # The recorded text is what a second live constrained run gives (greedy decoding is
    # deterministic), and replay finds it.
    live_again = constrained.generate_constrained(live, one["messages"].iloc[0], ("H08",), "Q1")
    assert live_again.key == entry.key and live_again.raw_output == entry.raw_output
    assert live_again.output_tokens == entry.output_tokens
    recorded = load_reader(SMOL, mode="recorded", transcript=path)
    replayed = constrained.replay_constrained(recorded, one["messages"].iloc[0], ("H08",), "Q1")
    assert replayed.raw_output == entry.raw_output
    # A second constrained recording replaces the first, nothing else.
    record_into(live, one, path, recorded_by="again", constrained=True)
    final = read_transcript(path)
    assert len(final) == len(after)
    assert [e.recorded_by for e in final if e.key == entry.key] == ["again"]


@pytest.mark.slow
def test_record_command_takes_constrained(live, tmp_path, capsys):
    """``record --constrained`` on a one-question file kept next to a handbook copy."""
    questions = question_subset(tmp_path / "data", "riverton-handbook-questions.csv",
                                "one-question.csv", 1, "Q1 only")
    transcript = tmp_path / "transcript.jsonl"
    code = reader_main(["record", "--reader", SMOL, "--questions", str(questions),
                        "--transcript", str(transcript), "--constrained"])
    assert code == 0
    (entry,) = read_transcript(transcript)
    assert entry.question_id == "Q1" and entry.decoding == constrained.CONSTRAINED_DECODING
    assert "--constrained" in entry.recorded_by and "llguidance" in entry.recorded_by
    assert "wrote 1 entries of smollm2_135m_instruct (constrained)" in capsys.readouterr().out
