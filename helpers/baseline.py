"""The extractive sentence baseline and its contains-an-acceptable-variant check.

Introduced in lesson 1, "Add a sentence baseline". Lesson 4, "The replies under review",
reads the baseline's sentences as two-line replies (:func:`baseline_reply`).
"""
from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from .parsing import ABSTAIN_PREFIX
from .text import normalize_answer, split_sentences

NO_SENTENCE = "no sentence (no lexical match)"


def contains_variant(text: str | None, variants: Sequence[str]) -> bool | None:
    """Whether normalised ``text`` contains a normalised variant as whole words: "90" is
    in "90 percent" but not in "1234567890", "2" not in "250 per ride".

    ``None`` when there is no text or no variant to look for.
    """
    variants = [normalize_answer(v) for v in variants if v]
    variants = [v for v in variants if v]  # a variant of punctuation alone names nothing
    if text is None or not variants:
        return None
    words = f" {normalize_answer(text)} "  # a space at each end, so that every word has two
    return any(f" {variant} " in words for variant in variants)


def sentence_baseline(
    questions: pd.DataFrame, retrieved: pd.DataFrame, handbook: pd.DataFrame
) -> pd.DataFrame:
    """First sentence of each question's top-ranked passage, scored in sentence units.

    ``contains_acceptable_answer`` is True/False for answerable questions (False when
    nothing was retrieved) and NA for abstain and flag-premise questions.
    """
    texts = dict(zip(handbook["passage_id"], handbook["text"]))
    top = retrieved[retrieved["rank"] == 1].set_index("question_id")["passage_id"]
    rows = []
    for question in questions.itertuples(index=False):
        passage = top.get(question.question_id)
        sentence = split_sentences(texts[passage])[0] if passage is not None else None
        contains = pd.NA
        if question.expected_action == "answer":
            found = contains_variant(sentence, question.acceptable_list)
            contains = bool(found) if found is not None else False
        rows.append(
            {
                "question_id": question.question_id,
                "top_passage_id": passage,
                "baseline_sentence": sentence if sentence is not None else NO_SENTENCE,
                "contains_acceptable_answer": contains,
            }
        )
    frame = pd.DataFrame(rows)
    frame["contains_acceptable_answer"] = frame["contains_acceptable_answer"].astype("boolean")
    return frame


#: The baseline's name where the review names a reader.
BASELINE_READER = "sentence_baseline"
#: The retrievers whose top passage the baseline copies from, and what the review calls
#: each way of making a reply (its ``decoding``).
BASELINE_DECODINGS = {
    "tfidf": "first sentence of the tf-idf top passage",
    "hybrid": "first sentence of the hybrid top passage",
}


def baseline_reply(sentence: str | None, passage_id: str | None) -> str:
    """The baseline's sentence as a reply in lesson 1's two-line format.

    ``Answer: <sentence>`` over ``Sources: <passage>``, the passage it was copied from.
    With nothing retrieved there is no sentence, and the only reply the format has for
    that is an abstention: ``Answer: NOT IN HANDBOOK`` over ``Sources: none``.
    Lesson 4, "The replies under review".
    """
    if passage_id is None:
        return f"Answer: {ABSTAIN_PREFIX}\nSources: none"
    if not sentence or "\n" in sentence or "\r" in sentence:
        raise ValueError(f"the sentence of {passage_id} cannot be one answer line: {sentence!r}")
    return f"Answer: {sentence}\nSources: {passage_id}"
