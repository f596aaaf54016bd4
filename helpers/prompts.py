"""The reader's chat prompt and its input budget.

Introduced in lesson 1, "Ask the reader for two lines". The prompt strings are fixture
data: the recorded generations are keyed by them, so they are kept character for
character.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from .decoding import MAX_INPUT_TOKENS
from .retrieval import TfidfRetriever

SYSTEM_PROMPT_PARTS = (
    "You are a strict formatter for handbook question answering.",
    "Your reply must begin with Answer: on the first line.",
    "The second and final line must begin with Sources:.",
    "Use only IDs that appear in PASSAGES.",
    "If no listed passage answers the question, write Answer: NOT IN HANDBOOK",
    "and Sources: none.",
    "If the question assumes a fact contradicted by a listed passage, write",
    "Answer: PREMISE NOT SUPPORTED: plus a short correction.",
    "Do not write a blank line, bullet, explanation, or extra source.",
)
SYSTEM_PROMPT = " ".join(SYSTEM_PROMPT_PARTS)

NO_PASSAGES = "No passages were retrieved."
#: How many passages the reader is given: the retriever's top three.
RETRIEVAL_K = 3

#: The format template's answer placeholder; a reply that copies it has not answered.
ANSWER_PLACEHOLDER = "<short answer, NOT IN HANDBOOK, or PREMISE NOT SUPPORTED: correction>"
OUTPUT_FORMAT = (
    "OUTPUT FORMAT:\n"
    f"Answer: {ANSWER_PLACEHOLDER}\n"
    "Sources: <listed passage IDs, or none>"
)


class InputBudgetError(ValueError):
    """One or more prompts are longer than the reader's input budget."""

    def __init__(self, over_budget: Mapping[str, int], max_input_tokens: int):
        self.over_budget = dict(over_budget)
        self.max_input_tokens = max_input_tokens
        listed = ", ".join(f"{qid} ({n} tokens)" for qid, n in self.over_budget.items())
        super().__init__(
            f"{len(self.over_budget)} prompt(s) exceed the input budget of "
            f"{max_input_tokens} tokens: {listed}. Retrieve fewer or shorter passages "
            "for these questions before asking the reader."
        )


def format_passage_block(passages: Sequence[tuple[str, str]]) -> str:
    """``ID: text`` lines in the given (rank) order, or a line saying nothing was retrieved."""
    if not passages:
        return NO_PASSAGES
    return "\n".join(f"{passage_id}: {text}" for passage_id, text in passages)


def build_user_prompt(question_id: str, question: str, passage_block: str) -> str:
    """The user turn: question ID, question, passages and the required output format."""
    return (
        f"QUESTION ID: {question_id}\n"
        f"QUESTION: {question}\n"
        f"PASSAGES:\n{passage_block}\n\n"
        f"{OUTPUT_FORMAT}"
    )


def build_messages(
    question_id: str, question: str, passages: Sequence[tuple[str, str]]
) -> list[dict]:
    """The chat messages for one question: the system prompt, then the user prompt."""
    user = build_user_prompt(question_id, question, format_passage_block(passages))
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": user},
    ]


def reader_inputs(
    questions_df: pd.DataFrame, retrieved_df: pd.DataFrame, handbook_df: pd.DataFrame
) -> pd.DataFrame:
    """One row per question with its retrieved IDs, passage block, user prompt and messages.

    ``retrieved_df`` has question_id, passage_id and rank; passages are listed in rank
    order. A retrieved ID missing from the handbook is an error naming the question.
    """
    texts = dict(zip(handbook_df["passage_id"], handbook_df["text"]))
    rows = []
    for question_id, question in zip(questions_df["question_id"], questions_df["question"]):
        hits = retrieved_df[retrieved_df["question_id"] == question_id].sort_values("rank")
        passages = []
        for passage_id in hits["passage_id"]:
            if passage_id not in texts:
                raise KeyError(
                    f"question {question_id}: retrieved passage {passage_id!r} is not in "
                    "the handbook"
                )
            passages.append((passage_id, texts[passage_id]))
        block = format_passage_block(passages)
        rows.append(
            {
                "question_id": question_id,
                "question": question,
                "retrieved_ids": tuple(pid for pid, _ in passages),
                "passage_block": block,
                "user_prompt": build_user_prompt(question_id, question, block),
                "messages": build_messages(question_id, question, passages),
            }
        )
    columns = ["question_id", "question", "retrieved_ids", "passage_block", "user_prompt",
               "messages"]
    return pd.DataFrame(rows, columns=columns)


def check_input_budget(
    prompt_tokens: Mapping[str, int], max_input_tokens: int = MAX_INPUT_TOKENS
) -> None:
    """Raise :class:`InputBudgetError` naming every question whose prompt is over budget."""
    over = {qid: int(n) for qid, n in prompt_tokens.items() if int(n) > max_input_tokens}
    if over:
        raise InputBudgetError(over, max_input_tokens)


def retrieve_and_prompt(questions: pd.DataFrame, handbook: pd.DataFrame, retriever=None,
                        k: int = RETRIEVAL_K) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The pipeline up to the reader, as one step: each question's top ``k`` passages under
    ``retriever`` (tf-idf fitted on ``handbook`` when none is given), and the reader's
    inputs built from them (:func:`reader_inputs`). Returns ``(retrieved, inputs)``.
    Lesson 1, "Ask the reader for two lines"; every later lesson, the exercises' checks and
    the recorders call it."""
    retriever = TfidfRetriever.fit(handbook) if retriever is None else retriever
    retrieved = retriever.rank(questions, k=k)
    return retrieved, reader_inputs(questions, retrieved, handbook)
