"""Exercise solutions stay folded away until asked for: in JupyterLab and under Quarto.

Both tests work on copies in a temporary folder, so nothing is saved into the committed
notebooks. The JupyterLab test starts a real JupyterLab on 127.0.0.1 (a free port, no
token) and drives it with headless Chromium; the Quarto test renders a page with real
Quarto when one is found (``$QUARTO`` or ``quarto`` on PATH) and is skipped otherwise,
unless BOOK_REQUIRE_QUARTO=1.
The nbclient build's pages are checked in test_browser.py.
"""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

import pagecheck
from exercise_cells import exercise_cells, section_index
from helpers.paths import LESSONS_DIR

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LESSON = LESSONS_DIR / "01-answering-from-retrieved-passages.ipynb"


def exercise_section(tmp: Path) -> tuple[Path, list]:
    """The lesson's Exercises section, its cells copied unchanged, as a notebook in ``tmp``."""
    nb = nbformat.read(LESSON, as_version=4)
    start = section_index(nb, "## Exercises")
    end = section_index(nb, "## Sources")
    section = nbformat.v4.new_notebook(metadata=nb.metadata, cells=nb.cells[start:end])
    path = tmp / "exercises.ipynb"
    nbformat.write(section, path)
    return path, exercise_cells(section, LESSON.name)


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
return Array.from(document.querySelectorAll('.jp-Notebook .jp-Cell')).map(cell => ({
  markdown: cell.classList.contains('jp-MarkdownCell'),
  collapsed: !!cell.querySelector('.jp-InputPlaceholder'),
  text: cell.innerText,
}));
"""


def test_jupyterlab_shows_each_solution_collapsed_until_clicked(browser, tmp_path):
    root = tmp_path / "lab"
    root.mkdir()
    path, cells = exercise_section(root)
    before = path.read_bytes()
    distinctive = [next(line.strip() for line in c.solution_code.splitlines()
                        if len(line.strip()) > 12 and line.strip() not in c.starter)
                   for c in cells]
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
        # Click the first collapsed cell open, as a student would.
        browser.execute_script(
            "document.querySelector('.jp-Notebook .jp-Cell .jp-InputPlaceholder').click();")
        time.sleep(1.0)
        after = "\n".join(cell["text"] for cell in browser.execute_script(_LAB_CELLS_JS))
        browser.get("about:blank")
        browser.get_log("browser")  # JupyterLab's unload prompt is blocked and logged
    for cell, solution in zip(cells, solutions):
        # The collapsed cell shows only the callout's opening line, which names the exercise.
        assert f"Solution to exercise {cell.key}" in solution["text"]
        assert "```" not in solution["text"]
    for line in distinctive:
        assert line not in page_text
    assert distinctive[0] in after
    assert all(line not in after for line in distinctive[1:])
    assert path.read_bytes() == before  # nothing was saved into the copy either


@pytest.mark.quarto
def test_quarto_renders_each_solution_as_a_collapsed_callout(browser, quarto, tmp_path):
    project = tmp_path / "quarto"
    (project / "lessons").mkdir(parents=True)
    path, cells = exercise_section(project / "lessons")
    (project / "_quarto.yml").write_text(textwrap.dedent("""\
        project:
          type: website
          output-dir: _site
        execute:
          enabled: false
        format:
          html:
            theme: cosmo
        """))
    result = subprocess.run([quarto, "render", f"lessons/{path.name}"], cwd=project,
                            capture_output=True, text=True, timeout=600,
                            env={**os.environ, "QUARTO_PYTHON": sys.executable})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    site = project / "_site"
    page = f"lessons/{path.with_suffix('.html').name}"
    assert (site / page).is_file()
    state_js = """
    return Array.from(document.querySelectorAll('.callout')).map(c => ({
      title: (c.querySelector('.callout-title-container') || {}).textContent || '',
      shown: Array.from(c.querySelectorAll('.callout-body-container')).some(
        b => b.getClientRects().length > 0),
    }));
    """
    with pagecheck.serve_folder(site) as base:
        browser.get_log("browser")  # drop entries left by earlier pages of the shared browser
        browser.get(base + page)
        time.sleep(0.5)
        callouts = browser.execute_script(state_js)
        browser.find_element("css selector", ".callout .callout-header").click()
        time.sleep(1.0)
        opened = browser.execute_script(state_js)
        console = browser.get_log("browser")
    # Quarto puts a screen-reader label ("Tip") before the title.
    titles = [c["title"].strip() for c in callouts]
    assert len(titles) == len(cells)
    assert all(t.endswith(f"Solution to exercise {c.key}") for t, c in zip(titles, cells)), titles
    assert not any(c["shown"] for c in callouts)
    assert opened[0]["shown"] and not any(c["shown"] for c in opened[1:])
    # Failed requests are not the callout's doing: offline, the cosmo theme's Google Fonts
    # stylesheet cannot load, and the test server has no favicon.
    errors = [e for e in console if e["level"] == "SEVERE" and e.get("source") != "network"]
    assert errors == []
