"""The execution cache of the build without Quarto: never stale, never needlessly slow.

Each test builds a small temporary book that carries a copy of the `helpers` package and
a `data/` folder, changes one input, and checks what the next build did: re-used the
cached execution (and said so), or executed again and said why. A cache that is too eager
would serve a stale page; one that is too lazy would execute on a prose edit.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import nbformat
import pytest

from bookkit.cache import (
    CACHE_DIR_NAME,
    LessonKey,
    ProjectInputs,
    environment_digests,
    explain,
    installed_distributions,
)
from bookkit.build import read_chapter, Chapter
from helpers.paths import PROJECT_ROOT
from projects import SAMPLE_LESSON as LESSON, clean_environment, code, markdown, run_book, write_project

PAGE = Path("_book") / "lessons" / "01-sample.html"
SLUG = "lessons--01-sample"


def write_book(root: Path, cells=None) -> Path:
    """The sample book of test_build, with a copy of helpers/ and a data file its lesson reads."""
    if not (root / "helpers").exists():
        shutil.copytree(PROJECT_ROOT / "helpers", root / "helpers",
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints"))
    (root / "data").mkdir(parents=True, exist_ok=True)
    if not (root / "data" / "numbers.txt").exists():
        (root / "data" / "numbers.txt").write_text("3\n4\n", encoding="utf-8")
    return write_project(root, cells or default_cells(), title="Cached lesson")


def default_cells(prose: str = "The numbers are read from the data folder.", code_extra: str = ""):
    return [
        markdown(f"# Numbers\n\n{prose}"),
        code("from pathlib import Path\nnumbers = [int(x) for x in Path('data/numbers.txt').read_text().split()]"),
        code(f"#| output: asis\nprint(f'The total is **{{sum(numbers)}}**.'){code_extra}"),
        markdown("That is all."),
    ]


def write_lesson(root: Path, cells) -> None:
    write_project(root, cells, title="Cached lesson")


@pytest.fixture(autouse=True)
def clean_reader_env(monkeypatch):
    """No reader setting of a developer's shell reaches the pre-render steps run here (a
    server URL would execute every lesson); the builds run in
    :func:`projects.clean_environment`."""
    for name in list(os.environ):
        if name.startswith(("RIVERTON_READER_", "RIVERTON_REVIEWS_")):
            monkeypatch.delenv(name)


def build(root: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return run_book(root, "--engine", "nbclient", *args, env=env or clean_environment())


def decision(result: subprocess.CompletedProcess) -> str:
    """What the build printed it did with the lesson ("re-used: ..." or "executed: ...")."""
    for line in result.stdout.splitlines():
        if line.startswith("[build]") and "01-sample.html" in line:
            return line.split("01-sample.html", 1)[1].strip().lstrip("0123456789. s").strip()
    raise AssertionError(f"the build did not report the lesson:\n{result.stdout}\n{result.stderr}")


def entries(root: Path) -> list[dict]:
    folder = root / CACHE_DIR_NAME / "executed" / SLUG
    if not folder.is_dir():
        return []
    return [json.loads((child / "entry.json").read_text()) for child in sorted(folder.iterdir())
            if (child / "entry.json").is_file()]


def page(root: Path) -> str:
    return (root / PAGE).read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A book built once; tests copy it (with its cache) and change one thing each."""
    root = write_book(tmp_path_factory.mktemp("cached") / "book")
    result = build(root)
    assert result.returncode == 0, result.stdout + result.stderr
    assert decision(result) == "executed: no earlier run"
    return root


@pytest.fixture
def book(built, tmp_path):
    copy = tmp_path / "book"
    shutil.copytree(built, copy)
    return copy


def test_an_unchanged_book_re_uses_the_execution_and_says_when(book):
    before = page(book)
    result = build(book)
    assert result.returncode == 0, result.stderr
    executed_at = entries(book)[0]["executed_at"]
    assert decision(result) == f"re-used: executed {executed_at}, inputs unchanged"
    assert page(book) == before
    assert "The total is <strong>7</strong>." in before


def test_a_markdown_only_edit_reaches_the_page_without_executing(book):
    write_lesson(book, default_cells(prose="A sentence that was just written."))
    result = build(book)
    assert result.returncode == 0, result.stderr
    assert decision(result).startswith("re-used:")
    text = page(book)
    assert "A sentence that was just written." in text
    assert "The numbers are read from the data folder." not in text
    assert "The total is <strong>7</strong>." in text  # the cached outputs are spliced in
    assert len(entries(book)) == 1


def test_a_data_edit_executes_again_and_the_page_shows_the_new_result(book):
    (book / "data" / "numbers.txt").write_text("3\n4\n5\n", encoding="utf-8")
    result = build(book)
    assert result.returncode == 0, result.stderr
    assert decision(result) == "executed: data/numbers.txt changed"
    assert "The total is <strong>12</strong>." in page(book)
    (book / "data" / "extra.csv").write_text("x\n1\n", encoding="utf-8")  # untracked files count
    assert decision(build(book)) == "executed: data/extra.csv added"


def test_code_and_helper_edits_execute_again_and_undoing_one_re_uses_the_first_run(book):
    first = entries(book)[0]
    write_lesson(book, default_cells(code_extra="\nprint('and one more line')"))
    result = build(book)
    assert result.returncode == 0, result.stderr
    assert decision(result) == "executed: code changed in cell 4"
    assert "and one more line" in page(book)
    write_lesson(book, default_cells())
    result = build(book)
    assert decision(result) == f"re-used: executed {first['executed_at']}, inputs unchanged"
    assert "and one more line" not in page(book)
    # The next explanation compares with the execution just re-used, not the newest one.
    parsing = book / "helpers" / "parsing.py"
    parsing.write_text(parsing.read_text() + "\n# an edit to a helper\n")
    result = build(book)
    assert result.returncode == 0, result.stderr
    assert decision(result) == "executed: helpers/parsing.py changed"


def test_reader_environment_variables_invalidate_and_their_values_are_not_stored(book):
    env = clean_environment(RIVERTON_READER_MODE="recorded", RIVERTON_READER_API_KEY="s3cret-value")
    result = build(book, env=env)
    assert result.returncode == 0, result.stderr
    assert "RIVERTON_READER_API_KEY set" in decision(result)
    assert "RIVERTON_READER_MODE set" in decision(result)
    assert all("s3cret-value" not in (child / "entry.json").read_text()
               for child in (book / CACHE_DIR_NAME / "executed" / SLUG).iterdir())
    env["RIVERTON_READER_MODE"] = "live"
    assert decision(build(book, env=env)) == "executed: RIVERTON_READER_MODE changed"
    assert decision(build(book, env=env)).startswith("re-used:")


def test_a_package_version_change_invalidates(book, tmp_path):
    """A distribution that appears, then changes version, on the kernel's import path."""
    site = tmp_path / "site"

    def install(version):
        shutil.rmtree(site, ignore_errors=True)
        info = site / f"riverton_probe-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: riverton-probe\nVersion: {version}\n")

    install("1.0")
    env = clean_environment(PYTHONPATH=os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    assert decision(build(book, env=env)) == "executed: package versions changed (riverton-probe 1.0 installed)"
    install("1.1")
    assert decision(build(book, env=env)) == "executed: package versions changed (riverton-probe 1.0 -> 1.1)"


def test_weights_appearing_on_the_machine_invalidate(book, tmp_path):
    """auto mode runs the pinned reader live once its weights are in the Hugging Face cache."""
    from helpers.reader.registry import REGISTRY

    spec = REGISTRY["qwen_1_5b_instruct"]
    hub = tmp_path / "hub"
    snapshot = hub / f"models--{spec.model_id.replace('/', '--')}" / "snapshots" / spec.revision
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (snapshot / "model.safetensors").write_bytes(b"")
    env = clean_environment(HF_HUB_CACHE=str(hub))
    assert decision(build(book, env=env)) == "executed: weights of reader qwen_1_5b_instruct now present"


def test_a_failed_execution_leaves_no_entry_and_publishes_nothing(book):
    before = page(book)
    known = {e["key"] for e in entries(book)}
    write_lesson(book, default_cells(code_extra="\nraise ValueError('the gate says no')"))
    result = build(book)
    assert result.returncode == 1
    assert "ValueError: the gate says no" in result.stderr
    assert {e["key"] for e in entries(book)} == known, "a failed execution left a cache entry"
    assert not [p for p in (book / CACHE_DIR_NAME).rglob("*") if p.name.endswith(".tmp")]
    assert page(book) == before
    assert sorted(p.name for p in (book / "_book").rglob("*.html")) == ["01-sample.html", "index.html"]
    # and it fails again next time: a failure is never cached
    again = build(book)
    assert again.returncode == 1
    assert f"{LESSON}: executing (code changed in cell 4)" in again.stdout


def test_files_edited_while_a_lesson_executes_are_not_vouched_for(book):
    cells = default_cells()
    cells.insert(2, code("Path('data/numbers.txt').write_text('1\\n')  # edits its own input"))
    write_lesson(book, cells)
    result = build(book)
    assert result.returncode == 0, result.stderr
    assert f"files changed while {LESSON} executed; its result is not cached" in result.stdout
    # The next build executes again: the entry it could have used was never written.
    again = decision(build(book))
    assert again.startswith("executed:") and "data/numbers.txt changed" in again, again


def test_an_edit_to_quarto_yml_executes_again(book):
    config = book / "_quarto.yml"
    config.write_text(config.read_text() + "# an edit to the book's configuration\n")
    result = build(book)
    assert result.returncode == 0, result.stderr
    assert decision(result) == "executed: _quarto.yml changed"
    assert decision(build(book)).startswith("re-used:")


def test_an_edit_to_the_front_matter_executes_again(book):
    write_project(book, default_cells(), title="A new title for the lesson")
    result = build(book)
    assert result.returncode == 0, result.stderr
    assert decision(result) == "executed: front matter changed"
    assert "A new title for the lesson" in page(book)


def test_fresh_executes_anyway_and_prints_no_kernel_tcp_warning(book):
    result = build(book, "--fresh")
    assert result.returncode == 0, result.stderr
    assert decision(result) == "executed: --fresh"
    assert "without encryption" not in result.stderr, result.stderr
    assert "without encryption" not in result.stdout


REVIEW_CELLS = [
    markdown("# Reviews\n\nThe students' reviews are counted."),
    code("from helpers.review import reviews_dir\n"
         "rows = sum(len(p.read_text().splitlines()) - 1 for p in sorted(reviews_dir().glob('*.csv')))"),
    code("#| output: asis\nprint(f'There are **{rows}** review rows.')"),
]


def test_an_edit_in_a_reviews_folder_outside_data_executes_again(book, tmp_path):
    """Lesson 4 reads $RIVERTON_REVIEWS_DIR; its files are inputs even outside data/."""
    reviews = tmp_path / "my-reviews"
    reviews.mkdir()
    (reviews / "mine.csv").write_text("review_id,verdict\nR1,supported\n", encoding="utf-8")
    write_lesson(book, REVIEW_CELLS)
    env = clean_environment(RIVERTON_REVIEWS_DIR=str(reviews))
    first = build(book, env=env)
    assert first.returncode == 0, first.stderr
    assert "There are <strong>1</strong> review rows." in page(book)
    assert decision(build(book, env=env)).startswith("re-used:")

    (reviews / "mine.csv").write_text("review_id,verdict\nR1,supported\nR2,unsupported\n", encoding="utf-8")
    result = build(book, env=env)
    assert result.returncode == 0, result.stderr
    assert decision(result) == "executed: $RIVERTON_REVIEWS_DIR/mine.csv changed"
    assert "There are <strong>2</strong> review rows." in page(book)
    (reviews / "yours.csv").write_text("review_id,verdict\nR3,supported\n", encoding="utf-8")
    assert decision(build(book, env=env)) == "executed: $RIVERTON_REVIEWS_DIR/yours.csv added"
    assert "There are <strong>3</strong> review rows." in page(book)


class _Server:
    """A real HTTP server on 127.0.0.1 whose reply can change behind the same URL."""

    def __init__(self, reply: str):
        import http.server
        import threading

        self.reply = reply
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = owner.reply.encode("utf-8")
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


SERVER_CELLS = [
    markdown("# A reply from the server"),
    code("import os, urllib.request\n"
         "reply = urllib.request.urlopen(os.environ['RIVERTON_READER_URL'], timeout=30).read().decode()"),
    code("#| output: asis\nprint(f'The server said **{reply}**.')"),
]


def test_a_lesson_always_executes_while_a_reader_server_is_set(book):
    """The server may change its engine or weights behind one URL: nothing is re-used or kept."""
    write_lesson(book, SERVER_CELLS)
    server = _Server("engine one")
    try:
        env = clean_environment(RIVERTON_READER_URL=server.url)
        kept = {e["key"] for e in entries(book)}
        first = build(book, env=env)
        assert first.returncode == 0, first.stderr
        assert decision(first) == f"executed: replies come from the server at {server.url}"
        assert "The server said <strong>engine one</strong>." in page(book)
        server.reply = "engine two"  # same URL, same inputs on this machine
        second = build(book, env=env)
        assert decision(second) == f"executed: replies come from the server at {server.url}"
        assert "The server said <strong>engine two</strong>." in page(book)
        assert {e["key"] for e in entries(book)} == kept, "a server's run was cached"
    finally:
        server.close()

    # A password in the URL is not printed; RIVERTON_READER_MODE=server alone does the same.
    url = "http://student:pa55word@127.0.0.1:9/v1"
    write_lesson(book, default_cells())
    result = build(book, env=clean_environment(RIVERTON_READER_URL=url))
    assert decision(result) == "executed: replies come from the server at http://127.0.0.1:9/v1"
    assert "pa55word" not in result.stdout + result.stderr
    result = build(book, env=clean_environment(RIVERTON_READER_MODE="server"))
    assert decision(result) == "executed: replies come from a reader server (RIVERTON_READER_MODE=server)"
    # Without a server the lesson's last execution here stands again.
    assert decision(build(book)).startswith("re-used:")


# --------------------------------------------------------------------------- the key itself


def _chapter_nb(root: Path):
    return read_chapter(root, Chapter(source=LESSON, page="x.html"))


def test_key_ignores_prose_and_cell_positions_but_not_code_or_tags(tmp_path):
    root = write_book(tmp_path / "book")
    inputs = ProjectInputs.collect(root)
    key = LessonKey.compute(_chapter_nb(root), inputs)
    cells = default_cells(prose="Other words entirely.")
    cells.insert(0, markdown("A new opening paragraph moves every cell down."))
    write_lesson(root, cells)
    moved = LessonKey.compute(_chapter_nb(root), inputs)
    assert moved.key == key.key
    assert moved.cell_numbers == [n + 1 for n in key.cell_numbers]

    nb = _chapter_nb(root)
    nb.cells[2].metadata["tags"] = ["raises-exception"]
    assert LessonKey.compute(nb, inputs).key != key.key
    inline = default_cells(prose="The total is `{python} sum(numbers)`.")
    write_lesson(root, inline)
    assert LessonKey.compute(_chapter_nb(root), inputs).key != key.key  # inline code is executed


def test_explain_names_each_kind_of_change(tmp_path):
    root = write_book(tmp_path / "book")
    inputs = ProjectInputs.collect(root)
    key = LessonKey.compute(_chapter_nb(root), inputs)
    old = key.record()
    assert explain(None, key) == ["no earlier run"]
    changed = json.loads(json.dumps(old))
    changed["components"]["packages"]["transformers"] = "0.0.1"
    changed["components"]["runtime"]["python"] = "3.10.0"
    changed["components"]["files"].pop("helpers/text.py")
    reasons = explain(changed, key)
    assert f"Python version changed (3.10.0 -> {inputs.runtime['python']})" in reasons
    assert f"package versions changed (transformers 0.0.1 -> {inputs.packages['transformers']})" in reasons
    assert "helpers/text.py added" in reasons


def test_key_components_come_from_the_machine():
    import importlib.metadata

    packages = installed_distributions()
    for name in ("nbclient", "riverton-qa-book", "transformers"):
        assert packages[name] == importlib.metadata.version(name)
    digests = environment_digests({"RIVERTON_READER_MODE": "live", "HOME": "/x", "RIVERTON_X": ""})
    assert sorted(digests) == ["RIVERTON_READER_MODE", "RIVERTON_X"]
    assert "live" not in json.dumps(digests)


# --------------------------------------------------------------------------- Quarto's freezer
# The decisions of the pre-render and post-render steps, on a book whose frozen results are
# written here as Quarto lays them out; tests/test_quarto.py checks them with real Quarto.


def _freeze_result(root: Path) -> Path:
    """What a render that executes the lesson does: Quarto writes the outputs into the
    notebook file and freezes the result, whose "hash" is that of the file it executed."""
    from bookkit.freeze import _quarto_hash, frozen_result

    result = frozen_result(root, LESSON)
    result.parent.mkdir(parents=True, exist_ok=True)
    notebook = _quarto_writes_outputs(root)
    result.write_text(json.dumps({"hash": _quarto_hash(notebook), "result": {}}))
    return result


def _pre(root: Path) -> str:
    """What pre-render says of the lesson (it may first put back a notebook with outputs)."""
    from bookkit.freeze import pre_render

    said = []
    assert pre_render(root, said.append) == 0
    (line,) = [line for line in said if line.startswith(f"[freeze] {LESSON}: ")]
    return line.split(": ", 1)[1]


def _post(root: Path, monkeypatch) -> None:
    from bookkit.freeze import post_render

    monkeypatch.setenv("QUARTO_PROJECT_OUTPUT_DIR", str(root / "_book"))
    monkeypatch.setenv("QUARTO_PROJECT_OUTPUT_FILES", "_book/index.html\n_book/lessons/01-sample.html")
    monkeypatch.delenv("QUARTO_USE_FILE_FOR_PROJECT_OUTPUT_FILES", raising=False)
    assert post_render(root, lambda line: None) == 0


def test_freeze_steps_keep_a_result_only_while_its_key_holds(tmp_path, monkeypatch):
    from bookkit.freeze import hidden_freeze_folder

    root = write_book(tmp_path / "book")
    assert _pre(root) == "will execute: no earlier run"
    result = _freeze_result(root)  # the render executed the lesson and froze it...
    _post(root, monkeypatch)  # ...and succeeded
    assert _pre(root) == "frozen result kept: inputs unchanged"
    assert result.is_file()

    hidden = hidden_freeze_folder(root, LESSON)
    hidden.mkdir(parents=True)
    (root / "data" / "numbers.txt").write_text("5\n", encoding="utf-8")
    assert _pre(root) == "frozen result removed, will execute: data/numbers.txt changed"
    assert not result.exists() and not hidden.exists()
    # No render recorded the new key yet, so the next pre-render still says why.
    assert _pre(root) == "will execute: data/numbers.txt changed"


def test_a_failed_render_records_nothing_but_its_fresh_results_stand(tmp_path, monkeypatch):
    root = write_book(tmp_path / "book")
    _pre(root)
    _freeze_result(root)
    _post(root, monkeypatch)
    (root / "data" / "numbers.txt").write_text("5\n", encoding="utf-8")
    time.sleep(0.05)
    assert _pre(root) == "frozen result removed, will execute: data/numbers.txt changed"
    time.sleep(0.05)
    _freeze_result(root)  # this lesson executed; another one failed, so no post-render
    assert _pre(root) == "frozen result kept: it was made with these inputs"
    assert _pre(root) == "frozen result kept: inputs unchanged"  # and now it is recorded

    # An edit made (and undone) after the key was computed leaves the result unproven.
    (root / "data" / "numbers.txt").write_text("6\n", encoding="utf-8")
    _pre(root)
    time.sleep(0.05)
    _freeze_result(root)
    (root / "data" / "numbers.txt").write_text("6\n", encoding="utf-8")  # touched during the render
    assert _pre(root).startswith("frozen result removed, will execute")


def _quarto_writes_outputs(root: Path) -> str:
    """What Quarto does to a .ipynb it executes: outputs and counts go into the file itself."""
    path = root / LESSON
    nb = nbformat.read(path, as_version=4)
    for number, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
        cell.execution_count = number + 1
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="ran\n")]
    nbformat.write(nb, path)
    return path.read_text(encoding="utf-8")


def test_the_notebook_goes_back_as_committed_and_quarto_still_thaws_it(tmp_path, monkeypatch):
    from bookkit.freeze import _quarto_hash, executed_notebook, frozen_result, hidden_freeze_folder

    root = write_book(tmp_path / "book")
    committed = (root / LESSON).read_bytes()
    _pre(root)
    executed = _quarto_writes_outputs(root)
    hidden = hidden_freeze_folder(root, LESSON) / "execute-results" / "html.json"
    for result in (frozen_result(root, LESSON), hidden):
        result.parent.mkdir(parents=True, exist_ok=True)
        result.write_text(json.dumps({"hash": _quarto_hash(executed), "result": {"markdown": "x"}}))
    _post(root, monkeypatch)
    assert (root / LESSON).read_bytes() == committed
    # Quarto thaws a frozen result only when its hash is that of the notebook as it is now.
    for result in (frozen_result(root, LESSON), hidden):
        frozen = json.loads(result.read_text())
        assert frozen["hash"] == _quarto_hash(committed.decode("utf-8"))
        assert frozen["result"] == {"markdown": "x"}
    # The executed notebook is kept for the PDF of a later render that thaws the result.
    assert executed_notebook(root, LESSON) == executed


def test_a_thawed_lesson_gets_its_executed_notebook_for_the_pdf(tmp_path, monkeypatch):
    """The PDF is rendered from the notebook's outputs: for a lesson Quarto will thaw,
    pre-render puts the notebook of that execution in place (and points the frozen result
    at it); post-render puts the committed one back. With no such notebook, or one that
    another execution made, the lesson executes again rather than print without outputs."""
    from bookkit.freeze import _executed_folder, _quarto_hash, frozen_result

    root = write_book(tmp_path / "book")
    committed = (root / LESSON).read_text(encoding="utf-8")
    _pre(root)
    result = _freeze_result(root)
    executed = (root / LESSON).read_text(encoding="utf-8")
    _post(root, monkeypatch)
    assert (root / LESSON).read_text(encoding="utf-8") == committed

    assert _pre(root) == "frozen result kept: inputs unchanged"
    assert (root / LESSON).read_text(encoding="utf-8") == executed
    assert json.loads(result.read_text())["hash"] == _quarto_hash(executed)  # Quarto thaws it
    _post(root, monkeypatch)
    assert (root / LESSON).read_text(encoding="utf-8") == committed
    assert json.loads(result.read_text())["hash"] == _quarto_hash(committed)

    # The kept notebook belongs to another execution than the frozen result.
    frozen = json.loads(result.read_text())
    result.write_text(json.dumps({**frozen, "result": {"markdown": "another execution"}}))
    assert _pre(root) == ("frozen result removed, will execute: no notebook of its execution is "
                          "kept for the PDF")
    assert not result.exists()
    assert (root / LESSON).read_text(encoding="utf-8") == committed
    _freeze_result(root)
    _post(root, monkeypatch)
    assert _pre(root) == "frozen result kept: inputs unchanged"
    _post(root, monkeypatch)

    shutil.rmtree(_executed_folder(root))
    assert _pre(root) == ("frozen result removed, will execute: no notebook of its execution is "
                          "kept for the PDF")
    assert not frozen_result(root, LESSON).exists()


def test_a_pdf_that_would_show_a_lesson_without_outputs_is_removed(tmp_path, monkeypatch):
    """The PDF does not execute lessons; rendered alone (`quarto render --to typst`) after a
    lesson's key changed, it would print that lesson bare: post-render fails and removes it."""
    from bookkit.freeze import post_render

    root = write_book(tmp_path / "book")
    assert _pre(root) == "will execute: no earlier run"
    pdf = root / "_book" / "book.pdf"
    pdf.parent.mkdir()
    pdf.write_bytes(b"%PDF-1.7")  # Typst rendered the notebook as committed, without outputs
    monkeypatch.setenv("QUARTO_PROJECT_OUTPUT_DIR", str(root / "_book"))
    monkeypatch.setenv("QUARTO_PROJECT_OUTPUT_FILES", "_book/book.pdf")
    monkeypatch.delenv("QUARTO_USE_FILE_FOR_PROJECT_OUTPUT_FILES", raising=False)
    said = []
    assert post_render(root, said.append) == 1
    assert not pdf.exists()
    assert any(line.startswith("[freeze] removed _book/book.pdf: it would show " + LESSON + " without outputs")
               for line in said), said

    # Rendered with the HTML, the lesson executed first and the PDF had its outputs.
    _pre(root)
    _freeze_result(root)
    pdf.write_bytes(b"%PDF-1.7")
    monkeypatch.setenv("QUARTO_PROJECT_OUTPUT_FILES", f"_book/book.pdf\n_book/{Path(LESSON).with_suffix('.html')}")
    assert post_render(root, said.append) == 0
    assert pdf.is_file()


def test_a_failed_render_s_outputs_are_taken_out_by_the_next_pre_render(tmp_path):
    from bookkit.freeze import pre_render

    root = write_book(tmp_path / "book")
    committed = (root / LESSON).read_bytes()
    _pre(root)
    _quarto_writes_outputs(root)  # ...and the render failed later: no post-render
    said = []
    assert pre_render(root, said.append) == 0
    assert (root / LESSON).read_bytes() == committed
    assert said[0] == "[freeze] put back 1 notebook(s) a failed render had written outputs into"


def test_a_notebook_edited_during_the_render_is_left_as_it_is(tmp_path, monkeypatch):
    from bookkit.freeze import post_render

    root = write_book(tmp_path / "book")
    _pre(root)
    path = root / LESSON
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("print('new cell')"))
    nbformat.write(nb, path)
    edited = path.read_bytes()
    said = []
    monkeypatch.setenv("QUARTO_PROJECT_OUTPUT_DIR", str(root / "_book"))
    monkeypatch.setenv("QUARTO_PROJECT_OUTPUT_FILES", "_book/index.html")
    monkeypatch.delenv("QUARTO_USE_FILE_FOR_PROJECT_OUTPUT_FILES", raising=False)
    post_render(root, said.append)
    assert path.read_bytes() == edited
    assert f"[freeze] {LESSON}: edited during the render; left as it is" in said


def test_display_only_variables_stay_out_of_the_key():
    from bookkit.cache import environment_digests

    digests = environment_digests({"RIVERTON_BOOK_BUILD": "quarto", "RIVERTON_PROGRESS": "0",
                                   "RIVERTON_READER_MODE": "recorded"})
    assert sorted(digests) == ["RIVERTON_READER_MODE"]


def test_pre_render_executes_every_lesson_while_a_reader_server_is_set(tmp_path, monkeypatch):
    root = write_book(tmp_path / "book")
    _pre(root)
    _freeze_result(root)
    _post(root, monkeypatch)
    assert _pre(root) == "frozen result kept: inputs unchanged"

    monkeypatch.setenv("RIVERTON_READER_URL", "http://127.0.0.1:8000/v1")
    said = "frozen result removed, will execute: replies come from the server at http://127.0.0.1:8000/v1"
    assert _pre(root) == said
    _freeze_result(root)  # the render asked the server...
    _post(root, monkeypatch)  # ...and succeeded: the same key, with the server set, still executes
    assert _pre(root) == said
    monkeypatch.delenv("RIVERTON_READER_URL")
    _freeze_result(root)
    _post(root, monkeypatch)
    # Back without a server: the frozen result holds the server's replies, so it goes too.
    assert _pre(root) == "frozen result removed, will execute: RIVERTON_READER_URL unset"
    monkeypatch.setenv("RIVERTON_READER_MODE", "server")
    assert _pre(root) == "will execute: replies come from a reader server (RIVERTON_READER_MODE=server)"


def test_pre_render_notices_an_edit_in_a_reviews_folder_outside_data(tmp_path, monkeypatch):
    root = write_book(tmp_path / "book")
    reviews = tmp_path / "reviews"
    reviews.mkdir()
    (reviews / "mine.csv").write_text("review_id,verdict\nR1,supported\n", encoding="utf-8")
    monkeypatch.setenv("RIVERTON_REVIEWS_DIR", str(reviews))
    _pre(root)
    _freeze_result(root)
    _post(root, monkeypatch)
    assert _pre(root) == "frozen result kept: inputs unchanged"
    (reviews / "mine.csv").write_text("review_id,verdict\nR1,unsupported\n", encoding="utf-8")
    assert _pre(root) == "frozen result removed, will execute: $RIVERTON_REVIEWS_DIR/mine.csv changed"


def test_pre_render_says_that_quarto_executes_a_lesson_whose_file_changed(tmp_path, monkeypatch):
    """The key ignores prose; Quarto's freeze does not, and pre-render must not pretend otherwise."""
    root = write_book(tmp_path / "book")
    _pre(root)
    result = _freeze_result(root)
    _post(root, monkeypatch)
    assert _pre(root) == "frozen result kept: inputs unchanged"
    _post(root, monkeypatch)  # a render that thawed the lesson
    write_lesson(root, default_cells(prose="Prose written after the render."))
    assert _pre(root) == ("will execute: notebook text changed; Quarto's freeze re-executes a lesson "
                          "on any edit of its file")
    assert result.is_file()  # Quarto overwrites it when it executes the lesson
    _freeze_result(root)  # Quarto froze the edited notebook
    _post(root, monkeypatch)
    assert _pre(root) == "frozen result kept: inputs unchanged"


def test_input_folders_are_those_outside_data_resolved_from_the_project(tmp_path):
    from bookkit.cache import INPUT_FOLDER_VARIABLES, input_folders
    from helpers.review import REVIEWS_ENV

    assert REVIEWS_ENV in INPUT_FOLDER_VARIABLES
    root = tmp_path / "book"
    (root / "data" / "reviews").mkdir(parents=True)
    assert input_folders(root, {}) == {}
    assert input_folders(root, {REVIEWS_ENV: "data/reviews"}) == {}  # hashed with data/ already
    assert input_folders(root, {REVIEWS_ENV: str(root / "data" / "reviews")}) == {}
    assert input_folders(root, {REVIEWS_ENV: "mine"}) == {REVIEWS_ENV: (root / "mine").resolve()}
    outside = tmp_path / "elsewhere"
    assert input_folders(root, {REVIEWS_ENV: str(outside)}) == {REVIEWS_ENV: outside.resolve()}


def test_server_reason_names_the_server_without_its_password():
    from bookkit.cache import server_reason

    assert server_reason({}) is None
    assert server_reason({"RIVERTON_READER_MODE": "recorded"}) is None
    assert server_reason({"RIVERTON_READER_URL": "  "}) is None
    assert (server_reason({"RIVERTON_READER_URL": "https://me:secret@class.example:8443/v1"})
            == "replies come from the server at https://class.example:8443/v1")
    assert server_reason({"RIVERTON_READER_MODE": "server"}) == (
        "replies come from a reader server (RIVERTON_READER_MODE=server)")


# --------------------------------------------------------------------------- atomic writes


def test_a_page_that_cannot_be_written_leaves_the_old_page_and_no_temporary_file(tmp_path):
    from bookkit.cache import PageCache

    pages = PageCache(tmp_path)
    pages.put(LESSON, "key-1", "<p>first</p>")
    with pytest.raises(UnicodeEncodeError):
        pages.put(LESSON, "key-2", "<p>half \ud800 written</p>")  # a lone surrogate: no UTF-8
    assert pages.get(LESSON, "key-1") == "<p>first</p>"
    assert pages.get(LESSON, "key-2") is None
    assert sorted(p.name for p in pages.folder.iterdir()) == [f"{SLUG}.html", f"{SLUG}.json"]


def test_rehashing_a_frozen_result_leaves_no_temporary_file(tmp_path):
    from bookkit.freeze import _quarto_hash, _rehash_frozen, frozen_result

    root = tmp_path
    result = frozen_result(root, LESSON)
    result.parent.mkdir(parents=True)
    result.write_text(json.dumps({"hash": _quarto_hash("executed"), "result": {"markdown": "m"}}))
    stray = result.with_name(f".{result.name}.tmp")  # the name a fixed-name writer would take
    stray.write_text("someone else's")
    _rehash_frozen(root, LESSON, "executed", "restored")
    assert json.loads(result.read_text()) == {"hash": _quarto_hash("restored"), "result": {"markdown": "m"}}
    assert stray.read_text() == "someone else's"
    assert sorted(p.name for p in result.parent.iterdir()) == sorted([result.name, stray.name])


# --------------------------------------------------------------------------- kernel configuration


def test_kernel_config_writes_its_filter_and_refuses_a_file_it_did_not_write(tmp_path):
    import logging

    from bookkit import kernel_config

    path = kernel_config.install(tmp_path)
    assert path == tmp_path / "etc" / "ipython" / "ipython_kernel_config.py"
    text = path.read_text()
    assert text.startswith(kernel_config.MARKER)
    assert kernel_config.install(tmp_path) == path and path.read_text() == text  # its own: rewritten

    # The file, run as ipykernel runs it, drops that one message and keeps every other.
    logger = logging.getLogger("IPKernelApp")
    before = list(logger.filters)
    try:
        exec(compile(text, str(path), "exec"), {})
        (added,) = [f for f in logger.filters if f not in before]

        def record(message):
            return logging.LogRecord("IPKernelApp", logging.WARNING, __file__, 1, message, None, None)

        assert not added.filter(record(kernel_config.MESSAGE + ". This is not recommended."))
        assert added.filter(record("Kernel started"))
    finally:
        logger.filters[:] = before

    path.write_text("c = get_config()  # a user's own settings\n")
    with pytest.raises(FileExistsError, match="was not written by bookkit.kernel_config"):
        kernel_config.install(tmp_path)
    assert path.read_text() == "c = get_config()  # a user's own settings\n"
