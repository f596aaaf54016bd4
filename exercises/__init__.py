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
4. a markdown solution cell: HTML ``<details class="solution">``, on the next line
   ``<summary>Solution to exercise N.M</summary>``, a blank line, prose and one or more
   ```` ```python ```` blocks, a blank line, then ``</details>``. Every Jupyter front end
   shows it closed until the student clicks its title, also after "Run All" (which
   renders markdown cells and would unfold a cell that is only collapsed); on the
   website ``solutions.lua`` makes it a collapsed callout. Its code is never executed
   when the book renders; the tests run it, after the lesson's own cells, through the
   checker.

The package holds the marking framework (:mod:`exercises.framework`: verdicts,
the registry, the validators and the caches) and one module of checkers per lesson
(:mod:`exercises.lesson1` ... :mod:`exercises.lesson5`); everything a
notebook uses (:func:`check`, the tolerances, the probes and grids its tasks quote) is
importable from here.

Adding exercises to a lesson (lesson 4, say) is a mechanical step:

1. in ``lesson4.py``, one checker per exercise, decorated with ``@exercise("4.1",
   "Title", expects="...")``; its docstring must start ``Lesson 4, exercise 4.1:`` (the
   decorator refuses anything else) and it returns :func:`correct` or :func:`hint`, or
   lets :func:`~exercises.framework._first_hint` (a table of known mistakes and
   their hints), ``_figure``, ``_known`` or ``_reply`` end the check with a hint. It
   reads the answer with the framework's validators (``_require_keys``, ``_id_list``,
   ``_number``, ``_pair``), or raises :class:`AnswerShapeError` itself, so that a
   malformed answer (a string where a number belongs, say) becomes a hint, and it caches
   what it derives from the fixture with :func:`fixture_cache`, never with a plain
   ``functools.cache``;
2. in the notebook, the four cells above for each exercise, and ``exercises`` added to
   the "Set up" cell's imports;
3. in the tests, the lesson in ``LESSONS`` (tests/exercise_cells.py) and at least one
   deliberately wrong answer per exercise in ``WRONG_ANSWERS`` (tests/test_exercises.py)
   with a piece of the hint it must produce. The tests then check the layout, that the
   starter cells leave every exercise "not attempted yet" in a clean run, that every
   solution is marked correct and every wrong answer gets its hint.
"""

from . import lesson1, lesson2, lesson3, lesson4, lesson5  # noqa: E402 - they register the checkers
from .framework import (CORRECT, DECIMALS, EXERCISES, EXTENDED_FILE, FIXTURE_CACHES, HAND_DECIMALS,
                        HAND_TOLERANCE, HINT, NOT_ATTEMPTED, TOLERANCE, VERDICT_MIME,
                        AnswerShapeError, Exercise, Verdict, check, correct, exercise,
                        fixture_cache, fixture_fingerprint, hint, lesson_exercises, not_attempted)
from .lesson1 import F1_PROBES
from .lesson2 import CODE_QUESTIONS, MIN_CONTENT_WORDS, WEIGHT_GRID
from .lesson5 import PLANTED_ID

__all__ = sorted(name for name in dir() if not name.startswith("_"))
