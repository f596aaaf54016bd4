#!/usr/bin/env bash
# Install the test-server extra (llama-cpp-python[server], llama.cpp's OpenAI-compatible
# server) into the virtual environment, for the server-mode tests. `make book` never
# needs it.
#
# pip builds llama.cpp from source unless its wheel cache already holds a build. The flags
# keep the build portable: a native build (-march=native, AVX-512, AMX) crashes on CPUs
# that report features they cannot run. A cached wheel may have been built elsewhere or
# without these flags, so the install is checked by running the model for one token; if
# that fails, the wheel is rebuilt from source, bypassing the cache.
#
# usage: scripts/install-llama-server.sh PYTHON STAMP
# Without a compiler the install fails; the tests then skip, unless
# BOOK_REQUIRE_LLAMA_CPP=1 (as in CI), which makes it an error here and in the tests.
set -uo pipefail
PY="${1:-.venv/bin/python}"
STAMP="${2:-.venv/.llama-server-installed}"
export CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
VERSION="$("$PY" -c 'import re, tomllib; extra = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["test-server"]; print(next(re.search(r"==([^;\s]+)", r).group(1) for r in extra if r.startswith("llama-cpp-python")))')"

give_up() {
  echo "$1" >&2
  if [ "${BOOK_REQUIRE_LLAMA_CPP:-}" = "1" ]; then
    exit 1
  fi
  echo "The server-mode tests will be skipped; set BOOK_REQUIRE_LLAMA_CPP=1 to make that an error." >&2
  exit 0
}

smoke() { "$PY" -m helpers.reader.llama_server --smoke; }

echo "Installing llama-cpp-python[server]==$VERSION (a build from source takes several minutes) ..."
started=$SECONDS
"$PY" -m pip install --disable-pip-version-check -e '.[test-server]' \
  || give_up "Installing llama-cpp-python failed (it needs a C/C++ compiler)."
if ! smoke; then
  echo "The installed llama-cpp-python does not run on this CPU; rebuilding it from source without pip's cache ..." >&2
  "$PY" -m pip install --disable-pip-version-check --no-cache-dir --force-reinstall --no-deps \
      "llama-cpp-python==$VERSION" \
    || give_up "Rebuilding llama-cpp-python failed."
  smoke || give_up "llama-cpp-python still does not run on this CPU."
fi
echo "llama-cpp-python $VERSION ready in $((SECONDS - started)) s"
touch "$STAMP"
