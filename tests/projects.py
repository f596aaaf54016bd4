"""Temporary projects for tests that build or render the book: copies of this project,
small sample books, and the commands that build them.

The build runs as `make book` runs it, in a subprocess (:func:`run_book`); every test that
builds a book goes through it, or through tests/book_session.py for the whole book.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import yaml

from runtime.paths import PROJECT_ROOT

#: The command that builds the book (what `make book` runs).
BUILD_COMMAND = [sys.executable, "-m", "bookkit"]

#: The sample lesson of :func:`write_project`.
SAMPLE_LESSON = "lessons/01-sample.ipynb"

COPIED = ["helpers", "exercises", "runtime", "bookkit", "data", "lessons", "_quarto.yml", "solutions.lua", "going-further.lua", "print",
          "index.qmd", "guide.qmd", "book.scss", ".gitignore"]
#: The packages a lesson imports (hashed into every lesson's key), and the build's own.
PACKAGES = ("helpers", "exercises", "runtime", "bookkit")


def copy_project(target: Path, names=COPIED) -> Path:
    """Copy what a build reads to ``target``: helpers, exercises, runtime, bookkit, data, lessons, `_quarto.yml`
    and its filters, the PDF's template (print/), the front page and the guide, the theme and
    `.gitignore` (a render must leave the last unchanged); or only the files and folders
    ``names``."""
    for name in names:
        source = PROJECT_ROOT / name
        if source.is_dir():
            shutil.copytree(source, target / name,
                            ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
        else:
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def run_book(project: Path, *args: str, env: dict | None = None, cwd: Path = PROJECT_ROOT,
             timeout: float = 600) -> subprocess.CompletedProcess:
    """``python -m bookkit --project PROJECT ARGS`` in a subprocess, from ``cwd`` (by
    default this checkout, whose build code is the one under test) and in ``env`` (default:
    this process's environment); its output is captured."""
    return subprocess.run([*BUILD_COMMAND, "--project", str(project), *args], cwd=cwd,
                          env=os.environ.copy() if env is None else env,
                          capture_output=True, text=True, timeout=timeout)


def clean_environment(**extra: str) -> dict[str, str]:
    """This process's environment without the reader, review and Quarto settings a
    developer's shell may hold, plus ``extra``."""
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("RIVERTON_READER_", "RIVERTON_REVIEWS_", "QUARTO_"))}
    env.update(extra)
    return env


def post_render(root: Path, monkeypatch, outputs: str, status: int = 0) -> list[str]:
    """Quarto's post-render step (bookkit/freeze.py) after a render of ``root`` that wrote
    ``outputs`` (paths, one a line): it must end with ``status``; the lines it said."""
    from bookkit.freeze import post_render as step

    monkeypatch.setenv("QUARTO_PROJECT_OUTPUT_DIR", str(root / "_book"))
    monkeypatch.setenv("QUARTO_PROJECT_OUTPUT_FILES", outputs)
    monkeypatch.delenv("QUARTO_USE_FILE_FOR_PROJECT_OUTPUT_FILES", raising=False)
    said = []
    assert step(root, said.append) == status
    return said


def run_cells(*sources: str, env: dict | None = None, allow_errors: bool = False):
    """A notebook of one code cell per source, executed in a fresh kernel started in this
    project's folder, in ``env`` (default: this process's environment)."""
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in sources])
    NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=allow_errors,
                   resources={"metadata": {"path": str(PROJECT_ROOT)}}).execute(
        env=os.environ if env is None else env)
    return nb


def code(source: str):
    """A code cell of ``source`` (dedented)."""
    return nbformat.v4.new_code_cell(textwrap.dedent(source).strip("\n"))


def markdown(source: str):
    """A markdown cell of ``source`` (dedented)."""
    return nbformat.v4.new_markdown_cell(textwrap.dedent(source).strip("\n"))


def write_project(root: Path, cells: list, title: str = "A sample lesson", **book) -> Path:
    """A book project with index.qmd and one lesson notebook (:data:`SAMPLE_LESSON`) made
    of ``cells``; ``book`` adds to (or replaces) the options of _quarto.yml's ``book``."""
    (root / "lessons").mkdir(parents=True, exist_ok=True)
    config = {"project": {"type": "book", "output-dir": "_book", "execute-dir": "project"},
              "book": {"title": "Sample Book", "chapters": ["index.qmd", SAMPLE_LESSON], **book},
              "execute": {"enabled": True}, "jupyter": "python3"}
    (root / "_quarto.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    (root / "index.qmd").write_text(
        "# Front page {.unnumbered}\n\nRead [the lesson](lessons/01-sample.ipynb) next.\n"
    )
    write_notebook(root / SAMPLE_LESSON, cells, title)
    return root


def write_notebook(path: Path, cells: list, title: str) -> Path:
    """A lesson notebook at ``path``: front matter with ``title``, then ``cells``."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_raw_cell(f"---\ntitle: {title}\n---"), *cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path
