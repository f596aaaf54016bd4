"""The reply grammar of lesson 3, and how it masks the tokens the reader may choose.

Introduced in lesson 3, "Force the format with a grammar". :func:`build_grammar` writes
the two-line reply as a grammar in llguidance's Lark dialect; :func:`build_gbnf` writes
the same language in llama.cpp's GBNF (lesson 3, "The grammar on a serving engine").
:class:`GrammarMask` is the step that enforces it: a matcher follows the tokens a reply
has so far and says which tokens may come next, and the greedy step
(:func:`helpers.decoding.next_tokens`) gives every other token a score of minus infinity.
The grammar fixes the *shape* of the reply and the IDs it may cite; it says nothing about
whether the answer is true, which is the lesson's point.
"""

from __future__ import annotations

import itertools
import json
from typing import Iterable

import regex

from .decoding import CONSTRAINED, DECODING_FIELD

#: Tokens the answer text may take at most. With the fixed parts of the reply this keeps
#: the whole reply inside the reader's 48-token cap (checked by ``reply_token_bound``).
ANSWER_MAX_TOKENS = 24

#: The most retrieved IDs a grammar enumerates (every ordered choice without repeats).
MAX_CITABLE_IDS = 5

#: A citable passage ID: no spaces, commas or line breaks, so the parser can split it.
_ID_PATTERN = regex.compile(r"[A-Za-z0-9_.-]+")

#: The answer rule's regular expression (Lark syntax, between slashes): a visible first
#: character, then anything up to the end of the line. Lesson 3's exercises pass another.
ANSWER_PATTERN = r"/[^\s][^\r\n]*/"


class ConstrainedDecodingError(RuntimeError):
    """The grammar could not be built or followed for one question."""


def check_ids(retrieved_ids: Iterable[str]) -> tuple[str, ...]:
    """The retrieved IDs as a tuple, if the grammar can cite them; a ValueError saying why
    not otherwise (an ID with spaces or commas, one called ``none``, repeats, too many)."""
    ids = tuple(retrieved_ids)
    for passage_id in ids:
        if not isinstance(passage_id, str) or not _ID_PATTERN.fullmatch(passage_id):
            raise ValueError(
                f"retrieved ID {passage_id!r} cannot be cited in the reply grammar: "
                "IDs must be letters, digits, '.', '_' or '-' only"
            )
        if passage_id.lower() == "none":
            raise ValueError("a passage may not be called 'none': it is the no-source marker")
    if len(set(ids)) != len(ids):
        raise ValueError(f"retrieved IDs repeat: {', '.join(ids)}")
    if len(ids) > MAX_CITABLE_IDS:
        raise ValueError(
            f"{len(ids)} retrieved IDs; the reply grammar enumerates at most {MAX_CITABLE_IDS}"
        )
    return ids


def source_lists(retrieved_ids: Iterable[str]) -> list[str]:
    """Every ``Sources:`` value the grammar allows, ``none`` first.

    Each ordered choice of distinct retrieved IDs, joined by ``", "``. With no retrieved
    passage the only value is ``none``. Lesson 3, "Force the format with a grammar".
    """
    ids = check_ids(retrieved_ids)
    values = ["none"]
    for size in range(1, len(ids) + 1):
        values += [", ".join(chosen) for chosen in itertools.permutations(ids, size)]
    return values


def check_answer_rule(answer_max_tokens: int, answer_pattern: str) -> None:
    """A ValueError unless the answer's token limit is at least 1 and its pattern is a Lark
    regular expression on one line between slashes."""
    if answer_max_tokens < 1:
        raise ValueError(f"answer_max_tokens must be at least 1, got {answer_max_tokens}")
    if not (isinstance(answer_pattern, str) and len(answer_pattern) > 2
            and answer_pattern.startswith("/") and answer_pattern.endswith("/")
            and "\n" not in answer_pattern):
        raise ValueError(
            f"answer_pattern must be a Lark regular expression on one line between "
            f"slashes, like {ANSWER_PATTERN!r}; got {answer_pattern!r}"
        )


def build_grammar(
    retrieved_ids: Iterable[str], *, answer_max_tokens: int = ANSWER_MAX_TOKENS,
    answer_pattern: str = ANSWER_PATTERN,
) -> str:
    """The Lark grammar (llguidance dialect) of the two-line reply for one question.

    ``Answer: <text>`` (by default a visible first character and no line break; any
    ``answer_pattern`` in Lark's ``/regex/`` form; at most ``answer_max_tokens``
    tokens), a newline, ``Sources: `` and then ``none`` or distinct IDs from
    ``retrieved_ids`` separated by ``", "``; nothing may follow, so the next token must
    be end of sequence. Lesson 3, "Force the format with a grammar".
    """
    check_answer_rule(answer_max_tokens, answer_pattern)
    # One alternative per allowed Sources: value, each a quoted literal.
    alternatives = "\n    | ".join(json.dumps(value) for value in source_lists(retrieved_ids))
    return (
        "start: \"Answer: \" answer \"\\nSources: \" sources\n"
        f"answer[max_tokens={int(answer_max_tokens)}]: {answer_pattern}\n"
        f"sources: {alternatives}\n"
    )


# --- the same grammar for a serving engine ---------------------------------------------

#: Characters the answer may take in the GBNF form of the grammar. GBNF has no token
#: counts, so the bound is in characters: 80 characters of English are about 20 tokens,
#: which keeps a reply inside the 48-token cap in practice but, unlike the llguidance
#: grammar's token bound, not by construction. A reply that still reaches the cap shows
#: ``hit_token_cap`` and fails the parse gate, as in lesson 1.
ANSWER_MAX_CHARS = 80


def build_gbnf(retrieved_ids: Iterable[str], *, answer_max_chars: int = ANSWER_MAX_CHARS) -> str:
    """The two-line reply grammar in llama.cpp's GBNF, for a server's ``grammar`` field.

    The same language as :func:`build_grammar` (``Answer: `` and a visible first
    character, one line, a newline, ``Sources: `` and ``none`` or distinct retrieved IDs
    joined by ``", "``), except that the answer is bounded by ``answer_max_chars``
    characters instead of a token count. Lesson 3, "The grammar on a serving engine".
    """
    if answer_max_chars < 1:
        raise ValueError(f"answer_max_chars must be at least 1, got {answer_max_chars}")
    alternatives = " | ".join(json.dumps(value) for value in source_lists(retrieved_ids))
    rest = f"{{0,{int(answer_max_chars) - 1}}}"
    return (
        'root ::= "Answer: " answer "\\nSources: " sources\n'
        f"answer ::= [^ \\t\\n\\r] [^\\n\\r]{rest}\n"
        f"sources ::= {alternatives}\n"
    )


def reply_matches_gbnf(retrieved_ids: Iterable[str], text: str, *,
                       answer_max_chars: int = ANSWER_MAX_CHARS) -> bool:
    """Whether ``text`` is a complete reply in the language of :func:`build_gbnf`.

    Checked with a regular expression on the text, so it needs no tokenizer: this is how
    a reply that came back from a server is checked against the grammar it was sent.
    """
    sources = "|".join(regex.escape(value) for value in source_lists(retrieved_ids))
    pattern = (rf"Answer: [^ \t\n\r][^\n\r]{{0,{int(answer_max_chars) - 1}}}"
               rf"\nSources: (?:{sources})")
    return regex.fullmatch(pattern, text) is not None


def constrained_settings(settings: dict, grammar: str) -> dict:
    """The settings a grammar-constrained reply is keyed by: the reader's, plus the
    decoding's name and the grammar itself.

    Both go into the transcript key, so a constrained reply never shares a key with the
    unconstrained reply to the same prompt, and a changed grammar (other retrieved IDs,
    another answer limit) never replays an old reply. Lesson 3, "Force the format with a grammar";
    recorded with ``python -m runtime record reader --constrained``.
    """
    return {**settings, DECODING_FIELD: CONSTRAINED, "grammar": grammar}


# --- the mask: which tokens the grammar allows next ------------------------------------

# One llguidance tokenizer per Hugging Face tokenizer object (building one takes ~0.5 s).
_LL_TOKENIZERS: dict[int, tuple] = {}


def ll_tokenizer(hf_tokenizer):
    """The llguidance tokenizer for a fast Hugging Face tokenizer, built once per object."""
    import llguidance.hf

    cached = _LL_TOKENIZERS.get(id(hf_tokenizer))
    if cached is None or cached[0] is not hf_tokenizer:
        cached = (hf_tokenizer, llguidance.hf.from_tokenizer(hf_tokenizer))
        _LL_TOKENIZERS[id(hf_tokenizer)] = cached
    return cached[1]


def new_matcher(hf_tokenizer, grammar: str):
    """A fresh ``llguidance.LLMatcher`` for ``grammar``; raises if the grammar is invalid."""
    import llguidance

    matcher = llguidance.LLMatcher(ll_tokenizer(hf_tokenizer),
                                   llguidance.LLMatcher.grammar_from_lark(grammar), log_level=0)
    if matcher.is_error():
        raise ConstrainedDecodingError(f"llguidance refused the grammar: {matcher.get_error()}")
    return matcher


class GrammarMask:
    """The grammar's side of one reply: which tokens may come next, after what it wrote.

    Lesson 3, "Force the format with a grammar". :meth:`allowed_after` feeds the matcher
    the reply's new tokens and returns a boolean tensor over the vocabulary. Where the
    grammar forces text (``Answer: ``, ``Sources: ``) only the first token of its usual
    spelling is allowed, so forced text is written in the tokenizer's ordinary tokens.
    """

    def __init__(self, hf_tokenizer, grammar: str):
        import llguidance.torch

        self.tokenizer = hf_tokenizer
        self.matcher = new_matcher(hf_tokenizer, grammar)
        self.consumed: list[int] = []
        self.vocab_size = ll_tokenizer(hf_tokenizer).vocab_size
        self._bitmask = llguidance.torch.allocate_token_bitmask(1, self.vocab_size)

    def consume(self, new: list[int]) -> None:
        """Feed tokens to the matcher; leaving the grammar is an error."""
        if new and not self.matcher.consume_tokens(list(new)):
            raise ConstrainedDecodingError(
                "the generated tokens left the grammar after "
                f"{self.tokenizer.decode(self.consumed + new)!r}: {self.matcher.get_error()}")
        self.consumed += new

    def allowed_after(self, generated: list[int], width: int):
        """The tokens allowed after the reply's ``generated`` tokens: a boolean tensor of
        ``width`` (the model's vocabulary, which may be wider than the tokenizer's)."""
        import llguidance.torch
        import torch

        self.consume(generated[len(self.consumed):])  # the tokens added since the last step
        allowed = torch.zeros(width, dtype=torch.bool)
        # Where the grammar leaves no choice, allow only the first token of the forced text.
        forced = self.matcher.compute_ff_tokens()
        if forced:
            allowed[forced[0]] = True
            return allowed
        # Otherwise the matcher fills a bitmask: bit j of 32-bit word i is token 32*i + j.
        llguidance.torch.fill_next_token_bitmask(self.matcher, self._bitmask)
        bits = (self._bitmask[0].unsqueeze(-1) >> torch.arange(32, dtype=torch.int32)) & 1
        bits = bits.bool().reshape(-1)
        size = min(width, bits.shape[0], self.vocab_size)  # tokens past the tokenizer's stay False
        allowed[:size] = bits[:size]
        return allowed

    def complete(self, reply: list[int], ended_by_eos: bool) -> bool:
        """Whether ``reply`` (end of sequence included when it came) completed the grammar."""
        body = reply[:-1] if ended_by_eos else reply
        self.consume(body[len(self.consumed):])
        return ended_by_eos and bool(self.matcher.is_accepting())


def grammar_accepts(hf_tokenizer, retrieved_ids: Iterable[str], text: str, *,
                    answer_pattern: str = ANSWER_PATTERN) -> bool:
    """Whether ``text`` followed by end of sequence is a complete reply under the grammar
    for ``retrieved_ids``: the text is tokenized the usual way and fed to a fresh matcher.
    Lesson 3, "Force the format with a grammar"."""
    matcher = new_matcher(hf_tokenizer, build_grammar(retrieved_ids, answer_pattern=answer_pattern))
    tokens = hf_tokenizer(text, add_special_tokens=False)["input_ids"]
    return bool(matcher.consume_tokens(list(tokens)) and matcher.is_accepting())


def reply_token_bound(hf_tokenizer, retrieved_ids: Iterable[str], *,
                      answer_max_tokens: int = ANSWER_MAX_TOKENS) -> int:
    """An upper bound on the tokens a reply under the grammar takes, end of sequence included.

    The fixed keys cost what the tokenizer says; the answer at most ``answer_max_tokens``;
    the ``Sources:`` value at most its length in bytes (a token is at least one byte),
    plus one for the space after the colon. Lesson 3, "Force the format with a grammar".
    """
    longest = max(len(value.encode()) for value in source_lists(retrieved_ids))

    def count(text: str) -> int:
        return len(hf_tokenizer(text, add_special_tokens=False)["input_ids"])

    return count("Answer:") + answer_max_tokens + count("\nSources:") + 1 + longest + 1


def reply_grammar(hf_tokenizer, retrieved_ids: Iterable[str], max_new_tokens: int, *,
                  answer_max_tokens: int = ANSWER_MAX_TOKENS,
                  answer_pattern: str = ANSWER_PATTERN) -> str:
    """The reply grammar for ``retrieved_ids``, once its longest reply is shown to fit the
    token cap; a ConstrainedDecodingError otherwise. Lesson 3, "Force the format with a
    grammar"."""
    ids = check_ids(retrieved_ids)
    bound = reply_token_bound(hf_tokenizer, ids, answer_max_tokens=answer_max_tokens)
    if bound > max_new_tokens:
        raise ConstrainedDecodingError(
            f"the longest reply the grammar allows takes {bound} tokens, over the cap of "
            f"{max_new_tokens}; lower answer_max_tokens")
    return build_grammar(ids, answer_max_tokens=answer_max_tokens, answer_pattern=answer_pattern)
