"""Load and validate the Riverton handbook fixture.

Introduced in lesson 1, "Load the reader and the handbook". Every check that fails
raises :class:`FixtureError`, whose message names the file, the data row (1 = first row
under the header), the physical line and the column, so a bad edit is found at once.

The functions that read a CSV file strictly (:func:`read_rows`, :func:`require`,
:func:`require_unique`, :func:`check_against_metadata`) are shared with the review
loader (:mod:`helpers.review`). Validating the whole folder and rewriting the metadata
after a deliberate edit is the book's own tooling, not a lesson's:
``python -m runtime data check`` and ``... data update-metadata FILE...``.

Lesson 5's attack fixture (planted passages and attack questions) is loaded by
:func:`load_attack_fixture`, from files of its own that no earlier lesson reads.
"""
from __future__ import annotations

import csv
import datetime as dt
import hashlib
import io
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import regex

from helpers.attack_rules import ATTACK_KINDS, EVASION_STYLES, RuleError, parse_rule, without_payload
from .paths import DATA_DIR, PROJECT_ROOT

HANDBOOK_FILE = "riverton-handbook.csv"
QUESTIONS_FILE = "riverton-handbook-questions.csv"
#: Lesson 2's thirty-six further questions.
EXTENDED_QUESTIONS_FILE = "riverton-extended-questions.csv"
METADATA_FILE = "riverton-handbook-metadata.csv"
#: Lesson 4's human support review (validated by :mod:`helpers.review`).
REVIEW_FILE = "support-review.csv"

HANDBOOK_COLUMNS = ("passage_id", "topic", "text", "source", "author_note")
QUESTION_COLUMNS = (
    "question_id",
    "question",
    "probe_type",
    "expected_action",
    "gold_passage_id",
    "acceptable_answers",
    "author_note",
)
METADATA_COLUMNS = (
    "artifact",
    "description",
    "source",
    "license",
    "created_on",
    "rows",
    "fingerprint",
)
ACTIONS = ("answer", "abstain", "flag premise")

# The attack fixture of lesson 5, kept in files of its own: lessons 1 to 4 never read them.
ATTACK_PASSAGES_FILE = "riverton-attack-passages.csv"
ATTACK_QUESTIONS_FILE = "riverton-attack-questions.csv"
ATTACK_PASSAGE_COLUMNS = ("passage_id", "topic", "text", "source", "provenance", "author_note")
ATTACK_QUESTION_COLUMNS = (
    "attack_id",
    "kind",
    "question",
    "planted_ids",
    "sensitive_topic",
    "payload",
    "success_behaviour",
    "success_rule",
    "expected_handling",
    "source",
    "author_note",
)
#: Further wordings of each attack (its own row is the first), and questions reworded
#: to get past the router; lesson 5 reads them with the two files above.
ATTACK_WORDINGS_FILE = "riverton-attack-wordings.csv"
ATTACK_EVASIONS_FILE = "riverton-attack-evasions.csv"
ATTACK_WORDING_COLUMNS = ("wording_id", "attack_id", "text", "payload", "source", "author_note")
ATTACK_EVASION_COLUMNS = ("evasion_id", "attack_id", "style", "question", "source",
                          "author_note")
#: Every attack comes in at least this many wordings: its own row and the others.
MIN_WORDINGS = 3
#: Where a passage outside the handbook came from: planted by an attacker, or a genuine
#: page that has been superseded. Each has its own ID prefix, which no handbook ID uses.
ATTACK_PROVENANCE_PREFIX = {"planted": "P", "superseded": "S"}
SENSITIVE_TOPICS = ("money", "eligibility", "deadline", "none")
ATTACK_MARK = "invented attack text for teaching"

_ID = regex.compile(r"[A-Za-z][A-Za-z0-9_-]*")
_SHA256 = regex.compile(r"[0-9a-f]{64}")
_DATE = regex.compile(r"\d{4}-\d{2}-\d{2}")


class FixtureError(ValueError):
    """A fixture file is malformed; the message names file, row, line and column."""

    def __init__(self, path, problem, row=None, line=None, column=None):
        self.path = Path(path)
        self.problem = problem
        self.row = row
        self.line = line
        self.column = column
        where = [_display(self.path)]
        if row is not None:
            where.append(f"row {row}" + (f" (line {line})" if line is not None else ""))
        elif line is not None:
            where.append(f"line {line}")
        if column is not None:
            where.append(f"column '{column}'")
        super().__init__(", ".join(where) + ": " + problem)


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(PROJECT_ROOT))
    except ValueError:
        return str(path)


def fingerprint(path: str | os.PathLike) -> str:
    """SHA-256 of the file's bytes, as lower-case hex."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@dataclass(frozen=True)
class Row:
    """One data row of a CSV file, with where it stands, for error messages."""

    number: int  # 1 = first data row
    line: int  # physical line in the file
    values: dict[str, str]


def read_rows(path: Path, columns: tuple[str, ...]) -> list[Row]:
    """Read a CSV strictly: UTF-8 without BOM, LF line ends, the exact header."""
    if not path.exists():
        raise FixtureError(path, "file not found")
    data = path.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):
        raise FixtureError(
            path, "starts with a UTF-8 byte-order mark; save it as UTF-8 without BOM", line=1
        )
    if b"\r" in data:
        line = data[: data.index(b"\r")].count(b"\n") + 1
        raise FixtureError(
            path, "has a carriage return (CRLF or CR line end); save it with LF line ends",
            line=line,
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise FixtureError(path, f"is not valid UTF-8 ({error.reason})", line=line) from None
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader)
    except StopIteration:
        raise FixtureError(path, "is empty; expected a header row", line=1) from None
    except csv.Error as error:
        raise FixtureError(path, f"CSV syntax error: {error}", line=1) from None
    if tuple(header) != columns:
        missing = [c for c in columns if c not in header]
        extra = [c for c in header if c not in columns]
        if missing:
            raise FixtureError(path, "missing from the header", line=1, column=missing[0])
        if extra:
            raise FixtureError(path, "not an expected column", line=1, column=extra[0])
        raise FixtureError(
            path, f"header columns are out of order; expected {', '.join(columns)}", line=1
        )
    rows: list[Row] = []
    previous_line = 1
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            break
        except csv.Error as error:
            raise FixtureError(
                path, f"CSV syntax error: {error}", row=len(rows) + 1, line=previous_line + 1
            ) from None
        line = previous_line + 1  # the line where this record starts
        previous_line = reader.line_num
        number = len(rows) + 1
        if reader.line_num != line:
            raise FixtureError(path, "a field spans several lines", row=number, line=line)
        if len(fields) != len(columns):
            raise FixtureError(
                path, f"has {len(fields)} fields, expected {len(columns)}", row=number, line=line
            )
        values = dict(zip(columns, fields))
        for column, value in values.items():
            if value != value.strip():
                raise FixtureError(
                    path, "has leading or trailing white space", row=number, line=line,
                    column=column,
                )
        rows.append(Row(number, line, values))
    if not rows:
        raise FixtureError(path, "has a header but no data rows", line=2)
    return rows


def require(path: Path, row: Row, column: str, pattern=None, choices=None) -> str:
    """The row's non-empty value of ``column``, matching ``pattern`` (a compiled regular
    expression) or one of ``choices`` when given; a :class:`FixtureError` naming file,
    row, line and column otherwise."""
    value = row.values[column]
    if value == "":
        raise FixtureError(path, "is empty", row.number, row.line, column)
    if pattern is not None and not pattern.fullmatch(value):
        raise FixtureError(
            path, f"value {value!r} does not match {pattern.pattern}", row.number, row.line,
            column,
        )
    if choices is not None and value not in choices:
        raise FixtureError(
            path, f"value {value!r} is not one of {', '.join(choices)}", row.number, row.line,
            column,
        )
    return value


def require_unique(path: Path, rows: list[Row], column: str) -> None:
    """Refuse a second row with the same value of ``column``, naming both rows."""
    seen: dict[str, int] = {}
    for row in rows:
        value = row.values[column]
        if value in seen:
            raise FixtureError(
                path, f"duplicate ID {value!r} (first in row {seen[value]})", row.number,
                row.line, column,
            )
        seen[value] = row.number


def read_metadata(data_dir: str | os.PathLike = DATA_DIR) -> pd.DataFrame:
    """Read and validate the metadata table (without checking the artifacts it lists)."""
    path = Path(data_dir) / METADATA_FILE
    rows = read_rows(path, METADATA_COLUMNS)
    for row in rows:
        for column in ("artifact", "description", "source", "license"):
            require(path, row, column)
        created = require(path, row, "created_on", _DATE)
        try:
            dt.date.fromisoformat(created)
        except ValueError:
            raise FixtureError(
                path, f"{created!r} is not a calendar date", row.number, row.line, "created_on"
            ) from None
        require(path, row, "rows", regex.compile(r"0|[1-9][0-9]*"))
        require(path, row, "fingerprint", _SHA256)
    require_unique(path, rows, "artifact")
    frame = pd.DataFrame([row.values for row in rows], columns=list(METADATA_COLUMNS))
    frame["rows"] = frame["rows"].astype("int64")
    frame["created_on"] = pd.to_datetime(frame["created_on"], format="%Y-%m-%d").dt.date
    frame.attrs["lines"] = {row.values["artifact"]: row.line for row in rows}
    return frame


def check_against_metadata(path: Path, n_rows: int, metadata: pd.DataFrame) -> None:
    """Refuse ``path`` unless the metadata records its row count ``n_rows`` and its
    fingerprint."""
    meta_path = path.parent / METADATA_FILE
    matches = metadata.index[metadata["artifact"] == path.name]
    if len(matches) == 0:
        raise FixtureError(meta_path, f"has no row for {path.name}", column="artifact")
    position = int(matches[0])
    row_number = position + 1
    line = metadata.attrs.get("lines", {}).get(path.name)
    recorded_rows = int(metadata.at[position, "rows"])
    if recorded_rows != n_rows:
        raise FixtureError(
            meta_path,
            f"records {recorded_rows} rows for {path.name}, but the file has {n_rows} data rows",
            row_number, line, "rows",
        )
    actual = fingerprint(path)
    recorded = metadata.at[position, "fingerprint"]
    if actual != recorded:
        raise FixtureError(
            meta_path,
            f"fingerprint of {path.name} does not match: recorded {recorded[:12]}..., "
            f"file has {actual[:12]}... The file changed since the metadata was written; "
            f"if the edit was deliberate, run `python -m runtime data update-metadata "
            f"{path.name}`",
            row_number, line, "fingerprint",
        )


def handbook_rows(path: Path) -> list[Row]:
    """The handbook file's rows, each value checked (no metadata check)."""
    rows = read_rows(path, HANDBOOK_COLUMNS)
    for row in rows:
        require(path, row, "passage_id", _ID)
        for column in ("topic", "text", "source"):
            require(path, row, column)
    require_unique(path, rows, "passage_id")
    return rows


def load_handbook(
    data_dir: str | os.PathLike = DATA_DIR, metadata: pd.DataFrame | None = None
) -> pd.DataFrame:
    """The handbook passages, validated and checked against the metadata."""
    path = Path(data_dir) / HANDBOOK_FILE
    rows = handbook_rows(path)
    if metadata is None:
        metadata = read_metadata(data_dir)
    check_against_metadata(path, len(rows), metadata)
    return pd.DataFrame([row.values for row in rows], columns=list(HANDBOOK_COLUMNS))


def split_answers(text: str) -> tuple[str, ...]:
    """Acceptable answers are stored joined by ``|``; an empty field means none."""
    return tuple(text.split("|")) if text else ()


def question_rows(path: Path, passage_ids: set[str]) -> list[Row]:
    """A question file's rows, each value checked against ``passage_ids`` (no metadata check)."""
    rows = read_rows(path, QUESTION_COLUMNS)
    for row in rows:
        require(path, row, "question_id", _ID)
        require(path, row, "question")
        require(path, row, "probe_type")
        action = require(path, row, "expected_action", choices=ACTIONS)
        gold = row.values["gold_passage_id"]
        answers = row.values["acceptable_answers"]
        if action == "abstain" and gold:
            raise FixtureError(
                path, "an abstain question has no gold passage; leave it empty", row.number,
                row.line, "gold_passage_id",
            )
        if action != "abstain":
            require(path, row, "gold_passage_id")
            if gold not in passage_ids:
                raise FixtureError(
                    path, f"gold passage {gold!r} is not in the handbook", row.number,
                    row.line, "gold_passage_id",
                )
        if action == "answer":
            require(path, row, "acceptable_answers")
            for variant in split_answers(answers):
                if not variant.strip():
                    raise FixtureError(
                        path, "has an empty answer variant between | separators",
                        row.number, row.line, "acceptable_answers",
                    )
        elif answers:
            raise FixtureError(
                path, f"a {action!r} question takes no acceptable answers; leave it empty",
                row.number, row.line, "acceptable_answers",
            )
    require_unique(path, rows, "question_id")
    return rows


def load_questions(
    name: str = QUESTIONS_FILE,
    data_dir: str | os.PathLike = DATA_DIR,
    handbook: pd.DataFrame | None = None,
    metadata: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """A question file, validated against the handbook and the metadata.

    Missing gold passages are ``None``; ``acceptable_list`` holds the variants as a tuple.
    """
    data_dir = Path(data_dir)
    if metadata is None:
        metadata = read_metadata(data_dir)
    if handbook is None:
        handbook = load_handbook(data_dir, metadata)
    path = data_dir / name
    rows = question_rows(path, set(handbook["passage_id"]))
    check_against_metadata(path, len(rows), metadata)
    frame = pd.DataFrame([row.values for row in rows], columns=list(QUESTION_COLUMNS))
    frame["gold_passage_id"] = pd.Series(
        [row.values["gold_passage_id"] or None for row in rows], dtype=object
    )
    frame["acceptable_list"] = pd.Series(
        [split_answers(row.values["acceptable_answers"]) for row in rows], dtype=object
    )
    return frame


@dataclass(frozen=True)
class Fixture:
    """The handbook, one question set and the metadata, loaded together."""

    handbook: pd.DataFrame
    questions: pd.DataFrame
    metadata: pd.DataFrame


def load_riverton(
    data_dir: str | os.PathLike = DATA_DIR, questions: str = QUESTIONS_FILE
) -> Fixture:
    """Load the handbook, a question file and the metadata, checking all three."""
    metadata = read_metadata(data_dir)
    handbook = load_handbook(data_dir, metadata)
    question_frame = load_questions(questions, data_dir, handbook, metadata)
    return Fixture(handbook, question_frame, metadata)


# --- the attack fixture (lesson 5) ---------------------------------------------------


def _require_marked(path: Path, row: Row, column: str) -> None:
    value = require(path, row, column)
    if ATTACK_MARK not in value.lower():
        raise FixtureError(
            path, f"must say that the row is {ATTACK_MARK!r}; found {value!r}", row.number,
            row.line, column,
        )


def _attack_passage_rows(path: Path, handbook: dict[str, str]) -> list[Row]:
    """Validate the planted passages against the handbook (``{passage_id: text}``)."""
    rows = read_rows(path, ATTACK_PASSAGE_COLUMNS)
    for row in rows:
        provenance = require(path, row, "provenance", choices=tuple(ATTACK_PROVENANCE_PREFIX))
        prefix = ATTACK_PROVENANCE_PREFIX[provenance]
        passage_id = require(path, row, "passage_id", regex.compile(r"[PS][0-9]{2}"))
        if not passage_id.startswith(prefix):
            raise FixtureError(
                path, f"a {provenance} passage's ID starts with {prefix!r}, not {passage_id[0]!r}",
                row.number, row.line, "passage_id",
            )
        if passage_id in handbook:
            raise FixtureError(
                path, f"ID {passage_id!r} is a handbook passage ID", row.number, row.line,
                "passage_id",
            )
        require(path, row, "topic")
        text = require(path, row, "text")
        for handbook_id, handbook_text in handbook.items():
            if text in handbook_text or handbook_text in text:
                raise FixtureError(
                    path, f"the text overlaps handbook passage {handbook_id}; an attack "
                    "passage must never repeat or be repeated in the handbook",
                    row.number, row.line, "text",
                )
        _require_marked(path, row, "source")
    require_unique(path, rows, "passage_id")
    return rows


def _attack_question_rows(path: Path, handbook_ids: set[str],
                          planted: dict[str, str]) -> list[Row]:
    """Validate the attack questions against the handbook IDs and the planted passages."""
    rows = read_rows(path, ATTACK_QUESTION_COLUMNS)
    for row in rows:
        require(path, row, "attack_id", regex.compile(r"A[0-9]{2}"))
        kind = require(path, row, "kind", choices=ATTACK_KINDS)
        question = require(path, row, "question")
        planted_field = row.values["planted_ids"]
        planted_ids = tuple(planted_field.split("|")) if planted_field else ()
        for passage_id in planted_ids:
            if passage_id not in planted:
                raise FixtureError(
                    path, f"planted passage {passage_id!r} is not in {ATTACK_PASSAGES_FILE}",
                    row.number, row.line, "planted_ids",
                )
        if len(set(planted_ids)) != len(planted_ids):
            raise FixtureError(path, "a planted ID repeats", row.number, row.line, "planted_ids")
        if kind == "instructions in the question" and planted_ids:
            raise FixtureError(
                path, "an attack carried by the question plants no passage; leave it empty",
                row.number, row.line, "planted_ids",
            )
        if kind != "instructions in the question" and not planted_ids:
            raise FixtureError(
                path, f"a {kind!r} attack needs at least one planted passage", row.number,
                row.line, "planted_ids",
            )
        require(path, row, "sensitive_topic", choices=SENSITIVE_TOPICS)
        payload = require(path, row, "payload")
        carriers = [question] if not planted_ids else [planted[p] for p in planted_ids]
        if not any(payload in text for text in carriers):
            where = "the question" if not planted_ids else "planted passage " + ", ".join(planted_ids)
            raise FixtureError(
                path, f"the payload {payload!r} does not occur in {where}", row.number,
                row.line, "payload",
            )
        require(path, row, "success_behaviour")
        try:
            rule = parse_rule(require(path, row, "success_rule"))
        except RuleError as error:
            raise FixtureError(path, str(error), row.number, row.line, "success_rule") from None
        missing = [c for c in rule.canaries if c not in payload]
        if missing:
            raise FixtureError(
                path, f"the rule's canary {missing[0]!r} is not in the payload; a canary is "
                "written into the attack's own words", row.number, row.line, "success_rule",
            )
        if kind == "overrides the format" and (not rule.canaries or rule.join != "all"
                                                 and len(rule.terms) > 1):
            raise FixtureError(
                path, "a format attack succeeds only when its canary appears: its rule must "
                "require a canary term (joined with ' & ' to any other)", row.number,
                row.line, "success_rule",
            )
        for passage_id in rule.cited_ids:
            if passage_id not in handbook_ids and passage_id not in planted:
                raise FixtureError(
                    path, f"the rule cites {passage_id!r}, which is in neither the handbook "
                    "nor the planted passages", row.number, row.line, "success_rule",
                )
        require(path, row, "expected_handling")
        _require_marked(path, row, "source")
    require_unique(path, rows, "attack_id")
    return rows


def _overlapping_handbook(text: str, handbook: dict[str, str]) -> str | None:
    """The first handbook passage that ``text`` repeats or is repeated in, if any."""
    for handbook_id, handbook_text in handbook.items():
        if text in handbook_text or handbook_text in text:
            return handbook_id
    return None


def _attack_wording_rows(path: Path, handbook: dict[str, str], attacks: list[Row],
                         planted: dict[str, str]) -> list[Row]:
    """Validate the further wordings of each attack against its own row.

    A wording replaces the attack's one planted passage (its text, the payload in it) or,
    for an attack carried by the question, the whole question; taken out, the payload
    must leave the question of the attack's own row, so that every wording is paired
    with the same run without the attack.
    """
    rows = read_rows(path, ATTACK_WORDING_COLUMNS)
    by_id = {row.values["attack_id"]: row.values for row in attacks}
    seen_texts = {(values["question"] if not values["planted_ids"] else
                   planted[values["planted_ids"]]): values["attack_id"]
                  for values in by_id.values() if "|" not in values["planted_ids"]}
    for row in rows:
        wording_id = require(path, row, "wording_id", regex.compile(r"A[0-9]{2}-[0-9]+"))
        attack_id = require(path, row, "attack_id", choices=tuple(by_id))
        prefix, _, number = wording_id.partition("-")
        if prefix != attack_id:
            raise FixtureError(path, f"wording {wording_id!r} is not named after its attack "
                               f"{attack_id!r}", row.number, row.line, "wording_id")
        if int(number) < 2:
            raise FixtureError(path, f"wording 1 of {attack_id} is its row in "
                               f"{ATTACK_QUESTIONS_FILE}; number the others from 2",
                               row.number, row.line, "wording_id")
        attack = by_id[attack_id]
        if "|" in attack["planted_ids"]:
            raise FixtureError(path, f"{attack_id} plants several passages; a wording "
                               "replaces an attack's one planted passage", row.number,
                               row.line, "attack_id")
        text = require(path, row, "text")
        payload = require(path, row, "payload")
        if payload not in text:
            raise FixtureError(path, f"the payload {payload!r} does not occur in the text",
                               row.number, row.line, "payload")
        rule = parse_rule(attack["success_rule"])
        missing = [c for c in rule.canaries if c not in payload]
        if missing:
            raise FixtureError(path, f"the payload lacks the attack's canary {missing[0]!r}",
                               row.number, row.line, "payload")
        if attack["planted_ids"]:
            overlap = _overlapping_handbook(text, handbook)
            if overlap:
                raise FixtureError(path, f"the text overlaps handbook passage {overlap}; an "
                                   "attack passage must never repeat or be repeated in the "
                                   "handbook", row.number, row.line, "text")
        else:
            asked = without_payload(attack["question"], attack["payload"])
            if without_payload(text, payload) != asked:
                raise FixtureError(path, f"without its payload the question must be {asked!r}, "
                                   f"the one {attack_id} asks without the attack",
                                   row.number, row.line, "text")
        if text in seen_texts:
            raise FixtureError(path, f"the text repeats a wording of {seen_texts[text]}",
                               row.number, row.line, "text")
        seen_texts[text] = attack_id
        _require_marked(path, row, "source")
    require_unique(path, rows, "wording_id")
    return rows


def _check_wording_counts(path: Path, attacks: list[Row], wordings: list[Row]) -> None:
    counts = {row.values["attack_id"]: 1 for row in attacks}
    for row in wordings:
        counts[row.values["attack_id"]] += 1
    few = [attack for attack, n in counts.items() if n < MIN_WORDINGS]
    if few:
        raise FixtureError(path, f"{few[0]} has {counts[few[0]]} wording(s), its own row "
                           f"included; lesson 5 needs at least {MIN_WORDINGS} of every attack",
                           column="attack_id")


def _attack_evasion_rows(path: Path, attacks: list[Row]) -> list[Row]:
    """Validate the evasions: each rewords a routed attack question in a known style."""
    rows = read_rows(path, ATTACK_EVASION_COLUMNS)
    by_id = {row.values["attack_id"]: row.values for row in attacks}
    routed = tuple(a for a, values in by_id.items() if values["sensitive_topic"] != "none")
    for row in rows:
        require(path, row, "evasion_id", regex.compile(r"E[0-9]{2}"))
        attack_id = require(path, row, "attack_id", choices=tuple(by_id))
        if attack_id not in routed:
            raise FixtureError(path, f"{attack_id} names no sensitive topic, so no rule routes "
                               f"it and there is nothing to evade; use one of "
                               f"{', '.join(routed)}", row.number, row.line, "attack_id")
        require(path, row, "style", choices=EVASION_STYLES)
        question = require(path, row, "question")
        if question == by_id[attack_id]["question"]:
            raise FixtureError(path, f"the question is {attack_id}'s own, not an evasion",
                               row.number, row.line, "question")
        _require_marked(path, row, "source")
    require_unique(path, rows, "evasion_id")
    require_unique(path, rows, "question")
    return rows


def _attack_rows(data_dir: Path, handbook: dict[str, str],
                 metadata: pd.DataFrame | None = None) -> dict[str, list[Row]]:
    """Every attack file's rows, validated together, by file name; with ``metadata``, each
    file is checked against its metadata row as soon as it is read, before the files that
    depend on it."""
    def checked(name, rows):
        if metadata is not None:
            check_against_metadata(data_dir / name, len(rows), metadata)
        return rows

    passages = checked(ATTACK_PASSAGES_FILE,
                       _attack_passage_rows(data_dir / ATTACK_PASSAGES_FILE, handbook))
    planted = {row.values["passage_id"]: row.values["text"] for row in passages}
    questions = checked(ATTACK_QUESTIONS_FILE, _attack_question_rows(
        data_dir / ATTACK_QUESTIONS_FILE, set(handbook), planted))
    wordings_path = data_dir / ATTACK_WORDINGS_FILE
    wordings = _attack_wording_rows(wordings_path, handbook, questions, planted)
    _check_wording_counts(wordings_path, questions, wordings)
    checked(ATTACK_WORDINGS_FILE, wordings)
    evasions = checked(ATTACK_EVASIONS_FILE,
                       _attack_evasion_rows(data_dir / ATTACK_EVASIONS_FILE, questions))
    return {ATTACK_PASSAGES_FILE: passages, ATTACK_QUESTIONS_FILE: questions,
            ATTACK_WORDINGS_FILE: wordings, ATTACK_EVASIONS_FILE: evasions}


#: The header of each attack file.
ATTACK_HEADERS = {
    ATTACK_PASSAGES_FILE: ATTACK_PASSAGE_COLUMNS,
    ATTACK_QUESTIONS_FILE: ATTACK_QUESTION_COLUMNS,
    ATTACK_WORDINGS_FILE: ATTACK_WORDING_COLUMNS,
    ATTACK_EVASIONS_FILE: ATTACK_EVASION_COLUMNS,
}


def attack_artifact_rows(path: Path, header: tuple[str, ...]) -> int:
    """The rows of an attack file (its ``header`` says which), each value checked."""
    handbook = {row.values["passage_id"]: row.values["text"]
                for row in handbook_rows(path.parent / HANDBOOK_FILE)}
    name = {columns: name for name, columns in ATTACK_HEADERS.items()}[header]
    return len(_attack_rows(path.parent, handbook)[name])


@dataclass(frozen=True)
class AttackFixture:
    """Lesson 5's planted passages, attack questions, wordings and evasions, validated
    together. ``wordings`` holds every wording of every attack, its own row's first."""

    passages: pd.DataFrame
    questions: pd.DataFrame
    wordings: pd.DataFrame
    evasions: pd.DataFrame


def _all_wordings(questions: pd.DataFrame, passages: pd.DataFrame,
                  further: list[Row]) -> pd.DataFrame:
    """Wording 1 of each attack (its own row), then the further ones, attack by attack."""
    planted = dict(zip(passages["passage_id"], passages["text"]))
    rows = []
    for attack in questions.itertuples(index=False):
        text = planted[attack.planted_ids[0]] if attack.planted_ids else attack.question
        rows.append({"wording_id": f"{attack.attack_id}-1", "attack_id": attack.attack_id,
                     "wording": 1, "text": text, "payload": attack.payload,
                     "source": attack.source, "author_note": attack.author_note})
        for row in further:
            if row.values["attack_id"] == attack.attack_id:
                rows.append({**row.values,
                             "wording": int(row.values["wording_id"].partition("-")[2])})
    columns = ["wording_id", "attack_id", "wording", "text", "payload", "source", "author_note"]
    return pd.DataFrame(rows, columns=columns)


def load_attack_fixture(
    data_dir: str | os.PathLike = DATA_DIR,
    handbook: pd.DataFrame | None = None,
    metadata: pd.DataFrame | None = None,
) -> AttackFixture:
    """The attack fixture of lesson 5, "The attacks, written down first".

    Every file is validated like the rest of the fixture (file, row, line and column in
    every error) and checked against its metadata row and fingerprint. Planted passages
    have IDs ``P01``..., superseded ones ``S01``..., never a handbook ID, and every row
    says it is invented attack text for teaching. ``planted_ids`` becomes a tuple;
    ``success_rule`` is checked by :func:`helpers.attack_rules.parse_rule`, and a canary
    it names must be in the payload. Every attack has at least :data:`MIN_WORDINGS`
    wordings; each evasion rewords a routed attack question in one of
    :data:`helpers.attack_rules.EVASION_STYLES`.
    """
    data_dir = Path(data_dir)
    if metadata is None:
        metadata = read_metadata(data_dir)
    if handbook is None:
        handbook = load_handbook(data_dir, metadata)
    texts = dict(zip(handbook["passage_id"], handbook["text"]))
    found = _attack_rows(data_dir, texts, metadata)
    frames = {name: pd.DataFrame([row.values for row in rows], columns=list(ATTACK_HEADERS[name]))
              for name, rows in found.items()}
    questions = frames[ATTACK_QUESTIONS_FILE]
    questions["planted_ids"] = pd.Series(
        [tuple(v.split("|")) if v else () for v in questions["planted_ids"]], dtype=object
    )
    passages = frames[ATTACK_PASSAGES_FILE]
    return AttackFixture(passages, questions,
                         _all_wordings(questions, passages, found[ATTACK_WORDINGS_FILE]),
                         frames[ATTACK_EVASIONS_FILE])
