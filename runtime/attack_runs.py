"""Running lesson 5's prompts: the small reader under attack and on ordinary questions.

Machinery behind lesson 5, "Run SmolLM2 with and without the attacks" and "Security
against utility". The attacks, their prompts and their success rules are taught in
:mod:`helpers.attacks`; this module asks a reader every prompt (through
:func:`runtime.readers.generate_all`, in batches), replays what the transcript holds,
and names the prompts that ``python -m runtime record attacks`` records.
"""
from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from helpers.attacks import PROMPT_COLUMNS, WITHOUT_ATTACK, attack_reader_inputs
from helpers.defences import PROMPTS
from helpers.grammar import build_grammar, constrained_settings
from helpers.retrieval import TfidfRetriever

from .fixture import EXTENDED_QUESTIONS_FILE, load_attack_fixture, load_riverton
from .paths import DATA_DIR
from .readers import generate_all

#: The decodings :func:`run_attacks` knows; lesson 5 runs the constrained one.
DECODINGS = ("unconstrained", "constrained")

#: The columns of :func:`run_attacks`' table, in order.
RUN_COLUMNS = [
    "attack_id", "condition", "wording", "position", "planted_rank", "prompt", "decoding",
    "raw_output", "output_tokens", "ended_by_eos", "hit_token_cap", "prompt_tokens",
    "retrieved_ids", "seconds",
]


def run_name(attack_id: str, condition: str, wording: int, position: str, prompt: str,
             decoding: str | None = None) -> str:
    """How a run is named on the progress bar: "A01 wording 2, first, quoting prompt,
    constrained", or "A01 without the attack, quoting prompt, ..."."""
    where = WITHOUT_ATTACK if condition == WITHOUT_ATTACK else f"wording {wording}, {position}"
    return f"{attack_id} {where}, {prompt}" + (f", {decoding}" if decoding else "")


def run_attacks(small_reader, inputs: pd.DataFrame,
                prompts: Sequence[str] = tuple(PROMPT_COLUMNS),
                decodings: Sequence[str] = ("constrained",)) -> pd.DataFrame:
    """Ask the reader every row of ``inputs`` (:func:`helpers.attacks.attack_reader_inputs`)
    under each of ``prompts`` and ``decodings``; ``constrained`` decodes under lesson 3's
    reply grammar for the retrieved IDs. One row per reply, in the order of ``inputs``,
    then prompts, then decodings, with ``seconds``: its batch's wall time divided by the
    replies in it."""
    unknown = sorted(set(decodings) - set(DECODINGS)) + sorted(set(prompts) - set(PROMPT_COLUMNS))
    if unknown:
        raise ValueError(f"unknown decoding(s) or prompt(s) {unknown}; use "
                         f"{', '.join(DECODINGS)} and {', '.join(PROMPT_COLUMNS)}")
    asked, runs = attack_prompts(inputs, prompts), []
    for decoding in decodings:  # each run named with its decoding: see run_name
        mine = asked.assign(decoding=decoding, question_id=asked["question_id"] + f", {decoding}")
        made = generate_all(small_reader, mine, constrained=decoding == "constrained")
        runs.append(mine.assign(**{c: made[c].to_numpy() for c in (
            "raw_output", "output_tokens", "ended_by_eos", "hit_token_cap", "prompt_tokens",
            "seconds")}))
    # in the order of the inputs, then prompts, then decodings
    runs = pd.concat(runs or [pd.DataFrame(columns=RUN_COLUMNS)])
    return runs.sort_index(kind="stable").reset_index(drop=True)[RUN_COLUMNS]


def attack_prompts(inputs: pd.DataFrame,
                   prompts: Sequence[str] = tuple(PROMPT_COLUMNS)) -> pd.DataFrame:
    """Every prompt lesson 5 asks about its attacks (or those of ``prompts``), one row per
    input and prompt, named for a reader: ``question_id`` (the run's name, such as "A01
    wording 2, first, quoting prompt"), ``attack_id``, ``condition``, ``prompt``,
    ``messages`` and ``retrieved_ids``, and ``wording``, ``position`` and ``planted_rank``."""
    return pd.DataFrame([
        {"question_id": run_name(row.attack_id, row.condition, row.wording, row.position,
                                 prompt),
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
    rows = []
    for prompt in prompts:
        for question_id, question in zip(questions["question_id"], questions["question"]):
            hits = retrieved[retrieved["question_id"] == question_id].sort_values("rank")
            ids = tuple(hits["passage_id"])
            rows.append({
                "question_id": question_id, "question": question, "prompt": prompt,
                "retrieved_ids": ids, "retrieved_scores": tuple(float(s) for s in hits["score"]),
                "messages": PROMPTS[prompt](question_id, question,
                                            [(pid, texts[pid]) for pid in ids])})
    return pd.DataFrame(rows)


def replayed_replies(recorded, inputs: pd.DataFrame) -> pd.DataFrame:
    """Each row's unconstrained reply as ``recorded``'s transcript holds it, rows it does
    not hold left out: a look-up by key, never a model call."""
    held = [recorded.holds(m) for m in inputs["messages"]]
    found = inputs[held]
    return found.assign(raw_output=generate_all(recorded, found)["raw_output"].to_numpy())


def replay_or_generate(recorded, live, inputs: pd.DataFrame) -> pd.DataFrame:
    """Each row's constrained reply: replayed from ``recorded``'s transcript when it holds
    the exact prompt and grammar, otherwise generated by ``live`` (or left out when
    ``live`` is None). Returns the rows that got a reply, with ``raw_output`` and
    ``source`` ("recorded" or "live")."""
    held = pd.Series([recorded.holds(m, constrained_settings(recorded.settings,
                                                             build_grammar(ids)))
                      for m, ids in zip(inputs["messages"], inputs["retrieved_ids"])],
                     index=inputs.index)
    parts = [inputs[held].assign(source="recorded")]
    parts[0]["raw_output"] = generate_all(recorded, parts[0], constrained=True)[
        "raw_output"].to_numpy()
    if live is not None and (~held).any():
        missing = inputs[~held].assign(source="live")
        missing["raw_output"] = generate_all(live, missing, constrained=True)[
            "raw_output"].to_numpy()
        parts.append(missing)
    return pd.concat(parts).sort_index()


# ------------------------------------------------------------------------ recording

#: What ``python -m runtime record attacks`` can record: every attack prompt of lesson 5,
#: or the ordinary questions under the placebo, quoting and datamarking prompts (lesson
#: 1's prompt has its own collection).
RECORD_SETS = ("attacks", "ordinary")


def record_prompts(which: str, data_dir=DATA_DIR,
                   attack_ids: Sequence[str] | None = None) -> pd.DataFrame:
    """The prompts ``record attacks --prompts WHICH`` sends, one row each: ``question_id``
    (the attack's or the question's ID), ``collection``, ``messages`` and
    ``retrieved_ids``; ``attack_ids`` keeps the prompts of those attacks only."""
    riverton = load_riverton(data_dir)
    if which == "attacks":
        fixture = load_attack_fixture(data_dir, riverton.handbook, riverton.metadata)
        chosen = fixture.questions
        unknown = sorted(set(attack_ids or ()) - set(chosen["attack_id"]))
        if unknown:
            raise ValueError(f"no attack {', '.join(unknown)}; the attacks are "
                             f"{', '.join(chosen['attack_id'])}")
        if attack_ids:
            chosen = chosen[chosen["attack_id"].isin(list(attack_ids))]
        inputs = attack_reader_inputs(chosen, riverton.handbook, fixture.passages,
                                      fixture.wordings, metadata=riverton.metadata)
        return pd.DataFrame([
            {"question_id": row.attack_id, "messages": getattr(row, column),
             "retrieved_ids": row.retrieved_ids,
             "collection": f"attack prompts, {row.attack_id}"}
            for row in inputs.itertuples(index=False) for column in PROMPT_COLUMNS.values()])
    if which == "ordinary":
        extended = load_riverton(data_dir, EXTENDED_QUESTIONS_FILE).questions
        questions = pd.concat([riverton.questions, extended], ignore_index=True)
        retrieved = TfidfRetriever.fit(riverton.handbook).rank(questions, k=3)
        inputs = ordinary_inputs(questions, retrieved, riverton.handbook,
                                 prompts=tuple(PROMPT_COLUMNS)[1:])
        return inputs.assign(collection="ordinary questions, " + inputs["prompt"])
    raise ValueError(f"unknown prompt set {which!r}; use one of {', '.join(RECORD_SETS)}")
