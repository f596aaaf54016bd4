"""The passages retrieval sees under attack, and the reader's inputs with and without it.

Lesson 5, "Plant the passages". Each attack is asked once without it and, under it, in
every wording with its planted passage first and last; the prompts of every prompt
defence are built over the same passages.
"""
from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from ..attack_rules import without_payload
from ..defences import PROMPTS, check_fingerprinted
from ..retrieval import TfidfRetriever

def attack_index(handbook: pd.DataFrame, planted: pd.DataFrame,
                 planted_ids: Iterable[str] | None = None, *,
                 metadata: pd.DataFrame) -> pd.DataFrame:
    """The passages retrieval sees under attack: the handbook plus planted passages.

    Lesson 5, "Plant the passages". ``planted_ids`` chooses which planted passages join
    (``None``: all). Every row keeps its ``source`` and gains ``provenance`` and
    ``trusted`` (True only for the handbook's rows). Trust comes from the file a row was
    loaded from, never from what it says: ``handbook`` must give exactly the fingerprint
    ``metadata`` records (:func:`helpers.defences.check_fingerprinted`); any other table
    is refused.
    """
    check_fingerprinted(handbook, metadata)
    return _joined_index(handbook, planted, planted_ids)


def _joined_index(handbook: pd.DataFrame, planted: pd.DataFrame,
                  planted_ids: Iterable[str] | None) -> pd.DataFrame:
    """:func:`attack_index` for a handbook its caller has already checked."""
    chosen = planted
    if planted_ids is not None:
        planted_ids = tuple(planted_ids)
        chosen = planted[planted["passage_id"].isin(list(planted_ids))]
        missing = sorted(set(planted_ids) - set(planted["passage_id"]))
        if missing:
            raise KeyError(f"planted passage(s) {', '.join(missing)} not in the attack fixture")
    clash = sorted(set(chosen["passage_id"]) & set(handbook["passage_id"]))
    if clash:
        raise ValueError(f"planted passage IDs {', '.join(clash)} collide with the handbook")
    columns = ["passage_id", "topic", "text", "source"]
    book = handbook[columns].assign(provenance="handbook", trusted=True)
    extra = chosen[columns + ["provenance"]].assign(trusted=False)
    return pd.concat([book, extra], ignore_index=True)


WITHOUT_ATTACK = "without the attack"
UNDER_ATTACK = "under attack"
#: Where the attack's text sits: its planted passage first or last of the retrieved
#: passages, or an order carried by the question before or after its own words.
POSITIONS = ("first", "last")
NO_ATTACK = "none"

#: The prompts lesson 5 asks the reader with, and the column of the inputs that holds
#: each one's chat messages (:data:`helpers.defences.PROMPTS` builds them).
PROMPT_COLUMNS = {
    "lesson 1 prompt": "messages",
    "placebo prompt": "placebo_messages",
    "quoting prompt": "quoted_messages",
    "datamarking prompt": "datamarked_messages",
}


class PlantedNotRetrievedError(ValueError):
    """A wording's planted passage is not among the passages its question retrieves."""


def _input_row(attack_id, condition, wording, position, question, ranked, index,
               planted_id=None):
    """One input: the retrieval (the planted passage moved ``position``), its prompts, and
    where tf-idf ranked the planted passage before it was moved (``planted_rank``)."""
    pairs = list(zip(ranked["passage_id"], ranked["score"]))
    rank = next((n for n, (pid, _) in enumerate(pairs, 1) if pid == planted_id), None)
    if planted_id is not None:
        mine = [pair for pair in pairs if pair[0] == planted_id]
        rest = [pair for pair in pairs if pair[0] != planted_id]
        pairs = mine + rest if position == "first" else rest + mine
    texts = dict(zip(index["passage_id"], index["text"]))
    passages = tuple((pid, texts[pid]) for pid, _ in pairs)
    row = {"attack_id": attack_id, "condition": condition, "wording": wording,
           "position": position, "question": question, "planted_rank": rank,
           "retrieved_ids": tuple(p for p, _ in pairs),
           "retrieved_scores": tuple(float(s) for _, s in pairs), "passages": passages,
           "index_passages": index}
    for name, column in PROMPT_COLUMNS.items():
        row[column] = PROMPTS[name](attack_id, question, passages)
    return row


def attack_reader_inputs(attacks: pd.DataFrame, handbook: pd.DataFrame,
                         planted: pd.DataFrame, wordings: pd.DataFrame | None = None,
                         k: int = 3, *, metadata: pd.DataFrame) -> pd.DataFrame:
    """Retrieval and reader prompts for every attack: once without it, and under it in
    every wording at both positions.

    Lesson 5, "Plant the passages". Without the attack, tf-idf is fitted on the handbook
    alone and the question is asked with any payload taken out; ``wording`` is 0 and
    ``position`` "none". Under attack, each wording (``wordings`` as
    :func:`runtime.load_attack_fixture` gives them; ``None``: each attack's own row) gets
    an index of its own, the handbook plus the planted passage in that wording, and
    tf-idf retrieves the top ``k``; the planted passage is then put first and last. A
    planted passage that is not retrieved raises :class:`PlantedNotRetrievedError`. An
    order carried by the question goes before and after the question's words instead.
    The prompts of :data:`PROMPT_COLUMNS` are built over the same passages.
    """
    check_fingerprinted(handbook, metadata)
    if wordings is None:
        texts = dict(zip(planted["passage_id"], planted["text"]))
        wordings = pd.DataFrame([
            {"attack_id": a.attack_id, "wording": 1, "payload": a.payload,
             "text": texts[a.planted_ids[0]] if a.planted_ids else a.question}
            for a in attacks.itertuples(index=False)])
    clean_index, rows = _joined_index(handbook, planted, ()), []
    for attack in attacks.itertuples(index=False):
        clean_question = without_payload(attack.question, attack.payload)
        rows.append(_input_row(attack.attack_id, WITHOUT_ATTACK, 0, NO_ATTACK, clean_question,
                               _ranked(clean_index, attack.attack_id, clean_question, k),
                               clean_index))
        for wording in wordings[wordings["attack_id"] == attack.attack_id].itertuples():
            if not attack.planted_ids:
                rest = without_payload(wording.text, wording.payload)
                for position, asked in zip(POSITIONS, (f"{wording.payload} {rest}",
                                                       f"{rest} {wording.payload}")):
                    rows.append(_input_row(attack.attack_id, UNDER_ATTACK, wording.wording,
                                           position, asked, _ranked(clean_index,
                                           attack.attack_id, asked, k), clean_index))
                continue
            (planted_id,) = attack.planted_ids
            index = _joined_index(handbook, planted.assign(text=planted["text"].where(
                planted["passage_id"] != planted_id, wording.text)), attack.planted_ids)
            ranked = _ranked(index, attack.attack_id, attack.question, k)
            if planted_id not in set(ranked["passage_id"]):
                raise PlantedNotRetrievedError(
                    f"{attack.attack_id}, wording {wording.wording}: planted passage "
                    f"{planted_id} is not among the {k} passages the question retrieves "
                    f"({', '.join(ranked['passage_id']) or 'none'}); write it with the "
                    "question's words")
            for position in POSITIONS:
                rows.append(_input_row(attack.attack_id, UNDER_ATTACK, wording.wording,
                                       position, attack.question, ranked, index, planted_id))
    return pd.DataFrame(rows)


def _ranked(index: pd.DataFrame, question_id: str, question: str, k: int) -> pd.DataFrame:
    asked = pd.DataFrame({"question_id": [question_id], "question": [question]})
    return TfidfRetriever.fit(index).rank(asked, k=k).sort_values("rank")
