#!/usr/bin/env bash
# Install the test-server extra (llama-cpp-python[server], llama.cpp's OpenAI-compatible
# server) into a virtual environment of its own, for the server-mode tests. `make book`
# never needs it.
#
# The server gets its own environment (.venv-server/ by default, made from the same Python
# as .venv/) because the packages installed in .venv/ are part of every lesson's key
# (bookkit/cache.py): installing llama.cpp's server and its web stack there would make
# the next `make book` execute every lesson again, although no lesson imports them. The
# tests start the server with this environment's Python (runtime/llama_server.py).
#
# pip builds llama.cpp from source unless its wheel cache already holds a build. The flags
# keep the build portable: a native build (-march=native, AVX-512, AMX) crashes on CPUs
# that report features they cannot run. A cached wheel may have been built elsewhere or
# without these flags, so the install is checked by running the model for one token with
# the new environment's Python; if that fails, the wheel is rebuilt from source, bypassing
# the cache.
#
# usage: scripts/install-llama-server.sh PYTHON SERVER_VENV
#   PYTHON       the book's Python (.venv/bin/python): it makes the new environment, reads
#                the pins from pyproject.toml and finds the SmolLM2 file for the check
#   SERVER_VENV  the environment to create or update (.venv-server); SERVER_VENV/.installed
#                is written once the check passes
# Without a compiler the install fails; the tests then skip, unless
# BOOK_REQUIRE_LLAMA_CPP=1 (as in CI), which makes it an error here and in the tests.
set -uo pipefail
PY="${1:-.venv/bin/python}"
SERVER_VENV="${2:-.venv-server}"
SERVER_PY="$SERVER_VENV/bin/python"
export CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
# The requirements of the test-server extra, one per line, and llama-cpp-python's version.
EXTRA='import tomllib; extra = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["test-server"]'
REQUIREMENTS="$("$PY" -c "$EXTRA"'; print("\n".join(extra))')" \
  || { echo "cannot read the test-server extra of pyproject.toml with $PY" >&2; exit 1; }
VERSION="$("$PY" -c "$EXTRA"'; import re; print(next(re.search(r"==([^;\s]+)", r).group(1) for r in extra if r.startswith("llama-cpp-python")))')" \
  || { echo "the test-server extra of pyproject.toml does not pin llama-cpp-python" >&2; exit 1; }
mapfile -t REQUIREMENT_LIST <<< "$REQUIREMENTS"

give_up() {
  echo "$1" >&2
  if [ "${BOOK_REQUIRE_LLAMA_CPP:-}" = "1" ]; then
    exit 1
  fi
  echo "The server-mode tests will be skipped; set BOOK_REQUIRE_LLAMA_CPP=1 to make that an error." >&2
  exit 0
}

smoke() { "$PY" -m runtime.llama_server --smoke "$SERVER_PY"; }

echo "Installing llama-cpp-python[server]==$VERSION into $SERVER_VENV (a build from source takes several minutes) ..."
started=$SECONDS
rm -f "$SERVER_VENV/.installed"
# venv run from .venv's Python makes an environment of .venv's base Python.
"$PY" -m venv "$SERVER_VENV" || give_up "Creating the virtual environment $SERVER_VENV failed."
"$SERVER_PY" -m pip install --disable-pip-version-check "${REQUIREMENT_LIST[@]}" \
  || give_up "Installing llama-cpp-python failed (it needs a C/C++ compiler)."
if ! smoke; then
  echo "The installed llama-cpp-python does not run on this CPU; rebuilding it from source without pip's cache ..." >&2
  "$SERVER_PY" -m pip install --disable-pip-version-check --no-cache-dir --force-reinstall --no-deps \
      "llama-cpp-python==$VERSION" \
    || give_up "Rebuilding llama-cpp-python failed."
  smoke || give_up "llama-cpp-python still does not run on this CPU."
fi
echo "llama-cpp-python $VERSION ready in $SERVER_VENV in $((SECONDS - started)) s"
touch "$SERVER_VENV/.installed"
