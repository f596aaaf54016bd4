"""Read what an executed lesson notebook shows: its tables and its computed prose.

Tables are read from the machine-readable copy that helpers.display attaches to every
table output, so the tests see exactly the rows a reader sees.
"""
from __future__ import annotations

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
