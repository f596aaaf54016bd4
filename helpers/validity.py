"""Is a signal valid? Its sensitivity and specificity against the review, group by group.

Introduced in lesson 4, "The screen against the review". A *signal* marks a reply as
suspect (the screen's "held for human review", a judge's "no"); the review's "not
supported" is the positive class. Validity asks two questions, one per class:
*sensitivity*, the share of unsupported replies the signal flags, and *specificity*,
the share of supported replies it lets through; Youden's J = sensitivity + specificity
- 1 is 0 for a signal that flags at random and 1 for a perfect one. Each is measured on
one group of replies at a time, never pooled, because the groups differ in what their
faults look like.

Two units stand side by side. The primary one is the distinct reply: identical replies
to one question count once (:func:`distinct_replies`), and each rate has an exact
interval. The other keeps every reply and resamples whole questions
(:func:`bootstrap_rates`), since one question's replies share its passages and its
difficulty. Then what the rates are for: correcting a pass rate
(:func:`corrected_share`), ranking by a graded score (:func:`auc_interval`), and
comparing two signals on the same replies (:func:`paired_difference`).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from .agreement import Ratio, confusion, sensitivity, specificity
from .dense import SCORE_DECIMALS
from .intervals import cluster_picks, percentile

#: The bootstrap settings of every interval on lesson 4's page and in its exercises (the
#: seed is the year of Cohen's paper on kappa), and the share each interval holds.
BOOTSTRAP_SEED = 1960
BOOTSTRAP_RESAMPLES = 2000
LEVEL = 0.95


def distinct_replies(frame: pd.DataFrame, group: str = "group") -> pd.DataFrame:
    """One row per distinct reply of each group: replies with the same text to the same
    question count once, the first in review order. Lesson 4, "Count each reply once"."""
    return frame.drop_duplicates([group, "question_id", "reviewed_reply"]).reset_index(drop=True)


def youden_j(flagged: Sequence[bool], unsupported: Sequence[bool]) -> float | None:
    """Youden's J = sensitivity + specificity - 1, or None without both kinds of reply."""
    counts = confusion(flagged, unsupported)
    se, sp = sensitivity(counts).value, specificity(counts).value
    return None if se is None or sp is None else se + sp - 1


def validity_row(flagged: Sequence[bool], unsupported: Sequence[bool]) -> dict:
    """A signal on one group of replies: its sensitivity and specificity (each a
    :class:`~helpers.agreement.Ratio`, shown "k of n: share (exact interval)"), and Youden's
    J. Lesson 4, "The screen against the review"."""
    counts = confusion(flagged, unsupported)
    return {"unsupported": counts.flagged_unsupported + counts.passed_unsupported,
            "supported": counts.flagged_supported + counts.passed_supported,
            "sensitivity": sensitivity(counts), "specificity": specificity(counts),
            "youden_j": "undefined" if (j := youden_j(flagged, unsupported)) is None else j}


def validity_table(frame: pd.DataFrame, by: str, flag: str = "held") -> pd.DataFrame:
    """:func:`validity_row` of the signal ``flag`` for each value of column ``by`` (in
    order of appearance); ``frame`` needs the boolean columns ``flag`` and
    ``unsupported``."""
    return pd.DataFrame([{by: name, **validity_row(part[flag].tolist(),
                                                   part["unsupported"].tolist())}
                         for name, part in frame.groupby(by, sort=False)])


# ---------------------------------------------------------------- resampling questions

def question_resamples(questions: Sequence, resamples: int = BOOTSTRAP_RESAMPLES,
                       seed: int = BOOTSTRAP_SEED) -> list[np.ndarray]:
    """The rows of each bootstrap resample: as many questions as there are, drawn with
    replacement, each bringing every one of its replies."""
    questions = np.asarray(questions)
    distinct = list(dict.fromkeys(questions.tolist()))
    rows_of = [np.flatnonzero(questions == q) for q in distinct]
    return [np.concatenate([rows_of[i] for i in pick])
            for pick in cluster_picks(len(distinct), resamples, seed)]


def _share(part: np.ndarray, whole: np.ndarray) -> float | None:
    return part.sum() / whole.sum() if whole.sum() else None


def bootstrap_rates(flagged: Sequence[bool], unsupported: Sequence[bool], questions: Sequence,
                    resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> dict:
    """Sensitivity, specificity and J on every reply, with percentile intervals from
    resampling whole questions; a share of 0 or 1, the same in every resample, gets none
    (:func:`percentile`): its exact interval says how sure it is. Lesson 4, "Count each
    reply once"."""
    flagged, bad = np.asarray(flagged, bool), np.asarray(unsupported, bool)
    se, sp, j = [], [], []
    for rows in question_resamples(questions, resamples, seed):
        f, b = flagged[rows], bad[rows]
        se.append(_share(f & b, b))
        sp.append(_share(~f & ~b, ~b))
        j.append(None if se[-1] is None or sp[-1] is None else se[-1] + sp[-1] - 1)
    return {"replies": len(bad), "questions": len(set(questions)),
            "sensitivity": percentile(se), "specificity": percentile(sp),
            "youden_j": percentile(j)}


# ---------------------------------------------------------------- what the rates are for

def corrected_share(pass_rate: float, sensitivity: float, specificity: float) -> float | None:
    """The Rogan-Gladen (1978) estimate of the share of supported replies in a batch from
    the share the screen lets through, its sensitivity and its specificity.
    Lesson 4, "What the rates are for".

    A batch with a share p of supported replies passes p * Sp + (1 - p) * (1 - Se) of its
    replies; solved for p that is (pass rate + Se - 1) / (Se + Sp - 1), kept within 0 and
    1. With J = Se + Sp - 1 at or below 0 the screen carries no information: None.
    """
    j = sensitivity + specificity - 1
    if j <= 0:
        return None
    return min(1.0, max(0.0, (pass_rate + sensitivity - 1) / j))


def corrected_pass_rate(calibration: pd.DataFrame, batch: pd.DataFrame, flag: str = "held",
                        resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> dict:
    """The screen calibrated on ``calibration`` (reviewed replies) and applied to
    ``batch``: its pass rate, the corrected share of supported replies with an interval
    that resamples the questions of both, and the batch's true share from its review.
    Both frames need ``question_id``, ``unsupported`` and the signal ``flag``."""
    held, bad = (calibration[c].to_numpy(bool) for c in (flag, "unsupported"))
    passed = ~batch[flag].to_numpy(bool)

    def estimate(cal: np.ndarray, bat: np.ndarray) -> float | None:
        se, sp = _share(held[cal] & bad[cal], bad[cal]), _share(~held[cal] & ~bad[cal], ~bad[cal])
        return None if se is None or sp is None else corrected_share(passed[bat].mean(), se, sp)

    drawn = zip(question_resamples(calibration["question_id"], resamples, seed),
                question_resamples(batch["question_id"], resamples, seed + 1))
    return {"pass_rate": passed.mean(), "corrected": estimate(slice(None), slice(None)),
            "interval": percentile([estimate(c, b) for c, b in drawn]),
            "true_share": 1 - batch["unsupported"].mean()}


def auc(scores: Sequence[float], unsupported: Sequence[bool]) -> float | None:
    """The area under the ROC curve: the chance that a randomly chosen unsupported reply
    scores higher than a randomly chosen supported one, ties counting one half (Hanley
    and McNeil 1982); None without both kinds. Lesson 4, "A graded signal".

    A model's scores are rounded to :data:`helpers.dense.SCORE_DECIMALS` decimals first:
    below that they are float noise, so two scores that agree to that precision tie.
    """
    scores = np.round(np.asarray(scores, float), SCORE_DECIMALS)
    bad = np.asarray(unsupported, bool)
    high, low = scores[bad], scores[~bad]
    if not high.size or not low.size:
        return None
    above = (high[:, None] > low[None, :]).sum() + 0.5 * (high[:, None] == low[None, :]).sum()
    return float(above / (high.size * low.size))


def auc_interval(scores: Sequence[float], unsupported: Sequence[bool], questions: Sequence,
                 resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> dict:
    """:func:`auc` with a percentile interval from resampling whole questions."""
    scores, bad = np.asarray(scores, float), np.asarray(unsupported, bool)
    drawn = [auc(scores[rows], bad[rows]) for rows in question_resamples(questions, resamples,
                                                                         seed)]
    return {"unsupported": int(bad.sum()), "supported": int((~bad).sum()),
            "area": auc(scores, bad), "interval": percentile(drawn)}


def split_halves(questions: Sequence, seed: int = BOOTSTRAP_SEED) -> tuple[list, list]:
    """The distinct questions split in two at random with ``seed``: sorted, shuffled,
    the first half and the rest. Lesson 4, "Knowing only the system"."""
    distinct = sorted(set(questions))
    order = np.random.default_rng(seed).permutation(len(distinct))
    half = len(distinct) // 2
    return sorted(distinct[i] for i in order[:half]), sorted(distinct[i] for i in order[half:])


def majority_rule(fit: pd.DataFrame, by: str = "system") -> Callable[[pd.DataFrame], pd.Series]:
    """The best signal that knows only who wrote a reply, fitted on ``fit``: flag every
    reply of a ``by`` group whose replies there are mostly unsupported (a group it never
    saw is let through). Lesson 4, "Knowing only the system"."""
    mostly_bad = set(fit.groupby(by)["unsupported"].mean().loc[lambda s: s > 0.5].index)
    return lambda frame: frame[by].isin(mostly_bad)


def paired_difference(first: Sequence[bool], second: Sequence[bool], unsupported: Sequence[bool],
                      questions: Sequence, resamples: int = BOOTSTRAP_RESAMPLES,
                      seed: int = BOOTSTRAP_SEED) -> dict:
    """Youden's J of signal ``first`` minus that of ``second`` on the same replies, with a
    paired interval: each resample of questions scores both signals on the same replies.
    Lesson 4, "Knowing only the system"."""
    first, second, bad = (np.asarray(v, bool) for v in (first, second, unsupported))

    def difference(rows) -> float | None:
        one, two = youden_j(first[rows], bad[rows]), youden_j(second[rows], bad[rows])
        return None if one is None or two is None else one - two

    drawn = [difference(rows) for rows in question_resamples(questions, resamples, seed)]
    return {"first": youden_j(first, bad), "second": youden_j(second, bad),
            "difference": difference(np.arange(len(bad))),
            "interval": percentile(drawn)}


def agreement_per_class(reference: Sequence[bool], other: Sequence[bool]) -> dict:
    """Another rater (a second reader, or a signal) against a reference reader, one class
    at a time: of the replies the reference finds unsupported, how many the other calls
    unsupported too, and of those it finds supported, how many the other calls supported;
    each a :class:`~helpers.agreement.Ratio`. Lesson 4, "A second reading"."""
    counts = confusion(list(other), list(reference))
    return {"unsupported_too": sensitivity(counts), "supported_too": specificity(counts),
            "same": Ratio(counts.flagged_unsupported + counts.passed_supported, counts.rows)}
