"""Dollar signs in the lessons' prose: written so that no renderer takes them for maths.

JupyterLab typesets the text between two ``$`` of a markdown cell as mathematics, and an
escaped ``\\$`` does not stop it (its markdown renderer turns ``\\$`` into ``$`` before
MathJax reads the page). So prose that shows money writes each dollar sign as ``\\$``
(a literal dollar for Quarto and for the build without it) inside a
``<div class="mathjax_ignore tex2jax_ignore">`` block, whose blank lines keep the text
inside it markdown; MathJax leaves that block alone. That is the rule
:class:`helpers.display.Markdown` follows for computed prose. Code spans and code blocks
are never typeset and need nothing. A cell meant to hold mathematics carries the tag
``maths`` and is not checked. tests/test_jupyterlab.py checks the same in JupyterLab.
"""
from __future__ import annotations

import re

import nbformat
import pytest

from helpers.display import NO_MATH_CLASSES
from helpers.paths import LESSONS_DIR

NO_MATH_OPEN = f'<div class="{NO_MATH_CLASSES}">'
MATHS_TAG = "maths"
LESSON_FILES = sorted(LESSONS_DIR.glob("[0-9][0-9]-*.ipynb"))


def dollar_problems(source: str) -> list[str]:
    """Each dollar sign of ``source`` (markdown) that some renderer would take for maths."""
    problems = []
    in_code = in_block = False
    for number, line in enumerate(source.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            in_code = not in_code
            continue
        if in_code:
            continue
        if stripped == NO_MATH_OPEN:
            in_block = True
            continue
        if stripped == "</div>":
            in_block = False
            continue
        prose = re.sub(r"(`+).+?\1", "", line)  # code spans are never typeset
        for match in re.finditer(r"\\?\$", prose):
            if match.group() == "$":
                problems.append(f"line {number}: a bare $ (write \\$): {line.strip()!r}")
            elif not in_block:
                problems.append(f"line {number}: \\$ outside a {NO_MATH_OPEN} block: {line.strip()!r}")
    return problems


@pytest.mark.parametrize("lesson", LESSON_FILES, ids=lambda path: path.name[:2])
def test_every_dollar_sign_in_lesson_prose_is_kept_from_mathjax(lesson):
    nb = nbformat.read(lesson, as_version=4)
    found = [f"{lesson.name}, cell {index + 1}, {problem}"
             for index, cell in enumerate(nb.cells)
             if cell.cell_type == "markdown" and MATHS_TAG not in cell.metadata.get("tags", [])
             for problem in dollar_problems(cell.source)]
    assert found == [], "\n".join(found)


def test_the_dollar_check_finds_what_jupyterlab_would_typeset():
    # Lesson 5's cell as it was: escaped for Quarto, typeset by JupyterLab all the same.
    assert dollar_problems("The reply, \\$500 citing H08, fails: H08 says \\$150.") == [
        f"line 1: \\$ outside a {NO_MATH_OPEN} block: 'The reply, \\\\$500 citing H08, fails: H08 says \\\\$150.'",
        f"line 1: \\$ outside a {NO_MATH_OPEN} block: 'The reply, \\\\$500 citing H08, fails: H08 says \\\\$150.'",
    ]
    assert len(dollar_problems(f"{NO_MATH_OPEN}\n\nIt gives $500 and $150.\n\n</div>")) == 2
    assert len(dollar_problems(f"{NO_MATH_OPEN}\n\nIt gives \\$500.\n\n</div>\n\nThen \\$150.")) == 1
    assert dollar_problems(f"{NO_MATH_OPEN}\n\nIt gives \\$500 and \\$150.\n\n</div>") == []
    assert dollar_problems("The answer `$150|$150 per week`.\n\n```python\nx = '$1 and $2'\n```") == []
