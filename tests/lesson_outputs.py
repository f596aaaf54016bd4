"""Read what an executed lesson notebook shows: its tables and its computed prose.

Tables are read from the machine-readable copy that helpers.display attaches to every
table output, so the tests see exactly the rows a reader sees. :func:`start` executes a
lesson and keeps its kernel up, so that a test can run more code after the lesson's
cells, as a student would (the exercise tests do).
"""
from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from helpers.display import TABLE_MIME
from helpers.paths import PROJECT_ROOT
from helpers.progress import build_environment


def execute(notebook: Path, timeout: int = 1200):
    """Execute a notebook from a clean kernel with the project root as working folder."""
    nb = nbformat.read(notebook, as_version=4)
    client = NotebookClient(
        nb, kernel_name="python3", timeout=timeout,
        resources={"metadata": {"path": str(PROJECT_ROOT)}},
    )
    # Executed like a book build: no progress bars in the outputs (helpers.progress).
    client.execute(env=build_environment("tests"))
    return nb


class LessonRun:
    """A lesson executed from a clean kernel that stays up until :meth:`close`.

    ``nb`` is the executed lesson, its outputs as a reader sees them; :meth:`run` executes
    more code in the same kernel, after the lesson's cells.
    """

    def __init__(self, notebook: Path, timeout: int = 1800,
                 env: Mapping[str, str] | None = None):
        self.notebook = Path(notebook)
        nb = nbformat.read(self.notebook, as_version=4)
        self.client = NotebookClient(
            nb, kernel_name="python3", timeout=timeout,
            resources={"metadata": {"path": str(PROJECT_ROOT)}},
        )
        kernel_env = {**os.environ, **(env or {})}
        try:
            self.client.execute(cleanup_kc=False, env=kernel_env)
        except BaseException:
            self.close()
            raise
        self.nb = copy.deepcopy(self.client.nb)

    def run(self, code: str) -> list[dict]:
        """Execute ``code`` as one more cell; its outputs (a failing cell raises)."""
        cell = nbformat.v4.new_code_cell(code)
        self.client.nb.cells.append(cell)
        self.client.execute_cell(cell, len(self.client.nb.cells) - 1)
        return list(cell.outputs)

    def close(self) -> None:
        if self.client.km is not None:
            self.client._cleanup_kernel()


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
    """All prose that code cells displayed as Markdown, joined."""
    parts = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            text = output.get("data", {}).get("text/markdown")
            if text:
                parts.append(text)
    return "\n".join(parts)
