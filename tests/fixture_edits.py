"""Damage a copy of the fixture files in one precise way, and check where an error points.

Shared by the fixture tests (test_fixture.py, test_attack_fixture.py, the review tests):
each test damages a fresh copy of data/riverton (the ``data_copy`` fixture in conftest.py)
and checks that the loader names the file, row, line and column.
"""
from __future__ import annotations

import csv
import io
from pathlib import Path

from runtime.fixture import FixtureError


def replace_bytes(path: Path, old: bytes, new: bytes) -> None:
    data = path.read_bytes()
    assert data.count(old) == 1, f"{old!r} must occur once in {path.name}"
    path.write_bytes(data.replace(old, new))


def rewrite_csv(path: Path, edit) -> None:
    """Read a CSV into a list of rows (header first), apply ``edit``, write it back with LF."""
    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    edit(rows)
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    path.write_bytes(buffer.getvalue().encode("utf-8"))


def set_field(path: Path, row: int, column: str, value: str) -> None:
    """Set data row ``row`` (1 = first under the header) of ``column`` to ``value``."""
    def edit(rows):
        rows[row][rows[0].index(column)] = value
    rewrite_csv(path, edit)


def assert_where(error: FixtureError, file: str, row, line, column) -> None:
    message = str(error)
    assert error.path.name == file
    assert file in message
    assert error.row == row
    assert error.line == line
    assert error.column == column
    if row is not None:
        assert f"row {row} (line {line})" in message
    elif line is not None:
        assert f"line {line}" in message
    if column is not None:
        assert f"column '{column}'" in message
    else:
        assert "column" not in message.split(": ", 1)[0]
