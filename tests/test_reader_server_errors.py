"""Server mode against servers that refuse, stall or answer badly, over real sockets.

Each bad server is a small HTTP server on 127.0.0.1 (``tests/fake_server.py``), because a
real engine cannot be made to misbehave on demand; the good paths run against the real
llama.cpp server in ``test_reader_server.py``. Every error must name the URL, the
question and what was wrong, and nothing may reach a transcript. The same small server
also stands in for what no engine on this machine can be: vLLM (no GPU here) and
llama.cpp's own ``llama-server``, which report the path of the model they serve.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("openai")

from fake_server import SMOL_FILE, FakeServer, echo_question, good_reply  # noqa: E402

from helpers.reader.generation import _question_of  # noqa: E402

from helpers import reader  # noqa: E402
from helpers.paths import PROJECT_ROOT  # noqa: E402
from helpers.reader import (  # noqa: E402
    TRANSCRIPT_PATH,
    ServerError,
    WrongModelError,
    generate_all,
    load_reader,
    read_transcript,
)
from helpers.reader.__main__ import main as reader_cli  # noqa: E402
from helpers.reader.llama_server import free_port  # noqa: E402
from helpers.reader.record import record_into  # noqa: E402
from helpers.reader.report import mode_sentence, token_count_note  # noqa: E402
from helpers.reader.server import check_reply, ENGINES  # noqa: E402
from helpers.reader.transcript import CONSTRAINED  # noqa: E402

pytestmark = pytest.mark.usefixtures("no_server_environment")

SMOL = "smollm2_135m_instruct"
QWEN = "qwen_1_5b_instruct"
QWEN_REVISION = "989aa7980e4cf806f80c7fef2b1adb7bc71aa306"


@pytest.fixture
def transcript_copy(tmp_path):
    path = tmp_path / "reader-transcript.jsonl"
    shutil.copyfile(TRANSCRIPT_PATH, path)
    return path


def first_question(inputs):
    return inputs["messages"].iloc[0], inputs["question_id"].iloc[0]


# ------------------------------------------------------------------ cannot connect


def test_connection_refused_at_load_names_the_url():
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(ServerError) as caught:
        load_reader(SMOL, mode="server", url=url)
    message = str(caught.value)
    assert url in message and "before any question was sent" in message
    assert "Connection refused" in message or "ConnectError" in message


def test_connection_refused_mid_lesson_names_the_question(inputs):
    with FakeServer("ok") as fake:
        server_reader = load_reader(SMOL, mode="server", url=fake.url)
        url = fake.url
    # The server is gone now: the next request is refused.
    messages, qid = first_question(inputs)
    with pytest.raises(ServerError) as caught:
        server_reader.generate(messages, qid)
    assert caught.value.url == url and caught.value.question_id == qid
    assert f"question {qid}" in str(caught.value) and "cannot connect" in str(caught.value)


def test_a_stalled_server_times_out_within_the_configured_bound(inputs, monkeypatch):
    monkeypatch.setenv("RIVERTON_READER_TIMEOUT", "0.5")
    with FakeServer("stall") as fake:
        server_reader = load_reader(SMOL, mode="server", url=fake.url)
        assert server_reader.timeout == 0.5
        messages, qid = first_question(inputs)
        started = time.monotonic()
        with pytest.raises(ServerError) as caught:
            server_reader.generate(messages, qid)
        elapsed = time.monotonic() - started
    assert elapsed < 5, elapsed
    assert "no reply within 0.5 s" in str(caught.value) and fake.url in str(caught.value)
    assert "RIVERTON_READER_TIMEOUT" in str(caught.value)


@pytest.mark.parametrize("variable, value", [
    ("RIVERTON_READER_TIMEOUT", "soon"), ("RIVERTON_READER_TIMEOUT", "0"),
    ("RIVERTON_READER_CONCURRENCY", "0"), ("RIVERTON_READER_CONCURRENCY", "1000"),
])
def test_bad_settings_are_refused_naming_the_variable(variable, value, monkeypatch):
    monkeypatch.setenv(variable, value)
    with FakeServer("ok") as fake:
        with pytest.raises(reader.ReaderError, match=variable):
            load_reader(SMOL, mode="server", url=fake.url)


# -------------------------------------------------------------------- bad replies


@pytest.mark.parametrize("behaviour, expected", [
    ("http_500", "HTTP 500: {\"error\": {\"message\": \"model crashed\"}}"),
    ("http_404", "HTTP 404"),
    ("no_choices", "the reply has no choices"),
    ("empty_choices", "the reply has no choices"),
    ("empty_message", "the reply's message is empty"),
    ("null_message", "the reply's message is empty"),
    ("not_json", "the reply is not JSON: <html>proxy error</html>"),
    ("no_usage", "no prompt_tokens in usage"),
    ("no_finish_reason", "finish_reason None"),
    ("hidden_cap", "took all 48 tokens yet says it ended with the end-of-sequence token"),
    ("server_cap", "cut off after 20 tokens, before the 48 requested"),
    ("over_cap", "took 60 tokens, more than the 48 requested"),
])
def test_each_bad_reply_names_url_question_and_problem(behaviour, expected, inputs,
                                                       transcript_copy):
    before = transcript_copy.read_bytes()
    with FakeServer(behaviour) as fake:
        server_reader = load_reader(SMOL, mode="server", url=fake.url)
        # The lesson's call: it stops here, as a parse failure would stop the page.
        with pytest.raises(ServerError) as caught:
            generate_all(server_reader, inputs)
        # The record command's call: the transcript is left exactly as it was.
        with pytest.raises(ServerError):
            record_into(load_reader(SMOL, mode="server", url=fake.url), inputs,
                        transcript_copy)
    message = str(caught.value)
    assert expected in message, message
    assert fake.url in message and caught.value.question_id in set(inputs["question_id"])
    assert f"question {caught.value.question_id}" in message
    assert transcript_copy.read_bytes() == before
    assert sorted(p.name for p in transcript_copy.parent.iterdir()) == [transcript_copy.name]


def test_a_hidden_cap_is_caught_only_where_the_engine_leaves_eos_uncounted():
    """48 counted tokens ending in "stop" is impossible for llama-cpp-python (it does not
    count EOS) but legitimate for vLLM, whose 48th token may be the EOS."""
    reply = good_reply(text="Answer: x\nSources: none", finish="stop", completion_tokens=48)
    assert check_reply(reply, 48, ENGINES["vLLM"]).finish_reason == "stop"
    with pytest.raises(ValueError, match="did not report it"):
        check_reply(reply, 48, ENGINES["llama-cpp-python"])


# -------------------------------------------------------------------- concurrency


def test_prompts_run_concurrently_within_the_bound_and_come_back_in_order(inputs):
    qids = list(inputs["question_id"])
    # The first questions answer last, so arrival order is the reverse of question order.
    delays = {qid: 0.1 * (len(qids) - i) for i, qid in enumerate(qids)}
    with FakeServer(echo_question(delays)) as fake:
        server_reader = load_reader(SMOL, mode="server", url=fake.url, concurrency=3)
        results = generate_all(server_reader, inputs)
    assert list(results["question_id"]) == qids
    assert list(results["raw_output"]) == [f"Answer: {q}\nSources: none" for q in qids]
    assert fake.max_in_flight == 3
    assert len(fake.requests) == len(qids)  # one request per prompt: counting reused it


def test_a_bound_of_one_sends_one_prompt_at_a_time(inputs):
    with FakeServer(echo_question({q: 0.05 for q in inputs["question_id"]})) as fake:
        generate_all(load_reader(SMOL, mode="server", url=fake.url, concurrency=1), inputs)
    assert fake.max_in_flight == 1 and len(fake.requests) == len(inputs)


def test_one_failed_prompt_among_many_stops_the_batch_naming_it(inputs):
    with FakeServer(echo_question(fail={"Q4"})) as fake:
        server_reader = load_reader(SMOL, mode="server", url=fake.url, concurrency=4)
        with pytest.raises(ServerError) as caught:
            generate_all(server_reader, inputs)
    assert caught.value.question_id == "Q4" and "failed on Q4" in str(caught.value)


# ------------------------------------------------------- requests and engine naming


@pytest.mark.parametrize("engine, penalty", [
    ("llama-cpp-python", "repeat_penalty"), ("vLLM", "repetition_penalty"),
    (None, "repetition_penalty"),
])
def test_requests_are_greedy_capped_and_name_the_penalty_as_the_engine_does(engine, penalty,
                                                                            inputs):
    with FakeServer("ok", engine=engine) as fake:
        server_reader = load_reader(SMOL, mode="server", url=fake.url)
        server_reader.generate(*first_question(inputs))
    (body,) = fake.requests
    assert body["temperature"] == 0 and body["max_tokens"] == 48
    assert body[penalty] == 1.05
    other = {"repeat_penalty", "repetition_penalty"} - {penalty}
    assert not other & set(body)
    assert body["model"] == fake.model_id
    assert body["messages"] == first_question(inputs)[0]


def test_the_grammar_travels_in_each_engines_own_form(inputs):
    from helpers.reader import constrained

    messages, qid = first_question(inputs)
    ids = inputs["retrieved_ids"].iloc[0]
    with FakeServer("ok", engine="llama-cpp-python") as fake:
        constrained.generate_constrained(load_reader(SMOL, mode="server", url=fake.url),
                                         messages, ids, qid)
    assert fake.requests[0]["grammar"] == constrained.build_gbnf(ids)
    with FakeServer("ok", engine="vLLM") as fake:
        constrained.generate_constrained(load_reader(SMOL, mode="server", url=fake.url),
                                         messages, ids, qid)
    assert fake.requests[0]["structured_outputs"] == {"grammar": constrained.build_grammar(ids)}


def test_an_engine_that_cannot_enforce_the_grammar_is_refused(inputs):
    from helpers.reader import constrained

    messages, qid = first_question(inputs)
    with FakeServer("ok", engine=None) as fake:
        server_reader = load_reader(SMOL, mode="server", url=fake.url)
        with pytest.raises(ServerError, match="cannot enforce the reply format") as caught:
            constrained.generate_constrained(server_reader, messages,
                                             inputs["retrieved_ids"].iloc[0], qid)
        assert fake.requests == []  # refused before anything was sent
    assert caught.value.question_id == qid


# ------------------------------------------------------------ model and revision


def test_a_server_with_another_model_is_refused_naming_both():
    with FakeServer("ok", model_id="gpt-4o-mini") as fake:
        with pytest.raises(WrongModelError) as caught:
            load_reader(SMOL, mode="server", url=fake.url)
    message = str(caught.value)
    assert "gpt-4o-mini" in message and "HuggingFaceTB/SmolLM2-135M-Instruct" in message
    assert SMOL_FILE in message and fake.url in message


def test_a_reported_snapshot_revision_is_checked_against_the_pin():
    other = "0" * 40
    cache = "/hf/hub/models--Qwen--Qwen2.5-1.5B-Instruct/snapshots"
    with FakeServer("ok", engine="vLLM", model_id=f"{cache}/{other}") as fake:
        with pytest.raises(WrongModelError) as caught:
            load_reader(QWEN, mode="server", url=fake.url)
    assert other in str(caught.value) and QWEN_REVISION in str(caught.value)
    with FakeServer("ok", engine="vLLM", model_id="Qwen/Qwen2.5-1.5B-Instruct",
                    model_root=f"{cache}/{QWEN_REVISION}") as fake:
        server_reader = load_reader(QWEN, mode="server", url=fake.url)
    assert server_reader.server.served_model == "Qwen/Qwen2.5-1.5B-Instruct"
    assert server_reader.server.revision_checked is True
    assert server_reader.server.engine_label == "vLLM 0.0-test"


SMOL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
QWEN_ID = "Qwen/Qwen2.5-1.5B-Instruct"
QWEN_GGUF = "/srv/models/qwen2.5-1.5b-instruct-q4_k_m.gguf"


@pytest.mark.parametrize("engine, key, listed, path, served, pinned", [
    # vLLM loads GGUF files too; it reports the file as the model's root.
    ("vLLM", QWEN, QWEN_ID, QWEN_GGUF, "qwen2.5-1.5b-instruct-q4_k_m.gguf", QWEN_REVISION),
    # llama.cpp's llama-server reports the file in /props.
    ("llama.cpp", QWEN, QWEN_ID, QWEN_GGUF, "qwen2.5-1.5b-instruct-q4_k_m.gguf",
     QWEN_REVISION),
    ("llama.cpp", SMOL, SMOL_ID, "/srv/models/SmolLM2-135M-Instruct.Q8_0.gguf",
     "SmolLM2-135M-Instruct.Q8_0.gguf", SMOL_FILE),
    ("vLLM", SMOL, SMOL_ID, "/srv/models/SmolLM2-135M-Instruct.Q8_0.gguf",
     "SmolLM2-135M-Instruct.Q8_0.gguf", SMOL_FILE),
])
def test_another_gguf_file_under_the_pinned_models_name_is_refused(engine, key, listed, path,
                                                                   served, pinned):
    """A model listed under the reader's own name is refused when the server reports that
    it serves a GGUF file other than the pinned one, naming both."""
    with FakeServer("ok", engine=engine, model_id=listed, model_root=path,
                    model_path=path) as fake:
        with pytest.raises(WrongModelError) as caught:
            load_reader(key, mode="server", url=fake.url)
        assert fake.requests == []
    message = str(caught.value)
    assert f"the server lists {listed} but serves the GGUF file" in message
    assert served in message and pinned in message and fake.url in message


def test_a_gguf_reader_served_from_a_snapshot_folder_is_refused():
    """SmolLM2 is pinned to its Q4_1 GGUF file; vLLM serving the Hub snapshot of the same
    model (unquantised weights) serves another checkpoint."""
    snapshot = f"/hf/hub/models--HuggingFaceTB--SmolLM2-135M-Instruct/snapshots/{'1' * 40}"
    with FakeServer("ok", engine="vLLM", model_id=SMOL_ID, model_root=snapshot) as fake:
        with pytest.raises(WrongModelError) as caught:
            load_reader(SMOL, mode="server", url=fake.url)
    assert f"serves {snapshot}, not a GGUF file" in str(caught.value)
    assert SMOL_FILE in str(caught.value)


def test_the_pinned_file_named_by_llama_server_is_accepted_by_name():
    """llama.cpp's llama-server on another machine: the file name is the pinned one, its
    bytes cannot be read from here, and the note says so."""
    with FakeServer("ok", engine="llama.cpp", model_id=SMOL_ID,
                    model_path=f"/srv/models/{SMOL_FILE}") as fake:
        server_reader = load_reader(SMOL, mode="server", url=fake.url)
    info = server_reader.server
    assert info.engine_label == "llama.cpp b0000-test"
    assert info.revision_checked is None and info.label == SMOL_FILE
    assert "reports the file name SmolLM2-135M-Instruct.Q4_1.gguf but not its SHA-256" in (
        info.revision_note)


def test_a_snapshot_path_is_kept_from_its_cache_folder_on_in_the_provenance():
    """``vllm serve PATH`` without ``--served-model-name`` lists the local path as the
    model id; the transcript keeps no folder of the server's machine."""
    folder = "/home/teacher/.cache/huggingface/hub"
    cached = f"models--Qwen--Qwen2.5-1.5B-Instruct/snapshots/{QWEN_REVISION}"
    with FakeServer("ok", engine="vLLM", model_id=f"{folder}/{cached}") as fake:
        server_reader = load_reader(QWEN, mode="server", url=fake.url)
    info = server_reader.server
    assert info.served_model == f"{folder}/{cached}"  # requests name it as listed
    assert info.revision_checked is True and info.label == cached
    assert f"serving {cached};" in info.provenance and "/home/teacher" not in info.provenance


def test_a_server_that_reports_no_revision_is_accepted_and_says_so():
    with FakeServer("ok", engine="vLLM", model_id="Qwen/Qwen2.5-1.5B-Instruct") as fake:
        server_reader = load_reader(QWEN, mode="server", url=fake.url)
    assert server_reader.server.revision_checked is None
    assert "reports no revision" in server_reader.server.revision_note
    assert QWEN_REVISION in server_reader.server.revision_note
    assert server_reader.revision == QWEN_REVISION  # the key uses the pin, as live does


# ---------------------------------------------------------------------- modes


def test_auto_mode_uses_the_server_when_a_url_is_set(monkeypatch):
    with FakeServer("ok") as fake:
        monkeypatch.setenv("RIVERTON_READER_URL", fake.url)
        assert load_reader(SMOL).mode == "server"
        monkeypatch.setenv("RIVERTON_READER_MODE", "recorded")
        assert load_reader(SMOL).mode == "recorded"  # an explicit mode wins


def test_auto_mode_with_a_dead_server_fails_rather_than_replaying(monkeypatch):
    monkeypatch.setenv("RIVERTON_READER_URL", f"http://127.0.0.1:{free_port()}/v1")
    with pytest.raises(ServerError):
        load_reader(QWEN)


def test_server_mode_without_a_url_says_how_to_give_one():
    with pytest.raises(reader.ReaderError, match="RIVERTON_READER_URL"):
        load_reader(SMOL, mode="server")


def test_a_url_without_v1_gets_it_and_a_bad_url_is_refused():
    with FakeServer("ok") as fake:
        root = fake.url.removesuffix("/v1")
        assert load_reader(SMOL, mode="server", url=root + "/").url == fake.url
    with pytest.raises(reader.ReaderError, match="not an http"):
        load_reader(SMOL, mode="server", url="127.0.0.1:8000")


# ------------------------------------------------------------ what the page says


def test_recorded_and_live_mode_sentences_are_unchanged(inputs):
    recorded = load_reader(QWEN, mode="recorded")
    results = generate_all(recorded, inputs)
    assert mode_sentence(recorded, results) == (
        "**Reader mode for this render:** recorded. The outputs below were replayed from "
        "the recorded transcript `data/riverton/reader-transcript.jsonl`, for "
        f"`Qwen/Qwen2.5-1.5B-Instruct` at revision `{QWEN_REVISION}`. The recorded entries "
        "were transcribed from a reference render of this lesson made with the pinned "
        "model; running the model live needs its weights in the local Hugging Face cache "
        "(see the README)."
    )
    assert token_count_note(results) is None
    live_like = results.assign(mode="live", provenance=None)
    assert mode_sentence(recorded, live_like) == (
        "**Reader mode for this render:** live. The outputs below were generated live on "
        "this machine with transformers, for `Qwen/Qwen2.5-1.5B-Instruct` at revision "
        f"`{QWEN_REVISION}`."
    )


# --------------------------------------------------------- the record command


def test_record_against_a_refusing_server_exits_with_the_error(transcript_copy, capsys):
    before = transcript_copy.read_bytes()
    url = f"http://127.0.0.1:{free_port()}/v1"
    assert reader_cli(["record", "--reader", SMOL, "--server", url,
                       "--transcript", str(transcript_copy)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: reader server ") and url in err
    assert transcript_copy.read_bytes() == before


@pytest.mark.slow  # a fresh interpreter imports the book's stack: about 15 s
def test_an_interrupted_record_leaves_the_transcript_as_it_was(transcript_copy):
    before = transcript_copy.read_bytes()
    with FakeServer("stall") as fake:
        process = subprocess.Popen(
            [sys.executable, "-m", "helpers.reader", "record", "--reader", SMOL,
             "--server", fake.url, "--transcript", str(transcript_copy)],
            cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env={**os.environ, "RIVERTON_READER_TIMEOUT": "60"},
        )
        try:
            deadline = time.monotonic() + 60
            while not fake.requests and time.monotonic() < deadline:
                time.sleep(0.1)
            assert fake.requests, "the record command never reached the server"
            process.send_signal(signal.SIGINT)
            process.wait(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert process.returncode != 0
    assert transcript_copy.read_bytes() == before
    assert sorted(p.name for p in transcript_copy.parent.iterdir()) == [transcript_copy.name]
    assert read_transcript(transcript_copy)


def test_constrained_replies_from_a_server_running_the_llguidance_grammar_replay_as_live(
        inputs, transcript_copy, capsys):
    """vLLM's guidance backend runs lesson 3's own Lark grammar, so ``record --server
    --constrained`` keys its replies exactly as a live constrained run does, and lesson 3's
    replay finds them. (A stand-in for vLLM: no GPU here.)"""
    from helpers.reader import constrained

    before = read_transcript(transcript_copy)
    with FakeServer(echo_question(), engine="vLLM", model_id=SMOL_ID) as fake:
        assert reader_cli(["record", "--reader", SMOL, "--server", fake.url, "--constrained",
                           "--transcript", str(transcript_copy)]) == 0
    assert "wrote 6 entries of smollm2_135m_instruct (constrained)" in capsys.readouterr().out
    grammars = [constrained.build_grammar(ids) for ids in inputs["retrieved_ids"]]
    # Four requests in flight: they reach the server in any order.
    assert sorted(body["structured_outputs"]["grammar"] for body in fake.requests) == sorted(
        grammars)
    recorded = load_reader(SMOL, mode="recorded", transcript=transcript_copy)
    after = read_transcript(transcript_copy)
    new = [e for e in after if e not in before]
    assert [e.question_id for e in new] == list(inputs["question_id"])
    for entry, messages, grammar in zip(new, inputs["messages"], grammars):
        live_settings = constrained.constrained_settings(recorded.settings, grammar)
        assert entry.key == recorded.key(messages, live_settings)  # a live run's key
        assert entry.decoding == CONSTRAINED
        assert entry.recorded_by == "server vLLM 0.0-test, greedy under the reply grammar"
    for row in inputs.itertuples(index=False):
        replayed = constrained.replay_constrained(recorded, row.messages, row.retrieved_ids,
                                                  row.question_id)
        assert replayed.raw_output == f"Answer: {row.question_id}\nSources: none"
    # The unconstrained replies to the same prompts are still there, untouched.
    assert [e for e in after if e.decoding != CONSTRAINED] == [
        e for e in before if e.decoding != CONSTRAINED]


def test_a_constrained_server_reply_cut_short_exits_naming_question_reply_and_url(
        transcript_copy, capsys):
    """A reply the server cut at the token cap did not complete the grammar: ``record``
    says so in one line (question, reply, URL), with no traceback and no entry written."""
    before = transcript_copy.read_bytes()

    def cut_short(body):
        qid = _question_of(body.get("messages", [])) or "?"
        if qid == "Q4":  # all 48 tokens spent inside the answer line
            return 200, good_reply(text="Answer: the stipend is", finish="length",
                                   completion_tokens=48), 0.0
        return 200, good_reply(text=f"Answer: {qid}\nSources: none"), 0.0

    with FakeServer(cut_short, engine="vLLM", model_id=SMOL_ID) as fake:
        assert reader_cli(["record", "--reader", SMOL, "--server", fake.url, "--constrained",
                           "--transcript", str(transcript_copy)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: Q4: the constrained reply 'Answer: the stipend is' from "
                          f"{fake.url} did not complete the grammar"), err
    assert "Traceback" not in err
    assert transcript_copy.read_bytes() == before


def test_a_constrained_server_reply_is_keyed_by_the_grammar_the_server_ran(inputs):
    from helpers.reader import constrained

    messages, qid = first_question(inputs)
    ids = inputs["retrieved_ids"].iloc[0]
    with FakeServer("ok", engine="vLLM", model_id=SMOL_ID) as fake:
        server_reader = load_reader(SMOL, mode="server", url=fake.url)
        forced = constrained.generate_constrained(server_reader, messages, ids, qid)
        plain = server_reader.generate(messages, qid)
    live_settings = constrained.constrained_settings(server_reader.settings,
                                                     constrained.build_grammar(ids))
    assert forced.settings == live_settings
    assert forced.key == server_reader.key(messages, live_settings) != plain.key
    assert len(fake.requests) == 2  # the plain reply was not served from the grammar's
