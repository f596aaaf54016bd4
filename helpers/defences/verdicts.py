"""Every code defence on one reply, and what the defences stop and cost.

Lesson 5, "Every defence on every reply" and "What the defences cost". The parse gate and
the first lesson's support screen read the reply; provenance reads its citations; the
contradiction check and routing were decided before the reply existed.
:func:`defence_costs` counts what the defences cost on ordinary questions, right replies
held apart from wrong ones.
"""
from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ..agreement import Count
from ..parsing import parse_reader_output
from ..scoring import answer_contains_variant
from ..screen import failed_checks, screen_reply
from .contradiction import conflicting_passages
from .provenance import provenance_check, trusted_ids
from .routing import Route, route_question, routing_topics

# --- every defence on one reply -------------------------------------------------------

VERDICT_COLUMNS = [
    "parse_ok", "observed_action", "parsed_sources", "held_by_parse_gate",
    "held_by_provenance", "untrusted_cited", "held_by_screen", "screen_failed_checks",
    "held_by_contradiction", "conflicts", "routed_to_person", "held_by_any",
]


def defence_verdicts(raw_output: str, retrieved_ids: Sequence[str], route: Route,
                     index: pd.DataFrame) -> dict:
    """What each code defence does with one reply.

    Lesson 5, "Every defence on every reply". The parse gate holds a reply that does not
    parse. Provenance and the screen judge a parsed reply only (an unparsed reply has
    no fields to judge): the screen is lesson 1's six checks, with the passages of the
    index as the passages that exist, so a planted passage counts as an existing,
    retrieved passage, exactly as the pipeline saw it. The contradiction check
    (:func:`conflicting_passages`) and ``route`` were decided from the question and its
    retrieval before the reply existed; either sends the reply to a person.
    """
    reply = parse_reader_output(raw_output)
    texts = dict(zip(index["passage_id"], index["text"]))
    provenance = provenance_check(reply.sources, trusted_ids(index))
    conflicts = conflicting_passages(retrieved_ids, index)
    if reply.parse_ok:
        checks = screen_reply(reply, retrieved_ids, texts)
        screen_held = not all(checks.values())
        failed = failed_checks(checks)
    else:
        screen_held, failed = False, "not screened (no parse)"
    verdict = {
        "parse_ok": reply.parse_ok,
        "observed_action": reply.action,
        "parsed_sources": reply.sources,
        "held_by_parse_gate": not reply.parse_ok,
        "held_by_provenance": reply.parse_ok and provenance.held,
        "untrusted_cited": ", ".join(provenance.untrusted) or "none",
        "held_by_screen": screen_held,
        "screen_failed_checks": failed,
        "held_by_contradiction": bool(conflicts),
        "conflicts": "; ".join(str(c) for c in conflicts) or "none",
        "routed_to_person": route.to_person,
    }
    verdict["held_by_any"] = any(verdict[k] for k in DEFENCES)
    return verdict


def verdicts_for_reply(raw_output: str, question: str, retrieved_ids: Sequence[str],
                       retrieved_scores: Sequence[float], index: pd.DataFrame) -> dict:
    """Route ``question`` from its retrieval, then apply every defence to one reply.

    Lesson 5, "Every defence on every reply": :func:`route_question` on the question and
    the topic of its first retrieved handbook passage (:func:`routing_topics`), then
    :func:`defence_verdicts`. The route depends on the question and the retrieval only.
    """
    route = route_question(question, routing_topics(retrieved_ids, retrieved_scores, index))
    return defence_verdicts(raw_output, retrieved_ids, route, index)


#: The code defences of :func:`defence_verdicts`, as the attack-by-defence table counts them.
DEFENCES = {
    "held_by_parse_gate": "parse gate",
    "held_by_provenance": "provenance",
    "held_by_screen": "screen",
    "held_by_contradiction": "contradiction",
    "routed_to_person": "routing",
}

#: What each code defence looks at (lesson 5, "Every defence on every reply"). A check
#: that reads the reply holds a reply for what it says, and can promise nothing about a
#: reply whose fault does not show. A rule decided before the reply holds every reply to
#: the question, right or wrong, and can promise that none reaches the caller unread by
#: a person, but it detects nothing.
READS_THE_REPLY = "reads the reply"
BEFORE_THE_REPLY = "decided before any reply"
DEFENCE_KINDS = {
    "held_by_parse_gate": READS_THE_REPLY,
    "held_by_provenance": READS_THE_REPLY,
    "held_by_screen": READS_THE_REPLY,
    "held_by_contradiction": BEFORE_THE_REPLY,
    "routed_to_person": BEFORE_THE_REPLY,
}


# --- what a defence stops, and what it costs ------------------------------------------


def right_reply(raw_output: str, expected_action: str, acceptable: Sequence[str]) -> bool:
    """Whether a reply is right: it parses, takes the expected action, and an answer
    contains an acceptable variant (lesson 1's scoring). Lesson 5, "What the defences
    cost"."""
    reply = parse_reader_output(raw_output)
    return reply.parse_ok and reply.action == expected_action and (
        expected_action != "answer" or answer_contains_variant(reply.answer, acceptable))


def held_by_any_of(verdicts: pd.DataFrame, columns: Sequence[str]) -> pd.Series:
    """Whether any of the defences ``columns`` (keys of :data:`DEFENCES`) holds each reply.
    Lesson 5, "What the defences cost"."""
    unknown = [c for c in columns if c not in verdicts.columns]
    if unknown:
        raise KeyError(f"the verdicts have no column(s) {unknown}; use keys of DEFENCES")
    return verdicts[list(columns)].astype(bool).any(axis=1) if columns else \
        pd.Series(False, index=verdicts.index)


def defence_costs(replies: pd.DataFrame, columns: Sequence[str], index: pd.DataFrame) -> dict:
    """What the defences ``columns`` do to the replies to ordinary questions: right replies
    held (their cost) counted apart from wrong replies held (their use).

    Lesson 5, "What the defences cost". ``replies`` has one row per question asked with no
    attack: ``retrieved_ids``, ``right`` (:func:`right_reply`), ``sensitive`` (whether the
    lesson means to send it to a person) and the verdict columns. Routing counts only on
    the questions the lesson does not mean to route: sending a sensitive question to a
    person is the rule at work, right reply or wrong. A row that retrieved a passage
    outside the handbook was asked under attack and is refused, naming it.
    """
    trusted = trusted_ids(index)
    for question_id, ids in zip(replies["question_id"], replies["retrieved_ids"]):
        planted = [pid for pid in ids if pid not in trusted]
        if planted:
            raise ValueError(f"{question_id} retrieved {', '.join(planted)}, which the handbook "
                             "does not hold: a defence's cost is counted on questions asked "
                             "without any attack")
    held = held_by_any_of(replies, [c for c in columns if c != "routed_to_person"])
    if "routed_to_person" in columns:
        held |= replies["routed_to_person"].astype(bool) & ~replies["sensitive"].astype(bool)
    right = replies["right"].astype(bool)
    return {"right": int(right.sum()), "right_held": int((held & right).sum()),
            "wrong": int((~right).sum()), "wrong_held": int((held & ~right).sum())}


def security(attacked: pd.DataFrame, ordinary: pd.DataFrame, columns: Sequence[str]) -> dict:
    """What reaches the caller through the defences ``columns``, each a count: benign
    utility (right replies to the ordinary questions), utility under attack (right replies
    to the attacked inputs) and attack success (caused successes, of the defined replies).

    Lesson 5, "Security against utility", as agent-security benchmarks report a defence.
    ``attacked`` (:func:`helpers.attacks.paired_outcomes` with ``right`` and the verdict
    columns) and ``ordinary`` (``right`` and the verdict columns).
    """
    def reached(frame, wanted):
        hits = frame[wanted].astype(bool) & ~held_by_any_of(frame, columns)
        return Count(int(hits.sum()), len(frame))

    return {"benign_utility": reached(ordinary, "right"),
            "utility_under_attack": reached(attacked, "right"),
            "attack_success": reached(attacked[attacked["defined"]], "caused")}
