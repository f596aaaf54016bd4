"""Lesson 4's exercises, one checker each (see :mod:`helpers.exercises`)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from .. import parsing, screen
from .framework import (
    HAND_TOLERANCE,
    TOLERANCE,
    _close,
    _extended_questions,
    _handbook,
    _number,
    _plural,
    _questions,
    _require_keys,
    _tfidf,
    correct,
    exercise,
    fixture_cache,
    hint,
)


def _review_module():
    # Imported on first use, like the lesson's other helpers.
    from .. import review

    return review


@fixture_cache
def _review_rows() -> pd.DataFrame:
    """Lesson 4's review record with the screen's label, rebuilt as the lesson builds it.

    One row per review row: the verdict, the question, its retrieved IDs, and whether the
    screen holds the reply ("The screen against the review").
    """
    review = _review_module()
    replies = review.recorded_replies()
    parsed = parsing.parse_outputs(replies)
    questions = pd.concat([_questions(), _extended_questions()], ignore_index=True)
    retrieved = _tfidf().rank(questions, k=3)
    screened = [screen.screen_table(group, retrieved, _handbook()).assign(key=group["key"].values)
                for _, group in parsed.groupby(["reader", "decoding"], sort=False)]
    checks = pd.concat(screened, ignore_index=True)
    rows = review.load_review(replies=replies).merge(
        replies[["key", "retrieved_ids"]], left_on="transcript_key", right_on="key",
        validate="one_to_one",
    ).merge(checks[["key", "failed_checks", "screen_label"]], on="key", validate="one_to_one")
    rows["held"] = rows["screen_label"] == screen.HELD
    rows["unsupported"] = rows["verdict"] == review.NOT_SUPPORTED
    return rows


def _judged() -> pd.DataFrame:
    """The reviewed replies with a yes-or-no verdict, the ones the 2x2 tables count."""
    review = _review_module()
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
    from .. import agreement

    _require_keys(screen_kappa, "screen_kappa", ("p_o", "p_e", "kappa"))
    held, unsupported = _screen_lists()
    counts = agreement.confusion(held, unsupported)
    kappa = agreement.cohen_kappa(held, unsupported)
    n = counts.rows
    flag_share = (counts.flagged_unsupported + counts.flagged_supported) / n
    bad_share = (counts.flagged_unsupported + counts.passed_unsupported) / n
    p_o = _number(screen_kappa["p_o"], "'p_o'")
    p_e = _number(screen_kappa["p_e"], "'p_e'")
    given = _number(screen_kappa["kappa"], "'kappa'")
    if not _close(p_o, kappa.observed, HAND_TOLERANCE):
        if _close(p_o, counts.flagged_unsupported / n, HAND_TOLERANCE):
            return hint("'p_o' counts agreement in both directions: the replies the screen "
                        "holds and the review rejects, *and* those it lets through and the "
                        "review finds supported.")
        return hint("'p_o' is the share of the table's replies on which the screen and the "
                    "review say the same thing: the two agreeing cells over all the rows.")
    if not _close(p_e, kappa.expected, HAND_TOLERANCE):
        if _close(p_e, 0.5, HAND_TOLERANCE):
            return hint("Chance agreement is not one half: it comes from how often each side "
                        "uses each label.")
        one_sided = (bad_share ** 2 + (1 - bad_share) ** 2, flag_share ** 2 + (1 - flag_share) ** 2)
        if any(_close(p_e, value, HAND_TOLERANCE) for value in one_sided):
            return hint("You used one side's shares twice. For each label, multiply the "
                        "screen's share by the review's share, then add the two products.")
        return hint("'p_e' adds, over the two labels, the screen's share of that label times "
                    "the review's share of it (held with not supported, not flagged with "
                    "supported).")
    if not _close(given, kappa.value, HAND_TOLERANCE):
        if _close(given, kappa.observed - kappa.expected, HAND_TOLERANCE):
            return hint("p_o - p_e is only the numerator: kappa divides it by the most "
                        "agreement beyond chance there could be, 1 - p_e.")
        if _close(given, (kappa.observed - kappa.expected) / (1 - kappa.observed), HAND_TOLERANCE):
            return hint("The denominator is 1 - p_e, not 1 - p_o.")
        if p_e != 1 and _close(given, (p_o - p_e) / (1 - p_e), HAND_TOLERANCE):
            return hint("Right formula, but your p_o and p_e are rounded: kappa divides by "
                        "1 - p_e, which is small when p_e is high, so two decimals move it. "
                        "Use the exact fractions and round only at the end.")
        return hint("kappa = (p_o - p_e) / (1 - p_e).")
    return correct(f"agreement.cohen_kappa gives {kappa.value:.4f}. The screen agrees with the "
                   f"review on {kappa.observed:.0%} of the replies, but chance alone would "
                   f"give {kappa.expected:.0%}, so little is left for kappa to credit.")


@exercise("4.2", "A screen that holds everything", expects="a dict with keys 'recall', "
          "'precision' and 'kappa'")
def hold_everything(hold_all):
    """Lesson 4, exercise 4.2: recall, precision and kappa of a screen that holds every reply.

    Recomputed with :mod:`helpers.agreement` for a signal that flags all the replies with
    a yes-or-no verdict; each figure within :data:`HAND_TOLERANCE` ("The screen against
    the review").
    """
    from .. import agreement

    _require_keys(hold_all, "hold_all", ("recall", "precision", "kappa"))
    _, unsupported = _screen_lists()
    flagged = [True] * len(unsupported)
    counts = agreement.confusion(flagged, unsupported)
    kappa = agreement.cohen_kappa(flagged, unsupported)
    expected_recall = agreement.recall(counts).value
    expected_precision = agreement.precision(counts).value
    if not _close(hold_all["recall"], expected_recall, HAND_TOLERANCE, "'recall'"):
        return hint("Recall is the share of unsupported replies the screen holds; this screen "
                    "holds every reply.")
    if not _close(hold_all["precision"], expected_precision, HAND_TOLERANCE, "'precision'"):
        if _close(hold_all["precision"], 1, HAND_TOLERANCE):
            return hint("Precision is the share of held replies that the review rejects, and "
                        "this screen holds the supported replies too.")
        return hint("Precision is the share of held replies that the review rejects: "
                    "unsupported replies over all the replies it holds.")
    if hold_all["kappa"] is None or isinstance(hold_all["kappa"], str):
        return hint("Kappa is defined here: only the screen gives a single label to "
                    "everything, so chance agreement is not 1. Work out p_o and p_e.")
    if not _close(hold_all["kappa"], kappa.value, HAND_TOLERANCE, "'kappa'"):
        if _close(hold_all["kappa"], expected_precision, HAND_TOLERANCE):
            return hint("That is the observed agreement p_o. Kappa subtracts the agreement "
                        "chance would give, p_e, and divides by 1 - p_e.")
        return hint("Work out p_o (how often the two agree) and p_e (the screen's share of "
                    "each label times the review's), then kappa = (p_o - p_e) / (1 - p_e).")
    return correct(f"Recall {expected_recall:.2f} and precision {expected_precision:.2f} look "
                   "good, yet kappa is 0: a screen that holds everything agrees with the "
                   "review exactly as often as chance would, and its precision is simply "
                   "the share of unsupported replies.")


def _is_none(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip().lower() == "none")


@exercise("4.3", "What only reading finds", expects="a dict from review IDs to a passage ID "
          "or None")
def only_reading_finds(misses):
    """Lesson 4, exercise 4.3: the unsupported replies the screen lets through, read.

    The keys must be exactly the review IDs of replies with the verdict *not supported*
    that the screen does not hold; each value is the retrieved passage that answers the
    reply's question, or None when none of the retrieved passages does (the gold passage
    of the question, if it was retrieved) ("The screen against the review").
    """
    if not isinstance(misses, Mapping):
        return hint("misses must be a dict: {review ID: passage ID or None}.")
    rows = _review_rows().set_index("review_id")
    judged = _judged()
    expected_ids = list(judged.loc[judged["unsupported"] & ~judged["held"], "review_id"])
    unknown = [r for r in misses if r not in rows.index]
    if unknown:
        return hint(f"{unknown[0]!r} is not a review ID of the record (R001 to R{len(rows):03d}).")
    for review_id in misses:
        if review_id in expected_ids:
            continue
        if rows.at[review_id, "held"]:
            return hint(f"The screen holds {review_id}; list only the replies it lets through.")
        return hint(f"The review does not reject {review_id} (its verdict is "
                    f"{rows.at[review_id, 'verdict']}); list only unsupported replies.")
    missing = len(set(expected_ids) - set(misses))
    if missing:
        return hint(f"The screen lets {_plural(missing, 'more unsupported reply', 'more unsupported replies')} "
                    "through than you list.")
    questions = pd.concat([_questions(), _extended_questions()]).set_index("question_id")
    for review_id in expected_ids:
        question_id = rows.at[review_id, "question_id"]
        retrieved = tuple(rows.at[review_id, "retrieved_ids"])
        gold = questions.at[question_id, "gold_passage_id"]
        answer = gold if isinstance(gold, str) and gold in retrieved else None
        given = misses[review_id]
        if _is_none(given):
            if answer is not None:
                return hint(f"One of the passages {review_id}'s reader was given does answer "
                            f"{question_id}: read them again.")
            continue
        if given not in retrieved:
            return hint(f"{given!r} was not among the passages retrieved for {question_id} "
                        f"({', '.join(retrieved)}): the review reads only what the reader "
                        "was given.")
        if given != answer:
            return hint(f"{given} was retrieved for {question_id}, but it does not answer "
                        f"what {question_id} asks.")
    return correct("Every one of them passes all six checks: an abstention cites nothing and "
                   "states no figure, and a copy of a retrieved passage cites a real, "
                   "retrieved passage and repeats only its figures. Whether a passage answers "
                   "the question is something only reading finds.")


@exercise("4.4", "Twice the rows", expects="a dict with keys 'kappa' and 'interval' "
          "(low, high)")
def twice_the_rows(doubled):
    """Lesson 4, exercise 4.4: the screen's kappa and its interval on every row taken twice.

    Recomputed with :func:`helpers.agreement.cohen_kappa` and
    :func:`helpers.agreement.bootstrap_kappa` (the lesson's seed and resamples,
    :data:`helpers.agreement.BOOTSTRAP_SEED` and ``BOOTSTRAP_RESAMPLES``) on the
    yes-or-no replies doubled, either as the list followed by itself or with each row
    repeated in place; figures within :data:`TOLERANCE` ("The screen against the
    review").
    """
    from .. import agreement

    _require_keys(doubled, "doubled", ("kappa", "interval"))
    held, unsupported = _screen_lists()
    kappa = agreement.cohen_kappa(held, unsupported).value
    settings = {"resamples": agreement.BOOTSTRAP_RESAMPLES, "seed": agreement.BOOTSTRAP_SEED}
    original = agreement.bootstrap_kappa(held, unsupported, **settings)
    appended = agreement.bootstrap_kappa(held * 2, unsupported * 2, **settings)
    repeated = agreement.bootstrap_kappa(list(np.repeat(held, 2)), list(np.repeat(unsupported, 2)),
                                         **settings)
    if not _close(doubled["kappa"], kappa, TOLERANCE, "'kappa'"):
        return hint("Doubling every row changes none of the shares that p_o and p_e are "
                    "made of.")
    interval = doubled["interval"]
    if not (isinstance(interval, (list, tuple)) and len(interval) == 2):
        return hint("'interval' is a pair: (low, high).")

    def matches(result) -> bool:
        return (_close(interval[0], result.low, TOLERANCE, "'interval'")
                and _close(interval[1], result.high, TOLERANCE, "'interval'"))

    if matches(original):
        return hint("That is the interval on the original rows; resample the doubled lists.")
    if not (matches(appended) or matches(repeated)):
        other = [agreement.bootstrap_kappa(held * 2, unsupported * 2, resamples=r, seed=s)
                 for r, s in ((agreement.BOOTSTRAP_RESAMPLES, 0), (1000, 0))]
        if any(matches(result) for result in other):
            return hint("Use the lesson's seed and number of resamples (SEED, RESAMPLES), so "
                        "the two intervals differ only in the rows.")
        return hint("Pass the doubled held and unsupported lists to agreement.bootstrap_kappa "
                    "with seed=SEED and resamples=RESAMPLES, and give its low and high.")
    result = appended if matches(appended) else repeated
    return correct(f"Kappa stays {kappa:.2f}, while the interval narrows from "
                   f"{original.high - original.low:.2f} wide to {result.high - result.low:.2f}. "
                   "More rows pin kappa down even when they say nothing new; with "
                   f"{len(held)} rows the interval is most of what the review can tell.")

