"""The one greedy decoder: several prompts decoded together, each stopped at its own end.

Machinery behind every live reply of the book; the step it repeats is taught in
:mod:`helpers.decoding` (:func:`helpers.decoding.next_tokens`: repetition penalty, the
grammar's mask, the greedy choice). Answering one prompt at a time, the model would run
a whole forward pass for a single token at every step; here a batch of prompts shares
each pass. The prompts are padded on the left to one length, the attention mask hides the
padding, and each row's positions count its own tokens only, so every row sees exactly its
own prompt and gets the reply the model gives it alone (the tests compare both with
transformers' own ``generate``, token for token). The beginning every prompt of a batch
shares (the system prompt) is read once. A row leaves the batch at its first
end-of-sequence token or at the cap. :func:`batch_size` is ``RIVERTON_BATCH_SIZE`` when
set, else :data:`DEFAULT_BATCH_SIZE`.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from helpers.decoding import next_tokens

from . import config

#: Prompts decoded together by default, chosen by measurement (benchmarks/bench_batch.py).
DEFAULT_BATCH_SIZE = 16

#: The most prompts decoded together.
MAX_BATCH_SIZE = 64


def batch_size(value: int | None = None) -> int:
    """``value``, else ``RIVERTON_BATCH_SIZE``, else :data:`DEFAULT_BATCH_SIZE`; a whole
    number from 1 to :data:`MAX_BATCH_SIZE`, or a ValueError naming where it came from."""
    return config.number(config.BATCH_SIZE, value, default=DEFAULT_BATCH_SIZE, low=1,
                           high=MAX_BATCH_SIZE, argument="batch_size")


def batches(items: Sequence, size: int) -> list[list]:
    """``items`` cut into consecutive lists of at most ``size``."""
    return [list(items[start:start + size]) for start in range(0, len(items), size)]


def batches_by_length(lengths: Sequence[int], size: int) -> list[list[int]]:
    """The positions of prompts of ``lengths``, cut into batches of at most ``size``,
    longest prompts first, so that prompts of similar length share a batch and little
    of it is padding. A prompt's reply does not depend on its batch (see the module
    docstring), so the caller puts the replies back in the prompts' order."""
    order = sorted(range(len(lengths)), key=lambda position: (-lengths[position], position))
    return batches(order, size)


#: A row's grammar: given the tokens the row generated so far, the tokens it allows next
#: (a boolean tensor over the vocabulary), or None when it allows any.
Allowed = Callable[[list[int]], object]


#: The shortest shared beginning worth computing once for a whole batch, in tokens.
MIN_SHARED_PREFIX = 16


def shared_prefix(prompts: Sequence[Sequence[int]]) -> int:
    """How many tokens every prompt begins with (all but the last token of the shortest,
    so that each row keeps at least one token of its own to read)."""
    common = os.path.commonprefix([list(p) for p in prompts])  # any sequences, not only text
    return max(0, min(len(common), min(len(p) for p in prompts) - 1))


def _prefill(model, prompts: Sequence[Sequence[int]], pad_id: int):
    """Read the prompts: the beginning they all share once, then each row's rest, padded
    on the left. Returns the cache, the attention mask, each row's last position and the
    logits of each row's last token."""
    import torch

    n = len(prompts)
    shared = shared_prefix(prompts) if n > 1 else 0
    shared, cache = (shared if shared >= MIN_SHARED_PREFIX else 0), None
    if shared:
        prefix = torch.tensor([list(prompts[0][:shared])], dtype=torch.long)
        cache = model(input_ids=prefix, use_cache=True, logits_to_keep=1).cache
        cache.batch_repeat_interleave(n)
    rests = [list(p[shared:]) for p in prompts]
    width = max(len(p) for p in rests)
    input_ids = torch.full((n, width), pad_id, dtype=torch.long)
    mask = torch.ones((n, shared + width), dtype=torch.long)
    for row, rest in enumerate(rests):  # never empty: the shared part leaves each a token
        input_ids[row, width - len(rest):] = torch.tensor(rest, dtype=torch.long)
        mask[row, shared:shared + width - len(rest)] = 0  # the padding
    # Each row counts positions from its own first token; padding sits at position 0, hidden.
    positions = (mask.cumsum(-1) - 1).clamp(min=0)[:, shared:]
    output = model(input_ids=input_ids, attention_mask=mask, position_ids=positions,
                   cache=cache, use_cache=True, logits_to_keep=1)
    return output.cache, mask, positions[:, -1:], output.logits[:, -1, :]


def greedy_batch(model, prompts: Sequence[Sequence[int]], *, max_new_tokens: int,
                 repetition_penalty: float, eos_ids: set[int], pad_id: int,
                 allowed: Sequence[Allowed | None],
                 first_scores: Callable | None = None) -> list[list[int]]:
    """The greedy reply to each prompt (token ids), decoded together.

    Each row's ids stop after its first end-of-sequence token (included) or after
    ``max_new_tokens``. ``allowed`` gives each row's grammar (see :data:`Allowed`; None:
    none). The beginning all prompts share (the lesson's instructions) is read
    once, and each row then reads only the rest of its prompt, padded on the left between
    the two. A row that has finished leaves the batch, so that no later step computes it.
    ``first_scores``, if given, is called with the scores (rows x vocabulary) that the
    first step chooses from, before the repetition penalty and any grammar's mask.
    """
    import torch

    n = len(prompts)
    cache, mask, positions, logits = _prefill(model, prompts, pad_id)
    vocabulary = model.get_output_embeddings().weight.shape[0]
    seen = torch.zeros((n, vocabulary), dtype=torch.bool)
    for row, prompt in enumerate(prompts):
        seen[row, list(prompt)] = True
    replies: list[list[int]] = [[] for _ in range(n)]
    active = list(range(n))  # the rows still decoding, in the order of the tensors
    if first_scores is not None:
        first_scores(logits)
    for step in range(max_new_tokens):
        masks = [None if allowed[row] is None else allowed[row](replies[row]) for row in active]
        chosen = next_tokens(logits, seen[active], repetition_penalty, masks)
        keep = []
        for place, row in enumerate(active):
            token = int(chosen[place])
            replies[row].append(token)
            seen[row, token] = True
            if not (token in eos_ids or len(replies[row]) >= max_new_tokens):
                keep.append(place)
        if not keep:
            break
        if len(keep) < len(active):
            index = torch.tensor(keep)
            cache.batch_select_indices(index)
            mask, positions, chosen = mask[index], positions[index], chosen[index]
            active = [active[place] for place in keep]
        mask = torch.cat([mask, torch.ones((len(active), 1), dtype=torch.long)], dim=1)
        positions = positions + 1
        output = model(input_ids=chosen[:, None], attention_mask=mask, position_ids=positions,
                       cache=cache, use_cache=True, logits_to_keep=1)
        cache, logits = output.cache, output.logits[:, -1, :]
    return replies
