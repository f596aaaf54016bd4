"""Shared, read-only fixtures: the Riverton fixture, its retrieval and the six replies.

Every fixture here but ``bench`` is session-scoped and built from the committed data with
the helper package; tests must not modify what they receive (copy a frame before changing
it).
"""
from __future__ import annotations

import importlib.util
import os

from bookkit import skip_unused_schema_grammars

skip_unused_schema_grammars()  # nbformat, which many tests import, would compile them at import

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from runtime.fixture import load_riverton  # noqa: E402
from helpers.parsing import parse_outputs  # noqa: E402
from helpers.retrieval import TfidfRetriever, gold_ranks  # noqa: E402

@pytest.fixture(scope="module")
def bench(request):
    """The benchmark script that the test module names as ``SCRIPT``, imported from its
    file (``benchmarks/`` is a folder of scripts, not a package). The variables a script
    sets for its own run (its bars off, say) are taken back, so no later test inherits them."""
    script = request.module.SCRIPT
    spec = importlib.util.spec_from_file_location(script.stem, script)
    module = importlib.util.module_from_spec(spec)
    with pytest.MonkeyPatch.context() as environment:
        environment.setattr(os, "environ", os.environ.copy())
        spec.loader.exec_module(module)
    return module


# The six raw reader outputs printed on the reference render, with its visible line-break
# marker. They are a record of one render, kept so that parsing and scoring can be
# checked without a language model.
SOURCE_RAW_OUTPUTS_VISIBLE = {"Q1": "Answer: $150 per week ⏎ Sources: H08",
                              "Q2": "Answer: Applications close on October 15. ⏎ Sources: H14",
                              "Q3": "Answer: NOT IN HANDBOOK ⏎ Sources: none",
                              "Q4": "Answer: NO PRIOR DATA EXPERIENCE IS REQUIRED ⏎ Sources: H12",
                              "Q5": "Answer: NOT IN HANDBOOK ⏎ Sources: H01",
                              "Q6": "Answer: NOT IN HANDBOOK ⏎ Sources: H11"}


@pytest.fixture()
def data_copy(tmp_path):
    """A fresh copy of data/riverton that a test may damage (see fixture_edits.py)."""
    import shutil

    from runtime.paths import DATA_DIR

    target = tmp_path / "riverton"
    shutil.copytree(DATA_DIR, target)
    return target


@pytest.fixture(scope="session")
def riverton():
    """The validated handbook, questions and metadata (``load_riverton()``)."""
    return load_riverton()


@pytest.fixture(scope="session")
def handbook(riverton) -> pd.DataFrame:
    return riverton.handbook


@pytest.fixture(scope="session")
def questions(riverton) -> pd.DataFrame:
    return riverton.questions


@pytest.fixture(scope="session")
def retriever(handbook) -> TfidfRetriever:
    """The lesson's tf-idf retriever fitted on the handbook."""
    return TfidfRetriever.fit(handbook)


@pytest.fixture(scope="session")
def retrieved(retriever, questions) -> pd.DataFrame:
    """Top 3 passages with a positive score per question."""
    return retriever.rank(questions, k=3)


@pytest.fixture(scope="session")
def ranked_all(retriever, questions) -> pd.DataFrame:
    """Every passage with a positive score per question."""
    return retriever.rank(questions, k=None)


@pytest.fixture(scope="session")
def gold(ranked_all, questions) -> pd.DataFrame:
    """Gold-passage rank, score and label per question."""
    return gold_ranks(ranked_all, questions)


@pytest.fixture(scope="session")
def source_raw_outputs() -> pd.DataFrame:
    """question_id and raw_output of the six recorded replies, "⏎" turned into "\\n"."""
    return pd.DataFrame({"question_id": list(SOURCE_RAW_OUTPUTS_VISIBLE),
                         "raw_output": [text.replace(" ⏎ ", "\n") for text in SOURCE_RAW_OUTPUTS_VISIBLE.values()]})


@pytest.fixture(scope="session")
def parsed(source_raw_outputs) -> pd.DataFrame:
    """The six recorded replies after the strict parser."""
    return parse_outputs(source_raw_outputs)


@pytest.fixture(scope="session")
def book(tmp_path_factory):
    """The session's copy of the book: ``book.lesson(path)`` is that lesson executed once
    per session (its kernel stays up: ``.nb`` is the executed notebook, ``.run(code)`` runs
    more code after its cells); every kernel is shut down at the end. See book_session.py.
    """
    from book_session import SessionBook

    session = SessionBook(tmp_path_factory.mktemp("book-nbclient") / "book")
    yield session
    session.close()


@pytest.fixture(scope="session")
def nbclient_site(book):
    """The whole book built without Quarto, re-using the session's lesson executions."""
    return book.build()


@pytest.fixture(scope="session")
def quarto_build(request, tmp_path_factory):
    """The whole book built with real Quarto, started when the session starts if any test
    reads it (see :func:`pytest_collection_modifyitems`), else on first use."""
    from book_session import QuartoBuild

    build = None
    if any(_reads_quarto_site(item) for item in request.session.items):
        found = quarto_command()
        if found is not None:
            build = QuartoBuild(tmp_path_factory.mktemp("book-quarto") / "book", found).start()
    yield build
    if build is not None:
        build.stop()


@pytest.fixture(scope="session", autouse=True)
def _start_the_quarto_build(quarto_build):
    """Set up (so: start) the background Quarto build before the first test runs."""


@pytest.fixture(scope="session")
def quarto_site(quarto, quarto_build, tmp_path_factory):
    """The whole book as real Quarto builds it (waits for the background build)."""
    from book_session import QuartoBuild

    if quarto_build is None:  # not started with the session: build it now
        quarto_build = QuartoBuild(tmp_path_factory.mktemp("book-quarto") / "book", quarto)
    return quarto_build.wait()


def _reads_quarto_site(item) -> bool:
    if "quarto_site" in getattr(item, "fixturenames", ()):
        return True
    callspec = getattr(item, "callspec", None)
    return callspec is not None and callspec.params.get("site") == "quarto"


def pytest_collection_modifyitems(session, config, items):
    """The tests that read the Quarto site run last, so that its build (started with the
    session, on the second core) has the longest time to finish beside the other tests."""
    items.sort(key=_reads_quarto_site)  # stable: the order is otherwise kept


@pytest.fixture(scope="session")
def browser():
    """A headless Chromium shared by the tests of the session (skip or fail if absent)."""
    import pagecheck

    pagecheck.require_browser()
    driver = pagecheck.make_driver()
    yield driver
    driver.quit()


@pytest.fixture(scope="session")
def poppler():
    """pdftotext and pdftoppm, with which the tests read a PDF (tests/pdfcheck.py)."""
    import pdfcheck

    pdfcheck.require_poppler()


def quarto_command() -> str | None:
    """The real Quarto the tests may run: ``$QUARTO`` if set, else ``quarto`` on PATH."""
    import shutil

    named = os.environ.get("QUARTO")
    return shutil.which(named) if named else shutil.which("quarto")


@pytest.fixture(scope="session")
def quarto() -> str:
    """Path of real Quarto; skips without one, unless BOOK_REQUIRE_QUARTO=1 (as in CI)."""
    found = quarto_command()
    if found is None:
        reason = "no quarto command ($QUARTO or quarto on PATH)"
        if os.environ.get("BOOK_REQUIRE_QUARTO") == "1":
            pytest.fail(f"BOOK_REQUIRE_QUARTO=1 but {reason}")
        pytest.skip(reason)
    return found


@pytest.fixture(scope="session")
def smol_tokenizer():
    """SmolLM2's tokenizer alone, read from its GGUF file once per session (no weights)."""
    from transformers import AutoTokenizer

    from runtime.registry import get_reader_spec, package_gguf_path

    path = package_gguf_path(get_reader_spec("smollm2_135m_instruct"))
    return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name, local_files_only=True)


@pytest.fixture(scope="session")
def attack():
    """Lesson 5's attack fixture (``load_attack_fixture()``)."""
    from runtime.fixture import load_attack_fixture

    return load_attack_fixture()


@pytest.fixture
def transcript_copy(tmp_path):
    """A copy of the reader transcript that a test may write to."""
    import shutil

    from runtime.records import TRANSCRIPT_PATH

    return shutil.copyfile(TRANSCRIPT_PATH, tmp_path / "reader-transcript.jsonl")


@pytest.fixture(scope="module")
def inputs():
    """The six lesson prompts as the record command builds them (tf-idf top 3)."""
    from runtime.lessons import lesson_reader_inputs

    return lesson_reader_inputs()


@pytest.fixture
def no_server_environment(monkeypatch):
    """No reader setting of the environment (a developer's RIVERTON_READER_URL, or
    RIVERTON_PROGRESS=0 that hides the readers' progress bars, say) leaks in."""
    for name in ("RIVERTON_READER_MODE", "RIVERTON_READER_URL", "RIVERTON_READER_API_KEY",
                 "RIVERTON_READER_CONCURRENCY", "RIVERTON_READER_TIMEOUT", "RIVERTON_PROGRESS"):
        monkeypatch.delenv(name, raising=False)

