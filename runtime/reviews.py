"""Reading and checking review files, and the replies they judge.

Machinery behind lesson 4, "The replies under review" and "The review record". The
vocabulary of a review (verdicts, reasons) and the rule for changed replies are taught in
:mod:`helpers.review`; this module reads ``data/riverton/support-review.csv`` and the
students' reviews in ``data/reviews/``, and checks every row against the transcript
entry it names: same key, same reply, same parsed answer and sources, a verdict and a
reason from the vocabulary. ``python -m runtime review check`` validates them all;
``python -m runtime review template data/reviews/NAME.csv`` starts a review of your own.
"""
from __future__ import annotations

import datetime
import functools
import random
from collections.abc import Mapping
from pathlib import Path

import pandas as pd
import regex

from helpers.baseline import BASELINE_DECODINGS, BASELINE_READER
from helpers.corruptions import CORRUPTION_READER, KINDS, corrupt_review
from helpers.decoding import CONSTRAINED, DECODING_FIELD, UNCONSTRAINED
from helpers.judge import JUDGE_GRAMMAR, JUDGE_SETTINGS, judge_requests, parse_judge_reply
from helpers.parsing import parse_reader_output
from helpers.review import REASONS, SAME_REPLY, VERDICTS, carry_verdicts, sources_text

from . import config
from .files import write_csv_atomic
from .fixture import CORRUPTIONS_FILE, EXTENDED_QUESTIONS_FILE, JUDGMENT_RULES, QUESTIONS_FILE, \
    REVIEW_FILE, SCHEMAS, SECOND_READING_FILE, FixtureError, PathLike, Row, _load, check_rows, \
    check_against_metadata, frame_rows, load_riverton, read_metadata, read_rows, validated
from .lessons import BASELINE_MODEL, baseline_replies, collection_name, fit_retriever
from .paths import DATA_DIR, PROJECT_ROOT
from .readers import generate_all
from .records import TRANSCRIPT_PATH, Reply, computed_reply, read_transcript, recorded
from .registry import REGISTRY

#: The rule-made replies' stand-in for a model in the transcript, its revision (the code
#: that makes them) and their collection.
CORRUPTION_MODEL = "rule-made corruption (helpers.corruptions)"
CORRUPTION_REVISION = "helpers/corruptions.py"
CORRUPTION_COLLECTION = "corruptions"

#: The columns of a review; what each must hold is its schema in ``fixture.SCHEMAS``.
REVIEW_COLUMNS = tuple(SCHEMAS[REVIEW_FILE].columns)
#: The columns that identify the reply a row judges (a template copies these), and the
#: columns a reviewer fills in.
REPLY_COLUMNS, JUDGMENT_COLUMNS = REVIEW_COLUMNS[:8], REVIEW_COLUMNS[8:]

#: Where a student's own reviews live: inside ``data/`` so a new file re-renders the page.
REVIEWS_DIR = PROJECT_ROOT / "data" / "reviews"

#: The replies the book's review covers, in review order: (reader, decoding, question
#: files). Qwen's are lesson 1's six; SmolLM2's come unconstrained and under lesson 3's
#: grammar, for the six lesson prompts and the 36 extended questions; the sentence
#: baseline's, for the same questions, copy from tf-idf's top passage and the hybrid's;
#: the rule-made corruptions of supported replies (lesson 4, "Replies whose fault does not
#: show"), one kind of fault each, keep their source's prompt.
REVIEWED_REPLIES = (
    ("qwen_1_5b_instruct", UNCONSTRAINED, (QUESTIONS_FILE,)),
    ("smollm2_135m_instruct", UNCONSTRAINED, (QUESTIONS_FILE, EXTENDED_QUESTIONS_FILE)),
    ("smollm2_135m_instruct", CONSTRAINED, (QUESTIONS_FILE, EXTENDED_QUESTIONS_FILE)),
    (BASELINE_READER, BASELINE_DECODINGS["tfidf"], (QUESTIONS_FILE, EXTENDED_QUESTIONS_FILE)),
    (BASELINE_READER, BASELINE_DECODINGS["hybrid"], (QUESTIONS_FILE, EXTENDED_QUESTIONS_FILE)),
    *((CORRUPTION_READER, kind, (QUESTIONS_FILE, EXTENDED_QUESTIONS_FILE)) for kind in KINDS),
)


def retriever_of(reader: str, decoding: str) -> str:
    """The retriever whose top passages a reply was given: the baseline's own, or lesson
    1's tf-idf for every reader reply the review covers. A corruption keeps its source's
    passages, so it has no retriever of its own: read its ``retrieved_ids``."""
    if reader == CORRUPTION_READER:
        raise ValueError("a corruption keeps its source's passages: read its retrieved_ids")
    if reader == BASELINE_READER:
        return {d: r for r, d in BASELINE_DECODINGS.items()}[decoding]
    return "tfidf"


def system_label(reader: str, decoding: str) -> str:
    """A short name for the system that wrote a reply: the model's name, with "under the
    grammar" for a constrained reply, the baseline and its retriever, or "rule-made
    corruption" (its kind is its ``decoding``)."""
    if reader == CORRUPTION_READER:
        return "rule-made corruption"
    if reader == BASELINE_READER:
        return f"{retriever_of(reader, decoding).replace('tfidf', 'tf-idf')} sentence baseline"
    name = REGISTRY[reader].model_id.split("/")[-1]
    return name if decoding == UNCONSTRAINED else f"{name} under the grammar"


def reviews_dir() -> Path:
    """The folder of students' reviews: ``$RIVERTON_REVIEWS_DIR`` or ``data/reviews``."""
    return Path(config.text(config.REVIEWS_DIR) or REVIEWS_DIR)


class ReviewError(FixtureError):
    """A review file is malformed or does not match the replies it claims to judge."""


def _fail(path: Path, row: Row, column: str, problem: str) -> ReviewError:
    return ReviewError(path, problem, row.number, row.line, column)


# ------------------------------------------------------------ how a reply is written

_ESCAPES = str.maketrans({"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"})
_UNESCAPES = {"\\": "\\", "n": "\n", "r": "\r", "t": "\t", "s": " "}
#: An escape, or a lone backslash at the end (an empty group).
_ESCAPE = regex.compile(r"\\(.|\Z)", regex.DOTALL)


def escape_reply(text: str) -> str:
    r"""A raw reply on one CSV line: backslash, line feed, carriage return and tab become
    ``\\``, ``\n``, ``\r`` and ``\t``, and a space at either end becomes ``\s`` (the
    fixture reader refuses fields with white space at their ends)."""
    return regex.sub(r"\A +| +\Z", lambda spaces: "\\s" * len(spaces[0]),
                     text.translate(_ESCAPES))


def unescape_reply(text: str) -> str:
    """Undo :func:`escape_reply`; an unknown escape or a lone final backslash is an error."""
    def one(escape: regex.Match) -> str:
        if escape[1] not in _UNESCAPES:
            raise ValueError(f"unknown escape \\{escape[1]} in {text!r}" if escape[1] else
                             f"a lone backslash ends {text!r}")
        return _UNESCAPES[escape[1]]

    return _ESCAPE.sub(one, text)


# ------------------------------------------------------------------ the reviewed replies

def _covered(plan) -> dict[tuple[str, str, str], tuple[str, str]]:
    """The transcript slots (collection, model, decoding) a plan covers, with the reader
    and question file each stands for."""
    slots = {}
    for reader, decoding, files in (p for p in plan if p[0] != CORRUPTION_READER):
        model = BASELINE_MODEL if reader == BASELINE_READER else REGISTRY[reader].model_id
        slots.update({(collection_name(name, retriever_of(reader, decoding)), model, decoding):
                      (reader, name) for name in files})
    slots.update({(CORRUPTION_COLLECTION, CORRUPTION_MODEL, decoding): (reader, None)
                  for reader, decoding, _ in plan if reader == CORRUPTION_READER})  # every file's
    return slots


def reply_columns(entry: Reply, reader: str) -> dict[str, str]:
    """The reply-identifying columns of a review row for one transcript entry."""
    parsed = parse_reader_output(entry.raw_output)
    return {"reader": reader, "decoding": entry.decoding, "question_id": entry.question_id,
            "transcript_key": entry.key, "reviewed_reply": escape_reply(entry.raw_output),
            "reviewed_answer": parsed.answer if parsed.parse_ok else "",
            "reviewed_sources": sources_text(parsed.sources) if parsed.parse_ok else ""}


def reviewable_entries(transcript: PathLike = TRANSCRIPT_PATH) -> dict[str, tuple[str, Reply]]:
    """The transcript entries a review may judge, by key, with the reader each is from:
    those of the readers, decodings and question files of :data:`REVIEWED_REPLIES` (not
    the judge's)."""
    slots = _covered(REVIEWED_REPLIES)
    return {entry.key: (slots[entry.slot][0], entry) for entry in read_transcript(transcript)
            if entry.slot in slots}


def recorded_replies(transcript: PathLike = TRANSCRIPT_PATH, data_dir: PathLike = DATA_DIR,
                     plan=REVIEWED_REPLIES) -> pd.DataFrame:
    """Every reply the review covers, in plan and question order, with what the reader was
    given. The readers' replies are the transcript's (mode "recorded"); the sentence
    baseline's are computed now from each retriever's top three (mode "computed"), so
    that :func:`load_review` refuses a review row whose baseline reply has changed. One
    row per reply: reader, decoding, question ID and text, messages, retrieved IDs, key,
    raw output and mode."""
    by_slot: dict[tuple, dict] = {}
    for entry in read_transcript(transcript):
        by_slot.setdefault(entry.slot, {})[entry.question_id] = entry
    fixture = functools.cache(lambda name: load_riverton(Path(data_dir), name).questions)
    handbook = load_riverton(Path(data_dir)).handbook
    fitted = functools.cache(lambda retriever: fit_retriever(retriever, handbook))
    rows = []
    for slot, (reader, name) in _covered(plan).items():
        entries = by_slot.get(slot, {})
        # a corruption slot covers the questions of every file it has replies to
        questions = fixture(name) if name else pd.concat(map(fixture, (
            QUESTIONS_FILE, EXTENDED_QUESTIONS_FILE))).query("question_id in @entries")
        if reader == BASELINE_READER:
            retriever = retriever_of(reader, slot[2])
            entries = {r.question_id: r for r in baseline_replies(
                questions, handbook, retriever, fitted(retriever)).itertuples(index=False)}
        for question in questions.itertuples(index=False):
            if question.question_id not in entries:
                raise LookupError(f"{question.question_id} ({system_label(reader, slot[2])}): the "
                                  f"transcript holds no reply in {slot[0]}; record it with "
                                  "`python -m runtime record`")
            entry = entries[question.question_id]
            rows.append({"reader": reader, "decoding": slot[2], "question_id": question.question_id,
                         "question": question.question, "messages": entry.messages,
                         "retrieved_ids": tuple(entry.retrieved_ids if reader == BASELINE_READER
                                                else entry.passage_ids),
                         "key": entry.key, "raw_output": entry.raw_output,
                         "mode": "computed" if reader == BASELINE_READER else "recorded"})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ checking a review

def _check_reply(path: Path, row: Row, by_key: Mapping[str, tuple[str, Reply]],
                 review_ids: Mapping[str, str | None] | None) -> None:
    """The row's reply columns must describe, exactly, a reply the review may judge."""
    values, key = row.values, row.values["transcript_key"]
    if key not in by_key:
        raise _fail(path, row, "transcript_key", f"no reply with key {key[:12]}... among the "
                    "replies a review may judge (see REVIEWED_REPLIES): the row reviews a reply "
                    "that was never recorded, one whose prompt has changed since, or one of "
                    "another kind")
    if review_ids is not None and values["review_id"] != review_ids.get(key, values["review_id"]):
        raise _fail(path, row, "review_id", f"{values['review_id']!r} is not the ID of this "
                    f"reply, which the book's review calls {review_ids[key]!r}")
    if review_ids is not None and key not in review_ids:
        raise _fail(path, row, "transcript_key", f"the reply {key[:12]}... is not one the book's "
                    "review judges; start from `python -m runtime review template` and keep "
                    "its reply columns")
    reader, entry = by_key[key]
    for column, wanted in reply_columns(entry, reader).items():  # its key is the row's own
        if values[column] != wanted:
            raise _fail(path, row, column, f"{values[column]!r} does not match the transcript "
                        f"reply {key[:12]}..., which gives "
                        f"{wanted or '(empty: the reply did not parse)'!r}")


def review_rows(path: Path, transcript: PathLike = TRANSCRIPT_PATH, allow_blank: bool = False,
                review_ids: Mapping[str, str | None] | None = None) -> tuple[list[Row], list[Row]]:
    """All rows of a review file, validated, and the subset that carries a judgment.
    ``review_ids`` (key to review ID) restricts the file to the book's rows."""
    try:  # each column by the review's schema; a student's row may leave its judgment blank
        rows = check_rows(path, read_rows(path, REVIEW_COLUMNS), SCHEMAS[REVIEW_FILE],
                          may_skip=JUDGMENT_COLUMNS if allow_blank else ())
    except FixtureError as error:
        raise ReviewError(error.path, error.problem, error.row, error.line, error.column) from None
    by_key = reviewable_entries(transcript)
    judged = []
    for row in rows:
        _check_reply(path, row, by_key, review_ids)
        if allow_blank and not any(row.values[c] for c in JUDGMENT_COLUMNS):
            continue  # a row left blank
        # the reason goes with the verdict, and names a parse failure exactly when the
        # reply did not parse (each column on its own is the schema's)
        for column, problem in (fault for rule in JUDGMENT_RULES for fault in rule(row.values, {})):
            raise _fail(path, row, column, problem)
        judged.append(row)
    return rows, judged


def _frame(rows: list[Row]) -> pd.DataFrame:
    """The rows of a review file as a frame, each reviewed reply as it was written."""
    frame = pd.DataFrame([row.values for row in rows], columns=list(REVIEW_COLUMNS))
    return frame.assign(reviewed_on=pd.to_datetime(frame["reviewed_on"], format="%Y-%m-%d").dt.date,
                        parse_ok=frame["reviewed_answer"] != "",
                        reviewed_reply=frame["reviewed_reply"].map(unescape_reply))


def with_parsed(frame: pd.DataFrame, transcript: PathLike = TRANSCRIPT_PATH) -> pd.DataFrame:
    """A review with what the strict parser reads in each reply, from the transcript entry
    it names by key (not from the file's escaped copy): ``answer``, ``sources``, ``action``."""
    entries = reviewable_entries(transcript)
    parsed = [parse_reader_output(entries[key][1].raw_output) for key in frame["transcript_key"]]
    return frame.assign(answer=[p.answer for p in parsed], sources=[p.sources for p in parsed],
                        action=[p.action for p in parsed])


def load_review(data_dir: PathLike = DATA_DIR, transcript: PathLike = TRANSCRIPT_PATH,
                replies: pd.DataFrame | None = None) -> pd.DataFrame:
    """The book's review record, validated row by row and against the metadata file.

    With ``replies`` (the frame of :func:`recorded_replies`), each row's reply must also
    be, character for character, the reply of that frame: the baseline's replies are
    computed afresh there, so a changed baseline is refused here, naming the row, as
    "reply changed since review" (:func:`helpers.review.carry_verdicts`).
    """
    path = Path(data_dir) / REVIEW_FILE
    rows, _ = review_rows(path, transcript)
    check_against_metadata(path, len(rows))
    frame = with_parsed(_frame(rows), transcript)
    if replies is not None:
        status = carry_verdicts(frame, replies[["reader", "decoding", "question_id", "key",
                                                "raw_output"]])
        for row, first in zip(rows, status.to_dict("records")):
            if first["status"] != SAME_REPLY:
                raise _fail(path, row, "reviewed_reply",
                            f"{first['review_id']} ({first['question_id']}, "
                            f"{system_label(first['reader'], first['decoding'])}): "
                            f"{first['status']}: reviewed {first['reviewed_reply']!r}, now "
                            f"{first['reply_now']!r}; its verdict no longer applies until "
                            "someone reads the new reply")
    return frame


def load_student_reviews(folder: PathLike | None = None,
                         book: pd.DataFrame | None = None) -> dict[str, pd.DataFrame]:
    """Every ``*.csv`` review in ``folder`` (default :func:`reviews_dir`), by file name,
    with only its judged rows. Every row, blank or not, must be a row of the book's review
    (``book``, by default :func:`load_review`): the same reply under the same review ID,
    so that each verdict can be set beside the book's. Lesson 4, "Your own review"."""
    folder = reviews_dir() if folder is None else Path(folder)
    paths = sorted(folder.glob("*.csv")) if folder.is_dir() else []
    book = load_review() if paths and book is None else book
    ids = {} if book is None else dict(zip(book["transcript_key"], book["review_id"]))
    return {path.name: _frame(review_rows(path, TRANSCRIPT_PATH, True, ids)[1]) for path in paths}


def write_template(path: PathLike, review: pd.DataFrame) -> Path:
    """A blank review of the same replies as ``review``: reply columns copied, judgment
    columns empty. Refuses to overwrite a file. Lesson 4, "Your own review"."""
    path = Path(path)
    try:
        return write_csv_atomic(path, REVIEW_COLUMNS, [
            [escape_reply(values[c]) if c == "reviewed_reply" else values[c]
             for c in REPLY_COLUMNS] + [""] * len(JUDGMENT_COLUMNS)
            for values in review.to_dict("records")], overwrite=False)
    except FileExistsError:
        raise FileExistsError(f"{path} exists; choose another name or delete it first") from None


def check_reviews() -> list[str]:
    """Validate the book's review and every student review; one line per file."""
    review = load_review()
    second = load_second_reading(review)
    return [f"{REVIEW_FILE}: {len(review)} rows ok",
            f"{SECOND_READING_FILE}: {len(second)} of {len(second_sample(review))} replies read",
            *(f"{name}: {len(frame)} reviewed rows ok"
              for name, frame in load_student_reviews(book=review).items())]


# ---------------------------------------------------------------------- the judge's replies

def judge_replies(judge, requests: pd.DataFrame) -> pd.DataFrame:
    """Ask ``judge`` (a live or recorded SmolLM2 reader) about every distinct request of
    :func:`helpers.judge.judge_requests`, under the yes-or-no grammar, then parse each
    reply strictly. Recorded: replayed by the same key, so a changed review row or prompt
    is refused naming the request. Adds ``judge_generation``, ``judge_raw``,
    ``judge_parse_ok``, ``judge_supported``,
    ``judge_problem`` and ``judge_p_yes``: the probability of "yes" at the first step,
    renormalised over "yes" and "no" (None where the transcript holds none)."""
    distinct = requests.drop_duplicates("request_id")
    asked = generate_all(judge, distinct.assign(question_id=distinct["request_id"]),
                         grammar=JUDGE_GRAMMAR, settings=JUDGE_SETTINGS,
                         max_input_tokens=None, choices=("yes", "no"))
    answers = dict(zip(distinct["request_id"], asked.attrs["generations"]))
    mine = [answers[r] for r in requests["request_id"]]
    parsed = [parse_judge_reply(g.raw_output) for g in mine]
    column = functools.partial(pd.Series, index=requests.index, dtype=object)
    return requests.assign(
        judge_generation=column(mine), judge_raw=[g.raw_output for g in mine],
        judge_parse_ok=[p.parse_ok for p in parsed],
        judge_supported=column([p.supported for p in parsed]),
        judge_problem=[p.problem for p in parsed],
        judge_p_yes=column([(g.choice_probabilities or {}).get("yes") for g in mine]))


def _questions_and_texts() -> tuple[pd.DataFrame, dict[str, str]]:
    """The questions of both question files, and the handbook's passage texts by ID."""
    fixtures = [load_riverton(DATA_DIR, n) for n in (QUESTIONS_FILE, EXTENDED_QUESTIONS_FILE)]
    handbook = fixtures[0].handbook
    return (pd.concat([f.questions for f in fixtures], ignore_index=True),
            dict(zip(handbook["passage_id"], handbook["text"])))


def review_requests(review: pd.DataFrame) -> pd.DataFrame:
    """:func:`helpers.judge.judge_requests` for the book's ``review``, with the fixture's
    questions and passages."""
    questions, texts = _questions_and_texts()
    return judge_requests(review, dict(zip(questions["question_id"], questions["question"])), texts)


# ------------------------------------------------------------ the rule-made corruptions

def load_corruptions(data_dir: PathLike = DATA_DIR) -> pd.DataFrame:
    """The rule-made corruptions (``corrupted-replies.csv``), validated row by row and
    against the metadata, each ``reply`` as it was made (unescaped). Lesson 4, "Replies
    whose fault does not show"."""
    frame = _load(CORRUPTIONS_FILE, data_dir, read_metadata(data_dir))
    return frame.assign(reply=frame["reply"].map(unescape_reply))


def corruption_replies(transcript: PathLike = TRANSCRIPT_PATH) -> tuple[list[list[str]], list]:
    """:func:`helpers.corruptions.corrupt_review` applied to the book's review now: the
    rows of ``corrupted-replies.csv`` and the transcript entries of the corrupted replies,
    each under its source's prompt, keyed by its kind (lesson 4, "Replies whose fault does
    not show"). The sources are read from the review file by its schema alone, so that
    corruptions recorded under an older rule do not stop a new recording."""
    review = with_parsed(_frame(validated(DATA_DIR, REVIEW_FILE)[REVIEW_FILE]), transcript)
    sources = {key: entry for key, (_, entry) in reviewable_entries(transcript).items()}
    made = corrupt_review(review, *_questions_and_texts(),
                          {key: tuple(e.passage_ids) for key, e in sources.items()})
    rows, entries = [], []
    for number, row in enumerate(made.itertuples(index=False), start=1):
        source, settings = sources[row.source_key], {DECODING_FIELD: row.kind}
        entries.append(recorded(
            computed_reply(CORRUPTION_MODEL, CORRUPTION_REVISION, source.messages, settings,
                           row.reply, row.question_id),
            CORRUPTION_COLLECTION, source.passage_ids, "python -m runtime record corruptions"))
        rows.append([f"C{number:03d}", row.kind, row.rule, row.source_review_id, row.source_key,
                     row.question_id, entries[-1].key, escape_reply(row.reply),
                     row.expected_verdict, row.expected_reason])
    return rows, entries


# ------------------------------------------------------------------ the second reading

#: The second reading's sample: from every system (each model and decoding, each baseline,
#: each kind of corruption) and every verdict of the first reading, this many distinct
#: replies at most, drawn with this seed, then shuffled together.
SECOND_PER_STRATUM = 5
SECOND_SEED = 20261204
SECOND_COLUMNS = tuple(SCHEMAS[SECOND_READING_FILE].columns)


def second_sample(review: pd.DataFrame) -> list[str]:
    """The review IDs of the second reading, in the order it reads them. Identical replies
    to one question count once (the first in review order); from each (reader, decoding,
    verdict) up to :data:`SECOND_PER_STRATUM` are drawn by a seeded generator."""
    distinct = review.drop_duplicates(["question_id", "reviewed_reply"])
    chance, drawn = random.Random(SECOND_SEED), []
    for _, stratum in distinct.groupby(["reader", "decoding", "verdict"], sort=False):
        drawn += chance.sample(list(stratum["review_id"]), min(SECOND_PER_STRATUM, len(stratum)))
    chance.shuffle(drawn)
    return drawn


def _second_rows(path: Path, rows: list[Row], book: pd.DataFrame) -> list[Row]:
    """Rows of a second reading, each by its schema and in the sample."""
    check_rows(path, rows, SCHEMAS[SECOND_READING_FILE], frame_rows(book, REVIEW_FILE))
    sample = set(second_sample(book))
    for row in (row for row in rows if row.values["review_id"] not in sample):
        raise _fail(path, row, "review_id", f"{row.values['review_id']} is not one of the "
                    f"{len(sample)} replies of the second reading's sample; `python -m "
                    "runtime review second --next` shows the next one to read")
    return rows


def load_second_reading(book: pd.DataFrame | None = None,
                        file: str = SECOND_READING_FILE) -> pd.DataFrame:
    """The second reading so far (``second-reading.csv``, or ``file``: the blind reading),
    validated: every row a reply of the sample, read once, its reason one of its verdict's,
    the file as the metadata records it. A missing file, or one with its header only, is a
    reading not begun. ``book`` is the review (by default :func:`load_review`)."""
    path = DATA_DIR / file
    if not path.exists() or path.read_text(encoding="utf-8") == ",".join(SECOND_COLUMNS) + "\n":
        return pd.DataFrame(columns=list(SECOND_COLUMNS))
    book = load_review() if book is None else book
    rows = _second_rows(path, read_rows(path, SECOND_COLUMNS), book)
    check_against_metadata(path, len(rows))
    return pd.DataFrame([row.values for row in rows], columns=list(SECOND_COLUMNS))


def vocabulary_text() -> str:
    """The verdicts and reasons a reader chooses from, numbered, with their meanings."""
    lines = ["VERDICTS AND REASONS. Read the reply against its question and the passages it "
             "cites; give the first reason that applies, in this order (is it an answer at "
             "all, does it cite anything, what does the cited passage say):"]
    for number, verdict in enumerate(VERDICTS, 1):
        lines.append(f"{number}. {verdict}")
        lines += [f"   {n}) {r.name}: {r.meaning}" for n, r in enumerate(REASONS.values(), 1)
                  if r.verdict == verdict]
    return "\n".join(lines)


def blind_text(review_id: str, book: pd.DataFrame) -> str:
    """One reply as the second reader sees it: the question, the reply as written, what
    the parser read, the text of each cited passage and, for an abstention, the passages
    the reader was given. Nothing of the first reading: no system, verdict, reason or
    note."""
    row = book.set_index("review_id").loc[review_id]
    questions, texts = _questions_and_texts()
    questions = questions.set_index("question_id")["question"]
    def shown(ids):
        return [f"  {i}: {texts.get(i, '(no such passage in the handbook)')}"
                for i in ids] or ["  (none)"]
    parsed = row["action"] != "parse failure"
    lines = [f"REPLY {review_id}", f"QUESTION: {questions[row['question_id']]}",
             "THE REPLY AS WRITTEN:",
             *[f"  | {line}" for line in row["reviewed_reply"].split("\n")],
             f"PARSED: answer {row['reviewed_answer']!r}; sources {row['reviewed_sources']}"
             if parsed else "PARSED: the strict parser found no answer and no sources",
             "CITED PASSAGES:", *shown(row["sources"])]
    if row["action"] == "abstain":
        entry = reviewable_entries()[row["transcript_key"]][1]
        lines += ["PASSAGES THE READER WAS GIVEN:", *shown(entry.passage_ids)]
    return "\n".join(lines)


def record_second_reading(review_id: str, verdict: str, reason: str, note: str,
                          reviewer: str) -> Path:
    """Add one reading to ``second-reading.csv``, validated with every earlier row, and
    rewrite the file atomically (the metadata is the caller's)."""
    path = DATA_DIR / SECOND_READING_FILE
    book = load_review()
    done = load_second_reading(book)
    values = [*done.to_dict("records"), dict(zip(SECOND_COLUMNS, (
        review_id, verdict, reason, note, reviewer, datetime.date.today().isoformat())))]
    _second_rows(path, [Row(n, n + 1, v) for n, v in enumerate(values, 1)], book)
    return write_csv_atomic(path, SECOND_COLUMNS, [[v[c] for c in SECOND_COLUMNS] for v in values])


def next_to_read() -> tuple[str | None, str]:
    """The next unread reply of the sample and how far the reading is."""
    book = load_review()
    sample = second_sample(book)
    done = set(load_second_reading(book)["review_id"])
    left = next((review_id for review_id in sample if review_id not in done), None)
    return left, f"{len(done)} of {len(sample)} replies read"
