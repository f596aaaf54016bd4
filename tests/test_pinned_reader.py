"""Where the pinned reader's replies to new prompts come from (lessons 2 and 5):
runtime.readers.pinned_source and pinned_replies.

The transcript is the committed one; the server is a small real HTTP server on
127.0.0.1 that describes itself as vLLM serving the pinned snapshot and answers each
prompt with its recorded reply, as in ``test_lesson1_server.py`` (no engine on this
machine can serve the pinned Qwen reader). Which way is chosen without a server depends
on whether the pinned weights are on this machine, so those expectations follow
:func:`runtime.registry.weights_available`.
"""
from __future__ import annotations

import pytest

from fake_server import FakeServer, good_reply
from runtime.readers import PINNED_READER, generate_all, load_reader, pinned_replies, \
    pinned_source
from runtime.registry import get_reader_spec, weights_available

REVISION = "989aa7980e4cf806f80c7fef2b1adb7bc71aa306"
SNAPSHOT = f"/srv/hf/hub/models--Qwen--Qwen2.5-1.5B-Instruct/snapshots/{REVISION}"
WEIGHTS_HERE = weights_available(get_reader_spec(PINNED_READER))

pytestmark = pytest.mark.usefixtures("no_server_environment")


@pytest.fixture(scope="module")
def prompts(inputs):
    """Lesson 1's six prompts, which the transcript holds, and the same with one changed."""
    changed = inputs.copy()
    messages = [dict(m) for m in changed.at[0, "messages"]]
    messages[1] = {**messages[1], "content": messages[1]["content"] + " "}
    changed.at[0, "messages"] = messages
    return inputs, changed


def test_the_transcript_is_asked_about_every_prompt_by_its_key(prompts):
    _, changed = prompts
    source = pinned_source(changed.assign(prompt="lesson 1 prompt"), ("question_id", "prompt"))
    lookup = source.lookup
    assert list(lookup.columns) == ["question_id", "prompt", "key", "recorded"]
    assert lookup["question_id"].tolist() == changed["question_id"].tolist()
    assert set(lookup["prompt"]) == {"lesson 1 prompt"}
    assert lookup["recorded"].tolist() == [False] + [True] * 5
    recorded = load_reader(PINNED_READER, mode="recorded")
    assert lookup["key"].tolist() == [recorded.key(m)[:12] + "…" for m in changed["messages"]]
    assert source.n_recorded == 5


@pytest.mark.parametrize("changed", [False, True], ids=["all recorded", "one missing"])
def test_without_a_server_the_transcript_answers_what_it_holds(prompts, changed):
    asked = prompts[changed]
    source = pinned_source(asked)
    if WEIGHTS_HERE:
        assert source.how == "live" and source.reader.mode == "live"
        return
    assert source.how == ("none" if changed else "recorded")
    assert (source.reader is None) is changed
    replies = pinned_replies(source, asked)
    held = asked.iloc[1:] if changed else asked  # the missing prompt is left out, not made up
    assert replies["question_id"].tolist() == held["question_id"].tolist()
    recorded = load_reader(PINNED_READER, mode="recorded")
    assert replies["raw_output"].tolist() == [recorded.entry(m, q).raw_output for q, m in
                                              zip(held["question_id"], held["messages"])]
    assert pinned_replies(pinned_source(asked.iloc[:0]), asked.iloc[:0]).empty


def _replay_qwen(body):
    """Answer with the recorded Qwen reply for exactly these messages, or HTTP 404."""
    try:
        entry = load_reader(PINNED_READER, mode="recorded").entry(body["messages"], "?")
    except LookupError as error:
        return 404, {"error": {"message": str(error)}}, 0.0
    finish = "stop" if entry.ended_by_eos else "length"
    return 200, good_reply(entry.raw_output, finish, entry.prompt_tokens,
                           entry.output_tokens), 0.0


def test_a_configured_server_is_chosen_first(monkeypatch, prompts):
    pytest.importorskip("openai")
    inputs, changed = prompts
    with FakeServer(_replay_qwen, engine="vLLM", model_id="Qwen/Qwen2.5-1.5B-Instruct",
                    model_root=SNAPSHOT) as fake:
        monkeypatch.setenv("RIVERTON_READER_URL", fake.url)
        source = pinned_source(inputs)
        assert source.how == "server" and source.reader.mode == "server"
        assert source.n_recorded == len(inputs)  # the transcript is asked all the same
        replies = generate_all(source.reader, inputs)
        recorded = load_reader(PINNED_READER, mode="recorded")
        assert replies["raw_output"].tolist() == [
            recorded.entry(m, q).raw_output for q, m in zip(inputs["question_id"],
                                                            inputs["messages"])]
        assert len(fake.requests) == len(inputs)
        # With a server set, a prompt the transcript lacks does not change the choice.
        assert pinned_source(changed).how == "server"
