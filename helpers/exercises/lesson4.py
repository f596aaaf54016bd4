"""Lesson 4's exercises, one checker each (see :mod:`helpers.exercises`)."""
from __future__ import annotations

from typing import Any

import pandas as pd

from .. import agreement, parsing, review, screen
from ..baseline import BASELINE_READER
from .framework import (HAND_TOLERANCE, TOLERANCE, _all_questions, _close, _figure, _first_hint,
                        _handbook, _known, _number, _pair, _plural, _require_keys, _whole_number,
                        correct, exercise, fixture_cache, hint)


@fixture_cache
def _review_rows() -> pd.DataFrame:
    """Lesson 4's review record with the screen's label, rebuilt as the lesson builds it.

    One row per review row: the verdict, the question, its retrieved IDs, and whether the
    screen holds the reply, each reply screened with the passages its retriever gave it
    ("The screen against the review").
    """
    from runtime import load_review, recorded_replies

    replies = recorded_replies()
    parsed = parsing.parse_outputs(replies)
    screened = []
    for _, group in parsed.groupby(["reader", "decoding"], sort=False):
        # The passages each reply was given, in rank order, as the screen reads a ranking.
        given = pd.DataFrame([{"question_id": q, "passage_id": p, "rank": rank}
                              for q, ids in zip(group["question_id"], group["retrieved_ids"])
                              for rank, p in enumerate(ids, start=1)],
                             columns=["question_id", "passage_id", "rank"])
        screened.append(screen.screen_table(group, given, _handbook())
                        .assign(key=group["key"].values))
    checks = pd.concat(screened, ignore_index=True)
    rows = load_review(replies=replies).merge(
        replies[["key", "retrieved_ids"]], left_on="transcript_key", right_on="key",
        validate="one_to_one",
    ).merge(checks[["key", "failed_checks", "screen_label"]], on="key", validate="one_to_one")
    rows["held"] = rows["screen_label"] == screen.HELD
    rows["unsupported"] = rows["verdict"] == review.NOT_SUPPORTED
    return rows


def _judged() -> pd.DataFrame:
    """The reviewed replies with a yes-or-no verdict, the ones the 2x2 tables count."""
    rows = _review_rows()
    return rows[rows["verdict"].isin([review.SUPPORTED, review.NOT_SUPPORTED])]


def _screen_lists() -> tuple[list[bool], list[bool]]:
    judged = _judged()
    return judged["held"].tolist(), judged["unsupported"].tolist()


@exercise("4.1", "Kappa by hand", expects="a dict with keys 'p_o', 'p_e' and 'kappa'")
def kappa_by_hand(screen_kappa):
    """Lesson 4, exercise 4.1: Cohen's kappa of the screen, from its 2x2 counts, by hand.

    Checks the observed agreement ``p_o``, the chance agreement ``p_e`` and kappa, each
    within :data:`HAND_TOLERANCE` of :func:`helpers.agreement.cohen_kappa` on the replies
    with a yes-or-no verdict ("The screen against the review").
    """
    _require_keys(screen_kappa, "screen_kappa", ("p_o", "p_e", "kappa"))
    held, unsupported = _screen_lists()
    counts = agreement.confusion(held, unsupported)
    kappa = agreement.cohen_kappa(held, unsupported)
    n = counts.rows
    flag_share = (counts.flagged_unsupported + counts.flagged_supported) / n
    bad_share = (counts.flagged_unsupported + counts.passed_unsupported) / n
    p_o, p_e, given = (_number(screen_kappa[k], f"'{k}'") for k in ("p_o", "p_e", "kappa"))
    _figure(p_o, "'p_o'", kappa.observed, HAND_TOLERANCE, "'p_o' is the share of the table's "
            "replies on which the screen and the review say the same thing: the two agreeing "
            "cells over all the rows.", [(counts.flagged_unsupported / n, "'p_o' counts agreement "
            "in both directions: the replies the screen holds and the review rejects, *and* those "
            "it lets through and the review finds supported.")])
    one_sided = "You used one side's shares twice. For each label, multiply the screen's share " \
                "by the review's share, then add the two products."
    _figure(p_e, "'p_e'", kappa.expected, HAND_TOLERANCE, "'p_e' adds, over the two labels, the "
            "screen's share of that label times the review's share of it (held with not "
            "supported, not flagged with supported).", [
                (0.5, "Chance agreement is not one half: it comes from how often each side uses "
                      "each label."),
                (bad_share ** 2 + (1 - bad_share) ** 2, one_sided),
                (flag_share ** 2 + (1 - flag_share) ** 2, one_sided)])
    _figure(given, "'kappa'", kappa.value, HAND_TOLERANCE, "kappa = (p_o - p_e) / (1 - p_e).", [
        (kappa.observed - kappa.expected, "p_o - p_e is only the numerator: kappa divides it by "
                                          "the most agreement beyond chance there could be, "
                                          "1 - p_e."),
        ((kappa.observed - kappa.expected) / (1 - kappa.observed) if kappa.observed != 1 else None,
         "The denominator is 1 - p_e, not 1 - p_o."),
        ((p_o - p_e) / (1 - p_e) if p_e != 1 else None, "Right formula, but your p_o and p_e are "
         "rounded: kappa divides by 1 - p_e, which is small when p_e is high, so two decimals "
         "move it. Use the exact fractions and round only at the end.")])
    return correct(f"agreement.cohen_kappa gives {kappa.value:.4f}. The screen agrees with the "
                   f"review on {kappa.observed:.0%} of the replies, but chance alone would "
                   f"give {kappa.expected:.0%}; kappa credits only the agreement beyond that, "
                   "as a share of the most there could be.")


@exercise("4.2", "A screen that holds everything", expects="a dict with keys 'recall', "
          "'precision' and 'kappa'")
def hold_everything(hold_all):
    """Lesson 4, exercise 4.2: recall, precision and kappa of a screen that holds every reply.

    Recomputed with :mod:`helpers.agreement` for a signal that flags all the replies with
    a yes-or-no verdict; each figure within :data:`HAND_TOLERANCE` ("The screen against
    the review").
    """
    _require_keys(hold_all, "hold_all", ("recall", "precision", "kappa"))
    _, unsupported = _screen_lists()
    flagged = [True] * len(unsupported)
    counts = agreement.confusion(flagged, unsupported)
    kappa = agreement.cohen_kappa(flagged, unsupported)
    expected_recall = agreement.sensitivity(counts).value
    expected_precision = agreement.positive_predictive_value(counts).value
    _figure(hold_all["recall"], "'recall'", expected_recall, HAND_TOLERANCE, "Recall is the "
            "share of unsupported replies the screen holds; this screen holds every reply.")
    _figure(hold_all["precision"], "'precision'", expected_precision, HAND_TOLERANCE, "Precision "
            "is the share of held replies that the review rejects: unsupported replies over all "
            "the replies it holds.", [(1, "Precision is the share of held replies that the review "
                                          "rejects, and this screen holds the supported replies "
                                          "too.")])
    if hold_all["kappa"] is None or isinstance(hold_all["kappa"], str):
        return hint("Kappa is defined here: only the screen gives a single label to "
                    "everything, so chance agreement is not 1. Work out p_o and p_e.")
    _figure(hold_all["kappa"], "'kappa'", kappa.value, HAND_TOLERANCE, "Work out p_o (how often "
            "the two agree) and p_e (the screen's share of each label times the review's), then "
            "kappa = (p_o - p_e) / (1 - p_e).", [(expected_precision, "That is the observed "
            "agreement p_o. Kappa subtracts the agreement chance would give, p_e, and divides by "
            "1 - p_e.")])
    return correct(f"Recall {expected_recall:.2f} and precision {expected_precision:.2f}, yet "
                   "kappa is 0: a screen that holds everything agrees with the review exactly "
                   "as often as chance would, its recall is perfect by construction, and its "
                   "precision is simply the share of unsupported replies.")


def _is_none(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip().lower() == "none")


def _models_judged() -> pd.DataFrame:
    """The replies of the two models (not the sentence baseline's) with a yes-or-no verdict."""
    judged = _judged()
    return judged[judged["reader"] != BASELINE_READER]


@exercise("4.3", "What only reading finds", expects="a dict from review IDs to a passage ID "
          "or None")
def only_reading_finds(misses):
    """Lesson 4, exercise 4.3: the models' unsupported replies the screen lets through, read.

    The keys must be exactly the review IDs of the two models' replies (not the sentence
    baseline's) with the verdict *not supported* that the screen does not hold; each
    value is the retrieved passage that answers the reply's question, or None when none
    of the retrieved passages does (the gold passage of the question, if it was
    retrieved) ("The screen against the review").
    """
    _require_keys(misses, "misses", ())
    rows = _review_rows().set_index("review_id")
    judged = _models_judged()
    expected_ids = list(judged.loc[judged["unsupported"] & ~judged["held"], "review_id"])
    _known(misses, rows.index, f"a review ID of the record (R001 to R{len(rows):03d})")
    for review_id in (r for r in misses if r not in expected_ids):
        _first_hint(
            (rows.at[review_id, "reader"] == BASELINE_READER, f"{review_id} is one of the sentence "
             "baseline's replies; list only the two models' replies."),
            (rows.at[review_id, "held"], f"The screen holds {review_id}; list only the replies it "
                                         "lets through."),
            (True, f"The review does not reject {review_id} (its verdict is "
                   f"{rows.at[review_id, 'verdict']}); list only unsupported replies."))
    missing = len(set(expected_ids) - set(misses))
    if missing:
        return hint(f"The screen lets {_plural(missing, 'more unsupported reply', 'more unsupported replies')} "
                    "through than you list.")
    questions = _all_questions().set_index("question_id")
    for review_id in expected_ids:
        question_id = rows.at[review_id, "question_id"]
        retrieved = tuple(rows.at[review_id, "retrieved_ids"])
        gold = questions.at[question_id, "gold_passage_id"]
        answer = gold if isinstance(gold, str) and gold in retrieved else None
        given = None if _is_none(misses[review_id]) else misses[review_id]
        _first_hint(
            (given is None and answer is not None, f"One of the passages {review_id}'s reader was "
                                                   f"given does answer {question_id}: read them "
                                                   "again."),
            (given is not None and given not in retrieved, f"{given!r} was not among the passages "
             f"retrieved for {question_id} ({', '.join(retrieved)}): the review reads only what "
             "the reader was given."),
            (given != answer, f"{given} was retrieved for {question_id}, but it does not answer "
                              f"what {question_id} asks."))
    return correct("Every one of them passes all six checks: an abstention cites nothing and "
                   "states no figure, and a copy of a retrieved passage cites a real, "
                   "retrieved passage and repeats only its figures. Whether a passage answers "
                   "the question is something only reading finds.")


def _baseline_screen() -> tuple[int, int]:
    """The screen on the sentence baseline's unsupported replies: (held, unsupported)."""
    judged = _judged()
    bad = judged[(judged["reader"] == BASELINE_READER) & judged["unsupported"]]
    return int(bad["held"].sum()), len(bad)


@exercise("4.4", "None held, but how sure?", expects="a dict with keys 'held', "
          "'unsupported' and 'interval' (low, high)")
def none_held(sensitivity):
    """Lesson 4, exercise 4.4: the screen's sensitivity on the sentence baseline's replies,
    with its exact interval.

    ``held`` and ``unsupported`` are the counts (the unsupported replies of both the
    baseline's retrievers, and those of them the screen holds); ``interval`` is the
    Clopper-Pearson interval at :data:`helpers.agreement.INTERVAL_LEVEL`, each end within
    :data:`TOLERANCE` of :func:`helpers.agreement.exact_interval` ("The screen against the
    review").
    """
    _require_keys(sensitivity, "sensitivity", ("held", "unsupported", "interval"))
    given_held = _whole_number(sensitivity["held"], "'held'")
    given_total = _whole_number(sensitivity["unsupported"], "'unsupported'")
    interval = _pair(sensitivity["interval"], "'interval'", "(low, high)")
    low = _number(interval[0], "the interval's low end")
    high = _number(interval[1], "the interval's high end")
    held, unsupported = _baseline_screen()
    judged = _judged()
    baseline_rows = judged[judged["reader"] == BASELINE_READER]
    per_retriever = baseline_rows[baseline_rows["unsupported"]]["decoding"].value_counts()
    wrong_total = given_total != unsupported
    _first_hint(
        (wrong_total and given_total == len(baseline_rows), "Count only the baseline's "
         "unsupported replies: sensitivity is a share of the replies a person rejects."),
        (wrong_total and given_total in set(per_retriever), "The baseline replies twice, once "
         "with each retriever's passages; count the unsupported replies of both."),
        (wrong_total, "'unsupported' is the number of the baseline's replies with the verdict "
                      "not supported (rows of judged whose reader is the baseline)."),
        (given_held != held, "'held' counts the baseline's unsupported replies that the screen "
                             "holds (the column held)."))
    level = agreement.INTERVAL_LEVEL
    exact = agreement.exact_interval(held, unsupported, level)
    if _close(low, exact.low, TOLERANCE) and _close(high, exact.high, TOLERANCE):
        if held:
            return correct(f"The screen holds {held} of {unsupported}, and the data allow a true "
                           f"sensitivity anywhere from {exact.low:.3f} to {exact.high:.3f}.")
        return correct(f"No unsupported reply of the baseline is held, yet the data allow a "
                       f"true sensitivity up to {exact.high:.3f}. The rule of three, "
                       f"3/{unsupported} = {3 / unsupported:.3f}, is a quick one-sided "
                       "approximation of that upper end. A zero is an estimate with an "
                       "interval, like any share.")
    _first_hint(
        (_close(high, low, TOLERANCE) and _close(high, held / unsupported, TOLERANCE), "That is "
         "the share itself, not an interval: which true sensitivities could have given the "
         "counts you found?"),
        (held == 0 and _close(high, 3 / unsupported, TOLERANCE), "That is the rule of three, an "
         "approximation for a one-sided interval; the exact two-sided interval puts half the "
         "rest of the level in each tail."),
        (held == 0 and _close(high, 1 - (1 - level) ** (1 / unsupported), TOLERANCE), "That upper "
         "end leaves all of the rest of the level above it (one-sided); the two-sided interval "
         "leaves half of it above the upper end."))
    return hint("The exact (Clopper-Pearson) interval: agreement.exact_interval(held, "
                "unsupported), or, for zero held, solve (1 - p) ** n = (1 - LEVEL) / 2 for "
                "the upper end.")


#: Exercise 4.5's table: a judge measured against another review (the four counts the
#: exercise gives). Lesson 4, "Exercises".
GIVEN_TABLE = (40, 2, 5, 3)


@exercise("4.5", "kappa_max and PABAK by hand", expects="the given table and a dict with "
          "keys 'kappa', 'kappa_max' and 'pabak'")
def kappa_max_and_pabak(given, by_hand):
    """Lesson 4, exercise 4.5: kappa, kappa_max and PABAK of a given 2x2 table, by hand.

    ``given`` must be the exercise's table (:data:`GIVEN_TABLE`, as a
    :class:`helpers.agreement.Confusion`); each figure within :data:`HAND_TOLERANCE` of
    :func:`helpers.agreement.table_coefficients` ("The screen against the review").
    """
    counts = agreement.Confusion(*GIVEN_TABLE)
    if given != counts:
        return hint("Keep the table as the starter cell gives it; the check computes the "
                    "figures of that table.")
    _require_keys(by_hand, "by_hand", ("kappa", "kappa_max", "pabak"))
    expected = agreement.table_coefficients(counts)
    kappa, kappa_max, pabak = (_number(by_hand[name], f"'{name}'")
                               for name in ("kappa", "kappa_max", "pabak"))
    n = counts.rows
    flagged = (counts.flagged_unsupported + counts.flagged_supported) / n
    bad = (counts.flagged_unsupported + counts.passed_unsupported) / n
    p_o, p_e = expected["kappa"].observed, expected["kappa"].expected
    _figure(kappa, "'kappa'", expected["kappa"].value, HAND_TOLERANCE, "kappa = (p_o - p_e) / "
            "(1 - p_e), with p_e the judge's share of flags times the review's share of "
            "unsupported replies, plus the same for the other label.", [(p_o, "That is the "
            "observed agreement p_o; kappa subtracts chance agreement and divides by 1 - p_e.")])
    largest = min(flagged, bad) + min(1 - flagged, 1 - bad)
    widest = max(flagged, bad) + max(1 - flagged, 1 - bad)
    _figure(kappa_max, "'kappa_max'", expected["kappa_max"].value, HAND_TOLERANCE, "The largest "
            "agreement the margins allow is the smaller of the two shares of 'not supported' plus "
            "the smaller of the two shares of 'supported'; put it in place of p_o.", [
                (1, "kappa_max is 1 only when the two sides give each label to the same share of "
                    "replies; here they do not."),
                (largest, "That is the largest agreement the shares allow; kappa_max puts it in "
                          "place of p_o in kappa's formula."),
                ((widest - p_e) / (1 - p_e), "For each label take the smaller of the two sides' "
                 "shares: two raters can agree on a label at most as often as the one who uses it "
                 "less.")])
    _figure(pabak, "'pabak'", expected["pabak"].value, HAND_TOLERANCE, "PABAK = 2 * p_o - 1: kappa "
            "with chance agreement fixed at one half.", [(p_o, "That is p_o itself. PABAK takes "
            "chance agreement as one half: 2 * p_o - 1.")])
    return correct(f"Kappa {expected['kappa'].value:.2f} is well below its kappa_max "
                   f"{expected['kappa_max'].value:.2f}, and PABAK is "
                   f"{expected['pabak'].value:.2f}: the judge agrees on {p_o:.0%} of the "
                   f"replies, but chance with these shares would already give {p_e:.0%}, and "
                   "the shares themselves cap kappa well below 1. Reported alone, the kappa "
                   "would hide all of that.")
