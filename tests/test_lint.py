"""The project's code passes `ruff check` under pyproject.toml's rules, and every file of the
project that its configuration and documents name exists."""
from __future__ import annotations

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
