"""Check the fixture files and keep their metadata true: ``python -m runtime data ...``.

``check`` validates every file that ``data/riverton/riverton-handbook-metadata.csv``
lists, with the lessons' own loaders (:mod:`runtime.fixture`, :mod:`runtime.reviews`), and
prints one line per file. ``update-metadata FILE...`` is for after a deliberate edit: it
validates the named files, recounts their rows, rewrites their SHA-256 fingerprints in
the metadata (nothing else in it changes; the file is replaced atomically) and then
checks everything. A file that fails validation leaves the metadata as it was. Any
failure exits with status 1 and names the file, row, line and column.
"""
from __future__ import annotations

import argparse
import csv
import io
import os
import sys
from pathlib import Path

from .files import write_text_atomic
from .fixture import (
    ATTACK_HEADERS,
    HANDBOOK_FILE,
    METADATA_COLUMNS,
    METADATA_FILE,
    QUESTION_COLUMNS,
    REVIEW_FILE,
    FixtureError,
    attack_artifact_rows,
    check_against_metadata,
    fingerprint,
    handbook_rows,
    load_attack_fixture,
    load_handbook,
    load_questions,
    question_rows,
    read_metadata,
    read_rows,
)
from .paths import DATA_DIR
from .records import TRANSCRIPT_PATH
from .reviews import load_review, review_rows


def artifact_rows(path: Path) -> int:
    """Data rows of an artifact, after validating it where a schema is known."""
    if path.name == HANDBOOK_FILE:
        return len(handbook_rows(path))
    if path.name == REVIEW_FILE:
        return len(review_rows(path, TRANSCRIPT_PATH)[0])
    if path.suffix == ".csv" and path.name != METADATA_FILE:
        with path.open(encoding="utf-8", newline="") as handle:
            header = next(csv.reader(handle), [])
        if tuple(header) == QUESTION_COLUMNS:
            handbook_ids = {row.values["passage_id"] for row in handbook_rows(
                path.parent / HANDBOOK_FILE)}
            return len(question_rows(path, handbook_ids))
        if tuple(header) in ATTACK_HEADERS.values():
            return attack_artifact_rows(path, tuple(header))
        return len(read_rows(path, tuple(header)))
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


def update_metadata(artifacts: list[str], data_dir: str | os.PathLike = DATA_DIR) -> None:
    """Recompute rows and fingerprint for the named artifacts and rewrite the metadata."""
    data_dir = Path(data_dir)
    meta_path = data_dir / METADATA_FILE
    metadata = read_metadata(data_dir)
    for name in artifacts:
        matches = metadata.index[metadata["artifact"] == name]
        if len(matches) == 0:
            raise FixtureError(meta_path, f"has no row for {name}; add one first", column="artifact")
        path = data_dir / name
        metadata.loc[matches[0], "rows"] = artifact_rows(path)
        metadata.loc[matches[0], "fingerprint"] = fingerprint(path)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(METADATA_COLUMNS)
    for record in metadata.itertuples(index=False):
        writer.writerow([str(value) for value in record])
    write_text_atomic(meta_path, buffer.getvalue())


def check_all(data_dir: str | os.PathLike = DATA_DIR) -> list[str]:
    """Validate every artifact listed in the metadata; return one line per artifact."""
    data_dir = Path(data_dir)
    metadata = read_metadata(data_dir)
    handbook = load_handbook(data_dir, metadata)
    report = [f"{HANDBOOK_FILE}: {len(handbook)} rows ok"]
    for name in metadata["artifact"]:
        if name == HANDBOOK_FILE:
            continue
        path = data_dir / name
        if path.suffix == ".csv":
            with path.open(encoding="utf-8", newline="") as handle:
                header = tuple(next(csv.reader(handle), []))
            if header == QUESTION_COLUMNS:
                frame = load_questions(name, data_dir, handbook, metadata)
                report.append(f"{name}: {len(frame)} rows ok")
                continue
            if name == REVIEW_FILE:
                frame = load_review(data_dir, TRANSCRIPT_PATH, metadata)
                report.append(f"{name}: {len(frame)} rows ok")
                continue
            if header in ATTACK_HEADERS.values():
                load_attack_fixture(data_dir, handbook, metadata)
                rows = attack_artifact_rows(path, header)
                report.append(f"{name}: {rows} rows ok")
                continue
        check_against_metadata(path, artifact_rows(path), metadata)
        report.append(f"{name}: ok")
    return report
