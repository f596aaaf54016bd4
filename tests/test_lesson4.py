"""Lesson 4 executed from a clean kernel, its figures read back and checked against the record.

The expected values are computed here from ``data/riverton/support-review.csv`` read with
the csv module, the transcript, and the screen applied afresh to the reviewed answers, so
a page that drifted from its record would fail. One run has a student review in a
temporary folder (through ``RIVERTON_REVIEWS_DIR``), so the two-reviewer path executes;
another has none (the session's execution, shared with the exercise tests: ``book.lesson``).
"""
from __future__ import annotations

import csv
import os
import re
from collections import Counter

import pytest

import numpy as np
from sklearn.metrics import roc_auc_score

from helpers import agreement, baseline, dense, judge, parsing, review, screen
from runtime import reviews
from runtime.fixture import EXTENDED_QUESTIONS_FILE, QUESTIONS_FILE, REVIEW_FILE, load_riverton
from runtime.lessons import lesson_retrieval
from runtime.paths import DATA_DIR, LESSONS_DIR
from runtime.readers import load_reader

from lesson_outputs import execute, markdown_outputs, table_rows, tables

LESSON = LESSONS_DIR / "04-human-support-review.ipynb"
SEED, RESAMPLES = agreement.BOOTSTRAP_SEED, agreement.BOOTSTRAP_RESAMPLES
INTERVAL_LABEL = f"Kappa, {agreement.BOOTSTRAP_LEVEL:.0%} interval"
#: The folder the exercise tests point lesson 4 at: it does not exist, so no student review.
REVISED = "revised on re-reading:"
YES_NO = (review.SUPPORTED, review.NOT_SUPPORTED)

pytestmark = pytest.mark.slow


def record() -> list[dict]:
    with open(DATA_DIR / REVIEW_FILE, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


# A student who reviewed the first 30 rows: the book's verdict on most, another on three.
DISAGREE = {"R002": ("not supported", "claim not in cited passage"),
            "R005": ("not supported", "wrong abstention"),
            "R049": ("not applicable", "correct abstention")}


def write_student_review(folder):
    rows = record()
    path = reviews.write_template(folder / "student.csv", reviews.load_review())
    with open(path, newline="", encoding="utf-8") as handle:
        blank = list(csv.DictReader(handle))
    for row, book in zip(blank[:30] + blank[48:50], rows[:30] + rows[48:50]):
        verdict, reason = DISAGREE.get(row["review_id"], (book["verdict"], book["reason"]))
        row.update(verdict=verdict, reason=reason, reviewer="student",
                   reviewed_on="2026-12-03")
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(reviews.REVIEW_COLUMNS),
                                lineterminator="\n")
        writer.writeheader()
        writer.writerows(blank)
    return path


@pytest.fixture(scope="module")
def lesson(tmp_path_factory):
    folder = tmp_path_factory.mktemp("reviews")
    write_student_review(folder)
    return execute(LESSON, {**os.environ, reviews.REVIEWS_ENV: str(folder)})


@pytest.fixture(scope="module")
def lesson_without_review(book):
    """The session's execution: no student review (tests/book_session.py)."""
    return book.lesson(LESSON).nb


@pytest.fixture(scope="module")
def expected():
    """The screen, the action and the judge recomputed from the record and the fixture:
    each reply screened with the passages its retriever gives (tf-idf's, or the hybrid's
    for the baseline's hybrid replies)."""
    handbook = load_riverton().handbook
    texts = dict(zip(handbook["passage_id"], handbook["text"]))
    retrieved, expected_action, question_text = {}, {}, {}
    for name in (QUESTIONS_FILE, EXTENDED_QUESTIONS_FILE):
        for retriever in ("tfidf", "hybrid"):
            fixture, ranked = lesson_retrieval(name, retriever=retriever)
            for qid, group in ranked.sort_values("rank").groupby("question_id"):
                retrieved[(retriever, qid)] = tuple(group["passage_id"])
        expected_action.update(zip(fixture.questions["question_id"],
                                   fixture.questions["expected_action"]))
        question_text.update(zip(fixture.questions["question_id"],
                                 fixture.questions["question"]))
    rows = []
    for row in record():
        parsed = row["reviewed_answer"] != ""
        sources = review.sources_of(row["reviewed_sources"]) if parsed else ()
        answer = row["reviewed_answer"] or None
        action = parsing.action_of(answer) if parsed else "parse failure"
        given = retrieved.get((reviews.retriever_of(row["reader"], row["decoding"]),
                               row["question_id"]), ())
        checks = screen.screen_reply(answer, sources, parsed, action, given, texts)
        rows.append({**row, "held": not all(checks.values()),
                     "action_correct": action == expected_action[row["question_id"]],
                     "retrieved": given, "cited": sources,
                     "system": reviews.system_label(row["reader"], row["decoding"]),
                     "question": question_text[row["question_id"]]})
    requests = judge.judge_requests(reviews.load_review(), question_text, texts)
    replies = reviews.judge_replies(load_reader(judge.JUDGE_READER, mode="recorded"), requests)
    said_no = dict(zip(replies["review_id"], ~replies["judge_supported"].astype(bool)))
    for row in rows:
        no = said_no.get(row["review_id"])
        row["judge_no"] = None if no is None else bool(no)
    return rows


def yes_no(rows):
    return [r for r in rows if r["verdict"] in YES_NO]


def summary(rows, signal):
    """A signal's summary as the page computes it: its bootstrap resamples questions."""
    judged = yes_no(rows)
    flagged = [bool(signal(r)) for r in judged]
    unsupported = [r["verdict"] == review.NOT_SUPPORTED for r in judged]
    return agreement.agreement_summary("x", flagged, unsupported,
                                       units=[r["question_id"] for r in judged],
                                       unit="question", resamples=RESAMPLES, seed=SEED)


SIGNALS = {"support screen": lambda r: r["held"],
           "action label": lambda r: not r["action_correct"],
           "SmolLM2 judge": lambda r: r["judge_no"]}
# Table columns by label, and the key of agreement_summary or per_group_table behind each.
COUNTS = {"Flagged, not supported": "flagged_unsupported", "Flagged, supported":
          "flagged_supported", "Not flagged, not supported": "passed_unsupported",
          "Not flagged, supported": "passed_supported"}
RATES = {"Sensitivity": "sensitivity", "Specificity": "specificity"}


def same(row, computed, labels) -> bool:
    """Whether a shown row holds, under each label, the computed value named for it."""
    return {label: row[label] for label in labels} == {label: computed[key]
                                                       for label, key in labels.items()}


def test_the_review_table_is_the_record(lesson):
    shown = table_rows(lesson, "review")
    rows = record()
    assert [(r["Review"], r["Verdict"], r["Reason"], r["Note"]) for r in shown] == [
        (r["review_id"], r["verdict"], r["reason"], r["note"]) for r in rows]
    for row, shown_row in zip(rows, shown):
        cited = shown_row["Cited passage text"]
        if row["reviewed_answer"] == "":
            assert cited == "(the reply did not parse)"
        elif row["reviewed_sources"] == "none":
            assert cited == "none"
        else:
            ids = row["reviewed_sources"].split(", ")
            assert cited.startswith(ids[0] + ": ") and all(f"{i}: " in cited for i in ids)
        assert shown_row["Question"].startswith(row["question_id"] + ": ")
    assert shown[0]["Raw reply (`⏎` marks a line break)"] == \
        "Answer: $150 per week ⏎ Sources: H08"
    assert shown[0]["Reply from"] == "Qwen2.5-1.5B-Instruct"
    assert shown[89]["Reply from"] == "SmolLM2-135M-Instruct under the grammar"
    assert shown[-1]["Reply from"] == "hybrid sentence baseline"


def test_counts_by_system_verdict_and_reason(lesson):
    rows = record()
    by_group = Counter((reviews.system_label(r["reader"], r["decoding"]), r["verdict"])
                       for r in rows)
    for shown in table_rows(lesson, "verdicts"):
        for verdict in review.VERDICTS:
            label = verdict[0].upper() + verdict[1:]
            assert shown[label] == by_group[(shown["System"], verdict)]
    assert sum(r["Replies"] for r in table_rows(lesson, "verdicts")) == len(rows) == 174
    reasons = Counter(r["reason"] for r in rows)
    assert {r["Reason"]: r["Replies"] for r in table_rows(lesson, "reasons")} == reasons
    assert [r["Replies"] for r in table_rows(lesson, "replies")] == [6, 42, 42, 42, 42]
    # The review has both kinds of reply in number, from at least three systems.
    verdicts = Counter(r["verdict"] for r in rows)
    assert verdicts[review.SUPPORTED] >= 25 and verdicts[review.NOT_SUPPORTED] >= 25
    assert len({system for (system, verdict) in by_group if verdict in YES_NO
                and by_group[(system, verdict)]}) >= 3


def _cells(table):
    return {row["Human verdict"]: row for row in table}


def test_screen_against_the_record(lesson, expected):
    s = summary(expected, lambda r: r["held"])
    shown = _cells(table_rows(lesson, "screen_2x2"))
    assert [shown[v][c] for v in ("not supported", "supported") for c in (
        "Held for human review", "Not flagged by screen")] == [s[key] for key in (
            "flagged_unsupported", "passed_unsupported", "flagged_supported", "passed_supported")]
    missed = [r["review_id"] for r in expected
              if r["verdict"] == review.NOT_SUPPORTED and not r["held"]]
    assert [r["Review"] for r in table_rows(lesson, "screen_misses")] == missed
    by_reason = Counter(r["reason"] for r in expected
                        if r["verdict"] == review.NOT_SUPPORTED and not r["held"])
    assert {r["Reason"]: r["Missed"] for r in table_rows(lesson, "screen_reasons")
            if r["Missed"]} == dict(by_reason)


def test_agreement_table_matches_the_record(lesson, expected):
    shown = table_rows(lesson, "agreement")
    coefficients = table_rows(lesson, "coefficients")
    assert len(shown) == len(coefficients) == 3
    for row, coefficient_row, signal in zip(shown, coefficients, SIGNALS.values()):
        s = summary(expected, signal)
        assert row["Replies"] == s["rows"] == sum(r["verdict"] in YES_NO for r in record())
        assert same(row, s, {**COUNTS, **RATES, "PPV": "ppv", "NPV": "npv"}), row
        assert same(coefficient_row, s, {"Kappa": "kappa", "kappa_max": "kappa_max",
                                         "PABAK": "pabak", "AC1": "ac1",
                                         INTERVAL_LABEL: "kappa_interval"})
    judge_cells = _cells(table_rows(lesson, "judge_2x2"))
    assert judge_cells["supported"]["Judge replied yes"] == shown[2]["Not flagged, supported"]
    action_cells = _cells(table_rows(lesson, "action_2x2"))
    assert action_cells["not supported"]["Expected action"] == \
        shown[1]["Not flagged, not supported"]


@pytest.mark.parametrize("label", ["fig-agreement", "fig-roc"])
def test_each_figure_has_alt_text_and_one_image(lesson, label):
    (cell,) = [c for c in lesson.cells if c.cell_type == "code"
               and c.source.startswith(f"#| label: {label}")]
    assert "#| fig-alt: " in cell.source
    images = [o for o in cell.outputs if "image/png" in o.get("data", {})]
    assert len(images) == 1


def test_changed_reply_rule_on_the_live_run(lesson):
    by_id = {r["review_id"]: r for r in record()}
    live = table_rows(lesson, "live_check")
    assert [r["Question"] for r in live] == ["Q1", "Q4", "Q6"]
    for row in live:
        reviewed = by_id[row["Review"]]
        assert reviewed["decoding"] == "grammar-constrained (llguidance)"
        # The live run sends the very prompts that were recorded, so the key must be the
        # same: only the text can differ (another machine, another library version).
        assert row["Status"] in (review.SAME_REPLY, review.REPLY_CHANGED)
        if row["Status"] == review.SAME_REPLY:
            assert row["Verdict that applies"] == reviewed["verdict"]
            assert row["Reply in this run"] == row["Reviewed reply"]
        else:
            assert row["Verdict that applies"] == "none"
    control = table_rows(lesson, "control_check")
    assert control[0]["Status"] == review.REPLY_CHANGED
    assert control[0]["Verdict that applies"] == "none"
    assert control[0]["Reply (first row edited)"].startswith("Answer: About ")


def test_the_student_review_is_compared_with_the_book(lesson):
    (row,) = table_rows(lesson, "student_agreement")
    book = {r["review_id"]: r["verdict"] for r in record()}
    ids = [r["review_id"] for r in record()][:30] + [r["review_id"] for r in record()][48:50]
    mine = [DISAGREE.get(i, (book[i],))[0] for i in ids]
    theirs = [book[i] for i in ids]
    assert row["Replies reviewed"] == 32
    assert row["Same verdict as the book"] == 32 - len(DISAGREE)
    assert row["Kappa with the book"] == agreement.cohen_kappa(theirs, mine).text()
    assert row[INTERVAL_LABEL] == agreement.bootstrap_kappa(  # the book's verdicts as reference
        mine, theirs, resamples=RESAMPLES, seed=SEED).text()
    assert "No review of your own was found" not in markdown_outputs(lesson)
    cross = {r["Book's verdict"]: r for r in table_rows(lesson, "student_cross:student.csv")}
    assert cross["supported"]["Yours: not supported"] == 1  # R002
    assert cross["not applicable"]["Yours: not supported"] == 1  # R005




def test_misses_by_reason_for_every_signal(lesson, expected):
    """One table: per reason, the unsupported replies and how many each signal missed."""
    signals = {"Missed by the screen": lambda r: r["held"],
               "Missed by the action label": lambda r: not r["action_correct"],
               "Missed by the judge": lambda r: r["judge_no"]}
    unsupported = [r for r in expected if r["verdict"] == review.NOT_SUPPORTED]
    shown = table_rows(lesson, "misses_by_reason")
    assert [r["Reason"] for r in shown] == [
        reason for reason in review.REASONS if any(r["reason"] == reason for r in unsupported)]
    for row in shown:
        same = [r for r in unsupported if r["reason"] == row["Reason"]]
        assert row["Unsupported replies"] == len(same)
        for column, signal in signals.items():
            assert row[column] == sum(not signal(r) for r in same), (row["Reason"], column)
    prose = markdown_outputs(lesson)
    missed = sum(not r["held"] for r in unsupported)
    assert f"The screen lets through {missed} of the {len(unsupported)}" in prose


def test_computed_prose_and_the_judge_scope(lesson):
    rows = record()
    asked = [r for r in rows if r["verdict"] in YES_NO]
    unparsed = [r for r in rows if r["reason"] == review.PARSE_FAILURE_REASON]
    prose = markdown_outputs(lesson)
    verdicts = Counter(r["verdict"] for r in rows)
    assert (f"Of the {len(rows)} replies, {verdicts['supported']} are supported by what they "
            f"cite, {verdicts['not supported']} are not") in prose
    assert "This page ran in" in prose and "live mode on this machine" in prose
    assert "))" not in prose  # no doubled parenthesis where a label nests in a remark
    assert (f"The judge is asked about {len(asked)} of the {len(rows)} replies, the ones with "
            "a yes-or-no verdict") in prose
    assert f"The other {len(rows) - len(asked)} are not asked:" in prose
    assert f"and {len(unparsed)} did not parse, so there is no answer" in prose
    judge_cells = _cells(table_rows(lesson, "judge_2x2"))
    assert sum(v for row in judge_cells.values() for k, v in row.items()
               if k != "Human verdict") == len(asked)


def test_revised_rows_and_context_notes_are_listed(lesson, expected):
    rows = record()
    prose = markdown_outputs(lesson)
    revised = [r for r in rows if r["note"].startswith(REVISED)]
    first_day = min(r["reviewed_on"] for r in rows)
    assert all(r["reviewed_on"] > first_day for r in revised)
    for row in revised:
        assert (f"{row['review_id']} ({row['question_id']}, read again on "
                f"{row['reviewed_on']}, now *{row['verdict']}*, *{row['reason']}*): "
                f"{row['note'][len(REVISED):].strip()}") in prose
    # The other rows, day by day, with how many and whose: the baseline's were read later.
    first_read = [r for r in rows if not r["note"].startswith(REVISED)]
    days = []
    for day in sorted({r["reviewed_on"] for r in first_read}):
        that_day = [r for r in first_read if r["reviewed_on"] == day]
        systems = list(dict.fromkeys(reviews.system_label(r["reader"], r["decoding"])
                                     for r in that_day))
        days.append(f"{day} ({len(that_day)} row{'s' if len(that_day) != 1 else ''}: "
                    f"{', '.join(systems)})")
    lead = "Every other row is as first written: " if revised else \
        "Every verdict and reason is as first written: "
    assert lead + "; ".join(days) + "." in prose
    baseline_days = {r["reviewed_on"] for r in rows if r["reader"] == baseline.BASELINE_READER}
    assert baseline_days and min(baseline_days) > first_day
    # Notes that name a passage the reader was not given, did not cite or write.
    raw = {r["review_id"]: review.unescape_reply(r["reviewed_reply"]) for r in rows}
    context = [r["review_id"] for r in expected
               if set(re.findall(r"\bH\d{2}\b", r["note"])) - set(r["retrieved"])
               - set(r["cited"]) - set(re.findall(r"\bH\d{2}\b", raw[r["review_id"]]))]
    assert context
    listed = context[0] if len(context) == 1 else \
        ", ".join(context[:-1]) + " and " + context[-1]
    assert f"{listed} also name{'s' if len(context) == 1 else ''} a handbook passage" in prose


def test_no_typed_counts_in_the_prose():
    """Counts and bootstrap settings appear in prose only where a cell computes them."""
    import nbformat

    nb = nbformat.read(LESSON, as_version=4)
    typed = [str(len(record())), f"{RESAMPLES:,}", str(RESAMPLES),
             f"{agreement.BOOTSTRAP_LEVEL:.0%}"]
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for number in typed:
            assert not re.search(rf"(?<![\d.]){re.escape(number)}(?![\d.])", cell.source), \
                (cell.id, number)


def test_without_a_student_review_the_page_says_how_to_add_one(lesson_without_review,
                                                                  lesson):
    prose = markdown_outputs(lesson_without_review)
    folder = "tests/no-student-reviews"
    assert f"No review of your own was found in `{folder}/`" in prose
    assert f"`python -m runtime review template {folder}/my-review.csv`" in prose
    assert "Kappa with the book" not in str(tables(lesson_without_review))
    shown = set(tables(lesson_without_review))
    assert {"vocabulary", "action_differs"} <= shown  # tables no other test reads
    assert not {name for name in shown if name.startswith("student_")}
    # Everything else is computed as with a student review.
    assert shown == {name for name in tables(lesson) if not name.startswith("student_")}
    assert table_rows(lesson_without_review, "agreement") == table_rows(lesson, "agreement")


# ------------------------------------------------------------------ per class, by system


def test_the_screen_is_read_per_class_with_exact_intervals(lesson_without_review, expected):
    s = summary(expected, SIGNALS["support screen"])
    counts = s["counts"]
    shown = table_rows(lesson_without_review, "screen_rates")
    rates = [agreement.sensitivity, agreement.specificity,
             agreement.positive_predictive_value, agreement.negative_predictive_value]
    assert len(shown) == len(rates)
    for row, rate in zip(shown, rates):
        ratio = rate(counts)
        assert row["Replies"] == f"{ratio.numerator} of {ratio.denominator}"
        assert row["Share"] == f"{ratio.value:.2f}"
        assert row[f"Exact {agreement.INTERVAL_LEVEL:.0%} interval"] == ratio.interval().text()
    coefficients = {r["Coefficient"]: r for r in table_rows(lesson_without_review,
                                                           "screen_coefficients")}
    kappa = coefficients["Cohen's kappa"]
    assert kappa["Value"] == s["kappa"]
    assert float(kappa["Chance agreement (p_e)"]) == pytest.approx(
        s["kappa_result"].expected, abs=5e-4)
    assert coefficients["PABAK"]["Chance agreement (p_e)"] == "0.500"
    # The prose quotes the same rates, and the paradox on the models' replies alone.
    prose = markdown_outputs(lesson_without_review)
    assert (f"the screen holds {counts.flagged_unsupported} of the "
            f"{counts.flagged_unsupported + counts.passed_unsupported} unsupported ones") in prose
    models = [r for r in yes_no(expected) if r["reader"] != baseline.BASELINE_READER]
    model_counts = agreement.confusion([r["held"] for r in models],
                                       [r["verdict"] == review.NOT_SUPPORTED for r in models])
    model_coefficients = agreement.table_coefficients(model_counts)
    assert (f"yet kappa there is only {model_coefficients['kappa'].text()}" in prose
            and f"PABAK ({model_coefficients['pabak'].text()}) and AC1 "
                f"({model_coefficients['ac1'].text()})" in prose)


def test_every_signal_is_split_by_system(lesson_without_review, expected):
    judged = yes_no(expected)
    systems = list(dict.fromkeys(r["system"] for r in expected))
    shown = table_rows(lesson_without_review, "by_system")
    assert len(shown) == len(SIGNALS) * len(systems)
    for (name, signal), start in zip(SIGNALS.items(), range(0, len(shown), len(systems))):
        table = agreement.per_group_table(
            [r["system"] for r in judged], [bool(signal(r)) for r in judged],
            [r["verdict"] == review.NOT_SUPPORTED for r in judged], systems)
        for row, computed in zip(shown[start:start + len(systems)], table.to_dict("records")):
            assert row["Signal"] == name and row["System"] == computed["group"]
            assert same(row, computed, {"Replies": "rows", **COUNTS, **RATES, "Kappa": "kappa"})
    # The rule that knows only the system, beside the signals.
    rule = agreement.majority_by_group([r["system"] for r in judged],
                                       [r["verdict"] == review.NOT_SUPPORTED for r in judged])
    alone = summary([{**r, "rule": f} for r, f in zip(judged, rule)], lambda r: r["rule"])
    first = table_rows(lesson_without_review, "system_alone")[0]
    assert first["Agreement with the review"] == f"{alone['kappa_result'].observed:.0%}"
    assert first["Kappa"] == alone["kappa"]
    assert (f"It agrees with the review on {alone['kappa_result'].observed:.0%} of the "
            f"replies, with kappa {alone['kappa']}.") in markdown_outputs(lesson_without_review)


def test_the_bootstrap_resamples_questions_and_counts_what_it_leaves_out(
        lesson_without_review, expected):
    judged = yes_no(expected)
    models = [r for r in judged if r["reader"] != baseline.BASELINE_READER]
    cases = [(judged, signal) for signal in SIGNALS.values()] + \
        [(models, SIGNALS["support screen"])]
    shown = table_rows(lesson_without_review, "bootstrap")
    assert len(shown) == 2 * len(cases)
    for (frame, signal), pair in zip(cases, zip(shown[::2], shown[1::2])):
        flagged = [bool(signal(r)) for r in frame]
        unsupported = [r["verdict"] == review.NOT_SUPPORTED for r in frame]
        for row, units in zip(pair, ([r["question_id"] for r in frame], None)):
            interval = agreement.bootstrap_kappa(flagged, unsupported, units,
                                                 resamples=RESAMPLES, seed=SEED)
            assert (row["Resamples with no supported reply"],
                    row["Resamples with no unsupported reply"]) == (
                interval.no_supported, interval.no_unsupported)
            assert row[INTERVAL_LABEL] == f"{interval.low:.2f} to {interval.high:.2f}"
    # On the models' replies alone, resamples without a supported reply are left out.
    assert shown[-1]["Resamples with no supported reply"] > 0
    prose = markdown_outputs(lesson_without_review)
    assert (f"{shown[-1]['Resamples with no supported reply']:,} of the {RESAMPLES:,} "
            "resamples of replies") in prose


def test_the_graded_signal_auc_and_its_split_half_threshold(lesson_without_review, expected):
    judged = yes_no(expected)
    texts = dict(zip(load_riverton().handbook["passage_id"], load_riverton().handbook["text"]))
    cited = [" ".join(texts[p] for p in r["cited"] if p in texts) for r in judged]
    similarity = np.full(len(judged), -1.0)
    has = np.array([bool(t) for t in cited])
    similarity[has] = dense.pair_cosines([r["reviewed_answer"] for r, h in zip(judged, has) if h],
                                         [t for t in cited if t])
    bad = np.array([r["verdict"] == review.NOT_SUPPORTED for r in judged])
    is_baseline = np.array([r["reader"] == baseline.BASELINE_READER for r in judged])
    shown = {r["Replies"]: r for r in table_rows(lesson_without_review, "auc")}
    for label, mask in (("every reply with a yes-or-no verdict", np.ones(len(judged), bool)),
                        ("the replies that cite a passage", has),
                        ("the sentence baseline's replies", is_baseline)):
        row = shown[label]
        assert (row["Unsupported"], row["Supported"]) == (int(bad[mask].sum()),
                                                          int((~bad[mask]).sum()))
        # scikit-learn's AUC, an independent implementation, on our scores.
        assert row["Area under the ROC curve"] == f"{roc_auc_score(bad[mask], -similarity[mask]):.2f}"
    grammar = reviews.system_label(judge.JUDGE_READER, "grammar-constrained (llguidance)")
    assert shown[f"{grammar} only"]["Area under the ROC curve"].startswith("undefined: ")
    # The threshold: chosen on one half of the questions, reported on the other.
    questions = [r["question_id"] for r in judged]
    first, second = agreement.split_halves(questions, SEED)
    in_first = np.array([q in first for q in questions])
    threshold = agreement.youden_threshold(-similarity[in_first], bad[in_first].tolist())
    flags = -similarity >= threshold
    tested = agreement.confusion(flags[~in_first].tolist(), bad[~in_first].tolist())
    rows = table_rows(lesson_without_review, "threshold")
    assert rows[1]["Half of the questions"].startswith(f"tested on: {len(second)} questions, "
                                                       f"{tested.rows} replies")
    assert rows[1]["Sensitivity (exact interval)"] == agreement.sensitivity(tested).with_interval()
    assert rows[1]["Specificity (exact interval)"] == agreement.specificity(tested).with_interval()
    assert not set(first) & set(second)


def test_circular_checks_and_the_judge_floor_are_stated(lesson_without_review, expected):
    judged = yes_no(expected)
    shared = {r["Screen check"]: r for r in table_rows(lesson_without_review, "shared_tests")}
    for check, (reason, how) in review.SHARED_TESTS.items():
        given = [r for r in expected if r["reason"] == reason]
        failing = [r for r in given if not r["held"]] if check != "parsed" else []
        assert shared[check]["Review reason"] == reason
        assert shared[check]["Replies given this reason"] == len(given)
        if how.startswith("the same test"):  # one test: every such reply is held
            assert shared[check]["Of them, failing this check"] == len(given)
            assert not failing
    uncited = [r for r in judged if r["reason"] == "no passage cited"]
    assert uncited and all(r["held"] for r in uncited)  # caught by construction
    prose = markdown_outputs(lesson_without_review)
    assert "it needs each question's expected action" in prose
    yes = sum(1 for r in judged if r["judge_no"] is False)
    assert f"The judge replied yes {yes} times and no {len(judged) - yes} times" in prose
    no_citation = [r for r in judged if not r["cited"]]
    said_yes = sum(1 for r in no_citation if r["judge_no"] is False)
    assert (f"To {len(no_citation)} of them its prompt said, in so many words, "
            f"\"{judge.NO_CITED_PASSAGE}\", and it replied yes to {said_yes}") in prose


def test_a_changed_baseline_is_refused_on_the_page(lesson_without_review):
    (cell,) = [c for c in lesson_without_review.cells if c.get("id") == "lesson4-50c"]
    printed = "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")
    assert "column 'reviewed_reply': R" in printed and review.REPLY_CHANGED in printed
    assert f"are now *{review.REPLY_CHANGED}* and have no verdict" in markdown_outputs(
        lesson_without_review)
