"""runtime/files.py: the one writer every file written over an older one goes through."""
from __future__ import annotations

import json

import pytest

from runtime.files import write_json_atomic, write_text_atomic


def test_the_text_lands_byte_for_byte_and_nothing_else_is_left(tmp_path):
    path = tmp_path / "new" / "folder" / "file.csv"
    text = "a,b\n1,\u00e9\r\n"  # line ends exactly as given, on every system
    assert write_text_atomic(path, text) == path
    assert path.read_bytes() == text.encode("utf-8")
    assert [p.name for p in path.parent.iterdir()] == ["file.csv"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "transcript.jsonl"
    path.write_text("old\n", encoding="utf-8")
    with pytest.raises(UnicodeEncodeError):
        write_text_atomic(path, "half \ud800 written")  # a lone surrogate has no UTF-8
    assert path.read_text(encoding="utf-8") == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["transcript.jsonl"]


def test_without_overwrite_an_existing_file_is_left_alone(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text("a student's review\n", encoding="utf-8")
    with pytest.raises(FileExistsError, match="mine.csv"):
        write_text_atomic(path, "a template\n", overwrite=False)
    assert path.read_text(encoding="utf-8") == "a student's review\n"
    assert [p.name for p in tmp_path.iterdir()] == ["mine.csv"]
    assert write_text_atomic(tmp_path / "other.csv", "x\n", overwrite=False).read_text() == "x\n"


def test_json_is_indented_and_sorted_unless_told_otherwise(tmp_path):
    path = write_json_atomic(tmp_path / "keys.json", {"b": 1, "a": [2]})
    assert path.read_text(encoding="utf-8") == json.dumps({"a": [2], "b": 1}, indent=1)
    write_json_atomic(path, {"b": 1, "a": 2}, indent=2, sort_keys=False)
    assert path.read_text(encoding="utf-8") == json.dumps({"b": 1, "a": 2}, indent=2)
