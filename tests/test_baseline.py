"""The extractive sentence baseline, pinned to the reference render's table
"Extractive sentence baseline scored in sentence units"."""
from __future__ import annotations

import pandas as pd
import pytest

from helpers import baseline as baseline_module
from helpers.baseline import NO_SENTENCE, contains_variant, sentence_baseline
from helpers.parsing import parse_reader_output

# Sentence and the TRUE / FALSE / NA column, as printed.
PRINTED_BASELINE = {
    "Q1": ("Data Support Certificate students receive a training stipend of $150 per week.", True),
    "Q2": ("Applications for both fall programs close on October 15.", True),
    "Q3": ("no sentence (no lexical match)", False),
    "Q4": ("No prior data experience is required for the Data Support Certificate.", True),
    "Q5": ("The Riverton Skills Centre runs two programs this fall: the Data Support "
           "Certificate and the Forklift Operator Licence course.", None),
    "Q6": ("An optional spreadsheet refresher workshop, listed as DSC-105, meets on two "
           "Saturday mornings in September.", None),
}


@pytest.fixture(scope="module")
def baseline(questions, retrieved, handbook):
    return sentence_baseline(questions, retrieved, handbook)


def test_baseline_sentences_match_the_source(baseline):
    assert baseline["question_id"].tolist() == list(PRINTED_BASELINE)
    for row in baseline.itertuples(index=False):
        assert row.baseline_sentence == PRINTED_BASELINE[row.question_id][0], row.question_id


def test_baseline_contains_column_matches_the_source(baseline):
    assert str(baseline["contains_acceptable_answer"].dtype) == "boolean"
    values = baseline["contains_acceptable_answer"].tolist()
    for question_id, value in zip(baseline["question_id"], values):
        expected = PRINTED_BASELINE[question_id][1]
        if expected is None:
            assert value is pd.NA, question_id
        else:
            assert value is not pd.NA and bool(value) is expected, question_id


def test_baseline_copies_the_first_sentence_of_the_top_passage(baseline, retrieved, handbook):
    texts = dict(zip(handbook["passage_id"], handbook["text"]))
    top = retrieved[retrieved["rank"] == 1].set_index("question_id")["passage_id"]
    for row in baseline.itertuples(index=False):
        if row.question_id in top.index:
            assert row.top_passage_id == top[row.question_id]
            assert texts[row.top_passage_id].startswith(row.baseline_sentence)
        else:
            assert row.baseline_sentence == NO_SENTENCE


@pytest.mark.parametrize(
    ("text", "variants", "expected"),
    [
        ("Stipend of $150 per week.", ["$150"], True),
        # Normalisation on both sides: case, symbols, articles.
        ("THE STIPEND IS 150 PER WEEK", ["$150 a week", "$150 per week"], True),
        ("Applications close on Oct 15", ["October 15", "Oct. 15"], True),
        ("Applications close on October 16.", ["October 15", "Oct. 15"], False),
        # A plain substring test, as in the lesson: "15" is inside "150".
        ("$150", ["15"], True),
        # Nothing to look for, or nothing to look in: no verdict.
        ("Anything", [], None),
        ("Anything", [""], None),
        (None, ["Room 104"], None),
    ],
)
def test_contains_variant(text, variants, expected):
    assert contains_variant(text, variants) is expected


def test_baseline_marks_an_answer_question_without_retrieval_false(retriever, handbook):
    questions = pd.DataFrame(
        {
            "question_id": ["B1", "B2"],
            "question": ["Where can my kid stay at night?", "Is there a zeppelin?"],
            "expected_action": ["answer", "abstain"],
            "acceptable_list": [("Room 104",), ()],
        }
    )
    table = sentence_baseline(questions, retriever.rank(questions), handbook)
    assert table["baseline_sentence"].tolist()[0] == NO_SENTENCE
    values = table["contains_acceptable_answer"].tolist()
    assert values[0] is not pd.NA and bool(values[0]) is False
    assert values[1] is pd.NA


# ------------------------------------------------------------- the baseline as two-line replies


def test_a_baseline_reply_is_the_sentence_and_its_passage_in_two_lines():
    baseline = baseline_module
    reply = baseline.baseline_reply("Applications close on October 15.", "H14")
    assert reply == "Answer: Applications close on October 15.\nSources: H14"
    parsed = parse_reader_output(reply)
    assert parsed.parse_ok and parsed.sources == ("H14",) and parsed.action == "answer"
    # Nothing retrieved: the format's only reply is an abstention citing nothing.
    none = parse_reader_output(baseline.baseline_reply(None, None))
    assert none.parse_ok and none.action == "abstain" and none.sources == ()
    with pytest.raises(ValueError, match="cannot be one answer line"):
        baseline.baseline_reply("Two\nlines.", "H01")


def test_baseline_replies_for_lesson_1_keep_the_baselines_sentences(baseline, retrieved,
                                                                    handbook, questions):
    module = baseline_module
    replies = module.baseline_replies(questions, retrieved, handbook, "tfidf")
    by_question = dict(zip(baseline["question_id"], baseline["baseline_sentence"]))
    for row in replies.itertuples():
        parsed = parse_reader_output(row.raw_output)
        if row.retrieved_ids:
            assert parsed.answer == by_question[row.question_id]
            assert parsed.sources == (row.retrieved_ids[0],)
        else:
            assert parsed.action == "abstain" and by_question[row.question_id] == module.NO_SENTENCE
    # The key is of what the baseline read, and not of the retriever's name alone.
    again = module.baseline_replies(questions, retrieved, handbook, "tfidf")
    assert list(again["key"]) == list(replies["key"]) and replies["key"].is_unique
    hybrid_named = module.baseline_replies(questions, retrieved, handbook, "hybrid")
    assert not set(hybrid_named["key"]) & set(replies["key"])
    with pytest.raises(ValueError, match="unknown retriever 'bm25'"):
        module.baseline_replies(questions, retrieved, handbook, "bm25")
