"""Tokens, stop words, content words, SQuAD normalisation and the sentence split."""
from __future__ import annotations

import pytest

from helpers.text import (
    STOP_WORDS,
    content_tokens,
    content_words,
    normalize_answer,
    shared_content_words,
    split_sentences,
    tokenize,
)

# The stop-word list printed in the reference render; the retrieval figures depend on it.
SOURCE_STOP_WORDS = """a an and are as at be by can do does for from how i in is it my of
on or the there this to when where while with your""".split()


def test_stop_words_are_the_source_list():
    assert STOP_WORDS == frozenset(SOURCE_STOP_WORDS)
    assert len(STOP_WORDS) == 31


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("How much is the weekly training stipend?",
         ["how", "much", "is", "the", "weekly", "training", "stipend"]),
        # Hyphenated course codes stay one token; "$" and the full stops are dropped.
        ("course DSC-104 and FOL-210", ["course", "dsc-104", "and", "fol-210"]),
        ("$150 per week", ["150", "per", "week"]),
        ("from 9 a.m. to 5 p.m.", ["from", "9", "a", "m", "to", "5", "p", "m"]),
        # A token cannot start with a hyphen; letters outside ASCII count as letters.
        ("-x café-au-lait Über", ["x", "café-au-lait", "über"]),
        # The underscore is neither a letter nor a digit, so it splits.
        ("snake_case", ["snake", "case"]),
        ("", []),
        ("?! ... $", []),
    ],
)
def test_tokenize(text, tokens):
    assert tokenize(text) == tokens


def test_content_tokens_keep_order_and_repeats():
    text = "There are no weekend forklift classes. Forklift classes!"
    assert content_tokens(text) == [
        "no", "weekend", "forklift", "classes", "forklift", "classes",
    ]


def test_content_words_are_sorted_and_unique():
    text = "There are no weekend forklift classes. Forklift classes!"
    assert content_words(text) == ["classes", "forklift", "no", "weekend"]
    assert content_words(None) == []
    assert content_words("Where is it at?") == []


def test_q3_words_that_match_are_all_stop_words(questions, handbook):
    """Q3 shares "at" with H01 only as a stop word; its content words match nothing."""
    q3 = questions.set_index("question_id").at["Q3", "question"]
    h01 = handbook.set_index("passage_id").at["H01", "text"]
    shared_tokens = set(tokenize(q3)) & set(tokenize(h01))
    assert "at" in shared_tokens
    assert shared_tokens <= STOP_WORDS
    handbook_words = set().union(*(content_words(text) for text in handbook["text"]))
    assert set(content_words(q3)).isdisjoint(handbook_words)


def test_shared_content_words():
    assert shared_content_words("Saturday forklift session", "no weekend forklift classes") == [
        "forklift"
    ]
    assert shared_content_words("parking cost", None) == []


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        ("$150 per week", "150 per week"),
        ("Oct. 15", "oct 15"),
        # Articles go only as whole words; "then" and "another" keep theirs.
        ("The answer is an apple, then another", "answer is apple then another"),
        ("  A  cat,   and AN   apple ", "cat and apple"),
        # Unicode punctuation and symbols go, not only ASCII: euro sign, em dash, curly
        # quotes, copyright and multiplication signs, a caret. They are deleted, not
        # replaced by a space, as in SQuAD's script.
        ("The €150—fee!", "150fee"),
        ("“Room 104” ©×^", "room 104"),
        # A vulgar fraction is a number (No), not a symbol, so it stays.
        ("½ day", "½ day"),
        ("NO PRIOR DATA EXPERIENCE IS REQUIRED", "no prior data experience is required"),
        ("", ""),
        ("The", ""),
    ],
)
def test_normalize_answer(text, normalized):
    assert normalize_answer(text) == normalized


def test_normalize_answer_is_idempotent(handbook):
    for text in handbook["text"]:
        once = normalize_answer(text)
        assert normalize_answer(once) == once


def test_split_sentences_cuts_after_abbreviations(handbook):
    """The simple rule cuts H02 after "a.m."; the lessons say so rather than hide it."""
    h02 = handbook.set_index("passage_id").at["H02", "text"]
    assert split_sentences(h02) == [
        "The enrollment desk answers phone calls from 9 a.m.",
        "to 5 p.m., Monday to Friday.",
        "Messages left after hours are returned the next business day.",
    ]


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        ("One. Two! Three? Four", ["One.", "Two!", "Three?", "Four"]),
        ("  Leading and trailing.  ", ["Leading and trailing."]),
        ("No end mark", ["No end mark"]),
        ("Code DSC-105.Next", ["Code DSC-105.Next"]),
        ("Lines.\nBreak.", ["Lines.", "Break."]),
        ("", []),
    ],
)
def test_split_sentences(text, sentences):
    assert split_sentences(text) == sentences


def test_every_handbook_sentence_split_rejoins_to_the_text(handbook):
    for text in handbook["text"]:
        assert " ".join(split_sentences(text)) == text


def test_content_words_take_another_stop_word_list():
    question = "Where can my kid stay while I study at night?"
    assert "at" not in content_words(question)
    assert "at" in content_words(question, STOP_WORDS - {"at"})
    assert content_tokens("at the at", STOP_WORDS - {"at"}) == ["at", "at"]
    assert shared_content_words(question, "Classes are held at the centre.",
                                STOP_WORDS - {"at"}) == ["at"]
    assert shared_content_words(question, "Classes are held at the centre.") == []
