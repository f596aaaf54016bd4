"""Real Quarto: freeze re-uses a lesson only while its key holds, and a failed gate fails the render.

Runs when a `quarto` command is found ($QUARTO, or `quarto` on PATH) and is skipped
otherwise, unless BOOK_REQUIRE_QUARTO=1 (as in CI), which turns the skip into a failure.

Most checks render a small temporary book of two lessons that carries copies of this
project's `helpers`, `exercises` and `runtime` packages (which lessons import, hashed into every key) and
of `bookkit` (which holds the pre-render and post-render scripts that `_quarto.yml` names),
so each render takes seconds. One test reads the session's render of the real book
(tests/book_session.py).
"""
from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
import yaml

from bookkit.freeze import RENDERED_ALONE
from bookkit.offline import remote_assets_in_site
from runtime.llama_server import free_port
from runtime.paths import PROJECT_ROOT
from book_session import session_environment
from projects import PACKAGES, clean_environment, copy_project, write_notebook

pytestmark = pytest.mark.quarto

LESSON = "lessons/01-gate.ipynb"
SECOND_LESSON = "lessons/02-second.ipynb"
PAGE = "_book/lessons/01-gate.html"
TCP_NOISE = "Kernel is running over TCP without encryption"
TABLE_NUMBER = r"Table(?:\s|&nbsp;|\u00a0)*(\d+)\.\d+"


def real_scripts() -> dict:
    """The pre-render and post-render entries of the real `_quarto.yml`."""
    project = yaml.safe_load((PROJECT_ROOT / "_quarto.yml").read_text())["project"]
    return {"pre-render": project["pre-render"], "post-render": project["post-render"]}


def write_gate_book(root: Path) -> Path:
    """A book whose one lesson reads data/replies.txt and stops unless every reply has 2 lines.

    Each execution appends a line to `01-gate.log` outside the book, so a test can
    count how often the lesson really ran.
    """
    copy_project(root, PACKAGES)
    (root / "data").mkdir(parents=True)
    (root / "data" / "replies.txt").write_text("Answer: 5 | Sources: H1\n", encoding="utf-8")
    (root / "lessons").mkdir()
    config = {
        "project": {"type": "book", "output-dir": "_book", "execute-dir": "project", **real_scripts()},
        "book": {"title": "Gate Book", "chapters": ["index.qmd", LESSON]},
        "execute": {"enabled": True, "freeze": "auto"},
        "jupyter": "python3",
        # The book's own theme, whose stylesheet must not import a web font.
        "format": {"html": {"theme": yaml.safe_load(
            (PROJECT_ROOT / "_quarto.yml").read_text())["format"]["html"]["theme"]}},
    }
    shutil.copyfile(PROJECT_ROOT / "book.scss", root / "book.scss")
    (root / "_quarto.yml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    (root / "index.qmd").write_text("# Start {.unnumbered}\n\nThe lesson follows.\n")
    write_logged_lesson(
        root, LESSON, "The gate", "Every reply must have two fields; @tbl-replies lists them.",
        textwrap.dedent("""\
            from pathlib import Path
            import pandas as pd
            lines = Path("data/replies.txt").read_text().splitlines()"""),
        textwrap.dedent("""\
            #| label: tbl-replies
            #| tbl-cap: The replies
            pd.DataFrame({"reply": [f"REPLY<{line}>" for line in lines]})"""),
        textwrap.dedent("""\
            #| label: parse-gate
            bad = [line for line in lines if line.count("|") != 1]
            assert not bad, f"ReplyParseError: {bad[0]!r} does not have two fields\""""),
    )
    return root


def add_second_lesson(root: Path) -> Path:
    """The book at ``root`` with a second lesson, whose executions are logged too."""
    write_logged_lesson(root, SECOND_LESSON, "The second lesson", "Nothing changes here.")
    config = yaml.safe_load((root / "_quarto.yml").read_text())
    config["book"]["chapters"].append(SECOND_LESSON)
    (root / "_quarto.yml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return root


def write_logged_lesson(root: Path, lesson: str, title: str, prose: str, *code: str) -> None:
    """Lesson ``lesson`` of the book at ``root``: front matter, one prose cell, then the code
    cells (or other cells, given as notebook cells), the first of which appends a line to
    `<lesson's stem>.log` beside the book on every execution (see :func:`executions`)."""
    log = root.parent / f"{Path(lesson).stem}.log"
    logging = f"with open({str(log)!r}, 'a') as handle:\n    handle.write('executed\\n')\n"
    first, *rest = code or ("",)
    write_notebook(root / lesson, [nbformat.v4.new_markdown_cell(prose), nbformat.v4.new_code_cell(
        (logging + first).rstrip("\n")), *(c if isinstance(c, dict) else nbformat.v4.new_code_cell(c) for c in rest)],
                   title)


def render(quarto: str, root: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`quarto render` in ``root``, without the reader and review settings of this shell, with
    the variables ``env``."""
    environment = clean_environment(QUARTO_PYTHON=sys.executable, **(env or {}))
    return subprocess.run([quarto, "render", *args], cwd=root, env=environment,
                          capture_output=True, text=True, timeout=900)


def executions(root: Path, lesson: str = LESSON) -> int:
    """How many times ``lesson`` of the book at ``root`` has executed."""
    log = root.parent / f"{Path(lesson).stem}.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def page_text(root: Path) -> str:
    return (root / PAGE).read_text(encoding="utf-8")


def rendered(quarto: str, root: Path, *args: str, env: dict | None = None) -> str:
    """The report of a `quarto render` that succeeded."""
    result = render(quarto, root, *args, env=env)
    report = result.stdout + result.stderr
    assert result.returncode == 0, report[-4000:]
    return report


def counts(root: Path) -> tuple[int, int]:
    """How many times each lesson of the gate book has executed."""
    return executions(root, LESSON), executions(root, SECOND_LESSON)


def test_freeze_re_uses_each_lesson_only_while_its_key_holds(quarto, tmp_path):
    """Each change executes exactly the lessons whose key it changes (what pre-render says
    is what Quarto does), a notebook goes back as committed, and nothing else executes."""
    root = add_second_lesson(write_gate_book(tmp_path / "book"))
    committed = (root / LESSON).read_bytes()
    report = rendered(quarto, root)
    assert all(f"[freeze] {lesson}: will execute: no earlier run" in report for lesson in LESSONS)
    assert counts(root) == (1, 1)
    assert "REPLY&lt;Answer: 5 | Sources: H1&gt;" in page_text(root)
    # The front page is unnumbered, so lesson 1's first table is Table 1.1.
    assert set(re.findall(TABLE_NUMBER, page_text(root))) == {"1"}, "lesson 1's table is not numbered 1.x"
    assert TCP_NOISE not in report
    assert (root / "_freeze" / "lessons" / "01-gate" / "execute-results" / "html.json").is_file()
    # Quarto wrote the outputs into the notebooks; the post-render step put them back.
    assert (root / LESSON).read_bytes() == committed and "put back 2 notebook(s) as committed" in report
    report = rendered(quarto, root)
    assert all(f"[freeze] {lesson}: {KEPT}" in report for lesson in LESSONS) and counts(root) == (1, 1)

    env = None
    for change, why, shared in CHANGES:
        before = counts(root)
        env = change(root) or env
        report = rendered(quarto, root, env=env)
        said = f"frozen result removed, will execute: {why}" if why else NOTEBOOK_TEXT
        assert f"[freeze] {LESSON}: {said}" in report, report[-3000:]
        assert f"[freeze] {SECOND_LESSON}: {said if shared else KEPT}" in report, report[-3000:]
        assert counts(root) == (before[0] + 1, before[1] + shared), why
    assert "REPLY&lt;Answer: 7 | Sources: H2&gt;" in page_text(root)
    assert "A sentence written after the first render." in page_text(root)
    assert not any(cell.get("outputs") for cell in nbformat.read(root / LESSON, as_version=4).cells)


def write_replies(text: str):
    def change(root: Path) -> None:
        (root / "data" / "replies.txt").write_text(text, encoding="utf-8")
    return change


def append(name: str):
    def change(root: Path) -> None:
        with open(root / name, "a", encoding="utf-8") as handle:
            handle.write("\n# an edit\n")
    return change


def edit_prose(root: Path) -> None:
    nb = nbformat.read(root / LESSON, as_version=4)
    nb.cells[1].source += " A sentence written after the first render."
    nbformat.write(nb, root / LESSON)


#: (a change, which may return the render's environment; why pre-render executes the gate
#: lesson, None for an edit of its file that leaves its key as it was; whether the change
#: concerns the second lesson too)
CHANGES = [
    (write_replies("Answer: 7 | Sources: H2\n"), "data/replies.txt changed", True),  # freeze alone never notices
    (append("runtime/display.py"), "runtime/display.py changed", True),
    (append("helpers/parsing.py"), "helpers/parsing.py changed", True),
    (lambda root: {"RIVERTON_READER_MODE": "recorded"}, "RIVERTON_READER_MODE set", True),
    (edit_prose, None, False),  # Quarto thaws a frozen result only for the very file it froze
]
KEPT = "frozen result kept: inputs unchanged"
NOTEBOOK_TEXT = "will execute: notebook text changed; Quarto's freeze re-executes a lesson on any edit of its file"
LESSONS = (LESSON, SECOND_LESSON)


def test_the_gate_fails_the_render_and_a_named_file_or_a_server_executes(quarto, tmp_path):
    root = add_second_lesson(write_gate_book(tmp_path / "book"))
    committed = (root / LESSON).read_bytes()
    rendered(quarto, root)
    # A reply with a third field must stop the render at the gate, and stay stopped.
    write_replies("Answer: 7 | Sources: H2 | Thanks!\n")(root)
    failed = render(quarto, root)
    report = failed.stdout + failed.stderr
    assert failed.returncode != 0, f"the render passed the gate\n{report[-3000:]}"
    assert "does not have two fields" in report and "Thanks!" in report
    assert counts(root) == (2, 1), "the failing lesson was not executed"
    # Quarto cleans the output folder before a whole-book render: no stale page remains.
    assert not (root / PAGE).exists(), "a page of the earlier data survived a failed render"
    # Undoing the edit brings back inputs that rendered before, but their frozen results were
    # removed when the inputs changed: the lessons execute, and the page is back.
    write_replies("Answer: 5 | Sources: H1\n")(root)
    rendered(quarto, root)
    assert counts(root) == (3, 2) and "REPLY&lt;Answer: 5 | Sources: H1&gt;" in page_text(root)
    assert (root / LESSON).read_bytes() == committed

    # Quarto executes a file it is given by name whatever its frozen result, and pre-render
    # says so; the render records its key, so the next whole-book render re-uses it.
    report = rendered(quarto, root, SECOND_LESSON)
    assert f"[freeze] {SECOND_LESSON}: {RENDERED_ALONE}" in report
    assert f"[freeze] {LESSON}: not rendered this time" in report
    assert counts(root) == (3, 3)
    report = rendered(quarto, root)
    assert all(f"[freeze] {lesson}: {KEPT}" in report for lesson in LESSONS) and counts(root) == (3, 3)

    # A reader server answers behind its URL: every lesson executes, frozen or not (on every
    # later render too: test_book_cache.py::test_pre_render_executes_every_lesson_while_a_reader_server_is_set).
    report = rendered(quarto, root, env={"RIVERTON_READER_URL": "http://127.0.0.1:9/v1"})
    assert all(f"[freeze] {lesson}: frozen result removed, will execute: replies come from the server at "
               "http://127.0.0.1:9/v1" in report for lesson in LESSONS)
    assert counts(root) == (4, 4)


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=600) as response:
        return response.read().decode("utf-8")


def test_preview_restarts_on_an_edit_of_runtime_or_data_and_serves_the_new_result(quarto, tmp_path):
    """`python -m bookkit --preview` serves the book, and restarts Quarto when a file of
    helpers/, exercises/, runtime/ or data/ changes.

    Quarto's own preview does not watch them; the wrapper does, restarts the preview on the
    same port, and the new first render executes the lesson with the new files.
    """
    root = write_gate_book(tmp_path / "book")
    port = free_port()
    log = tmp_path / "preview.log"
    with open(log, "w") as stream:
        preview = subprocess.Popen(
            [sys.executable, "-m", "bookkit", "--project", str(root), "--preview",
             "--", "--no-browser", "--port", str(port), "--host", "127.0.0.1"],
            cwd=PROJECT_ROOT, env=clean_environment(QUARTO=quarto), stdout=stream, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 900
        page = f"http://127.0.0.1:{port}/lessons/01-gate.html"
        edits = [(None, None, "Answer: 5 | Sources: H1"), (append("runtime/display.py"), "runtime/display.py",
                 "Answer: 5 | Sources: H1"), (write_replies("Answer: 8 | Sources: H4\n"), "data/replies.txt",
                 "Answer: 8 | Sources: H4")]
        for starts, (edit, name, shown) in enumerate(edits, start=1):
            executed = executions(root)
            if edit is not None:
                edit(root)
            while log.read_text().count("Listening on") < starts and time.monotonic() < deadline:
                assert preview.poll() is None, log.read_text()[-3000:]
                time.sleep(1)
            report = log.read_text()
            assert f"REPLY&lt;{shown}&gt;" in _get(page), report[-3000:]
            if edit is not None:
                assert f"[preview] {name} changed: restarting the preview" in report
                assert f"[freeze] {LESSON}: frozen result removed, will execute: {name} changed" in report
                assert executions(root) == executed + 1
    finally:
        preview.terminate()
        preview.wait(timeout=60)
    with socket.socket() as probe:  # Quarto's server stopped with the wrapper
        assert probe.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.slow
def test_the_real_book_renders_with_quarto(quarto, quarto_site, tmp_path):
    """The whole book with real Quarto (the session's build, in a copy): every lesson page,
    numbered by chapter; then a plain `quarto render` of a copy re-uses every frozen lesson."""
    project, report = quarto_site.project, quarto_site.report
    assert "engine: Quarto" in report
    assert TCP_NOISE not in report
    chapters = yaml.safe_load((PROJECT_ROOT / "_quarto.yml").read_text())["book"]["chapters"]
    for number, lesson in enumerate(chapters[1:], start=1):
        page = project / "_book" / Path(lesson).with_suffix(".html")
        assert page.is_file(), f"Quarto wrote no {page.name}"
        text = page.read_text(encoding="utf-8")
        assert f"[freeze] {lesson}: will execute: no earlier run" in report
        numbers = set(re.findall(TABLE_NUMBER, text))
        assert numbers == {str(number)}, f"{lesson}: tables numbered {sorted(numbers)}, not {number}.x"
    # Quarto executes a notebook in place; the committed notebooks must come back as they were.
    for path in [*sorted((PROJECT_ROOT / "lessons").glob("*.ipynb")), PROJECT_ROOT / ".gitignore"]:
        copied = project / path.relative_to(PROJECT_ROOT)
        assert copied.read_bytes() == path.read_bytes(), f"the render changed {copied.name}"
    # Offline: no page or stylesheet refers to the network (CDN scripts, web fonts).
    assert remote_assets_in_site(project / "_book") == []
    # A second, plain `quarto render`, in a copy with the frozen results (the session's site
    # stays as it is for the other tests), thaws every lesson from the notebooks as committed.
    again_root = tmp_path / "book"
    shutil.copytree(project, again_root, symlinks=True)
    env = session_environment(again_root, QUARTO_PYTHON=sys.executable)
    again = subprocess.run([quarto, "render"], cwd=again_root, env=env,
                           capture_output=True, text=True, timeout=1800)
    report = again.stdout + again.stderr
    assert again.returncode == 0, report[-6000:]
    for number, lesson in enumerate(chapters[1:], start=1):
        assert f"[freeze] {lesson}: frozen result kept: inputs unchanged" in report
        text = (again_root / "_book" / Path(lesson).with_suffix(".html")).read_text(encoding="utf-8")
        assert set(re.findall(TABLE_NUMBER, text)) == {str(number)}, f"{lesson} lost its tables"
    assert "Executing" not in report and "Cell 1/" not in report, "a frozen lesson was executed"
    # The PDF of that render shows the frozen lessons' outputs (from the notebooks of their
    # execution, put in place for the render; tests/test_pdf.py checks the session's PDF).
    import pdfcheck
    from bookkit.build import load_book_config

    pdf = again_root / "_book" / load_book_config(again_root).pdf
    assert pdf.stat().st_mtime > (project / "_book" / pdf.name).stat().st_mtime, "no new PDF"
    pdfcheck.require_poppler()
    text = pdfcheck.text(pdf)
    for shown in ("H08 (#1, 0.356)", "Answer: $150 per week ⏎ Sources: H08"):
        assert pdfcheck.contains(text, shown), f"the PDF of a render of frozen lessons lacks {shown!r}"
