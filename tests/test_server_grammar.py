"""The reply grammar in llama.cpp's GBNF (lesson 3, "The grammar on a serving engine").

The GBNF form must describe the same replies as the llguidance grammar, except that its
answer is bounded in characters; llama.cpp's server enforcing it is tested in
``test_reader_server.py``.
"""
from __future__ import annotations

import pytest

pytest.importorskip("llguidance")

from helpers.reader.constrained import (  # noqa: E402
    ANSWER_MAX_CHARS,
    build_gbnf,
    grammar_accepts,
    reply_matches_gbnf,
)

REPLIES = [
    "Answer: $150 per week\nSources: H08",
    "Answer: $150 per week\nSources: none",
    "Answer: NOT IN HANDBOOK\nSources: none",
    "Answer: PREMISE NOT SUPPORTED: it is a spreadsheet workshop\nSources: H10, H11",
    "Answer: $150 per week\nSources: H03",
    "Answer: $150 per week\nSources: H08, H08",
    "Answer: $150 per week\nSources: H08,H11",
    "answer: $150 per week\nsources: H08",
    "Answer:  leading space\nSources: none",
    "Answer: two\nlines\nSources: none",
    "Answer: $150 per week\nSources: H08\n",
    "Answer: $150 per week\nSources: H08\nThanks",
    "Answer: \nSources: none",
]


@pytest.fixture(scope="module")
def tokenizer(smol_tokenizer):
    return smol_tokenizer


def test_gbnf_lists_the_same_source_values_and_bounds_the_answer():
    gbnf = build_gbnf(["H08", "H11"], answer_max_chars=10)
    assert gbnf.splitlines() == [
        'root ::= "Answer: " answer "\\nSources: " sources',
        "answer ::= [^ \\t\\n\\r] [^\\n\\r]{0,9}",
        'sources ::= "none" | "H08" | "H11" | "H08, H11" | "H11, H08"',
    ]
    with pytest.raises(ValueError):
        build_gbnf(["H08"], answer_max_chars=0)
    with pytest.raises(ValueError, match="cannot be cited"):
        build_gbnf(["H 08"])


@pytest.mark.parametrize("reply", REPLIES)
def test_gbnf_language_agrees_with_the_llguidance_grammar(reply, tokenizer):
    ids = ["H08", "H10", "H11"]
    assert reply_matches_gbnf(ids, reply) == grammar_accepts(tokenizer, ids, reply)


def test_the_answer_bound_is_in_characters():
    ids = ["H08"]
    at_bound = "Answer: " + "x" * ANSWER_MAX_CHARS + "\nSources: H08"
    past_bound = "Answer: " + "x" * (ANSWER_MAX_CHARS + 1) + "\nSources: H08"
    assert reply_matches_gbnf(ids, at_bound)
    assert not reply_matches_gbnf(ids, past_bound)
