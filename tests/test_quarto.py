"""Real Quarto: freeze re-uses a lesson only while its key holds, and a failed gate fails the render.

Runs when a `quarto` command is found ($QUARTO, or `quarto` on PATH) and is skipped
otherwise, unless BOOK_REQUIRE_QUARTO=1 (as in CI), which turns the skip into a failure.

Most checks render a small temporary book that carries copies of this project's `helpers`
package (which its lesson imports) and `bookkit` package (which holds the pre-render and
post-render scripts that `_quarto.yml` names), so each render takes seconds. One test
reads the session's render of the real book (tests/book_session.py).
"""
from __future__ import annotations

import os
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
from helpers.paths import PROJECT_ROOT
from book_session import session_environment

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
    for package in ("helpers", "bookkit"):  # what the lesson imports; the freeze scripts
        shutil.copytree(PROJECT_ROOT / package, root / package,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints"))
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


def write_logged_lesson(root: Path, lesson: str, title: str, prose: str, *code: str) -> None:
    """Lesson ``lesson`` of the book at ``root``: front matter, one prose cell, then the code
    cells, the first of which appends a line to `<lesson's stem>.log` beside the book on
    every execution (see :func:`executions`)."""
    log = root.parent / f"{Path(lesson).stem}.log"
    logging = f"with open({str(log)!r}, 'a') as handle:\n    handle.write('executed\\n')\n"
    first, *rest = code or ("",)
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_raw_cell(f"---\ntitle: {title}\n---"),
        nbformat.v4.new_markdown_cell(prose),
        nbformat.v4.new_code_cell((logging + first).rstrip("\n")),
        *(nbformat.v4.new_code_cell(source) for source in rest),
    ]
    nbformat.write(nb, root / lesson)


def render(quarto: str, root: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`quarto render` in ``root``; by default without the reader settings of this shell."""
    if env is None:
        env = {name: value for name, value in os.environ.items()
               if not name.startswith(("RIVERTON_READER_", "RIVERTON_REVIEWS_"))}
    environment = dict(env)
    environment["QUARTO_PYTHON"] = sys.executable
    environment.pop("QUARTO_USE_FILE_FOR_PROJECT_OUTPUT_FILES", None)
    return subprocess.run([quarto, "render", *args], cwd=root, env=environment,
                          capture_output=True, text=True, timeout=900)


def executions(root: Path, lesson: str = LESSON) -> int:
    """How many times ``lesson`` of the book at ``root`` has executed."""
    log = root.parent / f"{Path(lesson).stem}.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def page_text(root: Path) -> str:
    return (root / PAGE).read_text(encoding="utf-8")


def test_freeze_follows_the_key_and_the_gate_fails_the_render(quarto, tmp_path):
    root = write_gate_book(tmp_path / "book")
    committed = (root / LESSON).read_bytes()

    cold = render(quarto, root)
    report = cold.stdout + cold.stderr
    assert cold.returncode == 0, report[-4000:]
    assert f"[freeze] {LESSON}: will execute: no earlier run" in report
    assert executions(root) == 1
    assert "REPLY&lt;Answer: 5 | Sources: H1&gt;" in page_text(root)
    # The front page is unnumbered, so lesson 1's first table is Table 1.1.
    assert set(re.findall(TABLE_NUMBER, page_text(root))) == {"1"}, "lesson 1's table is not numbered 1.x"
    assert TCP_NOISE not in report
    assert (root / "_freeze" / "lessons" / "01-gate" / "execute-results" / "html.json").is_file()
    # Quarto wrote the outputs into the notebook; the post-render step put it back.
    assert (root / LESSON).read_bytes() == committed
    assert "put back 1 notebook(s) as committed" in report

    again = render(quarto, root)
    report = again.stdout + again.stderr
    assert again.returncode == 0, report[-4000:]
    assert f"[freeze] {LESSON}: frozen result kept: inputs unchanged" in report
    assert executions(root) == 1, "an unchanged lesson executed again"

    # An edit under data/ (which freeze alone never notices) executes the lesson again.
    (root / "data" / "replies.txt").write_text("Answer: 7 | Sources: H2\n", encoding="utf-8")
    edited = render(quarto, root)
    report = edited.stdout + edited.stderr
    assert edited.returncode == 0, report[-4000:]
    assert f"[freeze] {LESSON}: frozen result removed, will execute: data/replies.txt changed" in report
    assert executions(root) == 2
    assert "REPLY&lt;Answer: 7 | Sources: H2&gt;" in page_text(root)

    # A reply with a third field must stop the render at the gate, and stay stopped.
    (root / "data" / "replies.txt").write_text("Answer: 7 | Sources: H2 | Thanks!\n", encoding="utf-8")
    failed = render(quarto, root)
    report = failed.stdout + failed.stderr
    assert failed.returncode != 0, f"the render passed the gate\n{report[-3000:]}"
    assert "does not have two fields" in report and "Thanks!" in report
    assert executions(root) == 3, "the failing lesson was not executed"
    # Quarto cleans the output folder before a whole-book render: no stale page remains.
    assert not (root / PAGE).exists(), "a page of the earlier data survived a failed render"

    # Undoing the edit brings back inputs that rendered before, but their frozen result was
    # removed when the inputs changed: the lesson executes, and the page is back.
    (root / "data" / "replies.txt").write_text("Answer: 7 | Sources: H2\n", encoding="utf-8")
    fixed = render(quarto, root)
    assert fixed.returncode == 0, (fixed.stdout + fixed.stderr)[-4000:]
    assert executions(root) == 4
    assert "Thanks!" not in page_text(root)
    assert (root / LESSON).read_bytes() == committed


def test_helper_edit_and_reader_setting_execute_again_and_one_file_renders(quarto, tmp_path):
    root = write_gate_book(tmp_path / "book")
    assert render(quarto, root).returncode == 0
    assert executions(root) == 1

    parsing = root / "helpers" / "parsing.py"
    parsing.write_text(parsing.read_text() + "\n# an edit\n")
    edited = render(quarto, root)
    assert edited.returncode == 0, (edited.stdout + edited.stderr)[-4000:]
    assert f"{LESSON}: frozen result removed, will execute: helpers/parsing.py changed" in edited.stdout
    assert executions(root) == 2

    env = dict(os.environ, RIVERTON_READER_MODE="recorded")
    moded = render(quarto, root, env=env)
    assert moded.returncode == 0, (moded.stdout + moded.stderr)[-4000:]
    assert "RIVERTON_READER_MODE set" in moded.stdout
    assert executions(root) == 3

    # Rendering the one lesson records its key too; Quarto executes a file it is given by
    # name whatever its frozen result, and pre-render says so.
    single = render(quarto, root, LESSON, env=env)
    assert single.returncode == 0, (single.stdout + single.stderr)[-4000:]
    assert f"[freeze] {LESSON}: {RENDERED_ALONE}" in single.stdout
    kept = render(quarto, root, env=env)
    assert f"[freeze] {LESSON}: frozen result kept: inputs unchanged" in kept.stdout
    assert executions(root) == 4  # the single-file render executes; the whole-book one re-uses


def add_second_lesson(root: Path) -> str:
    """A second lesson, whose executions :func:`second_executions` counts."""
    write_logged_lesson(root, SECOND_LESSON, "The second lesson", "Nothing changes here.")
    config = yaml.safe_load((root / "_quarto.yml").read_text())
    config["book"]["chapters"].append(SECOND_LESSON)
    (root / "_quarto.yml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return SECOND_LESSON


def second_executions(root: Path) -> int:
    return executions(root, SECOND_LESSON)


def test_a_prose_edit_executes_that_lesson_alone_and_pre_render_says_so(quarto, tmp_path):
    """Quarto thaws a frozen result only for the very file it froze; pre-render tells the truth."""
    root = write_gate_book(tmp_path / "book")
    second = add_second_lesson(root)
    cold = render(quarto, root)
    assert cold.returncode == 0, (cold.stdout + cold.stderr)[-4000:]
    assert (executions(root), second_executions(root)) == (1, 1)

    nb = nbformat.read(root / LESSON, as_version=4)
    nb.cells[1].source += " A sentence written after the first render."
    nbformat.write(nb, root / LESSON)
    edited = render(quarto, root)
    report = edited.stdout + edited.stderr
    assert edited.returncode == 0, report[-4000:]
    assert (f"[freeze] {LESSON}: will execute: notebook text changed; Quarto's freeze re-executes "
            "a lesson on any edit of its file") in report
    assert f"[freeze] {second}: frozen result kept: inputs unchanged" in report
    # What pre-render said is what Quarto did: the edited lesson executed, the other did not.
    assert (executions(root), second_executions(root)) == (2, 1)
    assert "A sentence written after the first render." in page_text(root)

    again = render(quarto, root)
    report = again.stdout + again.stderr
    assert again.returncode == 0, report[-4000:]
    assert f"[freeze] {LESSON}: frozen result kept: inputs unchanged" in report
    assert (executions(root), second_executions(root)) == (2, 1)

    # A render of the second lesson alone executes it, and leaves the first alone.
    alone = render(quarto, root, second)
    report = alone.stdout + alone.stderr
    assert alone.returncode == 0, report[-4000:]
    assert f"[freeze] {second}: {RENDERED_ALONE}" in report
    assert f"[freeze] {LESSON}: not rendered this time" in report
    assert (executions(root), second_executions(root)) == (2, 2)

    # A reader server answers behind its URL: every lesson executes, frozen or not. (That
    # this holds on every later render too, whatever the last render recorded, is shown on
    # the pre-render step itself: test_book_cache.py::
    # test_pre_render_executes_every_lesson_while_a_reader_server_is_set.)
    env = dict(os.environ, RIVERTON_READER_URL="http://127.0.0.1:9/v1")
    served = render(quarto, root, env=env)
    report = served.stdout + served.stderr
    assert served.returncode == 0, report[-4000:]
    for lesson in (LESSON, second):
        assert (f"[freeze] {lesson}: frozen result removed, will execute: replies come from "
                "the server at http://127.0.0.1:9/v1") in report
    assert (executions(root), second_executions(root)) == (3, 3)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=600) as response:
        return response.read().decode("utf-8")


def test_preview_restarts_on_a_data_edit_and_serves_the_new_result(quarto, tmp_path):
    """`python -m bookkit --preview` serves the book, and restarts Quarto when data/ changes.

    Quarto's own preview does not watch data/; the wrapper does, restarts the preview on
    the same port, and the new first render executes the lesson with the new data.
    """
    root = write_gate_book(tmp_path / "book")
    port = _free_port()
    log = tmp_path / "preview.log"
    with open(log, "w") as stream:
        preview = subprocess.Popen(
            [sys.executable, "-m", "bookkit", "--project", str(root), "--preview",
             "--", "--no-browser", "--port", str(port), "--host", "127.0.0.1"],
            cwd=PROJECT_ROOT, env=dict(os.environ, QUARTO=quarto), stdout=stream, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 600
        while "Listening on" not in log.read_text() and time.monotonic() < deadline:
            assert preview.poll() is None, log.read_text()[-3000:]
            time.sleep(1)
        page = f"http://127.0.0.1:{port}/lessons/01-gate.html"
        assert "REPLY&lt;Answer: 5 | Sources: H1&gt;" in _get(page)
        executed = executions(root)

        (root / "data" / "replies.txt").write_text("Answer: 8 | Sources: H4\n", encoding="utf-8")
        while log.read_text().count("Listening on") < 2 and time.monotonic() < deadline:
            assert preview.poll() is None, log.read_text()[-3000:]
            time.sleep(1)
        report = log.read_text()
        assert "[preview] data/replies.txt changed: restarting the preview" in report
        assert f"[freeze] {LESSON}: frozen result removed, will execute: data/replies.txt changed" in report
        assert "REPLY&lt;Answer: 8 | Sources: H4&gt;" in _get(page), report[-3000:]
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
