"""The one greedy decoder: runtime.batch.greedy_batch, through runtime.readers.generate_all,
gives each prompt token for token the reply transformers' own ``generate`` gives it alone.

The fast tests check the batch-size setting, how prompts are cut into batches and the
stopping diagnostics. The slow ones run SmolLM2 for real on the lessons' own prompts
(lesson 1's, two extended questions whose replies run into the cap, lesson 2's hybrid
prompts, lesson 5's attack prompts under its three system prompts), unconstrained and under
lesson 3's grammar, at several batch sizes (``RIVERTON_BATCH_SIZE``, 1 included), beside
``generate`` one prompt at a time: the reference. Under the grammar the reference is
``generate`` with a small logits processor around :class:`helpers.grammar.GrammarMask`.
(How much faster a batch is, is measured by benchmarks/bench_batch.py, not here.)
"""
from __future__ import annotations

import pandas as pd
import pytest

from helpers.decoding import MAX_NEW_TOKENS, stopping_diagnostics
from runtime import batch, config
from runtime.readers import generate_all

SMOL = "smollm2_135m_instruct"


@pytest.mark.parametrize(("value", "expected"), [(None, batch.DEFAULT_BATCH_SIZE), ("1", 1), (" 16 ", 16)])
def test_the_batch_size_comes_from_the_environment(monkeypatch, value, expected):
    monkeypatch.delenv(config.BATCH_SIZE, raising=False)
    if value is not None:
        monkeypatch.setenv(config.BATCH_SIZE, value)
    assert batch.batch_size() == expected
    assert batch.batch_size(3) == 3  # an argument wins


@pytest.mark.parametrize("value", ["0", "eight", "-2", str(batch.MAX_BATCH_SIZE + 1), "2.5"])
def test_a_bad_batch_size_names_the_variable(monkeypatch, value):
    monkeypatch.setenv(config.BATCH_SIZE, value)
    with pytest.raises(ValueError, match=f"environment variable {config.BATCH_SIZE} is"):
        batch.batch_size()
    with pytest.raises(ValueError, match="batch_size is True"):
        batch.batch_size(True)


def test_batches_cover_each_prompt_once_longest_first_and_share_a_prefix():
    assert batch.batches(list("abcdefg"), 3) == [["a", "b", "c"], ["d", "e", "f"], ["g"]]
    assert batch.batches([], 8) == []
    lengths = [5, 9, 1, 9, 3, 7, 2]
    assert batch.batches_by_length(lengths, 3) == [[1, 3, 5], [0, 4, 6], [2]]  # ties in order
    assert batch.shared_prefix([[1, 2, 3, 4], [1, 2, 3, 5, 6]]) == 3
    assert batch.shared_prefix([[1, 2, 3], [1, 2, 3, 4]]) == 2  # the shortest keeps its last
    assert batch.shared_prefix([[7, 2], [1, 2]]) == 0


@pytest.mark.parametrize("ids, expected", [
    ([5, 6, 2], (3, True, False)),
    ([5, 2, 2, 2], (2, True, False)),  # what follows the first end of sequence is not counted
    ([5] * 48, (48, False, True)),
    ([5] * 47 + [2], (48, True, False)),
    ([5] * 10, (10, False, False)),
])
def test_stopping_diagnostics(ids, expected):
    assert stopping_diagnostics(ids, {2}, 48) == expected


# --------------------------------------------------------------------- live, slow


@pytest.fixture(scope="module")
def smol():
    from runtime.readers import load_reader

    return load_reader(SMOL, mode="live")


@pytest.fixture(scope="module")
def prompts(smol) -> pd.DataFrame:
    """Twelve of the lessons' live prompts, whose lengths differ by over a hundred tokens."""
    from runtime.attack_runs import record_prompts
    from runtime.lessons import lesson_reader_inputs

    columns = ["question_id", "messages", "retrieved_ids"]
    attacked = record_prompts("attacks", attack_ids=["A04"]).iloc[3:6]  # three of its prompts
    table = pd.concat([
        lesson_reader_inputs()[columns].iloc[:4],
        lesson_reader_inputs("riverton-extended-questions.csv")[columns].iloc[1:3],
        lesson_reader_inputs(retriever="hybrid")[columns].iloc[[2, 5]],
        attacked.assign(question_id=["A04 #4", "A04 #5", "A04 #6"])[columns],
        lesson_reader_inputs()[columns].iloc[[5]]], ignore_index=True)
    lengths = [len(smol.encode(m)) for m in table["messages"]]
    assert max(lengths) - min(lengths) > 100, lengths
    return table


def _grammar_processor(tokenizer, grammar: str, prompt_length: int):
    """A transformers logits processor that lets through what lesson 3's grammar allows."""
    from transformers import LogitsProcessor

    from helpers.grammar import GrammarMask

    class GrammarProcessor(LogitsProcessor):
        def __init__(self):
            self.mask = GrammarMask(tokenizer, grammar)

        def __call__(self, input_ids, scores):
            allowed = self.mask.allowed_after(input_ids[0, prompt_length:].tolist(), scores.shape[-1])
            return scores.masked_fill(~allowed, float("-inf"))

    return GrammarProcessor()


@pytest.fixture(scope="module")
def reference(smol, prompts) -> dict[bool, list[tuple[int, ...]]]:
    """Each prompt's reply from transformers' ``generate``, alone, without and with the
    grammar (the reference the decoder is held to)."""
    import torch
    from transformers import LogitsProcessorList

    from helpers.grammar import reply_grammar
    from runtime.readers import cpu_threads

    replies = {False: [], True: []}
    for messages, retrieved in zip(prompts["messages"], prompts["retrieved_ids"]):
        ids = torch.tensor([smol.encode(messages)])
        for constrained in (False, True):
            extra = {"logits_processor": LogitsProcessorList([_grammar_processor(
                smol.tokenizer, reply_grammar(smol.tokenizer, retrieved, MAX_NEW_TOKENS),
                ids.shape[1])])} if constrained else {}
            with torch.inference_mode(), cpu_threads(smol.spec.cpu_threads):
                output = smol.model.generate(
                    ids, attention_mask=torch.ones_like(ids), max_new_tokens=MAX_NEW_TOKENS,
                    do_sample=False, repetition_penalty=smol.settings["repetition_penalty"],
                    eos_token_id=sorted(smol.eos_ids), pad_token_id=smol.pad_id,
                    temperature=None, top_p=None, top_k=None, **extra)
            replies[constrained].append(tuple(int(t) for t in output[0, ids.shape[1]:]))
    return replies


@pytest.mark.slow
@pytest.mark.parametrize("constrained, size", [
    (False, batch.DEFAULT_BATCH_SIZE), (False, 5), (False, 1),
    (True, batch.DEFAULT_BATCH_SIZE), (True, 3), (True, 1)])
def test_batched_replies_are_generates_replies_token_for_token(smol, prompts, reference,
                                                               monkeypatch, constrained, size):
    from helpers.grammar import build_grammar, constrained_settings

    monkeypatch.setenv(config.BATCH_SIZE, str(size))
    table = generate_all(smol, prompts, constrained=constrained)
    replies = table.attrs["generations"]
    assert [r.question_id for r in replies] == list(prompts["question_id"])
    for reply, expected, messages, retrieved in zip(replies, reference[constrained],
                                                    prompts["messages"], prompts["retrieved_ids"]):
        assert reply.token_ids == expected, reply.question_id
        ids = reply.token_ids
        assert reply.output_tokens == len(ids) <= MAX_NEW_TOKENS
        assert reply.ended_by_eos == (ids[-1] in smol.eos_ids)
        assert not set(ids[:-1]) & smol.eos_ids  # counted through the first end of sequence
        assert reply.hit_token_cap == (len(ids) == MAX_NEW_TOKENS and not reply.ended_by_eos)
        assert reply.raw_output == smol.tokenizer.decode(ids, skip_special_tokens=True)
        assert reply.prompt_tokens == len(smol.encode(messages))
        settings = constrained_settings(smol.settings, build_grammar(retrieved)) \
            if constrained else smol.settings
        assert reply.key == smol.key(messages, settings) and reply.settings == settings
        assert reply.grammar_complete is (True if constrained else None)
    # Replies that ended early and replies the cap cut off (in one batch at the default size).
    if not constrained:
        assert table["ended_by_eos"].any() and table["hit_token_cap"].any()

