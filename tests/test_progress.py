"""Progress bars: shown while a person runs the code, never in a built page.

The detector is checked on environments, in a real kernel both ways, through the build
without Quarto, and (when Quarto is on PATH) through `quarto render` itself.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest

import pagecheck
from projects import SAMPLE_LESSON as LESSON, run_cells, write_project
from runtime import config, progress
from runtime.paths import LESSONS_DIR, PROJECT_ROOT

LABEL = "probe-progress-label"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def _person() -> dict[str, str]:
    """An environment as a student's JupyterLab session has it: no build markers."""
    markers = {config.BOOK_BUILD, config.PROGRESS, *progress.QUARTO_MARKERS}
    return {name: value for name, value in os.environ.items() if name not in markers}


# --------------------------------------------------------------------------- the detector


@pytest.mark.parametrize(("extra", "build", "shown"), [
    ({}, None, True),
    ({config.BOOK_BUILD: "nbclient"}, "nbclient", False),
    ({config.BOOK_BUILD: "quarto"}, "quarto", False),
    ({config.BOOK_BUILD: "0"}, None, True),
    ({"QUARTO_DOCUMENT_PATH": "/book/lessons"}, "quarto", False),
    ({"QUARTO_EXECUTE_INFO": "/book/.quarto/x"}, "quarto", False),
    ({"QUARTO_BIN_PATH": "/opt/quarto/bin", "QUARTO_PYTHON": "python"}, None, True),  # a shell
    *[({config.PROGRESS: value}, None, False) for value in ["0", "off", "False", "no"]],
    ({config.PROGRESS: "1"}, None, True),
])
def test_book_build_and_the_switch_are_read_from_the_environment(extra, build, shown):
    environ = {**_person(), **extra}
    assert progress.book_build(environ) == build
    assert progress.bars_enabled(environ) is shown
    base = {"PATH": "/bin"}
    assert progress.build_environment("nbclient", base) == {"PATH": "/bin", config.BOOK_BUILD: "nbclient"}
    assert base == {"PATH": "/bin"}  # a copy is marked


# --------------------------------------------------------------------------- in a terminal


def _loop(n_fail: int | None = None):
    with progress.QuestionProgress(3, LABEL) as bar:
        for n in range(1, 4):
            bar.working_on_batch([f"Q{n}"])
            if n == n_fail:
                raise RuntimeError(f"stopped at Q{n}")
            bar.finished()
    return bar


def test_a_person_sees_the_count_the_question_and_where_a_loop_stopped(monkeypatch, capsys):
    monkeypatch.setattr(os, "environ", _person())
    bar = _loop()
    err = capsys.readouterr().err
    assert bar.shown and bar.done == 3 and LABEL in err and "3/3" in err and "Q3" in err
    assert pagecheck.progress_residue(err) != [], f"the residue check misses a terminal bar: {err!r}"
    with pytest.raises(RuntimeError, match="stopped at Q2"):
        _loop(n_fail=2)
    last = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    assert "1/3" in last and "Q2" in last, last


@pytest.mark.parametrize("extra", [{config.BOOK_BUILD: "nbclient"}, {"QUARTO_DOCUMENT_PATH": "/x"},
                                   {config.PROGRESS: "0"}])
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
    from runtime import QuestionProgress
    with QuestionProgress(3, {LABEL[:6]!r} + {LABEL[6:]!r}) as bar:
        for n in range(1, 4):
            bar.working_on_batch([f"Q{{n}}"])
            bar.finished()
    """
)


def _run_in_kernel(env: dict[str, str]):
    return run_cells(LOOP_CELL, env=env).cells[0].outputs


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


@pytest.mark.slow
@pytest.mark.quarto
def test_a_plain_quarto_render_leaves_no_progress_bar(tmp_path, quarto):
    """A plain `quarto render`, which only Quarto's own markers tell from a person's session.
    (`python -m bookkit` marks its kernels, with either engine: test_a_build_kernel_shows_nothing;
    the whole book under both engines: test_browser.py::test_lesson_pages_carry_no_progress_bar.)"""
    root = write_project(tmp_path / "book", [nbformat.v4.new_code_cell(LOOP_CELL + "print('loop done')")])
    env = {**_person(), "QUARTO_PYTHON": sys.executable}
    result = subprocess.run([quarto, "render"], cwd=root, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    page = (root / "_book" / Path(LESSON).with_suffix(".html")).read_text(encoding="utf-8")
    assert "loop done" in page, "the lesson's cell did not run"
    # Traces of a progress bar in the built page, this test's label and count included.
    assert pagecheck.progress_residue(page, LABEL, "3/3") == []


# --------------------------------------------------------------------------- the lessons' models


@pytest.mark.parametrize("lesson", sorted(p.name for p in LESSONS_DIR.glob("[0-9][0-9]-*.ipynb")))
def test_every_model_a_lesson_runs_shows_a_bar(lesson):
    """A lesson asks a model through generate_all (or what goes through it: the judge's
    replies, lesson 5's runs), which shows a bar while a person waits; never through the
    reader's own loop or the decoder, which show none."""
    nb = nbformat.read(LESSONS_DIR / lesson, as_version=4)
    silent = [f"cell {index + 1}: {call}" for index, cell in enumerate(nb.cells)
              if cell.cell_type == "code"
              for call in re.findall(r"\b(generate_many|greedy_batch)\(", cell.source)]
    assert silent == [], f"{lesson}: model calls that show no progress: {silent}"
