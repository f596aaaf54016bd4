"""Find a lesson's exercises in its notebook, in the layout exercises describes.

Each exercise is four consecutive cells: a markdown task that starts ``### Exercise N.M:
Title``, a starter code cell, a check code cell, and a markdown solution cell: an HTML
``<details class="solution">`` block titled ``<summary>Solution to exercise N.M</summary>``
that holds one or more ```` ```python ```` blocks. Between the task and the
starter there may be one note: a code cell that starts ``#| echo: false`` and prints the
part of the task that quotes the check's figures (its tolerance, say). A notebook that
breaks the layout raises an AssertionError naming the notebook, the cell and what is
wrong.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from runtime.paths import LESSONS_DIR

HEADING = re.compile(r"^### Exercise (\d+\.\d+): (.+)$", re.M)
FENCE_OPEN = re.compile(
    r'\A<details class="solution">\n<summary>Solution to exercise (\d+\.\d+)</summary>\n\n')
FENCE_CLOSE = re.compile(r"\n\n</details>\Z")
CODE_BLOCK = re.compile(r"^```python\n(.*?)^```[ \t]*$", re.M | re.S)
NOTE_OPTION = "#| echo: false"
CHECK_CALL = re.compile(r'\Aexercises\.check\("(\d+\.\d+)"(?:, [A-Za-z_][A-Za-z0-9_]*)+\)\Z')


@dataclass
class ExerciseCells:
    key: str
    title: str
    task_index: int  # index of the task cell in nb.cells
    task: str
    note: str | None  # the computed part of the task, if the exercise has one
    starter: str
    check: str
    solution_metadata: dict
    solution_markdown: str
    solution_code: str  # the python blocks of the solution, joined
    solution_index: int  # index of the solution cell in nb.cells


def exercise_cells(nb, name: str = "notebook") -> list[ExerciseCells]:
    """Every exercise of ``nb``, in order (an empty list when it has none)."""
    found = []
    for index, cell in enumerate(nb.cells):
        match = HEADING.search(cell.source) if cell.cell_type == "markdown" else None
        if match is None:
            continue
        key, where = match.group(1), f"{name}: exercise {match.group(1)} (cell {index + 1})"
        start, note = index + 1, None
        if (start < len(nb.cells) and nb.cells[start].cell_type == "code"
                and nb.cells[start].source.startswith(NOTE_OPTION + "\n")):
            note, start = nb.cells[start].source, start + 1
        following = nb.cells[start:start + 3]
        assert [c.cell_type for c in following] == ["code", "code", "markdown"], (
            f"{where}: the task (and its note) must be followed by a starter cell, a check "
            f"cell and a solution cell; found {[c.cell_type for c in following]}")
        starter, check_cell, solution = following
        fence = FENCE_OPEN.match(solution.source)
        assert fence is not None, (
            f'{where}: the solution cell must open with <details class="solution">, '
            f"<summary>Solution to exercise {key}</summary> and a blank line")
        assert fence.group(1) == key, f"{where}: the solution is titled for exercise {fence.group(1)}"
        assert FENCE_CLOSE.search(solution.source), f"{where}: the solution must end with a blank line and </details>"
        blocks = CODE_BLOCK.findall(solution.source)
        assert blocks, f"{where}: the solution has no ```python block"
        found.append(ExerciseCells(
            key, match.group(2).strip(), index, cell.source, note, starter.source,
            check_cell.source.strip(), dict(solution.metadata), solution.source,
            "\n".join(block.rstrip("\n") for block in blocks) + "\n", start + 2))
    return found


def check_key(check_source: str) -> str | None:
    """The exercise key a check cell's single call names, or None if it is not one."""
    match = CHECK_CALL.match(check_source.strip())
    return match.group(1) if match else None


def section_index(nb, heading: str) -> int | None:
    """Index of the markdown cell that has ``heading`` as one of its lines."""
    return next((index for index, cell in enumerate(nb.cells) if cell.cell_type == "markdown"
                 and heading in cell.source.splitlines()), None)


#: Lessons with exercises, by number. Their slow tests run the session's execution of each
#: lesson (tests/book_session.py): lesson 1 replays the transcript, and lesson 4 finds no
#: student review, so a review of your own in data/reviews cannot change them.
LESSONS = {int(path.name[:2]): path.name for path in sorted(LESSONS_DIR.glob("0*.ipynb"))}
