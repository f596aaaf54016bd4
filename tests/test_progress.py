"""Progress bars: shown while a person runs the code, never in a built page.

The detector is checked on environments, in a real kernel both ways, through the build
without Quarto, and (when Quarto is on PATH) through `quarto render` itself.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

import pagecheck
from helpers import progress
from helpers.paths import LESSONS_DIR, PROJECT_ROOT
from projects import SAMPLE_LESSON as LESSON, run_book as run_build, write_project

LABEL = "probe-progress-label"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def _person(environ=None) -> dict[str, str]:
    """An environment as a student's JupyterLab session has it: no build markers."""
    environ = dict(os.environ if environ is None else environ)
    for name in [progress.BUILD_ENV, progress.SWITCH_ENV, *progress.QUARTO_MARKERS]:
        environ.pop(name, None)
    return environ


# --------------------------------------------------------------------------- the detector


@pytest.mark.parametrize(("extra", "build"), [
    ({}, None),
    ({progress.BUILD_ENV: "nbclient"}, "nbclient"),
    ({progress.BUILD_ENV: "quarto"}, "quarto"),
    ({progress.BUILD_ENV: "0"}, None),
    ({"QUARTO_DOCUMENT_PATH": "/book/lessons"}, "quarto"),
    ({"QUARTO_EXECUTE_INFO": "/book/.quarto/x"}, "quarto"),
    ({"QUARTO_BIN_PATH": "/opt/quarto/bin", "QUARTO_PYTHON": "python"}, None),  # a shell near Quarto
])
def test_book_build_is_read_from_the_environment(extra, build):
    environ = {**_person(), **extra}
    assert progress.book_build(environ) == build
    assert progress.bars_enabled(environ) is (build is None)


@pytest.mark.parametrize("value", ["0", "off", "False", "no"])
def test_bars_can_be_switched_off(value):
    assert not progress.bars_enabled({**_person(), progress.SWITCH_ENV: value})
    assert progress.bars_enabled({**_person(), progress.SWITCH_ENV: "1"})


def test_build_environment_marks_a_copy():
    base = {"PATH": "/bin"}
    marked = progress.build_environment("nbclient", base)
    assert marked == {"PATH": "/bin", progress.BUILD_ENV: "nbclient"}
    assert base == {"PATH": "/bin"}


# --------------------------------------------------------------------------- in a terminal


def _loop(n_fail: int | None = None):
    with progress.QuestionProgress(3, LABEL) as bar:
        for question_id, n in bar.track((f"Q{n}", n) for n in range(1, 4)):
            if n == n_fail:
                raise RuntimeError(f"stopped at {question_id}")
    return bar


def test_a_person_sees_the_count_and_the_question(monkeypatch, capsys):
    monkeypatch.setattr(os, "environ", _person())
    bar = _loop()
    err = capsys.readouterr().err
    assert bar.shown and bar.done == 3
    assert LABEL in err and "3/3" in err and "Q3" in err
    assert pagecheck.progress_residue(err) != [], f"the residue check misses a terminal bar: {err!r}"


def test_a_failing_loop_leaves_the_bar_where_it_stopped(monkeypatch, capsys):
    monkeypatch.setattr(os, "environ", _person())
    with pytest.raises(RuntimeError, match="stopped at Q2"):
        _loop(n_fail=2)
    last = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    assert "1/3" in last and "Q2" in last, last


@pytest.mark.parametrize("extra", [{progress.BUILD_ENV: "nbclient"}, {"QUARTO_DOCUMENT_PATH": "/x"},
                                   {progress.SWITCH_ENV: "0"}])
def test_a_build_sees_nothing(monkeypatch, capsys, extra):
    monkeypatch.setattr(os, "environ", {**_person(), **extra})
    bar = _loop()
    assert not bar.shown and bar.done == 3
    assert capsys.readouterr() == ("", "")


# --------------------------------------------------------------------------- in a real kernel

# The label is put together when the cell runs, so that the cell's source, which a page
# shows, does not contain it.
LOOP_CELL = textwrap.dedent(
    f"""\
    from helpers.progress import QuestionProgress
    with QuestionProgress(3, {LABEL[:6]!r} + {LABEL[6:]!r}) as bar:
        for question_id, _ in bar.track((f"Q{{n}}", n) for n in range(1, 4)):
            pass
    """
)


def _run_in_kernel(env: dict[str, str]):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(LOOP_CELL)])
    NotebookClient(nb, kernel_name="python3", timeout=120,
                   resources={"metadata": {"path": str(PROJECT_ROOT)}}).execute(env=env)
    return nb.cells[0].outputs


def test_a_students_kernel_shows_a_widget():
    outputs = _run_in_kernel(_person())
    widgets = [o for o in outputs if WIDGET_MIME in o.get("data", {})]
    assert widgets, f"no progress widget in {outputs}"
    assert LABEL in widgets[0]["data"]["text/plain"]
    # What a page built from these outputs would carry, which the page checks look for.
    assert "application/vnd.jupyter.widget" in pagecheck.progress_residue(json.dumps(outputs))


@pytest.mark.parametrize("marker", [
    progress.build_environment("nbclient", _person()),
    {**_person(), "QUARTO_DOCUMENT_PATH": str(PROJECT_ROOT / "lessons")},
], ids=["bookkit", "quarto"])
def test_a_build_kernel_shows_nothing(marker):
    assert _run_in_kernel(marker) == []


# --------------------------------------------------------------------------- built pages


def _progress_project(root: Path) -> Path:
    return write_project(root, [nbformat.v4.new_code_cell(LOOP_CELL + "print('loop done')")])


def residue(page: str) -> list[str]:
    """Traces of a progress bar in a built page, this test's label and count included."""
    return pagecheck.progress_residue(page, LABEL, "3/3")


def _built_page(root: Path) -> str:
    page = (root / "_book" / Path(LESSON).with_suffix(".html")).read_text(encoding="utf-8")
    assert "loop done" in page, "the lesson's cell did not run"
    return page


@pytest.mark.slow
def test_build_without_quarto_leaves_no_progress_bar(tmp_path):
    root = _progress_project(tmp_path / "book")
    result = run_build(root, "--engine", "nbclient", env=_person())
    assert result.returncode == 0, result.stdout + result.stderr
    assert residue(_built_page(root)) == []


@pytest.mark.slow
@pytest.mark.quarto
def test_a_plain_quarto_render_leaves_no_progress_bar(tmp_path, quarto):
    """A plain `quarto render`, which only Quarto's own markers tell from a person's session.
    (`python -m bookkit` adds its marker to that, which can only switch bars off:
    test_a_build_kernel_shows_nothing; the whole book under both engines:
    test_browser.py::test_lesson_pages_carry_no_progress_bar.)"""
    root = _progress_project(tmp_path / "book")
    env = {**_person(), "QUARTO_PYTHON": sys.executable}
    result = subprocess.run([quarto, "render"], cwd=root, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert residue(_built_page(root)) == []


# --------------------------------------------------------------------------- the lessons' loops

#: Calls that ask a model for one reply (or one verdict) at a time.
GENERATION_CALLS = {"generate", "generate_constrained", "generate_under_grammar", "judge_replies"}
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _calls(node: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Call) and _called_name(n) in names for n in ast.walk(node))


def silent_generation_loops(source: str) -> list[str]:
    """Model calls that a cell makes in a loop or comprehension without a progress bar.

    A loop counts as shown when it iterates ``bar.track(...)`` or runs inside ``with
    QuestionProgress(...)``; helpers that do so themselves (``generate_all``,
    ``generate_all_constrained``) are not model calls here. Returns "line N: call in a
    loop" descriptions. IPython's own syntax (magics, shell escapes) is read as IPython does.
    """
    from IPython.core.inputtransformer2 import TransformerManager

    tree = ast.parse(TransformerManager().transform_cell(source))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for call in ast.walk(tree):
        if not (isinstance(call, ast.Call) and _called_name(call) in GENERATION_CALLS):
            continue
        looped = tracked = False
        child, node = call, parents.get(call)
        while node is not None:
            if isinstance(node, _LOOPS) and child not in (getattr(node, "iter", None), getattr(node, "test", None)):
                looped = True
                tracked |= isinstance(node, (ast.For, ast.AsyncFor)) and _calls(node.iter, {"track"})
            elif isinstance(node, _COMPREHENSIONS) and call not in set(ast.walk(node.generators[0].iter)):
                looped = True
                tracked |= any(_calls(g.iter, {"track"}) for g in node.generators)
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                tracked |= any(_calls(item.context_expr, {"QuestionProgress"}) for item in node.items)
            child, node = node, parents.get(node)
        if looped and not tracked:
            found.append(f"line {call.lineno}: {_called_name(call)}(...) in a loop")
    return found


@pytest.mark.parametrize(("source", "expected"), [
    ("reply = reader.generate(messages, 'Q1')", []),
    ("results = reader.generate_all(reader_, inputs)", []),
    ("for q, m in pairs:\n    out.append(reader.generate(m, q))", ["line 2: generate(...) in a loop"]),
    ("out = [constrained.generate_constrained(r, m, ids, q) for q, m, ids in rows]",
     ["line 1: generate_constrained(...) in a loop"]),
    ("out = {q: judge.judge_replies(j, x) for q, x in parts}", ["line 1: judge_replies(...) in a loop"]),
    ("while todo:\n    q = todo.pop()\n    generate_under_grammar(r, q, g, 'Q')",
     ["line 3: generate_under_grammar(...) in a loop"]),
    ("for q in model.generate(x):\n    print(q)", []),  # called once, then iterated
    ("tokens = [t for t in model.generate(x)]", []),
    ("with QuestionProgress(3, 'reader') as bar:\n"
     "    for q, m in bar.track(pairs):\n        reader.generate(m, q)", []),
    ("out = [reader.generate(m, q) for q, m in bar.track(pairs)]", []),
    ("%time x = 1\nfor m in ms:\n    reader.generate(m)", ["line 3: generate(...) in a loop"]),
])
def test_the_scan_finds_model_calls_in_loops_without_a_bar(source, expected):
    assert silent_generation_loops(source) == expected


@pytest.mark.parametrize("lesson", sorted(p.name for p in LESSONS_DIR.glob("[0-9][0-9]-*.ipynb")))
def test_no_lesson_asks_a_model_in_a_loop_without_a_progress_bar(lesson):
    """A loop over questions that calls a model shows a bar while a person runs it: the
    lessons go through QuestionProgress, or the helpers that use it."""
    nb = nbformat.read(LESSONS_DIR / lesson, as_version=4)
    silent = [f"cell {index + 1}, {where}" for index, cell in enumerate(nb.cells)
              if cell.cell_type == "code" for where in silent_generation_loops(cell.source)]
    assert silent == [], f"{lesson}: model calls in loops that show no progress: {silent}"
