"""The reader inputs of a lesson: fixture, tf-idf retrieval (top 3) and chat messages.

Introduced in lesson 1, "Ask the reader for two lines". The lesson builds the same table
step by step; this function is what the ``record`` command and the tests use.
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


def lesson_retrieval(questions: str = QUESTIONS_FILE, data_dir: str | os.PathLike = DATA_DIR,
                     k: int = RETRIEVAL_K):
    """The validated fixture and its tf-idf top-``k`` retrieval (scores above zero)."""
    fixture = load_riverton(Path(data_dir), questions)
    retriever = TfidfRetriever.fit(fixture.handbook)
    return fixture, retriever.rank(fixture.questions, k=k)


def lesson_reader_inputs(questions: str = QUESTIONS_FILE,
                         data_dir: str | os.PathLike = DATA_DIR,
                         k: int = RETRIEVAL_K) -> pd.DataFrame:
    """:func:`reader_inputs` for a question file of the fixture, retrieved with tf-idf."""
    fixture, retrieved = lesson_retrieval(questions, data_dir, k)
    return reader_inputs(fixture.questions, retrieved, fixture.handbook)
