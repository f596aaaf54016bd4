"""The lesson key and both caches it guards: never stale, never needlessly slow.

The build without Quarto re-uses an execution only while the lesson's key holds
(bookkit/cache.py); Quarto's freeze scripts (bookkit/freeze.py) keep a frozen result only
while it holds. Each test builds a small book of two lessons that carries copies of
`helpers/` and `runtime/` (the packages lessons import, hashed into every key), a `data/`
file the first lesson reads and a folder of reviews outside `data/` (named by
``RIVERTON_REVIEWS_DIR``), changes one input, and checks what each lesson did next: re-used
(and said when) or executed again (and said why). The freeze steps run here on frozen
results laid out as Quarto lays them out; tests/test_quarto.py checks them with real Quarto.
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

from bookkit.build import Chapter, read_chapter
from bookkit.cache import CACHE_DIR_NAME, LessonKey, ProjectInputs, environment_digests, explain
from pagecheck import serve_folder
from projects import (SAMPLE_LESSON as LESSON, clean_environment, code, copy_project, markdown, post_render,
                      run_book, write_notebook, write_project)

SECOND = "lessons/02-second.ipynb"
LESSONS = (LESSON, SECOND)
#: Lesson 4's folder of students' reviews, outside data/ (read from the project folder).
REVIEWS = {"RIVERTON_REVIEWS_DIR": "reviews"}


def default_cells(prose: str = "The numbers are read from the data folder.", code_extra: str = ""):
    return [
        markdown(f"# Numbers\n\n{prose}"),
        code("from pathlib import Path\nnumbers = [int(x) for x in Path('data/numbers.txt').read_text().split()]"),
        code(f"#| output: asis\nprint(f'The total is **{{sum(numbers)}}**.'){code_extra}"),
        markdown("That is all."),
    ]


def write_lesson(root: Path, cells, title: str = "Cached lesson") -> None:
    write_notebook(root / LESSON, cells, title)


def write_book(root: Path) -> Path:
    """Two lessons (the first reads data/numbers.txt), copies of the lessons' packages, and
    a reviews folder outside data/."""
    copy_project(root, ("helpers", "exercises", "runtime"))
    (root / "data").mkdir()
    (root / "data" / "numbers.txt").write_text("3\n4\n", encoding="utf-8")
    (root / "reviews").mkdir()
    (root / "reviews" / "mine.csv").write_text("review_id,verdict\nR1,supported\n", encoding="utf-8")
    write_project(root, default_cells(), title="Cached lesson", chapters=["index.qmd", LESSON, SECOND])
    write_notebook(root / SECOND, [code("second = 6 * 7"), code("#| output: asis\nprint(f'Second: **{second}**.')")],
                   "Second lesson")
    return root


@pytest.fixture(autouse=True)
def clean_reader_env(monkeypatch):
    """No reader or review setting of a developer's shell reaches the freeze steps run here;
    the builds run in :func:`projects.clean_environment`."""
    for name in [n for n in os.environ if n.startswith(("RIVERTON_READER_", "RIVERTON_REVIEWS_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("RIVERTON_REVIEWS_DIR", REVIEWS["RIVERTON_REVIEWS_DIR"])


def build(root: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return run_book(root, "--engine", "nbclient", *args, env=env or clean_environment(**REVIEWS))


def decision(result: subprocess.CompletedProcess, lesson: str = LESSON) -> str:
    """What the build printed it did with ``lesson`` ("re-used: ..." or "executed: ...")."""
    page = Path(lesson).with_suffix(".html").name
    for line in result.stdout.splitlines():
        if line.startswith("[build]") and page in line:
            return line.split(page, 1)[1].strip().lstrip("0123456789. s").strip()
    raise AssertionError(f"the build did not report {lesson}:\n{result.stdout}\n{result.stderr}")


def entries(root: Path, lesson: str = LESSON) -> list[dict]:
    folder = root / CACHE_DIR_NAME / "executed" / Path(lesson).with_suffix("").as_posix().replace("/", "--")
    return [json.loads(path.read_text()) for path in sorted(folder.glob("*/entry.json"))]


def reused(root: Path, lesson: str = LESSON) -> str:
    """What the build says of a lesson it re-uses: when the entry it used last was executed."""
    latest = max(entries(root, lesson), key=lambda e: e.get("used_at") or e["executed_at"])
    return f"re-used: executed {latest['executed_at']}, inputs unchanged"


def page(root: Path, lesson: str = LESSON) -> str:
    return (root / "_book" / Path(lesson).with_suffix(".html")).read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A book built once; tests copy it (with its cache) and change one thing each."""
    root = write_book(tmp_path_factory.mktemp("cached") / "book")
    result = build(root)
    assert result.returncode == 0, result.stdout + result.stderr
    assert [decision(result, lesson) for lesson in LESSONS] == ["executed: no earlier run"] * 2
    return root


@pytest.fixture
def book(built, tmp_path):
    shutil.copytree(built, tmp_path / "book")
    return tmp_path / "book"


def append(name: str, text: str = "\n# an edit\n"):
    """A change: ``text`` appended to the book's file ``name``."""
    def change(root: Path) -> None:
        with open(root / name, "a", encoding="utf-8") as handle:
            handle.write(text)
    return change


def probe_distribution(root: Path) -> dict:
    """A distribution installed on the kernel's import path."""
    info = root.parent / "site" / "riverton_probe-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: riverton-probe\nVersion: 1.0\n")
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(info.parent), os.environ.get("PYTHONPATH")]))}


def pinned_weights(root: Path) -> dict:
    """The pinned reader's weights in a Hugging Face cache (``auto`` mode would run it live)."""
    from runtime.registry import REGISTRY

    spec = REGISTRY["qwen_1_5b_instruct"]
    snapshot = root.parent / "hub" / f"models--{spec.model_id.replace('/', '--')}" / "snapshots" / spec.revision
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (snapshot / "model.safetensors").write_bytes(b"")
    return {"HF_HUB_CACHE": str(root.parent / "hub")}


TOTAL = "The total is <strong>7</strong>."
#: name: (the change, which may return more environment for the build; why the key of
#: lesson 1 changed, None when it holds; whether it changed the second lesson's key too;
#: what lesson 1's page shows afterwards). Every change executes exactly the lessons whose
#: key it changed, and a second build re-uses them all.
CHANGES = {
    "nothing": (lambda root: None, None, False, [TOTAL]),
    "prose": (lambda root: write_lesson(root, default_cells(prose="A sentence just written.")), None, False,
              ["A sentence just written.", TOTAL]),  # the cached outputs, spliced into the new prose
    "a cell": (lambda root: write_lesson(root, default_cells(code_extra="\nprint('one more line')")),
               "code changed in cell 4", False, ["one more line"]),
    "front matter": (lambda root: write_lesson(root, default_cells(), title="A new title"),
                     "front matter changed", False, ["A new title"]),
    "helpers/": (append("helpers/parsing.py"), "helpers/parsing.py changed", True, [TOTAL]),
    "runtime/": (append("runtime/display.py"), "runtime/display.py changed", True, [TOTAL]),
    "a new runtime file": (append("runtime/extra.py"), "runtime/extra.py added", True, [TOTAL]),
    "data/": (append("data/numbers.txt", "5\n"), "data/numbers.txt changed", True,
              ["The total is <strong>12</strong>."]),
    "an untracked data file": (append("data/extra.csv", "x\n1\n"), "data/extra.csv added", True, [TOTAL]),
    "the reviews folder": (append("reviews/mine.csv", "R2,unsupported\n"),
                           "$RIVERTON_REVIEWS_DIR/mine.csv changed", True, [TOTAL]),
    "_quarto.yml": (append("_quarto.yml"), "_quarto.yml changed", True, [TOTAL]),
    "a reader setting": (lambda root: {"RIVERTON_READER_MODE": "recorded", "RIVERTON_READER_API_KEY": "s3cret"},
                         "RIVERTON_READER_API_KEY set; RIVERTON_READER_MODE set", True, [TOTAL]),
    "a package": (probe_distribution, "package versions changed (riverton-probe 1.0 installed)", True, [TOTAL]),
    "reader weights": (pinned_weights, "weights of reader qwen_1_5b_instruct now present", True, [TOTAL]),
}


@pytest.mark.parametrize("name", CHANGES)
def test_a_change_executes_exactly_the_lessons_whose_key_it_changes(book, name):
    change, why, shared, shown = CHANGES[name]
    env = clean_environment(**REVIEWS, **(change(book) or {}))
    result = build(book, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert decision(result) == (f"executed: {why}" if why else reused(book))
    assert decision(result, SECOND) == (f"executed: {why}" if shared else reused(book, SECOND))
    assert [text for text in shown if text not in page(book)] == []
    assert ("The numbers are read from the data folder." in page(book)) == (name != "prose")
    assert "s3cret" not in json.dumps(entries(book)), "a variable's value was stored"
    again = build(book, env=env)
    assert [decision(again, lesson) for lesson in LESSONS] == [reused(book, lesson) for lesson in LESSONS]


def test_undoing_an_edit_re_uses_the_first_run_and_explains_against_it(book):
    first = entries(book)[0]
    write_lesson(book, default_cells(code_extra="\nprint('and one more line')"))
    assert decision(build(book)) == "executed: code changed in cell 4"
    write_lesson(book, default_cells())
    assert decision(build(book)) == f"re-used: executed {first['executed_at']}, inputs unchanged"
    assert "and one more line" not in page(book)
    # The next explanation compares with the execution just re-used, not the newest one.
    append("helpers/text.py")(book)
    assert decision(build(book)) == "executed: helpers/text.py changed"


def test_a_failed_execution_leaves_no_entry_and_publishes_nothing(book):
    before, known = page(book), {e["key"] for e in entries(book)}
    write_lesson(book, default_cells(code_extra="\nraise ValueError('the gate says no')"))
    result = build(book)
    assert result.returncode == 1
    assert "ValueError: the gate says no" in result.stderr
    assert {e["key"] for e in entries(book)} == known, "a failed execution left a cache entry"
    assert not [p for p in (book / CACHE_DIR_NAME).rglob("*") if p.name.endswith(".tmp")]
    assert page(book) == before
    assert sorted(p.name for p in (book / "_book").rglob("*.html")) == ["01-sample.html", "02-second.html",
                                                                        "index.html"]
    again = build(book)  # a failure is never cached
    assert again.returncode == 1 and f"{LESSON}: executing (code changed in cell 4)" in again.stdout


def test_files_edited_while_a_lesson_executes_are_not_vouched_for(book):
    cells = default_cells()
    cells.insert(2, code("Path('data/numbers.txt').write_text('1\\n')  # edits its own input"))
    write_lesson(book, cells)
    result = build(book)
    assert result.returncode == 0, result.stderr
    assert f"files changed while {LESSON} executed; its result is not cached" in result.stdout
    # The next build executes again: the entry it could have used was never written.
    assert "data/numbers.txt changed" in decision(build(book))


def test_fresh_executes_anyway_and_prints_no_kernel_tcp_warning(book):
    result = build(book, "--fresh")
    assert result.returncode == 0, result.stderr
    assert [decision(result, lesson) for lesson in LESSONS] == ["executed: --fresh"] * 2
    assert "without encryption" not in result.stdout + result.stderr


def test_a_lesson_always_executes_while_a_reader_server_is_set(book):
    """The server may change its engine or weights behind one URL: nothing is re-used or kept."""
    write_lesson(book, [markdown("# A reply from the server"),
                        code("import os, urllib.request\nurl = os.environ['RIVERTON_READER_URL']\n"
                             "reply = urllib.request.urlopen(url.replace('student:pa55word@', ''), timeout=30).read().decode()"),
                        code("#| output: asis\nprint(f'The server said **{reply}**.')")])
    kept, served = [entries(book, name) for name in LESSONS], book.parent / "served"
    served.mkdir()
    # A real HTTP server whose reply (the file v1 it serves) changes behind the same URL.
    with serve_folder(served) as base:
        shown = f"{base}v1"
        env = clean_environment(**REVIEWS, RIVERTON_READER_URL=shown.replace("//", "//student:pa55word@"))
        for reply in ("engine one", "engine two"):  # the same URL, the same inputs on this machine
            (served / "v1").write_text(reply, encoding="utf-8")
            result = build(book, env=env)
            assert [decision(result, lesson) for lesson in LESSONS] == [
                f"executed: replies come from the server at {shown}"] * 2
            assert f"The server said <strong>{reply}</strong>." in page(book)
            assert "pa55word" not in result.stdout + result.stderr
    assert [entries(book, lesson) for lesson in LESSONS] == kept, "a server's run was cached"
    write_lesson(book, default_cells())
    result = build(book, env=clean_environment(**REVIEWS, RIVERTON_READER_MODE="server"))
    assert [decision(result, lesson) for lesson in LESSONS] == [
        "executed: replies come from a reader server (RIVERTON_READER_MODE=server)"] * 2
    result = build(book)  # without a server, the last executions here stand again
    assert [decision(result, lesson) for lesson in LESSONS] == [reused(book, lesson) for lesson in LESSONS]


# --------------------------------------------------------------------------- the key itself


def _chapter_nb(root: Path):
    return read_chapter(root, Chapter(source=LESSON, page="x.html"))


def test_key_ignores_prose_and_cell_positions_but_not_code_tags_or_inline_code(tmp_path):
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
    write_lesson(root, default_cells(prose="The total is `{python} sum(numbers)`."))
    assert LessonKey.compute(_chapter_nb(root), inputs).key != key.key  # inline code is executed
    # Every file of the packages the lessons import is in the key.
    for package in ("helpers", "exercises", "runtime"):
        assert {f"{package}/{p.relative_to(root / package).as_posix()}" for p in (root / package).rglob("*.py")
                if "__pycache__" not in p.parts} <= set(inputs.files), package


def test_explain_names_each_kind_of_change(tmp_path):
    root = write_book(tmp_path / "book")
    inputs = ProjectInputs.collect(root)
    key = LessonKey.compute(_chapter_nb(root), inputs)
    assert explain(None, key) == ["no earlier run"]
    changed = json.loads(json.dumps(key.record()))
    changed["components"]["packages"]["transformers"] = "0.0.1"
    changed["components"]["runtime"]["python"] = "3.10.0"
    changed["components"]["files"].pop("runtime/readers.py")
    changed["components"]["files"]["helpers/gone.py"] = "0" * 64
    reasons = explain(changed, key)
    assert f"Python version changed (3.10.0 -> {inputs.runtime['python']})" in reasons
    assert f"package versions changed (transformers 0.0.1 -> {inputs.packages['transformers']})" in reasons
    assert "runtime/readers.py added" in reasons and "helpers/gone.py removed" in reasons


def test_key_components_come_from_the_machine_and_its_environment(tmp_path):
    import importlib.metadata

    from bookkit.cache import INPUT_FOLDER_VARIABLES, input_folders, installed_distributions, server_reason
    from runtime.config import REVIEWS_DIR as REVIEWS_ENV

    packages = installed_distributions()
    for name in ("nbclient", "riverton-qa-book", "transformers"):
        assert packages[name] == importlib.metadata.version(name)
    digests = environment_digests({"RIVERTON_READER_MODE": "live", "HOME": "/x", "RIVERTON_X": "",
                                   "RIVERTON_BOOK_BUILD": "quarto", "RIVERTON_PROGRESS": "0"})
    assert sorted(digests) == ["RIVERTON_READER_MODE", "RIVERTON_X"]  # display-only variables stay out
    assert "live" not in json.dumps(digests)
    assert REVIEWS_ENV in INPUT_FOLDER_VARIABLES
    root = tmp_path / "book"
    (root / "data" / "reviews").mkdir(parents=True)
    assert input_folders(root, {}) == {}
    assert input_folders(root, {REVIEWS_ENV: "data/reviews"}) == {}  # hashed with data/ already
    assert input_folders(root, {REVIEWS_ENV: str(root / "data" / "reviews")}) == {}
    assert input_folders(root, {REVIEWS_ENV: "mine"}) == {REVIEWS_ENV: (root / "mine").resolve()}
    assert input_folders(root, {REVIEWS_ENV: str(tmp_path / "x")}) == {REVIEWS_ENV: (tmp_path / "x").resolve()}
    assert server_reason({}) is None
    assert server_reason({"RIVERTON_READER_MODE": "recorded", "RIVERTON_READER_URL": "  "}) is None
    assert (server_reason({"RIVERTON_READER_URL": "https://me:secret@class.example:8443/v1"})
            == "replies come from the server at https://class.example:8443/v1")
    assert server_reason({"RIVERTON_READER_MODE": "server"}) == (
        "replies come from a reader server (RIVERTON_READER_MODE=server)")


# --------------------------------------------------------------------------- Quarto's freezer
# The decisions of the pre-render and post-render steps, on frozen results written here as
# Quarto lays them out; tests/test_quarto.py checks them with real Quarto.


def _quarto_writes_outputs(root: Path, lesson: str = LESSON) -> str:
    """What Quarto does to a .ipynb it executes: outputs and counts go into the file itself."""
    nb = nbformat.read(root / lesson, as_version=4)
    for number, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
        cell.execution_count = number + 1
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="ran\n")]
    nbformat.write(nb, root / lesson)
    return (root / lesson).read_text(encoding="utf-8")


def _freeze_result(root: Path, lesson: str = LESSON, result: dict | None = None) -> Path:
    """What a render that executes a lesson does: Quarto writes the outputs into the
    notebook file and freezes the result, whose "hash" is that of the file it executed."""
    from bookkit.freeze import _quarto_hash, frozen_result

    frozen = frozen_result(root, lesson)
    frozen.parent.mkdir(parents=True, exist_ok=True)
    frozen.write_text(json.dumps({"hash": _quarto_hash(_quarto_writes_outputs(root, lesson)),
                                  "result": result or {}}))
    return frozen


def _pre(root: Path) -> dict[str, str]:
    """What pre-render says of each lesson (it may first put back notebooks with outputs)."""
    from bookkit.freeze import pre_render

    said = []
    assert pre_render(root, said.append) == 0
    return {lesson: line.split(": ", 1)[1] for line in said for lesson in LESSONS
            if line.startswith(f"[freeze] {lesson}: ")}


PAGES = "_book/index.html\n_book/lessons/01-sample.html\n_book/lessons/02-second.html"


def _rendered(root: Path, monkeypatch) -> None:
    """A render that executed both lessons and succeeded."""
    for lesson in LESSONS:
        _freeze_result(root, lesson)
    post_render(root, monkeypatch, PAGES)


KEPT = "frozen result kept: inputs unchanged"
NOTEBOOK_TEXT = "will execute: notebook text changed; Quarto's freeze re-executes a lesson on any edit of its file"


@pytest.fixture
def frozen_book(tmp_path, monkeypatch):
    """A book both of whose lessons a successful render executed and froze."""
    root = write_book(tmp_path / "book")
    assert _pre(root) == {lesson: "will execute: no earlier run" for lesson in LESSONS}
    _rendered(root, monkeypatch)
    assert _pre(root) == {lesson: KEPT for lesson in LESSONS}
    post_render(root, monkeypatch, PAGES)
    return root


@pytest.mark.parametrize("name", [n for n in CHANGES if n not in {"a package", "reader weights", "nothing"}])
def test_pre_render_removes_exactly_the_frozen_results_whose_key_changed(frozen_book, monkeypatch, name):
    from bookkit.freeze import frozen_result, hidden_freeze_folder

    root = frozen_book
    change, why, shared, _ = CHANGES[name]
    for name_value in (change(root) or {}).items():
        monkeypatch.setenv(*name_value)
    for lesson in LESSONS:
        (hidden_freeze_folder(root, lesson) / "execute-results").mkdir(parents=True)
    expected = {LESSON: f"frozen result removed, will execute: {why}" if why else NOTEBOOK_TEXT,
                SECOND: f"frozen result removed, will execute: {why}" if shared else KEPT}
    assert _pre(root) == expected
    for lesson, said in expected.items():
        removed = said.startswith("frozen result removed")
        assert frozen_result(root, lesson).exists() != removed and hidden_freeze_folder(root, lesson).exists() != removed
    # No render recorded the new keys yet, so the next pre-render still says why.
    assert _pre(root) == {lesson: said.removeprefix("frozen result removed, ") for lesson, said in expected.items()}


def test_a_failed_render_records_nothing_but_its_fresh_results_stand(frozen_book):
    root = frozen_book
    append("data/numbers.txt", "5\n")(root)
    time.sleep(0.05)
    assert _pre(root)[LESSON] == "frozen result removed, will execute: data/numbers.txt changed"
    time.sleep(0.05)
    _freeze_result(root)  # this lesson executed; the other one failed, so no post-render
    assert _pre(root)[LESSON] == "frozen result kept: it was made with these inputs"
    assert _pre(root)[LESSON] == KEPT  # and now it is recorded
    # An edit made (and undone) after the key was computed leaves the result unproven.
    append("data/numbers.txt", "6\n")(root)
    _pre(root)
    time.sleep(0.05)
    _freeze_result(root)
    (root / "data" / "numbers.txt").write_text((root / "data" / "numbers.txt").read_text())  # touched meanwhile
    assert _pre(root)[LESSON].startswith("frozen result removed, will execute")


def test_the_notebook_goes_back_as_committed_and_its_execution_serves_the_pdf(tmp_path, monkeypatch):
    """Quarto executes a .ipynb in place; post-render puts the committed notebook back and
    points both frozen copies at it (Quarto thaws a result only for the file it froze),
    keeping the executed notebook. The PDF is rendered from the notebook's outputs, so for a
    lesson Quarto will thaw pre-render puts that execution in place, and post-render the
    committed notebook back; with no such notebook, or one another execution made, the
    lesson executes again rather than print without outputs."""
    from bookkit.freeze import _executed_folder, _quarto_hash, executed_notebook, frozen_result, hidden_freeze_folder

    root = write_book(tmp_path / "book")
    committed = (root / LESSON).read_text(encoding="utf-8")
    _pre(root)
    result = _freeze_result(root, result={"markdown": "x"})
    executed = (root / LESSON).read_text(encoding="utf-8")
    hidden = hidden_freeze_folder(root, LESSON) / "execute-results" / "html.json"
    hidden.parent.mkdir(parents=True)
    shutil.copyfile(result, hidden)
    _freeze_result(root, SECOND)
    post_render(root, monkeypatch, PAGES)
    assert (root / LESSON).read_text(encoding="utf-8") == committed
    for frozen in (result, hidden):
        assert json.loads(frozen.read_text()) == {"hash": _quarto_hash(committed), "result": {"markdown": "x"}}
    assert executed_notebook(root, LESSON) == executed

    assert _pre(root)[LESSON] == KEPT
    assert (root / LESSON).read_text(encoding="utf-8") == executed
    assert json.loads(result.read_text())["hash"] == _quarto_hash(executed)  # Quarto thaws it
    post_render(root, monkeypatch, PAGES)
    assert (root / LESSON).read_text(encoding="utf-8") == committed
    assert json.loads(result.read_text())["hash"] == _quarto_hash(committed)

    result.write_text(json.dumps({**json.loads(result.read_text()), "result": {"markdown": "another"}}))
    no_notebook = "frozen result removed, will execute: no notebook of its execution is kept for the PDF"
    assert _pre(root)[LESSON] == no_notebook
    assert not result.exists() and (root / LESSON).read_text(encoding="utf-8") == committed
    _freeze_result(root)
    post_render(root, monkeypatch, PAGES)
    assert _pre(root)[LESSON] == KEPT
    post_render(root, monkeypatch, PAGES)
    shutil.rmtree(_executed_folder(root))
    assert _pre(root)[LESSON] == no_notebook and not frozen_result(root, LESSON).exists()


def test_a_pdf_that_would_show_a_lesson_without_outputs_is_removed(tmp_path, monkeypatch):
    """The PDF does not execute lessons; rendered alone (`quarto render --to typst`) after a
    lesson's key changed, it would print that lesson bare: post-render fails and removes it."""
    root = write_book(tmp_path / "book")
    _pre(root)
    pdf = root / "_book" / "book.pdf"
    pdf.parent.mkdir()
    pdf.write_bytes(b"%PDF-1.7")  # Typst rendered the notebooks as committed, without outputs
    said = post_render(root, monkeypatch, "_book/book.pdf", status=1)
    assert not pdf.exists()
    assert f"[freeze] removed _book/book.pdf: it would show {LESSON}, {SECOND} without outputs" in said[0], said
    # Rendered with the HTML, the lessons executed first and the PDF had their outputs.
    _pre(root)
    pdf.write_bytes(b"%PDF-1.7")
    for lesson in LESSONS:
        _freeze_result(root, lesson)
    post_render(root, monkeypatch, f"_book/book.pdf\n{PAGES}")
    assert pdf.is_file()


def test_notebooks_a_failed_render_wrote_into_go_back_unless_edited_meanwhile(tmp_path, monkeypatch):
    from bookkit.freeze import pre_render

    root = write_book(tmp_path / "book")
    committed = (root / LESSON).read_bytes()
    _pre(root)
    _quarto_writes_outputs(root)  # ...and the render failed later: no post-render
    said = []
    assert pre_render(root, said.append) == 0
    assert (root / LESSON).read_bytes() == committed
    assert said[0] == "[freeze] put back 1 notebook(s) a failed render had written outputs into"
    nb = nbformat.read(root / LESSON, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("print('new cell')"))
    nbformat.write(nb, root / LESSON)
    edited = (root / LESSON).read_bytes()
    assert f"[freeze] {LESSON}: edited during the render; left as it is" in post_render(root, monkeypatch, "")
    assert (root / LESSON).read_bytes() == edited


def test_pre_render_executes_every_lesson_while_a_reader_server_is_set(frozen_book, monkeypatch):
    root = frozen_book
    monkeypatch.setenv("RIVERTON_READER_URL", "http://127.0.0.1:8000/v1")
    said = "frozen result removed, will execute: replies come from the server at http://127.0.0.1:8000/v1"
    assert _pre(root) == {lesson: said for lesson in LESSONS}
    _rendered(root, monkeypatch)  # the render asked the server and succeeded: the same key still executes
    assert _pre(root) == {lesson: said for lesson in LESSONS}
    monkeypatch.delenv("RIVERTON_READER_URL")
    _rendered(root, monkeypatch)
    # Back without a server: the frozen results hold the server's replies, so they go too.
    assert _pre(root)[SECOND] == "frozen result removed, will execute: RIVERTON_READER_URL unset"
    monkeypatch.setenv("RIVERTON_READER_MODE", "server")
    assert _pre(root)[SECOND] == "will execute: replies come from a reader server (RIVERTON_READER_MODE=server)"


# --------------------------------------------------------------------------- atomic writes, kernels


def test_a_page_or_a_frozen_result_is_never_left_half_written(tmp_path):
    from bookkit.cache import PageCache
    from bookkit.freeze import _quarto_hash, _rehash_frozen, frozen_result

    pages = PageCache(tmp_path)
    pages.put(LESSON, "key-1", "<p>first</p>")
    with pytest.raises(UnicodeEncodeError):
        pages.put(LESSON, "key-2", "<p>half \ud800 written</p>")  # a lone surrogate: no UTF-8
    assert pages.get(LESSON, "key-1") == "<p>first</p>" and pages.get(LESSON, "key-2") is None
    assert sorted(p.name for p in pages.folder.iterdir()) == ["lessons--01-sample.html", "lessons--01-sample.json"]

    result = frozen_result(tmp_path, LESSON)
    result.parent.mkdir(parents=True)
    result.write_text(json.dumps({"hash": _quarto_hash("executed"), "result": {"markdown": "m"}}))
    stray = result.with_name(f".{result.name}.tmp")  # the name a fixed-name writer would take
    stray.write_text("someone else's")
    _rehash_frozen(tmp_path, LESSON, "executed", "restored")
    assert json.loads(result.read_text()) == {"hash": _quarto_hash("restored"), "result": {"markdown": "m"}}
    assert stray.read_text() == "someone else's"
    assert sorted(p.name for p in result.parent.iterdir()) == sorted([result.name, stray.name])


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
        record = lambda message: logging.LogRecord("IPKernelApp", logging.WARNING, __file__, 1, message, None, None)  # noqa: E731
        assert not added.filter(record(kernel_config.MESSAGE + ". This is not recommended."))
        assert added.filter(record("Kernel started"))
    finally:
        logger.filters[:] = before
    path.write_text("c = get_config()  # a user's own settings\n")
    with pytest.raises(FileExistsError, match="was not written by bookkit.kernel_config"):
        kernel_config.install(tmp_path)
    assert path.read_text() == "c = get_config()  # a user's own settings\n"
