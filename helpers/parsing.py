"""The strict two-line parser for reader replies.

Introduced in lesson 1, "Parse without rewriting". A reply parses only when, after
removing white space around the whole reply, it is exactly::

    Answer: <text>
    Sources: none | ID[, ID ...]

The parser never repairs a reply. Documented choices, each tested:

* white space around the whole reply and around each field is ignored; the answer is
  otherwise kept exactly (case, inner spacing, punctuation);
* a CRLF line end between the two lines is accepted (``\\r?\\n``); a blank line, a
  third line, a missing ``Sources:`` line or lower-case keys are parse failures;
* an answer that is empty after trimming is a parse failure;
* ``Sources: none`` (any letter case) means no sources; otherwise IDs are split on
  commas, and an empty ID (``H08,`` or ``H08,,H11``) is a parse failure;
* IDs that do not exist in the handbook still parse: the support screen reports them.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import regex

ABSTAIN_PREFIX = "NOT IN HANDBOOK"
PREMISE_PREFIX = "PREMISE NOT SUPPORTED"

#: The whole reply, after white space around it is trimmed: two lines and nothing else.
REPLY_PATTERN = regex.compile(r"Answer: ([^\r\n]+)\r?\nSources: ([^\r\n]+)")
_SOURCE_SPLIT = regex.compile(r"\s*,\s*")


@dataclass(frozen=True)
class ParsedReply:
    """What the parser found; ``problem`` says why a reply failed to parse."""

    parse_ok: bool
    answer: str | None
    sources: tuple[str, ...]
    action: str
    problem: str = ""


def _failure(problem: str) -> ParsedReply:
    return ParsedReply(False, None, (), "parse failure", problem)


def _diagnose(text: str) -> str:
    """A short reason for a reply that does not match the two-line shape."""
    lines = regex.split(r"\r?\n", text)
    if not text:
        return "the reply is empty"
    if not lines[0].startswith("Answer: "):
        return "the first line does not start with 'Answer: '"
    if len(lines) == 1:
        return "there is no second line starting with 'Sources: '"
    if len(lines) > 2:
        return f"the reply has {len(lines)} lines, not 2"
    if not lines[1].startswith("Sources: "):
        return "the second line does not start with 'Sources: '"
    return "a line has nothing after its key"


def action_of(answer: str) -> str:
    """``abstain`` and ``flag premise`` are signalled by fixed answer prefixes."""
    if answer.startswith(ABSTAIN_PREFIX):
        return "abstain"
    if answer.startswith(PREMISE_PREFIX):
        return "flag premise"
    return "answer"


def parse_reader_output(text: str | None) -> ParsedReply:
    """Parse one raw reply; see the module docstring for the rules."""
    if text is None:
        return _failure("there is no reply")
    trimmed = text.strip()
    match = REPLY_PATTERN.fullmatch(trimmed)
    if match is None:
        return _failure(_diagnose(trimmed))
    answer = match.group(1).strip()
    source_text = match.group(2).strip()
    if not answer:
        return _failure("the answer is empty")
    if source_text.lower() == "none":
        sources: tuple[str, ...] = ()
    else:
        sources = tuple(_SOURCE_SPLIT.split(source_text))
        if any(not source for source in sources):
            return _failure("the Sources line has an empty ID between commas")
    return ParsedReply(True, answer, sources, action_of(answer))


def parse_outputs(outputs: pd.DataFrame) -> pd.DataFrame:
    """Parse a table with ``question_id`` and ``raw_output``; one row per reply.

    Adds parse_ok, parsed_answer (None on failure), parsed_sources (tuple),
    observed_action and parse_problem.
    """
    parsed = [parse_reader_output(text) for text in outputs["raw_output"]]
    frame = outputs.copy()
    frame["parse_ok"] = [p.parse_ok for p in parsed]
    frame["parsed_answer"] = pd.Series([p.answer for p in parsed], index=frame.index, dtype=object)
    frame["parsed_sources"] = pd.Series([p.sources for p in parsed], index=frame.index,
                                        dtype=object)
    frame["observed_action"] = [p.action for p in parsed]
    frame["parse_problem"] = [p.problem for p in parsed]
    return frame


class ReplyParseError(AssertionError):
    """Raised by :func:`assert_all_parsed`; stops a lesson's render."""


def show_line_breaks(text: str, marker: str = " ⏎ ") -> str:
    """Make line breaks visible: each ``\\n`` or ``\\r\\n`` becomes ``marker``."""
    return regex.sub(r"\r?\n", marker, text)


def assert_all_parsed(parsed: pd.DataFrame) -> None:
    """Raise :class:`ReplyParseError` naming every question whose reply did not parse.

    Lesson 1 calls this right after parsing, so a malformed reply halts the render
    instead of flowing into the scores.
    """
    failed = parsed[~parsed["parse_ok"].astype(bool)]
    if failed.empty:
        return
    lines = [
        f"{row.question_id}: {row.parse_problem}; raw output {row.raw_output!r}"
        for row in failed.itertuples(index=False)
    ]
    raise ReplyParseError(
        f"{len(failed)} reader repl{'y' if len(failed) == 1 else 'ies'} did not parse:\n"
        + "\n".join(lines)
    )
