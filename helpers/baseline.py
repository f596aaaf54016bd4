"""The extractive sentence baseline and its contains-an-acceptable-variant check.

Introduced in lesson 1, "Add a sentence baseline". Lesson 4 reviews the baseline's
sentences as two-line replies (the second half of this module); ``python -m
helpers.baseline record`` writes their record.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from .files import write_text_atomic
from .fixture import EXTENDED_QUESTIONS_FILE, QUESTIONS_FILE
from .parsing import ABSTAIN_PREFIX
from .paths import DATA_DIR
from .reader.transcript import canonical_json
from .text import normalize_answer, split_sentences

NO_SENTENCE = "no sentence (no lexical match)"


def contains_variant(text: str | None, variants: Sequence[str]) -> bool | None:
    """Whether normalised ``text`` contains a normalised variant as a substring.

    ``None`` when there is no text or no variant to look for.
    """
    variants = [v for v in variants if v]
    if text is None or not variants:
        return None
    normalized = normalize_answer(text)
    return any(normalize_answer(variant) in normalized for variant in variants)


def sentence_baseline(
    questions: pd.DataFrame, retrieved: pd.DataFrame, handbook: pd.DataFrame
) -> pd.DataFrame:
    """First sentence of each question's top-ranked passage, scored in sentence units.

    ``contains_acceptable_answer`` is True/False for answerable questions (False when
    nothing was retrieved) and NA for abstain and flag-premise questions.
    """
    texts = dict(zip(handbook["passage_id"], handbook["text"]))
    top = retrieved[retrieved["rank"] == 1].set_index("question_id")["passage_id"]
    rows = []
    for question in questions.itertuples(index=False):
        passage = top.get(question.question_id)
        sentence = split_sentences(texts[passage])[0] if passage is not None else None
        contains = pd.NA
        if question.expected_action == "answer":
            found = contains_variant(sentence, question.acceptable_list)
            contains = bool(found) if found is not None else False
        rows.append(
            {
                "question_id": question.question_id,
                "top_passage_id": passage,
                "baseline_sentence": sentence if sentence is not None else NO_SENTENCE,
                "contains_acceptable_answer": contains,
            }
        )
    frame = pd.DataFrame(rows)
    frame["contains_acceptable_answer"] = frame["contains_acceptable_answer"].astype("boolean")
    return frame


# ----------------------------------------------------- the baseline as a reviewed system
#
# Lesson 4 reviews the baseline's sentences beside the readers' replies, so each sentence
# is written as a two-line reply and kept, with what the baseline read, in a record beside
# the reader transcript. The record ties each reviewed reply to its exact text: a changed
# baseline gives another text for the same request, and the review's loader then says
# "reply changed since review" for that row.

#: The baseline's name where the review names a reader, and its stand-in for a model ID.
BASELINE_READER = "sentence_baseline"
BASELINE_MODEL = "extractive sentence baseline (helpers.baseline)"
#: The record of the baseline's replies, beside the reader transcript.
BASELINE_REPLIES_PATH = DATA_DIR / "baseline-replies.jsonl"
#: The retrievers whose top passage the baseline copies from, and what the review calls
#: each way of making a reply (its ``decoding`` column).
BASELINE_DECODINGS = {
    "tfidf": "first sentence of the tf-idf top passage",
    "hybrid": "first sentence of the hybrid top passage",
}
#: The command that writes the record, as each entry's ``recorded_by`` names it.
BASELINE_COMMAND = "python -m helpers.baseline record"


def baseline_reply(sentence: str | None, passage_id: str | None) -> str:
    """The baseline's sentence as a reply in lesson 1's two-line format.

    ``Answer: <sentence>`` over ``Sources: <passage>``, the passage it was copied from.
    With nothing retrieved there is no sentence, and the only reply the format has for
    that is an abstention: ``Answer: NOT IN HANDBOOK`` over ``Sources: none``.
    Lesson 4, "The replies under review".
    """
    if passage_id is None:
        return f"Answer: {ABSTAIN_PREFIX}\nSources: none"
    if not sentence or "\n" in sentence or "\r" in sentence:
        raise ValueError(f"the sentence of {passage_id} cannot be one answer line: {sentence!r}")
    return f"Answer: {sentence}\nSources: {passage_id}"


def baseline_key(retriever: str, question: str, passages: Sequence[Sequence[str]]) -> str:
    """The key of one baseline request: SHA-256 of the canonical JSON of what the baseline
    reads (the retriever's name, the question, and each retrieved passage's ID and text in
    rank order) and of :data:`BASELINE_MODEL`. Not of the reply: a changed baseline keeps
    the key and changes the text. Lesson 4, "The replies under review"."""
    payload = {"model_id": BASELINE_MODEL, "retriever": retriever, "question": question,
               "passages": [list(p) for p in passages]}
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class BaselineEntry:
    """One baseline reply as the record keeps it (one line of the record)."""

    key: str
    question_id: str
    retriever: str
    question: str
    passages: list
    raw_output: str
    recorded_by: str
    recorded_on: str

    @property
    def model_id(self) -> str:
        return BASELINE_MODEL

    @property
    def decoding(self) -> str:
        return BASELINE_DECODINGS[self.retriever]

    @property
    def retrieved_ids(self) -> tuple[str, ...]:
        return tuple(passage_id for passage_id, _ in self.passages)

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)


_ENTRY_FIELDS = {"key": str, "question_id": str, "retriever": str, "question": str,
                 "passages": list, "raw_output": str, "recorded_by": str, "recorded_on": str}


class BaselineRecordError(ValueError):
    """A line of the baseline record is malformed or contradicts its key."""


def _entry(path: Path, number: int, line: str) -> BaselineEntry:
    where = f"{path}, line {number}"
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise BaselineRecordError(f"{where}: not valid JSON ({error.msg})") from None
    if not isinstance(record, dict) or set(record) != set(_ENTRY_FIELDS):
        found = sorted(record) if isinstance(record, dict) else type(record).__name__
        raise BaselineRecordError(f"{where}: expected the fields {sorted(_ENTRY_FIELDS)}, "
                                  f"found {found}")
    for name, kind in _ENTRY_FIELDS.items():
        if not isinstance(record[name], kind):
            raise BaselineRecordError(f"{where}: field {name!r} should be {kind.__name__}")
    if record["retriever"] not in BASELINE_DECODINGS:
        raise BaselineRecordError(f"{where}: field 'retriever' is {record['retriever']!r}, "
                                  f"not one of {sorted(BASELINE_DECODINGS)}")
    if not all(isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p)
               for p in record["passages"]):
        raise BaselineRecordError(f"{where}: field 'passages' should be [ID, text] pairs")
    entry = BaselineEntry(**record)
    expected = baseline_key(entry.retriever, entry.question, entry.passages)
    if entry.key != expected:
        raise BaselineRecordError(f"{where}: field 'key' does not match the entry's "
                                  f"retriever, question and passages (expected "
                                  f"{expected[:12]}..., found {entry.key[:12]}...)")
    return entry


def read_baseline_replies(path: str | os.PathLike = BASELINE_REPLIES_PATH) -> list[BaselineEntry]:
    """Every entry of the baseline record, validated; a missing file reads as empty.

    A bad line is refused with its line number. Lesson 4, "The replies under review".
    """
    path = Path(path)
    if not path.exists():
        return []
    entries, seen = [], {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        entry = _entry(path, number, line)
        if entry.key in seen:
            raise BaselineRecordError(f"{path}, line {number}: key {entry.key[:12]}... "
                                      f"repeats line {seen[entry.key]}")
        seen[entry.key] = number
        entries.append(entry)
    return entries


def baseline_replies(questions: pd.DataFrame, retrieved: pd.DataFrame, handbook: pd.DataFrame,
                     retriever: str) -> pd.DataFrame:
    """The baseline's reply to every question, computed now, with its request key.

    ``retrieved`` is the retriever's ranking (top three, as lesson 1 hands them to the
    reader); the baseline copies the first sentence of the top passage
    (:func:`sentence_baseline`). One row per question: ``question_id``, ``question``,
    ``retrieved_ids``, ``passages``, ``key`` and ``raw_output``.
    Lesson 4, "The replies under review".
    """
    if retriever not in BASELINE_DECODINGS:
        raise ValueError(f"unknown retriever {retriever!r}; expected one of "
                         f"{sorted(BASELINE_DECODINGS)}")
    texts = dict(zip(handbook["passage_id"], handbook["text"]))
    ranked = retrieved.sort_values(["question_id", "rank"])
    by_question = {q: tuple(g["passage_id"]) for q, g in ranked.groupby("question_id")}
    sentences = sentence_baseline(questions, retrieved, handbook).set_index("question_id")
    rows = []
    for question in questions.itertuples(index=False):
        ids = by_question.get(question.question_id, ())
        passages = [[pid, texts[pid]] for pid in ids]
        top = sentences.at[question.question_id, "top_passage_id"]
        top = None if pd.isna(top) else top
        sentence = sentences.at[question.question_id, "baseline_sentence"]
        rows.append({
            "question_id": question.question_id, "question": question.question,
            "retrieved_ids": ids, "passages": passages,
            "key": baseline_key(retriever, question.question, passages),
            "raw_output": baseline_reply(sentence if top is not None else None, top),
        })
    return pd.DataFrame(rows, columns=["question_id", "question", "retrieved_ids", "passages",
                                       "key", "raw_output"])


def lesson_baseline_replies(question_file: str, retriever: str,
                            data_dir: str | os.PathLike = DATA_DIR) -> pd.DataFrame:
    """:func:`baseline_replies` for a question file of the fixture, with the retriever
    lesson 1 (``tfidf``) or lesson 2 (``hybrid``) uses, top three passages.
    Lesson 4, "The replies under review"."""
    from .reader.lesson import lesson_retrieval

    fixture, retrieved = lesson_retrieval(question_file, data_dir, retriever=retriever)
    return baseline_replies(fixture.questions, retrieved, fixture.handbook, retriever)


def record_baseline(plan: Sequence[tuple[str, Sequence[str]]],
                    path: str | os.PathLike = BASELINE_REPLIES_PATH,
                    data_dir: str | os.PathLike = DATA_DIR,
                    recorded_on: str | None = None) -> list[BaselineEntry]:
    """Compute the baseline's replies for ``plan`` ((retriever, question files) pairs) and
    write them as the record at ``path``, all at once. Lesson 4, "The replies under review"."""
    recorded_on = recorded_on or datetime.date.today().isoformat()
    entries = []
    for retriever, files in plan:
        for name in files:
            for row in lesson_baseline_replies(name, retriever, data_dir).itertuples(index=False):
                entries.append(BaselineEntry(
                    key=row.key, question_id=row.question_id, retriever=retriever,
                    question=row.question, passages=row.passages, raw_output=row.raw_output,
                    recorded_by=BASELINE_COMMAND, recorded_on=recorded_on))
    keys = [entry.key for entry in entries]
    if len(set(keys)) != len(keys):
        raise BaselineRecordError("two baseline requests of the plan have the same key")
    write_text_atomic(path, "".join(entry.to_json() + "\n" for entry in entries))
    return entries


#: What the record holds: lesson 1's and lesson 2's extended questions, under each retriever.
BASELINE_PLAN = (
    ("tfidf", (QUESTIONS_FILE, EXTENDED_QUESTIONS_FILE)),
    ("hybrid", (QUESTIONS_FILE, EXTENDED_QUESTIONS_FILE)),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m helpers.baseline",
                                     description="Write the record of the sentence "
                                     "baseline's two-line replies that lesson 4 reviews.")
    commands = parser.add_subparsers(dest="command", required=True)
    record = commands.add_parser("record", help=f"rewrite {BASELINE_REPLIES_PATH.name}")
    record.add_argument("--path", default=str(BASELINE_REPLIES_PATH))
    args = parser.parse_args(argv)
    entries = record_baseline(BASELINE_PLAN, args.path)
    print(f"wrote {len(entries)} baseline replies to {args.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
