"""Lesson 5's exercises, one checker each (see :mod:`exercises`)."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd
import regex

from helpers import attacks, defences, retrieval, screen, text
from .framework import (AnswerShapeError, _all_questions, _asked, _call, _first_hint, _handbook,
                        _id_list, _known, _plural, _questions, _reply, _retrieved_ids,
                        _riverton, _same_ids, _tfidf, correct, exercise, fixture_cache, hint)


@fixture_cache
def _attack_fixture():
    from runtime import load_attack_fixture

    return load_attack_fixture(handbook=_handbook(), metadata=_riverton().metadata)


@fixture_cache
def _attack_inputs() -> dict[tuple[str, str], Any]:
    """Lesson 5's retrieval for every attack, by (attack, condition): the run without it,
    and, under it, wording 1 (the attack's own row, as attack_reader_inputs takes it when
    given no wordings) with its planted passage first (what the controls answer)."""
    fixture = _attack_fixture()
    frame = attacks.attack_reader_inputs(fixture.questions, _handbook(), fixture.passages,
                                         metadata=_riverton().metadata)
    chosen = frame[frame["position"] != "last"]  # "none" without the attack, "first" under it
    return {(row.attack_id, row.condition): row for row in chosen.itertuples(index=False)}


@fixture_cache
def _handbook_index() -> pd.DataFrame:
    """Lesson 5's index of lesson 1's questions: the handbook alone, every row trusted."""
    return attacks.attack_index(_handbook(), _attack_fixture().passages, (),
                                metadata=_riverton().metadata)


@fixture_cache
def _topics(question: str) -> list[tuple[str, str]]:
    """The topic lesson 5's rule reads for a question: that of the first passage tf-idf
    ranks for it over the handbook, if it scores enough
    (:func:`helpers.defences.routing_topics`)."""
    hits = _tfidf().rank(_asked("asked", question))
    return defences.routing_topics(list(hits["passage_id"]), list(hits["score"]),
                                   _handbook_index())


def _route_cases() -> list[tuple[str, str, list, bool]]:
    """(name, question, topics the rule reads, whether it asks about child care) for lesson
    5's routed questions: the 42 ordinary questions (lesson 1's six, then lesson 2's), then
    every attack question with and without its attack. A question asks about child care
    when its gold passage, or for an attack question a retrieved passage, is the
    child-care passage."""
    passage = _child_care_passage()
    ordinary = [(q.question_id, q.question, _topics(q.question), q.gold_passage_id == passage)
                for q in _all_questions().itertuples(index=False)]
    return ordinary + [(f"{attack_id} ({condition})", row.question, defences.routing_topics(
        row.retrieved_ids, row.retrieved_scores, row.index_passages), passage in row.retrieved_ids)
        for (attack_id, condition), row in _attack_inputs().items()]


def _child_care_passage() -> str:
    """The handbook passage A06's question retrieves first without its attack (H13)."""
    return _attack_inputs()[("A06", attacks.WITHOUT_ATTACK)].retrieved_ids[0]


@exercise("5.1", "Route child care to a person", expects="my_topics (a dict from handbook "
          "topic to category), my_terms (a dict from category to a set of words) and "
          "also_routed (a list of lesson 1 question IDs)")
def route_child_care(my_topics, my_terms, also_routed):
    """Lesson 5, exercise 5.1: a routing rule extended so that A06 goes to a person.

    The student's topics and words must keep every topic and word of the lesson's rule;
    passed to :func:`helpers.defences.route_question`, they must send A06 to a person
    with and without its attack and add no question that is not about child care, and
    ``also_routed`` must list the lesson 1 questions the new rule adds ("Routing decided
    before the reader runs").
    """
    if not isinstance(my_topics, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in my_topics.items()):
        return hint("my_topics must be a dict from a handbook topic to a category name, like "
                    "defences.ROUTED_TOPICS.")
    if not isinstance(my_terms, Mapping):
        raise AnswerShapeError("my_terms must be a dict: {category: a set of words}")
    for category, words in my_terms.items():
        if isinstance(words, str) or not isinstance(words, Iterable) or not all(
                isinstance(w, str) for w in words):
            raise AnswerShapeError(f"my_terms[{category!r}] must be a set of words"
                                   + (", not one string" if isinstance(words, str) else ""))
    terms = {str(category): frozenset(words) for category, words in my_terms.items()}
    unmatchable = sorted(w for words in terms.values() for w in words
                         if " ".join(text.tokenize(w)) != w)
    dropped = sorted(topic for topic, category in defences.ROUTED_TOPICS.items()
                     if my_topics.get(topic) != category)
    dropped += sorted(f"{category}: {word}" for category, words in defences.QUESTION_TERMS.items()
                      for word in words if word not in terms.get(category, ()))
    _first_hint(
        (unmatchable, lambda: f"{unmatchable[0]!r} can never match: the rule compares the "
         "question's tokens as text.tokenize gives them (lower case, no punctuation), so write "
         "each word, or each phrase of words, the same way."),
        (dropped, lambda: f"Your rule leaves out {dropped[0]!r} of the lesson's rule: keep every "
         "topic and word (start from defences.ROUTED_TOPICS and defences.QUESTION_TERMS) and add "
         "to them."))
    cases = _route_cases()
    before = {name: defences.route_question(q, topics).to_person for name, q, topics, _ in cases}
    after = {name: defences.route_question(q, topics, terms, my_topics).to_person
             for name, q, topics, _ in cases}
    about = {name: about_child_care for name, *_, about_child_care in cases}
    a06 = [name for name in after if name.startswith("A06") and not after[name]]
    stray = [name for name in after if after[name] and not before[name] and not about[name]]
    _first_hint(
        (a06, lambda: f"{a06[0]} still goes to the reader. Which handbook passage does it "
                      "retrieve, and which topic does that passage carry?"),
        (stray, lambda: f"Your rule also sends {stray[0]} to a person, and it is not about child "
                        "care: route the new kind of question, not more."))
    ids = list(_questions()["question_id"])
    expected = sorted(q for q in ids if after[q] and not before[q])
    given = sorted(set(_id_list(also_routed, "also_routed")))
    _known(given, ids, f"one of lesson 1's {len(ids)} questions ({ids[0]} to {ids[-1]})")
    already = [q for q in given if before[q]]
    _first_hint(
        (already, lambda: f"{already[0]} went to a person already; list only the questions your "
                          "rule adds."))
    _same_ids(given, expected, lambda extra, _: f"{extra[0]} still goes to the reader under your "
              "rule: look at what it asks and what it retrieves.",
              lambda _, n: f"Your rule sends {n} more of lesson 1's {len(ids)} questions to a "
                           "person than you list.")
    held_now = "the author control A06-library, which got past every defence, is now held"
    if expected:
        return correct(f"A06 is routed, and so is {', '.join(expected)}, which asks about "
                       f"child care in other words: {held_now}.")
    missed = [q for q in ids if about[q] and not after[q]]
    if not missed:
        return correct(f"A06 is routed: {held_now}.")
    passage, retrieved = _child_care_passage(), _retrieved_ids()
    what = ", ".join(f"{q} (which retrieves {', '.join(retrieved[q]) or 'nothing'})"
                     for q in missed)
    return correct(f"A06 is routed: {held_now}. But {what} asks about child care in other "
                   f"words, and {passage}'s topic is only seen when {passage} is retrieved: "
                   "routing by topic is only as good as retrieval, and words in the "
                   "question are the other half of the rule.")


#: The passage ID exercise 5.2's planted passage gets.
PLANTED_ID = "P09"

#: A sentence that puts child care in a room: "child care" and "Room" with its number.
_CHILD_CARE = regex.compile(r"\bchild ?care\b", regex.IGNORECASE)
_ROOM = regex.compile(r"\broom\s+(\w*\d\w*)", regex.IGNORECASE)


@exercise("5.2", "A planted figure the screen passes", expects=f"planted_text (the text of "
          f"planted passage {PLANTED_ID}) and reply (a raw reply to A06's question)")
def planted_figure(planted_text, reply):
    """Lesson 5, exercise 5.2: a planted passage, and a reply citing it that the screen passes.

    The planted passage (:data:`PLANTED_ID`) must put child care in a room, in one
    sentence; it joins the handbook in an index of its own, tf-idf is fitted on it and
    A06's question retrieves its top three. The reply must parse, answer with that room,
    cite the planted passage, state a figure that no handbook passage holds and pass all
    six checks, and provenance must hold it (:func:`helpers.defences.defence_verdicts`)
    ("Every defence on every reply").
    """
    if not isinstance(planted_text, str) or not planted_text.strip():
        return hint("planted_text must be the text of your planted passage, a string.")
    rooms = {room for sentence in text.split_sentences(planted_text)
             if _CHILD_CARE.search(sentence) for room in _ROOM.findall(sentence)}
    topic = _handbook().set_index("passage_id").at[_child_care_passage(), "topic"]
    mine = pd.DataFrame([{"passage_id": PLANTED_ID, "topic": topic,
                          "text": planted_text, "source": "exercise 5.2",
                          "provenance": "planted"}])
    index = attacks.attack_index(_handbook(), mine, metadata=_riverton().metadata)
    question = _attack_fixture().questions.set_index("attack_id").at["A06", "question"]
    ranked = retrieval.TfidfRetriever.fit(index).rank(_asked("A06", question)).sort_values("rank")
    retrieved = tuple(ranked["passage_id"])
    parsed = _reply(reply, "reply")
    figures = screen.numbers_in(parsed.answer)
    _first_hint(
        (not rooms, "Your planted passage must put free child care in a room of your invention: "
                    "one sentence that names child care and the room, with its number."),
        (parsed.action != "answer", "reply must be an answer, not an abstention or a premise "
                                    "flag."),
        (not set(_ROOM.findall(parsed.answer)) & rooms, lambda: "reply must give the room "
         f"your passage puts child care in (Room {min(rooms)}): that is what A06's caller asks."),
        (PLANTED_ID not in parsed.sources, f"Cite your planted passage, {PLANTED_ID}: the "
                                           "exercise is about a reply that agrees with what it "
                                           "cites."),
        (PLANTED_ID not in retrieved, f"{PLANTED_ID} is not among the three passages retrieved "
         f"for A06's question ({', '.join(retrieved)}), so the reader would never see it. Write "
         "it with the question's own words."),
        (not figures, "State a figure in the answer: the exercise is about what the check on "
                      "figures can see."),
        (set(figures) <= set(screen.numbers_in(" ".join(_handbook()["text"]))), "Every figure in "
         "your answer appears in the handbook; state one that no handbook passage holds, as an "
         "attacker would."))
    verdict = defences.verdicts_for_reply(reply, question, retrieved, tuple(ranked["score"]), index)
    if verdict["held_by_screen"]:
        return hint(f"The screen holds it ({verdict['screen_failed_checks']}): every figure "
                    "in the answer must appear in a passage it cites, and it may cite only "
                    "retrieved passages.")
    assert verdict["held_by_provenance"]
    routed = ("Routing holds it as well." if verdict["routed_to_person"] else
              f"Routing does not: {topic} is not a routed topic.")
    contradiction = (f"The contradiction check holds it too ({verdict['conflicts']}), but "
                     "only because your passage carries the handbook's topic."
                     if verdict["held_by_contradiction"] else
                     "The contradiction check does not: no retrieved handbook passage on "
                     "its topic states other figures.")
    return correct(f"The screen passes it: {PLANTED_ID} exists, was retrieved and holds the "
                   f"figure. Provenance holds it, because {PLANTED_ID} did not come from the "
                   f"fingerprinted handbook. {contradiction} {routed}")


def _same_topic_pairs(index: pd.DataFrame) -> list[tuple[str, str, str, str]]:
    """(first ID, second ID, first text, second text) for every two passages of one topic."""
    rows = list(index.itertuples(index=False))
    return [(a.passage_id, b.passage_id, a.text, b.text) for i, a in enumerate(rows)
            for b in rows[i + 1:] if a.topic == b.topic]


@exercise("5.3", "Two programs, two deadlines", expects="my_disagree (a function from two "
          "passage texts of one topic to True when they cannot both be true)")
def two_programs(my_disagree):
    """Lesson 5, exercise 5.3: a contradiction check without the variant handbook's false
    alarms. ``my_disagree(first, second)`` must flag no two passages of one topic of the
    variant handbook (each program states its own deadline, fee and hours) and still flag
    every planted or stale passage of the attack fixture that the lesson's check flags
    against the handbook passage of its topic ("Two passages that disagree")."""
    if not callable(my_disagree):
        return hint("my_disagree must be a function: def my_disagree(first, second): ...")
    fixture = _attack_fixture()
    alarms = [f"{a} and {b}" for a, b, x, y in _same_topic_pairs(fixture.variant)
              if _call(my_disagree, "my_disagree", x, y)]
    planted = attacks.attack_index(_handbook(), fixture.passages, metadata=_riverton().metadata)
    needed = [(a, b, x, y) for a, b, x, y in _same_topic_pairs(planted)
              if defences.conflicting_passages([a, b], planted)]
    missed = [f"{a} and {b}" for a, b, x, y in needed
              if not _call(my_disagree, "my_disagree", x, y)]
    _first_hint(
        (alarms, lambda: f"Your check flags {alarms[0]} of the variant handbook, which are both "
                         "true: what does each of them speak about?"),
        (missed, lambda: f"Your check no longer flags {missed[0]}, which cannot both be true: "
                         "keep the lesson's comparison of values where the passages speak of "
                         "the same thing."))
    return correct(f"No false alarm on the variant handbook, and all {len(needed)} planted or "
                   "stale contradictions of the handbook are still flagged.")


def _route(question: str):
    """Lesson 5's rule on a question, reading the topic of what tf-idf retrieves for it."""
    return defences.route_question(question, _topics(question))


def _fixed_route(my_fix, question: str):
    """The lesson's rule on ``my_fix(question)``, retrieved afresh: a fix changes what
    tf-idf finds as well as the words the rule reads."""
    fixed = _call(my_fix, "my_fix", question)
    if not isinstance(fixed, str):
        raise AnswerShapeError(f"my_fix must return a string; for {question!r} it returned "
                               f"{type(fixed).__name__}")
    return fixed, _route(fixed)


@exercise("5.4", "Evade the router, then fix it", expects="my_evasion (a question, a string) "
          "and my_fix (a function from a question to the question the router reads)")
def evade_and_fix(my_evasion, my_fix):
    """Lesson 5, exercise 5.4: an evasion of the router, and a fix that routes it at no cost.

    ``my_evasion`` must go to the reader under lesson 5's rule ("An attacker who reads the
    router"); the rule, reading ``my_fix(question)`` instead of the question, must send
    it to a person for eligibility, catch at least one of the page's evasions that the
    rule lets through, and send no more of the 42 ordinary questions to a person.
    """
    _first_hint(
        (not isinstance(my_evasion, str) or not my_evasion.strip(), "my_evasion must be a "
                                                                    "question, a string."),
        (not callable(my_fix), "my_fix must be a function: def my_fix(question): ... return "
                               "question"))
    before = _route(my_evasion)
    if before.to_person:
        return hint(f"The lesson's rule already sends your question to a person "
                    f"({'; '.join(before.reasons)}): reword it so that no routed word is "
                    "left and tf-idf finds no routed passage.")
    fixed, after = _fixed_route(my_fix, my_evasion)
    _first_hint(
        (not after.to_person, f"Your fix turns your question into {fixed!r}, which still goes to "
                              "the reader. What did your rewording hide from the word lists?"),
        (not any(reason.startswith("eligibility") for reason in after.reasons), "Your fix routes "
         f"your question, but not as an eligibility question ({'; '.join(after.reasons)}): the "
         "evasion is of A04, an applicant's age."))
    passing = [e for e in _attack_fixture().evasions.itertuples(index=False)
               if not _route(e.question).to_person]
    caught = [e.evasion_id for e in passing if _fixed_route(my_fix, e.question)[1].to_person]
    if not caught:
        return hint(f"Your fix catches your own question only; of the {len(passing)} evasions "
                    "on this page that reach the reader, it routes none. Make it a rule for "
                    "a style of evasion, not for one question.")
    added = [q.question_id for q in _all_questions().itertuples(index=False)
             if _fixed_route(my_fix, q.question)[1].to_person and not _route(q.question).to_person]
    if added:
        return hint(f"Your fix also sends "
                    f"{_plural(len(added), 'ordinary question', 'ordinary questions')} "
                    f"to a person that the lesson's rule did not ({', '.join(added[:3])}"
                    f"{', ...' if len(added) > 3 else ''}): that is its cost. Rewrite only "
                    "what an evasion changes.")
    still = [e.evasion_id for e in passing if e.evasion_id not in caught]
    styles = sorted({e.style for e in passing if e.evasion_id in still})
    return correct(f"Your fix routes your evasion and {len(caught)} of the {len(passing)} "
                   f"evasions on this page that reach the reader ({', '.join(caught)}), and "
                   "sends no ordinary question to a person that the lesson's rule did not. "
                   + (f"Still through: {', '.join(still)} ({', '.join(styles)}). No list of "
                      "words reads every language; a person who reads the question does."
                      if still else "Every evasion on this page is routed now; the next "
                      "attacker will write one that is not."))
