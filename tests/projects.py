"""Temporary copies of this project, for tests that build or render the book."""
from __future__ import annotations

import shutil
from pathlib import Path

from helpers.paths import PROJECT_ROOT

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
