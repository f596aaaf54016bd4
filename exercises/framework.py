"""The marking framework of the exercises: verdicts, the registry, validators, caches.

Introduced in lesson 1, "Exercises" (see :mod:`exercises` for how an exercise
sits in a lesson and how a check works). A lesson's checkers live in that lesson's module
(:mod:`exercises.lesson1` ...) and use what is here: :func:`exercise` registers a
checker, :func:`correct` and :func:`hint` are what it returns, the validators
(:func:`_require_keys`, :func:`_id_list`, :func:`_number`, :func:`_pair` ...) read an
answer or raise :class:`AnswerShapeError`, :func:`_first_hint` ends a check with the hint
of the first known mistake a table of ``(condition, hint)`` cases finds (:func:`_figure`
does so for a number, :func:`_known` for an unknown ID, :func:`_reply` for a reply that
does not parse), and :func:`fixture_cache` caches what a checker derives from the fixture
until a fixture file changes.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import html
import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from helpers import parsing, prompts, retrieval, screen
from runtime import DATA_DIR, EXTENDED_QUESTIONS_FILE as EXTENDED_FILE

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


# --------------------------------------------------------------------------- verdicts


@dataclasses.dataclass(frozen=True)
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
        body = (f'<div class="riverton-exercise riverton-exercise-{self.status.replace(" ", "-")} '
                f'tex2jax_ignore mathjax_ignore" style="border-left: 4px solid '
                f'{_COLOURS[self.status]}; padding: 0.3rem 0.7rem; margin: 0.3rem 0;">'
                f"<strong>Exercise {html.escape(self.key)}: {_HEADLINES[self.status]}.</strong> "
                f"{html.escape(self.message)}</div>")
        return {"text/plain": str(self), "text/html": body,
                VERDICT_MIME: {"key": self.key, "status": self.status, "message": self.message}}


# A checker returns a verdict without its key; the registry's wrapper fills the key in.


def correct(message: str = "") -> Verdict:
    """A checker's "correct", with an optional remark for the student."""
    return Verdict("", CORRECT, message)


def hint(message: str) -> Verdict:
    """A checker's "not yet", with a hint that must not give the answer away."""
    return Verdict("", HINT, message)


def not_attempted(message: str = "") -> Verdict:
    """A checker's "not attempted yet" (for answers that cannot hold a ``...``)."""
    return Verdict("", NOT_ATTEMPTED, message or _NOT_ATTEMPTED_MESSAGE)


_NOT_ATTEMPTED_MESSAGE = (
    "Replace the ... in the cell above with your answer, run that cell, then run this one again."
)


class AnswerShapeError(Exception):
    """An answer that does not have the form its check expects; the check shows a hint.

    Raised by the validators of this module (a dict without a key, a set where the order
    matters); the message names the answer and what is wrong with its form.
    """


class _Hint(Exception):
    """A hint that ends a check from inside a helper (:func:`_first_hint`, :func:`_figure`,
    :func:`_known`, :func:`_reply` ...); the check shows its message. It is raised only on
    purpose, for a known mistake in the answer, never for a fault of the check."""


def _first_hint(*cases: tuple[Any, str | Callable[[], str]]) -> None:
    """End the check with the message of the first ``(condition, message)`` whose condition
    holds; return when none does. The cases are a checker's known mistakes in the order it
    tests them, so every condition must be safe to evaluate on its own; a message that can
    only be written when its condition holds is given as a function that writes it."""
    for condition, message in cases:
        if condition:
            raise _Hint(message() if callable(message) else message)


# --------------------------------------------------------------------------- registry


@dataclasses.dataclass(frozen=True)
class Exercise:
    """One registered exercise: its key ("1.2"), lesson, title, checker and answer form."""

    key: str
    lesson: int
    title: str
    expects: str
    checker: Callable[..., Verdict]


EXERCISES: dict[str, Exercise] = {}


def _leaves(value: Any, name: str) -> list[tuple[str, Any]]:
    """(name, leaf) for every leaf of an answer: through dicts (a leaf named by its key),
    lists and tuples. An empty container has no leaf."""
    if isinstance(value, Mapping):
        return [leaf for key, item in value.items() for leaf in _leaves(item, repr(key))]
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in _leaves(item, name)]
    return [(name, value)]


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

    def register(checker: Callable[..., Verdict]) -> Callable[..., Verdict]:
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
            leaves = [leaf for answer, name in zip(answers, names)
                      for leaf in _leaves(answer, name)]
            missing = [name for name, leaf in leaves if leaf is Ellipsis]
            if missing:  # every part still ... (keys do not count), or only some parts
                return Verdict(key, NOT_ATTEMPTED, _NOT_ATTEMPTED_MESSAGE if len(missing) == len(
                    leaves) else f"Still ... in {', '.join(dict.fromkeys(missing))}: fill in "
                                 "every part, then run this cell again.")
            _refresh_caches(read_bytes=True)
            try:
                outcome = checker(*answers)
            except AnswerShapeError as error:
                outcome = hint(f"The check could not use your answer: {error}. "
                               f"It expects {expects}.")
            except _Hint as stop:
                outcome = hint(str(stop))
            return dataclasses.replace(outcome, key=key)

        EXERCISES[key] = Exercise(key, int(lesson), title, expects, run)
        return run

    return register


def check(key: str, *answers: Any) -> Verdict:
    """Check the answer(s) to exercise ``key`` ("1.2"); what a lesson's check cell calls."""
    if key not in EXERCISES:
        raise KeyError(f"no exercise {key!r}; the exercises are {', '.join(sorted(EXERCISES))}")
    return EXERCISES[key].checker(*answers)


def lesson_exercises(lesson: int) -> list[Exercise]:
    """The registered exercises of one lesson, in order (each lesson's module registers its
    checkers in the order of its exercises)."""
    return [e for e in EXERCISES.values() if e.lesson == lesson]


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
def _riverton(questions: str | None = None):
    """The fixture, with lesson 1's questions or those of the file ``questions``."""
    from runtime import load_riverton

    return load_riverton() if questions is None else load_riverton(questions=questions)


def _handbook() -> pd.DataFrame:
    return _riverton().handbook


def _questions() -> pd.DataFrame:
    return _riverton().questions


def _all_questions() -> pd.DataFrame:
    """Lesson 1's six questions, then the extended set: the 42 ordinary questions, each
    with its ``question_set`` ("original six" or "extended")."""
    sets = {"original six": _questions(), "extended": _riverton(EXTENDED_FILE).questions}
    return pd.concat([q.assign(question_set=name) for name, q in sets.items()], ignore_index=True)


def _passage_texts() -> dict[str, str]:
    return dict(zip(_handbook()["passage_id"], _handbook()["text"]))


@fixture_cache
def _tfidf(stop_words: frozenset[str] | None = None) -> retrieval.TfidfRetriever:
    return retrieval.TfidfRetriever.fit(_handbook(), stop_words=stop_words)


@fixture_cache
def _lesson1() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Lesson 1's tf-idf top three for each of its six questions, and the reader's inputs
    built from them (one row per question: its retrieved IDs, messages ...), as
    :func:`helpers.prompts.retrieve_and_prompt` gives them."""
    return prompts.retrieve_and_prompt(_questions(), _handbook(), _tfidf())


def _asked(question_id: str, question: str) -> pd.DataFrame:
    """One question as a table a retriever ranks."""
    return pd.DataFrame({"question_id": [question_id], "question": [question]})


def _top_ids(ranked: pd.DataFrame, question_id: str) -> tuple[str, ...]:
    rows = ranked[ranked["question_id"] == question_id].sort_values("rank")
    return tuple(rows["passage_id"])


def _retrieved_ids() -> dict[str, tuple[str, ...]]:
    """Lesson 1's tf-idf top three per original question."""
    return {q: _top_ids(_lesson1()[0], q) for q in _questions()["question_id"]}


def _failed_checks(parsed: parsing.ParsedReply, retrieved: Sequence[str]) -> list[str]:
    """The screen checks a parsed reply fails, given the passages it was retrieved."""
    values = screen.screen_reply(parsed, retrieved, _passage_texts())
    return [c for c in screen.CHECKS if not values[c]]


# --------------------------------------------------------------------------- validators


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
    if math.isnan(float(value)):
        raise AnswerShapeError(f"{name} is NaN")
    return float(value)


def _whole_number(value: Any, name: str) -> int:
    """``value`` as an int; an :class:`AnswerShapeError` for anything else (a float, even
    24.0, a string, a bool): a count is a whole number."""
    number = _number(value, name)
    if not isinstance(value, (int, np.integer)):
        raise AnswerShapeError(f"{name} is a count: a whole number such as {int(number)}, "
                               f"not {value!r}")
    return int(number)


def _call(function: Callable, name: str, *args: Any, after: str = "") -> Any:
    """The student's ``function`` called with ``args``; a hint, never an error in the
    notebook, when it takes another number of arguments or raises (with ``after``, what
    a failure on these arguments suggests, at its end)."""
    import inspect

    try:
        inspect.signature(function).bind(*args)
    except TypeError:
        raise _Hint(f"{name} must take {_plural(len(args), 'argument', 'arguments')}; yours "
                    f"is {name}{inspect.signature(function)}.") from None
    except ValueError:  # a builtin without a signature: let the call say
        pass
    try:
        return function(*args)
    except Exception as error:  # noqa: BLE001 - the student's code, reported as a hint
        shown = ", ".join(repr(a)[:60] for a in args)
        raise _Hint(f"{name}({shown}) raised {type(error).__name__}: {error}.{after}") from None


def _close(value: Any, target: float, tolerance: float, name: str = "the figure") -> bool:
    """Whether the answer ``value`` (a number, see :func:`_number`) is within
    ``tolerance`` of ``target``."""
    # The 1e-12 absorbs floating-point error at the edge (1 - 0.995 > 0.005 in floats).
    return abs(_number(value, name) - target) <= tolerance + 1e-12


def _figure(value: Any, name: str, target: float, tolerance: float, otherwise: str,
            mistakes: Sequence[tuple[float | None, str]] = ()) -> None:
    """Return when ``value`` (a number, see :func:`_number`) is within ``tolerance`` of
    ``target``; otherwise end the check with the hint of the first known mistake
    ``(what it gives, hint)`` that ``value`` is within ``tolerance`` of (a mistake of
    value None is skipped), or with ``otherwise``."""
    if not _close(value, target, tolerance, name):
        _first_hint(*((wrong is not None and _close(value, wrong, tolerance, name), message)
                      for wrong, message in mistakes), (True, otherwise))


def _pair(value: Any, name: str, parts: str) -> tuple:
    """``value`` as a pair (a list or tuple of two), or an :class:`AnswerShapeError`."""
    if not (isinstance(value, (list, tuple)) and len(value) == 2):
        raise AnswerShapeError(f"{name} must be a pair {parts}")
    return tuple(value)


def _id_list(value: Any, what: str) -> list[str]:
    """A list of IDs from a list, tuple or comma-separated string."""
    if isinstance(value, str):
        value = [part for part in (p.strip() for p in value.split(",")) if part]
    if isinstance(value, (set, frozenset)):
        raise AnswerShapeError(f"{what} must be a list in order, not a set")
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise AnswerShapeError(f"{what} must be a list of IDs such as ['H01', 'H02']")
    return [v.strip() for v in value]


def _known(ids: Iterable[Any], known: Collection[Any], what: str) -> None:
    """End the check with the hint "'X' is not ``what``." for the first of ``ids`` that is
    not one of ``known``."""
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise _Hint(f"{unknown[0]!r} is not {what}.")


def _same_ids(given: Iterable[Any], expected: Iterable[Any],
              extra: str | Callable[[list, int], str] | None,
              missing: str | Callable[[list, int], str] | None = None) -> None:
    """End the check with a hint unless ``given`` holds every ID of ``expected`` and no
    other (order and repeats aside): ``extra`` when it holds an ID that is not expected
    (None: the check lets that pass), otherwise ``missing`` (by default the same message as
    ``extra``) when it leaves one out. A message given as a function is called with the
    unexpected IDs (in the order given) and the number of expected IDs left out."""
    expected, given = set(expected), list(dict.fromkeys(given))
    extras, left_out = [i for i in given if i not in expected], len(expected.difference(given))
    for ids, message in ((extras, extra), (left_out, extra if missing is None else missing)):
        if ids and message is not None:
            raise _Hint(message(extras, left_out) if callable(message) else message)


def _passage_ids(ids: Iterable[Any]) -> None:
    """End the check with a hint naming the first of ``ids`` that is no handbook passage ID."""
    known = sorted(_passage_texts())
    _known(ids, known, f"a handbook passage ID ({known[0]} to {known[-1]})")


def _require_keys(answer: Any, name: str, keys: Sequence[str]) -> None:
    if not isinstance(answer, Mapping):
        raise AnswerShapeError(f"{name} is a {type(answer).__name__}, not a dict")
    missing = [k for k in keys if k not in answer]
    if missing:
        raise AnswerShapeError(f"{name} has no key {', '.join(map(repr, missing))}")


def _reply(value: Any, name: str, called: str | None = None) -> parsing.ParsedReply:
    """A raw reply of the student's, parsed; a hint when it is not a string or when the
    strict parser rejects it (naming the reply ``called``, ``name`` by default)."""
    if not isinstance(value, str):
        raise _Hint(f"{name} must be a string: a raw reply, two lines.")
    parsed = parsing.parse_reader_output(value)
    if not parsed.parse_ok:
        raise _Hint(f"The strict parser rejects {called or name}: {parsed.problem}.")
    return parsed


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"
