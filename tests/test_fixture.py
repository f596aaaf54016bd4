"""The Riverton fixture: its content, and the loader's errors on damaged copies.

Every damaging test works on a copy of data/riverton in pytest's tmp_path, and checks
that the FixtureError names the file, the data row and physical line, and the column.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from helpers.fixture import (
    HANDBOOK_FILE,
    METADATA_FILE,
    QUESTIONS_FILE,
    FixtureError,
    fingerprint,
    load_handbook,
    load_questions,
    load_riverton,
    read_metadata,
)
from helpers.paths import DATA_DIR

from fixture_edits import assert_where, replace_bytes, rewrite_csv, set_field

# The handbook as printed in the reference render ("The complete fictional handbook ...").
PRINTED_HANDBOOK = [
    ("H01", "location", "Classes are held at the Riverton Skills Centre on Mill Street in Riverton."),
    ("H02", "contact", "The enrollment desk answers phone calls from 9 a.m. to 5 p.m., Monday to "
     "Friday. Messages left after hours are returned the next business day."),
    ("H03", "programs", "The Riverton Skills Centre runs two programs this fall: the Data Support "
     "Certificate and the Forklift Operator Licence course."),
    ("H04", "forklift eligibility", "Forklift Operator Licence applicants must be at least 18 "
     "years old and able to lift 50 pounds."),
    ("H05", "transit", "Marrow County Transit bus passes are provided for the first month of "
     "either program. Riders pay the regular $2 fare after that."),
    ("H06", "data schedule", "Data Support Certificate classes meet on Monday and Wednesday "
     "evenings from 6 p.m. to 9 p.m. The course lasts 12 weeks."),
    ("H07", "enrollment documents", "Bring a photo ID and proof of address to your enrollment "
     "appointment."),
    ("H08", "stipend", "Data Support Certificate students receive a training stipend of $150 per "
     "week. Students must attend at least 90 percent of classes to receive it."),
    ("H09", "course codes", "In the enrollment system, the Data Support Certificate is listed as "
     "course DSC-104 and the forklift course is listed as FOL-210."),
    ("H10", "refresher workshop", "An optional spreadsheet refresher workshop, listed as DSC-105, "
     "meets on two Saturday mornings in September. It does not count toward the certificate."),
    ("H11", "forklift schedule", "Forklift Operator Licence classes meet on Tuesday and Thursday "
     "mornings from 8 a.m. to noon. There are no weekend forklift classes."),
    ("H12", "data eligibility", "No prior data experience is required for the Data Support "
     "Certificate. Applicants need basic spreadsheet skills."),
    ("H13", "child care", "Free child care is available in Room 104 during evening classes for "
     "children aged 3 to 10."),
    ("H14", "deadline", "Applications for both fall programs close on October 15."),
    ("H15", "laptops", "Laptops are provided in class for Data Support Certificate students and "
     "may not be taken home."),
]

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


# --- helpers for damaged copies ---------------------------------------------------


def _load_error(data_dir: Path) -> FixtureError:
    with pytest.raises(FixtureError) as caught:
        load_riverton(data_dir)
    return caught.value


# --- the committed fixture ----------------------------------------------------------


def test_handbook_is_the_source_handbook(handbook):
    assert list(handbook.columns) == ["passage_id", "topic", "text", "source", "author_note"]
    assert [tuple(r) for r in handbook[["passage_id", "topic", "text"]].itertuples(index=False)] \
        == PRINTED_HANDBOOK
    assert handbook["source"].str.len().gt(0).all()


def test_questions_are_the_source_questions(questions):
    assert list(questions.columns) == [
        "question_id", "question", "probe_type", "expected_action", "gold_passage_id",
        "acceptable_answers", "author_note", "acceptable_list",
    ]
    shown = [tuple(r) for r in questions[
        ["question_id", "question", "expected_action", "gold_passage_id", "acceptable_answers"]
    ].itertuples(index=False)]
    assert shown == PRINTED_QUESTIONS


def test_acceptable_list_and_missing_gold(questions):
    by_id = questions.set_index("question_id")
    assert by_id.at["Q1", "acceptable_list"] == (
        "$150", "$150 per week", "$150 a week", "150 dollars per week")
    assert by_id.at["Q5", "acceptable_list"] == ()
    assert by_id.at["Q6", "acceptable_list"] == ()
    assert by_id.at["Q5", "gold_passage_id"] is None
    assert questions["acceptable_list"].map(type).eq(tuple).all()


def test_metadata_records_rows_and_fingerprints(riverton):
    metadata = riverton.metadata
    assert list(metadata.columns) == ["artifact", "description", "source", "license",
                                      "created_on", "rows", "fingerprint"]
    by_name = metadata.set_index("artifact")
    assert by_name.at[HANDBOOK_FILE, "rows"] == 15
    assert by_name.at[QUESTIONS_FILE, "rows"] == 6
    for name, recorded in zip(metadata["artifact"], metadata["fingerprint"]):
        digest = hashlib.sha256((DATA_DIR / name).read_bytes()).hexdigest()
        assert recorded == digest == fingerprint(DATA_DIR / name), name
    assert metadata["rows"].dtype == "int64"


def test_fixture_files_are_utf8_lf_without_bom():
    for path in sorted(DATA_DIR.glob("*.csv")):
        data = path.read_bytes()
        assert not data.startswith(b"\xef\xbb\xbf"), path.name
        assert b"\r" not in data, path.name
        data.decode("utf-8")


# --- damaged copies -------------------------------------------------------------------


def test_an_undamaged_copy_loads(data_copy):
    fixture = load_riverton(data_copy)
    assert len(fixture.handbook) == 15 and len(fixture.questions) == 6


def test_one_changed_byte_in_the_handbook(data_copy):
    replace_bytes(data_copy / HANDBOOK_FILE, b"Mill Street", b"Mall Street")
    error = _load_error(data_copy)
    assert_where(error, METADATA_FILE, 1, 2, "fingerprint")
    assert HANDBOOK_FILE in str(error)
    assert "update-metadata" in str(error)


def test_one_changed_byte_in_the_questions(data_copy):
    replace_bytes(data_copy / QUESTIONS_FILE, b"weekly training stipend?",
                   b"weekly training stipend!")
    error = _load_error(data_copy)
    assert_where(error, METADATA_FILE, 2, 3, "fingerprint")
    assert QUESTIONS_FILE in str(error)


def test_a_missing_column(data_copy):
    def drop_author_note(rows):
        for row in rows:
            del row[4]
    rewrite_csv(data_copy / HANDBOOK_FILE, drop_author_note)
    error = _load_error(data_copy)
    assert_where(error, HANDBOOK_FILE, None, 1, "author_note")
    assert "missing" in str(error)


def test_an_extra_column(data_copy):
    def add_column(rows):
        rows[0].append("notes")
        for row in rows[1:]:
            row.append("")
    rewrite_csv(data_copy / QUESTIONS_FILE, add_column)
    error = _load_error(data_copy)
    assert_where(error, QUESTIONS_FILE, None, 1, "notes")


def test_a_duplicate_passage_id(data_copy):
    set_field(data_copy / HANDBOOK_FILE, 2, "passage_id", "H01")
    error = _load_error(data_copy)
    assert_where(error, HANDBOOK_FILE, 2, 3, "passage_id")
    assert "duplicate" in str(error) and "'H01'" in str(error) and "row 1" in str(error)


def test_a_duplicate_question_id(data_copy):
    set_field(data_copy / QUESTIONS_FILE, 4, "question_id", "Q2")
    error = _load_error(data_copy)
    assert_where(error, QUESTIONS_FILE, 4, 5, "question_id")


def test_a_gold_id_that_does_not_exist(data_copy):
    set_field(data_copy / QUESTIONS_FILE, 1, "gold_passage_id", "H99")
    error = _load_error(data_copy)
    assert_where(error, QUESTIONS_FILE, 1, 2, "gold_passage_id")
    assert "'H99'" in str(error)


def test_a_wrong_row_count_in_the_metadata(data_copy):
    set_field(data_copy / METADATA_FILE, 1, "rows", "14")
    error = _load_error(data_copy)
    assert_where(error, METADATA_FILE, 1, 2, "rows")
    assert "records 14 rows" in str(error) and "15 data rows" in str(error)


def test_a_deleted_passage_is_caught_by_the_row_count(data_copy):
    rewrite_csv(data_copy / HANDBOOK_FILE, lambda rows: rows.pop())  # drops H15
    error = _load_error(data_copy)
    assert_where(error, METADATA_FILE, 1, 2, "rows")
    assert "file has 14 data rows" in str(error)


def test_a_byte_order_mark(data_copy):
    path = data_copy / HANDBOOK_FILE
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    error = _load_error(data_copy)
    assert_where(error, HANDBOOK_FILE, None, 1, None)
    assert "byte-order mark" in str(error)


def test_crlf_line_ends(data_copy):
    path = data_copy / QUESTIONS_FILE
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    error = _load_error(data_copy)
    assert_where(error, QUESTIONS_FILE, None, 1, None)
    assert "CRLF" in str(error)


def test_one_crlf_line_end_further_down(data_copy):
    path = data_copy / HANDBOOK_FILE
    lines = path.read_bytes().split(b"\n")
    lines[5] += b"\r"
    path.write_bytes(b"\n".join(lines))
    error = _load_error(data_copy)
    assert_where(error, HANDBOOK_FILE, None, 6, None)


def test_an_invalid_expected_action(data_copy):
    set_field(data_copy / QUESTIONS_FILE, 3, "expected_action", "refuse")
    error = _load_error(data_copy)
    assert_where(error, QUESTIONS_FILE, 3, 4, "expected_action")
    assert "'refuse'" in str(error) and "flag premise" in str(error)


def test_an_abstain_row_with_answers(data_copy):
    set_field(data_copy / QUESTIONS_FILE, 5, "acceptable_answers", "$5 a day")
    error = _load_error(data_copy)
    assert_where(error, QUESTIONS_FILE, 5, 6, "acceptable_answers")


def test_an_abstain_row_with_a_gold_passage(data_copy):
    set_field(data_copy / QUESTIONS_FILE, 5, "gold_passage_id", "H01")
    error = _load_error(data_copy)
    assert_where(error, QUESTIONS_FILE, 5, 6, "gold_passage_id")


def test_an_answer_row_without_answers(data_copy):
    set_field(data_copy / QUESTIONS_FILE, 2, "acceptable_answers", "")
    error = _load_error(data_copy)
    assert_where(error, QUESTIONS_FILE, 2, 3, "acceptable_answers")


def test_an_empty_answer_variant(data_copy):
    set_field(data_copy / QUESTIONS_FILE, 2, "acceptable_answers", "October 15||Oct. 15")
    error = _load_error(data_copy)
    assert_where(error, QUESTIONS_FILE, 2, 3, "acceptable_answers")


def test_an_empty_passage_text(data_copy):
    set_field(data_copy / HANDBOOK_FILE, 7, "text", "")
    error = _load_error(data_copy)
    assert_where(error, HANDBOOK_FILE, 7, 8, "text")


def test_trailing_white_space_in_a_field(data_copy):
    set_field(data_copy / HANDBOOK_FILE, 3, "topic", "programs ")
    error = _load_error(data_copy)
    assert_where(error, HANDBOOK_FILE, 3, 4, "topic")


def test_a_field_that_spans_lines(data_copy):
    set_field(data_copy / HANDBOOK_FILE, 4, "text", "Line one.\nLine two.")
    error = _load_error(data_copy)
    assert_where(error, HANDBOOK_FILE, 4, 5, None)


def test_a_malformed_fingerprint(data_copy):
    set_field(data_copy / METADATA_FILE, 2, "fingerprint", "not-a-sha")
    with pytest.raises(FixtureError) as caught:
        read_metadata(data_copy)
    assert_where(caught.value, METADATA_FILE, 2, 3, "fingerprint")


def test_a_missing_file(data_copy):
    (data_copy / QUESTIONS_FILE).unlink()
    error = _load_error(data_copy)
    assert error.path.name == QUESTIONS_FILE
    assert "not found" in str(error)


def test_loaders_take_a_data_dir(data_copy):
    metadata = read_metadata(data_copy)
    handbook = load_handbook(data_copy, metadata)
    questions = load_questions(QUESTIONS_FILE, data_copy, handbook, metadata)
    assert len(handbook) == 15 and len(questions) == 6
