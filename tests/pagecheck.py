"""Open built pages in headless Chromium and check them as a reader would.

`check_page(url, search_term, expected_rows_predicate)` waits for the interactive
tables (itables / DataTables) to render, fails on any SEVERE browser console entry,
types into a table's search box and checks that the visible rows shrink to the rows the
predicate accepts. `serve_folder(folder)` serves a built site on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Sequence

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
CHROMEDRIVER_CANDIDATES = ("/usr/bin/chromedriver",)

Row = Sequence[str]


def find_browser() -> tuple[str, str] | None:
    """Paths of (chromium, chromedriver), or None when either is missing."""
    chromium = os.environ.get("CHROMIUM_BIN") or next(
        (p for p in CHROMIUM_CANDIDATES if os.access(p, os.X_OK)), shutil.which("chromium")
    )
    driver = os.environ.get("CHROMEDRIVER_BIN") or next(
        (p for p in CHROMEDRIVER_CANDIDATES if os.access(p, os.X_OK)), shutil.which("chromedriver")
    )
    if not chromium or not driver:
        return None
    return chromium, driver


def browser_missing_reason() -> str | None:
    """Why the browser checks cannot run here (None when they can)."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install selenium)"
    if find_browser() is None:
        return "Chromium or chromedriver is missing (Debian packages chromium and chromium-driver)"
    return None


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - signature fixed by the base class
        pass


@contextlib.contextmanager
def serve_folder(folder: Path) -> Iterator[str]:
    """Serve `folder` over HTTP on 127.0.0.1 at a free port; yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def make_driver(width: int = 1280, height: int = 1100):
    """A headless Chromium driven by Debian's chromedriver, console logs captured."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    found = find_browser()
    if found is None:
        raise RuntimeError(browser_missing_reason() or "no browser")
    chromium, chromedriver = found
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-dev-shm-usage",
        "--disable-extensions",
        "--no-first-run",
        f"--window-size={width},{height}",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)


@dataclass
class PageCheck:
    url: str
    n_tables: int
    rows_before: list[list[str]]
    rows_after: list[list[str]]
    console: list[dict] = field(default_factory=list)
    screenshot: Path | None = None


# DataTables tables holding the data; with scrollX the header is drawn in a second table.
_TABLES_JS = """
const tables = () => Array.from(document.querySelectorAll('table.dataTable')).filter(
  t => !t.closest('.dt-scroll-head, .dt-scroll-foot, .dataTables_scrollHead, .dataTables_scrollFoot'));
"""

_ROWS_JS = _TABLES_JS + """
const table = tables()[arguments[0]];
if (!table) return null;
const rows = [];
for (const tr of table.querySelectorAll('tbody tr')) {
  if (tr.querySelector('td.dt-empty, td.dataTables_empty')) continue;
  rows.push(Array.from(tr.querySelectorAll('td, th')).map(td => td.textContent.trim()));
}
return rows;
"""

_SEARCH_JS = _TABLES_JS + """
const table = tables()[arguments[0]];
const box = table && table.closest('.dt-container, .dataTables_wrapper');
return box ? box.querySelector('.dt-search input, .dataTables_filter input, input[type=search]') : null;
"""


def _wait(condition: Callable[[], object], timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.1)


def check_page(
    url: str,
    search_term: str,
    expected_rows_predicate: Callable[[Row], bool],
    *,
    table_index: int | None = None,
    screenshot: Path | None = None,
    timeout: float = 30.0,
    driver=None,
) -> PageCheck:
    """Open `url`, wait for its interactive tables, search one of them, check the rows.

    Fails (AssertionError) when: no interactive table renders; the browser console has a
    SEVERE entry; the chosen table has no search box; after typing `search_term` the
    visible rows are not fewer than before, are empty, or include a row for which
    `expected_rows_predicate(row_cells)` is false. With `table_index=None` the first
    table that has a search box and a row matching `search_term` is used.
    """
    own_driver = driver is None
    driver = driver or make_driver()
    try:
        driver.get_log("browser")  # drop entries left by earlier pages of a shared driver
        driver.get(url)
        n_tables = _wait(
            lambda: driver.execute_script(
                _TABLES_JS + "const t = tables(); return t.length && t.every(x => x.querySelector('tbody')) ? t.length : 0;"
            ),
            timeout,
            "an interactive table (table.dataTable) to render",
        )
        time.sleep(0.3)  # let the remaining tables of the page initialise
        n_tables = driver.execute_script(_TABLES_JS + "return tables().length;")
        if table_index is None:
            table_index = _first_searchable(driver, n_tables, search_term)
        before = driver.execute_script(_ROWS_JS, table_index)
        assert before, f"{url}: table {table_index} shows no rows before searching"
        box = driver.execute_script(_SEARCH_JS, table_index)
        assert box is not None, f"{url}: table {table_index} has no search box"
        box.clear()
        box.send_keys(search_term)

        def filtered():
            rows = driver.execute_script(_ROWS_JS, table_index)
            return rows is not None and rows != before

        try:
            _wait(filtered, timeout, f"table {table_index} to filter on {search_term!r}")
        except AssertionError:
            pass  # the rows did not change: reported below with the counts
        time.sleep(0.2)
        after = driver.execute_script(_ROWS_JS, table_index)
        console = driver.get_log("browser")
        if screenshot is not None:
            screenshot = Path(screenshot)
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            driver.save_screenshot(str(screenshot))
    finally:
        if own_driver:
            driver.quit()

    severe = [entry for entry in console if entry.get("level") == "SEVERE"]
    assert not severe, f"{url}: browser console errors: " + "; ".join(e.get("message", "") for e in severe)
    assert after, f"{url}: searching {search_term!r} left no rows"
    assert len(after) < len(before), (
        f"{url}: searching {search_term!r} did not reduce the rows ({len(before)} before, {len(after)} after)"
    )
    wrong = [row for row in after if not expected_rows_predicate(row)]
    assert not wrong, f"{url}: after searching {search_term!r} these rows do not match: {wrong}"
    return PageCheck(url, n_tables, before, after, console, screenshot)


def _first_searchable(driver, n_tables: int, search_term: str) -> int:
    """The first table with a search box showing a row with `search_term`, else the first with a box."""
    needle = search_term.lower()
    with_box = [i for i in range(n_tables) if driver.execute_script(_SEARCH_JS, i) is not None]
    if not with_box:
        raise AssertionError(f"none of the {n_tables} interactive tables has a search box")
    for index in with_box:
        rows = driver.execute_script(_ROWS_JS, index) or []
        if len(rows) > 1 and any(needle in " ".join(row).lower() for row in rows):
            return index
    return with_box[0]
