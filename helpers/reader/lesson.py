"""The reader inputs of a lesson: fixture, retrieval (top 3) and chat messages.

Introduced in lesson 1, "Ask the reader for two lines". The lesson builds the same table
step by step; this function is what the ``record`` command and the tests use. Lesson 1
retrieves with tf-idf; lesson 2, "Handing the hybrid's passages to a reader", with the
hybrid of tf-idf and the sentence encoder, which gives other prompts.
"""
from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from ..fixture import QUESTIONS_FILE, load_riverton
from ..paths import DATA_DIR
from ..retrieval import TfidfRetriever
from .prompts import reader_inputs

RETRIEVAL_K = 3

#: The retrievers whose top passages can make the reader's prompts: lesson 1's tf-idf,
#: and lesson 2's dense encoder and hybrid (equal weights, no score floor).
RETRIEVERS = ("tfidf", "dense", "hybrid")


def fit_retriever(name: str, handbook: pd.DataFrame):
    """The retriever ``name`` (one of :data:`RETRIEVERS`) fitted on the handbook."""
    if name == "tfidf":
        return TfidfRetriever.fit(handbook)
    if name in ("dense", "hybrid"):
        from .. import dense

        encoder = dense.DenseRetriever.fit(handbook)
        if name == "dense":
            return encoder
        return dense.HybridRetriever(TfidfRetriever.fit(handbook), encoder)
    raise ValueError(f"unknown retriever {name!r}; expected one of {', '.join(RETRIEVERS)}")


def lesson_retrieval(questions: str = QUESTIONS_FILE, data_dir: str | os.PathLike = DATA_DIR,
                     k: int = RETRIEVAL_K, retriever: str = "tfidf"):
    """The validated fixture and its top-``k`` retrieval (tf-idf: scores above zero)."""
    fixture = load_riverton(Path(data_dir), questions)
    fitted = fit_retriever(retriever, fixture.handbook)
    return fixture, fitted.rank(fixture.questions, k=k)


def lesson_reader_inputs(questions: str = QUESTIONS_FILE,
                         data_dir: str | os.PathLike = DATA_DIR,
                         k: int = RETRIEVAL_K, retriever: str = "tfidf") -> pd.DataFrame:
    """:func:`reader_inputs` for a question file of the fixture and one retriever."""
    fixture, retrieved = lesson_retrieval(questions, data_dir, k, retriever)
    return reader_inputs(fixture.questions, retrieved, fixture.handbook)
