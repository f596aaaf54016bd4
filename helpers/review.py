"""The human support review: its vocabulary, its record and the rule for changed replies.

Introduced in lesson 4, "The review record". Each row of a review says, for one recorded
reply (a reader's, or the sentence baseline's), whether the passage it cites, read on its
own, backs the answer it gives to its question (the human support test of lesson 1). A
row is tied to the exact reply it judged: the key of its transcript entry (or of its
entry in the baseline's record), the raw reply, and the answer and sources the strict
parser read from it. The book's own record is ``data/riverton/support-review.csv`` (a
fixture, fingerprinted in the metadata file); a student's reviews go in
``data/reviews/`` and are checked the same way, except that rows may be left blank.

Run ``python -m helpers.review check`` to validate every review and
``python -m helpers.review template data/reviews/NAME.csv`` to start one of your own.
"""
from __future__ import annotations

import argparse
import csv
import datetime as dt
import io
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import regex

from .baseline import (
    BASELINE_DECODINGS,
    BASELINE_MODEL,
    BASELINE_READER,
    BASELINE_REPLIES_PATH,
    baseline_replies,
    read_baseline_replies,
)
from .fixture import (
    EXTENDED_QUESTIONS_FILE,
    QUESTIONS_FILE,
    REVIEW_FILE,
    FixtureError,
    Row,
    check_against_metadata,
    read_metadata,
    read_rows,
    require_unique,
)
from .fixture import require as _require_value
from .files import write_text_atomic
from .parsing import parse_reader_output
from .paths import DATA_DIR, PROJECT_ROOT
from .reader.registry import REGISTRY
from .reader.transcript import (
    CONSTRAINED,
    DECODINGS,
    TRANSCRIPT_PATH,
    UNCONSTRAINED,
    TranscriptEntry,
    read_transcript,
)

#: Where a student's own reviews live: inside ``data/`` so a new file re-renders the page.
REVIEWS_DIR = PROJECT_ROOT / "data" / "reviews"
#: Set this to read students' reviews from another folder (the tests do).
REVIEWS_ENV = "RIVERTON_REVIEWS_DIR"

REVIEW_COLUMNS = (
    "review_id",
    "reader",
    "decoding",
    "question_id",
    "transcript_key",
    "reviewed_reply",
    "reviewed_answer",
    "reviewed_sources",
    "verdict",
    "reason",
    "note",
    "reviewer",
    "reviewed_on",
)
#: The columns that identify the reply a row judges (a template copies these).
REPLY_COLUMNS = REVIEW_COLUMNS[:8]
#: The columns a reviewer fills in.
JUDGMENT_COLUMNS = REVIEW_COLUMNS[8:]

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

#: The screen's checks that apply the same test as a reason of the review (lesson 1's
#: screen, lesson 4's vocabulary), and how. Under the review's fixed order of reasons, a
#: reply that fails such a check is given that reason unless an earlier one applies, so
#: the screen's catches of those replies hold by construction, not by reading.
SHARED_TESTS = {
    "parsed": (PARSE_FAILURE_REASON,
               "the same test: the strict parser found no answer"),
    "answer_has_citation": ("no passage cited",
                            "the same test: an answer whose Sources line is none"),
    "abstain_sources_ok": ("correct abstention, stray citation",
                           "the same test: an abstention that cites a passage"),
    "numbers_supported": ("figure not in cited passage",
                          "nearly the same test: a figure of the answer that the cited "
                          "text lacks (the screen matches digits, a person reads words too)"),
}

_DATE = regex.compile(r"\d{4}-\d{2}-\d{2}")
_KEY = regex.compile(r"[0-9a-f]{64}")
_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_UNESCAPES = {"\\": "\\", "n": "\n", "r": "\r", "t": "\t", "s": " "}
_ESCAPE = regex.compile(r"\\(.)", regex.DOTALL)


def escape_reply(text: str) -> str:
    r"""A raw reply on one CSV line: backslash, line feed, carriage return and tab become
    ``\\``, ``\n``, ``\r`` and ``\t``, and a space at either end becomes ``\s`` (the
    fixture reader refuses fields with white space at their ends)."""
    escaped = "".join(_ESCAPES.get(character, character) for character in text)
    start = len(escaped) - len(escaped.lstrip(" "))
    end = len(escaped) - len(escaped.rstrip(" "))
    if start == len(escaped):
        return "\\s" * start
    return "\\s" * start + escaped[start:len(escaped) - end] + "\\s" * end


def unescape_reply(text: str) -> str:
    """Undo :func:`escape_reply`; an unknown escape or a lone final backslash is an error."""
    out, position = [], 0
    for match in _ESCAPE.finditer(text):
        if match.group(1) not in _UNESCAPES:
            raise ValueError(f"unknown escape \\{match.group(1)} in {text!r}")
        out += [text[position:match.start()], _UNESCAPES[match.group(1)]]
        position = match.end()
    rest = text[position:]
    if "\\" in rest:
        raise ValueError(f"a lone backslash ends {text!r}")
    return "".join(out) + rest


def sources_text(sources: Iterable[str]) -> str:
    """Parsed sources as the review writes them: ``H08, H11`` or ``none``."""
    sources = tuple(sources)
    return ", ".join(sources) if sources else "none"


def sources_of(text: str) -> tuple[str, ...]:
    """The source IDs of a ``reviewed_sources`` value, the inverse of :func:`sources_text`:
    ``"none"`` gives ``()``, ``"H08, H11"`` gives ``("H08", "H11")``.

    An empty value (a reply that did not parse has no sources to split) or an empty ID
    between the separators is a ``ValueError``. Lesson 4, "The review record".
    """
    if text == "none":
        return ()
    if not text:
        raise ValueError("an empty reviewed_sources value has no sources: the reply did "
                         "not parse")
    sources = tuple(text.split(", "))
    if any(not source or source != source.strip() or "," in source for source in sources):
        raise ValueError(f"{text!r} is not a list of source IDs separated by ', '")
    return sources


def reply_columns(entry: TranscriptEntry, reader_key: str) -> dict[str, str]:
    """The reply-identifying columns of a review row for one transcript entry."""
    parsed = parse_reader_output(entry.raw_output)
    return {
        "reader": reader_key,
        "decoding": entry.decoding,
        "question_id": entry.question_id,
        "transcript_key": entry.key,
        "reviewed_reply": escape_reply(entry.raw_output),
        "reviewed_answer": parsed.answer if parsed.parse_ok else "",
        "reviewed_sources": sources_text(parsed.sources) if parsed.parse_ok else "",
    }


class ReviewError(FixtureError):
    """A review file is malformed or does not match the replies it claims to judge."""


def _fail(path: Path, row: Row, column: str, problem: str) -> ReviewError:
    return ReviewError(path, problem, row.number, row.line, column)


def _as_review_error(check, *args, **kwargs):
    """Run one of the fixture's checks, reporting its failure as a :class:`ReviewError`."""
    try:
        return check(*args, **kwargs)
    except ReviewError:
        raise
    except FixtureError as error:
        raise ReviewError(error.path, error.problem, error.row, error.line,
                          error.column) from None


def _require(path: Path, row: Row, column: str, pattern=None, choices=None) -> str:
    return _as_review_error(_require_value, path, row, column, pattern, choices)


@dataclass(frozen=True)
class _Coverage:
    """The replies a review file may judge: their keys, the review ID each must carry
    (None: any), and what the set is, for the error message."""

    review_ids: Mapping[str, str | None]
    described_as: str


def _check_reply(path: Path, row: Row, by_key: Mapping[str, TranscriptEntry],
                 coverage: _Coverage) -> None:
    """The row's reply columns must describe, exactly, a transcript entry that the review
    covers."""
    values = row.values
    key = _require(path, row, "transcript_key", _KEY)
    entry = by_key.get(key)
    if entry is None:
        raise _fail(path, row, "transcript_key",
                    f"no reply with key {key[:12]}... in the transcript; the row reviews a "
                    "reply that was never recorded, or one whose prompt has changed since")
    if key not in coverage.review_ids:
        raise _fail(path, row, "transcript_key",
                    f"the transcript entry {key[:12]}... (recorded for {entry.question_id}, "
                    f"{entry.model_id}, {entry.decoding}) is not one of "
                    f"{coverage.described_as}")
    expected_id = coverage.review_ids[key]
    if expected_id is not None and values["review_id"] != expected_id:
        raise _fail(path, row, "review_id",
                    f"{values['review_id']!r} is not the ID of this reply, which the book's "
                    f"review calls {expected_id!r}")
    reader = _require(path, row, "reader", choices=READERS)
    if model_of(reader) != entry.model_id:
        raise _fail(path, row, "reader",
                    f"the transcript reply {key[:12]}... was written by {entry.model_id}, "
                    f"not by reader {reader!r}")
    _require(path, row, "decoding", choices=decodings_of(reader))
    expected = reply_columns(entry, reader)
    for column in ("decoding", "question_id", "reviewed_reply", "reviewed_answer",
                   "reviewed_sources"):
        if values[column] != expected[column]:
            shown = expected[column] or "(empty: the reply did not parse)"
            raise _fail(path, row, column,
                        f"{values[column]!r} does not match the transcript reply "
                        f"{key[:12]}..., which gives {shown!r}")


def _check_judgment(path: Path, row: Row, allow_blank: bool) -> bool:
    """Verdict, reason, reviewer and date; returns False for a row left blank."""
    values = row.values
    if allow_blank and not any(values[c] for c in JUDGMENT_COLUMNS):
        return False
    verdict = _require(path, row, "verdict", choices=VERDICTS)
    reason = _require(path, row, "reason", choices=tuple(REASONS))
    if REASONS[reason].verdict != verdict:
        raise _fail(path, row, "reason",
                    f"reason {reason!r} goes with the verdict {REASONS[reason].verdict!r}, "
                    f"not {verdict!r}")
    unparsed = values["reviewed_answer"] == ""
    if unparsed != (reason == PARSE_FAILURE_REASON):
        problem = (f"the reply did not parse, so the reason must be {PARSE_FAILURE_REASON!r}"
                   if unparsed else
                   f"the reply parsed, so {PARSE_FAILURE_REASON!r} does not apply")
        raise _fail(path, row, "reason", problem)
    _require(path, row, "reviewer")
    day = _require(path, row, "reviewed_on", _DATE)
    try:
        dt.date.fromisoformat(day)
    except ValueError:
        raise _fail(path, row, "reviewed_on", f"{day!r} is not a calendar date") from None
    return True


#: What the book's review may judge, named in errors.
_REVIEWABLE = ("the replies the review covers: lesson 1's Qwen replies, SmolLM2's "
               "replies to the lesson and extended questions, unconstrained and under "
               "the reply grammar, with the reader's own generation settings, and the "
               "sentence baseline's replies to the same questions under tf-idf and hybrid "
               "retrieval")

#: Every name the ``reader`` column may hold: the registered readers and the baseline.
READERS = (*sorted(REGISTRY), BASELINE_READER)


def model_of(reader: str) -> str:
    """The model ID a reply of ``reader`` is recorded under (the baseline's stand-in for
    the sentence baseline). Lesson 4, "The replies under review"."""
    return BASELINE_MODEL if reader == BASELINE_READER else REGISTRY[reader].model_id


def decodings_of(reader: str) -> tuple[str, ...]:
    """The values the ``decoding`` column may take for ``reader``: a reader's decodings,
    or the baseline's ways of choosing its passage. Lesson 4, "The replies under review"."""
    return tuple(BASELINE_DECODINGS.values()) if reader == BASELINE_READER else DECODINGS


def system_label(reader: str, decoding: str) -> str:
    """A short name for the system that wrote a reply: the model's name, with "under the
    grammar" for a constrained reply, or the baseline and its retriever.
    Lesson 4, "The replies under review"."""
    if reader == BASELINE_READER:
        retriever = {d: r for r, d in BASELINE_DECODINGS.items()}[decoding]
        return f"{'tf-idf' if retriever == 'tfidf' else retriever} sentence baseline"
    name = REGISTRY[reader].model_id.split("/")[-1]
    return name if decoding == UNCONSTRAINED else f"{name} under the grammar"


def retriever_of(reader: str, decoding: str) -> str:
    """The retriever whose top passages a reply was given: the baseline's own, or lesson
    1's tf-idf for every reader reply the review covers. Lesson 4, "The replies under
    review"."""
    if reader == BASELINE_READER:
        return {d: r for r, d in BASELINE_DECODINGS.items()}[decoding]
    return "tfidf"


def _entries(transcript, baseline_record) -> dict:
    """Every reply a review row may point to, by key: the transcript's entries and the
    baseline record's."""
    by_key = {entry.key: entry for entry in read_transcript(transcript)}
    by_key.update((entry.key, entry) for entry in read_baseline_replies(baseline_record))
    return by_key


def reviewable_keys(transcript: str | os.PathLike = TRANSCRIPT_PATH,
                    data_dir: str | os.PathLike = DATA_DIR,
                    plan=None,
                    baseline_record: str | os.PathLike = BASELINE_REPLIES_PATH
                    ) -> frozenset[str]:
    """The transcript keys of every reply a review may judge.

    An entry qualifies when a reader and decoding of ``plan`` (default
    :data:`REVIEWED_REPLIES`) wrote it, for a question of that plan's question files in ``data_dir``, with the
    reader's own generation settings (plus the reply grammar for a constrained reply);
    so does an entry of the baseline's record (``baseline_record``) for a retriever and a
    question of the plan. Other entries, such as the judge's one-word replies, do not.
    Lesson 4, "The review record".
    """
    from .fixture import load_riverton
    from .reader.transcript import DECODING_FIELD

    question_ids: dict[str, frozenset[str]] = {}
    slots: dict[tuple[str, str, str], dict] = {}
    baseline: set[tuple[str, str]] = set()
    for reader_key, decoding, files in REVIEWED_REPLIES if plan is None else plan:
        for name in files:
            if name not in question_ids:
                frame = load_riverton(Path(data_dir), name).questions
                question_ids[name] = frozenset(frame["question_id"])
            for question_id in question_ids[name]:
                if reader_key == BASELINE_READER:
                    baseline.add((decoding, question_id))
                else:
                    spec = REGISTRY[reader_key]
                    slots[(spec.model_id, decoding, question_id)] = dict(spec.settings)
    keys = {entry.key for entry in read_baseline_replies(baseline_record)
            if (entry.decoding, entry.question_id) in baseline}
    for entry in read_transcript(transcript):
        settings = slots.get((entry.model_id, entry.decoding, entry.question_id))
        if settings is None:
            continue
        own = {k: v for k, v in entry.settings.items() if k not in (DECODING_FIELD, "grammar")}
        if own == settings and (entry.decoding == UNCONSTRAINED) == ("grammar" not in
                                                                     entry.settings):
            keys.add(entry.key)
    return frozenset(keys)


def review_rows(path: Path, transcript: str | os.PathLike, allow_blank: bool,
                 coverage: _Coverage | None = None, data_dir: str | os.PathLike = DATA_DIR,
                 baseline_record: str | os.PathLike = BASELINE_REPLIES_PATH
                 ) -> tuple[list[Row], list[Row]]:
    """All rows of a review file, validated, and the subset that carries a judgment.

    ``coverage`` says which replies the file may judge; by default, the replies of
    :func:`reviewable_keys` (``transcript``, ``baseline_record`` and ``data_dir``'s
    question files).
    """
    rows = _as_review_error(read_rows, path, REVIEW_COLUMNS)
    by_key = _entries(transcript, baseline_record)
    if coverage is None:
        coverage = _Coverage(dict.fromkeys(reviewable_keys(transcript, data_dir,
                                                           baseline_record=baseline_record)),
                             _REVIEWABLE)
    judged = []
    for row in rows:
        _require(path, row, "review_id", regex.compile(r"[A-Za-z][A-Za-z0-9_-]*"))
        _check_reply(path, row, by_key, coverage)
        if _check_judgment(path, row, allow_blank):
            judged.append(row)
    _as_review_error(require_unique, path, rows, "review_id")
    seen: dict[str, int] = {}
    for row in rows:
        key = row.values["transcript_key"]
        if key in seen:
            raise _fail(path, row, "transcript_key",
                        f"reply {key[:12]}... is already reviewed in row {seen[key]}")
        seen[key] = row.number
    return rows, judged


def _frame(rows: list[Row], path: Path) -> pd.DataFrame:
    frame = pd.DataFrame([row.values for row in rows], columns=list(REVIEW_COLUMNS))
    frame["reviewed_on"] = pd.to_datetime(frame["reviewed_on"], format="%Y-%m-%d").dt.date
    frame["parse_ok"] = frame["reviewed_answer"] != ""
    frame.attrs["path"] = str(path)
    return frame


def load_review(data_dir: str | os.PathLike = DATA_DIR,
                transcript: str | os.PathLike = TRANSCRIPT_PATH,
                metadata: pd.DataFrame | None = None,
                replies: pd.DataFrame | None = None,
                baseline_record: str | os.PathLike = BASELINE_REPLIES_PATH) -> pd.DataFrame:
    """The book's review record, validated row by row and against the metadata file.

    Every row must judge one of the replies the review covers (:func:`reviewable_keys`,
    or the keys of ``replies``, the frame of :func:`recorded_replies`, when given): same
    key, same raw text, same parsed answer and sources, with a verdict and a reason from
    the fixed vocabulary. Another transcript entry, a judge's reply for instance, is an
    error naming the row. With ``replies``, each row's reply must also be, character for
    character, the reply of that frame: the sentence baseline's replies are computed
    afresh there, so a changed baseline is refused here, naming the row, as "reply
    changed since review" (see :func:`carry_verdicts`). Lesson 4, "The review record".
    """
    data_dir = Path(data_dir)
    path = data_dir / REVIEW_FILE
    coverage = None if replies is None else _Coverage(dict.fromkeys(replies["key"]),
                                                      _REVIEWABLE)
    rows, _ = review_rows(path, transcript, allow_blank=False, coverage=coverage,
                           data_dir=data_dir, baseline_record=baseline_record)
    if metadata is None:
        metadata = read_metadata(data_dir)
    check_against_metadata(path, len(rows), metadata)
    frame = _frame(rows, path)
    if replies is not None:
        require_same_replies(frame, replies, rows)
    return frame


def require_same_replies(review: pd.DataFrame, replies: pd.DataFrame,
                         rows: list[Row] | None = None) -> None:
    """Refuse a review whose rows no longer describe the replies of ``replies``.

    Each row is matched with its reply by :func:`carry_verdicts`; any status other than
    "same reply as reviewed" (a reply changed since review, a request changed since
    review, a reply that is not in the run) is a :class:`ReviewError` that names the row
    and the ``reviewed_reply`` column, with the first such row's texts. ``rows`` are the
    file's rows (for their line numbers). Lesson 4, "When a reply changes".
    """
    status = carry_verdicts(review, replies[["reader", "decoding", "question_id", "key",
                                             "raw_output"]])
    bad = status[status["status"] != SAME_REPLY]
    if bad.empty:
        return
    first = bad.iloc[0]
    position = int(review.index[review["review_id"] == first["review_id"]][0])
    row = rows[position] if rows is not None else None
    others = ", ".join(f"{r.review_id} ({r.status})" for r in bad.iloc[1:].itertuples())
    problem = (f"{first['review_id']} ({first['question_id']}, "
               f"{system_label(first['reader'], first['decoding'])}): {first['status']}: "
               f"reviewed {first['reviewed_reply']!r}, now {first['reply_now']!r}; its "
               "verdict no longer applies until someone reads the new reply"
               + (f". Also {others}" if others else ""))
    path = Path(review.attrs.get("path", REVIEW_FILE))
    raise ReviewError(path, problem, row.number if row else None, row.line if row else None,
                      "reviewed_reply")


def reviews_dir() -> Path:
    """The folder of students' reviews: ``$RIVERTON_REVIEWS_DIR`` or ``data/reviews``."""
    chosen = os.environ.get(REVIEWS_ENV)
    return Path(chosen) if chosen else REVIEWS_DIR


def _book_coverage(book: pd.DataFrame) -> _Coverage:
    where = book.attrs.get("path", REVIEW_FILE)
    return _Coverage(dict(zip(book["transcript_key"], book["review_id"])),
                     f"the replies the book's review ({where}) judges; start from "
                     "`python -m helpers.review template` and keep its reply columns")


def load_student_review(path: str | os.PathLike,
                        transcript: str | os.PathLike = TRANSCRIPT_PATH,
                        book: pd.DataFrame | None = None) -> pd.DataFrame:
    """A review of your own, checked like the book's; rows left blank are skipped.

    Every row, blank or not, must be a row of the book's review (``book``, by default
    :func:`load_review`): the same reply, under the same review ID, so that each verdict
    can be set beside the book's. Only rows with a verdict are returned.
    Lesson 4, "Your own review".
    """
    path = Path(path)
    book = load_review(transcript=transcript) if book is None else book
    _, judged = review_rows(path, transcript, allow_blank=True,
                             coverage=_book_coverage(book))
    return _frame(judged, path)


def load_student_reviews(folder: str | os.PathLike | None = None,
                         transcript: str | os.PathLike = TRANSCRIPT_PATH,
                         book: pd.DataFrame | None = None) -> dict[str, pd.DataFrame]:
    """Every ``*.csv`` review in ``folder`` (default :func:`reviews_dir`), by file name.

    A missing folder means no reviews. A file that fails its checks, or has a row that
    is not a row of the book's review (``book``, by default :func:`load_review`), raises
    :class:`ReviewError` naming the file, row and column. Lesson 4, "Your own review".
    """
    folder = reviews_dir() if folder is None else Path(folder)
    if not folder.is_dir():
        return {}
    paths = sorted(folder.glob("*.csv"))
    if paths and book is None:
        book = load_review(transcript=transcript)
    return {path.name: load_student_review(path, transcript, book) for path in paths}


def write_template(path: str | os.PathLike, review: pd.DataFrame) -> Path:
    """A blank review of the same replies as ``review``: reply columns copied, judgment
    columns empty. Refuses to overwrite a file. Lesson 4, "Your own review"."""
    path = Path(path)
    if path.exists():
        raise FileExistsError(f"{path} exists; choose another name or delete it first")
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(REVIEW_COLUMNS)
    for record in review.itertuples(index=False):
        values = record._asdict()
        writer.writerow([values[c] for c in REPLY_COLUMNS] + [""] * len(JUDGMENT_COLUMNS))
    # All at once, so a failure part of the way through leaves no half-written review.
    try:
        return write_text_atomic(path, buffer.getvalue(), overwrite=False)
    except FileExistsError:
        raise FileExistsError(f"{path} appeared while the template was written; "
                              "choose another name or delete it first") from None


# ------------------------------------------------------------------ the reviewed replies

#: The replies the book's review covers, in review order: (reader, decoding, question
#: files). Qwen's are lesson 1's six; SmolLM2's come unconstrained and under lesson 3's
#: grammar, for the six lesson prompts and the 36 extended questions; the sentence
#: baseline's, for the same questions, copy from tf-idf's top passage and from the
#: hybrid's.
REVIEWED_REPLIES = (
    ("qwen_1_5b_instruct", UNCONSTRAINED, (QUESTIONS_FILE,)),
    ("smollm2_135m_instruct", UNCONSTRAINED, (QUESTIONS_FILE, EXTENDED_QUESTIONS_FILE)),
    ("smollm2_135m_instruct", CONSTRAINED, (QUESTIONS_FILE, EXTENDED_QUESTIONS_FILE)),
    (BASELINE_READER, BASELINE_DECODINGS["tfidf"], (QUESTIONS_FILE, EXTENDED_QUESTIONS_FILE)),
    (BASELINE_READER, BASELINE_DECODINGS["hybrid"], (QUESTIONS_FILE, EXTENDED_QUESTIONS_FILE)),
)


class BaselineReplayError(LookupError):
    """The baseline's record has no reply for a request the review covers."""


def recorded_replies(transcript: str | os.PathLike = TRANSCRIPT_PATH,
                     data_dir: str | os.PathLike = DATA_DIR,
                     plan=REVIEWED_REPLIES,
                     baseline_record: str | os.PathLike = BASELINE_REPLIES_PATH
                     ) -> pd.DataFrame:
    """Replay every reply the review covers, with what the reader was given.

    The prompts are rebuilt as lesson 1 builds them (tf-idf top 3 over the handbook), and
    each reply is found in ``transcript`` by its exact key, so a changed prompt, setting
    or grammar is a ``ReplayError`` naming the question. One row per reply: reader,
    decoding, question file and ID, question, expected action, retrieved IDs, messages,
    key, raw output and token diagnostics.

    The sentence baseline's replies are computed now, with tf-idf's or the hybrid's top
    three passages (mode "computed"), and their keys looked up in ``baseline_record``: a
    request the record lacks is a :class:`BaselineReplayError` naming the question. The
    text is the one computed now, so :func:`load_review` refuses a review row whose
    baseline reply has changed. Lesson 4, "The replies under review".
    """
    from .reader.constrained import replay_constrained
    from .reader.generation import RecordedReader
    from .reader.lesson import lesson_retrieval
    from .reader.prompts import reader_inputs
    from .reader.registry import get_reader_spec

    rows = []
    record = None
    for reader_key, decoding, files in plan:
        if reader_key == BASELINE_READER:
            if record is None:
                record = {e.key: e for e in read_baseline_replies(baseline_record)}
            rows += _baseline_rows(decoding, files, data_dir, record, baseline_record)
            continue
        recorded = RecordedReader(get_reader_spec(reader_key), transcript)
        for name in files:
            fixture, retrieved = lesson_retrieval(name, data_dir)
            inputs = reader_inputs(fixture.questions, retrieved, fixture.handbook)
            expected = dict(zip(fixture.questions["question_id"],
                                fixture.questions["expected_action"]))
            for row in inputs.itertuples(index=False):
                if decoding == CONSTRAINED:
                    reply = replay_constrained(recorded, row.messages, row.retrieved_ids,
                                               row.question_id)
                else:
                    reply = recorded.generate(row.messages, row.question_id)
                rows.append({
                    "reader": reader_key, "decoding": decoding, "question_file": name,
                    "question_id": row.question_id, "question": row.question,
                    "expected_action": expected[row.question_id],
                    "retrieved_ids": row.retrieved_ids, "messages": row.messages,
                    "key": reply.key, "raw_output": reply.raw_output,
                    "output_tokens": reply.output_tokens, "ended_by_eos": reply.ended_by_eos,
                    "hit_token_cap": reply.hit_token_cap, "mode": reply.mode,
                    "model_id": reply.model_id, "revision": reply.revision,
                })
    return pd.DataFrame(rows)


def _baseline_rows(decoding: str, files, data_dir, record: Mapping, where) -> list[dict]:
    """The baseline's replies for one retriever, computed now, as rows of
    :func:`recorded_replies`; each key must be in the record."""
    from .fixture import load_riverton
    from .reader.lesson import RETRIEVAL_K, fit_retriever

    retriever = {d: r for r, d in BASELINE_DECODINGS.items()}[decoding]
    rows = []
    fitted = None
    for name in files:
        fixture = load_riverton(Path(data_dir), name)
        # One fit serves every question file: they share the handbook.
        if fitted is None:
            fitted = fit_retriever(retriever, fixture.handbook)
        questions = fixture.questions
        expected = dict(zip(questions["question_id"], questions["expected_action"]))
        computed = baseline_replies(questions, fitted.rank(questions, k=RETRIEVAL_K),
                                    fixture.handbook, retriever)
        for row in computed.itertuples(index=False):
            if row.key not in record:
                raise BaselineReplayError(
                    f"{row.question_id} ({decoding}): {where} has no baseline reply for this "
                    "request (the question or its passages changed since it was recorded); "
                    "write the record again with `python -m helpers.baseline record` and "
                    "review the new replies")
            rows.append({
                "reader": BASELINE_READER, "decoding": decoding, "question_file": name,
                "question_id": row.question_id, "question": row.question,
                "expected_action": expected[row.question_id],
                "retrieved_ids": row.retrieved_ids, "messages": None,
                "key": row.key, "raw_output": row.raw_output,
                "output_tokens": None, "ended_by_eos": None, "hit_token_cap": None,
                "mode": "computed", "model_id": BASELINE_MODEL, "revision": None,
            })
    return rows


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
        elif reply["raw_output"] != unescape_reply(record["reviewed_reply"]):
            status, now = REPLY_CHANGED, reply["raw_output"]
        else:
            status, now = SAME_REPLY, reply["raw_output"]
        same = status == SAME_REPLY
        rows.append({
            **{c: record[c] for c in ("review_id", *columns)},
            "reviewed_reply": unescape_reply(record["reviewed_reply"]),
            "reply_now": now,
            "status": status,
            "verdict_now": record["verdict"] if same else None,
            "reason_now": record["reason"] if same else None,
        })
    # Object columns keep "no verdict" as None, not NaN: a missing judgment, not a number.
    return pd.DataFrame(rows, columns=["review_id", *columns, "reviewed_reply", "reply_now",
                                       "status", "verdict_now", "reason_now"], dtype=object)


# ---------------------------------------------------------------------------- command


def check_reviews(data_dir: str | os.PathLike = DATA_DIR,
                  folder: str | os.PathLike | None = None,
                  transcript: str | os.PathLike = TRANSCRIPT_PATH) -> list[str]:
    """Validate the book's review and every student review; one line per file."""
    review = load_review(data_dir, transcript)
    lines = [f"{REVIEW_FILE}: {len(review)} rows ok"]
    for name, frame in load_student_reviews(folder, transcript, review).items():
        lines.append(f"{name}: {len(frame)} reviewed rows ok")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m helpers.review", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("check", help="validate the book's review and data/reviews/*.csv")
    template = commands.add_parser("template", help="write a blank review to fill in")
    template.add_argument("path", help="e.g. data/reviews/my-review.csv")
    args = parser.parse_args(argv)
    try:
        if args.command == "template":
            book = load_review()
            written = write_template(args.path, book)
            print(f"wrote {written} with {len(book)} replies to review; fill in "
                  "verdict, reason, note, reviewer and reviewed_on (leave a row blank to "
                  "skip it), then run `python -m helpers.review check`")
            return 0
        for line in check_reviews():
            print(line)
    except (FixtureError, FileExistsError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
