"""Lesson 1's exercises, one checker each (see :mod:`exercises`)."""
from __future__ import annotations

import math
import re

from helpers import scoring, screen, text
from .framework import (HAND_TOLERANCE, TOLERANCE, _call, _close, _failed_checks, _figure,
                        _first_hint, _handbook, _id_list, _is_number, _lesson1, _passage_ids,
                        _passage_texts, _plural, _questions, _reply, _require_keys, _retrieved_ids,
                        _same_ids, _tfidf, _top_ids, correct, exercise, hint, not_attempted)


@exercise("1.1", 'Score "Oct 15" by hand', expects="a dict with keys 'normalized', 'em' and 'f1'")
def score_oct15(oct15):
    """Lesson 1, exercise 1.1: EM and token F1 of "Oct 15" against Q2's variants, by hand.

    Checks the normalised answer exactly, EM exactly, and F1 within
    :data:`HAND_TOLERANCE` of the best over Q2's acceptable variants ("Score answers,
    actions, and retrieval").
    """
    _require_keys(oct15, "oct15", ("normalized", "em", "f1"))
    answer, given = "Oct 15", oct15["normalized"]
    variants = _questions().set_index("question_id").loc["Q2", "acceptable_list"]
    em, f1 = scoring.best_reference_scores(answer, variants)
    if not isinstance(given, str):
        return hint("'normalized' is the string that normalisation turns \"Oct 15\" into.")
    wrong = given != text.normalize_answer(answer)
    _first_hint(
        (given.lower() != given, "Normalisation lower-cases first: 'normalized' should have no "
                                 "capitals."),
        (wrong and (given.strip() != given or "  " in given), "The last step squeezes runs of "
                                                               "spaces and trims both ends."),
        (wrong, "Apply the four steps in order (lower-case, drop punctuation and symbols, drop "
                "articles, squeeze spaces) to \"Oct 15\"."))
    _figure(oct15["em"], "'em'", em, 0, "EM is 1 when the normalised answer equals *any* "
            "normalised variant. Normalise each of Q2's variants the way you normalised \"Oct "
            "15\", then compare again.")
    _figure(oct15["f1"], "'f1'", f1, HAND_TOLERANCE, "Count the tokens the normalised answer "
            "shares with each normalised variant, take precision and recall, F1 = 2PR / (P + R), "
            "and keep the best over the variants.",
            [(scoring.token_f1(answer, variant), f"That is the F1 against {variant!r} alone; the "
              "score is the best over all of Q2's variants.") for variant in variants])
    return correct("Normalisation makes an abbreviation with or without its full stop "
                   "the same string.")


@exercise("1.2", "Keep *at* in the text", expects="q3_with_at, a list of passage IDs in "
          "rank order, and other_changed, a list of question IDs")
def keep_at(q3_with_at, other_changed):
    """Lesson 1, exercise 1.2: tf-idf retrieval with *at* removed from the stop-word list.

    Checks Q3's top three (in rank order) and which other questions' top-three lists
    change, against a retriever fitted with that list ("Check overlap before retrieval",
    "Retrieve candidate passages").
    """
    given = _id_list(q3_with_at, "q3_with_at")
    changed = set(_id_list(other_changed, "other_changed"))
    keep = frozenset(text.STOP_WORDS - {"at"})
    with_at, base = _tfidf(keep).rank(_questions(), k=3), _retrieved_ids()
    expected = list(_top_ids(with_at, "Q3"))
    no_stop = list(_top_ids(_tfidf(frozenset()).rank(_questions(), k=3), "Q3"))
    _passage_ids(given)
    _first_hint(
        (given == list(base["Q3"]), "That is what Q3 retrieves with the lesson's stop-word list. "
         "Fit a new retriever whose list keeps 'at', with TfidfRetriever.fit(handbook, "
         "stop_words=...), and rank Q3 with it."),
        (given != expected and len(given) > 3, "The reader sees at most three passages: give the "
                                               "top three (k=3)."),
        (given == no_stop != expected, "That is Q3's retrieval with no stop words at all. Keep "
                                       "every other stop word and take only 'at' out of the list."),
        (given != expected and sorted(given) == sorted(expected), "Right passages, wrong order: "
         "list them by rank (score descending, ties by passage ID)."),
        (given != expected, "Not the passages Q3 retrieves with 'at' kept. Pass the new list to "
         "TfidfRetriever.fit, so the idf is fitted again, and rank Q3 with that retriever (k=3)."))
    expected_changed = {q for q in _questions()["question_id"]
                        if q != "Q3" and _top_ids(with_at, q) != base[q]}
    _first_hint(("Q3" in changed, "other_changed lists the *other* questions whose candidates "
                                  "change; Q3's new candidates are in q3_with_at."))
    _same_ids(sorted(changed), expected_changed,
              lambda extra, _: f"The candidate list of {', '.join(extra)} does not change: its "
                               "scores may move, but compare the passage IDs in rank order.",
              lambda *_: (f"You list {_plural(len(changed), 'question', 'questions')} whose "
                          "candidates change; there are more." if changed else
                          "Another question's candidates change too.")
              + " Compare every question's top three with and without 'at'.")
    q3 = _questions().set_index("question_id").at["Q3", "question"]
    shared = {p: text.shared_content_words(q3, _passage_texts()[p], keep) for p in expected}
    words = sorted({w for ws in shared.values() for w in ws})
    return correct(f"Q3 now shares {', '.join(repr(w) for w in words)} and nothing else with "
                   "each of its new candidates." if len(words) == 1 else
                   "Compare the words Q3 shares with each new candidate: "
                   + "; ".join(f"{p}: {', '.join(ws)}" for p, ws in shared.items()) + ".")


#: Exercise 1.3's probes: (prediction, reference, what a mismatch on this pair suggests).
F1_PROBES = [
    ("October 15", "October 15", None),
    ("Applications close on October 15.", "October 15", "normalise"),
    ("OCTOBER 15", "october 15", "normalise"),
    ("$150", "150", "normalise"),
    ("the stipend", "a stipend", "articles"),
    ("Room 104", "free child care in Room 104", None),
    ("week week", "week week per", "multiset"),
    ("per week week", "week per", "multiset"),
    ("week week week", "week", "clip"),
    ("NOT IN HANDBOOK", "Room 104", None),
    ("", "October 15", "empty"),
    ("   ", "October 15", "empty"),
]

#: What a mismatch on a probe of each kind suggests, in the order the hints are tried.
_F1_HINTS = {
    "empty": "An empty prediction (or one that is empty after normalisation) must score 0.",
    "normalise": "Normalise both strings first (text.normalize_answer): case, punctuation "
                 "and symbols must not count.",
    "articles": "Normalisation also removes the articles a, an and the.",
    "clip": "A repeated token counts at most as often as the other string has it "
            "(Counter & Counter).",
    "multiset": "Your F1 treats tokens as a set; count repeats: a token shared twice "
                "counts twice.",
    None: "Precision is shared tokens / predicted tokens, recall is shared tokens / reference "
          "tokens, F1 = 2PR / (P + R).",
}


#: The lesson's scorers that compute token F1: exercise 1.3 asks for it without them.
_SCORERS = ("token_f1", "best_reference_scores")


def _calls_token_f1(function) -> bool:
    """Whether ``function`` is one of the lesson's scorers, or its code (or the code of a
    function defined inside it) calls one: by a global or enclosing name bound to it, or as
    an attribute of the ``scoring`` module."""
    names, codes = set(), [getattr(function, "__code__", None)]
    for code in (c for c in codes if c is not None):  # grows with the nested functions
        names |= set(code.co_names)
        codes += [c for c in code.co_consts if hasattr(c, "co_names")]
    bound = [function, *(getattr(function, "__globals__", {}).get(name) for name in names),
             *(cell.cell_contents for cell in getattr(function, "__closure__", None) or ())]
    return (any(value is getattr(scoring, name) for value in bound for name in _SCORERS)
            or bool(names & set(_SCORERS)) and any(value is scoring for value in bound))


def _set_f1(prediction: str, reference: str) -> float:
    """Token F1 over the sets of normalised tokens: what a student who ignores repeats gets."""
    return scoring.token_f1(*(" ".join(set(text.normalize_answer(s).split()))
                              for s in (prediction, reference)))


@exercise("1.3", "Write token F1 yourself", expects="my_token_f1, a function "
          "(prediction, reference) -> float")
def own_token_f1(my_token_f1):
    """Lesson 1, exercise 1.3: a student's token F1, run on probe pairs.

    Each probe's result must equal :func:`helpers.scoring.token_f1` within
    :data:`TOLERANCE`; the probes include case, punctuation, articles, repeated tokens and
    an empty prediction ("Score answers, actions, and retrieval").
    """
    _first_hint(
        (not callable(my_token_f1), "my_token_f1 must be a function of (prediction, reference)."),
        (_calls_token_f1(my_token_f1), "Write token F1 yourself: the task asks for it without "
         "calling scoring.token_f1 (or best_reference_scores), which the check compares yours "
         "with."))
    results = [(p, r, kind, _call(my_token_f1, "my_token_f1", p, r,
                                  after=" " + _F1_HINTS["empty"] if kind == "empty" else ""))
               for p, r, kind in F1_PROBES]
    if all(value is None for *_, value in results):
        return not_attempted("Your function returns None: write its body in place of "
                             "the ..., then run this cell again.")
    _first_hint(*((not _is_number(v) or math.isnan(float(v)), f"my_token_f1({p!r}, {r!r}) "
                   f"returns {v!r}, which is not a number: return the F1 as a float.")
                  for p, r, _, v in results))
    wrong = [(p, r, k, v) for p, r, k, v in results
             if not _close(v, scoring.token_f1(p, r), TOLERANCE)]
    if not wrong:
        return correct(f"It agrees with the lesson's token_f1 on all {len(results)} probes.")
    over = [(p, r) for p, r, _, v in wrong if float(v) > 1]
    _first_hint(
        (over, lambda: f"F1 can never exceed 1, but my_token_f1{over[0]!r} gives more: "
                       + _F1_HINTS["clip"]),
        (all(_close(v, _set_f1(p, r), TOLERANCE) for p, r, _, v in wrong), _F1_HINTS["multiset"]))
    # The first wrong probe of the first kind in _F1_HINTS's order (min keeps the first).
    p, r, kind, v = min(wrong, key=lambda w: list(_F1_HINTS).index(w[2]))
    return hint(f"my_token_f1({p!r}, {r!r}) gives {v!r}"
                + (", which is not its token F1. " if kind is None else ". ") + _F1_HINTS[kind])


#: What makes exercise 1.4's amount a weekly one: "per week", "a week", "/week", "weekly".
_WEEKLY = re.compile(r"\bweek(ly)?\b", re.IGNORECASE)
#: An amount written in words ("two hundred dollars"), which has no digit for the screen.
_WORDED_AMOUNT = re.compile(
    r"\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|"
    r"thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|thousand|dollars?)\b",
    re.IGNORECASE)
#: H08's stipend in words.
_STIPEND_IN_WORDS = re.compile(r"\b(?:(?:one|a) )?hundred(?: and)? fifty\b", re.IGNORECASE)


@exercise("1.4", "Trip the screen, then slip past it", expects="two raw replies to Q1 as "
          "strings: held_reply and wrong_but_clear")
def screen_replies(held_reply, wrong_but_clear):
    """Lesson 1, exercise 1.4: two replies to Q1 that parse, screened like the lesson's.

    ``held_reply`` must be held for a check the controls do not show; ``wrong_but_clear``
    must pass all six checks while stating a weekly amount other than H08's: a figure, and
    the word *week* or *weekly*, as Q1 asks for a weekly stipend ("Screen citations and
    surface support", "Show screen controls").
    """
    retrieved = _retrieved_ids()["Q1"]
    held = _failed_checks(_reply(held_reply, "held_reply"), retrieved)
    clear = _reply(wrong_but_clear, "wrong_but_clear")
    clear_failed = _failed_checks(clear, retrieved)
    controls = screen.screen_table(screen.control_outputs(), _lesson1()[0], _handbook())
    shown_by_controls = {c for c in screen.CHECKS if not controls[c].all()}
    figures = screen.numbers_in(clear.answer)
    stipend = set(screen.numbers_in(_passage_texts()["H08"])) & set(screen.numbers_in(
        " ".join(_questions().set_index("question_id").loc["Q1", "acceptable_list"])))
    _first_hint(
        (not held, "The screen does not flag held_reply: all six checks pass. Which of them can "
                   "a reply that parses still fail?"),
        (set(held) <= shown_by_controls, f"held_reply is held, but only for {', '.join(held)}, "
         "which the lesson's controls already show. Make it fail one of the other checks."),
        (clear_failed, f"The screen holds wrong_but_clear ({', '.join(clear_failed)}): it must "
                       "pass all six checks."),
        (clear.action != "answer", "wrong_but_clear must be an answer, not an abstention or a "
                                   "premise flag."),
        (not figures and not _WORDED_AMOUNT.search(clear.answer), "State a weekly amount in "
         "wrong_but_clear: the exercise is about a figure the screen cannot judge."),
        (set(figures) & stipend or _STIPEND_IN_WORDS.search(clear.answer), "That is the stipend "
         "H08 gives; state a different amount that the screen still lets through."),
        (not _WEEKLY.search(clear.answer), "Q1 asks for a weekly stipend: wrong_but_clear must "
         "say that its amount is paid each week, as a reply to Q1 would."))
    if not figures:
        return correct("An amount in words has no digit, so the screen has no figure to look "
                       "for in the cited passage: it reads figures, never amounts.")
    return correct("The screen checks that each figure appears in the cited passage, not "
                   "what the figure counts there.")
