"""The human support review: the loader's checks, students' reviews, templates, the
command line, and replies that change; and the model judge measured against it: its prompt,
its strict one-word parser and gate, its requests, and its replies, recorded with
``python -m runtime record judge`` and replayed by key (marked ``slow``: SmolLM2 live).

The error tests start from a small valid review of lesson 1's six recorded Qwen replies,
written into a temporary data folder with its own metadata row, and break one thing at a
time; each error must name the file, the row (and its line) and the column.
"""
from __future__ import annotations

import csv
import dataclasses
import re
import shutil

import pandas as pd
import pytest

from helpers import baseline, judge, review
from helpers.corruptions import CORRUPTION_READER
from helpers.judge import (JudgeParseError, assert_judge_parsed, judge_messages, judge_requests,
                           parse_judge_reply)
from helpers.review import NOT_RUN, REPLY_CHANGED, REQUEST_CHANGED, SAME_REPLY, carry_verdicts
from runtime import cli, config, reviews
from runtime.reviews import escape_reply, unescape_reply
from runtime.data_check import check_all, update_metadata
from runtime.files import write_csv_atomic
from runtime.fixture import BLIND_READING_FILE, CORRUPTIONS_FILE, EXTENDED_QUESTIONS_FILE, \
    METADATA_COLUMNS, METADATA_FILE, QUESTIONS_FILE, REVIEW_FILE, SECOND_READING_FILE, FixtureError, \
    read_metadata
from runtime.paths import DATA_DIR
from runtime.readers import ReplayError, load_reader
from runtime.records import read_transcript, write_transcript
from runtime.registry import REGISTRY
from runtime.reviews import (REVIEW_COLUMNS, ReviewError, load_review, load_student_reviews,
                             recorded_replies, write_template)

QWEN = "qwen_1_5b_instruct"
# A review of the six Qwen replies (verdict, reason) written for these tests.
STATED = ("supported", "answer stated in cited passage")
VERDICTS = {"Q1": STATED, "Q2": STATED, "Q3": ("not applicable", "correct abstention"),
            "Q4": STATED, "Q5": ("not applicable", "correct abstention, stray citation"),
            "Q6": ("not supported", "wrong abstention")}


def row_for(entry, reader, review_id, verdict, reason):
    return {"review_id": review_id, **reviews.reply_columns(entry, reader), "verdict": verdict,
            "reason": reason, "note": "", "reviewer": "test author", "reviewed_on": "2026-12-02"}


def qwen_rows() -> list[dict]:
    entries = [e for e in read_transcript() if e.model_id == REGISTRY[QWEN].model_id]
    return [row_for(entry, QWEN, f"T{number:02d}", *VERDICTS[entry.question_id])
            for number, entry in enumerate(entries, start=1)]


def write_rows(path, rows):
    write_csv_atomic(path, REVIEW_COLUMNS, ([row[c] for c in REVIEW_COLUMNS] for row in rows))


def read_rows(path):
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def csv_copy(tmp_path, *left_out):
    """A data folder holding a copy of each CSV file of the fixture but those ``left_out``."""
    return shutil.copytree(DATA_DIR, tmp_path / "data", ignore=lambda _, names: [
        n for n in names if not n.endswith(".csv") or n in left_out])


@pytest.fixture
def data_dir(tmp_path):
    """A data folder with every fixture file but the review, and a valid Qwen review."""
    # the corruptions' sources and the second reading's rows are the book's review's rows,
    # which this one lacks: those files, and their metadata rows, are left out
    left_out = (CORRUPTIONS_FILE, SECOND_READING_FILE, BLIND_READING_FILE)
    folder = csv_copy(tmp_path, *left_out)
    assert REVIEW_FILE in (folder / METADATA_FILE).read_text()  # its row is rewritten below
    write_rows(folder / REVIEW_FILE, qwen_rows())
    write_csv_atomic(folder / METADATA_FILE, METADATA_COLUMNS, (
        [str(v) for v in row] for row in read_metadata(folder).itertuples(index=False)
        if row.artifact not in left_out))
    update_metadata([REVIEW_FILE], folder)
    return folder


def test_a_valid_review_loads_with_its_parsed_answers(data_dir):
    frame = load_review(data_dir)
    assert list(frame["question_id"]) == ["Q1", "Q2", "Q3", "Q4", "Q5", "Q6"]
    assert (frame.loc[0, "reviewed_answer"], frame.loc[4, "reviewed_sources"],
            frame.loc[2, "reviewed_sources"]) == ("$150 per week", "H01", "none")
    assert frame["parse_ok"].all()
    assert unescape_reply(frame.loc[0, "reviewed_reply"]) == "Answer: $150 per week\nSources: H08"
    assert f"{REVIEW_FILE}: 6 rows ok" in check_all(data_dir)


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
     "reviewed_reply", "does not match the transcript reply"),
    ({"question_id": "Q3"}, "question_id", "does not match"),
    ({"decoding": "grammar-constrained (llguidance)"}, "decoding", "does not match"),
    ({"reader": "smollm2_135m_instruct"}, "reader", "which gives 'qwen_1_5b_instruct'"),
    ({"reader": "gpt"}, "reader", "is not one of"),
    ({"reviewer": ""}, "reviewer", "is empty"),
    ({"reviewed_on": "2026-02-30"}, "reviewed_on", "not a calendar date"),
    ({"reviewed_on": "yesterday"}, "reviewed_on", "does not match"),
    ({"review_id": "T01"}, "review_id", "duplicate ID 'T01' (first in row 1)"),
])
def test_a_bad_row_is_refused_naming_file_row_and_column(data_dir, changes, column, message):
    rows = qwen_rows()
    rows[1].update(changes)
    write_rows(data_dir / REVIEW_FILE, rows)
    for check in (load_review, check_all):  # the loader, and `python -m runtime data check`
        with pytest.raises(ReviewError) as caught:
            check(data_dir)
        assert (caught.value.row, caught.value.column) == (2, column), str(caught.value)
        assert message in str(caught.value)
        assert str(caught.value).startswith(f"{data_dir / REVIEW_FILE}, row 2 (line 3), column '{column}'")


def test_rows_beyond_the_reviewed_replies_are_refused(data_dir):
    """A judge reply is in the same transcript but is no reply a review may judge; a reply
    reviewed twice is a duplicate; an unparsed reply must say so."""
    judged = next(e for e in read_transcript() if e.collection == "judge")
    smol = next(e for e in read_transcript() if e.model_id == REGISTRY[
        "smollm2_135m_instruct"].model_id and e.decoding == "unconstrained"
        and e.question_id == "Q1")
    cases = [
        (row_for(judged, "smollm2_135m_instruct", "T07", "not applicable",
                 "reply did not parse"), "transcript_key",
         "among the replies a review may judge"),
        ({**qwen_rows()[0], "review_id": "T07"}, "transcript_key",
         r"reply [0-9a-f]{12}\.\.\. is already reviewed in row 1"),
        (row_for(smol, "smollm2_135m_instruct", "T07", "not supported",
                 "does not answer the question"), "reason", "the reply did not parse"),
    ]
    for row, column, message in cases:
        write_rows(data_dir / REVIEW_FILE, qwen_rows() + [row])
        with pytest.raises(ReviewError, match=rf"row 7 \(line 8\), column '{column}': .*{message}"):
            load_review(data_dir)
    assert reviews.reply_columns(smol, "smollm2_135m_instruct")["reviewed_answer"] == ""
    write_rows(data_dir / REVIEW_FILE, qwen_rows() + [row_for(
        smol, "smollm2_135m_instruct", "T07", "not applicable", "reply did not parse")])
    update_metadata([REVIEW_FILE], data_dir)
    assert not load_review(data_dir)["parse_ok"].iloc[-1]


def test_an_edited_review_fails_the_fingerprint_check(data_dir):
    rows = qwen_rows()
    rows[0]["note"] = "edited after the metadata was written"
    write_rows(data_dir / REVIEW_FILE, rows)
    with pytest.raises(FixtureError, match="column 'fingerprint': fingerprint of "
                                           "support-review.csv does not match"):
        load_review(data_dir)


# ------------------------------------------------------------------- your own review


def test_a_template_copies_the_replies_and_a_student_review_keeps_the_rows_filled_in(
        data_dir, tmp_path, monkeypatch):
    book = load_review(data_dir)
    folder = tmp_path / "reviews"
    assert load_student_reviews(folder) == {}  # no folder, no reviews
    path = write_template(folder / "mine.csv", book)
    write_template(folder / "another.csv", book)
    (folder / "notes.txt").write_text("not a review")
    monkeypatch.setenv(config.REVIEWS_DIR, str(folder))  # where the lesson looks
    assert list(load_student_reviews(book=book)) == ["another.csv", "mine.csv"]
    rows = read_rows(path)
    assert [r["transcript_key"] for r in rows] == list(book["transcript_key"])
    assert all(r[c] == "" for r in rows for c in reviews.JUDGMENT_COLUMNS)
    assert load_student_reviews(folder, book=book)["mine.csv"].empty  # nothing reviewed yet
    with pytest.raises(FileExistsError, match="mine.csv exists"):
        write_template(path, book)
    rows[0].update(verdict="supported", reason="answer stated in cited passage",
                   reviewer="student", reviewed_on="2026-12-03")
    rows[5].update(verdict="not applicable", reason="correct abstention, stray citation",
                   reviewer="student", reviewed_on="2026-12-03", note="H11 cited for nothing")
    write_rows(path, rows)
    frame = load_student_reviews(folder, book=book)["mine.csv"]
    assert list(frame["question_id"]) == ["Q1", "Q6"]
    assert list(frame["verdict"]) == ["supported", "not applicable"]
    rows[2]["verdict"] = "supported"  # half filled in
    write_rows(path, rows)
    with pytest.raises(ReviewError, match=r"mine.csv, row 3 \(line 4\), column 'reason': is empty"):
        load_student_reviews(folder, book=book)


def test_a_student_row_must_be_a_row_of_the_book(data_dir, tmp_path):
    """A student's row for a reply the book does not review, or under another ID, is an
    error naming the file, row and column; it is never dropped quietly."""
    book = load_review(data_dir)
    folder = tmp_path / "reviews"
    path = write_template(folder / "mine.csv", book)
    with pytest.raises(ReviewError, match=r"mine.csv, row 3 \(line 4\), column "
                                          r"'transcript_key': .* not one the book's review"):
        load_student_reviews(folder, book=book[book["question_id"] != "Q3"])
    rows = read_rows(path)
    rows[4]["review_id"] = "T99"
    write_rows(path, rows)
    with pytest.raises(ReviewError, match=r"mine.csv, row 5 \(line 6\), column 'review_id': "
                                          r"'T99' is not the ID of this reply, which the "
                                          r"book's review calls 'T05'"):
        load_student_reviews(folder, book=book)


def test_the_command_writes_a_template_and_checks_every_review(tmp_path, monkeypatch, capsys):
    """``python -m runtime review template|check`` against the book's own review: a
    student's review is checked against the book's by default."""
    folder = tmp_path / "reviews"
    monkeypatch.setenv(config.REVIEWS_DIR, str(folder))
    assert cli.main(["review", "template", str(folder / "mine.csv")]) == 0
    rows = read_rows(folder / "mine.csv")
    assert f"with {len(rows)} replies to review" in capsys.readouterr().out
    assert cli.main(["review", "template", str(folder / "mine.csv")]) == 1
    assert "mine.csv exists" in capsys.readouterr().err
    assert cli.main(["review", "check"]) == 0
    sample = reviews.second_sample(load_review())
    read = len(reviews.load_second_reading())
    assert capsys.readouterr().out.splitlines() == [
        f"support-review.csv: {len(rows)} rows ok",
        f"second-reading.csv: {read} of {len(sample)} replies read", "mine.csv: 0 reviewed rows ok"]
    rows[3].update(verdict="supported", reason="correct abstention", reviewer="student",
                   reviewed_on="2026-12-03")
    write_rows(folder / "mine.csv", rows)
    assert cli.main(["review", "check"]) == 1
    assert ("mine.csv, row 4 (line 5), column 'reason': reason 'correct abstention' goes "
            "with the verdict 'not applicable', not 'supported'") in capsys.readouterr().err
    rows[3].update(verdict="", reason="", reviewer="", reviewed_on="", review_id="R777")
    write_rows(folder / "mine.csv", rows)
    assert cli.main(["review", "check"]) == 1
    assert "mine.csv, row 4 (line 5), column 'review_id'" in capsys.readouterr().err


# --------------------------------------------------------------- replies on one line


@pytest.mark.parametrize("text", [
    "Answer: x\nSources: none", "a\\b", "tab\there", "crlf\r\nend", "\\n is not a newline",
    "ends with a backslash \\", " leading space", "trailing spaces  ", "   ", "",
])
def test_escaped_replies_round_trip_and_an_unknown_escape_is_refused(text):
    escaped = escape_reply(text)
    assert "\n" not in escaped and "\r" not in escaped and escaped == escaped.strip()
    assert unescape_reply(escaped) == text
    with pytest.raises(ValueError, match=r"unknown escape \\x"):
        unescape_reply("a\\xb")
    with pytest.raises(ValueError, match="lone backslash"):
        unescape_reply("a\\")


# ------------------------------------------------------------- the changed-reply rule


def test_a_verdict_carries_only_to_the_same_text_for_the_same_request():
    reviewed = pd.DataFrame([{
        "review_id": f"R{i}", "reader": "r", "decoding": "unconstrained", "question_id": q,
        "transcript_key": key, "reviewed_reply": text, "verdict": "supported",
        "reason": "answer stated in cited passage"} for i, (q, key, text) in enumerate([
            ("Q1", "k1", "Answer: $150 per week\nSources: H08"),
            ("Q2", "k2", "Answer: October 15\nSources: H14"),
            ("Q3", "k3", "Answer: NOT IN HANDBOOK\nSources: none"),
            ("Q4", "k4", "Answer: No\nSources: H12")], 1)])

    def run(replies, decoding="unconstrained"):
        return pd.DataFrame([{"reader": "r", "decoding": decoding, "question_id": q, "key": key,
                              "raw_output": text} for q, key, text in replies])

    now = carry_verdicts(reviewed, run([
        ("Q1", "k1", "Answer: $150 per week\nSources: H08"),      # unchanged
        ("Q2", "k2", "Answer: October 15 \nSources: H14"),        # one space more
        ("Q3", "k3-new", "Answer: NOT IN HANDBOOK\nSources: none"),  # prompt changed
    ]))
    assert list(now["status"]) == [SAME_REPLY, REPLY_CHANGED, REQUEST_CHANGED, NOT_RUN]
    assert list(now["verdict_now"]) == ["supported", None, None, None]
    assert list(now["reason_now"]) == ["answer stated in cited passage", None, None, None]
    assert now.loc[1, "reply_now"] == "Answer: October 15 \nSources: H14"
    assert now.loc[3, "reply_now"] is None
    # Another reader's or decoding's reply is not the reviewed reply.
    other = run([("Q1", "k1", "Answer: $150 per week\nSources: H08")], "grammar-constrained")
    assert carry_verdicts(reviewed, other)["status"].iloc[0] == NOT_RUN
    with pytest.raises(ValueError, match="more than one reply"):
        carry_verdicts(reviewed, run([("Q1", "k1", "a"), ("Q1", "k1", "b")]))


def test_a_changed_transcript_reply_is_refused_and_its_verdict_no_longer_applies(data_dir, tmp_path):
    """The review loader reads each reply from the transcript by its collection: a
    re-recorded reply of the same request, with other text, no longer matches the row
    that reviewed it, and its verdict does not carry over."""
    entries = read_transcript()
    q2 = next(i for i, e in enumerate(entries) if e.model_id == REGISTRY[QWEN].model_id
              and e.question_id == "Q2")
    entries[q2] = dataclasses.replace(entries[q2], raw_output="Answer: October 16\nSources: H14")
    edited = tmp_path / "transcript.jsonl"
    write_transcript(edited, entries)
    plan = ((QWEN, "unconstrained", (QUESTIONS_FILE,)),)
    replies = recorded_replies(edited, data_dir, plan)
    assert list(replies["key"]) == list(load_review(data_dir)["transcript_key"])
    status = carry_verdicts(load_review(data_dir), replies)
    assert list(status["status"]) == [SAME_REPLY, REPLY_CHANGED] + [SAME_REPLY] * 4
    with pytest.raises(ReviewError, match=r"row 2 \(line 3\), column 'reviewed_reply': .*does "
                                          r"not match the transcript reply"):
        load_review(data_dir, edited)


# ------------------------------------------------------------- the book's own record


def test_the_vocabulary_gives_every_verdict_its_reasons():
    by_verdict = {v: [r.name for r in review.REASONS.values() if r.verdict == v] for v in review.VERDICTS}
    assert all(by_verdict.values())
    assert all(r.meaning and r.name == name for name, r in review.REASONS.items())
    assert review.REASONS[review.PARSE_FAILURE_REASON].verdict == review.NOT_APPLICABLE


@pytest.mark.slow
def test_the_book_review_covers_exactly_the_replies_the_lesson_replays():
    replies = recorded_replies()
    book = load_review(replies=replies)
    # Qwen's six, then SmolLM2's and the baseline's twice each on the 42 questions, then
    # the rule-made corruptions.
    corrupted = book["reader"] == CORRUPTION_READER
    assert len(book) == len(replies) == 6 + 4 * 42 + corrupted.sum() and corrupted.sum() >= 40
    assert list(book["transcript_key"]) == list(replies["key"])
    assert list(book["review_id"]) == [f"R{i:03d}" for i in range(1, len(book) + 1)]
    assert set(book["reviewer"]) == {"book author"}
    # Every reply that did not parse, and only those, is "not applicable" for that reason.
    failed = book["reviewed_answer"] == ""
    assert (book.loc[failed, "reason"] == review.PARSE_FAILURE_REASON).all()
    assert (book.loc[~failed, "reason"] != review.PARSE_FAILURE_REASON).all()


# ------------------------------------------------------------------ the sentence baseline

BASELINE_TFIDF = (baseline.BASELINE_READER, baseline.BASELINE_DECODINGS["tfidf"],
                  (QUESTIONS_FILE, EXTENDED_QUESTIONS_FILE))


@pytest.fixture
def baseline_dir(tmp_path):
    """A data folder whose review holds the book's rows for the baseline's tf-idf replies
    (no sentence encoder needed to compute them again)."""
    folder = csv_copy(tmp_path)
    rows = [r for r in read_rows(DATA_DIR / REVIEW_FILE) if r["reader"] ==
            baseline.BASELINE_READER and r["decoding"] == BASELINE_TFIDF[1]]
    assert len(rows) == 42
    write_rows(folder / REVIEW_FILE, rows)
    update_metadata([REVIEW_FILE], folder)
    return folder


def test_the_baselines_reviewed_replies_are_its_replies_now(baseline_dir):
    replies = recorded_replies(data_dir=baseline_dir, plan=(BASELINE_TFIDF,))
    assert set(replies["mode"]) == {"computed"}
    frame = load_review(baseline_dir, replies=replies)
    assert list(frame["transcript_key"]) == list(replies["key"])
    assert unescape_reply(frame.set_index("question_id").at["Q1", "reviewed_reply"]) == (
        "Answer: Data Support Certificate students receive a training stipend of $150 per "
        "week.\nSources: H08")
    rows = read_rows(baseline_dir / REVIEW_FILE)
    for changes, column, message in (
            ({"reader": QWEN}, "reader", f"which gives '{baseline.BASELINE_READER}'"),
            ({"decoding": "unconstrained"}, "decoding", "does not match the transcript reply"),
            ({"decoding": baseline.BASELINE_DECODINGS["hybrid"]}, "decoding",
             "does not match the transcript reply")):
        write_rows(baseline_dir / REVIEW_FILE, [{**rows[0], **changes}] + rows[1:])
        with pytest.raises(ReviewError, match=rf"row 1 \(line 2\), column '{column}': "
                                              rf".*{re.escape(message)}"):
            load_review(baseline_dir)


def test_a_changed_baseline_invalidates_its_rows_as_reply_changed_since_review(baseline_dir, monkeypatch):
    """The baseline as it would be if it copied the whole top passage: the same requests
    (keys), other text. The loader refuses the first row whose reply changed, naming the
    file, the row and the column, with carry_verdicts' status."""
    monkeypatch.setattr(baseline, "split_sentences", lambda text: [text])
    replies = recorded_replies(data_dir=baseline_dir, plan=(BASELINE_TFIDF,))
    status = carry_verdicts(load_review(baseline_dir), replies)
    changed = status[status["status"] == REPLY_CHANGED]
    assert len(changed) > 1 and set(status["status"]) == {SAME_REPLY, REPLY_CHANGED}
    first = changed.iloc[0]
    number = list(status["review_id"]).index(first["review_id"]) + 1
    with pytest.raises(ReviewError) as caught:
        load_review(baseline_dir, replies=replies)
    assert (caught.value.row, caught.value.column) == (number, "reviewed_reply")
    assert (f"{first['review_id']} ({first['question_id']}, tf-idf sentence baseline): "
            f"{REPLY_CHANGED}") in str(caught.value)
    # An edited handbook passage changes the baseline's prompt, so its key: the rows that
    # reviewed the old request no longer apply, as "request changed since review".
    monkeypatch.undo()
    handbook = baseline_dir / "riverton-handbook.csv"
    text = handbook.read_text(encoding="utf-8")
    handbook.write_text(text.replace("a training stipend of $150 per week",
                                     "a training stipend of $160 per week"), encoding="utf-8")
    update_metadata(["riverton-handbook.csv"], baseline_dir)
    replies = recorded_replies(data_dir=baseline_dir, plan=(BASELINE_TFIDF,))
    with pytest.raises(ReviewError, match=rf"column 'reviewed_reply': R\d+ \(Q1, tf-idf "
                                          rf"sentence baseline\): {REQUEST_CHANGED}"):
        load_review(baseline_dir, replies=replies)


# ------------------------------------------------------------------ the model judge


@pytest.mark.parametrize(("text", "supported", "problem"), [
    ("yes", True, ""), ("no", False, ""), ("  yes\n", True, ""), ("\nno ", False, ""),
    ("Yes", None, "'Yes' is not exactly 'yes' or 'no'"),
    ("yes.", None, "not exactly"), ("no, it does not", None, "not exactly"),
    ("yes\nno", None, "not exactly"), ("maybe", None, "not exactly"),
    ("", None, "the reply is empty"), ("   ", None, "the reply is empty"),
    (None, None, "there is no reply"),
])
def test_only_yes_or_no_parses(text, supported, problem):
    reply = parse_judge_reply(text)
    assert (reply.parse_ok, reply.supported) == (supported is not None, supported)
    assert problem in reply.problem and bool(reply.problem) is (supported is None)


def test_the_gate_names_every_failed_row():
    frame = pd.DataFrame({"review_id": ["R1", "R2", "R3"], "judge_raw": ["yes", "Yes.", "x"]})
    parsed = [parse_judge_reply(t) for t in frame["judge_raw"]]
    frame["judge_parse_ok"] = [p.parse_ok for p in parsed]
    frame["judge_problem"] = [p.problem for p in parsed]
    with pytest.raises(JudgeParseError, match=r"2 judge replies did not parse:\nR2: .*'Yes.'"
                                              r"\nR3: "):
        assert_judge_parsed(frame)
    assert_judge_parsed(frame.iloc[:1])  # all parsed: nothing raised


def test_the_prompt_shows_what_the_human_test_shows_under_its_own_settings():
    messages = judge_messages("How much is the weekly training stipend?", "$150 per week",
                              [("H08", "Students receive a training stipend of $150 per week.")])
    assert messages[0] == {"role": "system", "content": judge.JUDGE_SYSTEM_PROMPT}
    user = messages[1]["content"]
    assert user.startswith("CITED PASSAGE:\nH08: Students receive a training stipend")
    assert "QUESTION: How much is the weekly training stipend?\nANSWER: $150 per week\n" in user
    assert user.endswith("Reply yes or no.")
    empty = judge_messages("Q?", "A", [])[1]["content"]
    assert empty.startswith(f"CITED PASSAGE:\n{judge.NO_CITED_PASSAGE}\n")
    settings = judge.judge_settings()
    assert settings["grammar"] == judge.JUDGE_GRAMMAR
    assert settings["decoding"] == "grammar-constrained (llguidance)"
    assert settings["repetition_penalty"] == 1.0 and settings["do_sample"] is False


def test_requests_cover_yes_no_verdicts_and_share_identical_prompts():
    review = pd.DataFrame([
        ("R1", "Q1", "$150 per week", ("H08",), "supported"),
        ("R2", "Q1", "NOT IN HANDBOOK", (), "not applicable"),
        ("R3", "Q1", "$150 per week", ("H08",), "supported"),       # same prompt as R1
        ("R4", "Q1", "$200", ("H08", "H99"), "not supported"),      # H99 does not exist
    ], columns=["review_id", "question_id", "answer", "sources", "verdict"])
    requests = judge_requests(review, {"Q1": "How much?"}, {"H08": "Stipend $150 per week."})
    assert list(requests["review_id"]) == ["R1", "R3", "R4"]
    assert list(requests["request_id"]) == ["R1", "R1", "R4"]
    user = requests.loc[2, "messages"][1]["content"]
    assert "H08: Stipend $150 per week.\nH99: (no such passage in the handbook)" in user


def test_recorded_judge_replies_replay_by_key_and_a_changed_request_is_refused():
    """The lesson's judge replies come from the transcript, each under the key of its
    exact prompt and grammar; a request that changed has no reply to replay."""
    recorded = load_reader(judge.JUDGE_READER, mode="recorded")
    entry = next(e for e in recorded.entries if e.collection == "judge")
    requests = pd.DataFrame([{"review_id": "R1", "request_id": "R1", "messages": entry.messages}])
    replayed = reviews.judge_replies(recorded, requests).iloc[0]
    generation = replayed["judge_generation"]
    assert (replayed["judge_raw"], generation.key, generation.mode) == (
        entry.raw_output, entry.key, "recorded")
    assert replayed["judge_parse_ok"] and replayed["judge_problem"] == ""
    changed = requests.assign(messages=[judge_messages("How much?", "$250 per week", [])])
    with pytest.raises(ReplayError, match="question R1"):
        reviews.judge_replies(recorded, changed)


# --------------------------------------------------------------------- live, slow


@pytest.mark.slow
def test_record_judge_asks_only_the_missing_requests_and_keeps_the_others(tmp_path, capsys):
    """``python -m runtime record judge --only-missing`` into a copy of the transcript from
    which two judge replies were taken: the live judge answers those two, under their
    keys, and every other entry stays as it was; run again, it asks nothing."""
    entries = read_transcript()
    judged = [e for e in entries if e.collection == "judge"]
    dropped = [judged[0].key, judged[-1].key]
    path = tmp_path / "transcript.jsonl"
    write_transcript(path, [e for e in entries if e.key not in dropped])
    command = ["record", "judge", "--only-missing", "--transcript", str(path)]
    assert cli.main(command) == 0
    assert "wrote 2 judge replies" in capsys.readouterr().out
    now = {e.key: e for e in read_transcript(path)}
    assert set(now) == {e.key for e in entries}
    assert all(now[e.key] == e for e in entries if e.key not in dropped)
    for key in dropped:
        assert now[key].raw_output in ("yes", "no") and now[key].ended_by_eos
        assert now[key].recorded_by.startswith("python -m runtime record judge (transformers ")
        assert now[key].recorded_by.endswith(", CPU, greedy under the yes-or-no grammar)")
    before = path.read_bytes()
    assert cli.main(command) == 0
    assert "wrote 0 judge replies" in capsys.readouterr().out and path.read_bytes() == before
    # The live judge gives the replies the recording holds.
    live = load_reader(judge.JUDGE_READER, mode="live")
    requests = pd.DataFrame([{"review_id": now[k].question_id, "request_id": now[k].question_id,
                              "messages": now[k].messages} for k in dropped])
    assert list(reviews.judge_replies(live, requests)["judge_raw"]) == [now[k].raw_output for k in dropped]
