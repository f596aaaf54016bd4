"""Tokens, stop words, content words, answer normalisation and sentence splitting.

Introduced in lesson 1, "Check overlap before retrieval" and "Score answers".
"""
from __future__ import annotations

from collections.abc import Collection

import regex

#: The stop-word list of the reference render, kept exactly: the figures depend on it.
STOP_WORDS: frozenset[str] = frozenset(
    """a an and are as at be by can do does for from how i in is it my of on or the
    there this to when where while with your""".split()
)

_SENTENCE_END = regex.compile(r"(?<=[.!?])\s+")


def tokenize(text: str) -> list[str]:
    """Lower-case ``text`` and return its word tokens, in order, with repeats.

    A token starts with a letter or digit and continues with letters, digits or
    hyphens, so ``DSC-104`` stays one token and ``$150`` becomes ``150``.
    """
    return regex.findall(r"[\p{L}\p{N}][\p{L}\p{N}-]*", text.lower())


def content_tokens(text: str, stop_words: Collection[str] = STOP_WORDS) -> list[str]:
    """Tokens of ``text`` that are not stop words, in order, with repeats.

    ``stop_words`` defaults to the lesson's list; lesson 1's exercises pass another.
    """
    return [token for token in tokenize(text) if token not in stop_words]


def content_words(text: str | None, stop_words: Collection[str] = STOP_WORDS) -> list[str]:
    """Sorted unique content words of ``text`` (an empty list for ``None``)."""
    if text is None:
        return []
    return sorted(set(content_tokens(text, stop_words)))


def shared_content_words(first: str | None, second: str | None,
                         stop_words: Collection[str] = STOP_WORDS) -> list[str]:
    """Content words that both texts use, sorted."""
    return sorted(set(content_words(first, stop_words)) & set(content_words(second, stop_words)))


# SQuAD's normalize_answer as a chain of small steps. The punctuation step uses the
# Unicode classes P (punctuation) and S (symbols), so "$" and "€" go too.
def lower_case(text: str) -> str:
    return text.lower()


def drop_punctuation_and_symbols(text: str) -> str:
    return regex.sub(r"[\p{P}\p{S}]", "", text)


def drop_articles(text: str) -> str:
    return regex.sub(r"\b(a|an|the)\b", " ", text)


def squeeze_spaces(text: str) -> str:
    return regex.sub(r"\s+", " ", text).strip()


def normalize_answer(text: str) -> str:
    """Lower-case, drop punctuation and symbols, drop English articles, squeeze spaces."""
    return squeeze_spaces(drop_articles(drop_punctuation_and_symbols(lower_case(text))))


def split_sentences(text: str) -> list[str]:
    """Split after ``.``, ``!`` or ``?`` followed by white space.

    Deliberately simple: "9 a.m. to 5 p.m." is cut after "a.m.", as lesson 1 notes.
    """
    return [part for part in _SENTENCE_END.split(text.strip()) if part]
