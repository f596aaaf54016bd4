"""The lessons' standard requests: fixture, retrieval (top 3), prompts, and the baseline's.

What the record command, the review loader and the tests rebuild: the same table each
lesson builds step by step on its page. Lesson 1 retrieves with tf-idf; lesson 2,
"Handing the hybrid's passages to a reader", with the hybrid of tf-idf and the sentence
encoder. The sentence baseline (lesson 1) reads the same question and passages as the
reader; its replies are recorded in the transcript in the same format as a model's
(:func:`baseline_entries`), keyed by lesson 1's prompt for that question and passages,
so that lesson 4's review can name the exact text it judged.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from helpers.baseline import BASELINE_DECODINGS, baseline_reply, sentence_baseline
from helpers.decoding import DECODING_FIELD
from helpers.prompts import RETRIEVAL_K, retrieve_and_prompt
from helpers.retrieval import TfidfRetriever

from .fixture import EXTENDED_QUESTIONS_FILE, HELDOUT_QUESTIONS_FILE, QUESTIONS_FILE, \
    PathLike, load_riverton
from .paths import DATA_DIR
from .records import Reply, computed_reply, recorded, transcript_key

#: The retrievers whose top passages can make the reader's prompts: lesson 1's tf-idf,
#: and lesson 2's dense encoder and hybrid (equal weights, no score floor).
RETRIEVERS = ("tfidf", "dense", "hybrid")


def fit_retriever(name: str, handbook: pd.DataFrame):
    """The retriever ``name`` (one of :data:`RETRIEVERS`) fitted on the handbook."""
    if name == "tfidf":
        return TfidfRetriever.fit(handbook)
    if name in ("dense", "hybrid"):
        from helpers import dense

        from .encoder import load_encoder

        encoder = dense.DenseRetriever.fit(handbook, load_encoder())
        return encoder if name == "dense" else dense.HybridRetriever(
            TfidfRetriever.fit(handbook), encoder)
    raise ValueError(f"unknown retriever {name!r}; expected one of {', '.join(RETRIEVERS)}")


def lesson_reader_inputs(questions: str = QUESTIONS_FILE, data_dir: PathLike = DATA_DIR,
                         k: int = RETRIEVAL_K, retriever: str = "tfidf") -> pd.DataFrame:
    """:func:`helpers.prompts.retrieve_and_prompt`'s inputs for a question file and one
    retriever."""
    fixture = load_riverton(Path(data_dir), questions)
    return retrieve_and_prompt(fixture.questions, fixture.handbook,
                               fit_retriever(retriever, fixture.handbook), k)[1]


def collection_name(questions: str, retriever: str = "tfidf", k: int = RETRIEVAL_K) -> str:
    """The transcript collection of a question file's prompts over one retriever's top k."""
    return f"{questions}, {retriever} top {k}"


#: The question files ``python -m runtime record reader --questions`` records.
QUESTION_FILES = (QUESTIONS_FILE, EXTENDED_QUESTIONS_FILE, HELDOUT_QUESTIONS_FILE)
#: The collections of lesson 5's recorded prompts begin with these, followed by the
#: attack's ID or the prompt's name (:func:`runtime.attack_runs.record_prompts`).
ATTACK_COLLECTION, ORDINARY_COLLECTION = "attack prompts, ", "ordinary questions, "


# ------------------------------------------------------------------ the sentence baseline

#: The baseline's stand-in for a model in the transcript, and its revision: the code that
#: computes it.
BASELINE_MODEL = "extractive sentence baseline (helpers.baseline)"
BASELINE_REVISION = "helpers/baseline.py"


def baseline_replies(questions: pd.DataFrame, handbook: pd.DataFrame, retriever: str,
                     fitted=None) -> pd.DataFrame:
    """The baseline's reply to every question, computed now, with its transcript key.

    One row per question: lesson 1's reader inputs over ``retriever``'s top three
    (``fitted``, or that retriever fitted now) (``question_id``, ``question``,
    ``retrieved_ids``, ``messages``), ``settings``, ``key`` and ``raw_output``, the first
    sentence of the top passage as a two-line reply (:func:`helpers.baseline.baseline_reply`).
    """
    if retriever not in BASELINE_DECODINGS:
        raise ValueError(f"unknown retriever {retriever!r}; expected one of "
                         f"{sorted(BASELINE_DECODINGS)}")
    settings = {DECODING_FIELD: BASELINE_DECODINGS[retriever]}  # how the reply was made
    retrieved, inputs = retrieve_and_prompt(questions, handbook,
                                            fitted or fit_retriever(retriever, handbook))
    sentences = sentence_baseline(questions, retrieved, handbook).set_index("question_id")
    tops = [None if pd.isna(top) else top
            for top in sentences.loc[inputs["question_id"], "top_passage_id"]]
    replies = [baseline_reply(sentences.at[q, "baseline_sentence"] if top else None, top)
               for q, top in zip(inputs["question_id"], tops)]
    keys = [transcript_key(BASELINE_MODEL, BASELINE_REVISION, m, settings)
            for m in inputs["messages"]]
    return inputs.assign(settings=[settings] * len(inputs), key=keys, raw_output=replies)


#: What the record holds of the baseline: lesson 1's and lesson 2's extended questions,
#: under each retriever.
BASELINE_PLAN = (("tfidf", (QUESTIONS_FILE, EXTENDED_QUESTIONS_FILE)),
                 ("hybrid", (QUESTIONS_FILE, EXTENDED_QUESTIONS_FILE)))


def baseline_entries(plan=BASELINE_PLAN, recorded_on: str | None = None) -> list[Reply]:
    """The baseline's replies for ``plan`` ((retriever, question files) pairs), computed
    now, as the transcript records them."""
    entries = []
    for retriever, files in plan:
        for name in files:
            fixture = load_riverton(questions=name)
            computed = baseline_replies(fixture.questions, fixture.handbook, retriever)
            entries += [recorded(
                computed_reply(BASELINE_MODEL, BASELINE_REVISION, row.messages, row.settings,
                               row.raw_output, row.question_id),
                collection_name(name, retriever), row.retrieved_ids,
                "python -m runtime record baseline", recorded_on)
                for row in computed.itertuples(index=False)]
    return entries
