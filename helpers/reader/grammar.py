"""The reply grammar of lesson 3 as text: the two-line reply and the passages it may cite.

Introduced in lesson 3, "Force the format with a grammar". :func:`build_grammar` writes
the grammar in llguidance's Lark dialect, which live decoding enforces token by token
(:mod:`helpers.reader.constrained`) and vLLM's guidance backend enforces on a server;
:func:`build_gbnf` writes the same language in llama.cpp's GBNF (lesson 3, "The grammar
on a serving engine"). Everything here is plain text, with no model and no tokenizer, so
the server code can build a grammar without loading transformers.
"""

from __future__ import annotations

import itertools
import json
from typing import Iterable

import regex

from .transcript import CONSTRAINED, DECODING_FIELD

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
    if answer_max_tokens < 1:
        raise ValueError(f"answer_max_tokens must be at least 1, got {answer_max_tokens}")
    if not (isinstance(answer_pattern, str) and len(answer_pattern) > 2
            and answer_pattern.startswith("/") and answer_pattern.endswith("/")
            and "\n" not in answer_pattern):
        raise ValueError(
            f"answer_pattern must be a Lark regular expression on one line between "
            f"slashes, like {ANSWER_PATTERN!r}; got {answer_pattern!r}"
        )
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


#: The name the transcript stores for this decoding (the ``decoding`` setting).
CONSTRAINED_DECODING = CONSTRAINED


def constrained_settings(settings: dict, grammar: str) -> dict:
    """The settings a grammar-constrained reply is keyed by: the reader's, plus the
    decoding's name and the grammar itself.

    Both go into the transcript key, so a constrained reply never shares a key with the
    unconstrained reply to the same prompt, and a changed grammar (other retrieved IDs,
    another answer limit) never replays an old reply. Lesson 3, "Force the format with a grammar";
    recorded with ``python -m helpers.reader record --constrained``.
    """
    return {**settings, DECODING_FIELD: CONSTRAINED_DECODING, "grammar": grammar}
