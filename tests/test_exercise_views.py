"""Exercise solutions stay folded away until asked for: in JupyterLab and under Quarto.

Both tests work on copies in a temporary folder, so nothing is saved into the committed
notebooks. The JupyterLab test starts a real JupyterLab on 127.0.0.1 (a free port, no
token) and drives it with headless Chromium; the Quarto tests render the Exercises
section of every lesson that has exercises with real Quarto (execution off: the layout is
what is checked), with the book's solutions.lua filter, when one is found (``$QUARTO`` or
``quarto`` on PATH) and are skipped otherwise, unless BOOK_REQUIRE_QUARTO=1.
The nbclient build's pages are checked in test_browser.py; that solutions stay folded
after "Run All" in JupyterLab, in test_jupyterlab.py.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
import yaml

import pagecheck
from exercise_cells import LESSONS, exercise_cells, section_index
from helpers.paths import LESSONS_DIR, PROJECT_ROOT

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LESSON = LESSONS_DIR / "01-answering-from-retrieved-passages.ipynb"


def exercise_section(tmp: Path, lesson: Path = LESSON,
                     name: str = "exercises.ipynb") -> tuple[Path, list]:
    """A lesson's Exercises section, its cells copied unchanged, as notebook ``name`` in
    ``tmp``."""
    nb = nbformat.read(lesson, as_version=4)
    start = section_index(nb, "## Exercises")
    end = section_index(nb, "## Sources")
    assert start is not None and end is not None, f"{lesson.name} has no Exercises section"
    section = nbformat.v4.new_notebook(metadata=nb.metadata, cells=nb.cells[start:end])
    path = tmp / name
    nbformat.write(section, path)
    return path, exercise_cells(section, lesson.name)


def distinctive_lines(cells) -> list[str]:
    """For each exercise, a line of its solution's code that its starter cell lacks."""
    return [next(line.strip() for line in c.solution_code.splitlines()
                 if len(line.strip()) > 12 and line.strip() not in c.starter)
            for c in cells]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def jupyterlab(root: Path, tmp: Path):
    """A JupyterLab serving ``root`` on 127.0.0.1; yields its base URL, stops it after."""
    port = free_port()
    # Every cell stays in the page (no windowing), so the test sees all of them; no news.
    settings = tmp / "settings" / "@jupyterlab"
    (settings / "notebook-extension").mkdir(parents=True)
    (settings / "notebook-extension" / "tracker.jupyterlab-settings").write_text(
        '{"windowingMode": "none"}')
    (settings / "apputils-extension").mkdir(parents=True)
    (settings / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        '{"fetchNews": "false"}')
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp / "config"),
           "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
           "JUPYTERLAB_SETTINGS_DIR": str(tmp / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(tmp / "workspaces")}
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1",
               f"--port={port}", "--IdentityProvider.token=", "--ServerApp.password=",
               f"--ServerApp.root_dir={root}", "--LabApp.news_url=",
               "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")
    log = (tmp / "jupyterlab.log").open("w")
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(base + "/api/status", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("JupyterLab did not start:\n"
                                         + (tmp / "jupyterlab.log").read_text()[-3000:])
                time.sleep(0.5)
        yield base
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)
        log.close()


_LAB_CELLS_JS = """
return Array.from(document.querySelectorAll('.jp-Notebook .jp-Cell')).map(cell => {
  const details = cell.querySelector('.jp-RenderedMarkdown details.solution');
  return {markdown: cell.classList.contains('jp-MarkdownCell'),
          collapsed: !!details && !details.open, text: cell.innerText};
});
"""


def test_jupyterlab_shows_each_solution_collapsed_until_clicked(browser, tmp_path):
    root = tmp_path / "lab"
    root.mkdir()
    path, cells = exercise_section(root)
    before = path.read_bytes()
    distinctive = distinctive_lines(cells)
    with jupyterlab(root, tmp_path) as base:
        browser.get(f"{base}/lab/tree/{path.name}")
        expected = len(nbformat.read(path, as_version=4).cells)

        def rendered():
            shown = browser.execute_script(_LAB_CELLS_JS)
            return shown if len(shown) == expected else None

        deadline = time.monotonic() + 90
        while (shown := rendered()) is None:
            assert time.monotonic() < deadline, "JupyterLab did not show the notebook's cells"
            time.sleep(0.5)
        time.sleep(1.0)
        shown = rendered()
        solutions = [cell for cell in shown if cell["markdown"] and cell["collapsed"]]
        page_text = "\n".join(cell["text"] for cell in shown)
        assert len(solutions) == len(cells), "JupyterLab shows the solutions expanded"
        # Click the first solution's title, as a student would.
        browser.execute_script(
            "document.querySelector('.jp-Notebook details.solution > summary').click();")
        time.sleep(1.0)
        after = "\n".join(cell["text"] for cell in browser.execute_script(_LAB_CELLS_JS))
        browser.get("about:blank")
        browser.get_log("browser")  # JupyterLab's unload prompt is blocked and logged
    for cell, solution in zip(cells, solutions):
        # The folded solution shows only its title, which names the exercise.
        assert solution["text"].strip() == f"Solution to exercise {cell.key}"
    for line in distinctive:
        assert line not in page_text
    assert distinctive[0] in after
    assert all(line not in after for line in distinctive[1:])
    assert path.read_bytes() == before  # nothing was saved into the copy either


_CALLOUTS_JS = """
return Array.from(document.querySelectorAll('.callout')).map(c => ({
  title: (c.querySelector('.callout-title-container') || {}).textContent || '',
  shown: Array.from(c.querySelectorAll('.callout-body-container')).some(
    b => b.getClientRects().length > 0),
}));
"""


@pytest.fixture(scope="module")
def quarto_exercises(quarto, tmp_path_factory):
    """The Exercises section of every lesson with exercises, rendered by real Quarto as one
    website (execution off); yields the site folder and, per lesson, (page, cells)."""
    project = tmp_path_factory.mktemp("quarto-exercises")
    (project / "lessons").mkdir()
    pages = {}
    for lesson, notebook in sorted(LESSONS.items()):
        path, cells = exercise_section(project / "lessons", LESSONS_DIR / notebook, notebook)
        pages[lesson] = (f"lessons/{path.with_suffix('.html').name}", cells)
    shutil.copy2(PROJECT_ROOT / "book.scss", project / "book.scss")
    # The book's own filters (solutions.lua makes each solution a collapsed callout).
    filters = yaml.safe_load((PROJECT_ROOT / "_quarto.yml").read_text(encoding="utf-8"))["filters"]
    for name in filters:
        shutil.copy2(PROJECT_ROOT / name, project / name)
    (project / "_quarto.yml").write_text(yaml.safe_dump({
        "project": {"type": "website", "output-dir": "_site"},
        "execute": {"enabled": False},
        "filters": filters,
        "format": {"html": {"theme": ["cosmo", "book.scss"]}},
    }, sort_keys=False), encoding="utf-8")
    started = time.monotonic()
    result = subprocess.run([quarto, "render"], cwd=project, capture_output=True, text=True,
                            timeout=900, env={**os.environ, "QUARTO_PYTHON": sys.executable})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    print(f"quarto rendered {len(pages)} exercise sections in {time.monotonic() - started:.1f} s")
    site = project / "_site"
    for page, _ in pages.values():
        assert (site / page).is_file(), page
    return site, pages


def _wait_for(browser, condition, timeout=10.0):
    deadline = time.monotonic() + timeout
    while True:
        state = browser.execute_script(_CALLOUTS_JS)
        if condition(state) or time.monotonic() > deadline:
            return state
        time.sleep(0.1)


@pytest.mark.quarto
@pytest.mark.parametrize("lesson", sorted(LESSONS), ids=lambda n: f"lesson{n}")
def test_quarto_renders_each_solution_as_a_collapsed_callout(browser, quarto_exercises, lesson):
    site, pages = quarto_exercises
    page, cells = pages[lesson]
    assert cells, f"{page} has no exercises"
    distinctive = distinctive_lines(cells)
    with pagecheck.serve_folder(site) as base:
        browser.get_log("browser")  # drop entries left by earlier pages of the shared browser
        browser.get(base + page)
        callouts = _wait_for(browser, lambda state: len(state) == len(cells))
        page_text = browser.execute_script("return document.body.innerText;")
        browser.find_element("css selector", ".callout .callout-header").click()
        opened = _wait_for(browser, lambda state: state and state[0]["shown"])
        opened_text = browser.execute_script("return document.body.innerText;")
        console = browser.get_log("browser")
    # Quarto puts a screen-reader label ("Tip") before the title.
    titles = [c["title"].strip() for c in callouts]
    assert len(titles) == len(cells), titles
    assert all(t.endswith(f"Solution to exercise {c.key}") for t, c in zip(titles, cells)), titles
    assert not any(c["shown"] for c in callouts), "a solution is open before it is clicked"
    assert all(line not in page_text for line in distinctive), "a solution's code is visible"
    assert opened[0]["shown"] and not any(c["shown"] for c in opened[1:])
    assert distinctive[0] in opened_text
    assert all(line not in opened_text for line in distinctive[1:])
    # Failed requests are not the callout's doing (the test server has no favicon).
    errors = [e for e in console if e["level"] == "SEVERE" and e.get("source") != "network"]
    assert errors == []
