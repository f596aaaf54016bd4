"""The human support review: its vocabulary, how a reply is written in it, and the rule
for replies that change.

Introduced in lesson 4, "The review record". Each row of a review says, for one recorded
reply (a reader's, or the sentence baseline's), whether the passage it cites, read on its
own, backs the answer it gives to its question (the human support test of lesson 1). A
row is tied to the exact reply it judged: the key of its transcript entry, the raw reply
and the answer and sources the strict parser read from it. Reading, writing and checking
a review file is the runtime's business (``runtime.reviews``); what a verdict may say,
when it still applies, and how the review meets the screen (:func:`review_rows`) are
here.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import pandas as pd

from .parsing import parse_reader_output
from .screen import failed_checks, screen_reply

SUPPORTED = "supported"
NOT_SUPPORTED = "not supported"
NOT_APPLICABLE = "not applicable"
VERDICTS = (SUPPORTED, NOT_SUPPORTED, NOT_APPLICABLE)

PARSE_FAILURE_REASON = "reply did not parse"


@dataclass(frozen=True)
class Reason:
    """One reason a reviewer may give, the verdict it goes with, and what it means."""

    name: str
    verdict: str
    meaning: str


#: The fixed vocabulary of reasons, in the order the lesson lists them. A reason belongs
#: to exactly one verdict. The human test is applied to the reply as an answer to its
#: question: reading only the cited passage, is this answer to this question supported?
#: An abstention cites nothing to read, so its claim (the passages given do not answer)
#: is checked against the passages the reader was given. When several reasons apply to
#: an unsupported reply, the review gives the first in this order: whether it is an
#: answer at all, then whether it cites anything, then what the cited passage says.
REASONS: dict[str, Reason] = {
    reason.name: reason
    for reason in (
        Reason("answer stated in cited passage", SUPPORTED,
               "the cited passage states the answer to the question (for a yes-no "
               "question, the fact the yes or no rests on)"),
        Reason("correct premise flag", SUPPORTED,
               "the reply says the question's premise is false, the cited passage "
               "contradicts the premise, and any correction given is in that passage"),
        Reason("premise contradicted in the answer", SUPPORTED,
               "the question rests on a false premise; the reply does not flag it, but "
               "its answer states the fact, as the cited passage states it, that makes "
               "the premise false"),
        Reason("does not answer the question", NOT_SUPPORTED,
               "the reply is not an answer of the kind the question asks for: it repeats "
               "the question or the prompt's template, copies a passage (or a sentence of "
               "one) that does not give what the question asks, or talks about another "
               "subject"),
        Reason("no passage cited", NOT_SUPPORTED,
               "the reply answers (or flags a premise) but cites no passage, so there is "
               "nothing to read it against"),
        Reason("wrong abstention", NOT_SUPPORTED,
               "the reply says NOT IN HANDBOOK, but a passage the reader was given answers "
               "the question or contradicts its premise"),
        Reason("wrong premise flag", NOT_SUPPORTED,
               "the reply says the premise is not supported, but the cited passage does "
               "not contradict the question"),
        Reason("contradicts cited passage", NOT_SUPPORTED,
               "the cited passage says the opposite of the answer"),
        Reason("figure not in cited passage", NOT_SUPPORTED,
               "the answer gives a number, amount, date or time that the cited passage "
               "does not contain"),
        Reason("right figure, wrong item", NOT_SUPPORTED,
               "the cited passage contains the answer's figure, but for something other "
               "than what the question asks about"),
        Reason("claim not in cited passage", NOT_SUPPORTED,
               "the answer states something, not a figure, that the cited passage "
               "does not say"),
        Reason("correct abstention", NOT_APPLICABLE,
               "the reply says NOT IN HANDBOOK, cites nothing, and no passage the reader "
               "was given answers the question: there is no claim to support"),
        Reason("correct abstention, stray citation", NOT_APPLICABLE,
               "as a correct abstention, but the reply cites a passage anyway; a passage "
               "cannot support an absence, and the stray ID is the screen's business"),
        Reason(PARSE_FAILURE_REASON, NOT_APPLICABLE,
               "the strict parser found no answer and no sources, so there is nothing to "
               "hold against a passage (the first lesson's gate would stop the render)"),
    )
}

def sources_text(sources: Iterable[str]) -> str:
    """Parsed sources as the review writes them: ``H08, H11`` or ``none``."""
    sources = tuple(sources)
    return ", ".join(sources) if sources else "none"


# ------------------------------------------------------------ replies since the review

SAME_REPLY = "same reply as reviewed"
REPLY_CHANGED = "reply changed since review"
REQUEST_CHANGED = "request changed since review"
NOT_RUN = "not in this run"


def carry_verdicts(review: pd.DataFrame, replies: pd.DataFrame) -> pd.DataFrame:
    """Which reviewed verdicts still describe the replies of a later run.

    ``replies`` has one row per reply of that run: ``reader``, ``decoding``,
    ``question_id``, ``key`` (its transcript key) and ``raw_output``. Each review row is
    matched with the run's reply for the same reader, decoding and question, and gets a
    ``status``:

    * "same reply as reviewed": same key and character-for-character the same reply;
      only then do ``verdict_now`` and ``reason_now`` carry the reviewed verdict;
    * "reply changed since review": same request (key), different text;
    * "request changed since review": the prompt, model or settings differ (another key);
    * "not in this run": the run has no reply for that reader, decoding and question.

    A verdict is never carried to text nobody reviewed. Lesson 4, "When a reply changes".
    """
    columns = ["reader", "decoding", "question_id"]
    duplicated = replies.duplicated(columns, keep=False)
    if duplicated.any():
        twice = replies.loc[duplicated, columns].drop_duplicates().to_records(index=False)
        raise ValueError(f"the run has more than one reply for {', '.join(map(str, twice))}")
    run = {tuple(r[c] for c in columns): r for r in replies.to_dict("records")}
    rows = []
    for record in review.to_dict("records"):
        reply = run.get(tuple(record[c] for c in columns))
        if reply is None:
            status, now = NOT_RUN, None
        elif reply["key"] != record["transcript_key"]:
            status, now = REQUEST_CHANGED, reply["raw_output"]
        elif reply["raw_output"] != record["reviewed_reply"]:
            status, now = REPLY_CHANGED, reply["raw_output"]
        else:
            status, now = SAME_REPLY, reply["raw_output"]
        same = status == SAME_REPLY
        rows.append({
            **{c: record[c] for c in ("review_id", *columns, "reviewed_reply")},
            "reply_now": now,
            "status": status,
            "verdict_now": record["verdict"] if same else None,
            "reason_now": record["reason"] if same else None,
        })
    # Object columns keep "no verdict" as None, not NaN: a missing judgment, not a number.
    return pd.DataFrame(rows, columns=["review_id", *columns, "reviewed_reply", "reply_now",
                                       "status", "verdict_now", "reason_now"], dtype=object)


# ------------------------------------------------------------ the review beside the screen

def review_rows(book: pd.DataFrame, replies: pd.DataFrame,
                passage_texts: Mapping[str, str]) -> pd.DataFrame:
    """The review beside what it judged: each row of ``book`` (``runtime.load_review``)
    with the reply of ``replies`` (``runtime.recorded_replies``) it names by transcript
    key, its ``question``, the passages its reader was given (``retrieved_ids``), what
    the strict parser reads in it (``answer``, ``sources``, ``action``), the screen's
    failed checks and whether it is ``held``, and whether the review finds it
    ``unsupported``. Lesson 4, "The screen against the review"."""
    rows = book.drop(columns=["answer", "sources", "action"], errors="ignore").merge(
        replies[["key", "question", "retrieved_ids", "raw_output"]],
        left_on="transcript_key", right_on="key", validate="one_to_one")
    parsed = [parse_reader_output(text) for text in rows["raw_output"]]
    checks = [screen_reply(reply, ids, passage_texts)
              for reply, ids in zip(parsed, rows["retrieved_ids"])]
    return rows.assign(answer=[p.answer for p in parsed], sources=[p.sources for p in parsed],
                       action=[p.action for p in parsed],
                       failed_checks=[failed_checks(c) for c in checks],
                       held=[not all(c.values()) for c in checks],
                       unsupported=rows["verdict"] == NOT_SUPPORTED)
