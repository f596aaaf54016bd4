"""The project's code passes `ruff check` under pyproject.toml's rules, and every file of the
project that its configuration and documents name exists."""
from __future__ import annotations

import json
import re
import subprocess
import sys

from runtime.paths import PROJECT_ROOT

#: Files a reader writes, which the guide names as examples.
WRITTEN_BY_A_READER = {"data/reviews/my-review.csv"}
_PATH = re.compile(r"(?<![\w./$-])((?:\.?[\w-]+/)+[\w.-]+\."
                   r"(?:py|sh|yml|yaml|csv|ipynb|toml|css|j2|json|md|txt|jsonl))\b")


def _ruff(*args: str, cwd=PROJECT_ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache",
                           "--output-format", "concise", *args],
                          cwd=cwd, capture_output=True, text=True, check=False)


def test_ruff_finds_nothing_in_the_project():
    result = _ruff(".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_applies_the_projects_rules(tmp_path):
    (tmp_path / "pyproject.toml").write_text((PROJECT_ROOT / "pyproject.toml").read_text())
    (tmp_path / "long.py").write_text("NAME = 1\nimport os\n" + "# words " * 13 + "\n")
    result = _ruff("long.py", cwd=tmp_path)
    assert result.returncode == 1
    assert "E501" in result.stdout and "F401" in result.stdout and "E402" in result.stdout


def test_lesson_code_keeps_the_line_length_and_cell_options_keep_to_one_line():
    """Ruff's line length holds in lessons for every line but a cell option, which Quarto
    reads one line at a time: a YAML block (`#| tbl-cap: >-` and lines below) loses its
    caption or figure description in the Quarto render."""
    long, blocks = [], []
    for path in sorted((PROJECT_ROOT / "lessons").glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        for number, cell in enumerate(cells, start=1):
            if cell["cell_type"] != "code":
                continue
            for line in "".join(cell["source"]).splitlines():
                where = f"{path.name}, cell {number}: {line[:60]}"
                if re.match(r"#\|\s*[\w-]+:\s*[|>][+-]?\s*$", line) or line.startswith("#|  "):
                    blocks.append(where)
                elif not line.startswith("#|") and len(line) > 100:
                    long.append(where)
    assert not long, "lesson lines over 100 characters:\n" + "\n".join(long)
    assert not blocks, "cell options written as YAML blocks:\n" + "\n".join(blocks)


def test_every_project_file_the_documents_name_exists():
    named = [".ci/run", "Makefile", "README.md", "environment.yml", "pyproject.toml",
             "_quarto.yml", "guide.qmd", "index.qmd", "data/reviews/README.md"]
    missing = []
    for name in named:
        document = PROJECT_ROOT / name
        for match in _PATH.finditer(document.read_text(encoding="utf-8")):
            path = match.group(1)
            if path not in WRITTEN_BY_A_READER and "..." not in path and not any(
                    (folder / path).exists() for folder in (PROJECT_ROOT, document.parent)):
                missing.append(f"{name}: {path}")
    assert not missing, "documents name files the project does not have:\n" + "\n".join(missing)
