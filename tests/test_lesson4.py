"""Lesson 4 executed from a clean kernel, its figures read back and checked against the record,
and its guards stopping the render when the record changes.

The expected values are computed here from ``data/riverton/support-review.csv``,
``corrupted-replies.csv`` and ``second-reading.csv`` read with the csv module, the screen
applied afresh to the reviewed answers with the passages each retriever gives, and
intervals from statsmodels, so a page that drifted from its record would fail. One run
has a student review in a temporary folder (``RIVERTON_REVIEWS_DIR``); the session's run
has none (``book.lesson``). Three runs on a copy of the project change one corrupted
reply's verdict, one corruption rule and one second-reading verdict, and must stop at the
sentence that no longer holds.
"""
from __future__ import annotations

import csv
import os
from collections import Counter

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score
from statsmodels.stats.proportion import proportion_confint

from bookkit.build import ChapterFailure
from helpers import judge, parsing, review, screen
from helpers.baseline import BASELINE_READER
from helpers.prompts import RETRIEVAL_K
from runtime import config, reviews
from runtime.fixture import CORRUPTIONS_FILE, REVIEW_FILE, SECOND_READING_FILE, load_riverton
from runtime.lessons import fit_retriever
from runtime.paths import DATA_DIR, LESSONS_DIR
from runtime.readers import load_reader

from fixture_edits import field, recorded, replace
from lesson_outputs import LessonRun, chapter_source, execute, markdown_outputs, table_rows
from projects import copy_project

LESSON = LESSONS_DIR / "04-human-support-review.ipynb"
YES_NO = (review.SUPPORTED, review.NOT_SUPPORTED)
CORRUPTED = "rule-made corruptions"

pytestmark = pytest.mark.slow


def read(name: str) -> list[dict]:
    with open(DATA_DIR / name, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def share(k: int, n: int) -> str:
    """``k of n: share (low to high)``, the exact interval from statsmodels."""
    if n == 0:
        return "undefined: 0 of 0"
    low, high = proportion_confint(k, n, alpha=0.05, method="beta")
    return f"{k} of {n}: {k / n:.2f} ({low:.2f} to {high:.2f})"


@pytest.fixture(scope="module")
def lesson(tmp_path_factory):
    folder = tmp_path_factory.mktemp("reviews")
    path = reviews.write_template(folder / "student.csv", reviews.load_review())
    rows = list(csv.DictReader(open(path, newline="", encoding="utf-8")))
    book = {r["review_id"]: r for r in read(REVIEW_FILE)}
    for row in rows[:30]:  # the book's verdicts, but R002 rejected
        row.update(verdict=book[row["review_id"]]["verdict"], reason=book[row["review_id"]]["reason"],
                   reviewer="student", reviewed_on="2026-12-03")
    rows[1].update(verdict=review.NOT_SUPPORTED, reason="claim not in cited passage")
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(reviews.REVIEW_COLUMNS), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return execute(LESSON, {**os.environ, config.REVIEWS_DIR: str(folder)})


@pytest.fixture(scope="module")
def expected():
    """Every review row with its group, its passages and the screen's label, recomputed."""
    texts = dict(zip(load_riverton().handbook["passage_id"], load_riverton().handbook["text"]))
    given = {}
    for name in ("riverton-handbook-questions.csv", "riverton-extended-questions.csv"):
        for retriever in ("tfidf", "hybrid"):
            riverton = load_riverton(questions=name)
            ranked = fit_retriever(retriever, riverton.handbook).rank(riverton.questions, k=RETRIEVAL_K)
            for qid, group in ranked.sort_values("rank").groupby("question_id"):
                given[(retriever, qid)] = tuple(group["passage_id"])
    rows, by_id = [], {}
    source_of = {r["transcript_key"]: r["source_review_id"] for r in read(CORRUPTIONS_FILE)}
    for row in read(REVIEW_FILE):
        corrupted = row["reader"] == "corruption"
        source = by_id[source_of[row["transcript_key"]]] if corrupted else row
        retrieved = given.get((reviews.retriever_of(source["reader"], source["decoding"]),
                               row["question_id"]), ())
        reply = parsing.parse_reader_output(reviews.unescape_reply(row["reviewed_reply"]))
        checks = screen.screen_reply(reply, retrieved, texts)
        group = (CORRUPTED if corrupted else "sentence baseline"
                 if row["reader"] == BASELINE_READER else "the two models")
        by_id[row["review_id"]] = {**row, "group": group, "held": not all(checks.values()),
                                   "bad": row["verdict"] == review.NOT_SUPPORTED,
                                   "system": reviews.system_label(row["reader"], row["decoding"])}
        rows.append(by_id[row["review_id"]])
    return rows


def distinct(rows):
    seen, kept = set(), []
    for row in rows:
        if (row["group"], row["question_id"], row["reviewed_reply"]) not in seen:
            seen.add((row["group"], row["question_id"], row["reviewed_reply"]))
            kept.append(row)
    return kept


def rates(rows, flag="held"):
    bad = [r for r in rows if r["bad"]]
    good = [r for r in rows if r["verdict"] == review.SUPPORTED]
    return (share(sum(bool(r[flag]) for r in bad), len(bad)),
            share(sum(not r[flag] for r in good), len(good)))


def test_the_replies_and_the_review_are_the_record(lesson, expected):
    kept = distinct(expected)
    shown = table_rows(lesson, "replies")
    assert [r["System"] for r in shown] == list(dict.fromkeys(r["system"] for r in expected))
    for row in shown:
        mine = [r for r in expected if r["system"] == row["System"]]
        assert row["Replies"] == len(mine)
        assert row["Distinct replies"] == sum(r["system"] == row["System"] for r in kept)
        for verdict in review.VERDICTS:
            assert row[verdict[0].upper() + verdict[1:]] == sum(r["verdict"] == verdict for r in mine)
    assert [(r["Review"], r["Verdict"], r["Reason"]) for r in table_rows(lesson, "review")] == [
        (r["review_id"], r["verdict"], r["reason"]) for r in expected]
    assert [r["Reason"] for r in table_rows(lesson, "vocabulary")] == list(review.REASONS)


def test_the_corruptions_their_rules_and_the_reasons_that_differ(lesson, expected):
    made = read(CORRUPTIONS_FILE)
    kinds = Counter(r["kind"] for r in made)
    assert {r["Kind"]: r["Replies"] for r in table_rows(lesson, "corruption_rules")} == kinds
    assert len(made) >= 40 and len(kinds) >= 5
    reviewed = {r["transcript_key"]: r for r in expected}
    differ = [(reviewed[m["transcript_key"]]["review_id"], m["expected_reason"])
              for m in made if reviewed[m["transcript_key"]]["reason"] != m["expected_reason"]]
    assert [(r["Review"], r["Reason the rule expects"])
            for r in table_rows(lesson, "corruption_reasons")] == differ


def test_validity_per_group_and_per_kind_on_distinct_replies(lesson, expected):
    kept = [r for r in distinct(expected) if r["verdict"] in YES_NO]
    for row in table_rows(lesson, "validity"):
        mine = [r for r in kept if r["group"] == row["System"]]
        assert (row["Sensitivity"], row["Specificity"]) == rates(mine)
        assert row["Unsupported replies"] == sum(r["bad"] for r in mine)
    assert [r["System"] for r in table_rows(lesson, "validity")] == [
        "the two models", "sentence baseline", CORRUPTED]
    for row in table_rows(lesson, "kinds"):
        mine = [r for r in kept if r["group"] == CORRUPTED and r["decoding"] == row["Kind"]]
        assert row["Sensitivity"] == rates(mine)[0]


def test_the_judge_beside_its_floors_and_the_graded_scores(lesson, expected):
    kept = [r for r in distinct(expected) if r["verdict"] in YES_NO and r["group"] != CORRUPTED]
    requests = reviews.review_requests(reviews.load_review())
    answers = reviews.judge_replies(load_reader(judge.JUDGE_READER, mode="recorded"), requests)
    said = {r.review_id: (r.judge_raw.strip() == "no", 1 - float(r.judge_p_yes))
            for r in answers.itertuples()}
    for row in kept:
        row["judge_no"], row["doubt"] = said[row["review_id"]]
        row["uncited"] = row["reviewed_sources"] == "none"
    shown = {r["Signal"]: r for r in table_rows(lesson, "judge")}
    for name, flag, rows in (("no citation means not supported", "uncited", kept),
                             ("the screen", "held", kept), ("the SmolLM2 judge", "judge_no", kept),
                             ("the judge on SmolLM2's own replies", "judge_no",
                              [r for r in kept if r["reader"] == judge.JUDGE_READER])):
        assert (shown[name]["Sensitivity"], shown[name]["Specificity"]) == rates(rows, flag), name
    graded = table_rows(lesson, "auc")[0]
    assert graded["Area under the ROC curve"] == f"{roc_auc_score([r['bad'] for r in kept], [r['doubt'] for r in kept]):.2f}"


def test_no_share_at_0_or_1_is_shown_with_a_percentile_interval(lesson, expected):
    """Every resample gives a share of 0 or 1 again, so its percentile interval would be a
    point: the bootstrap and correction tables send the reader elsewhere instead."""
    kept = [r for r in expected if r["verdict"] in YES_NO]
    for row in table_rows(lesson, "bootstrap"):
        bad = [r["held"] for r in kept if r["group"] == row["System"] and r["bad"]]
        good = [not r["held"] for r in kept if r["group"] == row["System"] and not r["bad"]]
        for label, calls in (("Sensitivity", bad), ("Specificity", good)):
            at_bound = bool(calls) and sum(calls) in (0, len(calls))
            assert row[label].startswith("none: every resample gives") == at_bound, (
                row["System"], label, row[label])
    assert not [value for row in table_rows(lesson, "bootstrap") + table_rows(lesson, "corrected")
                for value in row.values() if str(value).startswith(("0.00 to 0.00", "1.00 to 1.00"))]


def test_the_corrected_pass_rate_says_its_batch_and_its_truth(lesson, expected):
    kept = [r for r in distinct(expected) if r["verdict"] in YES_NO and r["group"] != CORRUPTED]
    shifted = table_rows(lesson, "corrected")[1]
    baseline_rows = [r for r in kept if r["group"] == "sentence baseline"]
    assert float(shifted["Screen's pass rate"]) == pytest.approx(
        np.mean([not r["held"] for r in baseline_rows]), abs=0.005)
    assert float(shifted["True share supported (review)"]) == pytest.approx(
        np.mean([not r["bad"] for r in baseline_rows]), abs=0.005)


def test_the_second_reading_beside_the_signals(lesson, expected):
    first = {r["review_id"]: r for r in expected}
    second = [r for r in read(SECOND_READING_FILE)
              if r["verdict"] in YES_NO and first[r["review_id"]]["verdict"] in YES_NO]
    row = table_rows(lesson, "second")[0]
    assert row["Rater"] == "the second reader"
    bad = [r for r in second if first[r["review_id"]]["bad"]]
    good = [r for r in second if not first[r["review_id"]]["bad"]]
    assert row["Of the first reader's unsupported replies: called unsupported"] == share(
        sum(r["verdict"] == review.NOT_SUPPORTED for r in bad), len(bad))
    assert row["Of the first reader's supported replies: called supported"] == share(
        sum(r["verdict"] == review.SUPPORTED for r in good), len(good))


def test_a_student_review_is_set_beside_the_book(lesson, book):
    (row,) = table_rows(lesson, "yours")
    assert (row["Review file"], row["Replies reviewed"]) == ("student.csv", 30)
    assert row["Same verdict"].startswith("29 of 30")
    assert table_rows(book.lesson(LESSON).nb, "yours") == []
    assert "This run found 0 review files" in markdown_outputs(book.lesson(LESSON).nb)


def _first_corrupted_row(path):
    rows = list(csv.DictReader(open(path, newline="", encoding="utf-8")))
    return next(n for n, r in enumerate(rows, 1) if r["reader"] == "corruption")


EDITS = {
    "a corrupted reply's verdict": (
        lambda project: recorded(field(_first_corrupted_row(project / "data/riverton" / REVIEW_FILE),
                                       verdict=review.SUPPORTED,
                                       reason="answer stated in cited passage"))(
            project / "data/riverton" / REVIEW_FILE),
        "all 95 not supported, as the rules expect"),
    "a corruption rule": (
        lambda project: replace(b'"H08": "paid every Friday"', b'"H08": "paid every Monday"')(
            project / "helpers" / "corruptions.py"),
        "the rules, applied to the review now, make the replies of the file"),
    "a second-reading verdict": (
        lambda project: recorded(field(1, verdict=review.SUPPORTED,
                                       reason="answer stated in cited passage"))(
            project / "data/riverton" / SECOND_READING_FILE),
        "72 read (17, 25, 30); 35 fixed by construction, all agreed; 36 of the other 37"),
}


@pytest.mark.parametrize("edit", EDITS)
def test_a_changed_record_stops_the_page_at_the_sentence_that_no_longer_holds(tmp_path, edit):
    change, sentence = EDITS[edit]
    project = copy_project(tmp_path / "book")
    change(project)
    env = {**os.environ, "PYTHONPATH": str(project), config.REVIEWS_DIR: "tests/no-student-reviews"}
    with pytest.raises(ChapterFailure) as stopped:
        LessonRun(project, chapter_source(LESSON), env, timeout=900).close()
    assert "ClaimMismatch" in str(stopped.value) and sentence in str(stopped.value), str(stopped.value)
