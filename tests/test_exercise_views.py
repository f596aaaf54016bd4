"""Exercise solutions stay folded away until asked for, in JupyterLab.

The test works on a copy in a temporary folder, so nothing is saved into the committed
notebooks: it starts a real JupyterLab on 127.0.0.1 (a free port, no token) and drives it
with headless Chromium. The built pages of both engines (Quarto's collapsed callouts, made
by solutions.lua, and the build without Quarto) are checked in test_browser.py; that
solutions stay folded after "Run All" in JupyterLab, in test_jupyterlab.py.
"""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from exercise_cells import exercise_cells, section_index
from helpers.paths import LESSONS_DIR

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
