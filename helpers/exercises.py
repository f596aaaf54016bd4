"""Exercises at the end of each lesson, and the checkers that mark them.

Introduced in lesson 1, "Exercises"; every lesson ends with a section of that name. A
check cell calls :func:`check` with the exercise's key and the student's answer, and
shows a :class:`Verdict`:

* **correct**;
* **not yet**, with a hint about what is wrong that does not give the answer away;
* **not attempted yet**, while the answer still holds the starter cell's ``...``. This
  is never an error, so a lesson with untouched exercises still runs from top to bottom.

A checker checks *results*, never the text of the student's code: it recomputes what the
lesson's helpers give on the fixture and compares. Numbers are accepted within a stated
tolerance: :data:`HAND_TOLERANCE` for figures worked out by hand, :data:`TOLERANCE` for
figures a student computes with code; an exercise's task states the one its check uses,
from these constants. A checker does not trust the notebook's variables (a student may
have changed them); it builds what it needs itself and caches it, and every cache is
emptied as soon as a file of the fixture (``data/riverton``) changes, so a check never
answers from data that is no longer there. Its hints come from the mistakes a student is
likely to make: where a wrong answer is what a known mistake produces, the hint names
that mistake. A hint points the way without saying how far: it never names the value
one step from the answer. Reading this module shows the answers: the checks are for
checking yourself, not for grading.

An answer the check cannot read (a number where a dict belongs, a set where the order
matters) gets a hint that says what form the check expects. Only errors that come from
reading the answer are turned into that hint: the validators of this module raise
:class:`AnswerShapeError` for them. Any other error (a failed internal assertion, a
damaged fixture, a helper that breaks) is the checker's own fault and is raised as it
is, never dressed up as a hint.

How an exercise sits in a lesson notebook, after "What to remember" and before
"Sources" (tests/exercise_cells.py reads this layout and the tests rely on it):

1. a markdown cell that starts ``### Exercise N.M: Title`` and states the task (the
   first exercise's cell starts with the section heading ``## Exercises`` and a short
   paragraph on how the exercises work);
   when the task quotes a figure of the check (a tolerance, a number of probes), a code
   cell that starts ``#| echo: false`` follows it and states that sentence with
   ``display(Markdown(...))`` from this module's constants, so the figure is never typed;
2. a starter code cell that runs as committed and leaves ``...`` where the answer goes;
3. a check code cell: ``exercises.check("N.M", answer, ...)``;
4. a markdown solution cell: a collapsed callout,
   ``::: {.callout-tip collapse="true" title="Solution to exercise N.M"}``, a blank line,
   prose and one or more ```` ```python ```` blocks, then ``:::``. The cell carries the
   metadata ``{"jupyter": {"source_hidden": true}}``, so JupyterLab shows it collapsed
   until the student clicks it open. Its code is never executed when the book renders;
   the tests run it, after the lesson's own cells, through the checker.

Adding exercises to a lesson (lesson 4, say) is a mechanical step:

1. here, one checker per exercise, decorated with ``@exercise("4.1", "Title",
   expects="...")``; its docstring must start ``Lesson 4, exercise 4.1:`` (the decorator
   refuses anything else) and it returns :func:`correct` or :func:`hint`. It reads the
   answer with the validators below (``_require_keys``, ``_id_list``), or raises
   :class:`AnswerShapeError` itself, so that a malformed answer becomes a hint, and it
   caches what it derives from the fixture with :func:`fixture_cache`;
2. in the notebook, the four cells above for each exercise, and ``exercises`` added to
   the "Set up" cell's imports;
3. in ``tests/test_exercises.py``, the lesson in ``LESSONS`` (notebook and reader mode)
   and at least one deliberately wrong answer per exercise in ``WRONG_ANSWERS`` with a
   piece of the hint it must produce. The tests then check the layout, that the starter
   cells leave every exercise "not attempted yet" in a clean run, that every solution is
   marked correct and every wrong answer gets its hint.
"""
from __future__ import annotations

import functools
import hashlib
import html
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from . import parsing, retrieval, scoring, screen, text
from .paths import DATA_DIR

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


#: The fixture the caches were filled from: its files' (path, size, mtime_ns) and fingerprint.
_CACHED_FROM: dict[str, Any] = {"stats": None, "fingerprint": None}


def _refresh_caches(*, read_bytes: bool = False) -> None:
    """Empty every cache of this module if the fixture changed since they were filled.

    Each check runs it with ``read_bytes=True``: the files' bytes are hashed (a few
    hundred kilobytes, well under a millisecond), so any change to their content is seen.
    Each call of a :func:`fixture_cache` function runs it without: it compares the
    files' paths, sizes and modification times (a few ``stat`` calls) and hashes the
    bytes only when one of those changed. The caches are emptied when the bytes changed;
    every cache of the module is, ``functools.cache`` ones included.
    """
    stats = tuple((str(path), st.st_size, st.st_mtime_ns)
                  for path in _fixture_files() for st in (path.stat(),))
    if stats == _CACHED_FROM["stats"] and not read_bytes:
        return
    fingerprint = fixture_fingerprint()
    if fingerprint != _CACHED_FROM["fingerprint"]:
        for value in list(globals().values()):
            if (getattr(value, "__module__", None) == __name__
                    and callable(getattr(value, "cache_clear", None))):
                value.cache_clear()
    _CACHED_FROM.update(stats=stats, fingerprint=fingerprint)


def fixture_cache(function: Callable) -> Callable:
    """``functools.cache`` for state derived from the fixture: it is recomputed after any
    change to a file under ``data/riverton`` (see :func:`_refresh_caches`)."""
    cached = functools.cache(function)

    @functools.wraps(function)
    def run(*args: Any) -> Any:
        _refresh_caches()
        return cached(*args)

    run.cache_clear = cached.cache_clear
    run.cache_info = cached.cache_info
    return run


# --------------------------------------------------------------------------- shared state


@fixture_cache
def _riverton():
    from .fixture import load_riverton

    return load_riverton()


@fixture_cache
def _extended_questions() -> pd.DataFrame:
    from .fixture import load_riverton

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


def _close(value: Any, target: float, tolerance: float) -> bool:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return False
    # The 1e-12 absorbs floating-point error at the edge (1 - 0.995 > 0.005 in floats).
    return not math.isnan(number) and abs(number - target) <= tolerance + 1e-12


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


# ===================================================================== lesson 1


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
    if not _close(oct15["em"], em, 0):
        return hint("EM is 1 when the normalised answer equals *any* normalised variant. "
                    "Normalise each of Q2's variants the way you normalised \"Oct 15\", "
                    "then compare again.")
    if not _close(oct15["f1"], f1, HAND_TOLERANCE):
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
    wrong = [(p, r, k, v) for p, r, k, v in results
             if not _close(v, scoring.token_f1(p, r), TOLERANCE)]
    if not wrong:
        return correct(f"It agrees with the lesson's token_f1 on all {len(results)} probes.")
    over = [(p, r) for p, r, _, v in wrong if _close(v, 0.0, math.inf) and float(v) > 1]
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


# ===================================================================== lesson 2


@fixture_cache
def _dense_retriever():
    from . import dense

    return dense.DenseRetriever.fit(_handbook())


def _all_questions() -> pd.DataFrame:
    return pd.concat([_questions().assign(question_set="original six"),
                      _extended_questions().assign(question_set="extended")],
                     ignore_index=True)


@fixture_cache
def _score_matrices() -> tuple[np.ndarray, np.ndarray]:
    """Dense and tf-idf scores for every question of both sets, in _all_questions order."""
    texts = _all_questions()["question"].tolist()
    return _dense_retriever().score(texts), _tfidf().score(texts)


def _gold_table(scores: np.ndarray, question_set: str, floor: float | None) -> pd.DataFrame:
    everything = _all_questions()
    subset = everything[everything["question_set"] == question_set]
    ranked = retrieval.rank_scores(np.asarray(scores)[subset.index], _tfidf().passage_ids,
                                   subset["question_id"].tolist(), k=None,
                                   min_score=-np.inf if floor is None else floor)
    return retrieval.gold_ranks(ranked, subset)


def _fused(weight: float) -> tuple[np.ndarray, float | None]:
    from . import dense

    dense_scores, tfidf_scores = _score_matrices()
    # Weight 0 is tf-idf alone, which keeps its zero floor (as in lesson 2's sweep).
    return dense.weighted_fusion(dense_scores, tfidf_scores, weight), (0.0 if weight == 0 else None)


@fixture_cache
def _mrr(weight: float, question_set: str) -> float:
    from . import dense

    scores, floor = _fused(weight)
    return dense.retrieval_metrics(_gold_table(scores, question_set, floor))["mrr"]


#: The fewest content words exercise 2.1's question may have.
MIN_CONTENT_WORDS = 3


@exercise("2.1", "A paraphrase of your own", expects="a dict with keys 'passage_id' and "
          "'question'")
def own_paraphrase(paraphrase):
    """Lesson 2, exercise 2.1: a new question that shares no content word with its passage.

    Checks that the question is new, has at least :data:`MIN_CONTENT_WORDS` content
    words, shares none with the passage, and that the dense retriever ranks the passage in
    its top three ("Why tf-idf fails Q3 and ranks Q6's gold second", "A dense retriever").
    """
    _require_keys(paraphrase, "paraphrase", ("passage_id", "question"))
    passage_id, question = paraphrase["passage_id"], paraphrase["question"]
    passages = _passage_texts()
    if not isinstance(passage_id, str) or passage_id not in passages:
        return hint(f"{passage_id!r} is not a handbook passage ID (H01 to H{len(passages):02d}).")
    if not isinstance(question, str) or not question.strip().endswith("?"):
        return hint("'question' must be a question: a string ending with '?'.")
    existing = {q.strip().lower(): qid for qid, q in zip(
        _all_questions()["question_id"], _all_questions()["question"])}
    if question.strip().lower() in existing:
        return hint(f"That is {existing[question.strip().lower()]} from the lesson's "
                    "question sets; write a question of your own.")
    words = text.content_words(question)
    if len(words) < MIN_CONTENT_WORDS:
        return hint(f"Write a real question: at least {MIN_CONTENT_WORDS} content words (not "
                    "stop words).")
    shared = text.shared_content_words(question, passages[passage_id])
    if shared:
        return hint(f"Your question shares {', '.join(repr(w) for w in shared)} with "
                    f"{passage_id}; find other words for the same thing.")
    ranked = _dense_retriever().rank(pd.DataFrame({"question_id": ["mine"],
                                                   "question": [question]}), k=None)
    rank = int(ranked.loc[ranked["passage_id"] == passage_id, "rank"].iloc[0])
    if rank > 3:
        return hint(f"The encoder ranks {passage_id} at {rank}, outside the top three the "
                    "reader sees: word the question closer to what the passage means.")
    return correct(f"Tf-idf cannot retrieve {passage_id} for it (no shared word); the encoder "
                   f"ranks it at {rank}.")


#: The two questions of exercise 2.2: a course code the handbook has, and one it has not.
CODE_QUESTIONS = ("When does DSC-104 meet?", "When does DSC-106 meet?")


@fixture_cache
def _code_tops() -> dict[str, dict[str, str | None]]:
    from . import dense

    probe = pd.DataFrame({"question_id": [f"code{i}" for i in range(len(CODE_QUESTIONS))],
                          "question": list(CODE_QUESTIONS)})
    retrievers = {"tf-idf": _tfidf(), "dense": _dense_retriever(),
                  "hybrid": dense.HybridRetriever(_tfidf(), _dense_retriever())}
    tops: dict[str, dict[str, str | None]] = {}
    for qid, question in zip(probe["question_id"], CODE_QUESTIONS):
        tops[question] = {}
        for name, retriever in retrievers.items():
            ranked = retriever.rank(probe, k=1)
            first = ranked.loc[ranked["question_id"] == qid, "passage_id"]
            tops[question][name] = first.iloc[0] if len(first) else None
    return tops


@exercise("2.2", "Course codes through the encoder's eyes", expects="a dict from each "
          "of the two questions to a dict {'tf-idf': ID, 'dense': ID, 'hybrid': ID}")
def code_lookup(code_tops):
    """Lesson 2, exercise 2.2: each retriever's top passage for two course-code questions.

    One code exists (DSC-104, named in H09), one does not (DSC-106); ``None`` stands for
    "nothing retrieved". Recomputed with the lesson's three retrievers ("A hybrid of the
    two").
    """
    _require_keys(code_tops, "code_tops", CODE_QUESTIONS)
    expected = _code_tops()
    passages = _passage_texts()
    for question in CODE_QUESTIONS:
        given = code_tops[question]
        _require_keys(given, f"code_tops[{question!r}]", ("tf-idf", "dense", "hybrid"))
        for name, top in expected[question].items():
            value = given[name]
            if value is not None and not isinstance(value, str):
                return hint(f"Give each retriever's top passage as an ID string such as "
                            f"'H01', or None; code_tops[{question!r}][{name!r}] is {value!r}.")
            if value == top:
                continue
            if value is not None and value not in passages:
                return hint(f"{value!r} is not a handbook passage ID.")
            if top is None:
                return hint(f"{name} retrieves nothing at all for {question!r}: give None.")
            if value is None:
                return hint(f"{name} does retrieve passages for {question!r}: give the one "
                            "it ranks first.")
            others = [other for other, t in expected[question].items() if other != name and t == value]
            if others and value is not None:
                return hint(f"For {question!r} you give {name} the passage that {others[0]} ranks "
                            f"first; rank the question with the {name} retriever itself.")
            return hint(f"{value!r} is not the passage {name} ranks first for {question!r}. "
                        "Rank the question with k=1 (or read rank 1 of a longer list).")
    return correct()


#: The weights exercise 2.3 sweeps: 0, 0.05, ..., 1.
WEIGHT_GRID = tuple(round(0.05 * i, 2) for i in range(21))


def _weights(value: Any, what: str) -> list[float]:
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        value = [value]
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise AnswerShapeError(f"{what} must be a list of weights from exercises.WEIGHT_GRID")
    try:
        weights = [round(float(v), 2) for v in value]
    except (TypeError, ValueError) as error:
        raise AnswerShapeError(f"{what} must be a list of weights from "
                               "exercises.WEIGHT_GRID") from error
    off_grid = [w for w in weights if w not in WEIGHT_GRID]
    if off_grid:
        raise AnswerShapeError(f"{what} holds {off_grid[0]}, which is not on the grid "
                               "exercises.WEIGHT_GRID")
    return sorted(set(weights))


@exercise("2.3", "Tune the dense weight on six questions", expects="a dict with keys "
          "'best_on_original' (weights), 'extended_mrr_range' (lowest, highest) and "
          "'best_on_extended' (weights)")
def tune_weight(tuning):
    """Lesson 2, exercise 2.3: the hybrid's dense weight tuned on the original six.

    On the grid :data:`WEIGHT_GRID`, checks every weight that maximises MRR on the
    original six, the lowest and highest extended-set MRR among those weights (within
    :data:`TOLERANCE`), and every weight that maximises MRR on the extended set ("A hybrid
    of the two").
    """
    _require_keys(tuning, "tuning", ("best_on_original", "extended_mrr_range", "best_on_extended"))
    original = {w: _mrr(w, "original six") for w in WEIGHT_GRID}
    extended = {w: _mrr(w, "extended") for w in WEIGHT_GRID}

    def best(values: dict[float, float]) -> list[float]:
        top = max(values.values())
        return [w for w, v in values.items() if abs(v - top) < 1e-12]

    best_original, best_extended = best(original), best(extended)
    given = _weights(tuning["best_on_original"], "best_on_original")
    if given != best_original:
        if given == best_extended:
            return hint("Those weights maximise MRR on the extended set. Tune on the original "
                        "six questions only, then look at the extended set.")
        if set(given) < set(best_original):
            return hint("More weights tie at the best MRR on the original six than you "
                        "list: give every one of them.")
        worse = [w for w in given if w not in best_original]
        if worse:
            return hint(f"Weight {worse[0]} does not reach the best MRR on the original six.")
        return hint("List every weight on the grid whose MRR on the original six equals the "
                    "best one.")
    span = tuning["extended_mrr_range"]
    low, high = min(extended[w] for w in best_original), max(extended[w] for w in best_original)
    if not (isinstance(span, (list, tuple)) and len(span) == 2):
        return hint("'extended_mrr_range' is a pair: (lowest, highest).")
    if not (_close(span[0], low, TOLERANCE) and _close(span[1], high, TOLERANCE)):
        return hint("'extended_mrr_range' is the lowest and the highest MRR on the extended "
                    "set among the weights in best_on_original (three decimals).")
    given = _weights(tuning["best_on_extended"], "best_on_extended")
    if given != best_extended:
        if set(given) < set(best_extended):
            return hint("More weights tie at the best MRR on the extended set: list all.")
        return hint("'best_on_extended' lists every weight whose MRR on the extended set is "
                    "the highest.")
    return correct(f"{len(best_original)} of the {len(WEIGHT_GRID)} weights tie on the "
                   f"original six, and between them the extended MRR spans {high - low:.3f}.")


@fixture_cache
def _hybrid_top() -> pd.Series:
    from . import dense

    dense_scores, tfidf_scores = _score_matrices()
    fused = dense.weighted_fusion(dense_scores, tfidf_scores)
    everything = _all_questions()
    return pd.Series(fused.max(axis=1), index=everything["question_id"].tolist())


@exercise("2.4", "A threshold chosen on six questions", expects="a dict with keys 't', "
          "'stopped_with_gold' and 'read_unanswerable'")
def six_question_threshold(threshold):
    """Lesson 2, exercise 2.4: an abstention threshold set on the original six.

    ``t`` must stop every unanswerable question of the six and let every question with a
    gold passage through (read when the hybrid top score is above ``t``); the two lists
    must be what that ``t`` does to the extended set ("Scores of unanswerable
    questions").
    """
    _require_keys(threshold, "threshold", ("t", "stopped_with_gold", "read_unanswerable"))
    t = threshold["t"]
    numeric = (int, float, np.integer, np.floating)
    if isinstance(t, bool) or not isinstance(t, numeric) or math.isnan(t):
        return hint("'t' must be a number.")
    t = float(t)
    top = _hybrid_top()
    everything = _all_questions().set_index("question_id")
    six = everything[everything["question_set"] == "original six"]
    leaking = [q for q in six.index if six.loc[q, "expected_action"] == "abstain" and top[q] > t]
    if leaking:
        return hint(f"With t = {t:g}, {', '.join(leaking)} still reaches the reader: its top "
                    "score is above t. Raise t.")
    lost = [q for q in six.index if pd.notna(six.loc[q, "gold_passage_id"]) and top[q] <= t]
    if lost:
        return hint(f"With t = {t:g}, {', '.join(lost)} would be stopped although it has a "
                    "gold passage. Choose t from the original six so that none is lost.")
    ext = everything[everything["question_set"] == "extended"]
    stopped = [q for q in ext.index if pd.notna(ext.loc[q, "gold_passage_id"]) and top[q] <= t]
    read = [q for q in ext.index if ext.loc[q, "expected_action"] == "abstain" and top[q] > t]
    given_stopped = set(_id_list(threshold["stopped_with_gold"], "stopped_with_gold"))
    given_read = set(_id_list(threshold["read_unanswerable"], "read_unanswerable"))
    if given_stopped == set(read) and given_read == set(stopped) and stopped != read:
        return hint("The two lists are swapped.")
    for name, given, expected, what in (
        ("stopped_with_gold", given_stopped, set(stopped),
         "extended questions with a gold passage (answer or flag premise) whose hybrid top "
         "score is at or below t"),
        ("read_unanswerable", given_read, set(read),
         "extended questions that expect an abstention whose hybrid top score is above t"),
    ):
        if given != expected:
            missed, extra = len(expected - given), len(given - expected)
            detail = "; ".join(part for part in (
                f"it misses {_plural(missed, 'question', 'questions')}" if missed else "",
                f"{_plural(extra, 'question does', 'questions do')} not belong" if extra else "",
            ) if part)
            return hint(f"'{name}' lists the {what}: {detail}.")
    return correct(f"Perfect on the six, this t stops {len(stopped)} extended questions "
                   f"that have a gold passage and lets {len(read)} of "
                   f"{int((ext['expected_action'] == 'abstain').sum())} unanswerable ones through.")


# ===================================================================== lesson 3


def _small_reader():
    from . import reader

    return reader.load_reader(SMOLLM2, mode="live")


def _tokenizer():
    return _small_reader().tokenizer


@fixture_cache
def _lesson3_inputs() -> pd.DataFrame:
    from .reader.lesson import lesson_reader_inputs

    return lesson_reader_inputs().set_index("question_id")


def _constrained():
    # Imported on first use: it loads transformers, which lessons 1 and 2 do not need.
    from . import constrained

    return constrained


def _accepts(ids: Iterable[str], reply: str, pattern: str | None = None) -> bool:
    constrained = _constrained()
    return constrained.grammar_accepts(_tokenizer(), tuple(ids), reply,
                                       answer_pattern=pattern or constrained.ANSWER_PATTERN)


@exercise("3.1", "Parsed, yet outside the grammar", expects="reply, a raw two-line reply "
          "to Q1 as a string")
def parser_not_grammar(reply):
    """Lesson 3, exercise 3.1: a reply to Q1 that the parser accepts and the grammar refuses.

    The reply may cite only H08 (Q1's one retrieved passage) or none, so the reason
    cannot be the probe the lesson already shows ("Force the format with a grammar").
    """
    if not isinstance(reply, str):
        return hint("reply must be a string: a raw reply, two lines.")
    parsed = parsing.parse_reader_output(reply)
    if not parsed.parse_ok:
        return hint(f"The strict parser rejects it: {parsed.problem}.")
    ids = _lesson3_inputs().loc["Q1", "retrieved_ids"]
    if not set(parsed.sources) <= set(ids):
        return hint(f"Cite only {', '.join(ids)} or none: a citation outside the retrieved "
                    "passages is the case the lesson's probes already show.")
    if _accepts(ids, reply):
        return hint("The grammar accepts this reply too. Compare the grammar printed in the "
                    "lesson with the parser's rules (help(parsing)): where is the parser "
                    "more lenient?")
    return correct("The parser takes it and the grammar does not: the grammar is the "
                   "stricter of the two.")


def _largest_limits() -> dict[str, int]:
    """Per question, the largest answer limit whose longest reply fits in the token cap."""
    constrained = _constrained()
    from .reader import MAX_NEW_TOKENS

    tokenizer = _tokenizer()
    limits = {}
    for qid, row in _lesson3_inputs().iterrows():
        n = 1
        while constrained.reply_token_bound(tokenizer, row["retrieved_ids"],
                                            answer_max_tokens=n + 1) <= MAX_NEW_TOKENS:
            n += 1
        limits[qid] = n
    return limits


@exercise("3.2", "How long may an answer be?", expects="a dict with keys "
          "'answer_max_tokens' (an integer) and 'deciding' (question IDs)")
def answer_limit(limit):
    """Lesson 3, exercise 3.2: the largest answer limit that keeps all six replies in the cap.

    Recomputed with :func:`helpers.constrained.reply_token_bound` for each question's
    retrieved IDs; ``deciding`` lists the questions whose longest reply then reaches the
    cap ("Force the format with a grammar").
    """
    constrained = _constrained()
    from .reader import MAX_NEW_TOKENS

    _require_keys(limit, "limit", ("answer_max_tokens", "deciding"))
    value = limit["answer_max_tokens"]
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        return hint("'answer_max_tokens' is a whole number of tokens.")
    per_question = _largest_limits()
    best = min(per_question.values())
    deciding = sorted(q for q, n in per_question.items() if n == best)
    if value != best:
        if value == constrained.ANSWER_MAX_TOKENS:
            return hint(f"{value} is the lesson's limit, chosen with room to spare; find the "
                        "largest that still fits.")
        if value > best:
            over = [q for q, n in per_question.items() if n < value]
            loosest = [q for q, n in per_question.items() if n == value]
            if loosest:
                return hint(f"{value} keeps the longest reply of {', '.join(loosest)} inside "
                            "the cap, but not every question's. Which question allows the "
                            "longest Sources line?")
            return hint(f"At {value} the longest reply of {_plural(len(over), 'question', 'questions')} "
                        f"would run past the cap of {MAX_NEW_TOKENS} tokens.")
        return hint(f"At {value} every reply fits with room to spare: the largest limit "
                    "that still fits is higher. Raise it until one more token would break "
                    "the cap.")
    given = sorted(set(_id_list(limit["deciding"], "deciding")))
    if given != deciding:
        return hint("'deciding' lists the questions that set the limit: every question "
                    "whose longest reply would run past the cap at one token more.")
    return correct()


# Answers to try under a grammar, and the citation lists it allows, to find which screen
# checks a reply the grammar admits can still fail.
_TRIAL_ANSWERS = ("No", "NOT IN HANDBOOK", "PREMISE NOT SUPPORTED: it is", "It takes 5 weeks")


@fixture_cache
def _open_checks(ids: tuple[str, ...]) -> frozenset[str]:
    """Screen checks that some reply admitted by the grammar for ``ids`` fails."""
    constrained = _constrained()
    passages = _passage_texts()
    failing: set[str] = set()
    for answer in _TRIAL_ANSWERS:
        for sources in constrained.source_lists(ids):
            reply = f"Answer: {answer}\nSources: {sources}"
            if not _accepts(ids, reply):
                continue
            parsed = parsing.parse_reader_output(reply)
            values = screen.screen_reply(parsed.answer, parsed.sources, parsed.parse_ok,
                                         parsed.action, ids, passages)
            failing |= {c for c in screen.CHECKS if not values[c]}
    return frozenset(failing)


@exercise("3.3", "What the grammar leaves open", expects="a dict from screen check names "
          "to raw replies to Q4")
def grammar_leaves_open(open_checks):
    """Lesson 3, exercise 3.3: for each screen check the grammar cannot guarantee, a reply.

    Each reply must be admitted by Q4's grammar and fail its check; the set of checks must
    be exactly those some admitted reply can fail ("Parsed is not the same as right").
    """
    if not isinstance(open_checks, Mapping):
        return hint("open_checks must be a dict: {check name: reply}.")
    ids = tuple(_lesson3_inputs().loc["Q4", "retrieved_ids"])
    unknown = [name for name in open_checks if name not in screen.CHECKS]
    if unknown:
        return hint(f"{unknown[0]!r} is not a screen check; they are {', '.join(screen.CHECKS)}.")
    passages = _passage_texts()
    truly_open = _open_checks(ids)
    for name, reply in open_checks.items():
        if not isinstance(reply, str):
            return hint(f"The reply for {name} must be a string.")
        if not _accepts(ids, reply):
            if name not in truly_open:
                return hint(f"The grammar rejects your reply for {name}. Can any reply the "
                            f"grammar admits fail {name}?")
            return hint(f"The grammar rejects your reply for {name}: it must be one the "
                        f"grammar admits (two lines, citing only {', '.join(ids)} or none).")
        parsed = parsing.parse_reader_output(reply)
        values = screen.screen_reply(parsed.answer, parsed.sources, parsed.parse_ok,
                                     parsed.action, ids, passages)
        if values[name]:
            return hint(f"Your reply for {name} passes that check; it must fail it.")
    missing = truly_open - set(open_checks)
    if missing:
        return hint(f"There {'is' if len(missing) == 1 else 'are'} "
                    f"{_plural(len(missing), 'more check', 'more checks')} that a reply the "
                    "grammar admits can still fail.")
    guaranteed = [c for c in screen.CHECKS if c not in truly_open]
    return correct(f"The grammar guarantees only {', '.join(guaranteed)}; the other checks "
                   "still have to run.")


# (reply to Q5, whether a digit grammar must admit it, what is wrong if it decides otherwise)
_DIGIT_PROBES = (
    ("Answer: 5\nSources: none", True, "a one-digit answer"),
    ("Answer: Parking costs $3 a day.\nSources: H01", True, "an answer with a figure inside"),
    ("Answer: Room 104\nSources: H03", True, "an answer that ends with its figure"),
    ("Answer: NOT IN HANDBOOK\nSources: none", False, "an answer with no digit"),
    ("Answer: Parking is free.\nSources: H01", False, "an answer with no digit"),
    ("Answer:  5 dollars\nSources: none", False, "an answer that starts with a space"),
    ("Answer: Parking\n5\nSources: none", False, "an answer that runs onto a second line"),
)


def _digit_pattern_problem(pattern: Any) -> str | None:
    """Why ``pattern`` is not a digit-demanding answer rule for Q5, or None."""
    constrained = _constrained()
    if not isinstance(pattern, str):
        return "digit_answer must be a string: a Lark regular expression between slashes."
    ids = tuple(_lesson3_inputs().loc["Q5", "retrieved_ids"])
    try:
        constrained.build_grammar(ids, answer_pattern=pattern)
        results = [(probe, must, what, _accepts(ids, probe, pattern))
                   for probe, must, what in _DIGIT_PROBES]
    except (ValueError, constrained.ConstrainedDecodingError) as error:
        return f"The grammar cannot be built with digit_answer: {error}"
    for probe, must, what, accepted in results:
        if accepted != must:
            verb = "rejects" if must else "admits"
            return (f"Your pattern {verb} {what}: {parsing.show_line_breaks(probe)!r}. It must "
                    "admit every one-line answer that starts with a visible character and "
                    "holds a digit, and nothing else.")
    return None


@exercise("3.4", "Demand a figure", expects="digit_answer (a pattern), q5_reply (a string) "
          "and q5_invented (a list of figures)")
def demand_a_figure(digit_answer, q5_reply, q5_invented):
    """Lesson 3, exercise 3.4: an answer rule that demands a digit, run live on Q5.

    Checks the pattern on probe replies, regenerates SmolLM2's reply to Q5 under it (one
    greedy generation) and compares, and recomputes the reply's invented figures: digit
    runs in no retrieved passage and not in the question ("Parsed is not the same as
    right").
    """
    constrained = _constrained()
    problem = _digit_pattern_problem(digit_answer)
    if problem:
        return hint(problem)
    if not isinstance(q5_reply, str):
        return hint("q5_reply is the raw_output string of SmolLM2's constrained reply to Q5.")
    row = _lesson3_inputs().loc["Q5"]
    generated = constrained.generate_constrained(_small_reader(), row["messages"],
                                                 row["retrieved_ids"], "Q5",
                                                 answer_pattern=digit_answer)
    if q5_reply != generated.raw_output:
        return hint("That is not what SmolLM2 writes for Q5 under your pattern: generate it "
                    "with constrained.generate_constrained(..., answer_pattern=digit_answer) "
                    "and pass its raw_output.")
    parsed = parsing.parse_reader_output(q5_reply)
    passages = _passage_texts()
    given = set(screen.numbers_in(" ".join(passages[p] for p in row["retrieved_ids"])))
    given |= set(screen.numbers_in(_question_texts()["Q5"]))
    invented = [n for n in screen.numbers_in(parsed.answer) if n not in given]
    if not (isinstance(q5_invented, (list, tuple))
            and sorted(map(str, q5_invented)) == sorted(invented)):
        return hint("q5_invented lists the figures (digit runs, as screen.numbers_in finds "
                    "them) in the answer that appear in no retrieved passage and not in the "
                    "question.")
    return correct(f"The reply's action is {parsed.action!r}. The reply Q5 calls for, NOT IN "
                   "HANDBOOK, has no digit, so this grammar forbids it.")


@exercise("3.5", "Is a digit guaranteed?", expects="digit_answer (your pattern from 3.4) "
          "and loophole (a raw reply to Q5)")
def digit_loophole(digit_answer, loophole):
    """Lesson 3, exercise 3.5: a reply with no digit that the digit grammar still admits.

    The reply must parse, hold no digit in its answer, and be admitted by the grammar
    built with the student's pattern for Q5 ("Force the format with a grammar").
    """
    problem = _digit_pattern_problem(digit_answer)
    if problem:
        return hint("Finish exercise 3.4 first. " + problem)
    if not isinstance(loophole, str):
        return hint("loophole must be a string: a raw reply, two lines.")
    parsed = parsing.parse_reader_output(loophole)
    if not parsed.parse_ok:
        return hint(f"The strict parser rejects it: {parsed.problem}.")
    if any(ch.isdigit() for ch in parsed.answer):
        return hint("Your reply's answer holds a digit; find one without any that the "
                    "grammar still admits.")
    ids = tuple(_lesson3_inputs().loc["Q5", "retrieved_ids"])
    if not _accepts(ids, loophole, digit_answer):
        return hint("Your grammar rejects it, as the pattern says it should. Read the whole "
                    "answer rule of the grammar: is there anything besides the pattern that "
                    "can end the answer?")
    return correct("The answer rule's token limit ends the answer whether or not the "
                   "pattern is complete, so the digit is guaranteed only in answers shorter "
                   "than the limit.")


# ===================================================================== lesson 4


def _review_module():
    # Imported on first use, like the lesson's other helpers.
    from . import review

    return review


@functools.cache
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


def _number(value: Any, name: str) -> float:
    if isinstance(value, bool) or value is None:
        raise AnswerShapeError(f"{name} must be a number")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise AnswerShapeError(f"{name} must be a number, not {value!r}") from None
    if math.isnan(number):
        raise AnswerShapeError(f"{name} is NaN")
    return number


@exercise("4.1", "Kappa by hand", expects="a dict with keys 'p_o', 'p_e' and 'kappa'")
def kappa_by_hand(screen_kappa):
    """Lesson 4, exercise 4.1: Cohen's kappa of the screen, from its 2x2 counts, by hand.

    Checks the observed agreement ``p_o``, the chance agreement ``p_e`` and kappa, each
    within :data:`HAND_TOLERANCE` of :func:`helpers.agreement.cohen_kappa` on the replies
    with a yes-or-no verdict ("The screen against the review").
    """
    from . import agreement

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
    from . import agreement

    _require_keys(hold_all, "hold_all", ("recall", "precision", "kappa"))
    _, unsupported = _screen_lists()
    flagged = [True] * len(unsupported)
    counts = agreement.confusion(flagged, unsupported)
    kappa = agreement.cohen_kappa(flagged, unsupported)
    expected_recall = agreement.recall(counts).value
    expected_precision = agreement.precision(counts).value
    if not _close(hold_all["recall"], expected_recall, HAND_TOLERANCE):
        return hint("Recall is the share of unsupported replies the screen holds; this screen "
                    "holds every reply.")
    if not _close(hold_all["precision"], expected_precision, HAND_TOLERANCE):
        if _close(hold_all["precision"], 1, HAND_TOLERANCE):
            return hint("Precision is the share of held replies that the review rejects, and "
                        "this screen holds the supported replies too.")
        return hint("Precision is the share of held replies that the review rejects: "
                    "unsupported replies over all the replies it holds.")
    if hold_all["kappa"] is None or isinstance(hold_all["kappa"], str):
        return hint("Kappa is defined here: only the screen gives a single label to "
                    "everything, so chance agreement is not 1. Work out p_o and p_e.")
    if not _close(hold_all["kappa"], kappa.value, HAND_TOLERANCE):
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
    from . import agreement

    _require_keys(doubled, "doubled", ("kappa", "interval"))
    held, unsupported = _screen_lists()
    kappa = agreement.cohen_kappa(held, unsupported).value
    settings = {"resamples": agreement.BOOTSTRAP_RESAMPLES, "seed": agreement.BOOTSTRAP_SEED}
    original = agreement.bootstrap_kappa(held, unsupported, **settings)
    appended = agreement.bootstrap_kappa(held * 2, unsupported * 2, **settings)
    repeated = agreement.bootstrap_kappa(list(np.repeat(held, 2)), list(np.repeat(unsupported, 2)),
                                         **settings)
    if not _close(doubled["kappa"], kappa, TOLERANCE):
        return hint("Doubling every row changes none of the shares that p_o and p_e are "
                    "made of.")
    interval = doubled["interval"]
    if not (isinstance(interval, (list, tuple)) and len(interval) == 2):
        return hint("'interval' is a pair: (low, high).")

    def matches(result) -> bool:
        return _close(interval[0], result.low, TOLERANCE) and _close(interval[1], result.high, TOLERANCE)

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


# ===================================================================== lesson 5


@functools.cache
def _attack_fixture():
    from .fixture import load_attack_fixture

    riverton = _riverton()
    return load_attack_fixture(handbook=riverton.handbook, metadata=riverton.metadata)


@functools.cache
def _attack_inputs() -> dict[tuple[str, str], Any]:
    """Lesson 5's retrieval for every attack, without and under it, by (attack, condition)."""
    from . import attacks

    fixture = _attack_fixture()
    frame = attacks.attack_reader_inputs(fixture.questions, _handbook(), fixture.passages)
    return {(row.attack_id, row.condition): row for row in frame.itertuples(index=False)}


@functools.cache
def _handbook_index() -> pd.DataFrame:
    """Lesson 5's index of lesson 1's questions: the handbook alone, every row trusted."""
    from . import attacks

    return attacks.attack_index(_handbook(), _attack_fixture().passages, ())


def _routed(question: str, topics, terms=None, routed_topics=None) -> bool:
    from . import defences

    return defences.route_question(
        question, topics, defences.QUESTION_TERMS if terms is None else terms,
        defences.ROUTED_TOPICS if routed_topics is None else routed_topics).to_person


def _route_cases() -> list[tuple[str, str, list]]:
    """(name, question, trusted retrieved topics) for lesson 5's routed questions: lesson
    1's six, then every attack question with and without its attack."""
    from . import defences

    retrieved = _retrieved_ids()
    cases = [(qid, question, defences.trusted_topics(retrieved[qid], _handbook_index()))
             for qid, question in _question_texts().items()]
    for (attack_id, condition), row in _attack_inputs().items():
        cases.append((f"{attack_id} ({condition})", row.question,
                      defences.trusted_topics(row.retrieved_ids, row.index_passages)))
    return cases


def _child_care_passage() -> str:
    """The handbook passage A06's question retrieves first without its attack (H13)."""
    from . import attacks

    return _attack_inputs()[("A06", attacks.WITHOUT_ATTACK)].retrieved_ids[0]


def _child_care_topic() -> str:
    return _handbook().set_index("passage_id").at[_child_care_passage(), "topic"]


def _about_child_care(name: str) -> bool:
    """Whether a routed question asks about child care: its gold passage, or for an attack
    question a retrieved passage, is the child-care passage."""
    passage = _child_care_passage()
    if name in _question_texts():
        return _questions().set_index("question_id").at[name, "gold_passage_id"] == passage
    attack_id, _, condition = name.partition(" (")
    row = _attack_inputs()[(attack_id, condition.rstrip(")"))]
    return passage in row.retrieved_ids


def _unheld_controls(attack_id: str) -> list[str]:
    """The author controls of ``attack_id`` that no code defence holds."""
    return [control_id for control_id, verdict in _control_verdicts().items()
            if control_id.startswith(f"{attack_id}-") and not verdict["held_by_any"]]


def _term_mapping(value: Any, name: str) -> dict[str, frozenset[str]]:
    if not isinstance(value, Mapping):
        raise AnswerShapeError(f"{name} must be a dict: {{category: a set of words}}")
    out = {}
    for category, words in value.items():
        if isinstance(words, str):
            raise AnswerShapeError(f"{name}[{category!r}] must be a set of words, not one string")
        if not isinstance(words, Iterable) or not all(isinstance(w, str) for w in words):
            raise AnswerShapeError(f"{name}[{category!r}] must be a set of words")
        out[str(category)] = frozenset(words)
    return out


@exercise("5.1", "Route child care to a person", expects="my_topics (a dict from handbook "
          "topic to category), my_terms (a dict from category to a set of words) and "
          "also_routed (a list of lesson 1 question IDs)")
def route_child_care(my_topics, my_terms, also_routed):
    """Lesson 5, exercise 5.1: a routing rule extended so that A06 goes to a person.

    The student's topics and words must keep every topic and word of the lesson's rule;
    passed to :func:`helpers.defences.route_question`, they must send A06 to a person
    with and without its attack and add no question that is not about child care, and
    ``also_routed`` must list the lesson 1 questions the new rule adds ("Routing decided
    before the reader runs").
    """
    if not isinstance(my_topics, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in my_topics.items()):
        return hint("my_topics must be a dict from a handbook topic to a category name, like "
                    "defences.ROUTED_TOPICS.")
    terms = _term_mapping(my_terms, "my_terms")
    unmatchable = sorted(w for words in terms.values() for w in words
                         if " ".join(text.tokenize(w)) != w)
    if unmatchable:
        return hint(f"{unmatchable[0]!r} can never match: the rule compares the question's "
                    "tokens as text.tokenize gives them (lower case, no punctuation), so "
                    "write each word, or each phrase of words, the same way.")
    from . import defences

    dropped = sorted(topic for topic, category in defences.ROUTED_TOPICS.items()
                     if my_topics.get(topic) != category)
    dropped += sorted(f"{category}: {word}" for category, words in defences.QUESTION_TERMS.items()
                      for word in words if word not in terms.get(category, ()))
    if dropped:
        return hint(f"Your rule leaves out {dropped[0]!r} of the lesson's rule: keep every "
                    "topic and word (start from defences.ROUTED_TOPICS and "
                    "defences.QUESTION_TERMS) and add to them.")
    cases = _route_cases()
    before = {name: _routed(question, topics) for name, question, topics in cases}
    after = {name: _routed(question, topics, terms, my_topics) for name, question, topics in cases}
    a06 = [name for name in after if name.startswith("A06") and not after[name]]
    if a06:
        return hint(f"{a06[0]} still goes to the reader. Which handbook passage does it "
                    "retrieve, and which topic does that passage carry?")
    added = [name for name in after if after[name] and not before[name]]
    stray = [name for name in added if not _about_child_care(name)]
    if stray:
        return hint(f"Your rule also sends {stray[0]} to a person, and it is not about child "
                    "care: route the new kind of question, not more.")
    expected = sorted(q for q in _question_texts() if after[q] and not before[q])
    given = sorted(set(_id_list(also_routed, "also_routed")))
    unknown = [q for q in given if q not in _question_texts()]
    if unknown:
        ids = list(_question_texts())
        return hint(f"{unknown[0]!r} is not one of lesson 1's {len(ids)} questions "
                    f"({ids[0]} to {ids[-1]}).")
    already = [q for q in given if before[q]]
    if already:
        return hint(f"{already[0]} went to a person already; list only the questions your "
                    "rule adds.")
    if given != expected:
        if set(given) - set(expected):
            extra = sorted(set(given) - set(expected))[0]
            return hint(f"{extra} still goes to the reader under your rule: look at what it "
                        "asks and what it retrieves.")
        missing = len(expected) - len(given)
        return hint(f"Your rule sends {missing} more of lesson 1's {len(_question_texts())} "
                    "questions to a person than you list.")
    controls = _unheld_controls("A06")
    held_now = (f"the author control{'s' if len(controls) != 1 else ''} "
                f"{', '.join(controls)}, which got past every defence, "
                f"{'is' if len(controls) == 1 else 'are'} now held by routing"
                if controls else "every A06 reply is now routed")
    if expected:
        return correct(f"A06 is routed, and so is {', '.join(expected)}, which asks about "
                       f"child care in other words: {held_now}.")
    passage = _child_care_passage()
    retrieved = _retrieved_ids()
    missed = [q for q in _question_texts() if _about_child_care(q) and not after[q]]
    if not missed:
        return correct(f"A06 is routed: {held_now}.")
    what = ", ".join(f"{q} (which retrieves {', '.join(retrieved[q]) or 'nothing'})"
                     for q in missed)
    return correct(f"A06 is routed: {held_now}. But {what} asks about child care in other "
                   f"words, and {passage}'s topic is only seen when {passage} is retrieved: "
                   "routing by topic is only as good as retrieval, and words in the "
                   "question are the other half of the rule.")


#: The passage ID exercise 5.2's planted passage gets.
PLANTED_ID = "P05"


@exercise("5.2", "A planted figure the screen passes", expects="planted_text (the text of "
          "planted passage P05) and reply (a raw reply to A06's question)")
def planted_figure(planted_text, reply):
    """Lesson 5, exercise 5.2: a planted passage, and a reply citing it that the screen passes.

    P05 joins the handbook in an index of its own; tf-idf is fitted on it and A06's
    question retrieves its top three. The reply must parse, answer, cite P05, state a
    figure that no handbook passage holds and pass all six checks, and provenance must
    hold it (:func:`helpers.defences.defence_verdicts`) ("Every defence on every reply").
    """
    from . import attacks, defences

    if not isinstance(planted_text, str) or not planted_text.strip():
        return hint("planted_text must be the text of your planted passage, a string.")
    if not isinstance(reply, str):
        return hint("reply must be a string: a raw reply, two lines.")
    mine = pd.DataFrame([{"passage_id": PLANTED_ID, "topic": _child_care_topic(),
                          "text": planted_text, "source": "exercise 5.2",
                          "provenance": "planted"}])
    index = attacks.attack_index(_handbook(), mine)
    question = _attack_fixture().questions.set_index("attack_id").at["A06", "question"]
    ranked = retrieval.TfidfRetriever.fit(index).rank(
        pd.DataFrame({"question_id": ["A06"], "question": [question]}), k=3)
    retrieved = tuple(ranked.sort_values("rank")["passage_id"])
    parsed = parsing.parse_reader_output(reply)
    if not parsed.parse_ok:
        return hint(f"The strict parser rejects reply: {parsed.problem}.")
    if parsed.action != "answer":
        return hint("reply must be an answer, not an abstention or a premise flag.")
    if PLANTED_ID not in parsed.sources:
        return hint(f"Cite your planted passage, {PLANTED_ID}: the exercise is about a reply "
                    "that agrees with what it cites.")
    if PLANTED_ID not in retrieved:
        return hint(f"{PLANTED_ID} is not among the three passages retrieved for A06's "
                    f"question ({', '.join(retrieved)}), so the reader would never see it. "
                    "Write it with the question's own words.")
    handbook_figures = set(screen.numbers_in(" ".join(_handbook()["text"])))
    figures = screen.numbers_in(parsed.answer)
    if not figures:
        return hint("State a figure in the answer: the exercise is about what the check on "
                    "figures can see.")
    if set(figures) <= handbook_figures:
        return hint("Every figure in your answer appears in the handbook; state one that no "
                    "handbook passage holds, as an attacker would.")
    verdict = defences.verdicts_for_reply(reply, question, retrieved, index)
    if verdict["held_by_screen"]:
        return hint(f"The screen holds it ({verdict['screen_failed_checks']}): every figure "
                    "in the answer must appear in a passage it cites, and it may cite only "
                    "retrieved passages.")
    assert verdict["held_by_provenance"]
    routed = ("Routing holds it as well." if verdict["routed_to_person"] else
              f"Routing does not: {_child_care_topic()} is not a routed topic.")
    contradiction = (f"The contradiction check holds it too ({verdict['conflicts']}), but "
                     "only because your passage carries the handbook's topic."
                     if verdict["held_by_contradiction"] else
                     "The contradiction check does not: no retrieved handbook passage on "
                     "its topic states other figures.")
    return correct(f"The screen passes it: {PLANTED_ID} exists, was retrieved and holds the "
                   f"figure. Provenance holds it, because {PLANTED_ID} did not come from the "
                   f"fingerprinted handbook. {contradiction} {routed}")


@functools.cache
def _control_verdicts() -> dict[str, dict]:
    """What each code defence does with each of lesson 5's author controls."""
    from . import attacks, defences

    verdicts = {}
    for control in attacks.control_replies().itertuples(index=False):
        row = _attack_inputs()[(control.attack_id, attacks.UNDER_ATTACK)]
        verdicts[control.control_id] = defences.verdicts_for_reply(
            control.raw_output, row.question, row.retrieved_ids, row.index_passages)
    return verdicts


@exercise("5.3", "The defence that stood alone", expects="reached_caller (a list of control "
          "IDs) and sole_holder (a dict from control ID to defence name)")
def sole_defence(reached_caller, sole_holder):
    """Lesson 5, exercise 5.3: which author controls no defence holds, and which one holds.

    Recomputed with :func:`helpers.defences.defence_verdicts` on every control:
    ``reached_caller`` lists the controls no code defence holds; ``sole_holder`` maps
    each control held by exactly one defence to that defence's name in
    :data:`helpers.defences.DEFENCES` ("Attack by defence").
    """
    from . import defences

    verdicts = _control_verdicts()
    names = dict(defences.DEFENCES)
    holders = {cid: [names[column] for column in names if v[column]] for cid, v in verdicts.items()}
    given = _id_list(reached_caller, "reached_caller")
    unknown = [c for c in given if c not in verdicts]
    if unknown:
        return hint(f"{unknown[0]!r} is not a control ID; they are in the controls table "
                    "(attacks.control_replies()).")
    held = [c for c in given if holders[c]]
    if held:
        return hint(f"At least one defence holds {held[0]}; look at its row in the table of "
                    "every defence on every reply.")
    if set(c for c, h in holders.items() if not h) - set(given):
        return hint("Another control reaches the caller too.")
    if not isinstance(sole_holder, Mapping):
        return hint("sole_holder must be a dict: {control ID: defence name}.")
    for cid, name in sole_holder.items():
        if cid not in verdicts:
            return hint(f"{cid!r} is not a control ID.")
        if name not in names.values():
            return hint(f"{name!r} is not a defence name; use one of "
                        f"{', '.join(map(repr, names.values()))}.")
        if not holders[cid]:
            return hint(f"No defence holds {cid}, so none holds it alone.")
        if len(holders[cid]) > 1:
            return hint(f"More than one defence holds {cid}: list only the controls that "
                        "exactly one defence holds.")
        if holders[cid] != [name]:
            return hint(f"{cid} is held by one defence, but not by {name}.")
    alone = {c for c, h in holders.items() if len(h) == 1}
    if alone - set(sole_holder):
        return hint(f"{_plural(len(alone - set(sole_holder)), 'more control is', 'more controls are')} "
                    "held by exactly one defence.")
    routing_alone = sorted(c for c in alone if holders[c] == ["routing"])
    return correct("Take away the defence named for a control and that reply reaches the "
                   "caller. " + (f"Routing alone holds {', '.join(routing_alone)}: it was "
                                 "decided before the reader ran, so no reply could argue "
                                 "with it." if routing_alone else ""))
