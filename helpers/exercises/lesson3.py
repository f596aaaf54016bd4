"""Lesson 3's exercises, one checker each (see :mod:`helpers.exercises`)."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from .. import parsing, screen
from .framework import (
    SMOLLM2,
    _id_list,
    _passage_texts,
    _plural,
    _question_texts,
    _require_keys,
    _whole_number,
    correct,
    exercise,
    fixture_cache,
    hint,
)


def _small_reader():
    from runtime import load_reader

    return load_reader(SMOLLM2, mode="live")


def _tokenizer():
    return _small_reader().tokenizer


@fixture_cache
def _lesson3_inputs() -> pd.DataFrame:
    from runtime import load_riverton

    from .. import prompts, retrieval

    fixture = load_riverton()
    retrieved = retrieval.TfidfRetriever.fit(fixture.handbook).rank(fixture.questions, k=3)
    return prompts.reader_inputs(fixture.questions, retrieved, fixture.handbook).set_index("question_id")


def _constrained():
    from .. import grammar

    return grammar


def _accepts(ids: Iterable[str], reply: str, pattern: str | None = None) -> bool:
    constrained = _constrained()
    return constrained.grammar_accepts(_tokenizer(), tuple(ids), reply,
                                       answer_pattern=pattern or constrained.ANSWER_PATTERN)


@exercise("3.1", "Parsed, yet outside the grammar", expects="reply, a raw two-line reply "
          "to Q1 as a string")
def parser_not_grammar(reply):
    """Lesson 3, exercise 3.1: a reply to Q1 that the parser accepts and the grammar refuses.

    The reply may cite only H08 (Q1's one retrieved passage) or none, so the reason
    cannot be the probe the lesson already shows ("Force the format with a grammar").
    """
    if not isinstance(reply, str):
        return hint("reply must be a string: a raw reply, two lines.")
    parsed = parsing.parse_reader_output(reply)
    if not parsed.parse_ok:
        return hint(f"The strict parser rejects it: {parsed.problem}.")
    ids = _lesson3_inputs().loc["Q1", "retrieved_ids"]
    if not set(parsed.sources) <= set(ids):
        return hint(f"Cite only {', '.join(ids)} or none: a citation outside the retrieved "
                    "passages is the case the lesson's probes already show.")
    if _accepts(ids, reply):
        return hint("The grammar accepts this reply too. Compare the grammar printed in the "
                    "lesson with the parser's rules (help(parsing)): where is the parser "
                    "more lenient?")
    return correct("The parser takes it and the grammar does not: the grammar is the "
                   "stricter of the two.")


def _largest_limits() -> dict[str, int]:
    """Per question, the largest answer limit whose longest reply fits in the token cap."""
    constrained = _constrained()
    from ..decoding import MAX_NEW_TOKENS

    tokenizer = _tokenizer()
    limits = {}
    for qid, row in _lesson3_inputs().iterrows():
        n = 1
        while constrained.reply_token_bound(tokenizer, row["retrieved_ids"],
                                            answer_max_tokens=n + 1) <= MAX_NEW_TOKENS:
            n += 1
        limits[qid] = n
    return limits


@exercise("3.2", "How long may an answer be?", expects="a dict with keys "
          "'answer_max_tokens' (an integer) and 'deciding' (question IDs)")
def answer_limit(limit):
    """Lesson 3, exercise 3.2: the largest answer limit that keeps all six replies in the cap.

    Recomputed with :func:`helpers.grammar.reply_token_bound` for each question's
    retrieved IDs; ``deciding`` lists the questions whose longest reply then reaches the
    cap ("Force the format with a grammar").
    """
    constrained = _constrained()
    from ..decoding import MAX_NEW_TOKENS

    _require_keys(limit, "limit", ("answer_max_tokens", "deciding"))
    value = _whole_number(limit["answer_max_tokens"], "'answer_max_tokens'")
    per_question = _largest_limits()
    best = min(per_question.values())
    deciding = sorted(q for q, n in per_question.items() if n == best)
    if value != best:
        if value == constrained.ANSWER_MAX_TOKENS:
            return hint(f"{value} is the lesson's limit, chosen with room to spare; find the "
                        "largest that still fits.")
        if value > best:
            over = [q for q, n in per_question.items() if n < value]
            loosest = [q for q, n in per_question.items() if n == value]
            if loosest:
                return hint(f"{value} keeps the longest reply of {', '.join(loosest)} inside "
                            "the cap, but not every question's. Which question allows the "
                            "longest Sources line?")
            return hint(f"At {value} the longest reply of {_plural(len(over), 'question', 'questions')} "
                        f"would run past the cap of {MAX_NEW_TOKENS} tokens.")
        return hint(f"At {value} every reply fits with room to spare: the largest limit "
                    "that still fits is higher. Raise it until one more token would break "
                    "the cap.")
    given = sorted(set(_id_list(limit["deciding"], "deciding")))
    if given != deciding:
        return hint("'deciding' lists the questions that set the limit: every question "
                    "whose longest reply would run past the cap at one token more.")
    return correct()


# Answers to try under a grammar, and the citation lists it allows, to find which screen
# checks a reply the grammar admits can still fail.
_TRIAL_ANSWERS = ("No", "NOT IN HANDBOOK", "PREMISE NOT SUPPORTED: it is", "It takes 5 weeks")


@fixture_cache
def _open_checks(ids: tuple[str, ...]) -> frozenset[str]:
    """Screen checks that some reply admitted by the grammar for ``ids`` fails."""
    constrained = _constrained()
    passages = _passage_texts()
    failing: set[str] = set()
    for answer in _TRIAL_ANSWERS:
        for sources in constrained.source_lists(ids):
            reply = f"Answer: {answer}\nSources: {sources}"
            if not _accepts(ids, reply):
                continue
            parsed = parsing.parse_reader_output(reply)
            values = screen.screen_reply(parsed.answer, parsed.sources, parsed.parse_ok,
                                         parsed.action, ids, passages)
            failing |= {c for c in screen.CHECKS if not values[c]}
    return frozenset(failing)


@exercise("3.3", "What the grammar leaves open", expects="a dict from screen check names "
          "to raw replies to Q4")
def grammar_leaves_open(open_checks):
    """Lesson 3, exercise 3.3: for each screen check the grammar cannot guarantee, a reply.

    Each reply must be admitted by Q4's grammar and fail its check; the set of checks must
    be exactly those some admitted reply can fail ("Parsed is not the same as right").
    """
    if not isinstance(open_checks, Mapping):
        return hint("open_checks must be a dict: {check name: reply}.")
    ids = tuple(_lesson3_inputs().loc["Q4", "retrieved_ids"])
    unknown = [name for name in open_checks if name not in screen.CHECKS]
    if unknown:
        return hint(f"{unknown[0]!r} is not a screen check; they are {', '.join(screen.CHECKS)}.")
    passages = _passage_texts()
    truly_open = _open_checks(ids)
    for name, reply in open_checks.items():
        if not isinstance(reply, str):
            return hint(f"The reply for {name} must be a string.")
        if not _accepts(ids, reply):
            if name not in truly_open:
                return hint(f"The grammar rejects your reply for {name}. Can any reply the "
                            f"grammar admits fail {name}?")
            return hint(f"The grammar rejects your reply for {name}: it must be one the "
                        f"grammar admits (two lines, citing only {', '.join(ids)} or none).")
        parsed = parsing.parse_reader_output(reply)
        values = screen.screen_reply(parsed.answer, parsed.sources, parsed.parse_ok,
                                     parsed.action, ids, passages)
        if values[name]:
            return hint(f"Your reply for {name} passes that check; it must fail it.")
    missing = truly_open - set(open_checks)
    if missing:
        return hint(f"There {'is' if len(missing) == 1 else 'are'} "
                    f"{_plural(len(missing), 'more check', 'more checks')} that a reply the "
                    "grammar admits can still fail.")
    guaranteed = [c for c in screen.CHECKS if c not in truly_open]
    return correct(f"The grammar guarantees only {', '.join(guaranteed)}; the other checks "
                   "still have to run.")


# (reply to Q5, whether a digit grammar must admit it, what is wrong if it decides otherwise)
_DIGIT_PROBES = (
    ("Answer: 5\nSources: none", True, "a one-digit answer"),
    ("Answer: Parking costs $3 a day.\nSources: H01", True, "an answer with a figure inside"),
    ("Answer: Room 104\nSources: H03", True, "an answer that ends with its figure"),
    ("Answer: NOT IN HANDBOOK\nSources: none", False, "an answer with no digit"),
    ("Answer: Parking is free.\nSources: H01", False, "an answer with no digit"),
    ("Answer:  5 dollars\nSources: none", False, "an answer that starts with a space"),
    ("Answer: Parking\n5\nSources: none", False, "an answer that runs onto a second line"),
)


def _digit_pattern_problem(pattern: Any) -> str | None:
    """Why ``pattern`` is not a digit-demanding answer rule for Q5, or None."""
    constrained = _constrained()
    if not isinstance(pattern, str):
        return "digit_answer must be a string: a Lark regular expression between slashes."
    ids = tuple(_lesson3_inputs().loc["Q5", "retrieved_ids"])
    try:
        constrained.build_grammar(ids, answer_pattern=pattern)
        results = [(probe, must, what, _accepts(ids, probe, pattern))
                   for probe, must, what in _DIGIT_PROBES]
    except (ValueError, constrained.ConstrainedDecodingError) as error:
        return f"The grammar cannot be built with digit_answer: {error}"
    for probe, must, what, accepted in results:
        if accepted != must:
            verb = "rejects" if must else "admits"
            return (f"Your pattern {verb} {what}: {parsing.show_line_breaks(probe)!r}. It must "
                    "admit every one-line answer that starts with a visible character and "
                    "holds a digit, and nothing else.")
    return None


@exercise("3.4", "Demand a figure", expects="digit_answer (a pattern), q5_reply (a string) "
          "and q5_invented (a list of figures)")
def demand_a_figure(digit_answer, q5_reply, q5_invented):
    """Lesson 3, exercise 3.4: an answer rule that demands a digit, run live on Q5.

    Checks the pattern on probe replies, regenerates SmolLM2's reply to Q5 under it (one
    greedy generation) and compares, and recomputes the reply's invented figures: digit
    runs in no retrieved passage and not in the question ("Parsed is not the same as
    right").
    """
    constrained = _constrained()
    problem = _digit_pattern_problem(digit_answer)
    if problem:
        return hint(problem)
    if not isinstance(q5_reply, str):
        return hint("q5_reply is the raw_output string of SmolLM2's constrained reply to Q5.")
    row = _lesson3_inputs().loc["Q5"]
    from runtime import generate_all

    from ..decoding import MAX_NEW_TOKENS

    reader = _small_reader()
    asked = pd.DataFrame([{"question_id": "Q5", "messages": row["messages"]}])
    grammar = constrained.reply_grammar(reader.tokenizer, row["retrieved_ids"], MAX_NEW_TOKENS,
                                        answer_pattern=digit_answer)
    if q5_reply != generate_all(reader, asked, grammar=grammar).at[0, "raw_output"]:
        return hint("That is not what SmolLM2 writes for Q5 under your pattern: generate it "
                    "with generate_all(..., grammar=grammar.reply_grammar(..., "
                    "answer_pattern=digit_answer)) and pass its raw_output.")
    parsed = parsing.parse_reader_output(q5_reply)
    passages = _passage_texts()
    given = set(screen.numbers_in(" ".join(passages[p] for p in row["retrieved_ids"])))
    given |= set(screen.numbers_in(_question_texts()["Q5"]))
    invented = [n for n in screen.numbers_in(parsed.answer) if n not in given]
    if not (isinstance(q5_invented, (list, tuple))
            and sorted(map(str, q5_invented)) == sorted(invented)):
        return hint("q5_invented lists the figures (digit runs, as screen.numbers_in finds "
                    "them) in the answer that appear in no retrieved passage and not in the "
                    "question.")
    return correct(f"The reply's action is {parsed.action!r}. The reply Q5 calls for, NOT IN "
                   "HANDBOOK, has no digit, so this grammar forbids it.")


@exercise("3.5", "Is a digit guaranteed?", expects="digit_answer (your pattern from 3.4) "
          "and loophole (a raw reply to Q5)")
def digit_loophole(digit_answer, loophole):
    """Lesson 3, exercise 3.5: a reply with no digit that the digit grammar still admits.

    The reply must parse, hold no digit in its answer, and be admitted by the grammar
    built with the student's pattern for Q5 ("Force the format with a grammar").
    """
    problem = _digit_pattern_problem(digit_answer)
    if problem:
        return hint("Finish exercise 3.4 first. " + problem)
    if not isinstance(loophole, str):
        return hint("loophole must be a string: a raw reply, two lines.")
    parsed = parsing.parse_reader_output(loophole)
    if not parsed.parse_ok:
        return hint(f"The strict parser rejects it: {parsed.problem}.")
    if any(ch.isdigit() for ch in parsed.answer):
        return hint("Your reply's answer holds a digit; find one without any that the "
                    "grammar still admits.")
    ids = tuple(_lesson3_inputs().loc["Q5", "retrieved_ids"])
    if not _accepts(ids, loophole, digit_answer):
        return hint("Your grammar rejects it, as the pattern says it should. Read the whole "
                    "answer rule of the grammar: is there anything besides the pattern that "
                    "can end the answer?")
    return correct("The answer rule's token limit ends the answer whether or not the "
                   "pattern is complete, so the digit is guaranteed only in answers shorter "
                   "than the limit.")

