"""Routing: questions a person must answer, decided before the reader runs.

Lesson 5, "Routing decided before the reader runs". Questions about money, eligibility
and deadlines go to a person, decided from the question's words and the topic of the first
retrieved *handbook* passage when it scores enough (:func:`routing_topics`), never from the
reply.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd
import regex

from ..text import tokenize

#: Handbook topics whose questions always go to a person, and the category of each.
ROUTED_TOPICS: Mapping[str, str] = {
    "stipend": "money",
    "transit": "money",
    "forklift eligibility": "eligibility",
    "data eligibility": "eligibility",
    "deadline": "deadline",
}

#: Words and phrases in a question that make it a money, eligibility or deadline
#: question. A phrase (``"sign up"``) matches those tokens in a row. The money words
#: name money that passes between the centre and a student: the stipend, fees, and the
#: bus passes and fares the centre pays for; a currency sign counts as money too. The
#: enrolment words are verbs (``enroll``, ``sign up``, ``register``): asking whether or
#: when one may enrol is an eligibility or deadline question, while the nouns name a
#: desk or an appointment (``enrollment desk``, ``registration office``, ``sign-up
#: meeting``) and are left out. An applicant's age is asked with ``age``, ``old`` or a
#: number of years; ``young`` asks about children too ("how young may a kid be for the
#: babysitting?") and is left out (changed on 2026-12-04, lesson 5, "Routing decided
#: before the reader runs").
QUESTION_TERMS: Mapping[str, frozenset[str]] = {
    "money": frozenset(
        "stipend stipends allowance allowances pay paid paying payment payments fare fares "
        "fee fees tuition refund refunds dollar dollars money wage wages grant grants "
        "bus buses transit transport public-transport travel".split()
    ),
    "eligibility": frozenset(
        "eligible eligibility ineligible qualify qualifies qualified qualification "
        "requirement requirements required require requires prerequisite prerequisites "
        "allowed join admitted admission age ages aged old "
        "enrol enroll enrols enrolls enrolled enrolling register registers registered "
        "registering".split()
    ) | {"years old", "sign up", "signing up", "signed up"},
    "deadline": frozenset(
        "deadline deadlines close closes closing closed apply application applications "
        "due cutoff cut-off late date dates".split()
    ) | {"last day", "last date", "by when", "until when"},
}

#: Words that ask a price. Alone they do not make a money question ("How much does
#: parking cost?" asks about a price the centre neither charges nor pays); with one of
#: :data:`OFFERINGS` in the same question they do. ``free`` is not among them: the
#: handbook uses it for a service ("free child care"), and a question that names that
#: service asks where it is, not what it costs.
PRICE_WORDS: frozenset[str] = frozenset(
    "cost costs price prices priced charge charges charged".split())

#: What the centre offers and may charge for: its courses and enrolment. Child care and
#: laptops are left out (changed on 2026-12-04, lesson 5, "Routing decided before the
#: reader runs"): the handbook gives both free and states no price for them.
OFFERINGS: frozenset[str] = frozenset(
    "course courses class classes program programs programme programmes certificate "
    "licence license workshop workshops training lesson lessons exam exams test tests "
    "enrollment enrolment registration application applications".split())

_CURRENCY = regex.compile(r"\p{Sc}")
#: An age written as one token, such as ``17-year-old`` or ``16-years-old``.
_AGE_TOKEN = regex.compile(r"\d+-years?-olds?")


def _found(tokens: Sequence[str], terms: Iterable[str]) -> list[str]:
    """The terms of ``terms`` found in ``tokens``: words as tokens, phrases as tokens in a row."""
    words = set(tokens)
    found = []
    for term in terms:
        parts = term.split()
        if len(parts) == 1:
            hit = term in words
        else:
            hit = any(list(tokens[i:i + len(parts)]) == parts
                      for i in range(len(tokens) - len(parts) + 1))
        if hit:
            found.append(term)
    return sorted(found)


@dataclass(frozen=True)
class Route:
    """Where a question goes, and every reason found for sending it to a person."""

    to_person: bool
    reasons: tuple[str, ...]

    @property
    def label(self) -> str:
        return "a person" if self.to_person else "the reader"


def route_question(
    question: str,
    retrieved_topics: Iterable[tuple[str, str]],
    question_terms: Mapping[str, Iterable[str]] = QUESTION_TERMS,
    routed_topics: Mapping[str, str] = ROUTED_TOPICS,
    price_words: Iterable[str] = PRICE_WORDS,
    offerings: Iterable[str] = OFFERINGS,
) -> Route:
    """Send a money, eligibility or deadline question to a person.

    Lesson 5, "Routing decided before the reader runs". The question's tokens are
    matched against ``question_terms`` (words, or phrases of words in a row); an age
    written as one token (``17-year-old``) is an eligibility term; a price word counts
    as money when the question also names one of ``offerings``. ``retrieved_topics``
    holds ``(passage_id, topic)`` of the handbook passages whose topic counts (see
    :func:`routing_topics`): a planted passage picks its own label, so its topic is never
    asked. The reply is not an argument: whatever the reader writes, the route is
    fixed before it runs. Words it does not know let a question through: the rule fails
    open on paraphrases, which the lesson measures.
    """
    tokens = tokenize(question)
    reasons = []
    for category, words in question_terms.items():
        found = _found(tokens, words)
        if category == "eligibility":
            found += sorted({t for t in tokens if _AGE_TOKEN.fullmatch(t)})
        if category == "money":
            prices, offered = _found(tokens, price_words), _found(tokens, offerings)
            if prices and offered:
                found += [f"{' and '.join(prices)} of {' and '.join(offered)}"]
            if _CURRENCY.search(question):
                found.append(_CURRENCY.search(question).group())
        if found:
            reasons.append(f"{category}: the question says {', '.join(found)}")
    for passage_id, topic in retrieved_topics:
        category = routed_topics.get(topic)
        if category is not None:
            reasons.append(f"{category}: retrieved {passage_id} ({topic})")
    return Route(bool(reasons), tuple(reasons))


#: The tf-idf score the first retrieved handbook passage needs before its topic routes a
#: question (lesson 5, "Routing decided before the reader runs").
TOPIC_MIN_SCORE = 0.35


def routing_topics(retrieved_ids: Sequence[str], retrieved_scores: Sequence[float],
                   index: pd.DataFrame, min_score: float = TOPIC_MIN_SCORE
                   ) -> list[tuple[str, str]]:
    """``(passage_id, topic)`` of the first retrieved handbook passage, if it scores at
    least ``min_score``; otherwise none.

    Lesson 5, "Routing decided before the reader runs". A passage that tf-idf ranks
    second or third, or first with a weak score, shares a word or two with the question
    and says little about what it asks; its topic does not route. Planted passages are
    skipped, so a planted passage ranked first cannot hide the handbook passage below it.
    """
    if len(retrieved_ids) != len(retrieved_scores):
        raise ValueError(f"{len(retrieved_ids)} retrieved IDs but {len(retrieved_scores)} scores")
    rows = index.set_index("passage_id")
    for passage_id, score in zip(retrieved_ids, retrieved_scores):
        if bool(rows.at[passage_id, "trusted"]):
            return [(passage_id, rows.at[passage_id, "topic"])] if score >= min_score else []
    return []


def route_table(questions: pd.DataFrame, retrieved: pd.DataFrame, index: pd.DataFrame,
                **rule) -> pd.DataFrame:
    """The route of each question (``question_id``, ``question``) from its retrieval.

    Lesson 5, "Routing decided before the reader runs". ``retrieved`` holds
    ``question_id``, ``passage_id``, ``rank`` and ``score``; ``rule`` passes other word
    lists to :func:`route_question` (``question_terms=...``, ``offerings=...``).
    """
    rows = []
    for question_id, question in zip(questions["question_id"], questions["question"]):
        hits = retrieved[retrieved["question_id"] == question_id].sort_values("rank")
        ids, scores = tuple(hits["passage_id"]), tuple(float(s) for s in hits["score"])
        route = route_question(question, routing_topics(ids, scores, index), **rule)
        rows.append({"question_id": question_id, "question": question,
                     "retrieved_ids": ids, "route": route.label,
                     "to_person": route.to_person,
                     "reasons": "; ".join(route.reasons) or "none"})
    return pd.DataFrame(rows)


def topic_routes(questions: pd.DataFrame, ranked: pd.DataFrame, index: pd.DataFrame,
                 routed_topics: Mapping[str, str] = ROUTED_TOPICS) -> pd.Series:
    """The second router of the analysis plan: whether each question goes to a person,
    because the first passage a retriever ranks for it (``ranked``: ``question_id``,
    ``passage_id``, ``rank``; lesson 2's dense retriever) has a routed topic.

    Lesson 5, "Routing decided before the reader runs". It reads no word of the question
    and has no threshold, so it learns nothing from any question; a question with no
    passage ranked stays with the reader.
    """
    first = ranked[ranked["rank"] == 1].set_index("question_id")["passage_id"]
    topics = questions["question_id"].map(first).map(index.set_index("passage_id")["topic"])
    return topics.isin(list(routed_topics)).rename("to_person")

