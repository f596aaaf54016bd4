"""Damage a copy of the fixture files in one precise way, and check where an error points.

Shared by the fixture tests (test_fixture.py, test_attack_fixture.py, test_data_check.py):
each case damages a fresh copy of data/riverton (the ``data_copy`` fixture in conftest.py)
with one of the edits below (each takes the path of the file it damages) and checks that
the loader's FixtureError names the file, row, line and column (:func:`refused`).
"""
from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from runtime.data_check import update_metadata
from runtime.fixture import FixtureError


def replace(old: bytes, new: bytes):
    """Replace bytes that occur exactly once in the file."""
    def edit(path: Path) -> None:
        data = path.read_bytes()
        assert data.count(old) == 1, f"{old!r} must occur once in {path.name}"
        path.write_bytes(data.replace(old, new))
    return edit


def raw(change):
    """Rewrite the file's bytes with ``change(data)``."""
    return lambda path: path.write_bytes(change(path.read_bytes()))


def rows(change):
    """Read the CSV into a list of rows (header first), apply ``change``, write it back."""
    def edit(path: Path) -> None:
        with path.open(encoding="utf-8", newline="") as handle:
            table = list(csv.reader(handle))
        change(table)
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerows(table)
        path.write_bytes(buffer.getvalue().encode("utf-8"))
    return edit


def field(row: int, **values: str):
    """Set data row ``row`` (1 = first under the header) of each named column."""
    def change(table):
        for column, value in values.items():
            table[row][table[0].index(column)] = value
    return rows(change)


def recorded(edit):
    """``edit``, then the metadata rewritten for it: a deliberate change of the file."""
    def both(path: Path) -> None:
        edit(path)
        update_metadata([path.name], path.parent)
    return both


def cases(table: dict) -> list:
    """The parameters (file, edit, where, fragments) of a table of damage, named by its keys."""
    return [pytest.param(file, edit, where, fragments, id=name)
            for name, (file, edit, where, *fragments) in table.items()]


def refused(load, data_dir: Path, where, *fragments: str) -> None:
    """``load(data_dir)`` fails with a FixtureError at ``where`` (file, data row, line,
    column; None where the message names none) whose message holds every fragment."""
    file, row, line, column = where
    with pytest.raises(FixtureError) as caught:
        load(data_dir)
    error, message = caught.value, str(caught.value)
    assert (error.path.name, error.row, error.line, error.column) == where, message
    spot = file + (f", row {row} (line {line})" if row else f", line {line}" if line else "")
    assert message.split(": ", 1)[0].endswith(spot + (f", column '{column}'" if column else ""))
    for fragment in fragments:
        assert fragment in message, message
