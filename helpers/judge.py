"""A model as support judge: SmolLM2 asked "yes" or "no", measured against the human review.

Introduced in lesson 4, "A model as judge". For each reviewed reply with a yes-or-no
human verdict, the judge sees what the human test shows a person (the cited passages,
the question and the answer) and must reply with one word. The reply is decoded under a
grammar that admits only ``yes`` or ``no`` and then parsed strictly anyway; its replies
are recorded in the reader transcript, keyed like every other generation, so the page's
figures replay exactly. ``python -m runtime record judge`` records them again.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from .grammar import constrained_settings
from .prompts import format_passage_block
from .review import NOT_SUPPORTED, SUPPORTED

JUDGE_READER = "smollm2_135m_instruct"

JUDGE_SYSTEM_PROMPT = (
    "You check answers against a handbook. Read the cited passage, the question and the "
    "answer. Reply yes if the cited passage, on its own, supports the answer to the "
    "question. Otherwise reply no. Reply with one word: yes or no."
)
NO_CITED_PASSAGE = "(no passage was cited)"

#: The only two replies the grammar admits (and the parser accepts).
JUDGE_GRAMMAR = 'start: "yes" | "no"\n'

#: Greedy, a couple of tokens, and no repetition penalty: the prompt says both words, and
#: a passage containing "no" would otherwise tilt the choice against that word.
JUDGE_SETTINGS = {"do_sample": False, "max_new_tokens": 4, "repetition_penalty": 1.0}


def judge_messages(question: str, answer: str,
                   cited: Sequence[tuple[str, str]]) -> list[dict]:
    """The judge's chat messages for one reply: system prompt, then passages, question,
    answer and the yes-or-no question."""
    block = format_passage_block(cited) if cited else NO_CITED_PASSAGE
    user = (
        f"CITED PASSAGE:\n{block}\n\n"
        f"QUESTION: {question}\n"
        f"ANSWER: {answer}\n\n"
        "Does the cited passage support this answer to the question? Reply yes or no."
    )
    return [{"role": "system", "content": JUDGE_SYSTEM_PROMPT},
            {"role": "user", "content": user}]


def judge_settings() -> dict:
    """The settings a judge reply is keyed by: :data:`JUDGE_SETTINGS` plus the grammar."""
    return constrained_settings(JUDGE_SETTINGS, JUDGE_GRAMMAR)


@dataclass(frozen=True)
class JudgeReply:
    """A parsed judge reply: ``supported`` is True for "yes", False for "no"."""

    parse_ok: bool
    supported: bool | None
    problem: str = ""


def parse_judge_reply(text: str | None) -> JudgeReply:
    """Strict: after trimming white space the reply is exactly ``yes`` or ``no``.

    No other casing, no punctuation, no second word: "Yes." is a parse failure.
    """
    if text is None:
        return JudgeReply(False, None, "there is no reply")
    word = text.strip()
    if word in ("yes", "no"):
        return JudgeReply(True, word == "yes")
    if not word:
        return JudgeReply(False, None, "the reply is empty")
    return JudgeReply(False, None, f"the reply {word[:40]!r} is not exactly 'yes' or 'no'")


class JudgeParseError(AssertionError):
    """Raised by :func:`assert_judge_parsed`; stops the lesson's render."""


def assert_judge_parsed(frame: pd.DataFrame) -> None:
    """The judge's parse gate: raise naming every review row whose judge reply failed."""
    failed = frame[~frame["judge_parse_ok"].astype(bool)]
    if failed.empty:
        return
    lines = [f"{row.review_id}: {row.judge_problem}; raw reply {row.judge_raw!r}"
             for row in failed.itertuples(index=False)]
    raise JudgeParseError(
        f"{len(failed)} judge repl{'y' if len(failed) == 1 else 'ies'} did not parse:\n"
        + "\n".join(lines))


def judge_requests(review: pd.DataFrame, questions: Mapping[str, str],
                   passages: Mapping[str, str]) -> pd.DataFrame:
    """One judge request per review row with a yes-or-no human verdict.

    ``questions`` maps question IDs to their text, ``passages`` passage IDs to theirs.
    Rows whose messages coincide (the same answer and sources to the same question from
    two readers) share one request, named after the first such row: the transcript
    holds one reply per exact request.
    """
    binary = review[review["verdict"].isin((SUPPORTED, NOT_SUPPORTED))]
    rows = []
    for row in binary.itertuples(index=False):
        sources = row.sources
        missing = [s for s in sources if s not in passages]
        cited = [(s, passages[s]) for s in sources if s in passages]
        if missing:
            # A made-up ID has no text to show; the judge sees it named, with nothing more.
            cited += [(s, "(no such passage in the handbook)") for s in missing]
        rows.append({"review_id": row.review_id, "question_id": row.question_id,
                     "messages": judge_messages(questions[row.question_id],
                                                row.answer, cited)})
    frame = pd.DataFrame(rows, columns=["review_id", "question_id", "messages"])
    same = frame["messages"].map(repr)
    frame["request_id"] = frame.groupby(same, sort=False)["review_id"].transform("first")
    return frame
