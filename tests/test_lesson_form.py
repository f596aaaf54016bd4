"""The form of a lesson page: code a student reads, prose written by hand and guarded.

Measured on the committed notebooks, as a student meets them in JupyterLab:

- hidden cells (``#| echo: false``, ``#| include: false``, a ``remove-*`` or ``hide-input``
  tag) hold at most :data:`MAX_HIDDEN_SHARE` of a lesson's code lines, and define nothing
  another cell uses or changes, so the lesson runs the same with them deleted; a guard
  cell (one that only calls ``check_claim``) is not counted: it hides no analysis;
- every cell that calls ``check_claim`` is a guard cell: hidden on the page (``#| echo:
  false``), collapsed in JupyterLab (``source_hidden``), and only calls ``check_claim``;
- no cell builds prose with a condition (``Markdown(`` and an ``if`` in one cell);
- no cell holds a column-rename map (a dict of three or more string-to-string entries):
  tables take their labels from the book's vocabulary, ``runtime/labels.csv``;
- ``show_table`` calls take at most :data:`MAX_SHOW_TABLE_LINES` lines in a lesson;
- every table cell has a ``tbl-`` label and a caption; the page opens with a link to
  download its notebook; no code cell after "What to remember" prints a timing.

The executed lessons (read from the book's own execution, ``tests/book_session.py``) add
what only a run shows: static tables of at most seven columns, every column labelled
from the vocabulary, and no path of the machine in any output.
"""
from __future__ import annotations

import ast
import json
import re

import pytest

from runtime.paths import LESSONS_DIR

LESSONS = sorted(LESSONS_DIR.glob("[0-9][0-9]-*.ipynb"))
MAX_HIDDEN_SHARE = 0.10
MAX_SHOW_TABLE_LINES = 40


def cells(path):
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def source(cell) -> str:
    return "".join(cell.get("source", ""))


def hidden(cell) -> bool:
    options = [line for line in source(cell).splitlines() if line.startswith("#|")]
    tags = set(cell.get("metadata", {}).get("tags", []))
    return any(re.match(r"#\|\s*(echo|include)\s*:\s*false", line) for line in options) or \
        bool(tags & {"hide-input", "remove-input", "remove-cell"})


def body(cell):
    text = "\n".join(line for line in source(cell).splitlines() if not line.startswith(("#|", "%", "!")))
    return ast.parse(text)


def guard_only(tree) -> bool:
    """Whether every statement of a cell is a call of ``check_claim`` (a sentence's guard)."""
    return bool(tree.body) and all(
        isinstance(st, ast.Expr) and isinstance(st.value, ast.Call)
        and getattr(st.value.func, "id", getattr(st.value.func, "attr", "")) == "check_claim"
        for st in tree.body)


def code_lines(cell) -> int:
    return sum(1 for line in source(cell).splitlines() if line.strip() and not line.startswith("#|"))


def defined_and_used(tree) -> tuple[set[str], set[str]]:
    """Names a cell binds (or changes through an item or attribute) and names it reads."""
    defined, used = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Name):
            (defined if isinstance(node.ctx, ast.Store) else used).add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Subscript, ast.Attribute)) and isinstance(node.ctx, ast.Store):
            root = node.value
            while isinstance(root, (ast.Subscript, ast.Attribute)):
                root = root.value
            if isinstance(root, ast.Name):
                defined.add(root.id)
    return defined, used


def rename_maps(tree) -> int:
    return sum(1 for node in ast.walk(tree) if isinstance(node, ast.Dict) and len(node.keys) >= 3
               and all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in node.keys)
               and all(isinstance(v, ast.Constant) and isinstance(v.value, str)
                       for v in node.values))


def show_table_lines(tree) -> int:
    spans = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id",
                                                  getattr(node.func, "attr", "")) == "show_table":
            spans.update(range(node.lineno, node.end_lineno + 1))
    return len(spans)


def form(path) -> dict:
    """What the measuring counts for one lesson (see the module docstring)."""
    found = {"code": 0, "hidden": 0, "if_prose": [], "rename_maps": 0, "show_table": 0,
             "leaked": set(), "untitled_tables": [], "open_guards": []}
    code_cells = [c for c in cells(path) if c["cell_type"] == "code"]
    hidden_names: dict[int, set[str]] = {}
    for number, cell in enumerate(code_cells):
        tree = body(cell)
        found["code"] += code_lines(cell)
        found["rename_maps"] += rename_maps(tree)
        found["show_table"] += show_table_lines(tree)
        text = source(cell)
        if "Markdown(" in text and re.search(r"\bif\b", text):
            found["if_prose"].append(text.splitlines()[0])
        if "show_table(" in text and not (re.search(r"#\|\s*label:\s*tbl-", text) and "#| tbl-cap:" in text):
            found["untitled_tables"].append(text.splitlines()[0])
        guard = "check_claim(" in text
        if guard and not (text.startswith("#| echo: false") and guard_only(tree)
                          and cell["metadata"].get("jupyter", {}).get("source_hidden")):
            found["open_guards"].append(text.splitlines()[0])
        if hidden(cell):
            found["hidden"] += 0 if guard_only(tree) else code_lines(cell)
            hidden_names[number] = defined_and_used(tree)[0]
    for number, cell in enumerate(code_cells):
        defined, used = defined_and_used(body(cell))
        for other, names in hidden_names.items():
            if other != number:
                found["leaked"] |= names & (used | defined)
    return found


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name[:2])
def test_a_lesson_is_written_code_and_guarded_prose(path):
    found = form(path)
    assert found["hidden"] <= MAX_HIDDEN_SHARE * found["code"], \
        f"{found['hidden']} of {found['code']} code lines are hidden"
    assert found["if_prose"] == [], "cells that build prose with a condition"
    assert found["leaked"] == set(), "names a hidden cell defines and another cell uses"
    assert found["rename_maps"] == 0
    assert found["show_table"] <= MAX_SHOW_TABLE_LINES
    assert found["untitled_tables"] == []
    assert found["open_guards"] == [], "cells that call check_claim but are not guard cells"


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name[:2])
def test_a_lesson_links_its_notebook_and_ends_without_a_timing(path):
    markdown = [source(c) for c in cells(path) if c["cell_type"] == "markdown"]
    assert f"[Download this lesson's notebook]({path.name})" in markdown[0]
    after = "".join(source(c) for c in cells(path)[[i for i, c in enumerate(cells(path))
                                                    if "## What to remember" in source(c)][0]:])
    assert not re.search(r"perf_counter|seconds", after.split("## Exercises")[0])


def test_the_measures_fail_on_a_lesson_that_breaks_the_form(tmp_path):
    """Each measure can fail: a hidden cell that defines a name used later, prose built with
    an if, a rename map, a table without its caption, and guards not in a guard cell's form
    (one not collapsed, one that computes before it checks)."""
    notebook = {"cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# Title"]},
        {"cell_type": "code", "metadata": {}, "source": [
            "#| echo: false\n", "counts = {'a': 1}\n", "display(Markdown('x' if counts else 'y'))"]},
        {"cell_type": "code", "metadata": {}, "source": [
            "#| label: tbl-x\n", "show_table(frame, {'a': 'A', 'b': 'B', 'c': 'C'}, name='x')\n",
            "print(counts)"]},
        {"cell_type": "code", "metadata": {}, "source": ["show_table(frame, 'y')"]},
        {"cell_type": "code", "metadata": {"jupyter": {"source_hidden": True}}, "source": [
            "#| echo: false\n", "check_claim('one', 1, 1)"]},
        {"cell_type": "code", "metadata": {}, "source": [
            "#| echo: false\n", "check_claim('two', 2, 2)"]},
        {"cell_type": "code", "metadata": {"jupyter": {"source_hidden": True}}, "source": [
            "#| echo: false\n", "n = 3\n", "check_claim('three', 3, n)"]},
    ]}
    path = tmp_path / "09-broken.ipynb"
    path.write_text(json.dumps(notebook), encoding="utf-8")
    found = form(path)
    assert found["hidden"] == 2 + 2 and found["code"] == 5 + 1 + 1 + 2  # guards not hidden
    assert found["open_guards"] == ["#| echo: false"] * 2  # not collapsed; not only a check
    assert found["if_prose"] == ["#| echo: false"]
    assert found["leaked"] == {"counts"}
    assert found["rename_maps"] == 1
    assert found["untitled_tables"] == ["#| label: tbl-x", "show_table(frame, 'y')"]
