"""Replies whose fault does not show: unsupported replies made from supported ones by rules.

Introduced in lesson 4, "Replies whose fault does not show". A screen is only as good as
the faults it is tried on, and the review holds almost no reply whose fault needs reading:
a right number said of the wrong item, a negation, the other programme's fact. So, as
factual-consistency work does with synthetic corruptions, each rule here takes a reply the
review judged supported and changes one thing, in a declared way, so that the reply is no
longer supported by what it cites. Each rule is one small function that returns the
changed answer and sources with the reason the review is expected to give, or None when
it cannot apply (a reply with no figure has no figure to change). :func:`corrupt_review`
applies every rule to the review's supported replies: for each kind and question, the
first supported reply the rule applies to, in review order, and never two identical
replies to one question.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import pandas as pd
import regex

from .review import NOT_SUPPORTED, SUPPORTED, sources_text

#: What the review calls the rule-made replies, where it names a reader.
CORRUPTION_READER = "corruption"

FIGURE_NOT_IN = "figure not in cited passage"
RIGHT_FIGURE = "right figure, wrong item"
CLAIM_NOT_IN = "claim not in cited passage"
CONTRADICTS = "contradicts cited passage"

NUMBER_WORDS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
                "eleven", "twelve")
#: A figure: a course code (DSC-104), a run of digits not glued to a letter or digit (as
#: the screen reads them), or a number written as a word, which the screen cannot see.
FIGURE = regex.compile(r"\b[A-Z]{2,}-\d+\b|(?<![\p{L}\p{N}])\d+|(?i:\b(?:"
                       + "|".join(NUMBER_WORDS) + r")\b)")


@dataclass(frozen=True)
class Reply:
    """A supported reply of the review and what a rule may read beside it: the passages
    the reader was given (in rank order), every handbook passage by ID, and the question's
    acceptable answers and gold passage."""

    answer: str
    sources: tuple[str, ...]
    retrieved: tuple[str, ...]
    passages: Mapping[str, str]
    acceptable: tuple[str, ...] = ()
    gold: str | None = None

    @property
    def cited(self) -> str:
        """The text of the passages the reply cites."""
        return " ".join(self.passages[s] for s in self.sources if s in self.passages)


@dataclass(frozen=True)
class Corruption:
    """A changed reply: its answer, its sources and the reason the rule expects."""

    answer: str
    sources: tuple[str, ...]
    reason: str


def figures(text: str) -> list:
    """The figures of ``text`` (see :data:`FIGURE`), as regex matches."""
    return list(FIGURE.finditer(text))


def _held(text: str) -> set[str]:
    return {f.group().lower() for f in figures(text)}


def _is_code(figure: str) -> bool:
    return "-" in figure


def _asked(reply: Reply, found: list):
    """The figure the question asks about: the first one an acceptable answer holds, else
    the answer's first."""
    wanted = set().union(*map(_held, reply.acceptable))
    return next((f for f in found if f.group().lower() in wanted), found[0])


def _put(text: str, match, figure: str) -> str:
    return text[:match.start()] + figure + text[match.end():]


def _bumped(figure: str) -> str:
    """The next figure: the leading digit raised by one (150 to 250, 8 to 9; a code keeps
    its letters), a number word the next word."""
    if figure.lower() in NUMBER_WORDS:
        word = NUMBER_WORDS[(NUMBER_WORDS.index(figure.lower()) + 1) % len(NUMBER_WORDS)]
        return word.capitalize() if figure[0].isupper() else word
    prefix, _, digits = figure.rpartition("-")
    number = str(int(digits) + 10 ** (len(digits) - 1))
    return f"{prefix}-{number}" if prefix else number


def _figure_reason(text: str, passage: str, otherwise: str) -> str:
    """A figure of ``text`` that ``passage`` lacks comes first; else ``otherwise``."""
    return FIGURE_NOT_IN if _held(text) - _held(passage) else otherwise


# ------------------------------------------------------------------------------ the rules

def number_changed(reply: Reply) -> Corruption | None:
    """The figure the question asks about becomes one the cited passage does not hold."""
    found = figures(reply.answer)
    if not found:
        return None
    target, taken = _asked(reply, found), _held(reply.cited)
    new = _bumped(target.group())
    for _ in NUMBER_WORDS:  # a few steps find a figure the passage lacks
        if new.lower() not in taken:
            return Corruption(_put(reply.answer, target, new), reply.sources, FIGURE_NOT_IN)
        new = _bumped(new)
    return None


#: What a negation turns around: the first "not" (taken out), a leading "No" (taken out),
#: or the first auxiliary or listed verb (given a "not").
_NOT = regex.compile(r"\s+not\b", regex.I)
_NO = regex.compile(r"^no\s+", regex.I)
_VERB = regex.compile(r"\b(?:(is|are|must|may|can|will)|(receive|close|meet|bring)|(meets))\b",
                      regex.I)


def negation(reply: Reply) -> Corruption | None:
    """The answer says the opposite: a "not" taken out or put in, a leading "No" dropped."""
    answer = reply.answer
    if found := _NOT.search(answer):
        changed = _put(answer, found, "")
    elif found := _NO.match(answer):
        rest = answer[found.end():]
        changed = rest[:1].upper() + rest[1:]
    elif found := _VERB.search(answer):
        word, not_ = found.group(), "NOT" if answer.isupper() else "not"
        if found.group(1):
            changed = _put(answer, found, f"{word} {not_}")
        else:
            helper = "do" if found.group(2) else "does"
            helper = helper.capitalize() if word[0].isupper() else helper
            verb = word.lower()[:-1] if found.group(3) else word.lower()
            changed = _put(answer, found, f"{helper} {not_} {verb}")
    else:
        return None
    return Corruption(changed, reply.sources, CONTRADICTS)


def wrong_item(reply: Reply) -> Corruption | None:
    """The figure the question asks about becomes another figure of the same cited passage
    (a code for a code): the right number, attached to the wrong item."""
    found = figures(reply.answer)
    if not found:
        return None
    target = _asked(reply, found)
    others = [f.group() for f in figures(reply.cited) if _is_code(f.group()) ==
              _is_code(target.group()) and f.group().lower() != target.group().lower()]
    if not others:
        return None
    return Corruption(_put(reply.answer, target, others[0]), reply.sources, RIGHT_FIGURE)


#: The two programmes, each named as the other; the handbook's one short name too.
PROGRAMMES = {"Data Support Certificate": "Forklift Operator Licence",
              "Forklift Operator Licence": "Data Support Certificate",
              "forklift course": "Data Support Certificate course"}
_PROGRAMME = regex.compile("|".join(map(regex.escape, PROGRAMMES)))


def other_programme(reply: Reply) -> Corruption | None:
    """One programme's fact said of the other: each programme's name becomes the other's,
    the cited passage kept."""
    if not _PROGRAMME.search(reply.answer):
        return None
    changed = _PROGRAMME.sub(lambda found: PROGRAMMES[found.group()], reply.answer)
    return Corruption(changed, reply.sources, CLAIM_NOT_IN)


def wrong_citation(reply: Reply) -> Corruption | None:
    """The answer kept, the citation moved to the first passage the reader was given that
    the reply does not cite and that is not the question's gold passage."""
    other = next((p for p in reply.retrieved if p not in reply.sources and p != reply.gold),
                 None)
    if other is None:
        return None
    return Corruption(reply.answer, (other,),
                      _figure_reason(reply.answer, reply.passages[other], CLAIM_NOT_IN))


#: An addition for the passage a reply cites first: something the handbook does not say.
#: Three hold a figure (the screen can see them), the others none.
ADDITIONS = {
    "H01": "next to the public library", "H04": "and hold a driving licence",
    "H05": "on showing a student card", "H07": "and a recent pay slip",
    "H08": "paid every Friday", "H09": "as printed on the 2026 course list",
    "H10": "in Room 12", "H11": "at the Mill Street yard",
    "H12": "but a typing test is required", "H13": "with dinner provided",
    "H14": "at 5 p.m.", "H15": "and students must sign a laptop agreement",
}


def unsupported_addition(reply: Reply) -> Corruption | None:
    """A right answer with a clause added that its cited passage does not hold (the one
    :data:`ADDITIONS` gives for that passage), in the answer's own letter case."""
    clause = ADDITIONS.get(reply.sources[0]) if reply.sources else None
    if clause is None:
        return None
    # The full stop moves after the clause, unless it ends an abbreviation ("8 a.m.").
    answer, stopped = reply.answer, reply.answer.endswith(".")
    if regex.search(r"(?<!\.\w)\.$", answer):
        answer = answer[:-1]
    stop = "." if stopped and not clause.endswith(".") else ""
    changed = f"{answer}, {clause}{stop}"
    return Corruption(changed.upper() if reply.answer.isupper() else changed, reply.sources,
                      _figure_reason(clause, reply.cited, CLAIM_NOT_IN))


#: Every kind of corruption: its rule and the sentence that declares it.
RULES: dict[str, tuple[Callable[[Reply], Corruption | None], str]] = {
    "number changed": (number_changed, "The figure the question asks about (else the "
                       "answer's first) gets its leading digit raised by one, or becomes the "
                       "next number word, until the cited passage does not hold it."),
    "negation": (negation, "The answer says the opposite: its first 'not' or a leading 'No' "
                 "is taken out, else its first auxiliary or listed verb gets a 'not'."),
    "right figure, wrong item": (wrong_item, "The figure the question asks about becomes "
                                 "another figure of the same cited passage (a code for a "
                                 "code)."),
    "other programme's fact": (other_programme, "Each programme's name becomes the other's "
                               "(the Data Support Certificate and the Forklift Operator "
                               "Licence), the cited passage kept."),
    "citation moved": (wrong_citation, "The answer is kept; the citation moves to the first "
                       "passage the reader was given that the reply does not cite and that "
                       "is not the question's gold passage."),
    "unsupported addition": (unsupported_addition, "A clause the cited passage does not "
                             "hold is added to the answer: the one declared for the passage "
                             "it cites first."),
}
KINDS = tuple(RULES)


def corrupt_review(review: pd.DataFrame, questions: pd.DataFrame, passages: Mapping[str, str],
                   retrieved: Mapping[str, tuple[str, ...]]) -> pd.DataFrame:
    """Every rule applied to the review's supported replies (never to a corrupted one).

    ``review`` has the review's columns; ``questions`` ``question_id``,
    ``acceptable_list`` and ``gold_passage_id``; ``retrieved`` maps a reply's transcript
    key to the passages its reader was given. For each kind and question the first
    supported reply, in review order, that the rule changes into a reply not yet made for
    that question. One row per corrupted reply, by kind and then in question order.
    """
    asked = questions.set_index("question_id")
    sources = review[(review["verdict"] == SUPPORTED) & (review["reader"] != CORRUPTION_READER)]
    rows, done, made = [], set(), set()
    for kind, (rule, sentence) in RULES.items():
        for row in sources.itertuples(index=False):
            if (kind, row.question_id) in done:
                continue
            question = asked.loc[row.question_id]
            corrupted = rule(Reply(row.answer, row.sources,
                                   tuple(retrieved[row.transcript_key]), passages,
                                   tuple(question.acceptable_list), question.gold_passage_id))
            reply = corrupted and (f"Answer: {corrupted.answer}\n"
                                   f"Sources: {sources_text(corrupted.sources)}")
            if reply is None or (row.question_id, reply) in made:
                continue
            done.add((kind, row.question_id))
            made.add((row.question_id, reply))
            rows.append({"kind": kind, "rule": sentence, "source_review_id": row.review_id,
                         "source_key": row.transcript_key, "question_id": row.question_id,
                         "answer": corrupted.answer, "sources": sources_text(corrupted.sources),
                         "reply": reply, "expected_verdict": NOT_SUPPORTED,
                         "expected_reason": corrupted.reason})
    order = {q: n for n, q in enumerate(asked.index)}
    frame = pd.DataFrame(rows, columns=["kind", "rule", "source_review_id", "source_key",
                                        "question_id", "answer", "sources", "reply",
                                        "expected_verdict", "expected_reason"])
    return frame.sort_values(["kind", "question_id"], key=lambda column: column.map(
        {k: n for n, k in enumerate(KINDS)} if column.name == "kind" else order),
        kind="stable", ignore_index=True)
