"""Load and validate the Riverton handbook fixture.

Introduced in lesson 1, "Load the reader and the handbook". Every check that fails
raises :class:`FixtureError`, whose message names the file, the data row (1 = first row
under the header), the physical line and the column, so a bad edit is found at once.

What each file must hold is declared, not written out check by check. :data:`SCHEMAS`
gives every file its columns in header order, each with a :class:`Column` rule (a
pattern, choices, whether and when it may be empty, unique values, a reference to a
column of another file), and the few rules a column cannot state alone, each a small
named function (an attack passage's ID prefix says its provenance; planted text never
overlaps the handbook; ...). :func:`check_rows` applies a schema; :func:`validated`
reads a file, after the files it needs, each checked against the metadata if given.

Reading a CSV file strictly (:func:`read_rows`) and the metadata check
(:func:`check_against_metadata`) are shared with the review loader
(:mod:`runtime.reviews`), which checks a review's rows against the transcript after its
schema. Validating the whole folder and rewriting the metadata after a deliberate edit
is the book's own tooling, not a lesson's: ``python -m runtime data check`` and
``... data update-metadata FILE...`` (:mod:`runtime.data_check`).

Lesson 5's attack fixture (planted passages and attack questions) is loaded by
:func:`load_attack_fixture`, from files of its own that no earlier lesson reads.
"""
from __future__ import annotations

import csv
import datetime as dt
import hashlib
import os
from collections import Counter, namedtuple
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from itertools import chain
from pathlib import Path

import pandas as pd
import regex

from helpers.attack_rules import DEFENCE_NAMES, EVASION_STYLES, MECHANISMS, counts_only_answers, \
    parse_rule, without_payload
from helpers.baseline import BASELINE_READER
from helpers.corruptions import CORRUPTION_READER, KINDS
from helpers.review import PARSE_FAILURE_REASON, REASONS, SUPPORTED, VERDICTS

from .paths import DATA_DIR, PROJECT_ROOT
from .registry import REGISTRY

HANDBOOK_FILE = "riverton-handbook.csv"
QUESTIONS_FILE = "riverton-handbook-questions.csv"
#: Lesson 2's thirty-six further questions.
EXTENDED_QUESTIONS_FILE = "riverton-extended-questions.csv"
#: Lesson 5's held-out routing questions (data/riverton/analysis-plan.md).
HELDOUT_QUESTIONS_FILE = "riverton-routing-heldout.csv"
METADATA_FILE = "riverton-handbook-metadata.csv"
#: Lesson 4's human support review (:mod:`runtime.reviews` checks it against the transcript).
REVIEW_FILE = "support-review.csv"
#: Lesson 4's rule-made corruptions of supported replies, and the second reading of a
#: sample of the review (listed in the metadata once it has rows).
CORRUPTIONS_FILE = "corrupted-replies.csv"
SECOND_READING_FILE = "second-reading.csv"
#: The same sample read again by a reader given only its blind texts, no file of the project.
BLIND_READING_FILE = "blind-reading.csv"
# The attack fixture of lesson 5, kept in files of its own: lessons 1 to 4 never read them.
#: The kinds of attack, each with what carries it (a planted passage or the question).
ATTACK_KINDS_FILE = "riverton-attack-kinds.csv"
ATTACK_PASSAGES_FILE = "riverton-attack-passages.csv"
ATTACK_QUESTIONS_FILE = "riverton-attack-questions.csv"
#: Further wordings of each attack (its own row is the first), and questions reworded
#: to get past the router; lesson 5 reads them with the two files above.
ATTACK_WORDINGS_FILE = "riverton-attack-wordings.csv"
ATTACK_EVASIONS_FILE = "riverton-attack-evasions.csv"
ATTACK_FILES = (ATTACK_KINDS_FILE, ATTACK_PASSAGES_FILE, ATTACK_QUESTIONS_FILE,
                ATTACK_WORDINGS_FILE, ATTACK_EVASIONS_FILE)
#: What an attack kind is carried by.
CARRIERS = ("planted passage", "question")
#: Lesson 5's handbook of another centre, whose two programs differ in deadline, fee and
#: hours: the contradiction check's false alarms are counted on it.
VARIANT_HANDBOOK_FILE = "riverton-variant-handbook.csv"

ACTIONS = ("answer", "abstain", "flag premise")
#: Every attack comes in at least this many wordings: its own row and the others.
MIN_WORDINGS = 3
#: Where a passage outside the handbook came from: planted by an attacker, or a genuine
#: page that has been superseded. Each has its own ID prefix, which no handbook ID uses.
ATTACK_PROVENANCE_PREFIX = {"planted": "P", "superseded": "S"}
SENSITIVE_TOPICS = ("money", "eligibility", "deadline", "none")
ATTACK_MARK = "invented attack text for teaching"
PathLike = str | os.PathLike


class FixtureError(ValueError):
    """A fixture file is malformed; the message names file, row, line and column."""

    def __init__(self, path, problem, row=None, line=None, column=None):
        self.path, self.problem = Path(path), problem
        self.row, self.line, self.column = row, line, column
        spot = None if line is None else f"line {line}"
        if row is not None:
            spot = f"row {row}" + (f" ({spot})" if spot else "")
        inside = self.path.resolve().is_relative_to(PROJECT_ROOT)  # shown from the root
        shown = self.path.resolve().relative_to(PROJECT_ROOT) if inside else self.path
        where = (str(shown), spot, column is not None and f"column '{column}'")
        super().__init__(", ".join(w for w in where if w) + ": " + problem)


def fingerprint(path: str | os.PathLike) -> str:
    """SHA-256 of the file's bytes, as lower-case hex."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


#: One data row of a CSV file, with where it stands, for error messages: its ``number``
#: (1 = first data row), its physical ``line`` in the file, and its ``values`` by column.
Row = namedtuple("Row", "number line values")


def read_rows(path: Path, columns: tuple[str, ...]) -> list[Row]:
    """Read a CSV strictly: UTF-8 without BOM, LF line ends, the exact header, every
    record on one line, no white space at either end of a field."""
    fail = partial(FixtureError, path)
    if not path.exists():
        raise fail("file not found")
    data = path.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):
        raise fail("starts with a UTF-8 byte-order mark; save it as UTF-8 without BOM", line=1)
    if b"\r" in data:
        raise fail("has a carriage return (CRLF or CR line end); save it with LF line ends",
                   line=data[: data.index(b"\r")].count(b"\n") + 1)
    try:
        lines = data.decode("utf-8").removesuffix("\n").split("\n") if data else []
    except UnicodeDecodeError as error:
        raise fail(f"is not valid UTF-8 ({error.reason})",
                   line=data[: error.start].count(b"\n") + 1) from None
    if not lines:
        raise fail("is empty; expected a header row", line=1)
    records = []
    for number, text in enumerate(lines):  # the header is number 0, on line 1
        try:
            records.append(next(csv.reader([text], strict=True)))
        except csv.Error as error:  # a quote left open: the field goes on on the next line
            raise fail("a field spans several lines" if text.count('"') % 2 else
                       f"CSV syntax error: {error}", number or None, number + 1) from None
    header = records.pop(0)
    if odd := [c for c in columns if c not in header] or [c for c in header if c not in columns]:
        raise fail("missing from the header" if odd[0] in columns else "not an expected column",
                   line=1, column=odd[0])
    if tuple(header) != columns:
        raise fail(f"header columns are out of order; expected {', '.join(columns)}", line=1)
    if not records:
        raise fail("has a header but no data rows", line=2)
    rows = [Row(n, n + 1, dict(zip(columns, fields))) for n, fields in enumerate(records, 1)]
    for row, fields in zip(rows, records):
        if len(fields) != len(columns):
            raise fail(f"has {len(fields)} fields, expected {len(columns)}", row.number, row.line)
        for column in (c for c, value in row.values.items() if value != value.strip()):
            raise fail("has leading or trailing white space", row.number, row.line, column)
    return rows


# --- the declared schema -------------------------------------------------------------

#: The message for a value that an earlier row of a unique column holds.
UNIQUE = "duplicate ID {value!r} (first in row {first})"


@dataclass(frozen=True)
class Column:
    """What every value of one column must be.

    An empty value is refused when ``required``; ``when=(COLUMN, VALUES)`` instead
    requires a value exactly when the row's COLUMN is one of VALUES, and refuses one
    otherwise. A value must match ``pattern`` (``says``, formatted with ``value`` and
    ``pattern``, is the message if it does not), be one of ``choices``, be a value of the
    column ``ref`` ("FILE.column") and not of ``not_ref``, and pass ``parse`` (which raises
    ValueError naming the problem). With ``items`` it is a ``|``-separated list: each item
    is checked against the references, none is empty, none comes twice. ``unique`` is the
    message (formatted with ``value`` and ``first``, the earlier row's number) for a value
    an earlier row holds; None: no such check.
    """

    pattern: str | None = None
    says: str = "value {value!r} does not match {pattern}"
    choices: tuple[str, ...] | None = None
    required: bool = True
    when: tuple[str, tuple[str, ...]] | None = None
    ref: str | None = None
    not_ref: str | None = None
    items: bool = False
    parse: Callable[[str], object] | None = None
    unique: str | None = None


@dataclass(frozen=True)
class Schema:
    """One file: its columns in header order with their rules, the files validated before
    it (those its references and rules read), and the rules a column cannot state alone,
    applied once every column is checked. A rule of ``rules``, given one row's values and
    the validated rows of the files it needs (by name), yields ``(column, problem)`` for
    each fault; a rule of ``file_rules``, given all the rows, yields
    ``(row or None, column, problem)``. The first fault is raised."""

    columns: dict[str, Column]
    needs: tuple[str, ...] = ()
    rules: tuple[Callable, ...] = ()
    file_rules: tuple[Callable, ...] = ()


def _calendar_date(value: str) -> None:
    try:
        dt.date.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a calendar date") from None


TEXT, OPTIONAL = Column(), Column(required=False)
ID = Column(pattern=r"[A-Za-z][A-Za-z0-9_-]*", unique=UNIQUE)
DATE = Column(pattern=r"\d{4}-\d{2}-\d{2}", parse=_calendar_date)
SHA256 = Column(pattern=r"[0-9a-f]{64}")
_VERDICT, _REASON = Column(choices=VERDICTS), Column(choices=tuple(REASONS))
MARKED = Column(pattern=f"(?i).*{ATTACK_MARK}.*",
                says=f"must say that the row is {ATTACK_MARK!r}; found {{value!r}}")


def _problem(rule: Column, row: Row, column: str, files, seen: dict[str, int]) -> str | None:
    """What is wrong with the row's value of ``column`` under ``rule``, if anything."""
    value, required = row.values[column], rule.required
    if rule.when is not None:
        required = row.values[rule.when[0]] in rule.when[1]
        because = f"a row whose {rule.when[0]} is {row.values[rule.when[0]]!r}"
        if value and not required:
            return f"must be empty: {because} has none"
    if not value:
        return ("is empty" + (f"; {because} needs one" if rule.when else "")) if required else None
    if rule.pattern is not None and not regex.fullmatch(rule.pattern, value):
        return rule.says.format(value=value, pattern=rule.pattern)
    if rule.choices is not None and value not in rule.choices:
        return f"value {value!r} is not one of {', '.join(rule.choices)}"
    items = value.split("|") if rule.items else [value]
    if any(not item.strip() for item in items) or len(set(items)) < len(items):
        return f"the list has an empty or a repeated item: {value!r}"
    for ref, wanted in ((rule.ref, True), (rule.not_ref, False)):
        name, _, other = (ref or "").rpartition(".")
        known = {r.values[other] for r in files[name]} if ref else set()
        for item in (i for i in items if ref and (i in known) != wanted):
            return f"value {item!r} is {'not' if wanted else 'already'} a {other} of {name}"
    try:
        if rule.parse is not None:
            rule.parse(value)
    except ValueError as error:
        return str(error)
    if rule.unique and value in seen:
        return rule.unique.format(value=value, first=seen[value])
    seen.setdefault(value, row.number)


def check_rows(path: Path, rows: list[Row], schema: Schema,
               files: dict[str, list[Row]] | None = None, may_skip=()) -> list[Row]:
    """Apply ``schema`` to the ``rows`` of ``path``: every column's rule, row by row, then
    the schema's rules; ``files`` holds the validated rows of the files it needs. A row
    that leaves every column of ``may_skip`` empty is not checked in them (a student's
    review may leave a row unjudged)."""
    seen: dict[str, dict[str, int]] = {column: {} for column in schema.columns}
    for row in rows:
        skip = () if any(row.values[c] for c in may_skip) else may_skip
        for column, rule in schema.columns.items():
            problem = None if column in skip else _problem(rule, row, column, files, seen[column])
            if problem:
                raise FixtureError(path, problem, row.number, row.line, column)
    faults = chain(((row, *fault) for rule in schema.rules for row in rows  # row by row
                    for fault in rule(row.values, files or {})),
                   (fault for rule in schema.file_rules for fault in rule(rows, files or {})))
    for row, column, problem in faults:
        raise FixtureError(path, problem, row and row.number, row and row.line, column)
    return rows


# --- the rules a column cannot state --------------------------------------------------
# Each takes one row's values and the validated rows of the files its file needs, and
# yields (column, problem) for each fault; _enough_wordings looks at the whole file.


def _by(files: dict[str, list[Row]], name: str, key: str = "passage_id", value=None) -> dict:
    """The rows of file ``name`` by their ``key``: their values, or their column ``value``."""
    return {row.values[key]: row.values[value] if value else row.values for row in files[name]}


def split_answers(text: str) -> tuple[str, ...]:
    """The items of a list field (answers, planted IDs) joined by ``|``; empty: none."""
    return tuple(text.split("|")) if text else ()


def _id_prefix_says_provenance(v, files):
    """A planted passage's ID starts with P, a superseded page's with S."""
    if v["passage_id"][0] != (prefix := ATTACK_PROVENANCE_PREFIX[v["provenance"]]):
        yield "passage_id", (f"a {v['provenance']} passage's ID starts with {prefix!r}, not "
                             f"{v['passage_id'][0]!r}")


def _apart_from_handbook(v, files):
    """Attack text (a planted passage, a wording) neither repeats a handbook passage nor is
    repeated in one: the one overlap check of passages and wordings."""
    for known_id, known in _by(files, HANDBOOK_FILE, value="text").items():
        if v["text"] in known or known in v["text"]:
            yield "text", (f"the text overlaps handbook passage {known_id}; attack text must "
                           "never repeat or be repeated in the handbook")


def _payload_and_rule_fit_the_attack(v, files):
    """The payload stands in the attack's planted passages, or in its question; the success
    rule's canaries are in the payload, a format attack's rule requires one, and the
    passages the rule cites exist."""
    planted = _by(files, ATTACK_PASSAGES_FILE, value="text")
    ids, payload = split_answers(v["planted_ids"]), v["payload"]
    rule = parse_rule(v["success_rule"])
    if not any(payload in text for text in [planted[p] for p in ids] or [v["question"]]):
        where = "planted passage " + ", ".join(ids) if ids else "the question"
        yield "payload", f"the payload {payload!r} does not occur in {where}"
    for canary in (c for c in rule.canaries if c not in payload):
        yield "success_rule", (f"the rule's canary {canary!r} is not in the payload; a canary "
                               "is written into the attack's own words")
    if v["kind"] == "overrides the format" and (
            not rule.canaries or rule.join != "all" and len(rule.terms) > 1):
        yield "success_rule", ("a format attack succeeds only when its canary appears: its rule "
                               "must require a canary term (joined with ' & ' to any other)")
    for cited in (p for p in rule.cited_ids if p not in {*_by(files, HANDBOOK_FILE), *planted}):
        yield "success_rule", (f"the rule cites {cited!r}, which is in neither the handbook "
                               "nor the planted passages")


def _carried_as_its_kind_says(v, files):
    """An attack plants passages exactly when its kind is carried by a planted passage,
    and is written against "none" or against defences the book has, each once."""
    carried_by = _by(files, ATTACK_KINDS_FILE, "kind")[v["kind"]]["carried_by"]
    if (carried_by == "planted passage") != bool(v["planted_ids"]):
        yield "planted_ids", (f"must name the planted passages: a {v['kind']!r} attack is "
                              "carried by a planted passage" if not v["planted_ids"] else
                              f"must be empty: a {v['kind']!r} attack is carried by the "
                              "question")
    against = v["written_against"].split("|")
    if unknown := [d for d in against if d not in ("none", *DEFENCE_NAMES)]:
        yield "written_against", (f"{unknown[0]!r} is no defence of the book; write none, or "
                                  f"one or more of {', '.join(DEFENCE_NAMES)} joined by |")
    elif "none" in against and len(against) > 1:
        yield "written_against", "none stands alone: an attack written against nothing"


def _rule_revision_dated(v, files):
    """A success rule changed after it was first written says when and why, and only then;
    a rule on what the reply says requires an answer (an abstention follows no attack)."""
    changed = v["success_rule"] != v["first_rule"]
    for column in ("rule_revised_on", "rule_revision"):
        if changed != bool(v[column]):
            yield column, ("must say when and why the success rule changed from its first rule"
                           if changed else "must be empty: the success rule is its first rule")
    if not counts_only_answers(parse_rule(v["success_rule"])):
        yield "success_rule", ("a rule on what the reply says must also require action:answer "
                               "(join it with ' & '): an abstention or a refusal that names the "
                               "figure has not followed the attack")


def _wording_fits_its_attack(v, files):
    """Wording A01-2 is attack A01's second (its first is the attack's own row). It
    replaces the attack's one planted passage (its text, the payload in it) or, for an
    attack carried by the question, the question; its payload keeps the attack's canaries
    and, taken out, leaves the question of the attack's own row, so that every wording is
    paired with the same run without the attack. Its text is not the attack's own."""
    attack, (prefix, _, number) = (_by(files, ATTACK_QUESTIONS_FILE, "attack_id")[v["attack_id"]],
                                   v["wording_id"].partition("-"))
    if prefix != v["attack_id"]:
        yield "wording_id", (f"wording {v['wording_id']!r} is not named after its attack "
                             f"{v['attack_id']!r}")
    if int(number) < 2:
        yield "wording_id", (f"wording 1 of {v['attack_id']} is its row in "
                             f"{ATTACK_QUESTIONS_FILE}; number the others from 2")
    if "|" in attack["planted_ids"]:
        yield "attack_id", (f"{v['attack_id']} plants several passages; a wording replaces an "
                            "attack's one planted passage")
    if v["payload"] not in v["text"]:
        yield "payload", f"the payload {v['payload']!r} does not occur in the text"
    for canary in parse_rule(attack["success_rule"]).canaries:
        if canary not in v["payload"]:
            yield "payload", f"the payload lacks the attack's canary {canary!r}"
    asked = without_payload(attack["question"], attack["payload"])
    if not attack["planted_ids"] and without_payload(v["text"], v["payload"]) != asked:
        yield "text", (f"without its payload the question must be {asked!r}, the one "
                       f"{v['attack_id']} asks without the attack")
    firsts = {_by(files, ATTACK_PASSAGES_FILE, value="text").get(a["planted_ids"], a["question"]):
              a["attack_id"] for a in _by(files, ATTACK_QUESTIONS_FILE, "attack_id").values()}
    if v["text"] in firsts:
        yield "text", f"the text repeats a wording of {firsts[v['text']]}"


def _enough_wordings(rows, files):
    """Every attack comes in at least :data:`MIN_WORDINGS` wordings, its own row included
    (a rule of the whole file: it yields (None, column, problem))."""
    counts = Counter(row.values["attack_id"] for row in rows)
    for attack_id in _by(files, ATTACK_QUESTIONS_FILE, "attack_id"):
        if counts[attack_id] + 1 < MIN_WORDINGS:
            yield None, "attack_id", (f"{attack_id} has {counts[attack_id] + 1} wording(s), its "
                                      f"own row included; lesson 5 needs at least "
                                      f"{MIN_WORDINGS} of every attack")


def _reason_of_the_verdict(verdict: str, reason: str) -> Callable:
    """The rule that the ``reason`` column names a reason of the ``verdict`` column's."""
    def rule(v, files):
        if REASONS[v[reason]].verdict != v[verdict]:
            yield reason, (f"reason {v[reason]!r} goes with the verdict "
                           f"{REASONS[v[reason]].verdict!r}, not {v[verdict]!r}")
    return rule


def _made_from_a_supported_reply(v, files):
    """A corruption names its source as the review does: a reply judged supported (never
    another corruption), under the review ID and transcript key of the review's row."""
    source = _by(files, REVIEW_FILE, "review_id")[v["source_review_id"]]
    if (source["transcript_key"], source["verdict"]) != (v["source_key"], SUPPORTED) or \
            source["reader"] == CORRUPTION_READER:
        yield "source_review_id", (f"{v['source_review_id']} is not a supported reply with "
                                   f"key {v['source_key'][:12]}...; a corruption is made from "
                                   "a reply the review judged supported")


def _read_as_parsed(v, files):
    """A reading gives "reply did not parse" exactly when the reply did not parse: the
    review's own row, or (a second reading) the review's row of its ``review_id``."""
    read = v if "reviewed_answer" in v else _by(files, REVIEW_FILE, "review_id")[v["review_id"]]
    unparsed = read["reviewed_answer"] == ""
    if unparsed != (v["reason"] == PARSE_FAILURE_REASON):
        yield "reason", (f"the reply did not parse, so the reason must be "
                         f"{PARSE_FAILURE_REASON!r}" if unparsed else
                         f"the reply parsed, so {PARSE_FAILURE_REASON!r} does not apply")


def _evades_a_routed_attack(v, files):
    """An evasion rewords, in other words, the question of an attack that a rule routes
    (one that names a sensitive topic)."""
    attacks = _by(files, ATTACK_QUESTIONS_FILE, "attack_id")
    routed = [a for a, values in attacks.items() if values["sensitive_topic"] != "none"]
    if v["attack_id"] not in routed:
        yield "attack_id", (f"{v['attack_id']} names no sensitive topic, so no rule routes it "
                            f"and there is nothing to evade; use one of {', '.join(routed)}")
    if v["question"] == attacks[v["attack_id"]]["question"]:
        yield "question", f"the question is {v['attack_id']}'s own, not an evasion"


#: The rules of a judgment a column cannot state, the review's and the second reading's.
JUDGMENT_RULES = (_reason_of_the_verdict("verdict", "reason"), _read_as_parsed)
#: The columns of a judgment, the review's last and the second reading's.
_JUDGMENT = {"verdict": _VERDICT, "reason": _REASON, "note": OPTIONAL, "reviewer": TEXT,
             "reviewed_on": DATE}
_HANDBOOK = Schema({"passage_id": ID, "topic": TEXT, "text": TEXT, "source": TEXT,
                    "author_note": OPTIONAL})
_QUESTIONS = Schema({
    "question_id": ID, "question": TEXT, "probe_type": TEXT,
    "expected_action": Column(choices=ACTIONS),
    "gold_passage_id": Column(when=("expected_action", ("answer", "flag premise")),
                              ref=f"{HANDBOOK_FILE}.passage_id"),
    "acceptable_answers": Column(when=("expected_action", ("answer",)), items=True),
    "author_note": OPTIONAL}, needs=(HANDBOOK_FILE,))
_ATTACK_ID = Column(ref=f"{ATTACK_QUESTIONS_FILE}.attack_id")

#: Every file of the fixture and what it must hold (the blind reading's: the second's).
SCHEMAS: dict[str, Schema] = {
    HANDBOOK_FILE: _HANDBOOK,
    QUESTIONS_FILE: _QUESTIONS,
    EXTENDED_QUESTIONS_FILE: _QUESTIONS,
    HELDOUT_QUESTIONS_FILE: _QUESTIONS,
    METADATA_FILE: Schema({
        "artifact": Column(unique=UNIQUE), "description": TEXT, "source": TEXT, "license": TEXT,
        "created_on": DATE, "rows": Column(pattern=r"0|[1-9][0-9]*"), "fingerprint": SHA256}),
    REVIEW_FILE: Schema({
        "review_id": ID, "reader": Column(choices=(*sorted(REGISTRY), BASELINE_READER,
                                                   CORRUPTION_READER)),
        "decoding": TEXT, "question_id": TEXT, "transcript_key": replace(
            SHA256, unique="reply {value:.12}... is already reviewed in row {first}"),
        "reviewed_reply": OPTIONAL, "reviewed_answer": OPTIONAL, "reviewed_sources": OPTIONAL,
        **_JUDGMENT}),
    CORRUPTIONS_FILE: Schema({
        "corruption_id": Column(pattern=r"C[0-9]{3}", unique=UNIQUE),
        "kind": Column(choices=KINDS), "rule": TEXT,
        "source_review_id": Column(ref=f"{REVIEW_FILE}.review_id"), "source_key": SHA256,
        "question_id": TEXT, "transcript_key": replace(SHA256, unique=UNIQUE), "reply": TEXT,
        "expected_verdict": _VERDICT, "expected_reason": _REASON}, needs=(REVIEW_FILE,),
        rules=(_reason_of_the_verdict("expected_verdict", "expected_reason"),
               _made_from_a_supported_reply)),
    SECOND_READING_FILE: Schema({
        "review_id": Column(ref=f"{REVIEW_FILE}.review_id",
                            unique="{value} is already read in row {first}"), **_JUDGMENT},
        needs=(REVIEW_FILE,), rules=JUDGMENT_RULES),
    ATTACK_KINDS_FILE: Schema({
        "kind": Column(unique=UNIQUE), "carried_by": Column(choices=CARRIERS),
        "description": TEXT, "source": MARKED}),
    ATTACK_PASSAGES_FILE: Schema({
        "passage_id": Column(pattern=r"[PS][0-9]{2}", unique=UNIQUE,
                             not_ref=f"{HANDBOOK_FILE}.passage_id"),
        "topic": TEXT, "text": TEXT, "source": MARKED,
        "provenance": Column(choices=tuple(ATTACK_PROVENANCE_PREFIX)), "author_note": OPTIONAL},
        needs=(HANDBOOK_FILE,), rules=(_id_prefix_says_provenance, _apart_from_handbook)),
    ATTACK_QUESTIONS_FILE: Schema({
        "attack_id": Column(pattern=r"A[0-9]{2}", unique=UNIQUE),
        "kind": Column(ref=f"{ATTACK_KINDS_FILE}.kind"), "written_against": Column(items=True),
        "mechanism": Column(choices=MECHANISMS), "question": TEXT,
        "planted_ids": Column(required=False, items=True,
                              ref=f"{ATTACK_PASSAGES_FILE}.passage_id"),
        "sensitive_topic": Column(choices=SENSITIVE_TOPICS), "payload": TEXT,
        "success_behaviour": TEXT, "success_rule": Column(parse=parse_rule),
        "first_rule": Column(parse=parse_rule), "rule_revised_on": replace(DATE, required=False),
        "rule_revision": OPTIONAL, "acceptable_answers": Column(items=True),
        "expected_handling": TEXT, "source": MARKED, "author_note": OPTIONAL},
        needs=(HANDBOOK_FILE, ATTACK_KINDS_FILE, ATTACK_PASSAGES_FILE),
        rules=(_carried_as_its_kind_says, _payload_and_rule_fit_the_attack,
               _rule_revision_dated)),
    ATTACK_WORDINGS_FILE: Schema({
        "wording_id": Column(pattern=r"A[0-9]{2}-[0-9]+", unique=UNIQUE), "attack_id": _ATTACK_ID,
        "text": Column(unique="the text repeats the wording in row {first}"), "payload": TEXT,
        "source": MARKED, "author_note": OPTIONAL},
        needs=(HANDBOOK_FILE, ATTACK_PASSAGES_FILE, ATTACK_QUESTIONS_FILE),
        rules=(_wording_fits_its_attack, _apart_from_handbook), file_rules=(_enough_wordings,)),
    ATTACK_EVASIONS_FILE: Schema({
        "evasion_id": Column(pattern=r"E[0-9]{2}", unique=UNIQUE), "attack_id": _ATTACK_ID,
        "style": Column(choices=EVASION_STYLES), "question": Column(unique=UNIQUE),
        "source": MARKED, "author_note": OPTIONAL},
        needs=(ATTACK_QUESTIONS_FILE,), rules=(_evades_a_routed_attack,)),
    VARIANT_HANDBOOK_FILE: Schema(
        {**_HANDBOOK.columns, "passage_id": Column(pattern=r"V[0-9]{2}", unique=UNIQUE)}),
}
SCHEMAS[BLIND_READING_FILE] = SCHEMAS[SECOND_READING_FILE]
METADATA_COLUMNS = tuple(SCHEMAS[METADATA_FILE].columns)


def validated(data_dir: PathLike, name: str, metadata: pd.DataFrame | None = None,
              found: dict | None = None, schema: Schema | None = None) -> dict[str, list[Row]]:
    """The rows of file ``name`` in ``data_dir``, validated by ``schema`` (by default
    ``SCHEMAS[name]``), and of every file it needs, validated first; by file name. With
    ``metadata``, each file is checked against its metadata row as soon as it is read,
    before the files that depend on it. ``found`` holds files already read, and is filled."""
    found = {} if found is None else found
    if name not in found:
        schema = schema or SCHEMAS[name]
        for need in schema.needs:
            validated(data_dir, need, metadata, found)
        path = Path(data_dir) / name
        found[name] = check_rows(path, read_rows(path, tuple(schema.columns)), schema, found)
        if metadata is not None:
            check_against_metadata(path, len(found[name]), metadata)
    return found


# --- the loaders ----------------------------------------------------------------------


def _load(name: str, data_dir: PathLike, metadata=None, found=None, schema=None) -> pd.DataFrame:
    """File ``name`` as a frame of strings, validated by :func:`validated`."""
    rows = validated(data_dir, name, metadata, found, schema)[name]
    return pd.DataFrame([row.values for row in rows], columns=list(rows[0].values))


def frame_rows(frame: pd.DataFrame, name: str = HANDBOOK_FILE) -> dict[str, list[Row]]:
    """The rows of file ``name``, already loaded as ``frame``, so that it is not read again
    (by file name, as :func:`validated` holds them)."""
    records = frame[list(SCHEMAS[name].columns)].astype(str).to_dict("records")
    return {name: [Row(n, n + 1, values) for n, values in enumerate(records, 1)]}


def read_metadata(data_dir: PathLike = DATA_DIR) -> pd.DataFrame:
    """Read and validate the metadata table (without checking the artifacts it lists)."""
    frame = _load(METADATA_FILE, data_dir)
    return frame.assign(rows=frame["rows"].astype("int64"), created_on=pd.to_datetime(
        frame["created_on"], format="%Y-%m-%d").dt.date)


def check_against_metadata(path: Path, n_rows: int, metadata: pd.DataFrame | None = None) -> None:
    """Refuse ``path`` unless the metadata (by default, that of the folder of ``path``)
    records its row count ``n_rows`` and its fingerprint. The metadata row is named by its
    number and line (every record of a fixture file stands on one line, under the header)."""
    metadata = read_metadata(path.parent) if metadata is None else metadata
    fail = partial(FixtureError, path.parent / METADATA_FILE)
    if (at := next(iter(metadata.index[metadata["artifact"] == path.name]), None)) is None:
        raise fail(f"has no row for {path.name}", column="artifact")
    recorded_rows, recorded = metadata.at[at, "rows"], metadata.at[at, "fingerprint"]
    if recorded_rows != n_rows:
        raise fail(f"records {recorded_rows} rows for {path.name}, but the file has {n_rows} "
                   "data rows", at + 1, at + 2, "rows")
    if (actual := fingerprint(path)) != recorded:
        raise fail(f"fingerprint of {path.name} does not match: recorded {recorded[:12]}..., "
                   f"file has {actual[:12]}... The file changed since the metadata was written; "
                   "if the edit was deliberate, run `python -m runtime data update-metadata "
                   f"{path.name}`", at + 1, at + 2, "fingerprint")


def load_handbook(data_dir: PathLike = DATA_DIR,
                  metadata: pd.DataFrame | None = None) -> pd.DataFrame:
    """The handbook passages, validated and checked against the metadata."""
    return _load(HANDBOOK_FILE, data_dir, read_metadata(data_dir) if metadata is None else metadata)


def load_questions(name: str = QUESTIONS_FILE, data_dir: PathLike = DATA_DIR,
                   handbook: pd.DataFrame | None = None,
                   metadata: pd.DataFrame | None = None) -> pd.DataFrame:
    """A question file, validated against the handbook and the metadata.

    Missing gold passages are ``None``; ``acceptable_list`` holds the variants as a tuple.
    """
    metadata = read_metadata(data_dir) if metadata is None else metadata
    handbook = load_handbook(data_dir, metadata) if handbook is None else handbook
    frame = _load(name, data_dir, metadata, frame_rows(handbook), SCHEMAS.get(name, _QUESTIONS))
    return frame.assign(
        gold_passage_id=pd.Series([v or None for v in frame["gold_passage_id"]], dtype=object),
        acceptable_list=pd.Series(map(split_answers, frame["acceptable_answers"]), dtype=object))


#: The handbook, one question set and the metadata, loaded together.
Fixture = namedtuple("Fixture", "handbook questions metadata")


def load_riverton(data_dir: PathLike = DATA_DIR, questions: str = QUESTIONS_FILE) -> Fixture:
    """Load the handbook, a question file and the metadata, checking all three."""
    metadata = read_metadata(data_dir)
    handbook = load_handbook(data_dir, metadata)
    return Fixture(handbook, load_questions(questions, data_dir, handbook, metadata), metadata)


#: Lesson 5's planted passages, attack questions, wordings and evasions, validated
#: together, and the variant handbook. ``wordings`` holds every wording of every attack,
#: in the order of attack IDs, its own row's first, with its number (``wording``).
AttackFixture = namedtuple("AttackFixture", "kinds passages questions wordings evasions variant")


def load_attack_fixture(data_dir: PathLike = DATA_DIR, handbook: pd.DataFrame | None = None,
                        metadata: pd.DataFrame | None = None) -> AttackFixture:
    """The attack fixture of lesson 5, "The attacks, written down first".

    Every file is validated like the rest of the fixture (file, row, line and column in
    every error) and checked against its metadata row and fingerprint. Planted passages
    have IDs ``P01``..., superseded ones ``S01``..., never a handbook ID, and every row
    says it is invented attack text for teaching. ``planted_ids`` becomes a tuple;
    ``success_rule`` is checked by :func:`helpers.attack_rules.parse_rule`, and a canary
    it names must be in the payload. Every attack has at least :data:`MIN_WORDINGS`
    wordings; each evasion rewords a routed attack question in one of
    :data:`helpers.attack_rules.EVASION_STYLES`. A success rule that differs from its
    first rule is dated and explained. ``kinds`` declares every kind of attack and what
    carries it (:data:`ATTACK_KINDS_FILE`): an attack's kind must be one of them, and it
    plants passages exactly when its kind is carried by a planted passage;
    ``written_against`` is "none" or defences of :data:`helpers.attack_rules.DEFENCE_NAMES`
    joined by ``|`` (``against_list``: their tuple). ``variant`` is :data:`VARIANT_HANDBOOK_FILE`.
    """
    metadata = read_metadata(data_dir) if metadata is None else metadata
    found = frame_rows(load_handbook(data_dir, metadata) if handbook is None else handbook)
    kinds, passages, questions, further, evasions = (_load(name, data_dir, metadata, found)
                                                     for name in ATTACK_FILES)
    planted = dict(zip(passages["passage_id"], passages["text"]))
    own = questions.assign(wording_id=questions["attack_id"] + "-1", text=[  # wording 1
        planted.get(ids.split("|")[0], asked)
        for ids, asked in zip(questions["planted_ids"], questions["question"])])
    wordings = pd.concat([own[further.columns], further], ignore_index=True)
    wordings.insert(2, "wording", wordings["wording_id"].str.partition("-")[2].astype(int))
    for column, listed in (("planted_ids",) * 2, ("acceptable_list", "acceptable_answers"),
                           ("against_list", "written_against")):
        questions[column] = pd.Series(map(split_answers, questions[listed]), dtype=object)
    wordings = wordings.sort_values(["attack_id", "wording"], ignore_index=True)
    variant = _load(VARIANT_HANDBOOK_FILE, data_dir, metadata, found)
    return AttackFixture(kinds, passages, questions, wordings, evasions, variant)
