"""Server mode against servers that refuse, stall or answer badly, over real sockets.

Each bad server is a small HTTP server on 127.0.0.1 (``tests/fake_server.py``), because a
real engine cannot be made to misbehave on demand; the good paths run against the real
llama.cpp server in ``test_reader_server.py``. Every error must name the URL, the
question and what was wrong, and nothing may reach a transcript. The same small server
also stands in for what no engine on this machine can be: vLLM (no GPU here) and
llama.cpp's own ``llama-server``, which report the path of the model they serve. It is
told which question each prompt belongs to (``question_of``): the question id travels
beside the prompt, never inside a request.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("openai")

from fake_server import SMOL_FILE, FakeServer, echo_question, good_reply, question_of, record  # noqa: E402

from helpers.decoding import CONSTRAINED  # noqa: E402
from helpers.grammar import build_gbnf, build_grammar, constrained_settings  # noqa: E402
from helpers import parsing  # noqa: E402
from helpers.judge import JUDGE_GRAMMAR  # noqa: E402
from runtime.llama_server import free_port  # noqa: E402
from runtime.paths import PROJECT_ROOT  # noqa: E402
from runtime.readers import generate_all, live_check, load_reader, mode_sentence  # noqa: E402
from runtime.records import read_transcript  # noqa: E402
from runtime.registry import ReaderError  # noqa: E402
from runtime.server import ENGINES, ServerError, WrongModelError, check_reply  # noqa: E402

pytestmark = pytest.mark.usefixtures("no_server_environment")

SMOL, QWEN = "smollm2_135m_instruct", "qwen_1_5b_instruct"
SMOL_ID, QWEN_ID = "HuggingFaceTB/SmolLM2-135M-Instruct", "Qwen/Qwen2.5-1.5B-Instruct"
QWEN_REVISION = "989aa7980e4cf806f80c7fef2b1adb7bc71aa306"
CACHE = "/hf/hub/models--Qwen--Qwen2.5-1.5B-Instruct/snapshots"


# ------------------------------------------------------------------ cannot connect


def test_a_server_that_is_not_there_is_named_at_load_and_mid_lesson(inputs):
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(ServerError) as caught:
        load_reader(SMOL, mode="server", url=url)
    assert f"reader server {url}, before any question was sent: listing the served models " \
           "failed: cannot connect" in str(caught.value)
    with FakeServer("ok") as fake:
        server_reader = load_reader(SMOL, mode="server", url=fake.url)
    with pytest.raises(ServerError) as caught:  # the server is gone now
        generate_all(server_reader, inputs.iloc[:1])
    assert caught.value.url == fake.url and caught.value.question_id == "Q1"
    assert f"reader server {fake.url}, question Q1: cannot connect" in str(caught.value)


@pytest.mark.parametrize("variable, value", [
    ("RIVERTON_READER_TIMEOUT", "soon"), ("RIVERTON_READER_TIMEOUT", "0"),
    ("RIVERTON_READER_CONCURRENCY", "0"), ("RIVERTON_READER_CONCURRENCY", "1000"),
])
def test_bad_settings_are_refused_naming_the_variable(variable, value, monkeypatch):
    monkeypatch.setenv(variable, value)
    with FakeServer("ok") as fake:
        with pytest.raises(ReaderError, match=f"environment variable {variable} is '{value}'"):
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
    ("stall", "no reply within 0.5 s (the timeout; set RIVERTON_READER_TIMEOUT to wait longer)"),
])
def test_each_bad_reply_names_url_question_and_problem_and_records_nothing(
        behaviour, expected, inputs, transcript_copy, capsys, monkeypatch):
    before = transcript_copy.read_bytes()
    monkeypatch.setenv("RIVERTON_READER_TIMEOUT", "0.5")
    with FakeServer(behaviour) as fake:
        server_reader = load_reader(SMOL, mode="server", url=fake.url)
        started = time.monotonic()
        with pytest.raises(ServerError) as caught:  # the lesson's call stops here
            generate_all(server_reader, inputs)
        assert time.monotonic() - started < 5  # within the configured bound
        assert record(fake.url, transcript_copy) == 1  # and so does the record command
    message = str(caught.value)
    assert message.startswith(f"reader server {fake.url}, question {caught.value.question_id}: ")
    assert expected in message and caught.value.question_id in set(inputs["question_id"])
    last = capsys.readouterr().err.splitlines()[-1]  # after the progress bar
    assert last.startswith(f"error: reader server {fake.url}, question ")
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


@pytest.mark.parametrize("bound, fail", [(1, set()), (3, set()), (4, {"Q4"})])
def test_prompts_run_within_the_bound_and_come_back_in_order_or_stop_at_one_failed(inputs, bound, fail):
    qids = list(inputs["question_id"])
    # The first questions answer last, so arrival order is the reverse of question order.
    delays = {qid: 0.1 * (len(qids) - i) for i, qid in enumerate(qids)}
    with FakeServer(echo_question(inputs, delays, fail)) as fake:
        server_reader = load_reader(SMOL, mode="server", url=fake.url, concurrency=bound)
        if fail:
            with pytest.raises(ServerError) as caught:
                generate_all(server_reader, inputs)
            assert caught.value.question_id == "Q4" and "HTTP 500" in str(caught.value)
            assert "failed on Q4" in str(caught.value)  # the server's own words
            return
        results = generate_all(server_reader, inputs)
    assert list(results["question_id"]) == qids
    assert list(results["raw_output"]) == [f"Answer: {q}\nSources: none" for q in qids]
    assert fake.max_in_flight == bound
    assert len(fake.requests) == len(qids)  # one request per prompt


# ------------------------------------------------------- requests and the grammar


@pytest.mark.parametrize("engine, penalty, field", [
    ("llama-cpp-python", "repeat_penalty", "grammar"),
    ("vLLM", "repetition_penalty", "structured_outputs"), (None, "repetition_penalty", None)])
def test_requests_are_greedy_and_carry_the_penalty_and_grammar_as_the_engine_names_them(
        inputs, engine, penalty, field):
    rows = inputs.iloc[:1]
    ids = rows["retrieved_ids"].iloc[0]
    with FakeServer("ok", engine=engine, model_id=SMOL_ID) as fake:
        server_reader = load_reader(SMOL, mode="server", url=fake.url)
        plain = generate_all(server_reader, rows).attrs["generations"][0]
        if field is None:
            with pytest.raises(ServerError, match="cannot enforce the reply format") as caught:
                generate_all(server_reader, rows, constrained=True)
            assert caught.value.question_id == "Q1" and len(fake.requests) == 1  # none sent
        else:
            forced = generate_all(server_reader, rows, constrained=True).attrs["generations"][0]
            with pytest.raises(ReaderError, match="not a grammar of its own"):
                generate_all(server_reader, rows, grammar=JUDGE_GRAMMAR)
    body = fake.requests[0]
    assert body["temperature"] == 0 and body["max_tokens"] == 48 and body[penalty] == 1.05
    assert not ({"repeat_penalty", "repetition_penalty"} - {penalty}) & set(body)
    assert body["model"] == SMOL_ID and body["messages"] == rows["messages"].iloc[0]
    if field is None:
        return
    assert len(fake.requests) == 2  # the grammar's reply was not served from the plain one's
    assert fake.requests[1][field] == (build_gbnf(ids) if field == "grammar"
                                       else {"grammar": build_grammar(ids)})
    assert field not in body and forced.key != plain.key
    if engine == "vLLM":  # lesson 3's own grammar: keyed as a live constrained reply
        live = constrained_settings(server_reader.settings, build_grammar(ids))
        assert forced.settings == live
        assert forced.key == server_reader.key(rows["messages"].iloc[0], live)


# ------------------------------------------------------------ model and revision

QWEN_GGUF = "/srv/models/qwen2.5-1.5b-instruct-q4_k_m.gguf"
SMOL_Q8 = "/srv/models/SmolLM2-135M-Instruct.Q8_0.gguf"
SMOL_SNAPSHOT = f"/hf/hub/models--HuggingFaceTB--SmolLM2-135M-Instruct/snapshots/{'1' * 40}"
HOME_CACHE = f"/home/teacher/.cache/huggingface/hub/{CACHE[8:]}/{QWEN_REVISION}"


@pytest.mark.parametrize("engine, key, listed, path, expected", [
    ("llama-cpp-python", SMOL, "gpt-4o-mini", None,
     ["the server serves gpt-4o-mini, but reader", SMOL_ID, SMOL_FILE]),
    ("vLLM", QWEN, f"{CACHE}/{'0' * 40}", None,
     [f"at revision {'0' * 40}", f"pins revision {QWEN_REVISION}"]),
    # A GGUF file other than the pinned one, under the reader's own name: vLLM reports it
    # as the model's root, llama.cpp's llama-server in /props.
    ("vLLM", QWEN, QWEN_ID, QWEN_GGUF, [f"the server lists {QWEN_ID} but serves the GGUF file "
                                        f"{QWEN_GGUF}", QWEN_REVISION]),
    ("llama.cpp", QWEN, QWEN_ID, QWEN_GGUF, [f"serves the GGUF file {QWEN_GGUF}", QWEN_REVISION]),
    ("llama.cpp", SMOL, SMOL_ID, SMOL_Q8, [f"the server lists {SMOL_ID} but serves the GGUF "
                                          f"file SmolLM2-135M-Instruct.Q8_0.gguf", SMOL_FILE]),
    ("vLLM", SMOL, SMOL_ID, SMOL_Q8, ["serves the GGUF file SmolLM2-135M-Instruct.Q8_0.gguf"]),
    # SmolLM2 is pinned to its GGUF file: the Hub snapshot is another checkpoint.
    ("vLLM", SMOL, SMOL_ID, SMOL_SNAPSHOT, [f"serves {SMOL_SNAPSHOT}, not a GGUF file",
                                           SMOL_FILE]),
    # Accepted: what was checked, the label pages and transcripts show, the note.
    ("vLLM", QWEN, QWEN_ID, f"{CACHE}/{QWEN_REVISION}", (True, QWEN_ID, (
        f"the server's model path names revision {QWEN_REVISION}, the pinned one"))),
    # `vllm serve PATH` without --served-model-name lists the path on its disk as the id.
    ("vLLM", QWEN, HOME_CACHE, None, (True, HOME_CACHE[HOME_CACHE.index("models--"):],
                                      "names revision")),
    ("vLLM", QWEN, QWEN_ID, None, (None, QWEN_ID, (
        f"the server reports no revision for {QWEN_ID}, so it is not checked that it serves "
        f"the pinned revision {QWEN_REVISION}"))),
    # llama-server on another machine: the pinned file's name, bytes not readable here.
    ("llama.cpp", SMOL, SMOL_ID, f"/srv/models/{SMOL_FILE}", (None, SMOL_FILE, (
        f"the server reports the file name {SMOL_FILE} but not its SHA-256"))),
])
def test_the_served_model_is_matched_to_the_pin(engine, key, listed, path, expected):
    """Another model, revision or file is refused naming both, before any prompt is sent;
    the pinned one is accepted, saying what could be checked."""
    with FakeServer("ok", engine=engine, model_id=listed, model_root=path, model_path=path) as fake:
        if isinstance(expected, list):
            with pytest.raises(WrongModelError) as caught:
                load_reader(key, mode="server", url=fake.url)
            assert fake.requests == []
            message = str(caught.value)
            assert message.startswith(f"reader server {fake.url}, before any question was sent")
            assert all(part in message for part in expected), message
            return
        server_reader = load_reader(key, mode="server", url=fake.url)
    info, (checked, label, note) = server_reader.server, expected
    assert info.served_model == listed  # requests name it as the server lists it
    assert (info.revision_checked, info.label) == (checked, label) and note in info.revision_note
    assert info.engine_label == f"{engine} {'0.0-test' if engine == 'vLLM' else 'b0000-test'}"
    assert info.provenance == f"server {info.engine_label}, serving {label}; " \
                              f"{info.revision_note}" and "/home/teacher" not in info.provenance
    assert server_reader.revision == server_reader.spec.revision or key == SMOL


# ---------------------------------------------------------------------- modes


def test_a_set_url_decides_auto_mode_and_is_never_skipped(monkeypatch):
    with FakeServer("ok") as fake:
        monkeypatch.setenv("RIVERTON_READER_URL", fake.url)
        assert load_reader(SMOL).mode == "server"
        # /v1 added:
        assert load_reader(SMOL, mode="server", url=fake.url.removesuffix("/v1") + "/").url == fake.url
        monkeypatch.setenv("RIVERTON_READER_MODE", "recorded")
        assert load_reader(SMOL).mode == "recorded"  # an explicit mode wins
    monkeypatch.delenv("RIVERTON_READER_MODE")
    monkeypatch.setenv("RIVERTON_READER_URL", f"http://127.0.0.1:{free_port()}/v1")
    with pytest.raises(ServerError):
        load_reader(QWEN)  # a dead server fails rather than replaying
    monkeypatch.delenv("RIVERTON_READER_URL")
    with pytest.raises(ReaderError, match="RIVERTON_READER_URL=http://HOST:PORT/v1"):
        load_reader(SMOL, mode="server")
    with pytest.raises(ReaderError, match="'127.0.0.1:8000' is not an http"):
        load_reader(SMOL, mode="server", url="127.0.0.1:8000")


def test_recorded_and_live_mode_sentences(inputs):
    recorded = load_reader(QWEN, mode="recorded")
    results = generate_all(recorded, inputs)
    assert mode_sentence(recorded, results) == (
        "**Reader mode for this render:** recorded. Its replies are replayed from the recorded transcript "
        f"`data/riverton/reader-transcript.jsonl`, for `{QWEN_ID}` at revision `{QWEN_REVISION}`. Those "
        "entries were transcribed by hand from the printed reference render of this lesson, which ran the "
        "pinned model: its raw replies, their token counts and stopping flags, and the prompt token counts. "
        "Running the model live needs its weights in the local Hugging Face cache (see the appendix for "
        "authors and instructors).")
    assert mode_sentence(recorded, results.assign(mode="live", provenance=None)) == (
        "**Reader mode for this render:** live. Its replies are generated live on "
        f"this machine with transformers, for `{QWEN_ID}` at revision `{QWEN_REVISION}`.")
    with pytest.raises(ValueError, match="more than one mode"):
        mode_sentence(recorded, results.assign(mode=["live"] + ["recorded"] * 5))


def test_the_live_check_names_every_reply_that_differs(inputs):
    """A live run that takes another token somewhere is reported, reply by reply, and never
    stops the page; prompts out of order are refused."""
    recorded = generate_all(load_reader(QWEN, mode="recorded"), inputs)
    live = recorded.assign(seconds=0.5)
    assert live_check(recorded, live).endswith(
        f"`{QWEN_ID}` gave the recorded reply, token for token, to 6 of the 6 prompts. "
        "Replies that differ: none.")
    assert "in 3.0 seconds" in live_check(recorded, live)
    live.loc[1, "raw_output"] = "Answer: October 16\nSources: H02"
    live.loc[4, "output_tokens"] += 1  # the same text from other tokens
    sentence = live_check(recorded, live)
    assert "to 4 of the 6 prompts" in sentence
    assert sentence.endswith(f"Replies that differ: {live.loc[1, 'question_id']} (live: "
                             f"'Answer: October 16 ⏎ Sources: H02'); "
                             f"{live.loc[4, 'question_id']} (live: "
                             f"{parsing.show_line_breaks(live.loc[4, 'raw_output'])[:80]!r}).")
    with pytest.raises(ValueError, match="same prompts, in the same order"):
        live_check(recorded, live.iloc[::-1])


# --------------------------------------------------------- the record command


@pytest.mark.slow  # a fresh interpreter imports the book's stack: about 15 s
def test_an_interrupted_record_leaves_the_transcript_as_it_was(transcript_copy):
    before = transcript_copy.read_bytes()
    with FakeServer("stall") as fake:
        process = subprocess.Popen(
            [sys.executable, "-m", "runtime", "record", "reader", "--reader", SMOL,
             "--server", fake.url, "--transcript", str(transcript_copy)],
            cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env={**os.environ, "RIVERTON_READER_TIMEOUT": "60"})
        try:
            deadline = time.monotonic() + 60
            while not fake.requests and time.monotonic() < deadline:
                time.sleep(0.1)
            assert fake.requests, "the record command never reached the server"
            process.send_signal(signal.SIGINT)
            process.wait(timeout=30)  # at once, not after the stalled requests time out
        finally:
            process.kill()
            process.wait()
    assert process.returncode != 0 and transcript_copy.read_bytes() == before
    assert sorted(p.name for p in transcript_copy.parent.iterdir()) == [transcript_copy.name]


def test_constrained_replies_from_a_server_running_the_llguidance_grammar_replay_as_live(
        inputs, transcript_copy, capsys):
    """vLLM's guidance backend runs lesson 3's own Lark grammar, so ``record reader --server
    --constrained`` keys its replies exactly as a live constrained run does, and replay
    finds them; a reply the server cut at the cap did not complete the grammar, which the
    command says in one line (question, reply, URL) before it writes anything. (A
    stand-in for vLLM: no GPU here.)"""
    before, question = read_transcript(transcript_copy), question_of(inputs)

    def cut_short(body):  # all 48 tokens of Q4's reply spent inside the answer line
        return 200, good_reply(text="Answer: the stipend is", finish="length", completion_tokens=48), 0.0

    with FakeServer(echo_question(inputs), engine="vLLM", model_id=SMOL_ID) as fake:
        echo, fake.behaviour = fake.behaviour, lambda body: (
            cut_short if question(body) == "Q4" else echo)(body)
        assert record(fake.url, transcript_copy, "--constrained") == 1
        err = capsys.readouterr().err
        assert err.splitlines()[-1] == (f"error: Q4: the constrained reply 'Answer: the "
                                        f"stipend is' from {fake.url} did not complete the "
                                        "grammar; nothing was recorded") and "Traceback" not in err
        assert read_transcript(transcript_copy) == before
        fake.behaviour, fake.requests[:] = echo, []
        assert record(fake.url, transcript_copy, "--constrained") == 0
    assert f"wrote 6 reader replies to {transcript_copy}" in capsys.readouterr().out
    grammars = [build_grammar(ids) for ids in inputs["retrieved_ids"]]
    # Four requests in flight: they reach the server in any order.
    assert sorted(b["structured_outputs"]["grammar"] for b in fake.requests) == sorted(grammars)
    after = read_transcript(transcript_copy)
    new = [e for e in after if e not in before]
    assert [e.question_id for e in new] == list(inputs["question_id"])
    recorded = load_reader(SMOL, mode="recorded", transcript=transcript_copy)
    for entry, messages, grammar in zip(new, inputs["messages"], grammars):
        assert entry.key == recorded.key(messages, constrained_settings(recorded.settings, grammar))
        assert entry.decoding == CONSTRAINED and entry.collection == \
            "riverton-handbook-questions.csv, tfidf top 3"
        assert entry.recorded_by == "server vLLM 0.0-test, greedy under the reply grammar"
    replayed = generate_all(recorded, inputs, constrained=True)
    assert list(replayed["raw_output"]) == [f"Answer: {q}\nSources: none" for q in inputs["question_id"]]
    # The other entries, the unconstrained replies to the same prompts among them, stay.
    assert [e for e in after if e.decoding != CONSTRAINED] == [e for e in before if e.decoding != CONSTRAINED]
