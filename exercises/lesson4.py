"""Lesson 4's exercises, one checker each (see :mod:`exercises`)."""
from __future__ import annotations

import pandas as pd

from helpers import agreement, baseline, corruptions, review, validity
from .framework import (HAND_TOLERANCE, TOLERANCE, _all_questions, _close, _figure, _first_hint,
                        _known, _number, _pair, _passage_texts, _plural, _require_keys, _same_ids,
                        _whole_number, correct, exercise, fixture_cache, hint)


@fixture_cache
def _review_rows() -> pd.DataFrame:
    """Lesson 4's review beside the screen (:func:`helpers.review.review_rows`), one row per
    distinct reply, with its group, as the lesson builds it ("The screen against the
    review")."""
    from runtime import load_review, recorded_replies

    replies = recorded_replies()
    rows = review.review_rows(load_review(replies=replies), replies, _passage_texts())
    rows["group"] = rows["reader"].map({baseline.BASELINE_READER: "sentence baseline",
                                        corruptions.CORRUPTION_READER: "rule-made corruptions"}
                                       ).fillna("the two models")
    return validity.distinct_replies(rows)


def _judged() -> pd.DataFrame:
    """The lesson's ``judged``: the systems' distinct replies with a yes-or-no verdict."""
    rows = _review_rows()
    return rows[rows["verdict"].isin([review.SUPPORTED, review.NOT_SUPPORTED])
                & (rows["group"] != "rule-made corruptions")]


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
    counts, kappa = agreement.confusion(*_screen_lists()), agreement.cohen_kappa(*_screen_lists())
    n = counts.rows
    flag_share = (counts.flagged_unsupported + counts.flagged_supported) / n
    bad_share = (counts.flagged_unsupported + counts.passed_unsupported) / n
    p_o, p_e, given = (_number(screen_kappa[k], f"'{k}'") for k in ("p_o", "p_e", "kappa"))
    _figure(p_o, "'p_o'", kappa.observed, HAND_TOLERANCE, "'p_o' is the share of the table's "
            "replies on which the screen and the review say the same thing: the two agreeing "
            "cells over all the rows.", [(counts.flagged_unsupported / n, "'p_o' counts agreement "
            "in both directions: the replies the screen holds and the review rejects, *and* those "
            "it lets through and the review finds supported.")])
    _figure(p_e, "'p_e'", kappa.expected, HAND_TOLERANCE, "'p_e' adds, over the two labels, the "
            "screen's share of that label times the review's share of it (held with not "
            "supported, not flagged with supported).", [
                (0.5, "Chance agreement is not one half: it comes from how often each side uses "
                      "each label."),
                *((share ** 2 + (1 - share) ** 2, "You used one side's shares twice. For each "
                   "label, multiply the screen's share by the review's share, then add the two "
                   "products.") for share in (bad_share, flag_share))])
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


@exercise("4.2", "A screen that holds everything", expects="a dict with keys 'sensitivity', "
          "'specificity' and 'kappa'")
def hold_everything(hold_all):
    """Lesson 4, exercise 4.2: sensitivity, specificity and kappa of a screen that holds
    every reply.

    Recomputed with :mod:`helpers.agreement` for a signal that flags all the systems'
    distinct replies with a yes-or-no verdict; each figure within :data:`HAND_TOLERANCE`
    ("The screen against the review").
    """
    _require_keys(hold_all, "hold_all", ("sensitivity", "specificity", "kappa"))
    unsupported = _screen_lists()[1]
    _figure(hold_all["sensitivity"], "'sensitivity'", 1, HAND_TOLERANCE, "Sensitivity is the "
            "share of unsupported replies the screen holds; this screen holds every reply.")
    _figure(hold_all["specificity"], "'specificity'", 0, HAND_TOLERANCE, "Specificity is the "
            "share of supported replies the screen lets through.", [
                (1, "This screen lets no reply through, supported or not."),
                (sum(unsupported) / len(unsupported), "That is the precision, the "
                 "share of held replies that are unsupported; specificity looks at the "
                 "supported replies.")])
    if hold_all["kappa"] is None or isinstance(hold_all["kappa"], str):
        return hint("Kappa is defined here: only the screen gives a single label to "
                    "everything, so chance agreement is not 1. Work out p_o and p_e.")
    _figure(hold_all["kappa"], "'kappa'", 0, HAND_TOLERANCE, "Work out p_o (how often the two "
            "agree) and p_e (the screen's share of each label times the review's), then kappa "
            "= (p_o - p_e) / (1 - p_e).")
    return correct("Sensitivity 1, specificity 0 and kappa 0: specificity says that this "
                   "screen knows nothing as plainly as kappa does, and Youden's J = 1 + 0 - 1 "
                   "= 0 says it in one figure. Sensitivity alone, or precision, which is "
                   "only the share of unsupported replies, would make it look perfect.")


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
    judged = _judged()
    expected_ids = list(judged.loc[judged["unsupported"] & ~judged["held"]
                                   & (judged["group"] == "the two models"), "review_id"])
    _known(misses, rows.index, f"a review ID of the record (R001 to R{len(rows):03d})")
    _same_ids(misses, expected_ids, lambda extra, _: (
        f"{extra[0]} is one of the sentence baseline's replies; list only the two models' "
        "replies." if rows.at[extra[0], "reader"] == baseline.BASELINE_READER else
        f"The screen holds {extra[0]}; list only the replies it lets through."
        if rows.at[extra[0], "held"] else
        f"The review does not reject {extra[0]} (its verdict is "
        f"{rows.at[extra[0], 'verdict']}); list only unsupported replies."),
        lambda _, n: f"The screen lets "
                     f"{_plural(n, 'more unsupported reply', 'more unsupported replies')} "
                     "through than you list.")
    questions = _all_questions().set_index("question_id")
    for review_id in expected_ids:
        question_id = rows.at[review_id, "question_id"]
        retrieved = tuple(rows.at[review_id, "retrieved_ids"])
        gold = questions.at[question_id, "gold_passage_id"]
        answer = gold if isinstance(gold, str) and gold in retrieved else None
        given = misses[review_id]
        given = None if isinstance(given, str) and given.strip().lower() == "none" else given
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
    low, high = (_number(end, f"the interval's {name} end")
                 for end, name in zip(interval, ("low", "high")))
    judged = _judged()
    baseline_rows = judged[judged["reader"] == baseline.BASELINE_READER]
    bad = baseline_rows[baseline_rows["unsupported"]]  # the baseline's unsupported replies
    held, unsupported = int(bad["held"].sum()), len(bad)
    per_retriever = bad["decoding"].value_counts()
    wrong_total = given_total != unsupported
    _first_hint(
        (wrong_total and given_total == len(baseline_rows), "Count only the baseline's "
         "unsupported replies: sensitivity is a share of the replies a person rejects."),
        (wrong_total and given_total in set(per_retriever), "The baseline replies with each "
         "retriever's passages; count the distinct unsupported replies of both."),
        (wrong_total, "'unsupported' is the number of the baseline's distinct replies with the "
                      "verdict not supported (rows of judged whose reader is the baseline)."),
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


#: Exercise 4.5's unreviewed batch: the screen lets this many of this many replies through.
#: Lesson 4, "Exercises".
GIVEN_BATCH = (70, 100)


@exercise("4.5", "Correct a pass rate", expects="a dict with keys 'sensitivity', "
          "'specificity' and 'corrected'")
def correct_a_pass_rate(batch):
    """Lesson 4, exercise 4.5: the Rogan-Gladen correction of the screen's pass rate on
    :data:`GIVEN_BATCH`, from its sensitivity and specificity on the systems' distinct
    replies; each figure within :data:`TOLERANCE` ("What the rates are for")."""
    _require_keys(batch, "batch", ("sensitivity", "specificity", "corrected"))
    counts = agreement.confusion(*_screen_lists())
    se, sp = agreement.sensitivity(counts).value, agreement.specificity(counts).value
    given = [_number(batch[k], f"'{k}'") for k in ("sensitivity", "specificity", "corrected")]
    _first_hint((_close(given[0], sp, TOLERANCE) and _close(given[1], se, TOLERANCE),
                 "Sensitivity and specificity are swapped: sensitivity counts the unsupported "
                 "replies held, specificity the supported ones let through."))
    _figure(given[0], "'sensitivity'", se, TOLERANCE, "The screen's sensitivity on judged: the "
            "unsupported replies it holds, of all unsupported ones.")
    _figure(given[1], "'specificity'", sp, TOLERANCE, "The screen's specificity on judged: the "
            "supported replies it lets through, of all supported ones.")
    pass_rate = GIVEN_BATCH[0] / GIVEN_BATCH[1]
    expected = validity.corrected_share(pass_rate, se, sp)
    _figure(given[2], "'corrected'", expected, TOLERANCE, "(pass rate + sensitivity - 1) / "
            "(sensitivity + specificity - 1), with the pass rate the share of the batch let "
            "through.", [
                (pass_rate, "That is the pass rate itself, uncorrected: the screen lets "
                            "unsupported replies through too."),
                ((pass_rate + sp - 1) / (se + sp - 1), "The numerator adds the sensitivity, "
                 "not the specificity: 1 - Se is the share of unsupported replies let through.")])
    return correct(f"The corrected share is {expected:.3f}, below the pass rate of "
                   f"{pass_rate:.2f}: some of what the screen lets through is unsupported. On "
                   "a batch of the baseline's replies the screen's sensitivity is 0, not "
                   f"{se:.2f}, and the correction would call every reply supported.")
