"""The marking framework of the exercises: verdicts, the registry, validators, caches.

Introduced in lesson 1, "Exercises" (see :mod:`helpers.exercises` for how an exercise
sits in a lesson and how a check works). A lesson's checkers live in that lesson's module
(:mod:`helpers.exercises.lesson1` ...) and use what is here: :func:`exercise` registers a
checker, :func:`correct` and :func:`hint` are what it returns, the validators
(:func:`_require_keys`, :func:`_id_list`, :func:`_number` ...) read an answer or raise
:class:`AnswerShapeError`, and :func:`fixture_cache` caches what a checker derives from
the fixture until a fixture file changes.
"""
from __future__ import annotations

import functools
import hashlib
import html
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .. import retrieval
from runtime import DATA_DIR

#: Decimals a figure worked out by hand needs: any rounding to this many passes.
HAND_DECIMALS = 2
#: Tolerance for figures worked out by hand: half a unit in the last of HAND_DECIMALS.
HAND_TOLERANCE = 0.5 * 10**-HAND_DECIMALS
#: Decimals a figure computed with code needs: any rounding to this many passes.
DECIMALS = 3
#: Tolerance for figures computed with code: half a unit in the last of DECIMALS.
TOLERANCE = 0.5 * 10**-DECIMALS

CORRECT = "correct"
HINT = "hint"
NOT_ATTEMPTED = "not attempted"

#: A verdict's machine-readable copy in its MIME bundle, for tests (front ends ignore it).
VERDICT_MIME = "application/vnd.riverton.exercise+json"

_HEADLINES = {CORRECT: "correct", HINT: "not yet", NOT_ATTEMPTED: "not attempted yet"}
_COLOURS = {CORRECT: "#3fb618", HINT: "#ff7518", NOT_ATTEMPTED: "#9a9a9a"}

EXTENDED_FILE = "riverton-extended-questions.csv"
SMOLLM2 = "smollm2_135m_instruct"


# --------------------------------------------------------------------------- verdicts


@dataclass(frozen=True)
class Verdict:
    """What a check says about an answer: its status and a message for the student.

    Shown in a notebook as a short coloured line; ``str(verdict)`` is the same text.
    """

    key: str
    status: str
    message: str = ""

    @property
    def correct(self) -> bool:
        return self.status == CORRECT

    def __str__(self) -> str:
        head = f"Exercise {self.key}: {_HEADLINES[self.status]}."
        return f"{head} {self.message}" if self.message else head

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        colour = _COLOURS[self.status]
        body = (
            f'<div class="riverton-exercise riverton-exercise-{self.status.replace(" ", "-")} '
            f'tex2jax_ignore mathjax_ignore" style="border-left: 4px solid {colour}; '
            f'padding: 0.3rem 0.7rem; margin: 0.3rem 0;">'
            f"<strong>Exercise {html.escape(self.key)}: {_HEADLINES[self.status]}.</strong> "
            f"{html.escape(self.message)}</div>"
        )
        return {
            "text/plain": str(self),
            "text/html": body,
            VERDICT_MIME: {"key": self.key, "status": self.status, "message": self.message},
        }


@dataclass(frozen=True)
class _Outcome:
    status: str
    message: str


def correct(message: str = "") -> _Outcome:
    """A checker's "correct", with an optional remark for the student."""
    return _Outcome(CORRECT, message)


def hint(message: str) -> _Outcome:
    """A checker's "not yet", with a hint that must not give the answer away."""
    return _Outcome(HINT, message)


def not_attempted(message: str = "") -> _Outcome:
    """A checker's "not attempted yet" (for answers that cannot hold a ``...``)."""
    return _Outcome(NOT_ATTEMPTED, message or _NOT_ATTEMPTED_MESSAGE)


_NOT_ATTEMPTED_MESSAGE = (
    "Replace the ... in the cell above with your answer, run that cell, then run this one again."
)


# --------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class Exercise:
    """One registered exercise: its key ("1.2"), lesson, title, checker and answer form."""

    key: str
    lesson: int
    title: str
    expects: str
    checker: Callable[..., Verdict]


EXERCISES: dict[str, Exercise] = {}


def _unfinished(value: Any, name: str) -> list[str]:
    """Where ``value`` still holds the starter's ``...`` (names for the message)."""
    if value is Ellipsis:
        return [name]
    if isinstance(value, Mapping):
        return [part for key, item in value.items() for part in _unfinished(item, repr(key))]
    if isinstance(value, (list, tuple)):
        return [part for item in value for part in _unfinished(item, name)]
    return []


def _filled(value: Any) -> bool:
    """Whether ``value`` holds anything besides the starter's ``...`` (keys do not count)."""
    if value is Ellipsis:
        return False
    if isinstance(value, Mapping):
        return any(_filled(item) for item in value.values())
    if isinstance(value, (list, tuple)):
        return any(_filled(item) for item in value)
    return True


class AnswerShapeError(Exception):
    """An answer that does not have the form its check expects; the check shows a hint.

    Raised by the validators of this module (a dict without a key, a set where the order
    matters); the message names the answer and what is wrong with its form.
    """


def _shape_hint(key: str, error: AnswerShapeError, expects: str) -> Verdict:
    return Verdict(key, HINT, f"The check could not use your answer: {error}. "
                              f"It expects {expects}.")


def exercise(key: str, title: str, *, expects: str) -> Callable:
    """Register a checker for exercise ``key`` ("N.M"); see the module docstring.

    The wrapped checker takes the student's answers and returns a :class:`Verdict`. An
    answer that still holds ``...`` gives "not attempted yet" before the checker runs;
    an answer the checker cannot read gives a hint that says what form it expects. Any
    other error the checker raises propagates: it is a fault of the check, not of the
    answer.
    """
    lesson, _, number = key.partition(".")
    if not (lesson.isdigit() and number.isdigit()):
        raise ValueError(f"exercise keys look like '1.2', got {key!r}")

    def register(checker: Callable[..., _Outcome]) -> Callable[..., Verdict]:
        prefix = f"Lesson {lesson}, exercise {key}:"
        if not (checker.__doc__ or "").startswith(prefix):
            raise ValueError(f"the docstring of {checker.__name__} must start {prefix!r}")
        if key in EXERCISES:
            raise ValueError(f"exercise {key} is registered twice")

        @functools.wraps(checker)
        def run(*answers: Any) -> Verdict:
            names = checker.__code__.co_varnames[: checker.__code__.co_argcount]
            if len(answers) != len(names):
                return Verdict(key, HINT, f"The check takes {len(names)} answer(s), "
                                          f"{', '.join(names)}; it was given {len(answers)}.")
            missing = [part for answer, name in zip(answers, names)
                       for part in _unfinished(answer, name)]
            if missing:
                if not any(_filled(answer) for answer in answers):
                    return Verdict(key, NOT_ATTEMPTED, _NOT_ATTEMPTED_MESSAGE)
                return Verdict(key, NOT_ATTEMPTED,
                               "Still ... in " + ", ".join(dict.fromkeys(missing))
                               + ": fill in every part, then run this cell again.")
            _refresh_caches(read_bytes=True)
            try:
                outcome = checker(*answers)
            except AnswerShapeError as error:
                return _shape_hint(key, error, expects)
            return Verdict(key, outcome.status, outcome.message)

        run.exercise_key = key
        EXERCISES[key] = Exercise(key, int(lesson), title, expects, run)
        return run

    return register


def check(key: str, *answers: Any) -> Verdict:
    """Check the answer(s) to exercise ``key`` ("1.2"); what a lesson's check cell calls."""
    if key not in EXERCISES:
        raise KeyError(f"no exercise {key!r}; the exercises are {', '.join(sorted(EXERCISES))}")
    return EXERCISES[key].checker(*answers)


def lesson_exercises(lesson: int) -> list[Exercise]:
    """The registered exercises of one lesson, in order."""
    found = [e for e in EXERCISES.values() if e.lesson == lesson]
    return sorted(found, key=lambda e: int(e.key.partition(".")[2]))


# --------------------------------------------------------------------------- caches


def _fixture_files() -> list:
    return sorted(path for path in DATA_DIR.rglob("*") if path.is_file())


def fixture_fingerprint() -> str:
    """SHA-256 over the relative path and the bytes of every file under ``data/riverton``."""
    digest = hashlib.sha256()
    for path in _fixture_files():
        digest.update(path.relative_to(DATA_DIR).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


#: Every function cached with :func:`fixture_cache`, in every lesson's module: what
#: :func:`_refresh_caches` empties when the fixture changes.
FIXTURE_CACHES: list[Callable] = []

#: The fixture the caches were filled from: its files' (path, size, mtime_ns) and fingerprint.
_CACHED_FROM: dict[str, Any] = {"stats": None, "fingerprint": None}


def _refresh_caches(*, read_bytes: bool = False) -> None:
    """Empty every cache of this module if the fixture changed since they were filled.

    Each check runs it with ``read_bytes=True``: the files' bytes are hashed (a few
    hundred kilobytes, well under a millisecond), so any change to their content is seen.
    Each call of a :func:`fixture_cache` function runs it without: it compares the
    files' paths, sizes and modification times (a few ``stat`` calls) and hashes the
    bytes only when one of those changed. Every cache in :data:`FIXTURE_CACHES` is
    emptied when the bytes changed.
    """
    stats = tuple((str(path), st.st_size, st.st_mtime_ns)
                  for path in _fixture_files() for st in (path.stat(),))
    if stats == _CACHED_FROM["stats"] and not read_bytes:
        return
    fingerprint = fixture_fingerprint()
    if fingerprint != _CACHED_FROM["fingerprint"]:
        for cached in FIXTURE_CACHES:
            cached.cache_clear()
    _CACHED_FROM.update(stats=stats, fingerprint=fingerprint)


def fixture_cache(function: Callable) -> Callable:
    """``functools.cache`` for state derived from the fixture: it is recomputed after any
    change to a file under ``data/riverton`` (see :func:`_refresh_caches`). Every function
    a checker caches must use it: a plain ``functools.cache`` would outlive an edit of the
    fixture. The cached functions are listed in :data:`FIXTURE_CACHES`."""
    cached = functools.cache(function)

    @functools.wraps(function)
    def run(*args: Any) -> Any:
        _refresh_caches()
        return cached(*args)

    run.cache_clear = cached.cache_clear
    run.cache_info = cached.cache_info
    FIXTURE_CACHES.append(run)
    return run


# --------------------------------------------------------------------------- shared state


@fixture_cache
def _riverton():
    from runtime import load_riverton

    return load_riverton()


@fixture_cache
def _extended_questions() -> pd.DataFrame:
    from runtime import load_riverton

    return load_riverton(questions=EXTENDED_FILE).questions


def _handbook() -> pd.DataFrame:
    return _riverton().handbook


def _questions() -> pd.DataFrame:
    return _riverton().questions


def _passage_texts() -> dict[str, str]:
    return dict(zip(_handbook()["passage_id"], _handbook()["text"]))


def _question_texts() -> dict[str, str]:
    return dict(zip(_questions()["question_id"], _questions()["question"]))


@fixture_cache
def _tfidf(stop_words: frozenset[str] | None = None) -> retrieval.TfidfRetriever:
    return retrieval.TfidfRetriever.fit(_handbook(), stop_words=stop_words)


def _top_ids(ranked: pd.DataFrame, question_id: str) -> tuple[str, ...]:
    rows = ranked[ranked["question_id"] == question_id].sort_values("rank")
    return tuple(rows["passage_id"])


@fixture_cache
def _retrieved_ids() -> dict[str, tuple[str, ...]]:
    """Lesson 1's tf-idf top three per original question."""
    ranked = _tfidf().rank(_questions(), k=3)
    return {q: _top_ids(ranked, q) for q in _questions()["question_id"]}


#: What counts as a number in an answer: Python's and NumPy's ints and floats. A string
#: that spells a number ("0.5") or a bool is not one: it gets the shape hint.
_NUMBER_TYPES = (int, float, np.integer, np.floating)


def _is_number(value: Any) -> bool:
    return isinstance(value, _NUMBER_TYPES) and not isinstance(value, (bool, np.bool_))


def _number(value: Any, name: str) -> float:
    """``value`` as a float; an :class:`AnswerShapeError` for anything that is not a
    number (a string, even one that spells a number, a bool, None) and for NaN."""
    if not _is_number(value):
        what = "the string " if isinstance(value, str) else ""
        raise AnswerShapeError(f"{name} must be a number, not {what}{value!r}")
    number = float(value)
    if math.isnan(number):
        raise AnswerShapeError(f"{name} is NaN")
    return number


def _whole_number(value: Any, name: str) -> int:
    """``value`` as an int; an :class:`AnswerShapeError` for anything else (a float with
    a fraction, a string, a bool)."""
    number = _number(value, name)
    if number != int(number):
        raise AnswerShapeError(f"{name} must be a whole number, not {value!r}")
    return int(number)


def _close(value: Any, target: float, tolerance: float, name: str = "the figure") -> bool:
    """Whether the answer ``value`` (a number, see :func:`_number`) is within
    ``tolerance`` of ``target``."""
    number = _number(value, name)
    # The 1e-12 absorbs floating-point error at the edge (1 - 0.995 > 0.005 in floats).
    return abs(number - target) <= tolerance + 1e-12


def _id_list(value: Any, what: str) -> list[str]:
    """A list of IDs from a list, tuple or comma-separated string."""
    if isinstance(value, str):
        value = [part for part in (p.strip() for p in value.split(",")) if part]
    if isinstance(value, (set, frozenset)):
        raise AnswerShapeError(f"{what} must be a list in order, not a set")
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise AnswerShapeError(f"{what} must be a list of IDs such as ['H01', 'H02']")
    return [v.strip() for v in value]


def _require_keys(answer: Any, name: str, keys: Sequence[str]) -> None:
    if not isinstance(answer, Mapping):
        raise AnswerShapeError(f"{name} is a {type(answer).__name__}, not a dict")
    missing = [k for k in keys if k not in answer]
    if missing:
        raise AnswerShapeError(f"{name} has no key {', '.join(map(repr, missing))}")


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"

