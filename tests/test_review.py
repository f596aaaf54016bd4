"""The human support review: loader checks, student reviews, templates, changed replies.

The error tests start from a small valid review of lesson 1's six recorded Qwen replies,
written into a temporary data folder with its own metadata row, and break one thing at a
time; each error must name the file, the row and the column.
"""
from __future__ import annotations

import csv
import json
import shutil

import pandas as pd
import pytest

from helpers import baseline, judge, review
from bookkit.data_check import check_all, update_metadata
from helpers.fixture import METADATA_FILE, REVIEW_FILE, FixtureError
from helpers.paths import DATA_DIR
from helpers.reader import get_reader_spec, read_transcript
from helpers.review import (
    NOT_RUN,
    REPLY_CHANGED,
    REQUEST_CHANGED,
    REVIEW_COLUMNS,
    SAME_REPLY,
    ReviewError,
    carry_verdicts,
    escape_reply,
    load_review,
    load_student_review,
    load_student_reviews,
    unescape_reply,
    write_template,
)

QWEN = "qwen_1_5b_instruct"
# A review of the six Qwen replies (verdict, reason) written for these tests.
VERDICTS = {
    "Q1": ("supported", "answer stated in cited passage"),
    "Q2": ("supported", "answer stated in cited passage"),
    "Q3": ("not applicable", "correct abstention"),
    "Q4": ("supported", "answer stated in cited passage"),
    "Q5": ("not applicable", "correct abstention, stray citation"),
    "Q6": ("not supported", "wrong abstention"),
}


def qwen_rows() -> list[dict]:
    model = get_reader_spec(QWEN).model_id
    entries = [e for e in read_transcript() if e.model_id == model]
    rows = []
    for number, entry in enumerate(entries, start=1):
        verdict, reason = VERDICTS[entry.question_id]
        rows.append({"review_id": f"T{number:02d}", **review.reply_columns(entry, QWEN),
                     "verdict": verdict, "reason": reason, "note": "",
                     "reviewer": "test author", "reviewed_on": "2026-12-02"})
    return rows


def write_rows(path, rows, columns=REVIEW_COLUMNS):
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(columns), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


@pytest.fixture
def data_dir(tmp_path):
    """A data folder with every fixture file but the review, and a valid Qwen review."""
    folder = tmp_path / "data"
    folder.mkdir()
    for path in DATA_DIR.glob("*.csv"):
        if path.name != REVIEW_FILE:
            shutil.copyfile(path, folder / path.name)
    metadata = (folder / METADATA_FILE).read_text()
    if REVIEW_FILE not in metadata:
        with open(folder / METADATA_FILE, "a") as handle:
            handle.write(f"{REVIEW_FILE},test review,test,CC-BY-4.0,2026-12-02,0,{'0' * 64}\n")
    write_rows(folder / REVIEW_FILE, qwen_rows())
    update_metadata([REVIEW_FILE], folder)
    return folder


def broken(data_dir, row_index, **changes):
    rows = qwen_rows()
    rows[row_index].update(changes)
    write_rows(data_dir / REVIEW_FILE, rows)
    return data_dir


def test_a_valid_review_loads_with_its_parsed_answers(data_dir):
    frame = load_review(data_dir)
    assert list(frame["question_id"]) == ["Q1", "Q2", "Q3", "Q4", "Q5", "Q6"]
    assert frame.loc[0, "reviewed_answer"] == "$150 per week"
    assert frame.loc[4, "reviewed_sources"] == "H01"
    assert frame.loc[2, "reviewed_sources"] == "none"
    assert frame["parse_ok"].all()
    assert unescape_reply(frame.loc[0, "reviewed_reply"]) == "Answer: $150 per week\nSources: H08"


@pytest.mark.parametrize(("changes", "column", "message"), [
    ({"verdict": "mostly supported"}, "verdict", "is not one of supported, not supported"),
    ({"reason": "looks fine"}, "reason", "is not one of answer stated in cited passage"),
    ({"reason": "wrong abstention"}, "reason",
     "goes with the verdict 'not supported', not 'supported'"),
    ({"reason": "reply did not parse", "verdict": "not applicable"}, "reason",
     "the reply parsed"),
    ({"verdict": ""}, "verdict", "is empty"),
    ({"transcript_key": "0" * 64}, "transcript_key", "no reply with key 000000000000"),
    ({"transcript_key": "not a key"}, "transcript_key", "does not match"),
    ({"reviewed_answer": "$150"}, "reviewed_answer", "does not match the transcript reply"),
    ({"reviewed_sources": "H08, H14"}, "reviewed_sources", "does not match"),
    ({"reviewed_reply": "Answer: Applications close on October 15.\\nSources: H14."},
     "reviewed_reply",
     "does not match"),
    ({"question_id": "Q3"}, "question_id", "does not match"),
    ({"decoding": "grammar-constrained (llguidance)"}, "decoding", "does not match"),
    ({"decoding": "beam search"}, "decoding", "is not one of"),
    ({"reader": "smollm2_135m_instruct"}, "reader", "was written by Qwen/Qwen2.5-1.5B-Instruct"),
    ({"reader": "gpt"}, "reader", "is not one of"),
    ({"reviewer": ""}, "reviewer", "is empty"),
    ({"reviewed_on": "2026-02-30"}, "reviewed_on", "not a calendar date"),
    ({"reviewed_on": "yesterday"}, "reviewed_on", "does not match"),
    ({"review_id": "T01"}, "review_id", "duplicate ID 'T01' (first in row 1)"),
])
def test_a_bad_row_is_refused_naming_file_row_and_column(data_dir, changes, column, message):
    broken(data_dir, 1, **changes)
    with pytest.raises(ReviewError) as caught:
        load_review(data_dir)
    error = caught.value
    assert (error.row, error.column) == (2, column), str(error)
    assert message in str(error)
    assert str(error).startswith(f"{data_dir / REVIEW_FILE}, row 2 (line 3), column '{column}'")


def test_a_transcript_entry_outside_the_review_is_refused(data_dir):
    """The judge's replies are in the same transcript, but they are not reader replies the
    review covers: a row for one is an error naming the file, row and column."""
    settings = judge.judge_settings()
    entry = next(e for e in read_transcript() if e.settings == settings)
    row = {"review_id": "T07", **review.reply_columns(entry, judge.JUDGE_READER),
           "verdict": "not applicable", "reason": "reply did not parse", "note": "",
           "reviewer": "test author", "reviewed_on": "2026-12-02"}
    write_rows(data_dir / REVIEW_FILE, qwen_rows() + [row])
    with pytest.raises(ReviewError) as caught:
        load_review(data_dir)
    assert (caught.value.row, caught.value.column) == (7, "transcript_key")
    assert str(caught.value).startswith(
        f"{data_dir / REVIEW_FILE}, row 7 (line 8), column 'transcript_key'")
    assert f"(recorded for {entry.question_id}," in str(caught.value)
    assert "is not one of the replies the review covers" in str(caught.value)


def test_a_reply_reviewed_twice_is_a_duplicate(data_dir):
    rows = qwen_rows()
    rows.append({**rows[0], "review_id": "T99"})
    write_rows(data_dir / REVIEW_FILE, rows)
    with pytest.raises(ReviewError, match=r"row 7 \(line 8\), column 'transcript_key': reply "
                                          r"[0-9a-f]{12}\.\.\. is already reviewed in row 1"):
        load_review(data_dir)


def test_a_parse_failure_must_say_so(data_dir, tmp_path):
    smol = get_reader_spec("smollm2_135m_instruct").model_id
    entry = next(e for e in read_transcript() if e.model_id == smol and e.decoding ==
                 "unconstrained" and e.question_id == "Q1")
    columns = review.reply_columns(entry, "smollm2_135m_instruct")
    assert columns["reviewed_answer"] == "" and columns["reviewed_sources"] == ""
    row = {"review_id": "T07", **columns, "verdict": "not supported",
           "reason": "does not answer the question", "note": "", "reviewer": "test author",
           "reviewed_on": "2026-12-02"}
    write_rows(data_dir / REVIEW_FILE, qwen_rows() + [row])
    with pytest.raises(ReviewError, match="row 7.*column 'reason': the reply did not parse"):
        load_review(data_dir)
    row.update(verdict="not applicable", reason="reply did not parse")
    write_rows(data_dir / REVIEW_FILE, qwen_rows() + [row])
    update_metadata([REVIEW_FILE], data_dir)
    frame = load_review(data_dir)
    assert not frame["parse_ok"].iloc[-1]


def test_an_edited_review_fails_the_fingerprint_check(data_dir):
    rows = qwen_rows()
    rows[0]["note"] = "edited after the metadata was written"
    write_rows(data_dir / REVIEW_FILE, rows)
    with pytest.raises(FixtureError, match="column 'fingerprint': fingerprint of "
                                           "support-review.csv does not match"):
        load_review(data_dir)


def test_a_review_needs_its_exact_header(data_dir):
    write_rows(data_dir / REVIEW_FILE, [{k: v for k, v in r.items() if k != "note"}
                                        for r in qwen_rows()],
               [c for c in REVIEW_COLUMNS if c != "note"])
    with pytest.raises(FixtureError, match="line 1, column 'note': missing from the header"):
        load_review(data_dir)


def test_fixture_check_validates_the_review(data_dir):
    assert f"{REVIEW_FILE}: 6 rows ok" in check_all(data_dir)
    broken(data_dir, 3, verdict="fine")
    with pytest.raises(ReviewError, match="row 4"):
        check_all(data_dir)


# ------------------------------------------------------------------- your own review


def test_a_template_copies_the_replies_and_leaves_the_judgment_blank(data_dir, tmp_path):
    book = load_review(data_dir)
    path = write_template(tmp_path / "reviews" / "mine.csv", book)
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 6
    assert all(r[c] == "" for r in rows for c in review.JUDGMENT_COLUMNS)
    assert [r["transcript_key"] for r in rows] == list(book["transcript_key"])
    assert load_student_review(path, book=book).empty  # nothing reviewed yet
    with pytest.raises(FileExistsError, match="mine.csv exists"):
        write_template(path, book)


def test_a_student_review_keeps_only_the_rows_filled_in(data_dir, tmp_path):
    book = load_review(data_dir)
    path = write_template(tmp_path / "mine.csv", book)
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    rows[0].update(verdict="supported", reason="answer stated in cited passage",
                   reviewer="student", reviewed_on="2026-12-03")
    rows[5].update(verdict="not applicable", reason="correct abstention, stray citation",
                   reviewer="student", reviewed_on="2026-12-03", note="H11 cited for nothing")
    write_rows(path, rows)
    frame = load_student_review(path, book=book)
    assert list(frame["question_id"]) == ["Q1", "Q6"]
    assert list(frame["verdict"]) == ["supported", "not applicable"]


def test_a_half_filled_student_row_is_refused(data_dir, tmp_path):
    book = load_review(data_dir)
    path = write_template(tmp_path / "mine.csv", book)
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    rows[2]["verdict"] = "supported"
    write_rows(path, rows)
    with pytest.raises(ReviewError, match=r"mine.csv, row 3 \(line 4\), column 'reason': is empty"):
        load_student_review(path, book=book)


def test_student_reviews_are_read_from_a_folder(data_dir, tmp_path, monkeypatch):
    folder = tmp_path / "reviews"
    assert load_student_reviews(folder) == {}  # no folder, no reviews
    book = load_review(data_dir)
    write_template(folder / "b.csv", book)
    write_template(folder / "a.csv", book)
    (folder / "notes.txt").write_text("not a review")
    monkeypatch.setenv(review.REVIEWS_ENV, str(folder))
    assert review.reviews_dir() == folder
    assert list(load_student_reviews(book=book)) == ["a.csv", "b.csv"]


def test_a_student_row_must_be_a_row_of_the_book(data_dir, tmp_path):
    """A student's row for a reply the book does not review, or under another ID, is an
    error naming the file, row and column; it is never dropped quietly."""
    book = load_review(data_dir)
    smaller = book[book["question_id"] != "Q3"]  # a book that does not review Q3
    path = write_template(tmp_path / "mine.csv", book)
    with pytest.raises(ReviewError) as caught:
        load_student_review(path, book=smaller)
    assert (caught.value.row, caught.value.column) == (3, "transcript_key")
    assert str(caught.value).startswith(f"{path}, row 3 (line 4), column 'transcript_key'")
    assert "is not one of the replies the book's review" in str(caught.value)
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    rows[4]["review_id"] = "T99"
    write_rows(path, rows)
    with pytest.raises(ReviewError, match=r"mine.csv, row 5 \(line 6\), column 'review_id': "
                                          r"'T99' is not the ID of this reply, which the "
                                          r"book's review calls 'T05'"):
        load_student_review(path, book=book)


def test_a_student_review_is_checked_against_the_real_book_by_default(tmp_path):
    path = write_template(tmp_path / "mine.csv", load_review().head(3))
    assert load_student_review(path).empty
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    rows[1]["review_id"] = "R777"
    write_rows(path, rows)
    with pytest.raises(ReviewError, match=r"row 2 \(line 3\), column 'review_id'"):
        load_student_review(path)


def test_a_failed_template_leaves_no_file(data_dir, tmp_path):
    """The template is written to a temporary file and renamed: a failure part of the way
    through leaves neither a half-written review nor the temporary file."""

    class Unprintable:
        def __str__(self):
            raise RuntimeError("this value cannot be written")

    book = load_review(data_dir).astype(object)
    book.at[3, "reviewed_answer"] = Unprintable()
    folder = tmp_path / "reviews"
    with pytest.raises(RuntimeError, match="cannot be written"):
        write_template(folder / "mine.csv", book)
    assert list(folder.iterdir()) == []
    write_template(folder / "mine.csv", load_review(data_dir))
    assert [p.name for p in folder.iterdir()] == ["mine.csv"]


# --------------------------------------------------------------- replies on one line


@pytest.mark.parametrize("sources", [(), ("H08",), ("H02", "H09", "H07"), ("H99", "X")])
def test_sources_of_undoes_sources_text(sources):
    assert review.sources_of(review.sources_text(sources)) == sources


@pytest.mark.parametrize("text", ["", "H08,H11", "H08, ", ", H08", "H08,  H11"])
def test_sources_of_refuses_what_sources_text_never_writes(text):
    with pytest.raises(ValueError):
        review.sources_of(text)


@pytest.mark.parametrize("text", [
    "Answer: x\nSources: none", "a\\b", "tab\there", "crlf\r\nend", "\\n is not a newline",
    "ends with a backslash \\", " leading space", "trailing spaces  ", "   ", "",
])
def test_escaped_replies_round_trip(text):
    escaped = escape_reply(text)
    assert "\n" not in escaped and "\r" not in escaped and escaped == escaped.strip()
    assert unescape_reply(escaped) == text


def test_an_unknown_escape_is_refused():
    with pytest.raises(ValueError, match=r"unknown escape \\x"):
        unescape_reply("a\\xb")
    with pytest.raises(ValueError, match="lone backslash"):
        unescape_reply("a\\")


# ------------------------------------------------------------- the changed-reply rule


def reviewed(rows):
    return pd.DataFrame([{
        "review_id": f"R{i}", "reader": "r", "decoding": "unconstrained", "question_id": q,
        "transcript_key": key, "reviewed_reply": escape_reply(text), "verdict": verdict,
        "reason": reason} for i, (q, key, text, verdict, reason) in enumerate(rows, 1)])


REVIEWED = reviewed([
    ("Q1", "k1", "Answer: $150 per week\nSources: H08", "supported",
     "answer stated in cited passage"),
    ("Q2", "k2", "Answer: October 15\nSources: H14", "supported",
     "answer stated in cited passage"),
    ("Q3", "k3", "Answer: NOT IN HANDBOOK\nSources: none", "not applicable",
     "correct abstention"),
    ("Q4", "k4", "Answer: No\nSources: H12", "supported", "answer stated in cited passage"),
])


def run(replies):
    return pd.DataFrame([{"reader": "r", "decoding": "unconstrained", "question_id": q,
                          "key": key, "raw_output": text} for q, key, text in replies])


def test_a_verdict_carries_only_to_the_same_text_for_the_same_request():
    now = carry_verdicts(REVIEWED, run([
        ("Q1", "k1", "Answer: $150 per week\nSources: H08"),      # unchanged
        ("Q2", "k2", "Answer: October 15 \nSources: H14"),        # one space more
        ("Q3", "k3-new", "Answer: NOT IN HANDBOOK\nSources: none"),  # prompt changed
    ]))
    assert list(now["status"]) == [SAME_REPLY, REPLY_CHANGED, REQUEST_CHANGED, NOT_RUN]
    assert list(now["verdict_now"]) == ["supported", None, None, None]
    assert list(now["reason_now"]) == ["answer stated in cited passage", None, None, None]
    assert now.loc[1, "reply_now"] == "Answer: October 15 \nSources: H14"
    assert now.loc[3, "reply_now"] is None


def test_another_reader_or_decoding_is_not_the_reviewed_reply():
    replies = run([("Q1", "k1", "Answer: $150 per week\nSources: H08")])
    replies["decoding"] = "grammar-constrained (llguidance)"
    assert carry_verdicts(REVIEWED, replies)["status"].iloc[0] == NOT_RUN


def test_a_run_with_two_replies_for_one_question_is_refused():
    with pytest.raises(ValueError, match="more than one reply"):
        carry_verdicts(REVIEWED, run([("Q1", "k1", "a"), ("Q1", "k1", "b")]))


# ------------------------------------------------------------- the book's own record


def test_the_vocabulary_gives_every_verdict_its_reasons():
    by_verdict = {v: [r.name for r in review.REASONS.values() if r.verdict == v]
                  for v in review.VERDICTS}
    assert all(by_verdict.values())
    assert all(r.meaning and r.name == name for name, r in review.REASONS.items())
    assert review.REASONS[review.PARSE_FAILURE_REASON].verdict == review.NOT_APPLICABLE


def book_rows() -> list[dict]:
    with open(DATA_DIR / REVIEW_FILE, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.slow
def test_the_book_review_covers_exactly_the_replies_the_lesson_replays():
    book = load_review(replies=review.recorded_replies())
    replies = review.recorded_replies()
    # Qwen's six, then SmolLM2's and the baseline's twice each on the 42 questions.
    assert len(book) == len(replies) == 6 + 4 * 42
    assert list(book["transcript_key"]) == list(replies["key"])
    assert list(book["review_id"]) == [f"R{i:03d}" for i in range(1, len(book) + 1)]
    assert set(book["reviewer"]) == {"book author"}
    # Every reply that did not parse, and only those, is "not applicable" for that reason.
    failed = book["reviewed_answer"] == ""
    assert (book.loc[failed, "reason"] == review.PARSE_FAILURE_REASON).all()
    assert (book.loc[~failed, "reason"] != review.PARSE_FAILURE_REASON).all()
    # Nothing carried over: replaying the record's own replies keeps every verdict.
    run = replies[["reader", "decoding", "question_id", "key", "raw_output"]]
    assert (carry_verdicts(book, run)["status"] == SAME_REPLY).all()


def test_the_command_writes_a_template_and_checks_every_review(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "reviews"
    monkeypatch.setenv(review.REVIEWS_ENV, str(folder))
    assert review.main(["template", str(folder / "mine.csv")]) == 0
    rows = len(book_rows())
    assert f"with {rows} replies to review" in capsys.readouterr().out
    assert review.main(["template", str(folder / "mine.csv")]) == 1
    assert "mine.csv exists" in capsys.readouterr().err
    assert review.main(["check"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"support-review.csv: {rows} rows ok", "mine.csv: 0 reviewed rows ok"]
    with open(folder / "mine.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    rows[3].update(verdict="supported", reason="correct abstention", reviewer="student",
                   reviewed_on="2026-12-03")
    write_rows(folder / "mine.csv", rows)
    assert review.main(["check"]) == 1
    assert ("mine.csv, row 4 (line 5), column 'reason': reason 'correct abstention' goes "
            "with the verdict 'not applicable', not 'supported'") in capsys.readouterr().err


# ------------------------------------------------------------------ the sentence baseline

BASELINE_TFIDF = (baseline.BASELINE_READER, baseline.BASELINE_DECODINGS["tfidf"],
                  (review.QUESTIONS_FILE, review.EXTENDED_QUESTIONS_FILE))


@pytest.fixture
def baseline_dir(tmp_path):
    """A data folder whose review holds the book's rows for the baseline's tf-idf replies
    (no sentence encoder needed to compute them again)."""
    folder = tmp_path / "data"
    folder.mkdir()
    for path in DATA_DIR.glob("*.csv"):
        shutil.copyfile(path, folder / path.name)
    rows = [r for r in book_rows() if r["reader"] == baseline.BASELINE_READER
            and r["decoding"] == BASELINE_TFIDF[1]]
    assert len(rows) == 42
    write_rows(folder / REVIEW_FILE, rows)
    update_metadata([REVIEW_FILE], folder)
    return folder


def test_the_baselines_reviewed_replies_are_its_replies_now(baseline_dir):
    replies = review.recorded_replies(data_dir=baseline_dir, plan=(BASELINE_TFIDF,))
    assert set(replies["mode"]) == {"computed"}
    frame = load_review(baseline_dir, replies=replies)
    assert list(frame["transcript_key"]) == list(replies["key"])
    q1 = frame.set_index("question_id").loc["Q1"]
    assert unescape_reply(q1["reviewed_reply"]) == (
        "Answer: Data Support Certificate students receive a training stipend of $150 per "
        "week.\nSources: H08")


def test_a_changed_baseline_invalidates_its_rows_as_reply_changed_since_review(
        baseline_dir, monkeypatch):
    """The baseline as it would be if it copied the whole top passage: the same requests
    (keys), other text. The loader refuses the first row whose reply changed, naming the
    file, the row and the column, with carry_verdicts' status."""
    monkeypatch.setattr(baseline, "split_sentences", lambda text: [text])
    replies = review.recorded_replies(data_dir=baseline_dir, plan=(BASELINE_TFIDF,))
    status = carry_verdicts(load_review(baseline_dir), replies)
    changed = status[status["status"] == REPLY_CHANGED]
    assert len(changed) > 0 and set(status["status"]) == {SAME_REPLY, REPLY_CHANGED}
    first = changed.iloc[0]
    number = list(status["review_id"]).index(first["review_id"]) + 1
    with pytest.raises(ReviewError) as caught:
        load_review(baseline_dir, replies=replies)
    error = caught.value
    assert (error.row, error.column) == (number, "reviewed_reply")
    assert f"{first['review_id']} ({first['question_id']}, tf-idf sentence baseline): " \
           f"{REPLY_CHANGED}" in str(error)
    assert f"Also {changed.iloc[1]['review_id']} ({REPLY_CHANGED})" in str(error)


def test_a_changed_passage_is_a_new_baseline_request_with_no_record(baseline_dir):
    handbook = baseline_dir / "riverton-handbook.csv"
    text = handbook.read_text(encoding="utf-8")
    assert "a training stipend of $150 per week" in text
    handbook.write_text(text.replace("a training stipend of $150 per week",
                                     "a training stipend of $160 per week"), encoding="utf-8")
    update_metadata(["riverton-handbook.csv"], baseline_dir)
    with pytest.raises(review.BaselineReplayError, match=r"Q1 \(first sentence of the tf-idf "
                                                         r"top passage\): .* has no baseline "
                                                         r"reply for this request"):
        review.recorded_replies(data_dir=baseline_dir, plan=(BASELINE_TFIDF,))


def test_a_baseline_row_must_name_the_baseline_and_its_decoding(baseline_dir):
    rows = book_rows()
    ours = [r for r in rows if r["reader"] == baseline.BASELINE_READER
            and r["decoding"] == BASELINE_TFIDF[1]]
    for changes, column, message in (
            ({"reader": "qwen_1_5b_instruct"}, "reader",
             f"was written by {baseline.BASELINE_MODEL}"),
            ({"decoding": "unconstrained"}, "decoding", "is not one of first sentence of"),
            ({"decoding": baseline.BASELINE_DECODINGS["hybrid"]}, "decoding",
             "does not match the transcript reply")):
        broken_rows = [dict(r) for r in ours]
        broken_rows[0].update(changes)
        write_rows(baseline_dir / REVIEW_FILE, broken_rows)
        with pytest.raises(ReviewError) as caught:
            load_review(baseline_dir)
        assert (caught.value.row, caught.value.column) == (1, column), str(caught.value)
        assert message in str(caught.value)


def test_the_record_is_what_the_baseline_computes(tmp_path):
    """The committed record's tf-idf entries are the baseline's replies, written again."""
    path = tmp_path / "baseline-replies.jsonl"
    written = baseline.record_baseline((("tfidf", BASELINE_TFIDF[2]),), path,
                                       recorded_on="2026-12-03")
    committed = [e for e in baseline.read_baseline_replies() if e.retriever == "tfidf"]
    assert [(e.key, e.raw_output) for e in written] == [(e.key, e.raw_output) for e in committed]
    assert baseline.read_baseline_replies(path) == written


@pytest.mark.parametrize(("edit", "message"), [
    (lambda r: r.update(raw_output=r["raw_output"]), None),
    (lambda r: r.update(question="How much is it?"), "field 'key' does not match"),
    (lambda r: r.update(retriever="bm25"), "field 'retriever' is 'bm25'"),
    (lambda r: r.pop("recorded_on"), "expected the fields"),
    (lambda r: r.update(passages=[["H08"]]), "should be [ID, text] pairs"),
])
def test_a_bad_record_line_is_refused_with_its_number(tmp_path, edit, message):
    lines = baseline.BASELINE_REPLIES_PATH.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[1])
    edit(record)
    lines[1] = json.dumps(record)
    path = tmp_path / "record.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    if message is None:
        assert len(baseline.read_baseline_replies(path)) == len(lines)
        return
    with pytest.raises(baseline.BaselineRecordError) as caught:
        baseline.read_baseline_replies(path)
    assert str(caught.value).startswith(f"{path}, line 2: ") and message in str(caught.value)
