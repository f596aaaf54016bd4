"""Lesson 3's exercises, one checker each (see :mod:`exercises`)."""
from __future__ import annotations

import itertools
from typing import Any

from helpers import grammar, parsing, screen
from helpers.decoding import MAX_NEW_TOKENS
from .framework import (_failed_checks, _first_hint, _Hint, _id_list, _known, _lesson1,
                        _passage_texts, _plural, _reply, _require_keys, _retrieved_ids, _same_ids,
                        _whole_number, correct, exercise, fixture_cache, hint)


def _small_reader():
    from runtime import load_reader

    return load_reader("smollm2_135m_instruct", mode="live")


def _accepts(ids: tuple[str, ...], reply: str, pattern: str | None = None) -> bool:
    return grammar.grammar_accepts(_small_reader().tokenizer, ids, reply,
                                   answer_pattern=pattern or grammar.ANSWER_PATTERN)


@exercise("3.1", "Parsed, yet outside the grammar", expects="reply, a raw two-line reply "
          "to Q1 as a string")
def parser_not_grammar(reply):
    """Lesson 3, exercise 3.1: a reply to Q1 that the parser accepts and the grammar refuses.

    The reply may cite only H08 (Q1's one retrieved passage) or none, so the reason
    cannot be the probe the lesson already shows ("Force the format with a grammar").
    """
    parsed, ids = _reply(reply, "reply", "it"), _retrieved_ids()["Q1"]
    if not set(parsed.sources) <= set(ids):
        return hint(f"Cite only {', '.join(ids)} or none: a citation outside the retrieved "
                    "passages is the case the lesson's probes already show.")
    if _accepts(ids, reply):
        return hint("The grammar accepts this reply too. Compare the grammar printed in the "
                    "lesson with the parser's rules (help(parsing)): where is the parser "
                    "more lenient?")
    return correct("The parser takes it and the grammar does not: the grammar is the "
                   "stricter of the two.")


def _answer_tokens(answer: str) -> int:
    """The tokens of an answer as the grammar's matcher counts them: those after
    "Answer:", the first of which carries the space."""
    tokenizer = _small_reader().tokenizer
    with_answer, alone = (len(tokenizer(text, add_special_tokens=False)["input_ids"])
                          for text in (f"Answer: {answer}", "Answer:"))
    return with_answer - alone


def _largest_limits() -> dict[str, int]:
    """Per question, the largest answer limit whose longest reply fits in the token cap."""
    tokenizer = _small_reader().tokenizer
    return {qid: next(n for n in itertools.count(1) if grammar.reply_token_bound(
        tokenizer, ids, answer_max_tokens=n + 1) > MAX_NEW_TOKENS)
        for qid, ids in _retrieved_ids().items()}


@exercise("3.2", "How long may an answer be?", expects="a dict with keys "
          "'answer_max_tokens' (an integer) and 'deciding' (question IDs)")
def answer_limit(limit):
    """Lesson 3, exercise 3.2: the largest answer limit that keeps all six replies in the cap.

    Recomputed with :func:`helpers.grammar.reply_token_bound` for each question's
    retrieved IDs; ``deciding`` lists the questions whose longest reply then reaches the
    cap ("Force the format with a grammar").
    """
    _require_keys(limit, "limit", ("answer_max_tokens", "deciding"))
    value = _whole_number(limit["answer_max_tokens"], "'answer_max_tokens'")
    per_question = _largest_limits()
    best = min(per_question.values())
    # At the right value, the questions it keeps in the cap with no token to spare decide it.
    loosest = [q for q, n in per_question.items() if n == value]
    over = sum(n < value for n in per_question.values())
    _first_hint(
        (value != best and value == grammar.ANSWER_MAX_TOKENS, f"{value} is the lesson's limit, "
         "chosen with room to spare; find the largest that still fits."),
        (value > best and loosest, f"{value} keeps the longest reply of {', '.join(loosest)} "
         "inside the cap, but not every question's. Which question allows the longest Sources "
         "line?"),
        (value > best, f"At {value} the longest reply of {_plural(over, 'question', 'questions')} "
                       f"would run past the cap of {MAX_NEW_TOKENS} tokens."),
        (value < best, f"At {value} every reply fits with room to spare: the largest limit that "
                       "still fits is higher. Raise it until one more token would break the cap."))
    _same_ids(_id_list(limit["deciding"], "deciding"), loosest, "'deciding' lists the questions "
              "that set the limit: every question whose longest reply would run past the cap at "
              "one token more.")
    return correct()


# Answers to try under a grammar, and the citation lists it allows, to find which screen
# checks a reply the grammar admits can still fail.
_TRIAL_ANSWERS = ("No", "NOT IN HANDBOOK", "PREMISE NOT SUPPORTED: it is", "It takes 5 weeks")


@fixture_cache
def _open_checks(ids: tuple[str, ...]) -> frozenset[str]:
    """Screen checks that some reply admitted by the grammar for ``ids`` fails."""
    replies = [f"Answer: {answer}\nSources: {sources}"
               for answer in _TRIAL_ANSWERS for sources in grammar.source_lists(ids)]
    return frozenset(check for reply in replies if _accepts(ids, reply)
                     for check in _failed_checks(parsing.parse_reader_output(reply), ids))


@exercise("3.3", "What the grammar leaves open", expects="a dict from screen check names "
          "to raw replies to Q4")
def grammar_leaves_open(open_checks):
    """Lesson 3, exercise 3.3: for each screen check the grammar cannot guarantee, a reply.

    Each reply must be admitted by Q4's grammar and fail its check; the set of checks must
    be exactly those some admitted reply can fail ("Parsed is not the same as right").
    """
    _require_keys(open_checks, "open_checks", ())
    ids = _retrieved_ids()["Q4"]
    _known(open_checks, screen.CHECKS, f"a screen check; they are {', '.join(screen.CHECKS)}")
    truly_open = _open_checks(ids)
    for name, reply in open_checks.items():
        if not isinstance(reply, str):
            return hint(f"The reply for {name} must be a string.")
        if not _accepts(ids, reply):
            return hint(f"The grammar rejects your reply for {name}. Can any reply the grammar "
                        f"admits fail {name}?" if name not in truly_open else
                        f"The grammar rejects your reply for {name}: it must be one the grammar "
                        f"admits (two lines, citing only {', '.join(ids)} or none).")
        if name not in _failed_checks(parsing.parse_reader_output(reply), ids):
            return hint(f"Your reply for {name} passes that check; it must fail it.")
    _same_ids(open_checks, truly_open, None,
              lambda _, missing: f"There {'is' if missing == 1 else 'are'} "
                                 f"{_plural(missing, 'more check', 'more checks')} that a reply "
                                 "the grammar admits can still fail.")
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


def _digit_pattern(pattern: Any, before: str = "") -> None:
    """End the check with a hint (after ``before``) unless ``pattern`` is a digit-demanding
    answer rule for Q5: one the probe replies show admits exactly the one-line answers that
    start with a visible character and hold a digit."""
    if not isinstance(pattern, str):
        raise _Hint(f"{before}digit_answer must be a string: a Lark regular expression between "
                    "slashes.")
    try:
        _first_hint(*((_accepts(_retrieved_ids()["Q5"], probe, pattern) != must,
                       f"{before}Your pattern {'rejects' if must else 'admits'} {what}: "
                       f"{parsing.show_line_breaks(probe)!r}. It must admit every one-line "
                       "answer that starts with a visible character and holds a digit, and "
                       "nothing else.") for probe, must, what in _DIGIT_PROBES))
    except (ValueError, grammar.ConstrainedDecodingError) as error:
        raise _Hint(f"{before}The grammar cannot be built with digit_answer: {error}") from error


@exercise("3.4", "Demand a figure", expects="digit_answer (a pattern), q5_reply (a string) "
          "and q5_invented (a list of figures)")
def demand_a_figure(digit_answer, q5_reply, q5_invented):
    """Lesson 3, exercise 3.4: an answer rule that demands a digit, run live on Q5.

    Checks the pattern on probe replies, regenerates SmolLM2's reply to Q5 under it (one
    greedy generation) and compares, and recomputes the reply's invented figures: digit
    runs in no retrieved passage and not in the question ("Parsed is not the same as
    right").
    """
    from runtime import generate_all

    _digit_pattern(digit_answer)
    if not isinstance(q5_reply, str):
        return hint("q5_reply is the raw_output string of SmolLM2's constrained reply to Q5.")
    # Q5's row of lesson 1's reader inputs (helpers.prompts.retrieve_and_prompt's).
    asked = _lesson1()[1].query("question_id == 'Q5'")
    reader, row = _small_reader(), asked.iloc[0]
    reply_grammar = grammar.reply_grammar(reader.tokenizer, row["retrieved_ids"], MAX_NEW_TOKENS,
                                          answer_pattern=digit_answer)
    if q5_reply != generate_all(reader, asked, grammar=reply_grammar).at[0, "raw_output"]:
        return hint("That is not what SmolLM2 writes for Q5 under your pattern: generate it "
                    "with generate_all(..., grammar=grammar.reply_grammar(..., "
                    "answer_pattern=digit_answer)) and pass its raw_output.")
    parsed = parsing.parse_reader_output(q5_reply)
    known = set(screen.numbers_in(" ".join(_passage_texts()[p] for p in row["retrieved_ids"])))
    known |= set(screen.numbers_in(row["question"]))
    invented = [n for n in screen.numbers_in(parsed.answer) if n not in known]
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
    _digit_pattern(digit_answer, "Finish exercise 3.4 first. ")
    parsed = _reply(loophole, "loophole", "it")
    if any(ch.isdigit() for ch in parsed.answer):
        return hint("Your reply's answer holds a digit; find one without any that the "
                    "grammar still admits.")
    if not _accepts(_retrieved_ids()["Q5"], loophole, digit_answer):
        length, limit = _answer_tokens(parsed.answer), grammar.ANSWER_MAX_TOKENS
        return hint(f"Your grammar rejects it, as the pattern says it should: its answer "
                    f"takes {_plural(length, 'token', 'tokens')} as the matcher counts them "
                    "(from the token that carries the space after 'Answer:'), "
                    + (f"more than the answer rule's limit of {limit}, so the grammar never "
                       "lets it get that far." if length > limit else
                       f"fewer than the answer rule's limit of {limit}, so the pattern alone "
                       "decides.")
                    + " Read the whole answer rule of the grammar: is there anything besides "
                    "the pattern that can end the answer?")
    return correct("The answer rule's token limit ends the answer whether or not the "
                   "pattern is complete, so the digit is guaranteed only in answers shorter "
                   "than the limit.")
