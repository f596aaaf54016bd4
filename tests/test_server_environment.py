"""llama.cpp's server lives in an environment of its own, out of the lessons' keys.

The packages installed in the lessons' kernel Python are part of every lesson's key
(``bookkit/cache.py``), so anything that ``make test`` installs there would make the
next ``make book`` execute every lesson again. No lesson imports llama.cpp's server, so
``make test`` installs it into ``.venv-server/`` (``scripts/install-llama-server.sh``) and
the server tests start it with that environment's Python
(``runtime/llama_server.py``).

The slow test here runs what ``make test`` installs before it runs pytest (``make
test-deps``), with the server's environment in a temporary folder, and compares every
lesson's key before and after: no lesson would execute again. It takes half a minute or so with pip's wheel cache warm, as it is once ``make test``
has installed the server for the other tests.
"""
from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from bookkit.build import load_book_config, read_chapter
from bookkit.cache import LessonKey, ProjectInputs, explain, has_code
from runtime.llama_server import (SERVER_PYTHON_VARIABLE, SERVER_VENV, LlamaServerError,
                                  llama_server_installed, llama_server_version, local_llama_server,
                                  server_python)
from runtime.paths import PROJECT_ROOT

REQUIRE = "BOOK_REQUIRE_LLAMA_CPP"


def lesson_keys() -> dict[str, LessonKey]:
    """Every lesson's key as a build of this project would compute it now."""
    importlib.invalidate_caches()
    config = load_book_config(PROJECT_ROOT)
    inputs = ProjectInputs.collect(PROJECT_ROOT, config.kernel)
    notebooks = {chapter.source: read_chapter(PROJECT_ROOT, chapter) for chapter in
                 config.chapters if chapter.source.endswith(".ipynb") and chapter.present}
    return {source: LessonKey.compute(nb, inputs) for source, nb in notebooks.items() if has_code(nb)}


def pinned_llama_cpp_version() -> str:
    extra = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text(encoding="utf-8"))[
        "project"]["optional-dependencies"]["test-server"]
    return next(re.search(r"==([^;\s]+)", r).group(1) for r in extra if r.startswith("llama-cpp-python"))


@pytest.mark.slow
@pytest.mark.llama_server
def test_installing_the_server_as_make_test_does_changes_no_lesson_key(tmp_path):
    before = lesson_keys()
    assert len(before) == 5, sorted(before)
    server_venv = tmp_path / "venv-server"
    stamp = server_venv / ".installed"
    # What `make test` installs (its test-deps), with the book's environment taken as it
    # is (-o: never remade here) and the server's environment in a temporary folder.
    book_stamp = Path(sys.executable).parent.parent / ".installed"
    env = {name: value for name, value in os.environ.items()
           if name not in {"MAKEFLAGS", "MFLAGS", "MAKELEVEL"}}
    result = subprocess.run(
        ["make", "--no-print-directory", "-o", str(book_stamp), f"VENV={book_stamp.parent}",
         f"SERVER_VENV={server_venv}", "test-deps"],
        cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    # Every lesson's key is as it was: the next build re-uses every lesson.
    after = lesson_keys()
    assert after.keys() == before.keys()
    for source, key in before.items():
        assert after[source].key == key.key, (
            f"{source} would execute again: {'; '.join(explain(key.record(), after[source]))}")
    # The kernels do not see the server at all; were it installed beside them, its
    # version would be in every key, and changing it would execute every lesson.
    packages = next(iter(after.values())).components["packages"]
    seen = sorted({"llama-cpp-python", "fastapi", "uvicorn", "sse-starlette"} & set(packages))
    assert not seen, (
        f"the lessons' kernel Python can import {seen}, which only the server tests need; "
        f"they belong in {SERVER_VENV.name}/ (remove them from {sys.prefix})")

    # The server is where the tests look for it, at the pinned version, and ran a token.
    if not stamp.is_file() and "tests will be skipped" in result.stderr:  # no compiler, say
        reason = f"llama-cpp-python could not be installed:\n{result.stderr[-2000:]}"
        if os.environ.get(REQUIRE) == "1":
            pytest.fail(f"{REQUIRE}=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    assert stamp.is_file(), f"make test-deps did not install the server into {server_venv}"
    assert "llama.cpp runs on this CPU" in result.stdout
    python = server_venv / "bin" / "python"
    assert llama_server_installed(python) and llama_server_version(python) == \
        pinned_llama_cpp_version()


def test_the_server_python_is_named_or_the_server_environment_and_must_hold_the_server(monkeypatch, tmp_path):
    """The default, a named one, a missing interpreter, and one that cannot import
    llama_cpp (a bare venv)."""
    monkeypatch.delenv(SERVER_PYTHON_VARIABLE, raising=False)
    assert server_python() == PROJECT_ROOT / ".venv-server" / "bin" / "python"
    monkeypatch.setenv(SERVER_PYTHON_VARIABLE, str(tmp_path / "bin" / "python"))
    assert server_python() == tmp_path / "bin" / "python"
    assert not llama_server_installed(tmp_path / "no-such-python")
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    assert not llama_server_installed(bare / "bin" / "python")
    monkeypatch.setenv(SERVER_PYTHON_VARIABLE, str(bare / "bin" / "python"))
    with pytest.raises(LlamaServerError, match=re.escape(f"not installed for {bare}/bin/python")):
        with local_llama_server(tmp_path / "model.gguf"):
            pass
