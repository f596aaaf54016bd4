"""Check the fixture files and keep their metadata true: ``python -m runtime data ...``.

``check`` validates every file that ``data/riverton/riverton-handbook-metadata.csv``
lists, each through its schema in :data:`runtime.fixture.SCHEMAS` (the review's rows also
against the transcript, by :mod:`runtime.reviews`), and prints one line per file. A CSV
file of questions of your own (the question files' header) takes the questions' schema;
any other CSV file needs a schema of its own; any other file is only counted (its
non-blank lines) and fingerprinted.
``update-metadata FILE...`` is for after a deliberate edit: it validates the named files,
recounts their rows, rewrites their SHA-256 fingerprints in the metadata (nothing else
in it changes; the file is replaced atomically) and then checks everything. A file that
fails validation leaves the metadata as it was. Any failure exits with status 1 and
names the file, row, line and column.
"""
from __future__ import annotations

import csv
import datetime
from pathlib import Path

import pandas as pd

from .files import write_csv_atomic
from .fixture import METADATA_COLUMNS, METADATA_FILE, QUESTIONS_FILE, REVIEW_FILE, SCHEMAS, \
    FixtureError, PathLike, check_against_metadata, fingerprint, read_metadata, validated
from .paths import DATA_DIR
from .reviews import review_rows


def artifact_rows(path: Path, metadata: pd.DataFrame | None = None, found=None) -> int:
    """The data rows of an artifact, validated through its schema and, with ``metadata``,
    checked against its metadata row. ``found`` holds the files validated so far."""
    questions = SCHEMAS[QUESTIONS_FILE]  # a file of questions of your own takes their schema
    schema = SCHEMAS.get(path.name) or (questions if path.suffix == ".csv" and
                                        _header(path) == tuple(questions.columns) else None)
    if schema is not None and path.name != REVIEW_FILE:
        return len(validated(path.parent, path.name, metadata, found, schema)[path.name])
    if path.name == REVIEW_FILE:
        rows = len(review_rows(path)[0])  # checked against the transcript too
    elif path.suffix == ".csv":
        raise FixtureError(path, "has no schema; declare its columns in runtime.fixture.SCHEMAS")
    else:
        rows = sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    if metadata is not None:
        check_against_metadata(path, rows, metadata)
    return rows


def _header(path: Path) -> tuple[str, ...]:
    with path.open(encoding="utf-8", newline="") as handle:
        return tuple(next(csv.reader(handle), []))


def update_metadata(artifacts: list[str], data_dir: PathLike = DATA_DIR,
                    described: dict[str, tuple[str, str, str]] | None = None) -> None:
    """Recompute rows and fingerprint for the named artifacts and rewrite the metadata.
    An artifact of ``described`` (its description, source and license) that the metadata
    does not list yet gets a row, created today."""
    data_dir = Path(data_dir)
    metadata = read_metadata(data_dir)
    for name in artifacts:
        if name in (described or {}) and name not in set(metadata["artifact"]):
            metadata.loc[len(metadata)] = [name, *described[name], datetime.date.today(), 0, ""]
        if len(matches := metadata.index[metadata["artifact"] == name]) == 0:
            raise FixtureError(data_dir / METADATA_FILE, f"has no row for {name}; add one first",
                               column="artifact")
        metadata.loc[matches[0], "rows"] = artifact_rows(data_dir / name)
        metadata.loc[matches[0], "fingerprint"] = fingerprint(data_dir / name)
    write_csv_atomic(data_dir / METADATA_FILE, METADATA_COLUMNS,
                     ([str(value) for value in row] for row in metadata.itertuples(index=False)))


def check_all(data_dir: PathLike = DATA_DIR) -> list[str]:
    """Validate every artifact listed in the metadata, each file before those that need
    it; return one line per artifact."""
    data_dir, found = Path(data_dir), {}
    metadata = read_metadata(data_dir)
    return [f"{name}: {rows} rows ok" if name in SCHEMAS else f"{name}: ok"
            for name in metadata["artifact"]
            for rows in [artifact_rows(data_dir / name, metadata, found)]]
