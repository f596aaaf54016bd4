"""`python -m runtime data`: every fixture file checked, the metadata kept true.

The command runs in a subprocess, as an author runs it, on a copy of data/riverton
(``data_copy``) or on the committed data; the edits are those of the fixture tests
(fixture_edits.py).
"""
from __future__ import annotations

import subprocess
import sys

import pytest

from runtime.fixture import ATTACK_PASSAGES_FILE, HANDBOOK_FILE, METADATA_FILE, fingerprint, read_metadata
from runtime.paths import PROJECT_ROOT

from fixture_edits import field, replace, rows


def data(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "runtime", "data", *args], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=300)


def test_check_validates_every_artifact_of_the_metadata(riverton):
    result = data("check")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"{name}: {rows} rows ok" for name, rows in zip(riverton.metadata["artifact"],
                                                        riverton.metadata["rows"])]


def _add(row):
    return rows(lambda table: table.append(row))


@pytest.mark.parametrize(("artifact", "edit", "count"), [
    (HANDBOOK_FILE, replace(b"Mill Street", b"Mill Road"), 15),
    (HANDBOOK_FILE, _add(["H16", "parking", "Parking is free behind the centre.",
                          "Invented for a test", "Not part of the book."]), 16),
    (ATTACK_PASSAGES_FILE, _add(["P08", "transit", "Bus passes now cost $9.", "Invented attack "
                                 "text for teaching: a test row", "planted", ""]), 9),
], ids=["changed text", "added passage", "added planted passage"])
def test_update_metadata_records_a_deliberate_edit(data_copy, artifact, edit, count):
    """Check fails after the edit; update-metadata validates the file with its own schema,
    recounts it and rewrites its fingerprint, and nothing else in the metadata changes."""
    before = (data_copy / METADATA_FILE).read_text(encoding="utf-8")
    recorded = read_metadata(data_copy).set_index("artifact").loc[artifact]
    edit(data_copy / artifact)
    failed = data("--data-dir", str(data_copy), "check")
    assert failed.returncode == 1 and METADATA_FILE in failed.stderr
    assert f"column '{'rows' if count != recorded['rows'] else 'fingerprint'}'" in failed.stderr
    result = data("--data-dir", str(data_copy), "update-metadata", artifact)
    assert result.returncode == 0, result.stderr
    assert f"{artifact}: {count} rows ok" in result.stdout
    assert (data_copy / METADATA_FILE).read_text(encoding="utf-8") == before.replace(
        f",{recorded['rows']},{recorded['fingerprint']}\n",
        f",{count},{fingerprint(data_copy / artifact)}\n")


@pytest.mark.parametrize(("artifact", "row", "says"), [
    (HANDBOOK_FILE, 2, "duplicate ID 'H01'"),
    (ATTACK_PASSAGES_FILE, 1, "value 'H01' does not match"),
], ids=["duplicate handbook ID", "borrowed planted ID"])
def test_update_metadata_refuses_an_invalid_file_and_leaves_the_metadata(data_copy, artifact, row, says):
    field(row, passage_id="H01")(data_copy / artifact)
    before = (data_copy / METADATA_FILE).read_bytes()
    result = data("--data-dir", str(data_copy), "update-metadata", artifact)
    assert result.returncode == 1
    assert f"{artifact}, row {row} (line {row + 1}), column 'passage_id': {says}" in result.stderr
    assert (data_copy / METADATA_FILE).read_bytes() == before


def test_a_csv_artifact_without_a_schema_is_refused(data_copy):
    (data_copy / "notes.csv").write_text("note\nnot declared\n", encoding="utf-8")
    _add(["notes.csv", "notes", "a test", "CC-BY-4.0", "2026-12-02", "1", "0" * 64])(
        data_copy / METADATA_FILE)
    result = data("--data-dir", str(data_copy), "update-metadata", "notes.csv")
    assert result.returncode == 1 and "notes.csv: has no schema" in result.stderr
