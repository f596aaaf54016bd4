"""Run notebooks in a real JupyterLab, in headless Chromium, and read what a student sees.

`lab_server(root)` starts JupyterLab from this interpreter's environment on 127.0.0.1,
on a free port, with no token, serving `root` (give it a temporary copy: the server never
writes into the project). Its settings, runtime and workspace folders are private to the
server, autosave is off and it never fetches news or update notices. On exit it shuts the
kernels down through the server's API, stops the server by its PID and then any kernel
process still alive, also by PID.

`open_notebook`, `run_all` and `wait_until_idle` drive the page through JupyterLab's own
application object (exposed with `--LabApp.expose_app_in_browser`): no key presses, no
menus, so a slow machine only makes things slower, never different. Every wait is
bounded and a timeout says what the page showed at that moment. `markdown_cells` and
`solution_cells` read what the open notebook's markdown shows, whichever renderer drew it
(`.jp-MarkdownOutput`): what was taken for mathematics in it and what MathJax typeset, and
whether each worked solution is folded.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

#: The JupyterLab major version whose application object (``window.jupyterapp``, cell
#: models, ``sharedModel``) the page readers below use; pinned in the ``test`` extra.
JUPYTERLAB_MAJOR = 4
SERVER_START_TIMEOUT = 180.0  # seconds; a cold JupyterLab on a busy two-core machine is slow
PAGE_TIMEOUT = 240.0
RUN_TIMEOUT = 900.0

# User settings for the private settings folder: no autosave, no news, no update checks.
_SETTINGS = {
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "checkForUpdates": False, "fetchNews": "false",
    },
}


@dataclass
class LabServer:
    url: str  # base URL, ending in "/"
    pid: int
    root: Path
    log: Path

    def api(self, path: str, method: str = "GET", timeout: float = 30.0):
        request = urllib.request.Request(self.url + path.lstrip("/"), method=method)
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read()
        return json.loads(body) if body else None

    def kernel_pids(self) -> set[int]:
        """PIDs of the kernels the server has started (its child processes)."""
        return children(self.pid)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no server log)"


def children(pid: int) -> set[int]:
    """PIDs of the processes whose parent is `pid` (Linux /proc; empty elsewhere)."""
    found = set()
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The second field (the command) may hold spaces; the parent PID follows ") S ".
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 1 and fields[1] == str(pid):
            found.add(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie has exited; only its parent has not reaped it yet
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


def _stop_pid(pid: int, grace: float) -> None:
    if not alive(pid):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def lab_server(root: Path, python: str = sys.executable, timeout: float = SERVER_START_TIMEOUT,
               env: dict[str, str] | None = None) -> Iterator[LabServer]:
    """JupyterLab serving `root` on 127.0.0.1 at a free port, without a token; `env` adds
    variables to the environment that the server and its kernels see."""
    version = subprocess.run([python, "-c", "import importlib.metadata as m; print(m.version('jupyterlab'))"],
                             capture_output=True, text=True, timeout=60).stdout.strip() or "none"
    if version.split(".")[0] != str(JUPYTERLAB_MAJOR):
        raise AssertionError(f"{python} has JupyterLab {version}; these checks drive JupyterLab "
                             f"{JUPYTERLAB_MAJOR}'s page (install the test extra's pinned version)")
    private = Path(tempfile.mkdtemp(prefix="riverton-lab-"))
    folders = {"JUPYTER_RUNTIME_DIR": private / "runtime", "JUPYTERLAB_SETTINGS_DIR": private / "settings",
               "JUPYTERLAB_WORKSPACES_DIR": private / "workspaces", "JUPYTER_CONFIG_DIR": private / "config",
               "IPYTHONDIR": private / "ipython"}
    for name, values in _SETTINGS.items():
        (folders["JUPYTERLAB_SETTINGS_DIR"] / name).parent.mkdir(parents=True)
        (folders["JUPYTERLAB_SETTINGS_DIR"] / name).write_text(json.dumps(values))
    for folder in folders.values():
        folder.mkdir(exist_ok=True)
    # A person's session, not a book build, with the progress bars on: as for a student.
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("QUARTO_", "RIVERTON_BOOK_BUILD", "RIVERTON_PROGRESS"))}
    environment.update({name: str(folder) for name, folder in folders.items()}, **(env or {}))
    command = [python, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1", "--ServerApp.port=0",
               "--ServerApp.port_retries=0", "--IdentityProvider.token=", "--ServerApp.password=",
               f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True",
               "--LabApp.check_for_updates_class=jupyterlab.handlers.announcements.NeverCheckForUpdate",
               "--LabApp.news_url="]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")
    log = private / "server.log"
    with open(log, "wb") as sink:
        process = subprocess.Popen(command, cwd=root, env=environment, stdout=sink, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    server = LabServer(url="", pid=process.pid, root=root, log=log)
    try:
        server.url = _wait_for_server(process, folders["JUPYTER_RUNTIME_DIR"], server, timeout)
        yield server
    finally:
        _shutdown(process, server)
        shutil.rmtree(private, ignore_errors=True)


def _wait_for_server(process, runtime: Path, server: LabServer, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    url = None
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"JupyterLab exited with status {process.returncode} before it served; "
                                 f"its log ends:\n{server.log_tail()}")
        if url is None:
            info = runtime / f"jpserver-{process.pid}.json"
            if info.is_file():
                with contextlib.suppress(ValueError, OSError):
                    details = json.loads(info.read_text())
                    url = f"http://127.0.0.1:{details['port']}/"
        if url is not None:
            try:
                with urllib.request.urlopen(url + "api/status", timeout=10) as response:
                    if response.status == 200:
                        return url
            except (urllib.error.URLError, OSError):
                pass
        time.sleep(0.5)
    raise AssertionError(f"JupyterLab did not answer within {timeout:.0f} s; its log ends:\n{server.log_tail()}")


def _shutdown(process, server: LabServer) -> None:
    kernels = children(process.pid)
    if server.url and process.poll() is None:
        with contextlib.suppress(Exception):
            for kernel in server.api("api/kernels"):
                with contextlib.suppress(Exception):
                    server.api(f"api/kernels/{kernel['id']}", method="DELETE", timeout=60)
    _stop_pid(process.pid, grace=30)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=10)
    for pid in kernels:
        _stop_pid(pid, grace=10)


# --------------------------------------------------------------------------- the page

_STATE_JS = """
const app = window.jupyterapp;
if (!app || !app.shell) return {ready: false, why: 'JupyterLab has not started in the page'};
const panel = app.shell.currentWidget;
if (!panel || !panel.content || !panel.sessionContext) return {ready: false, why: 'no notebook is open'};
if (!panel.context.isReady) return {ready: false, why: 'the notebook is still loading'};
const session = panel.sessionContext.session;
const kernel = session && session.kernel;
const cells = panel.content.widgets.map((cell, index) => {
  const model = cell.model;
  const outputs = model.type === 'code' ? model.outputs.toJSON() : [];
  return {
    index, type: model.type,
    source: model.sharedModel.getSource(),
    prompt: model.type === 'code' ? (cell.promptNode ? cell.promptNode.textContent.trim() : '') : '',
    execution_count: model.type === 'code' ? model.executionCount : null,
    errors: outputs.filter(o => o.output_type === 'error').map(o => `${o.ename}: ${o.evalue}`),
  };
});
return {
  ready: true, path: panel.context.path,
  kernel: kernel ? kernel.status : 'none',
  kernel_name: kernel ? kernel.name : null,
  pending: panel.sessionContext.pendingInput || false,
  cells,
};
"""


def state(driver) -> dict:
    """The open notebook as JupyterLab holds it: kernel status and, per cell, prompt and errors."""
    return driver.execute_script(_STATE_JS)


def describe(snapshot: dict) -> str:
    """A short account of what the notebook showed, for failure messages."""
    if not snapshot or not snapshot.get("ready"):
        return (snapshot or {}).get("why", "nothing")
    code = [c for c in snapshot["cells"] if c["type"] == "code"]
    done = [c for c in code if c["execution_count"] is not None and c["prompt"] != "[*]:"]
    running = [c for c in code if c["prompt"] == "[*]:"]
    lines = [f"{snapshot['path']}: kernel {snapshot['kernel']}, {len(done)} of {len(code)} code cells have run"]
    for cell in running[:3]:
        lines.append(f"  still running: cell {cell['index'] + 1}: {first_line(cell['source'])}")
    for cell in code:
        for error in cell["errors"]:
            lines.append(f"  error in cell {cell['index'] + 1} ({first_line(cell['source'])}): {error[:300]}")
    return "\n".join(lines)


def first_line(source: str) -> str:
    return (source.strip().splitlines() or [""])[0][:80]


def wait_for(driver, condition, timeout: float, what: str, poll: float = 0.5, screenshot: Path | None = None):
    """Poll `condition(state)` until it returns something truthy; fail with what the page
    showed (and, with `screenshot`, save the screen there first)."""
    deadline = time.monotonic() + timeout
    snapshot = None
    while True:
        try:
            snapshot = state(driver)
        except Exception as error:  # noqa: BLE001 - the page may be mid-navigation
            snapshot = {"ready": False, "why": f"the page did not answer ({type(error).__name__})"}
        value = condition(snapshot)
        if value:
            return value
        if time.monotonic() > deadline:
            saved = ""
            if screenshot is not None:
                with contextlib.suppress(Exception):
                    driver.save_screenshot(str(screenshot))
                    saved = f" (screenshot {screenshot})"
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; "
                                 f"the page showed: {describe(snapshot)}{saved}")
        time.sleep(poll)


def open_notebook(driver, server: LabServer, path: str, timeout: float = PAGE_TIMEOUT,
                  screenshot: Path | None = None) -> dict:
    """Open `path` (relative to the server root) and wait for its kernel to be idle."""
    driver.get(f"{server.url}lab/tree/{path}")
    return wait_for(driver, lambda s: s if s.get("ready") and s.get("path") == path
                    and s.get("kernel") == "idle" else None,
                    timeout, f"{path} to open with an idle kernel", screenshot=screenshot)


def run_all(driver, timeout: float = RUN_TIMEOUT, screenshot: Path | None = None) -> dict:
    """Run every cell (JupyterLab's own "Run All Cells") and wait until the kernel is idle
    and no cell is queued or running. A cell that raises stops the run, as it does for a
    student; the state returned then shows the error."""
    before = state(driver)
    assert before.get("ready"), f"no notebook to run: {describe(before)}"
    driver.execute_script("window.jupyterapp.commands.execute('notebook:run-all-cells');")

    def finished(s):
        if not s.get("ready") or s.get("kernel") != "idle":
            return None
        code = [c for c in s["cells"] if c["type"] == "code" and c["source"].strip()]
        if any(c["prompt"] == "[*]:" for c in code):  # running, or queued behind it
            return None
        ran = [c for c in code if c["execution_count"] is not None]
        if any(c["errors"] for c in ran) or len(ran) == len(code):
            return s
        return None

    return wait_for(driver, finished, timeout, "all cells to run and the kernel to be idle",
                    poll=1.0, screenshot=screenshot)


# The open notebook's code cell whose `#| label:` is arguments[0], in `cell` (or null).
_LABELLED_CELL_JS = """
const panel = window.jupyterapp.shell.currentWidget;
const cell = panel.content.widgets.find(c => c.model.type === 'code' &&
  c.model.sharedModel.getSource().split('\\n').some(l => l.trim() === '#| label: ' + arguments[0]));
if (!cell) return null;
"""


def cell_output_element(driver, label: str):
    """The output area of the code cell whose first line is `#| label: <label>`."""
    element = driver.execute_script(_LABELLED_CELL_JS + "panel.content.scrollToCell(cell);"
                                    "return cell.node.querySelector('.jp-Cell-outputArea, .jp-OutputArea');", label)
    assert element is not None, f"no code cell labelled {label!r} in the open notebook"
    return element


def cell_output_data(driver, label: str, mime: str) -> list:
    """The ``mime`` data of every output of the code cell labelled ``label``, as the kernel
    sent it (JSON types arrive parsed)."""
    found = driver.execute_script(_LABELLED_CELL_JS + "return cell.model.outputs.toJSON()"
                                  ".filter(o => o.data && arguments[1] in o.data).map(o => o.data[arguments[1]]);",
                                  label, mime)
    assert found is not None, f"no code cell labelled {label!r} in the open notebook"
    return found


def notebook_scroller(driver):
    """The element that scrolls the open notebook (what "the page" is inside JupyterLab)."""
    return driver.execute_script("const panel = window.jupyterapp.shell.currentWidget;"
                                 "return panel.content.outerNode || panel.content.node;")


# The panel of the open notebook whose path is arguments[0], in `panel` (or undefined).
_PANEL_JS = ("const panel = Array.from(window.jupyterapp.shell.widgets('main'))"
             ".find(w => w.context && w.context.path === arguments[0]);")


def show_notebook(driver, path: str) -> None:
    """Bring the open notebook `path` to the front again (after another one was opened)."""
    found = driver.execute_script(_PANEL_JS + "if (panel) window.jupyterapp.shell.activateById(panel.id);"
                                  "return !!panel;", path)
    assert found, f"{path} is not open"
    wait_for(driver, lambda s: s.get("ready") and s.get("path") == path, PAGE_TIMEOUT, f"{path} in front")


def close_notebook(driver, path: str) -> None:
    """Close the open notebook `path` without saving it (a cell opened by the checks
    counts as an edit). Its kernel keeps running until the server stops, which shuts
    every kernel down."""
    # Marked clean, so that nothing is saved and no dialog asks.
    assert driver.execute_script(_PANEL_JS + "if (!panel) return false;"
                                 "panel.context.model.dirty = false; panel.close(); return true;", path), \
        f"{path} is not open"
    deadline = time.monotonic() + 30
    while driver.execute_script(_PANEL_JS + "return !!panel;", path):
        dialog = driver.execute_script("const d = document.querySelector('.jp-Dialog'); return d && d.innerText;")
        assert time.monotonic() < deadline, f"{path} did not close" + (f"; a dialog says: {dialog!r}" if dialog else "")
        time.sleep(0.2)


# A markdown cell's rendered markdown is the widget the cell marks `.jp-MarkdownOutput`,
# whichever renderer made it: JupyterLab's own (`.jp-RenderedMarkdown`) or an extension's,
# such as jupyterlab-quarto's markdown-it renderer (`.quarto-rendered-md`). A piece of
# mathematics is one that MathJax typeset (`mjx-container`), or one that the renderer took
# for mathematics and left for a MathJax to typeset but that none has: jupyterlab-quarto
# wraps each in `.quarto-inline-math` or `.quarto-display-math` and shows the TeX until its
# own MathJax, fetched from a CDN, typesets it (inside the same span).
_MARKDOWN_JS = """
const panel = window.jupyterapp.shell.currentWidget;
return panel.content.widgets.map((cell, index) => ({cell, index}))
  .filter(({cell}) => cell.model.type === 'markdown')
  .map(({cell, index}) => {
    const shown = cell.node.querySelector('.jp-MarkdownOutput');
    const maths = shown ? Array.from(shown.querySelectorAll(
        'mjx-container, .quarto-inline-math, .quarto-display-math'))
      .filter(e => e.matches('mjx-container') || !e.querySelector('mjx-container')) : [];
    return {
      index, source: cell.model.sharedModel.getSource(),
      tags: cell.model.getMetadata('tags') || [],
      rendered: cell.rendered && !!shown && shown.childElementCount > 0,
      maths: maths.length,
      typeset: maths.filter(e => e.matches('mjx-container')).length,
      // What surrounds the first piece, as the student reads it.
      around: maths.length ? (maths[0].parentElement.textContent || '').replace(/\\s+/g, ' ').slice(0, 200) : '',
    };
  });
"""


_RENDER_MARKDOWN_JS = """
const done = arguments[arguments.length - 1];
const panel = window.jupyterapp.shell.currentWidget;
const frame = () => new Promise(resolve => requestAnimationFrame(() => requestAnimationFrame(resolve)));
const shown = cell => !!cell.node.querySelector('.jp-MarkdownOutput > *');
(async () => {
  const cells = panel.content.widgets;
  for (let index = 0; index < cells.length; index++) {
    const cell = cells[index];
    if (cell.model.type !== 'markdown' || !cell.model.sharedModel.getSource().trim() || shown(cell)) continue;
    if (cell.inputHidden) cell.inputHidden = false;
    await panel.content.scrollToItem(index, 'start');
    for (let tries = 0; tries < 50 && !shown(cell); tries++) await frame();
  }
  const last = cells.length - 1;
  if (last >= 0) await panel.content.scrollToItem(last, 'end');
})().then(() => done(null), error => done(String(error)));
"""


def render_markdown(driver, timeout: float = 120.0) -> None:
    """Bring every markdown cell of the open notebook into view once, top to bottom, as a
    student scrolling down would (JupyterLab renders cells out of view only when the
    browser is idle), opening any whose input is collapsed, as a student clicking it
    would; ends at the last cell."""
    driver.set_script_timeout(timeout)
    error = driver.execute_async_script(_RENDER_MARKDOWN_JS)
    assert error is None, f"rendering the markdown failed: {error}"


def markdown_cells(driver) -> list[dict]:
    """The markdown cells of the open notebook as JupyterLab renders them: index, source,
    tags, whether the cell shows its rendered markdown, how many pieces of it were taken for
    mathematics (`maths`: typeset by MathJax, or marked for a MathJax that never typeset
    them) and how many of those MathJax typeset (`typeset`), with the text around the first."""
    return driver.execute_script(_MARKDOWN_JS)


_SOLUTIONS_JS = """
const done = arguments[arguments.length - 1];
const panel = window.jupyterapp.shell.currentWidget;
const solutions = panel.content.widgets.map((cell, index) => ({cell, index}))
  .filter(({cell}) => cell.model.type === 'markdown' &&
          /Solution to exercise \\d+\\.\\d+/.test(cell.model.sharedModel.getSource()) &&
          cell.model.sharedModel.getSource().includes('```python'));
const visible = e => e.checkVisibility() && e.getBoundingClientRect().height > 0;
const frame = () => new Promise(resolve => requestAnimationFrame(() => requestAnimationFrame(resolve)));
(async () => {
  const found = [];
  for (const {cell, index} of solutions) {
    // In view, so that the browser lays the cell out (cells out of view may be skipped).
    await panel.content.scrollToItem(index, 'center');
    await frame();
    // A cell brought into view renders its markdown asynchronously; on a busy machine that
    // takes more than a few frames, so wait up to 15 s for its text.
    const until = performance.now() + 15000;
    while (!(cell.node.innerText || '').trim() && performance.now() < until) await frame();
    const details = cell.node.querySelector('.jp-MarkdownOutput details');
    found.push({
      index, title: cell.model.sharedModel.getSource().match(/Solution to exercise \\d+\\.\\d+/)[0],
      rendered: cell.rendered, input_hidden: cell.inputHidden,
      details: details ? (details.open ? 'open' : 'closed') : 'none',
      code_shown: Array.from(cell.node.querySelectorAll('pre, .jp-InputArea-editor')).filter(visible).length,
      text: (cell.node.innerText || '').trim(),
    });
  }
  return found;
})().then(done, error => done({error: String(error)}));
"""


def solution_cells(driver, timeout: float = 60.0) -> list[dict]:
    """Every markdown cell of the open notebook that holds an exercise's worked solution
    (it names "Solution to exercise N.M" and has a ```python block), as a student sees
    it once scrolled into view: its title, whether it shows rendered markdown or its
    input, the state of its `<details>` block, how many code blocks or editors are
    visible in it, and its text."""
    driver.set_script_timeout(timeout)
    found = driver.execute_async_script(_SOLUTIONS_JS)
    assert not isinstance(found, dict), f"reading the solutions failed: {found}"
    return found
