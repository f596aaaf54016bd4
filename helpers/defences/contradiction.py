"""The contradiction check: retrieved passages of one topic that cannot both be true.

Lesson 5, "Two passages that disagree". Passages that share a topic but state values that
cannot both be true (money with its period, times, dates; :mod:`helpers.values`) send the
question to a person, who is shown both.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from ..values import Value, compatible, stated_values

@dataclass(frozen=True)
class Conflict:
    """Two retrieved passages with one topic that state values that cannot both be true."""

    topic: str
    first: str
    second: str
    only_first: tuple[str, ...]   # values the first states that the second contradicts
    only_second: tuple[str, ...]

    def __str__(self) -> str:
        return (f"{self.first} vs {self.second} on {self.topic}: "
                f"{', '.join(self.only_first)} vs {', '.join(self.only_second)}")


def disagreement(first: Sequence[Value], second: Sequence[Value]
                 ) -> tuple[tuple[Value, ...], tuple[Value, ...]]:
    """The values of each text that the other contradicts; both empty when they agree.

    Lesson 5, "Two passages that disagree". Only kinds that both texts state are
    compared: a value is contradicted when the other text states values of its kind and
    none is :func:`helpers.values.compatible` with it. The texts disagree when, in some
    kind, each has a contradicted value: a text that says less than the other (a month
    without its day, a price without its period, one of two dates) does not disagree.
    """
    def unmatched(mine, theirs, kind):
        return [v for v in mine if v.kind == kind
                and not any(compatible(v, other) for other in theirs)]

    only_first, only_second = [], []
    for kind in dict.fromkeys(v.kind for v in first):
        if not any(v.kind == kind for v in second):
            continue
        mine, theirs = unmatched(first, second, kind), unmatched(second, first, kind)
        if mine and theirs:
            only_first += mine
            only_second += theirs
    return tuple(only_first), tuple(only_second)


def conflicting_passages(retrieved_ids: Sequence[str], index: pd.DataFrame
                         ) -> tuple[Conflict, ...]:
    """Pairs of retrieved passages that share a topic and state values that disagree.

    Lesson 5, "Two passages that disagree". Each passage's values are read with
    :func:`helpers.values.stated_values` (money with its period, times, dates, weekdays,
    other figures) and compared with :func:`disagreement`: H14's "October 15" against
    S01's "September 30". A passage that says the same in other words ("$150.00 a week",
    "10/15") or says only part of another does not disagree with it, and a passage that
    states no value cannot. Every retrieved passage is compared, trusted or not, and the
    topic is the ``topic`` column of the index. Like routing, it reads the retrieval
    only, never the reply, so it is decided before the reader runs.
    """
    rows = index.set_index("passage_id")
    ids = list(dict.fromkeys(retrieved_ids))
    values = {pid: stated_values(rows.at[pid, "text"]) for pid in ids}
    conflicts = []
    for i, first in enumerate(ids):
        for second in ids[i + 1:]:
            topic = rows.at[first, "topic"]
            if topic != rows.at[second, "topic"]:
                continue
            only_first, only_second = disagreement(values[first], values[second])
            if only_first and only_second:
                conflicts.append(Conflict(topic, first, second,
                                          tuple(str(v) for v in only_first),
                                          tuple(str(v) for v in only_second)))
    return tuple(conflicts)
