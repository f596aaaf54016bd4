"""The Riverton fixture: its content, and the loader's errors on damaged copies.

Every damaging case works on a copy of data/riverton in pytest's tmp_path, and checks
that the FixtureError names the file, the data row and physical line, and the column.
"""
from __future__ import annotations

import hashlib

import pytest

from runtime.fixture import (HANDBOOK_FILE, METADATA_FILE, QUESTIONS_FILE, fingerprint,
                             load_handbook, load_questions, load_riverton, read_metadata)
from runtime.paths import DATA_DIR

from fixture_edits import cases, field, raw, refused, replace, rows

# The handbook's topics as printed in the reference render ("The complete fictional
# handbook ..."); its bytes are pinned in test_attack_fixture.py (NORMAL_FINGERPRINTS).
PRINTED_TOPICS = ["location", "contact", "programs", "forklift eligibility", "transit", "data schedule",
                  "enrollment documents", "stipend", "course codes", "refresher workshop",
                  "forklift schedule", "data eligibility", "child care", "deadline", "laptops"]

# "Author-written reference actions and answer variants", as printed.
PRINTED_QUESTIONS = [
    ("Q1", "How much is the weekly training stipend?", "answer", "H08",
     "$150|$150 per week|$150 a week|150 dollars per week"),
    ("Q2", "When do applications close?", "answer", "H14", "October 15|Oct. 15|October 15th"),
    ("Q3", "Where can my kid stay while I study at night?", "answer", "H13",
     "Room 104|in Room 104|free child care in Room 104"),
    ("Q4", "Do I need data experience to join the Data Support Certificate?", "answer", "H12",
     "No|no prior data experience is required"),
    ("Q5", "How much does parking cost at the centre?", "abstain", None, ""),
    ("Q6", "When does the Saturday forklift session start?", "flag premise", "H11", ""),
]


# --- the committed fixture ----------------------------------------------------------


def test_handbook_and_questions_are_the_printed_ones(handbook, questions):
    assert list(handbook.columns) == ["passage_id", "topic", "text", "source", "author_note"]
    assert list(handbook["passage_id"]) == [f"H{n:02d}" for n in range(1, 16)]
    assert list(handbook["topic"]) == PRINTED_TOPICS
    assert handbook.at[0, "text"] == ("Classes are held at the Riverton Skills Centre on Mill "
                                      "Street in Riverton.")
    assert handbook.at[13, "text"] == "Applications for both fall programs close on October 15."
    assert handbook["source"].str.len().gt(0).all()
    assert list(questions.columns) == ["question_id", "question", "probe_type", "expected_action",
                                       "gold_passage_id", "acceptable_answers", "author_note",
                                       "acceptable_list"]
    shown = [tuple(r) for r in questions[
        ["question_id", "question", "expected_action", "gold_passage_id", "acceptable_answers"]
    ].itertuples(index=False)]
    assert shown == PRINTED_QUESTIONS


def test_acceptable_list_and_missing_gold(questions):
    by_id = questions.set_index("question_id")
    assert by_id.at["Q1", "acceptable_list"] == (
        "$150", "$150 per week", "$150 a week", "150 dollars per week")
    assert by_id.at["Q5", "acceptable_list"] == by_id.at["Q6", "acceptable_list"] == ()
    assert by_id.at["Q5", "gold_passage_id"] is None
    assert questions["acceptable_list"].map(type).eq(tuple).all()


def test_metadata_records_rows_and_fingerprints(riverton):
    metadata = riverton.metadata
    assert list(metadata.columns) == ["artifact", "description", "source", "license",
                                      "created_on", "rows", "fingerprint"]
    assert metadata["rows"].dtype == "int64"
    assert list(metadata["rows"][:2]) == [15, 6]  # the handbook's and the questions'
    digest = hashlib.sha256((DATA_DIR / HANDBOOK_FILE).read_bytes()).hexdigest()
    assert fingerprint(DATA_DIR / HANDBOOK_FILE) == digest == metadata.at[0, "fingerprint"]


def test_an_undamaged_copy_loads_through_each_loader(data_copy):
    metadata = read_metadata(data_copy)
    handbook = load_handbook(data_copy, metadata)
    questions = load_questions(QUESTIONS_FILE, data_copy, handbook, metadata)
    assert len(handbook) == 15 and len(questions) == 6
    assert len(load_riverton(data_copy).questions) == 6


# --- damaged copies -------------------------------------------------------------------


def _drop_author_note(table):
    for row in table:
        del row[4]


def _add_column(table):
    table[0].append("notes")
    for row in table[1:]:
        row.append("")


HB, Q, META = HANDBOOK_FILE, QUESTIONS_FILE, METADATA_FILE
PLANTED = ["P01", "stipend", "Stipend is $500 per week.", "handbook", ""]

# name: (file damaged, edit, where the error points (file, data row, line, column), fragments)
DAMAGE = {
    "changed byte in the handbook": (HB, replace(b"Mill Street", b"Mall Street"),
                                     (META, 1, 2, "fingerprint"), HB, "update-metadata"),
    "changed byte in the questions": (Q, replace(b"stipend?", b"stipend!"),
                                      (META, 2, 3, "fingerprint"), Q),
    "wrong row count": (META, field(1, rows="14"), (META, 1, 2, "rows"), "records 14 rows",
                        "15 data rows"),
    "deleted passage": (HB, rows(list.pop), (META, 1, 2, "rows"), "file has 14 data rows"),
    # A planted passage pasted into the handbook is caught by the handbook's row count.
    "planted row in the handbook": (HB, rows(lambda t: t.append(PLANTED)), (META, 1, 2, "rows")),
    "malformed fingerprint": (META, field(2, fingerprint="x"), (META, 2, 3, "fingerprint"),
                              "does not match [0-9a-f]{64}"),
    "missing column": (HB, rows(_drop_author_note), (HB, None, 1, "author_note"), "missing"),
    "extra column": (Q, rows(_add_column), (Q, None, 1, "notes"), "not an expected column"),
    "header out of order": (HB, replace(b"topic,text", b"text,topic"), (HB, None, 1, None),
                            "out of order"),
    "header only": (HB, raw(lambda d: d.split(b"\n")[0] + b"\n"), (HB, None, 2, None), "no data"),
    "empty file": (HB, raw(lambda d: b""), (HB, None, 1, None), "is empty"),
    "one field too many": (HB, rows(lambda t: t[3].append("x")), (HB, 3, 4, None), "has 6 fields"),
    "byte-order mark": (HB, raw(lambda d: b"\xef\xbb\xbf" + d), (HB, None, 1, None), "byte-order"),
    "CRLF line ends": (Q, raw(lambda d: d.replace(b"\n", b"\r\n")), (Q, None, 1, None), "CRLF"),
    "one CR further down": (HB, replace(b"\nH06,", b"\r\nH06,"), (HB, None, 6, None)),
    "not UTF-8": (HB, replace(b"Mill Street", b"M\xe9ll Street"), (HB, None, 2, None), "UTF-8"),
    "field over two lines": (HB, field(4, text="One.\nTwo."), (HB, 4, 5, None), "spans several"),
    "trailing white space": (HB, field(3, topic="programs "), (HB, 3, 4, "topic"), "white space"),
    "duplicate passage ID": (HB, field(2, passage_id="H01"), (HB, 2, 3, "passage_id"),
                             "duplicate ID 'H01' (first in row 1)"),
    "malformed passage ID": (HB, field(2, passage_id="2"), (HB, 2, 3, "passage_id"),
                             "value '2' does not match"),
    "empty passage text": (HB, field(7, text=""), (HB, 7, 8, "text"), "is empty"),
    "duplicate question ID": (Q, field(4, question_id="Q2"), (Q, 4, 5, "question_id"), "duplicate"),
    "unknown gold passage": (Q, field(1, gold_passage_id="H99"), (Q, 1, 2, "gold_passage_id"),
                             "'H99' is not a passage_id of riverton-handbook.csv"),
    "invalid expected action": (Q, field(3, expected_action="refuse"),
                                (Q, 3, 4, "expected_action"), "'refuse'", "flag premise"),
    "abstain with answers": (Q, field(5, acceptable_answers="$5"), (Q, 5, 6, "acceptable_answers"),
                             "must be empty: a row whose expected_action is 'abstain'"),
    "abstain with a gold passage": (Q, field(5, gold_passage_id="H01"),
                                    (Q, 5, 6, "gold_passage_id"), "must be empty"),
    "answer without answers": (Q, field(2, acceptable_answers=""), (Q, 2, 3, "acceptable_answers"),
                               "is empty"),
    "flag premise without gold": (Q, field(6, gold_passage_id=""), (Q, 6, 7, "gold_passage_id"),
                                  "is empty"),
    "empty answer variant": (Q, field(2, acceptable_answers="Oct 15||Oct. 15"),
                             (Q, 2, 3, "acceptable_answers"), "empty or a repeated item"),
    "missing file": (Q, lambda path: path.unlink(), (Q, None, None, None), "not found"),
}


@pytest.mark.parametrize(("file", "edit", "where", "fragments"), cases(DAMAGE))
def test_a_damaged_copy_is_refused_naming_file_row_line_and_column(data_copy, file, edit, where, fragments):
    edit(data_copy / file)
    refused(load_riverton, data_copy, where, *fragments)
