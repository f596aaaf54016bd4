"""Where the pinned reader's replies to new prompts come from (lessons 2 and 5).

The transcript is the committed one; the server is a small real HTTP server on
127.0.0.1 that describes itself as vLLM serving the pinned snapshot and answers each
prompt with its recorded reply, as in ``test_lesson1_server.py`` (no engine on this
machine can serve the pinned Qwen reader). Which way is chosen without a server depends
on whether the pinned weights are on this machine, so those expectations follow
:func:`helpers.reader.weights_available`.
"""
from __future__ import annotations

import pytest

from helpers import pinned_reader, reader
from helpers.reader import get_reader_spec, load_reader, weights_available

from fake_server import FakeServer, good_reply

REVISION = "989aa7980e4cf806f80c7fef2b1adb7bc71aa306"
SNAPSHOT = f"/srv/hf/hub/models--Qwen--Qwen2.5-1.5B-Instruct/snapshots/{REVISION}"
WEIGHTS_HERE = weights_available(get_reader_spec(pinned_reader.PINNED_READER))


@pytest.fixture()
def no_server(monkeypatch):
    monkeypatch.delenv(reader.URL_ENV, raising=False)
    monkeypatch.delenv(reader.MODE_ENV, raising=False)


@pytest.fixture(scope="module")
def lesson1_prompts(riverton, retrieved):
    """Lesson 1's six prompts, which the transcript holds, and the same with one changed."""
    prompts = reader.reader_inputs(riverton.questions, retrieved, riverton.handbook)
    changed = prompts.copy()
    messages = [dict(m) for m in changed.at[0, "messages"]]
    messages[1] = {**messages[1], "content": messages[1]["content"] + " "}
    changed.at[0, "messages"] = messages
    return prompts, changed


def test_the_lookup_finds_every_recorded_prompt_and_gives_its_key(lesson1_prompts):
    prompts, _ = lesson1_prompts
    recorded = load_reader(pinned_reader.PINNED_READER, mode="recorded")
    lookup = pinned_reader.transcript_lookup(recorded, prompts)
    assert list(lookup.columns) == ["question_id", "key", "recorded"]
    assert lookup["question_id"].tolist() == prompts["question_id"].tolist()
    assert lookup["recorded"].all()
    assert lookup["key"].tolist() == [recorded.key(m)[:12] + "…" for m in prompts["messages"]]


def test_a_changed_prompt_is_not_found(lesson1_prompts):
    _, changed = lesson1_prompts
    recorded = load_reader(pinned_reader.PINNED_READER, mode="recorded")
    lookup = pinned_reader.transcript_lookup(recorded, changed)
    assert lookup["recorded"].tolist() == [False] + [True] * (len(changed) - 1)


def test_label_columns_are_kept(lesson1_prompts):
    prompts, _ = lesson1_prompts
    recorded = load_reader(pinned_reader.PINNED_READER, mode="recorded")
    labelled = prompts.assign(prompt="lesson 1 prompt")
    lookup = pinned_reader.transcript_lookup(recorded, labelled, ("question_id", "prompt"))
    assert list(lookup.columns) == ["question_id", "prompt", "key", "recorded"]
    assert set(lookup["prompt"]) == {"lesson 1 prompt"}


def test_without_a_server_every_recorded_prompt_is_replayed(no_server, lesson1_prompts):
    prompts, _ = lesson1_prompts
    source = pinned_reader.pinned_source(prompts)
    assert source.n_recorded == len(prompts)
    if WEIGHTS_HERE:
        assert source.how == "live" and source.reader.mode == "live"
        return
    assert source.how == "recorded" and source.reader.mode == "recorded"
    replies = reader.generate_all(source.reader, prompts)
    entries = [source.reader.entry(m) for m in prompts["messages"]]
    assert replies["raw_output"].tolist() == [e.raw_output for e in entries]


def test_without_a_server_one_missing_prompt_means_no_source(no_server, lesson1_prompts):
    _, changed = lesson1_prompts
    source = pinned_reader.pinned_source(changed)
    assert source.n_recorded == len(changed) - 1
    if WEIGHTS_HERE:
        assert source.how == "live"
    else:
        assert source.how == "none" and source.reader is None


def _replay_qwen(body):
    """Answer with the recorded Qwen reply for exactly these messages, or HTTP 404."""
    recorded = load_reader(pinned_reader.PINNED_READER, mode="recorded")
    try:
        entry = recorded.entry(body["messages"])
    except LookupError as error:
        return 404, {"error": {"message": str(error)}}, 0.0
    finish = "stop" if entry.ended_by_eos else "length"
    return 200, good_reply(entry.raw_output, finish, entry.prompt_tokens,
                           entry.output_tokens), 0.0


def test_a_configured_server_is_chosen_first(monkeypatch, lesson1_prompts):
    pytest.importorskip("openai")
    prompts, changed = lesson1_prompts
    monkeypatch.delenv(reader.MODE_ENV, raising=False)
    with FakeServer(_replay_qwen, engine="vLLM", model_id="Qwen/Qwen2.5-1.5B-Instruct",
                    model_root=SNAPSHOT) as fake:
        monkeypatch.setenv(reader.URL_ENV, fake.url)
        source = pinned_reader.pinned_source(prompts)
        assert source.how == "server" and source.reader.mode == "server"
        assert source.n_recorded == len(prompts)  # the transcript is asked all the same
        replies = reader.generate_all(source.reader, prompts)
        recorded = load_reader(pinned_reader.PINNED_READER, mode="recorded")
        assert replies["raw_output"].tolist() == [
            recorded.entry(m).raw_output for m in prompts["messages"]]
        assert len(fake.requests) == len(prompts)
        # With a server set, a prompt the transcript lacks does not change the choice.
        assert pinned_reader.pinned_source(changed).how == "server"
