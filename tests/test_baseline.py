"""The extractive sentence baseline, pinned to the reference render's table "Extractive
sentence baseline scored in sentence units", and its replies as transcript entries
(lesson 4 reviews them; ``python -m runtime record baseline`` writes them)."""
from __future__ import annotations

import pytest

from helpers.baseline import (BASELINE_DECODINGS, NO_SENTENCE, baseline_reply,
                              contains_variant, sentence_baseline)
from helpers.parsing import parse_reader_output
from helpers.retrieval import TfidfRetriever
from runtime import cli
from runtime.lessons import BASELINE_MODEL, BASELINE_PLAN, baseline_entries, baseline_replies
from runtime.records import COMPUTED, read_transcript

# The sentences, as printed (the True / False / not applicable column is read from lesson 1's page by
# test_lesson1.py).
PRINTED_BASELINE = {
    "Q1": "Data Support Certificate students receive a training stipend of $150 per week.",
    "Q2": "Applications for both fall programs close on October 15.",
    "Q3": "no sentence (no lexical match)",
    "Q4": "No prior data experience is required for the Data Support Certificate.",
    "Q5": "The Riverton Skills Centre runs two programs this fall: the Data Support "
          "Certificate and the Forklift Operator Licence course.",
    "Q6": "An optional spreadsheet refresher workshop, listed as DSC-105, meets on two "
          "Saturday mornings in September.",
}


@pytest.fixture(scope="module")
def baseline(questions, retrieved, handbook):
    return sentence_baseline(questions, retrieved, handbook)


def test_the_baseline_is_the_first_sentence_of_the_top_passage_as_printed(baseline, retrieved, handbook):
    assert baseline["question_id"].tolist() == list(PRINTED_BASELINE)
    assert str(baseline["contains_acceptable_answer"].dtype) == "boolean"
    texts = dict(zip(handbook["passage_id"], handbook["text"]))
    top = retrieved[retrieved["rank"] == 1].set_index("question_id")["passage_id"]
    for row in baseline.itertuples(index=False):
        assert row.baseline_sentence == PRINTED_BASELINE[row.question_id], row.question_id
        if row.question_id in top.index:
            assert row.top_passage_id == top[row.question_id]
            assert texts[row.top_passage_id].startswith(row.baseline_sentence)
        else:
            assert row.baseline_sentence == NO_SENTENCE


@pytest.mark.parametrize(("text", "variants", "expected"), [
    ("Stipend of $150 per week.", ["$150"], True),
    # Normalisation on both sides: case, symbols, articles.
    ("THE STIPEND IS 150 PER WEEK", ["$150 a week", "$150 per week"], True),
    ("Applications close on Oct 15", ["October 15", "Oct. 15"], True),
    ("Applications close on October 16.", ["October 15", "Oct. 15"], False),
    # Whole normalised words: a variant is never found inside a longer number.
    ("$150", ["15"], False), ("Answer: 1234567890", ["90 percent", "90%"], False),
    ("$2.50 per ride", ["$2"], False), ("It costs $2 per ride", ["$2"], True),
    ("Room 104, second floor", ["room 104"], True), ("Room 1045", ["Room 104"], False),
    ("Anything", ["$"], None),  # a variant of punctuation alone names nothing
    # Nothing to look for, or nothing to look in: no verdict.
    ("Anything", [], None), ("Anything", [""], None), (None, ["Room 104"], None),
])
def test_contains_variant(text, variants, expected):
    assert contains_variant(text, variants) is expected


def test_a_baseline_reply_is_the_sentence_and_its_passage_in_two_lines():
    reply = baseline_reply("Applications close on October 15.", "H14")
    assert reply == "Answer: Applications close on October 15.\nSources: H14"
    parsed = parse_reader_output(reply)
    assert parsed.parse_ok and parsed.sources == ("H14",) and parsed.action == "answer"
    # Nothing retrieved: the format's only reply is an abstention citing nothing.
    none = parse_reader_output(baseline_reply(None, None))
    assert none.parse_ok and none.action == "abstain" and none.sources == ()
    with pytest.raises(ValueError, match="cannot be one answer line"):
        baseline_reply("Two\nlines.", "H01")


def test_baseline_replies_keep_the_sentences_and_are_keyed_by_what_was_read(
        baseline, retrieved, handbook, questions):
    replies = baseline_replies(questions, handbook, "tfidf")
    by_question = dict(zip(baseline["question_id"], baseline["baseline_sentence"]))
    for row in replies.itertuples():
        parsed = parse_reader_output(row.raw_output)
        if row.retrieved_ids:
            assert parsed.answer == by_question[row.question_id]
            assert parsed.sources == (row.retrieved_ids[0],)
        else:
            assert parsed.action == "abstain" and by_question[row.question_id] == NO_SENTENCE
    assert replies["key"].is_unique and list(baseline_replies(
        questions, handbook, "tfidf")["key"]) == list(replies["key"])
    # The key is of what the baseline read and how: another retriever's name, another key.
    hybrid_named = baseline_replies(questions, handbook, "hybrid", TfidfRetriever.fit(handbook))
    assert not set(hybrid_named["key"]) & set(replies["key"])
    with pytest.raises(ValueError, match="unknown retriever 'bm25'"):
        baseline_replies(questions, handbook, "bm25")


def test_the_transcript_holds_what_the_baseline_computes_and_record_baseline_writes_it(tmp_path, capsys):
    """The committed transcript's tf-idf baseline entries are the baseline's replies
    computed now; ``python -m runtime record baseline`` replaces exactly the baseline's
    collections of a transcript with them."""
    plan = BASELINE_PLAN[:1]
    computed = baseline_entries(plan, recorded_on="2026-12-03")
    committed = [e for e in read_transcript()
                 if e.model_id == BASELINE_MODEL and e.decoding == BASELINE_DECODINGS["tfidf"]]
    assert [(e.key, e.raw_output, e.collection) for e in computed] == [
        (e.key, e.raw_output, e.collection) for e in committed]
    assert {(e.provenance, e.output_tokens, e.recorded_by) for e in computed} == {
        (COMPUTED, None, "python -m runtime record baseline")}
    path = tmp_path / "transcript.jsonl"
    others = [e for e in read_transcript() if e.model_id != BASELINE_MODEL]
    path.write_text("".join(e.to_json() + "\n" for e in others + computed[:3]), encoding="utf-8")
    assert cli.main(["record", "baseline", "--transcript", str(path)]) == 0
    written = read_transcript(path)
    assert f"wrote {len(written) - len(others)} baseline replies" in capsys.readouterr().out
    assert [e for e in written if e.model_id != BASELINE_MODEL] == others
    assert {e.key for e in written if e.model_id == BASELINE_MODEL} == {
        e.key for e in read_transcript() if e.model_id == BASELINE_MODEL}
