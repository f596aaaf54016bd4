"""Decoding: the reader's settings, and one greedy step with its repetition penalty.

Introduced in lesson 1, "Ask the reader for two lines" (the settings and greedy
decoding); lesson 3, "Force the format with a grammar", adds the grammar's mask to the
same step. A reply is made one token at a time. At each step the model gives every token
of its vocabulary a score (a logit); :func:`next_tokens` then

1. penalises the tokens already seen in the prompt or the reply (the repetition
   penalty: a positive score is divided by the penalty, a negative one multiplied, so
   both move down), as transformers does;
2. removes the tokens a grammar forbids, by giving them a score of minus infinity
   (lesson 3; without a grammar nothing is removed);
3. takes the highest score: greedy decoding, so the same model, weights and prompt give
   the same reply on the same software.

The reply stops at the first end-of-sequence token or at the cap of
:data:`MAX_NEW_TOKENS`; :func:`stopping_diagnostics` says which. Padding several prompts
into one batch and keeping the model's cache is the runtime's business (``runtime.batch``),
not this module's: every row of a batch goes through this same step.
"""
from __future__ import annotations

#: The longest prompt, in tokens, the reader is asked to read.
MAX_INPUT_TOKENS = 768
#: The most tokens a reply may take, its end-of-sequence token included.
MAX_NEW_TOKENS = 48
#: The reader's repetition penalty (the checkpoint's own generation config says 1.1).
REPETITION_PENALTY = 1.05

#: Generation settings shared by every reader; they are part of each recorded reply's key.
DEFAULT_SETTINGS: dict = {
    "do_sample": False,
    "max_new_tokens": MAX_NEW_TOKENS,
    "repetition_penalty": REPETITION_PENALTY,
}

#: The settings field that names a decoding other than plain greedy (lesson 3's grammar);
#: plain greedy decoding leaves it out, so the keys of its replies never change.
DECODING_FIELD = "decoding"
UNCONSTRAINED = "unconstrained"
CONSTRAINED = "grammar-constrained (llguidance)"
#: A reply llama.cpp's server decoded under the GBNF form of lesson 3's grammar, whose
#: answer is bounded in characters rather than tokens: another decoding than CONSTRAINED.
CONSTRAINED_GBNF = "grammar-constrained (GBNF)"


def decoding_of(settings: dict) -> str:
    """The decoding a settings dict describes: its ``decoding`` field, else unconstrained."""
    return str(settings.get(DECODING_FIELD, UNCONSTRAINED))


def penalise_repeats(scores, seen, penalty: float):
    """``scores`` (rows x vocabulary) with every token marked in ``seen`` penalised.

    A positive score is divided by ``penalty`` and a negative one multiplied by it, so a
    penalty above 1 always makes a token already seen less likely.
    """
    import torch

    if penalty == 1.0:
        return scores
    penalised = torch.where(scores < 0, scores * penalty, scores / penalty)
    return torch.where(seen[:, :scores.shape[-1]], penalised, scores)


def next_tokens(scores, seen, penalty: float, allowed=None):
    """The greedy choice of each row: penalise repeats, mask what a grammar forbids, take
    the best. ``allowed`` holds, per row, a boolean tensor over the vocabulary (True:
    the grammar allows the token) or None for a row without a grammar."""
    import torch

    scores = penalise_repeats(scores.to(dtype=torch.float32), seen, penalty)
    for row, permitted in enumerate(allowed or ()):
        if permitted is not None:  # a forbidden token gets a score of minus infinity
            scores[row] = scores[row].masked_fill(~permitted, float("-inf"))
    return scores.argmax(dim=-1)  # greedy: each row's highest score


def stopping_diagnostics(new_ids: list[int], eos_ids: set[int], max_new_tokens: int):
    """Output tokens (through the first end of sequence), whether it came, whether the
    reply hit the cap."""
    for position, token in enumerate(new_ids):
        if token in eos_ids:
            return position + 1, True, False
    count = len(new_ids)
    return count, False, count >= max_new_tokens
