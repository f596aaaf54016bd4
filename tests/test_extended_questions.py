"""The extended question set of lesson 2: loads, is fingerprinted, and keeps its promises."""
from __future__ import annotations

import csv

import pytest

from helpers.fixture import fingerprint, load_riverton, read_metadata
from helpers.paths import DATA_DIR
from helpers.text import content_words

EXTENDED = "riverton-extended-questions.csv"
PARAPHRASE = "paraphrase without shared content words"


@pytest.fixture(scope="module")
def extended():
    return load_riverton(questions=EXTENDED)


def test_loads_through_the_fixture_loader_and_matches_its_metadata(extended):
    metadata = read_metadata()
    row = metadata[metadata["artifact"] == EXTENDED]
    assert len(row) == 1
    assert row["fingerprint"].iloc[0] == fingerprint(DATA_DIR / EXTENDED)
    assert int(row["rows"].iloc[0]) == len(extended.questions)


def test_at_least_thirty_questions_of_each_kind(extended):
    questions = extended.questions
    assert len(questions) >= 30
    counts = questions["probe_type"].value_counts()
    assert counts.get(PARAPHRASE, 0) >= 5
    assert counts.get("direct lookup", 0) >= 5
    assert counts.get("unanswerable", 0) >= 5
    assert counts.get("false premise", 0) >= 5


def test_ids_continue_as_x_series_and_do_not_clash_with_lesson_one(extended):
    original = load_riverton().questions
    ids = extended.questions["question_id"].tolist()
    assert ids == [f"X{n:02d}" for n in range(1, len(ids) + 1)]
    assert not set(ids) & set(original["question_id"])


def test_paraphrases_share_no_content_word_with_their_gold_passage(extended):
    texts = dict(zip(extended.handbook["passage_id"], extended.handbook["text"]))
    paraphrases = extended.questions[extended.questions["probe_type"] == PARAPHRASE]
    assert len(paraphrases) > 0
    for row in paraphrases.itertuples(index=False):
        shared = set(content_words(row.question)) & set(content_words(texts[row.gold_passage_id]))
        assert not shared, f"{row.question_id} shares {sorted(shared)} with {row.gold_passage_id}"


def test_lexical_lookups_do_share_words_with_their_gold_passage(extended):
    texts = dict(zip(extended.handbook["passage_id"], extended.handbook["text"]))
    lookups = extended.questions[extended.questions["probe_type"] == "direct lookup"]
    for row in lookups.itertuples(index=False):
        assert set(content_words(row.question)) & set(content_words(texts[row.gold_passage_id]))


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
    from helpers.text import normalize_answer

    texts = dict(zip(extended.handbook["passage_id"], extended.handbook["text"]))
    for row in extended.questions.itertuples(index=False):
        for variant in row.acceptable_list:
            assert len(variant.split()) <= 8, (row.question_id, variant)
        if row.acceptable_list and row.acceptable_list[0].lower() not in {"yes", "no"}:
            # At least one variant appears, after normalisation, in the gold passage.
            gold = normalize_answer(texts[row.gold_passage_id])
            assert any(normalize_answer(v) in gold for v in row.acceptable_list), row.question_id


def test_file_is_utf8_lf_without_bom_and_round_trips_through_csv():
    data = (DATA_DIR / EXTENDED).read_bytes()
    assert not data.startswith(b"\xef\xbb\xbf") and b"\r" not in data
    with open(DATA_DIR / EXTENDED, encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["question_id", "question", "probe_type", "expected_action",
                       "gold_passage_id", "acceptable_answers", "author_note"]
    assert all(len(r) == 7 for r in rows)
