"""The extended question set of lesson 2 keeps its promises.

It loads through the fixture loader, which checks its schema, its header, its encoding
and its row count and fingerprint against the metadata (test_fixture.py and
test_data_check.py guard those checks).
"""
from __future__ import annotations

import pytest

from helpers.text import content_words, normalize_answer
from runtime.fixture import EXTENDED_QUESTIONS_FILE, load_riverton

PARAPHRASE = "paraphrase without shared content words"


@pytest.fixture(scope="module")
def extended():
    return load_riverton(questions=EXTENDED_QUESTIONS_FILE)


def test_at_least_thirty_questions_of_each_kind_in_an_x_series(extended):
    questions = extended.questions
    assert len(questions) >= 30
    counts = questions["probe_type"].value_counts()
    for kind in (PARAPHRASE, "direct lookup", "unanswerable", "false premise"):
        assert counts.get(kind, 0) >= 5, kind
    ids = questions["question_id"].tolist()
    assert ids == [f"X{n:02d}" for n in range(1, len(ids) + 1)]
    assert not set(ids) & set(load_riverton().questions["question_id"])


def test_paraphrases_share_no_content_word_with_their_gold_passage_and_lookups_do(extended):
    texts = dict(zip(extended.handbook["passage_id"], extended.handbook["text"]))
    checked = 0
    for row in extended.questions.itertuples(index=False):
        if row.probe_type in (PARAPHRASE, "direct lookup"):
            gold = texts[row.gold_passage_id]
            shared = set(content_words(row.question)) & set(content_words(gold))
            assert bool(shared) == (row.probe_type == "direct lookup"), (row.question_id, shared)
            checked += 1
    assert checked >= 10


def test_actions_golds_and_answers_agree_with_the_probe_type(extended):
    for row in extended.questions.itertuples(index=False):
        if row.probe_type == "unanswerable":
            assert row.expected_action == "abstain"
            assert row.gold_passage_id is None and row.acceptable_list == ()
        elif row.probe_type == "false premise":
            assert row.expected_action == "flag premise"
            assert row.gold_passage_id is not None and row.acceptable_list == ()
        else:
            assert row.expected_action == "answer"
            assert row.gold_passage_id is not None and row.acceptable_list


def test_answers_are_short_and_found_in_the_gold_passage(extended):
    texts = dict(zip(extended.handbook["passage_id"], extended.handbook["text"]))
    for row in extended.questions.itertuples(index=False):
        for variant in row.acceptable_list:
            assert len(variant.split()) <= 8, (row.question_id, variant)
        if row.acceptable_list and row.acceptable_list[0].lower() not in {"yes", "no"}:
            # At least one variant appears, after normalisation, in the gold passage.
            gold = normalize_answer(texts[row.gold_passage_id])
            assert any(normalize_answer(v) in gold for v in row.acceptable_list), row.question_id
