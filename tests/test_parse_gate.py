"""A malformed reader reply stops the build of lesson 1 and names the question, even after a
successful build has cached the lesson: an edit to the transcript executes it again."""
from __future__ import annotations

import json

import pytest

from projects import clean_environment, copy_project, run_book

pytestmark = pytest.mark.slow

LESSON = "lessons/01-answering-from-retrieved-passages.ipynb"
TRANSCRIPT = "data/riverton/reader-transcript.jsonl"


def corrupt_transcript(project, question_id, new_output):
    path = project / TRANSCRIPT
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
    env = clean_environment(RIVERTON_READER_MODE="recorded", PYTHONPATH=str(project))
    return run_book(project, "--engine", "nbclient", "--only", "01", "--output", str(output),
                    env=env, cwd=project, timeout=900)


def cache_entries(project):
    folder = project / ".book-cache" / "executed" / "lessons--01-answering-from-retrieved-passages"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def test_third_line_in_a_recorded_reply_executes_again_and_stops_the_build(tmp_path):
    project = copy_project(tmp_path / "book")
    first = build(project, tmp_path / "first")
    assert first.returncode == 0, first.stdout + first.stderr
    assert f"{LESSON}: executing (no earlier run)" in first.stdout
    assert (tmp_path / "first" / "lessons" / "01-answering-from-retrieved-passages.html").is_file()
    unchanged = build(project, tmp_path / "unchanged")
    assert unchanged.returncode == 0, unchanged.stderr
    assert f"{LESSON}: re-used: executed " in unchanged.stdout  # the cache would serve it...
    entries = cache_entries(project)
    assert len(entries) == 1

    bad = "Answer: NO PRIOR DATA EXPERIENCE IS REQUIRED\nSources: H12\nThanks for asking!"
    corrupt_transcript(project, "Q4", bad)
    output = tmp_path / "site"
    result = build(project, output)
    report = result.stdout + result.stderr
    # ...but the edited transcript is an input, so lesson 1 runs again and meets the gate.
    assert f"{LESSON}: executing ({TRANSCRIPT} changed)" in result.stdout, report
    assert result.returncode != 0, report
    for shown in ("01-answering-from-retrieved-passages.ipynb", "ReplyParseError",
                  "Q4: the reply has 3 lines, not 2", "Thanks for asking!", "parse-gate"):  # the cell's label
        assert shown in report, shown
    assert not output.exists(), "nothing may be published when a lesson fails"
    assert cache_entries(project) == entries, "the failed execution left a cache entry"


def test_a_changed_figure_stops_the_build_at_the_sentence_that_no_longer_holds(tmp_path):
    """A reply that still parses but changes a figure the prose quotes (Q2's exact match)
    stops the build at that sentence's guard, quoting the sentence, what it states and
    what this run gives."""
    project = copy_project(tmp_path / "book")
    corrupt_transcript(project, "Q2", "Answer: October 15\nSources: H14")
    output = tmp_path / "site"
    result = build(project, output)
    report = result.stdout + result.stderr
    assert result.returncode != 0, report
    for shown in ("ClaimMismatch", "The page says:", "Q2 has EM 0", "but this run gives"):
        assert shown in report, shown
    assert not output.exists(), "nothing may be published when a lesson fails"
