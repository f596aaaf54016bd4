"""Running lesson 5's prompts: the small reader under attack and on ordinary questions.

Machinery behind lesson 5, "Run SmolLM2 with and without the attacks" and "Security
against utility". The attacks, their prompts and their success rules are taught in
:mod:`helpers.attacks`; this module asks a reader every prompt (through
:func:`runtime.readers.generate_all`, in batches; a recorded reader replays them),
and names the prompts that ``python -m runtime record attacks`` records.
"""
from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from helpers.attacks import PROMPT_COLUMNS, WITHOUT_ATTACK, attack_reader_inputs
from helpers.defences import PROMPTS
from helpers.prompts import retrieve_and_prompt

from .fixture import EXTENDED_QUESTIONS_FILE, load_attack_fixture, load_riverton
from .lessons import ATTACK_COLLECTION, ORDINARY_COLLECTION
from .readers import generate_all

#: The columns of :func:`run_attacks`' table, in order.
RUN_COLUMNS = ["attack_id", "condition", "wording", "position", "planted_rank", "prompt",
               "decoding", "raw_output", "output_tokens", "ended_by_eos", "hit_token_cap",
               "prompt_tokens", "retrieved_ids", "seconds"]


def run_name(attack_id: str, condition: str, wording: int, position: str, prompt: str) -> str:
    """How a run is named on the progress bar: "A01 wording 2, first, quoting prompt", or
    "A01 without the attack, quoting prompt"."""
    where = WITHOUT_ATTACK if condition == WITHOUT_ATTACK else f"wording {wording}, {position}"
    return f"{attack_id} {where}, {prompt}"


def run_attacks(small_reader, inputs: pd.DataFrame,
                prompts: Sequence[str] = tuple(PROMPT_COLUMNS)) -> pd.DataFrame:
    """Ask the reader every row of ``inputs`` (:func:`helpers.attacks.attack_reader_inputs`)
    under each of ``prompts``, decoding under lesson 3's reply grammar for the retrieved
    IDs, in batches. One row per reply, in the order of ``inputs``, then prompts, with
    ``seconds``: its batch's wall time divided by the replies in it. A recorded reader
    replays each reply by its exact prompt and grammar; a live one generates it."""
    if unknown := sorted(set(prompts) - set(PROMPT_COLUMNS)):
        raise ValueError(f"unknown prompt(s) {unknown}; use {', '.join(PROMPT_COLUMNS)}")
    asked = attack_prompts(inputs, prompts).assign(decoding="constrained")
    made = generate_all(small_reader, asked, constrained=True)
    # the reply's columns: raw output, its token counts and how it stopped, and seconds
    replies = {c: made[c].to_numpy() for c in RUN_COLUMNS if c not in asked}
    return asked.assign(**replies)[RUN_COLUMNS]


def attack_prompts(inputs: pd.DataFrame,
                   prompts: Sequence[str] = tuple(PROMPT_COLUMNS)) -> pd.DataFrame:
    """Every prompt lesson 5 asks about its attacks (or those of ``prompts``), one row per
    input and prompt, named for a reader: ``question_id`` (the run's name, such as "A01
    wording 2, first, quoting prompt"), ``attack_id``, ``condition``, ``prompt``,
    ``messages`` and ``retrieved_ids``, and ``wording``, ``position`` and ``planted_rank``."""
    return pd.DataFrame([
        {"question_id": run_name(row.attack_id, row.condition, row.wording, row.position, prompt),
         "attack_id": row.attack_id, "condition": row.condition, "wording": row.wording,
         "position": row.position, "planted_rank": row.planted_rank, "prompt": prompt,
         "messages": getattr(row, PROMPT_COLUMNS[prompt]), "retrieved_ids": row.retrieved_ids}
        for row in inputs.itertuples(index=False) for prompt in prompts])


def ordinary_inputs(questions: pd.DataFrame, retrieved: pd.DataFrame, handbook: pd.DataFrame,
                    prompts: Sequence[str] = tuple(PROMPT_COLUMNS)) -> pd.DataFrame:
    """The prompts of ordinary questions, with no attack anywhere, under each of ``prompts``.

    Lesson 5, "Security against utility". ``retrieved`` is a ranking of the handbook
    alone, the retrieval every defence is judged under. One row per question and prompt:
    ``question_id``, ``question``, ``prompt``, ``retrieved_ids``, ``retrieved_scores``
    and ``messages``.
    """
    texts = dict(zip(handbook["passage_id"], handbook["text"]))
    hits = {q: retrieved[retrieved["question_id"] == q].sort_values("rank")
            for q in questions["question_id"]}
    return pd.DataFrame([
        {"question_id": q, "question": asked, "prompt": prompt,
         "retrieved_ids": tuple(hits[q]["passage_id"]),
         "retrieved_scores": tuple(float(s) for s in hits[q]["score"]),
         "messages": PROMPTS[prompt](q, asked, [(p, texts[p]) for p in hits[q]["passage_id"]])}
        for prompt in prompts for q, asked in zip(questions["question_id"], questions["question"])])


# ------------------------------------------------------------------------ recording

#: What ``python -m runtime record attacks`` can record: every attack prompt of lesson 5,
#: or the ordinary questions under the placebo, quoting and datamarking prompts (lesson
#: 1's prompt has its own collection).
RECORD_SETS = ("attacks", "ordinary")


def record_prompts(which: str, attack_ids: Sequence[str] | None = None) -> pd.DataFrame:
    """The prompts ``record attacks --prompts WHICH`` sends, one row each: ``question_id``
    (the attack's or the question's ID), ``collection``, ``messages`` and
    ``retrieved_ids``; ``attack_ids`` keeps the prompts of those attacks only."""
    riverton = load_riverton()
    if which == "attacks":
        fixture = load_attack_fixture(handbook=riverton.handbook, metadata=riverton.metadata)
        chosen = fixture.questions
        if unknown := sorted(set(attack_ids or ()) - set(chosen["attack_id"])):
            raise ValueError(f"no attack {', '.join(unknown)}; the attacks are "
                             f"{', '.join(chosen['attack_id'])}")
        if attack_ids:
            chosen = chosen[chosen["attack_id"].isin(list(attack_ids))]
        asked = attack_prompts(attack_reader_inputs(chosen, riverton.handbook, fixture.passages,
                                                    fixture.wordings, metadata=riverton.metadata))
        asked = asked.assign(question_id=asked["attack_id"],
                             collection=ATTACK_COLLECTION + asked["attack_id"])
        return asked[["question_id", "messages", "retrieved_ids", "collection"]]
    if which == "ordinary":
        extended = load_riverton(questions=EXTENDED_QUESTIONS_FILE).questions
        questions = pd.concat([riverton.questions, extended], ignore_index=True)
        retrieved, _ = retrieve_and_prompt(questions, riverton.handbook)
        inputs = ordinary_inputs(questions, retrieved, riverton.handbook,
                                 prompts=tuple(PROMPT_COLUMNS)[1:])
        return inputs.assign(collection=ORDINARY_COLLECTION + inputs["prompt"])
    raise ValueError(f"unknown prompt set {which!r}; use one of {', '.join(RECORD_SETS)}")
