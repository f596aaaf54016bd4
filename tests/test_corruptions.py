"""Lesson 4's rule-made corruptions (helpers/corruptions.py): each rule on a worked example
and where it cannot apply; the rules applied to a review; the committed file, transcript
entries and review rows, which must be what the rules make of the review now."""
from __future__ import annotations

import csv
import dataclasses
import shutil

import pandas as pd
import pytest

from helpers import corruptions
from helpers.corruptions import (CLAIM_NOT_IN, CONTRADICTS, CORRUPTION_READER, FIGURE_NOT_IN,
                                 RIGHT_FIGURE, Reply, corrupt_review)
from runtime.files import write_csv_atomic
from runtime.fixture import CORRUPTIONS_FILE, REVIEW_FILE, FixtureError, load_handbook, validated
from runtime.paths import DATA_DIR
from runtime.records import read_transcript
from runtime.reviews import corruption_replies, load_review, system_label

TEXTS = dict(load_handbook()[["passage_id", "text"]].to_numpy())
STIPEND = "Data Support Certificate students receive a training stipend of $150 per week."


def reply(answer, sources=("H08",), retrieved=("H08", "H05", "H11"), acceptable=(), gold="H08"):
    return Reply(answer, tuple(sources), tuple(retrieved), TEXTS, tuple(acceptable), gold)


@pytest.mark.parametrize(("rule", "given", "answer", "sources", "reason"), [
    ("number_changed", reply("$150 per week"), "$250 per week", ("H08",), FIGURE_NOT_IN),
    ("number_changed", reply("Meets on two Saturday mornings in September, as DSC-105.",
                             ("H10",), acceptable=["two Saturday mornings"]),
     "Meets on three Saturday mornings in September, as DSC-105.", ("H10",), FIGURE_NOT_IN),
    ("number_changed", reply("NO PRIOR DATA EXPERIENCE IS REQUIRED", ("H12",)), None, None, None),
    ("negation", reply("Laptops may not be taken home.", ("H15",)), "Laptops may be taken home.",
     ("H15",), CONTRADICTS),
    ("negation", reply("NO PRIOR DATA EXPERIENCE IS REQUIRED", ("H12",)),
     "PRIOR DATA EXPERIENCE IS REQUIRED", ("H12",), CONTRADICTS),
    ("negation", reply(STIPEND), STIPEND.replace("receive", "do not receive"), ("H08",),
     CONTRADICTS),
    ("negation", reply("The workshop meets in September.", ("H10",)),
     "The workshop does not meet in September.", ("H10",), CONTRADICTS),
    ("negation", reply("Bring a photo ID.", ("H07",)), "Do not bring a photo ID.", ("H07",),
     CONTRADICTS),
    ("negation", reply("$150 per week"), None, None, None),
    ("wrong_item", reply("$150 per week"), "$90 per week", ("H08",), RIGHT_FIGURE),
    ("wrong_item", reply("The forklift course is FOL-210.", ("H09",), acceptable=["FOL-210"]),
     "The forklift course is DSC-104.", ("H09",), RIGHT_FIGURE),
    ("wrong_item", reply("October 15", ("H14",)), None, None, None),
    ("other_programme", reply(STIPEND), STIPEND.replace("Data Support Certificate",
                                                        "Forklift Operator Licence"),
     ("H08",), CLAIM_NOT_IN),
    ("other_programme", reply("$150 per week"), None, None, None),
    ("wrong_citation", reply(STIPEND), STIPEND, ("H05",), FIGURE_NOT_IN),
    ("wrong_citation", reply("No experience is needed.", ("H12",), ("H12", "H08", "H03"), gold="H12"),
     "No experience is needed.", ("H08",), CLAIM_NOT_IN),
    ("wrong_citation", reply(STIPEND, retrieved=("H08",)), None, None, None),
    ("unsupported_addition", reply("$150 per week"), "$150 per week, paid every Friday",
     ("H08",), CLAIM_NOT_IN),
    ("unsupported_addition", reply("Applications close on October 15.", ("H14",)),
     "Applications close on October 15, at 5 p.m.", ("H14",), FIGURE_NOT_IN),
    ("unsupported_addition", reply("Classes meet from 8 a.m.", ("H11",)),
     "Classes meet from 8 a.m., at the Mill Street yard.", ("H11",), CLAIM_NOT_IN),
    ("unsupported_addition", reply("NO PRIOR DATA EXPERIENCE IS REQUIRED", ("H12",)),
     "NO PRIOR DATA EXPERIENCE IS REQUIRED, BUT A TYPING TEST IS REQUIRED", ("H12",),
     CLAIM_NOT_IN),
    ("unsupported_addition", reply("none cited", ()), None, None, None),
])
def test_each_rule_on_a_worked_example(rule, given, answer, sources, reason):
    made = getattr(corruptions, rule)(given)
    expected = None if answer is None else corruptions.Corruption(answer, sources, reason)
    assert made == expected


def test_the_rules_make_one_reply_per_kind_and_question_and_never_the_same_twice():
    """Only supported replies are sources (never a corruption); for each kind and question
    the first reply the rule applies to; the same reply to one question is made once."""
    rows = [("S1", "qwen", "Q1", "$150 per week", "supported"),
            ("S2", "qwen", "Q1", STIPEND, "supported"),
            ("S3", "base", "Q1", STIPEND, "supported"),  # a copy of S2
            ("S4", "base", "X03", STIPEND, "supported"),
            ("S5", "base", "X04", STIPEND, "not supported"),
            ("S6", CORRUPTION_READER, "X04", STIPEND, "supported")]
    review = pd.DataFrame([{"review_id": i, "reader": r, "question_id": q, "answer": a,
                            "sources": ("H08",), "verdict": v, "transcript_key": i}
                           for i, r, q, a, v in rows])
    questions = pd.DataFrame({"question_id": ["Q1", "X03", "X04"], "gold_passage_id": "H08",
                              "acceptable_list": [("$150",)] * 3})
    made = corrupt_review(review, questions, TEXTS, {i: ("H08", "H05") for i, *_ in rows})
    by_kind = made.groupby("kind", sort=False)["source_review_id"].agg(list).to_dict()
    assert by_kind == {"number changed": ["S1", "S4"], "negation": ["S2", "S4"],
                       "right figure, wrong item": ["S1", "S4"], "other programme's fact": ["S2", "S4"],
                       "citation moved": ["S1", "S4"], "unsupported addition": ["S1", "S4"]}
    assert not made.duplicated(["question_id", "reply"]).any()
    assert set(made["expected_verdict"]) == {"not supported"}


def read(name):
    with open(DATA_DIR / name, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_the_committed_corruptions_are_the_rules_applied_to_the_review_now(monkeypatch):
    rows, entries = corruption_replies()
    committed = read(CORRUPTIONS_FILE)
    assert [list(r.values()) for r in committed] == rows
    assert len(rows) >= 40 and all(sum(r[1] == kind for r in rows) >= 8 for kind in corruptions.KINDS)
    recorded = {e.key: e for e in read_transcript() if e.collection == "corruptions"}
    assert list(recorded) == [e.key for e in entries]
    assert all(dataclasses.replace(e, recorded_on=recorded[e.key].recorded_on) == recorded[e.key]
               for e in entries)
    # A changed rule no longer makes the committed replies: the comparison above fails.
    monkeypatch.setitem(corruptions.ADDITIONS, "H08", "paid monthly")
    changed = [new for new, old in zip(corruption_replies()[0], rows) if new != old]
    assert changed and all(new[1] == "unsupported addition" for new in changed)


def test_every_corruption_is_reviewed_and_every_disagreement_with_its_rule_is_explained():
    book = load_review()
    made = {r["transcript_key"]: r for r in read(CORRUPTIONS_FILE)}
    rows = book[book["reader"] == CORRUPTION_READER]
    assert sorted(rows["transcript_key"]) == sorted(made)
    assert {system_label(r, d) for r, d in zip(rows["reader"], rows["decoding"])} == {"rule-made corruption"}
    assert list(rows["decoding"]) == [made[k]["kind"] for k in rows["transcript_key"]]
    differs = [(v, r) != (made[k]["expected_verdict"], made[k]["expected_reason"])
               for k, v, r in zip(rows["transcript_key"], rows["verdict"], rows["reason"])]
    assert differs == list(rows["note"].str.startswith("The rule expects"))


@pytest.mark.parametrize(("column", "value", "message"), [
    ("expected_reason", "answer stated in cited passage", "goes with the verdict 'supported'"),
    ("source_review_id", "R003", "R003 is not a supported reply with key"),
    ("source_review_id", "R999", "value 'R999' is not a review_id of support-review.csv"),
    ("kind", "typo", "is not one of number changed"),
])
def test_a_bad_corruption_row_is_refused_naming_its_row_and_column(tmp_path, column, value, message):
    for name in (REVIEW_FILE, CORRUPTIONS_FILE):
        shutil.copyfile(DATA_DIR / name, tmp_path / name)
    rows = read(CORRUPTIONS_FILE)
    rows[2][column] = value
    write_csv_atomic(tmp_path / CORRUPTIONS_FILE, list(rows[0]), [list(row.values()) for row in rows])
    with pytest.raises(FixtureError, match=rf"row 3 \(line 4\), column '{column}': .*{message}"):
        validated(tmp_path, CORRUPTIONS_FILE)
