"""Dollar signs in the lessons' prose: written so that no renderer takes them for maths.

JupyterLab typesets the text between two ``$`` of a markdown cell as mathematics, and an
escaped ``\\$`` does not stop it (its markdown renderer turns ``\\$`` into ``$`` before
MathJax reads the page). So prose that shows money writes each dollar sign as ``\\$``
(a literal dollar for Quarto and for the build without it) inside a
``<div class="mathjax_ignore tex2jax_ignore">`` block, whose blank lines keep the text
inside it markdown; MathJax leaves that block alone. That is the rule
:class:`runtime.display.Markdown` follows for computed prose. Code spans and code blocks
are never typeset and need nothing. A cell meant to hold mathematics carries the tag
``maths`` and is not checked. tests/test_jupyterlab.py checks the same in JupyterLab; the
last tests here render every lesson's prose that shows money as the build without Quarto
does (nbconvert) and as Quarto does (its pandoc), and look for the plain dollar signs.
"""
from __future__ import annotations

import re
import subprocess

import nbformat
import pytest

from bookkit.cellopts import quarto_markdown_to_commonmark
from runtime.display import NO_MATH_CLASSES
from runtime.paths import LESSONS_DIR

NO_MATH_OPEN = f'<div class="{NO_MATH_CLASSES}">'
MATHS_TAG = "maths"
LESSON_FILES = sorted(LESSONS_DIR.glob("[0-9][0-9]-*.ipynb"))


def dollar_problems(source: str) -> list[str]:
    """Each dollar sign of ``source`` (markdown) that some renderer would take for maths."""
    problems = []
    in_code = in_block = False
    lines = source.splitlines()
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            in_code = not in_code
            continue
        if in_code:
            continue
        if stripped == NO_MATH_OPEN:
            in_block = True
            # Without a blank line the block's text is raw HTML: \$ would show as \$.
            if number == len(lines) or lines[number].strip():
                problems.append(f"line {number}: {NO_MATH_OPEN} must be followed by a blank line")
            continue
        if stripped == "</div>" and in_block:
            in_block = False
            if number < 2 or lines[number - 2].strip():
                problems.append(f"line {number}: </div> must follow a blank line")
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
    assert dollar_problems(f"{NO_MATH_OPEN}\nIt gives \\$500.\n</div>") == [
        f"line 1: {NO_MATH_OPEN} must be followed by a blank line", "line 3: </div> must follow a blank line"]


def money_cells() -> list[tuple[str, str, list[str]]]:
    """Every markdown cell of the lessons that shows money: (where, source, what a reader
    must see), the last being each amount with the word before it ("says $150" where the
    markdown says ``says \\$150``)."""
    found = []
    for lesson in LESSON_FILES:
        for index, cell in enumerate(nbformat.read(lesson, as_version=4).cells):
            phrases = re.findall(r"([A-Za-z]+[,:]?)\s+\\\$(\d+)", cell.source)
            if cell.cell_type == "markdown" and phrases:
                found.append((f"{lesson.name}, cell {index + 1}", cell.source,
                              [f"{word} ${amount}" for word, amount in phrases]))
    return found


def shown_text(html: str) -> str:
    """The text of an HTML fragment as a reader sees it, whitespace collapsed."""
    return " ".join(re.sub(r"<[^>]+>", " ", html).replace("&quot;", '"').replace("&#39;", "'").split())


def test_the_build_without_quarto_shows_the_dollar_signs():
    """The finder sees the cells that show money, lesson 3's probe, and lesson 5's attack list
    and its two controls of A01 (so the checks cannot pass on nothing); nbconvert shows them."""
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    found = money_cells()
    lessons = sorted({where.split(",")[0] for where, _, _ in found})
    assert lessons == ["01-answering-from-retrieved-passages.ipynb", "03-format-is-not-truth.ipynb",
                       "05-evidence-not-instructions.ipynb"], lessons
    assert len(found) >= 3, [where for where, _, _ in found]
    for where, source, phrases in found:
        text = shown_text(markdown2html_mistune(quarto_markdown_to_commonmark(source)))
        missing = [phrase for phrase in phrases if phrase not in text]
        assert missing == [] and "\\$" not in text, (where, missing, text[:300])


@pytest.mark.quarto
def test_quarto_shows_the_dollar_signs(quarto, tmp_path):
    cells = money_cells()
    document = tmp_path / "money.md"
    document.write_text("\n\n".join(f"<!-- {where} -->\n\n{source}" for where, source, _ in cells),
                        encoding="utf-8")
    result = subprocess.run([quarto, "pandoc", "-f", "markdown", "-t", "html", str(document)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert not re.search(r'class="math (inline|display)"', result.stdout)  # no dollar read as maths
    text = shown_text(result.stdout)
    missing = [(where, phrase) for where, _, phrases in cells for phrase in phrases if phrase not in text]
    assert missing == [] and "\\$" not in text, missing
