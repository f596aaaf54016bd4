"""A malformed reader reply stops the build of lesson 1 and names the question."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from helpers.paths import PROJECT_ROOT

pytestmark = pytest.mark.slow

COPIED = ["helpers", "data", "lessons", "_quarto.yml", "index.qmd"]


def copy_project(target):
    for name in COPIED:
        source = PROJECT_ROOT / name
        if source.is_dir():
            shutil.copytree(source, target / name,
                            ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
        else:
            shutil.copy2(source, target / name)
    return target


def corrupt_transcript(project, question_id, new_output):
    path = project / "data" / "riverton" / "reader-transcript.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    changed = 0
    for i, line in enumerate(lines):
        entry = json.loads(line)
        if entry["question_id"] == question_id and entry["model_id"].startswith("Qwen/"):
            entry["raw_output"] = new_output
            lines[i] = json.dumps(entry, ensure_ascii=False)
            changed += 1
    assert changed == 1
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def build(project, output):
    env = dict(os.environ, RIVERTON_READER_MODE="recorded", PYTHONPATH=str(project))
    return subprocess.run(
        [sys.executable, "-m", "helpers.book", "--project", str(project), "--engine", "nbclient",
         "--only", "01", "--output", str(output)],
        cwd=project, env=env, capture_output=True, text=True, timeout=900,
    )


def test_third_line_in_a_recorded_reply_stops_the_build(tmp_path):
    project = copy_project(tmp_path / "book")
    bad = "Answer: NO PRIOR DATA EXPERIENCE IS REQUIRED\nSources: H12\nThanks for asking!"
    corrupt_transcript(project, "Q4", bad)
    output = tmp_path / "site"
    result = build(project, output)
    report = result.stdout + result.stderr
    assert result.returncode != 0, report
    assert "01-answering-from-retrieved-passages.ipynb" in report
    assert "ReplyParseError" in report
    assert "Q4: the reply has 3 lines, not 2" in report
    assert "Thanks for asking!" in report
    assert "parse-gate" in report  # the cell's label
    assert not output.exists(), "nothing may be published when a lesson fails"


def test_the_untouched_copy_builds(tmp_path):
    project = copy_project(tmp_path / "book")
    output = tmp_path / "site"
    result = build(project, output)
    assert result.returncode == 0, result.stdout + result.stderr
    page = output / "lessons" / "01-answering-from-retrieved-passages.html"
    assert page.exists(), sorted(p.name for p in output.rglob("*.html"))
