"""Live readers decode prompts in batches and give exactly the replies they give one at a time.

The fast tests check the batch-size setting and how a batch is cut. The slow ones run
SmolLM2 for real: on each lesson's live prompts, batched replies equal the replies of
transformers' own ``generate`` one prompt at a time, token for token, unconstrained and
under lesson 3's grammar; a batch that mixes a reply ending early at its end-of-sequence
token with one that runs into the cap reports each reply's own diagnostics. (How much
faster a batch is, is measured by benchmarks/bench_batch.py, not here.)
"""
from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from helpers.reader import decoding

SMOL = "smollm2_135m_instruct"


@pytest.mark.parametrize(("value", "expected"), [(None, decoding.DEFAULT_BATCH_SIZE), ("1", 1),
                                                 (" 16 ", 16)])
def test_the_batch_size_comes_from_the_environment(monkeypatch, value, expected):
    if value is None:
        monkeypatch.delenv(decoding.BATCH_ENV, raising=False)
    else:
        monkeypatch.setenv(decoding.BATCH_ENV, value)
    assert decoding.batch_size() == expected
    assert decoding.batch_size(3) == 3  # an argument wins


@pytest.mark.parametrize("value", ["0", "eight", "-2", str(decoding.MAX_BATCH_SIZE + 1), "2.5"])
def test_a_bad_batch_size_names_the_variable(monkeypatch, value):
    monkeypatch.setenv(decoding.BATCH_ENV, value)
    with pytest.raises(ValueError, match=f"environment variable {decoding.BATCH_ENV} is"):
        decoding.batch_size()
    with pytest.raises(ValueError, match="batch_size is True"):
        decoding.batch_size(True)


def test_batches_keep_the_order_and_the_last_batch_takes_the_rest():
    assert decoding.batches(list("abcdefg"), 3) == [["a", "b", "c"], ["d", "e", "f"], ["g"]]
    assert decoding.batches([], 8) == []


def test_batches_by_length_group_prompts_of_similar_length_and_cover_each_once():
    lengths = [5, 9, 1, 9, 3, 7, 2]
    chunks = decoding.batches_by_length(lengths, 3)
    assert chunks == [[1, 3, 5], [0, 4, 6], [2]]  # longest first; ties keep their order
    assert sorted(i for chunk in chunks for i in chunk) == list(range(len(lengths)))


def test_the_shared_prefix_leaves_each_prompt_a_token_of_its_own():
    assert decoding.shared_prefix([[1, 2, 3, 4], [1, 2, 3, 5, 6]]) == 3
    assert decoding.shared_prefix([[1, 2, 3], [1, 2, 3, 4]]) == 2  # the shortest keeps its last
    assert decoding.shared_prefix([[7, 2], [1, 2]]) == 0


# --------------------------------------------------------------------- live, slow


@pytest.fixture(scope="module")
def smol():
    from helpers.reader import load_reader

    return load_reader(SMOL, mode="live")


def _mixed_batch(reader) -> pd.DataFrame:
    """One batch of the default size holding live prompts of every lesson that runs a
    reader live: lesson 1's prompts (which lessons 3 and 4 send), lesson 2's hybrid
    prompts, and lesson 5's attack prompts, under lesson 1's prompt, the quoting prompt and
    the datamarking prompt; the shortest and the longest of them differ by more than a
    hundred tokens."""
    from helpers import attacks
    from helpers.fixture import load_attack_fixture, load_riverton
    from helpers.reader.lesson import lesson_reader_inputs

    fixture = load_attack_fixture()
    runs = attacks.attack_reader_inputs(fixture.questions, load_riverton().handbook,
                                        fixture.passages)
    under = runs[runs["condition"] == attacks.UNDER_ATTACK]
    attack_rows = pd.DataFrame(
        [{"question_id": f"{row.attack_id} lesson 1 prompt", "messages": row.messages,
          "retrieved_ids": row.retrieved_ids} for row in under.iloc[:4].itertuples(index=False)]
        + [{"question_id": f"{row.attack_id} quoting prompt", "messages": row.quoted_messages,
            "retrieved_ids": row.retrieved_ids} for row in under.iloc[4:6].itertuples(index=False)]
        + [{"question_id": f"{row.attack_id} datamarking prompt",
            "messages": row.datamarked_messages, "retrieved_ids": row.retrieved_ids}
           for row in under.iloc[6:8].itertuples(index=False)])
    columns = ["question_id", "messages", "retrieved_ids"]
    batch = pd.concat([lesson_reader_inputs()[columns].iloc[[0, 1, 2, 3]],
                       lesson_reader_inputs(retriever="hybrid")[columns].iloc[[2, 3, 4, 5]],
                       attack_rows], ignore_index=True)
    lengths = [len(reader.encode(m)["input_ids"][0]) for m in batch["messages"]]
    assert len(batch) == decoding.DEFAULT_BATCH_SIZE
    assert max(lengths) - min(lengths) > 100, lengths
    return batch.assign(prompt_tokens=lengths)


@pytest.mark.slow
def test_batched_replies_are_the_replies_one_prompt_at_a_time(smol):
    """One batch mixing every lesson's live prompts, decoded together, beside transformers'
    generate one prompt at a time for its shortest (the most padded), its longest, and one
    prompt of each lesson; unconstrained and under the reply grammar. (Every prompt of
    every lesson is compared by benchmarks/bench_batch.py.)"""
    from helpers.reader.constrained import generate_constrained, generate_constrained_batches

    batch = _mixed_batch(smol)
    messages, ids = list(batch["messages"]), list(batch["question_id"])
    free = smol.generate_many(messages, ids)
    forced = generate_constrained_batches(smol, messages, list(batch["retrieved_ids"]), ids)
    lengths = list(batch["prompt_tokens"])
    chosen = {lengths.index(min(lengths)), lengths.index(max(lengths)), 0, 4, 8}
    for number in sorted(chosen):
        row = batch.iloc[number]
        alone = smol.generate(row["messages"], row["question_id"])
        assert free[number].token_ids == alone.token_ids, row["question_id"]
        assert (free[number].raw_output, free[number].output_tokens,
                free[number].ended_by_eos) == (alone.raw_output, alone.output_tokens,
                                               alone.ended_by_eos)
        forced_alone = generate_constrained(smol, row["messages"], row["retrieved_ids"],
                                            row["question_id"])
        assert forced[number].token_ids == forced_alone.token_ids, row["question_id"]
        assert forced[number].grammar_complete is forced_alone.grammar_complete is True
        assert forced[number].key == forced_alone.key


@pytest.mark.slow
def test_the_judge_in_a_batch_gives_the_verdicts_it_gives_alone(smol):
    """Lesson 4's judge: its one-word grammar, four tokens at most and no repetition
    penalty, four requests decoded together and one at a time."""
    from helpers import judge
    from helpers.reader.constrained import generate_under_grammar, generate_under_grammars
    from helpers.review import load_review

    riverton = load_riverton_texts()
    requests = judge.judge_requests(load_review(), *riverton).drop_duplicates("request_id")
    requests = requests.iloc[[0, 5, 10, 20]]
    together = generate_under_grammars(
        smol, list(requests["messages"]), [judge.JUDGE_GRAMMAR] * len(requests),
        list(requests["request_id"]), settings=judge.JUDGE_SETTINGS)
    for reply, row in zip(together, requests.itertuples(index=False)):
        alone = generate_under_grammar(smol, row.messages, judge.JUDGE_GRAMMAR, row.request_id,
                                       settings=judge.JUDGE_SETTINGS)
        assert reply.token_ids == alone.token_ids and reply.key == alone.key, row.request_id
        assert judge.parse_judge_reply(reply.raw_output).parse_ok


def load_riverton_texts():
    """Question texts (lesson 1's and the extended ones) and passage texts, as the judge reads them."""
    from helpers.fixture import load_riverton

    riverton = load_riverton()
    extended = load_riverton(questions="riverton-extended-questions.csv").questions
    questions = dict(zip(riverton.questions["question_id"], riverton.questions["question"]))
    questions.update(zip(extended["question_id"], extended["question"]))
    return questions, dict(zip(riverton.handbook["passage_id"], riverton.handbook["text"]))


@pytest.mark.slow
def test_a_batch_mixing_an_early_end_and_the_cap_reports_each_replys_diagnostics(smol):
    """With a cap of 25 tokens, Q3's reply ends at its end-of-sequence token before the
    cap and Q2's runs into it; decoded together, each reply keeps its own counts, and
    both are what each gives alone."""
    from helpers.reader.generation import LiveReader
    from helpers.reader.lesson import lesson_reader_inputs

    capped = LiveReader(dataclasses.replace(
        smol.spec, settings={**smol.spec.settings, "max_new_tokens": 25}))
    inputs = lesson_reader_inputs().set_index("question_id").loc[["Q3", "Q2"]]
    together = capped.generate_many(list(inputs["messages"]), list(inputs.index), size=2)
    alone = [capped.generate(m, q) for q, m in zip(inputs.index, inputs["messages"])]
    early, capped_reply = together
    assert early.ended_by_eos and not early.hit_token_cap
    assert early.output_tokens == len(early.token_ids) < 25
    assert early.token_ids[-1] in capped.eos_ids
    assert capped_reply.hit_token_cap and not capped_reply.ended_by_eos
    assert capped_reply.output_tokens == len(capped_reply.token_ids) == 25
    assert not set(capped_reply.token_ids) & capped.eos_ids
    for mine, own in zip(together, alone):
        assert (mine.token_ids, mine.output_tokens, mine.ended_by_eos, mine.hit_token_cap) == \
            (own.token_ids, own.output_tokens, own.ended_by_eos, own.hit_token_cap)
