"""A model as support judge: SmolLM2 asked "yes" or "no", measured against the human review.

Introduced in lesson 4, "A model as judge". For each reviewed reply with a yes-or-no
human verdict, the judge sees what the human test shows a person (the cited passages,
the question and the answer) and must reply with one word. The reply is decoded under a
grammar that admits only ``yes`` or ``no`` and then parsed strictly anyway; its replies
are recorded in the reader transcript, keyed like every other generation, so the page's
figures replay exactly. ``python -m helpers.judge record`` records them again.
"""
from __future__ import annotations

import argparse
import datetime
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from .reader.prompts import format_passage_block
from .reader.transcript import (
    GENERATED_LIVE,
    TRANSCRIPT_PATH,
    TranscriptEntry,
    merge_entries,
    read_transcript,
    write_transcript,
)
from .progress import QuestionProgress
from .review import NOT_SUPPORTED, SUPPORTED, sources_of

JUDGE_READER = "smollm2_135m_instruct"

JUDGE_SYSTEM_PROMPT = (
    "You check answers against a handbook. Read the cited passage, the question and the "
    "answer. Reply yes if the cited passage, on its own, supports the answer to the "
    "question. Otherwise reply no. Reply with one word: yes or no."
)
NO_CITED_PASSAGE = "(no passage was cited)"

#: The only two replies the grammar admits (and the parser accepts).
JUDGE_GRAMMAR = 'start: "yes" | "no"\n'

#: The command that records the judge's replies, and the grammar it decodes under, as the
#: transcript's ``recorded_by`` names them.
JUDGE_COMMAND = "python -m helpers.judge record"
JUDGE_GRAMMAR_NAME = "the yes-or-no grammar"

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


def judge_recorder_label() -> str:
    """``recorded_by`` of a judge reply: :data:`JUDGE_COMMAND`, the library versions and
    :data:`JUDGE_GRAMMAR_NAME`. Lesson 4, "A model as judge"."""
    from .reader.record import recorder_label

    return recorder_label(constrained=True, command=JUDGE_COMMAND, grammar=JUDGE_GRAMMAR_NAME)


def judge_settings() -> dict:
    """The settings a judge reply is keyed by: :data:`JUDGE_SETTINGS` plus the grammar."""
    from .reader.grammar import constrained_settings

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
    if word == "yes":
        return JudgeReply(True, True)
    if word == "no":
        return JudgeReply(True, False)
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
        sources = sources_of(row.reviewed_sources)
        missing = [s for s in sources if s not in passages]
        cited = [(s, passages[s]) for s in sources if s in passages]
        if missing:
            # A made-up ID has no text to show; the judge sees it named, with nothing more.
            cited += [(s, "(no such passage in the handbook)") for s in missing]
        rows.append({"review_id": row.review_id, "question_id": row.question_id,
                     "messages": judge_messages(questions[row.question_id],
                                                row.reviewed_answer, cited)})
    frame = pd.DataFrame(rows, columns=["review_id", "question_id", "messages"])
    first: dict[str, str] = {}
    names = []
    for review_id, messages in zip(frame["review_id"], frame["messages"]):
        text = repr(messages)
        first.setdefault(text, review_id)
        names.append(first[text])
    frame["request_id"] = names
    return frame


def judge_replies(judge, requests: pd.DataFrame) -> pd.DataFrame:
    """Ask ``judge`` (a live or recorded SmolLM2 reader) about every request, then parse.

    Live: decoded greedily under :data:`JUDGE_GRAMMAR`. Recorded: replayed by the same
    key, so a changed review row or prompt is refused naming the request. Adds
    ``judge_generation``, ``judge_raw``, ``judge_key``, ``judge_mode``,
    ``judge_parse_ok``, ``judge_supported`` and ``judge_problem``.
    """
    settings = judge_settings()
    distinct = requests.drop_duplicates("request_id")
    answers: dict[str, object] = {}
    # A bar naming the review row while a person waits for a live judge; replay is instant.
    label = f"{judge.model_id.rsplit('/', 1)[-1]} judge ({judge.mode})"
    with QuestionProgress(len(distinct), label, show=judge.mode != "recorded",
                          unit="reply") as bar:
        if judge.mode == "live":
            from .reader.constrained import generate_under_grammars

            # Decoded in batches, each reply under the one-word grammar.
            replies = generate_under_grammars(
                judge, list(distinct["messages"]), [JUDGE_GRAMMAR] * len(distinct),
                list(distinct["request_id"]), settings=JUDGE_SETTINGS, bar=bar)
            answers.update(zip(distinct["request_id"], replies))
        else:
            for request_id, messages in bar.track(zip(distinct["request_id"],
                                                      distinct["messages"])):
                answers[request_id] = judge.generate(messages, request_id, settings=settings)
    frame = requests.copy()
    frame["judge_generation"] = pd.Series([answers[r] for r in frame["request_id"]],
                                          index=frame.index, dtype=object)
    frame["judge_raw"] = [answers[r].raw_output for r in frame["request_id"]]
    frame["judge_key"] = [answers[r].key for r in frame["request_id"]]
    frame["judge_mode"] = [answers[r].mode for r in frame["request_id"]]
    parsed = [parse_judge_reply(text) for text in frame["judge_raw"]]
    frame["judge_parse_ok"] = [p.parse_ok for p in parsed]
    frame["judge_supported"] = pd.Series([p.supported for p in parsed], index=frame.index,
                                         dtype=object)
    frame["judge_problem"] = [p.problem for p in parsed]
    return frame


def record_judge(judge, requests: pd.DataFrame,
                 transcript: str | os.PathLike = TRANSCRIPT_PATH,
                 recorded_on: str | None = None,
                 only_missing: bool = False) -> list[TranscriptEntry]:
    """Ask the live judge every distinct request and merge the replies into ``transcript``.

    With ``only_missing``, only the requests that have no recorded reply yet (no entry
    under their exact key) are asked, and every recorded reply stays as it is. Nothing
    is written unless every reply parses.
    """
    if judge.mode != "live":
        raise ValueError(f"recording needs a live judge, not a {judge.mode} one")
    existing = read_transcript(transcript)
    unique = requests.drop_duplicates("request_id")
    if only_missing:
        settings = judge_settings()
        recorded = {entry.key for entry in existing}
        unique = unique[[judge.key(m, settings) not in recorded for m in unique["messages"]]]
        if unique.empty:
            return []
    replies = judge_replies(judge, unique)
    assert_judge_parsed(replies)
    settings = judge_settings()
    label = judge_recorder_label()
    recorded_on = recorded_on or datetime.date.today().isoformat()
    entries = []
    for row in replies.itertuples(index=False):
        reply = row.judge_generation
        entries.append(TranscriptEntry(
            key=reply.key, question_id=row.request_id, model_id=reply.model_id,
            revision=reply.revision, settings=settings, messages=row.messages,
            raw_output=reply.raw_output, output_tokens=reply.output_tokens,
            ended_by_eos=reply.ended_by_eos, hit_token_cap=reply.hit_token_cap,
            prompt_tokens=reply.prompt_tokens, recorded_by=label,
            recorded_on=recorded_on, provenance=GENERATED_LIVE))
    write_transcript(transcript, merge_entries(existing, entries))
    return entries


def review_requests(review: pd.DataFrame | None = None) -> pd.DataFrame:
    """:func:`judge_requests` for the book's review, with the fixture's questions and text."""
    from .fixture import load_handbook, load_questions, read_metadata
    from .review import EXTENDED_QUESTIONS_FILE, QUESTIONS_FILE, load_review

    review = load_review() if review is None else review
    metadata = read_metadata()
    handbook = load_handbook(metadata=metadata)
    questions = {}
    for name in (QUESTIONS_FILE, EXTENDED_QUESTIONS_FILE):
        frame = load_questions(name, handbook=handbook, metadata=metadata)
        questions.update(zip(frame["question_id"], frame["question"]))
    return judge_requests(review, questions, dict(zip(handbook["passage_id"], handbook["text"])))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m helpers.judge", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    record = commands.add_parser("record", help="ask the live judge about every reviewed row")
    record.add_argument("--transcript", default=str(TRANSCRIPT_PATH))
    record.add_argument("--only-missing", action="store_true",
                        help="ask only the requests with no recorded reply yet")
    args = parser.parse_args(argv)
    from .reader.generation import load_reader

    judge = load_reader(JUDGE_READER, mode="live")
    entries = record_judge(judge, review_requests(), args.transcript,
                           only_missing=args.only_missing)
    counts = pd.Series([e.raw_output for e in entries]).value_counts().to_dict()
    print(f"wrote {len(entries)} judge replies to {args.transcript}: {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
