"""Lesson 1's exercises, one checker each (see :mod:`helpers.exercises`)."""
from __future__ import annotations

import math
import re

from .. import parsing, scoring, screen, text
from .framework import (
    HAND_TOLERANCE,
    TOLERANCE,
    _close,
    _handbook,
    _id_list,
    _is_number,
    _passage_texts,
    _plural,
    _question_texts,
    _questions,
    _require_keys,
    _retrieved_ids,
    _tfidf,
    _top_ids,
    correct,
    exercise,
    hint,
    not_attempted,
)


@exercise("1.1", 'Score "Oct 15" by hand', expects="a dict with keys 'normalized', 'em' and 'f1'")
def score_oct15(oct15):
    """Lesson 1, exercise 1.1: EM and token F1 of "Oct 15" against Q2's variants, by hand.

    Checks the normalised answer exactly, EM exactly, and F1 within
    :data:`HAND_TOLERANCE` of the best over Q2's acceptable variants ("Score answers,
    actions, and retrieval").
    """
    _require_keys(oct15, "oct15", ("normalized", "em", "f1"))
    answer = "Oct 15"
    variants = _questions().set_index("question_id").loc["Q2", "acceptable_list"]
    normalized = text.normalize_answer(answer)
    em, f1 = scoring.best_reference_scores(answer, variants)
    given = oct15["normalized"]
    if not isinstance(given, str):
        return hint("'normalized' is the string that normalisation turns \"Oct 15\" into.")
    if given != normalized:
        if given.lower() != given:
            return hint("Normalisation lower-cases first: 'normalized' should have no capitals.")
        if given.strip() != given or "  " in given:
            return hint("The last step squeezes runs of spaces and trims both ends.")
        return hint("Apply the four steps in order (lower-case, drop punctuation and "
                    "symbols, drop articles, squeeze spaces) to \"Oct 15\".")
    if not _close(oct15["em"], em, 0, "'em'"):
        return hint("EM is 1 when the normalised answer equals *any* normalised variant. "
                    "Normalise each of Q2's variants the way you normalised \"Oct 15\", "
                    "then compare again.")
    if not _close(oct15["f1"], f1, HAND_TOLERANCE, "'f1'"):
        for variant in variants:
            alone = scoring.token_f1(answer, variant)
            if alone != f1 and _close(oct15["f1"], alone, HAND_TOLERANCE):
                return hint(f"That is the F1 against {variant!r} alone; the score is the "
                            "best over all of Q2's variants.")
        return hint("Count the tokens the normalised answer shares with each normalised "
                    "variant, take precision and recall, F1 = 2PR / (P + R), and keep the "
                    "best over the variants.")
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
    changed = set(_id_list(other_changed, "other_changed")) - {"Q3"}
    keep = frozenset(text.STOP_WORDS - {"at"})
    with_at = _tfidf(keep).rank(_questions(), k=3)
    base = _retrieved_ids()
    expected = list(_top_ids(with_at, "Q3"))
    unknown = sorted(set(given) - set(_passage_texts()))
    if unknown:
        return hint(f"{', '.join(unknown)} is not a handbook passage ID.")
    if given == list(base["Q3"]):
        return hint("That is what Q3 retrieves with the lesson's stop-word list. Fit a new "
                    "retriever whose list keeps 'at', with TfidfRetriever.fit(handbook, "
                    "stop_words=...), and rank Q3 with it.")
    if given != expected:
        if len(given) > 3:
            return hint("The reader sees at most three passages: give the top three (k=3).")
        no_stop = _top_ids(_tfidf(frozenset()).rank(_questions(), k=3), "Q3")
        if given == list(no_stop) and no_stop != tuple(expected):
            return hint("That is Q3's retrieval with no stop words at all. Keep every other "
                        "stop word and take only 'at' out of the list.")
        if sorted(given) == sorted(expected):
            return hint("Right passages, wrong order: list them by rank (score descending, "
                        "ties by passage ID).")
        return hint("Not the passages Q3 retrieves with 'at' kept. Pass the new list to "
                    "TfidfRetriever.fit, so the idf is fitted again, and rank Q3 with that "
                    "retriever (k=3).")
    expected_changed = {q for q in _questions()["question_id"]
                        if q != "Q3" and _top_ids(with_at, q) != base[q]}
    extra = sorted(changed - expected_changed)
    if extra:
        return hint(f"The candidate list of {', '.join(extra)} does not change: its scores "
                    "may move, but compare the passage IDs in rank order.")
    if expected_changed - changed:
        found = (f"You list {_plural(len(changed), 'question', 'questions')} whose candidates "
                 "change; there are more." if changed else
                 "Another question's candidates change too.")
        return hint(found + " Compare every question's top three with and without 'at'.")
    q3 = _question_texts()["Q3"]
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

_F1_HINTS = {
    "normalise": "Normalise both strings first (text.normalize_answer): case, punctuation "
                 "and symbols must not count.",
    "articles": "Normalisation also removes the articles a, an and the.",
    "multiset": "Your F1 treats tokens as a set; count repeats: a token shared twice "
                "counts twice.",
    "clip": "A repeated token counts at most as often as the other string has it "
            "(Counter & Counter).",
    "empty": "An empty prediction (or one that is empty after normalisation) must score 0.",
}


def _set_f1(prediction: str, reference: str) -> float:
    predicted = set(text.normalize_answer(prediction).split())
    gold = set(text.normalize_answer(reference).split())
    shared = len(predicted & gold)
    if not shared:
        return 0.0
    p, r = shared / len(predicted), shared / len(gold)
    return 2 * p * r / (p + r)


@exercise("1.3", "Write token F1 yourself", expects="my_token_f1, a function "
          "(prediction, reference) -> float")
def own_token_f1(my_token_f1):
    """Lesson 1, exercise 1.3: a student's token F1, run on probe pairs.

    Each probe's result must equal :func:`helpers.scoring.token_f1` within
    :data:`TOLERANCE`; the probes include case, punctuation, articles, repeated tokens and
    an empty prediction ("Score answers, actions, and retrieval").
    """
    if not callable(my_token_f1):
        return hint("my_token_f1 must be a function of (prediction, reference).")
    results = []
    for prediction, reference, kind in F1_PROBES:
        try:
            results.append((prediction, reference, kind, my_token_f1(prediction, reference)))
        except Exception as error:  # noqa: BLE001 - report the probe that broke it
            extra = " " + _F1_HINTS["empty"] if kind == "empty" else ""
            return hint(f"my_token_f1({prediction!r}, {reference!r}) raised "
                        f"{type(error).__name__}: {error}.{extra}")
    if all(value is None for *_, value in results):
        return not_attempted("Your function returns None: write its body in place of "
                             "the ..., then run this cell again.")
    for prediction, reference, _, value in results:
        if not _is_number(value) or math.isnan(float(value)):
            return hint(f"my_token_f1({prediction!r}, {reference!r}) returns {value!r}, "
                        "which is not a number: return the F1 as a float.")
    wrong = [(p, r, k, v) for p, r, k, v in results
             if not _close(v, scoring.token_f1(p, r), TOLERANCE)]
    if not wrong:
        return correct(f"It agrees with the lesson's token_f1 on all {len(results)} probes.")
    over = [(p, r) for p, r, _, v in wrong if float(v) > 1]
    if over:
        return hint(f"F1 can never exceed 1, but my_token_f1{over[0]!r} gives more: "
                    + _F1_HINTS["clip"])
    if all(_close(v, _set_f1(p, r), TOLERANCE) for p, r, _, v in wrong):
        return hint(_F1_HINTS["multiset"])
    for kind in ("empty", "normalise", "articles", "clip", "multiset"):
        for p, r, k, v in wrong:
            if k == kind:
                return hint(f"my_token_f1({p!r}, {r!r}) gives {v!r}. " + _F1_HINTS[kind])
    p, r, _, v = wrong[0]
    return hint(f"my_token_f1({p!r}, {r!r}) gives {v!r}, which is not its token F1. "
                "Precision is shared tokens / predicted tokens, recall is shared tokens / "
                "reference tokens, F1 = 2PR / (P + R).")


#: What makes exercise 1.4's amount a weekly one: "per week", "a week", "/week", "weekly".
_WEEKLY = re.compile(r"\bweek(ly)?\b", re.IGNORECASE)


@exercise("1.4", "Trip the screen, then slip past it", expects="two raw replies to Q1 as "
          "strings: held_reply and wrong_but_clear")
def screen_replies(held_reply, wrong_but_clear):
    """Lesson 1, exercise 1.4: two replies to Q1 that parse, screened like the lesson's.

    ``held_reply`` must be held for a check the controls do not show; ``wrong_but_clear``
    must pass all six checks while stating a weekly amount other than H08's: a figure, and
    the word *week* or *weekly*, as Q1 asks for a weekly stipend ("Screen citations and
    surface support", "Show screen controls").
    """
    passages = _passage_texts()
    retrieved = _retrieved_ids()["Q1"]
    screened = {}
    for name, reply in (("held_reply", held_reply), ("wrong_but_clear", wrong_but_clear)):
        if not isinstance(reply, str):
            return hint(f"{name} must be a string: the reader's raw reply, two lines.")
        parsed = parsing.parse_reader_output(reply)
        if not parsed.parse_ok:
            return hint(f"The strict parser rejects {name}: {parsed.problem}. Both replies "
                        "must parse.")
        values = screen.screen_reply(parsed.answer, parsed.sources, True, parsed.action,
                                     retrieved, passages)
        screened[name] = (parsed, [c for c in screen.CHECKS if not values[c]])
    _, failed = screened["held_reply"]
    controls = screen.screen_table(screen.control_outputs(), _tfidf().rank(_questions(), k=3),
                                   _handbook())
    shown_by_controls = {c for c in screen.CHECKS if not controls[c].all()}
    if not failed:
        return hint("The screen does not flag held_reply: all six checks pass. Which of "
                    "them can a reply that parses still fail?")
    if set(failed) <= shown_by_controls:
        return hint(f"held_reply is held, but only for {', '.join(failed)}, which the "
                    "lesson's controls already show. Make it fail one of the other checks.")
    parsed, failed = screened["wrong_but_clear"]
    if failed:
        return hint(f"The screen holds wrong_but_clear ({', '.join(failed)}): it must pass "
                    "all six checks.")
    if parsed.action != "answer":
        return hint("wrong_but_clear must be an answer, not an abstention or a premise flag.")
    figures = screen.numbers_in(parsed.answer)
    stipend = set(screen.numbers_in(passages["H08"])) & set(
        screen.numbers_in(" ".join(_questions().set_index("question_id")
                                   .loc["Q1", "acceptable_list"])))
    if not figures:
        return hint("State a weekly amount in wrong_but_clear: the exercise is about a "
                    "figure the screen cannot judge.")
    if set(figures) & stipend:
        return hint("That is the stipend H08 gives; state a different amount that the "
                    "screen still lets through.")
    if not _WEEKLY.search(parsed.answer):
        return hint("Q1 asks for a weekly stipend: wrong_but_clear must say that its amount "
                    "is paid each week, as a reply to Q1 would.")
    return correct("The screen checks that each figure appears in the cited passage, not "
                   "what the figure counts there.")

