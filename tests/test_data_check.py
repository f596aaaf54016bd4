"""`python -m bookkit.data_check`: every fixture file checked, the metadata kept true.

The command runs in a subprocess, as an author runs it, on a copy of data/riverton
(``data_copy``); the damage helpers are those of the fixture tests (fixture_edits.py).
"""
from __future__ import annotations

import subprocess
import sys

import pytest

from bookkit.data_check import check_all
from helpers.fixture import (
    ATTACK_PASSAGES_FILE,
    ATTACK_QUESTIONS_FILE,
    HANDBOOK_FILE,
    METADATA_FILE,
    QUESTIONS_FILE,
    fingerprint,
    load_attack_fixture,
    load_riverton,
    read_metadata,
)
from helpers.paths import DATA_DIR, PROJECT_ROOT

from fixture_edits import replace_bytes, rewrite_csv, set_field


def data_check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bookkit.data_check", *args],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)


def test_check_all_reports_every_artifact_of_the_metadata(riverton):
    report = check_all(DATA_DIR)
    assert report[0] == f"{HANDBOOK_FILE}: 15 rows ok"
    assert f"{QUESTIONS_FILE}: 6 rows ok" in report
    # Lesson 5's attack files are validated with their own loader.
    assert f"{ATTACK_PASSAGES_FILE}: 5 rows ok" in report
    assert f"{ATTACK_QUESTIONS_FILE}: 6 rows ok" in report
    assert len(report) == len(riverton.metadata)


def test_check_passes_on_the_committed_data():
    result = data_check("check")
    assert result.returncode == 0, result.stderr
    assert f"{HANDBOOK_FILE}: 15 rows ok" in result.stdout
    assert f"{QUESTIONS_FILE}: 6 rows ok" in result.stdout


def test_update_metadata_repairs_a_deliberate_edit(data_copy):
    handbook_path = data_copy / HANDBOOK_FILE
    metadata_path = data_copy / METADATA_FILE
    original_metadata = metadata_path.read_bytes()
    old_digest = fingerprint(handbook_path)
    replace_bytes(handbook_path, b"Mill Street", b"Mill Road")
    new_digest = fingerprint(handbook_path)

    failed = data_check("--data-dir", str(data_copy), "check")
    assert failed.returncode == 1
    assert "fingerprint" in failed.stderr and METADATA_FILE in failed.stderr

    repaired = data_check("--data-dir", str(data_copy), "update-metadata", HANDBOOK_FILE)
    assert repaired.returncode == 0, repaired.stderr
    # Only the handbook's fingerprint changed; every other byte of the metadata is kept.
    assert metadata_path.read_bytes() == original_metadata.replace(
        old_digest.encode(), new_digest.encode())
    fixture = load_riverton(data_copy)
    assert fixture.handbook.set_index("passage_id").at["H01", "text"].endswith(
        "on Mill Road in Riverton.")
    assert data_check("--data-dir", str(data_copy), "check").returncode == 0


def _add_handbook_passage(rows):
    rows.append(["H16", "parking", "Parking is free behind the centre.",
                 "Invented for a test", "Not part of the book."])


def _add_planted_passage(rows):
    rows.append(["P05", "transit", "Bus passes now cost $9.",
                 "Invented attack text for teaching: a test row", "planted", ""])


@pytest.mark.parametrize(("artifact", "add_row", "rows", "count"), [
    (HANDBOOK_FILE, _add_handbook_passage, 16,
     lambda data: len(load_riverton(data).handbook)),
    (ATTACK_PASSAGES_FILE, _add_planted_passage, 6,
     lambda data: len(load_attack_fixture(data).passages)),
], ids=["handbook", "attack passages"])
def test_update_metadata_validates_and_recounts_rows(data_copy, artifact, add_row, rows, count):
    """A row added on purpose: check fails until update-metadata recounts the file (with
    the file's own validator) and records the new count."""
    rewrite_csv(data_copy / artifact, add_row)
    assert data_check("--data-dir", str(data_copy), "check").returncode == 1
    result = data_check("--data-dir", str(data_copy), "update-metadata", artifact)
    assert result.returncode == 0, result.stderr
    assert f"{artifact}: {rows} rows ok" in result.stdout
    assert read_metadata(data_copy).set_index("artifact").at[artifact, "rows"] == rows
    assert count(data_copy) == rows


@pytest.mark.parametrize(("artifact", "row"), [(HANDBOOK_FILE, 2), (ATTACK_PASSAGES_FILE, 1)],
                         ids=["handbook", "attack passages"])
def test_update_metadata_refuses_an_invalid_file_and_leaves_the_metadata(data_copy, artifact, row):
    """A duplicate (handbook) or borrowed (planted passage) ID: refused, naming the row and
    column, and the metadata keeps every byte."""
    set_field(data_copy / artifact, row, "passage_id", "H01")
    before = (data_copy / METADATA_FILE).read_bytes()
    result = data_check("--data-dir", str(data_copy), "update-metadata", artifact)
    assert result.returncode == 1
    assert "passage_id" in result.stderr and f"row {row}" in result.stderr
    assert (data_copy / METADATA_FILE).read_bytes() == before
