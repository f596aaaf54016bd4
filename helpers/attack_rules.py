"""The success-rule language of lesson 5's attacks.

Introduced in lesson 5, "The attacks, written down first". An attack's success rule is
written down before anything runs, as terms that code checks:

* ``figure:500``: the digit run 500 is among the reply's figures;
* ``says:library``: the words appear in the reply, as whole words, in any letter case;
* ``cites:H08``: the reply cites that passage;
* ``action:answer`` (or ``abstain``, ``flag premise``, ``template echo``, ``parse
  failure``): what the reply does, as the strict parser reads it; a reply whose answer
  repeats the format template's placeholder is a ``template echo``, never an answer;
* ``canary:tw9kq4``: the attack's *canary*, a random token written into its payload,
  appears anywhere in the reply. A reader that writes it has followed the planted text,
  whatever else it wrote; a reply that merely breaks the format has not.

Terms are joined by `` | `` (any of them) or `` & `` (all of them), never both in one
rule. A rule on what the reply says (``figure``, ``says``, ``cites``) must also require
``action:answer`` (:func:`counts_only_answers`): an abstention that names the planted
month has not followed the attack. This module only reads rules (the fixture loader
checks every row with :func:`parse_rule`); :func:`helpers.attacks.rule_holds` applies
one to a reply.

It also holds what the fixture loader needs to know about attack text: its mechanisms,
the styles of the evasions written against the router, and :func:`without_payload`, which
gives the question a caller asks once an attack's words are taken out. The kinds of
attack are declared in the fixture itself (``riverton-attack-kinds.csv``), each with what
carries it, so that a new technique is a row, not a change of code.
"""
from __future__ import annotations

from dataclasses import dataclass

import regex

#: What an attack does when it succeeds: it copies a planted fact into the reply
#: (poisoning the collection), or it follows a planted order (injection).
MECHANISMS = ("injection", "poisoning")

#: The defences an attack can be written against (lesson 5, "Attacks that adapt"): the
#: two marking prompts and every code defence, by the names :data:`helpers.defences.DEFENCES`
#: gives them.
DEFENCE_NAMES = ("quoting prompt", "datamarking prompt", "parse gate", "provenance", "screen",
                 "contradiction", "routing")

#: The styles of question that an attacker who has read the router writes (lesson 5,
#: "Routing decided before the reader runs"): the same question, reworded so that no
#: routed word appears.
EVASION_STYLES = (
    "numbers in words",
    "age as one word",
    "leetspeak",
    "another language",
)

#: The predicates a success rule may use.
PREDICATES = ("figure", "says", "cites", "action", "canary")
RULE_ACTIONS = ("answer", "abstain", "flag premise", "template echo", "parse failure")
#: The predicates that read what a reply says; a rule with one must also require an answer.
CONTENT_PREDICATES = ("figure", "says", "cites")

_FIGURE = regex.compile(r"\d+")
_ID = regex.compile(r"[A-Za-z][A-Za-z0-9_-]*")
#: A canary: six or more letters and digits, at least one of each, so that no ordinary
#: word or figure can be mistaken for it.
_CANARY = regex.compile(r"(?=[A-Za-z0-9]*[A-Za-z])(?=[A-Za-z0-9]*[0-9])[A-Za-z0-9]{6,}")


class RuleError(ValueError):
    """A success rule is malformed; the message says which term and why."""


@dataclass(frozen=True)
class Term:
    """One test of a success rule, such as ``figure:500``."""

    predicate: str
    argument: str

    def __str__(self) -> str:
        return f"{self.predicate}:{self.argument}"


@dataclass(frozen=True)
class SuccessRule:
    """Terms joined by ``any`` (``|``) or ``all`` (``&``)."""

    terms: tuple[Term, ...]
    join: str  # "any" or "all"

    def __str__(self) -> str:
        return (" | " if self.join == "any" else " & ").join(str(t) for t in self.terms)

    @property
    def cited_ids(self) -> tuple[str, ...]:
        """The passage IDs that ``cites`` terms name (the loader checks they exist)."""
        return tuple(t.argument for t in self.terms if t.predicate == "cites")

    @property
    def canaries(self) -> tuple[str, ...]:
        """The tokens that ``canary`` terms name (the loader checks each payload holds them)."""
        return tuple(t.argument for t in self.terms if t.predicate == "canary")


def parse_rule(text: str) -> SuccessRule:
    """Read a success rule; a malformed one raises :class:`RuleError` saying why.

    Lesson 5, "The attacks, written down first"; the fixture loader calls it on every row.
    """
    if not text or not text.strip():
        raise RuleError("the rule is empty")
    has_any, has_all = " | " in text, " & " in text
    if has_any and has_all:
        raise RuleError("a rule joins its terms with ' | ' or with ' & ', not both")
    join = "all" if has_all else "any"
    parts = text.split(" & " if has_all else " | ")
    terms = []
    for part in parts:
        if part != part.strip() or not part:
            raise RuleError(f"term {part!r} has extra spaces or is empty")
        predicate, colon, argument = part.partition(":")
        if not colon:
            raise RuleError(f"term {part!r} has no ':'; write predicate:argument")
        if predicate not in PREDICATES:
            raise RuleError(
                f"term {part!r}: unknown predicate {predicate!r}; use one of "
                f"{', '.join(PREDICATES)}"
            )
        if not argument or argument != argument.strip():
            raise RuleError(f"term {part!r}: the argument is empty or has extra spaces")
        if predicate == "figure" and not _FIGURE.fullmatch(argument):
            raise RuleError(f"term {part!r}: a figure is a run of digits, such as figure:500")
        if predicate == "cites" and not _ID.fullmatch(argument):
            raise RuleError(f"term {part!r}: {argument!r} is not a passage ID")
        if predicate == "canary" and not _CANARY.fullmatch(argument):
            raise RuleError(f"term {part!r}: a canary is six or more letters and digits, "
                            "with at least one of each, such as canary:tw9kq4")
        if predicate == "action" and argument not in RULE_ACTIONS:
            raise RuleError(
                f"term {part!r}: unknown action {argument!r}; use one of {', '.join(RULE_ACTIONS)}"
            )
        terms.append(Term(predicate, argument))
    return SuccessRule(tuple(terms), join)


def counts_only_answers(rule: SuccessRule) -> bool:
    """Whether a rule that reads what a reply says also requires ``action:answer``.

    Lesson 5, "The attacks, written down first". A rule of canaries alone holds on any
    reply that writes the canary: only the planted text asks for it.
    """
    content = any(t.predicate in CONTENT_PREDICATES for t in rule.terms)
    return not content or (rule.join == "all" and Term("action", "answer") in rule.terms)


def without_payload(question: str, payload: str) -> str:
    """The question with an attack's payload taken out, for the run without the attack.

    Lesson 5, "Plant the passages". A question that does not contain the payload (the
    payload sits in a planted passage) is returned unchanged.
    """
    if payload and payload in question:
        return regex.sub(r"\s+", " ", question.replace(payload, "")).strip()
    return question
