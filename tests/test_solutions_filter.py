"""solutions.lua, the filter that finds each exercise's solution for Quarto.

A solution is a ``<details class="solution">`` block in its notebook (see
exercises/__init__.py). These tests run the filter through Quarto's own pandoc (``quarto
pandoc``, a fraction of a second each) on small markdown files: which blocks it takes,
what it leaves alone, and the error that a malformed solution gives. Under ``quarto
pandoc`` the filter makes a Div with the callout's classes and attributes; in a render it
makes Quarto's callout itself, which test_exercise_views.py checks in the browser. In
print (Typst) it moves the solutions to an appendix, which Typst (``quarto typst``)
compiles here; test_pdf.py checks the appendix of a real render.
"""
from __future__ import annotations

import json
import subprocess

import pytest

from runtime.paths import PROJECT_ROOT

pytestmark = pytest.mark.quarto

FILTER = PROJECT_ROOT / "solutions.lua"


def run_filter(quarto: str, tmp_path, markdown: str, *to: str) -> subprocess.CompletedProcess:
    """``quarto pandoc`` with the filter on ``markdown``: to JSON, or to ``to``."""
    source = tmp_path / "lesson.md"
    source.write_text(markdown, encoding="utf-8")
    return subprocess.run([quarto, "pandoc", "--lua-filter", str(FILTER), "-f", "markdown", *(to or ("-t", "json")),
                           str(source)], capture_output=True, text=True, timeout=120)


def blocks(quarto: str, tmp_path, markdown: str) -> list[dict]:
    result = run_filter(quarto, tmp_path, markdown)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["blocks"]


def solution(key: str, body: str) -> str:
    return f'<details class="solution">\n<summary>Solution to exercise {key}</summary>\n\n{body}\n\n</details>\n\n'


def test_each_solution_becomes_one_collapsed_tip_with_its_title(quarto, tmp_path):
    found = blocks(quarto, tmp_path, "Before.\n\n" + solution("1.1", "The *answer*.\n\n```python\nx = 1\n```")
                   + solution("1.2", "Another.") + "After.\n")
    assert [b["t"] for b in found] == ["Para", "Div", "Div", "Para"]
    (ident, classes, attributes), content = found[1]["c"]
    assert classes == ["callout-tip", "solution"]
    assert dict(attributes) == {"collapse": "true", "title": "Solution to exercise 1.1"}
    assert [b["t"] for b in content] == ["Para", "CodeBlock"]  # the markdown inside stays markdown
    assert content[1]["c"][1] == "x = 1"
    assert dict(found[2]["c"][0][2])["title"] == "Solution to exercise 1.2"


def test_other_details_blocks_are_left_alone_also_inside_a_solution(quarto, tmp_path):
    other = "<details>\n<summary>More</summary>\n\nAside.\n\n</details>"
    found = blocks(quarto, tmp_path, other + "\n\n" + solution("2.1", "Start.\n\n" + other + "\n\nEnd."))
    assert [b["t"] for b in found[:-1]] == ["RawBlock"] * 2 + ["Plain", "RawBlock", "Para", "RawBlock"]
    content = found[-1]["c"][1]
    # The inner block's </details> does not end the solution; its last paragraph is inside.
    assert content[0]["c"][0]["c"] == "Start." and content[-1]["c"][0]["c"] == "End."


@pytest.mark.parametrize("markdown, message", [
    ('<details class="solution">\n\nNo title.\n\n</details>\n',
     'a <details class="solution"> must open with <summary>Solution to exercise N.M</summary>'),
    ('<details class="solution">\n<summary>Solution to exercise 3.1</summary>\n\nNever closed.\n',
     'the solution "Solution to exercise 3.1" has no closing </details>'),
])
def test_a_malformed_solution_stops_with_an_error_naming_the_file(quarto, tmp_path, markdown, message):
    result = run_filter(quarto, tmp_path, markdown)
    assert result.returncode != 0
    assert f"solutions.lua: {tmp_path / 'lesson.md'}: {message}" in result.stderr


# --------------------------------------------------------------------------- in print (Typst)


def to_typst(quarto: str, tmp_path, markdown: str) -> subprocess.CompletedProcess:
    return run_filter(quarto, tmp_path, markdown, "--standalone", "-t", "typst", "-o", str(tmp_path / "lesson.typ"))


def test_in_print_solutions_move_to_an_appendix_linked_both_ways(quarto, tmp_path):
    """Under Typst each solution leaves a line with a link and a page number in its place,
    and moves to the appendix "Solutions", which links back; Typst compiles the result."""
    import pdfcheck

    markdown = ("### Exercise 1.1: First\n\nDo it.\n\n" + solution("1.1", "The *answer*.\n\n```python\nx = 1\n```")
                + "### Exercise 1.2: Second\n\nAgain.\n\n" + solution("1.2", "Another answer.") + "The end.\n")
    result = to_typst(quarto, tmp_path, markdown)
    assert result.returncode == 0, result.stderr
    typst = (tmp_path / "lesson.typ").read_text(encoding="utf-8")
    body, appendix = typst.split("= Solutions", 1)
    for key in ("1.1", "1.2"):
        assert f"#link(<print-solution-{key}>)[#strong[Solution to exercise {key}]]" in body
        assert f"] <print-exercise-{key}>" in body
        assert f"[Solution to exercise {key}] <print-solution-{key}>" in appendix
        assert f"#link(<print-exercise-{key}>)[Back to exercise {key}]" in appendix
    assert "answer" not in body and "x = 1" not in body  # the solutions left the lesson
    assert appendix.index("#emph[answer]") < appendix.index("x = 1") < appendix.index("Another answer.")
    assert "appendices.with" not in typst  # orange-book's appendix part only in a Quarto book
    pdfcheck.require_poppler()
    compiled = subprocess.run([quarto, "typst", "compile", str(tmp_path / "lesson.typ"), str(tmp_path / "lesson.pdf")],
                              capture_output=True, text=True, timeout=120)
    assert compiled.returncode == 0, compiled.stderr
    text = pdfcheck.text(tmp_path / "lesson.pdf")
    assert pdfcheck.contains(text, "Solution to exercise 1.1: in the appendix “Solutions”, page 1.")
    assert pdfcheck.contains(text, "Back to exercise 1.2 (page 1)")


def test_in_print_two_solutions_with_one_number_stop_the_render(quarto, tmp_path):
    result = to_typst(quarto, tmp_path, solution("2.1", "One.") + solution("2.1", "Two."))
    assert result.returncode != 0
    assert f"solutions.lua: {tmp_path / 'lesson.md'}: two solutions are titled \"Solution to exercise 2.1\"" in result.stderr
