"""Execute a lesson as the book build does, and read what the executed notebook shows.

Lessons are executed with the build's own code (:func:`bookkit.build.execute_chapter`:
a clean kernel, the project folder as working folder, marked as a book build so that no
progress bar lands in the outputs). Tables are read from the machine-readable copy that
runtime.display attaches to every table output, so the tests see exactly the rows a reader
sees. A :class:`LessonRun` keeps its kernel up, so that a test can run more code after the
lesson's cells, as a student would (the exercise tests do).
"""
from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path

from bookkit.build import Chapter, _for_cache, cell_options, execute_chapter, load_book_config, read_chapter
from bookkit.cache import LessonKey, ProjectInputs
from runtime.display import TABLE_MIME
from runtime.paths import PROJECT_ROOT


def chapter_source(notebook: Path | str, project: Path = PROJECT_ROOT) -> str:
    """A lesson as `_quarto.yml` lists it (``lessons/01-….ipynb``), from a path or that name."""
    path = Path(notebook)
    if path.is_absolute():
        path = path.relative_to(PROJECT_ROOT if path.is_relative_to(PROJECT_ROOT) else project)
    return path.as_posix()


class LessonRun:
    """Lesson ``source`` of the project at ``project`` executed from a clean kernel that
    stays up until :meth:`close`.

    ``nb`` is the executed lesson as the build caches it (its front matter moved into the
    metadata, as :func:`bookkit.build.read_chapter` reads it); ``key`` its lesson key
    under ``env`` (:class:`bookkit.cache.LessonKey`); :meth:`run` executes more code in
    the same kernel, after the lesson's cells.
    """

    def __init__(self, project: Path, source: str, env: Mapping[str, str], timeout: int = 1800,
                 inputs: ProjectInputs | None = None):
        self.project = Path(project)
        self.source = source
        config = load_book_config(self.project)
        chapter = Chapter(source=source, page=str(Path(source).with_suffix(".html").as_posix()))
        nb = read_chapter(self.project, chapter)
        options = cell_options(nb, chapter, config.execute_defaults)
        if inputs is None:
            inputs = ProjectInputs.collect(self.project, config.kernel, environ=env)
        self.inputs = inputs
        self.key = LessonKey.compute(nb, inputs)
        started = time.perf_counter()
        self.client = execute_chapter(nb, chapter, options, config, timeout, env=dict(env), keep_kernel=True)
        self.seconds = time.perf_counter() - started
        self.nb = _for_cache(nb)

    def run(self, code: str) -> list[dict]:
        """Execute ``code`` as one more cell; its outputs (a failing cell raises)."""
        import nbformat

        cell = nbformat.v4.new_code_cell(code)
        self.client.nb.cells.append(cell)
        self.client.execute_cell(cell, len(self.client.nb.cells) - 1)
        return list(cell.outputs)

    def close(self) -> None:
        """Stop the kernel at once (nothing is left to save in it)."""
        if self.client.km is not None:
            self.client.shutdown_kernel = "immediate"
            self.client._cleanup_kernel()


def execute(notebook: Path, env: Mapping[str, str] | None = None, timeout: int = 1200):
    """The executed notebook of one lesson of this project, run as the build runs it, in
    ``env`` (default: this process's environment); its kernel is shut down afterwards.

    For runs with inputs of their own (a student's review, a reader server); the lessons
    as the book runs them come from the session's book (``book.lesson``, tests/conftest.py).
    """
    run = LessonRun(PROJECT_ROOT, chapter_source(notebook), os.environ if env is None else env,
                    timeout=timeout)
    run.close()
    return run.nb


def tables(nb) -> dict[str, dict]:
    """Every table the notebook displayed, by name: {"columns": [...], "rows": [[...]]}."""
    found = {}
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            payload = output.get("data", {}).get(TABLE_MIME)
            if payload:
                found[payload["name"]] = payload
    return found


def table_rows(nb, name: str) -> list[dict]:
    """One table as a list of {column label: value} rows."""
    table = tables(nb)[name]
    return [dict(zip(table["columns"], row)) for row in table["rows"]]


def markdown_outputs(nb) -> str:
    """All prose that code cells displayed as Markdown, joined (not the Markdown copy of
    each table, which is there for print)."""
    parts = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            text = data.get("text/markdown")
            if text and TABLE_MIME not in data:
                parts.append(text)
    return "\n".join(parts)
