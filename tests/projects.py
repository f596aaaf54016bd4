"""Temporary copies of this project, for tests that build or render the book."""
from __future__ import annotations

import csv
import shutil
from pathlib import Path

from helpers.fixture import HANDBOOK_FILE, METADATA_FILE, update_metadata
from helpers.paths import DATA_DIR, PROJECT_ROOT

COPIED = ["helpers", "data", "lessons", "_quarto.yml", "index.qmd", "book.scss", ".gitignore"]


def copy_project(target: Path) -> Path:
    """Copy what a build reads to ``target``: helpers, data, lessons, `_quarto.yml`, the
    front page, the theme and `.gitignore` (a render must leave the last unchanged)."""
    for name in COPIED:
        source = PROJECT_ROOT / name
        if source.is_dir():
            shutil.copytree(source, target / name,
                            ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
        else:
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def question_subset(data: Path, source: str, name: str, count: int, description: str) -> Path:
    """A question file ``name`` in a new folder ``data``: the first ``count`` questions of the
    project's ``source`` file, beside copies of the handbook and the metadata, which gets a
    row for it with its real fingerprint. Returns the file's path."""
    data.mkdir()
    for fixture_file in (HANDBOOK_FILE, METADATA_FILE):
        shutil.copyfile(DATA_DIR / fixture_file, data / fixture_file)
    with open(DATA_DIR / source, newline="") as handle:
        rows = list(csv.reader(handle))
    with open(data / name, "w", newline="") as handle:
        csv.writer(handle, lineterminator="\n").writerows(rows[:count + 1])
    with open(data / METADATA_FILE, "a") as handle:
        handle.write(f"{name},{description},test,CC-BY-4.0,2026-12-02,{count}," + "0" * 64 + "\n")
    update_metadata([name], data)
    return data / name
