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
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

Row = Sequence[str]


def find_browser() -> tuple[str, str] | None:
    """Paths of (chromium, chromedriver): ``$CHROMIUM_BIN`` and ``$CHROMEDRIVER_BIN``, else
    Debian's commands on PATH; None when either is missing."""
    chromium = os.environ.get("CHROMIUM_BIN") or shutil.which("chromium") or shutil.which("chromium-browser")
    driver = os.environ.get("CHROMEDRIVER_BIN") or shutil.which("chromedriver")
    return (chromium, driver) if chromium and driver else None


def browser_missing_reason() -> str | None:
    """Why the browser checks cannot run here (None when they can)."""
    import importlib.util

    if importlib.util.find_spec("selenium") is None:
        return "selenium is not installed (pip install selenium)"
    if find_browser() is None:
        return "Chromium or chromedriver is missing (Debian packages chromium and chromium-driver)"
    return None


def require_browser() -> None:
    """Skip the calling test when Chromium is missing, or fail it under BOOK_REQUIRE_BROWSER=1."""
    import pytest

    reason = browser_missing_reason()
    if reason is not None and os.environ.get("BOOK_REQUIRE_BROWSER") == "1":
        pytest.fail(f"BOOK_REQUIRE_BROWSER=1 but {reason}")
    if reason is not None:
        pytest.skip(reason)


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
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-background-networking", "--disable-dev-shm-usage",
                     "--disable-extensions", "--no-first-run", f"--window-size={width},{height}"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)


@dataclass
class PageCheck:
    n_tables: int
    rows_before: list[list[str]]
    rows_after: list[list[str]]


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

#: The search box of an interactive table: DataTables 2, DataTables 1, any search input.
SEARCH_BOX = ".dt-search input, .dataTables_filter input, input[type=search]"

_SEARCH_JS = _TABLES_JS + """
const table = tables()[arguments[0]];
const box = table && table.closest('.dt-container, .dataTables_wrapper');
return box ? box.querySelector(arguments[1]) : null;
"""


def search_box(driver, root):
    """The search box inside ``root`` (an element holding one interactive table), or None."""
    return driver.execute_script("return arguments[0].querySelector(arguments[1]);", root, SEARCH_BOX)


def search_and_wait(box, term: str, read: Callable[[], object], done: Callable[[object], bool],
                    timeout: float = 30.0, poll: float = 0.2):
    """Type ``term`` into ``box``, then call ``read()`` until ``done(value)`` holds or
    ``timeout`` seconds pass; returns the last value read either way, for the caller to judge."""
    box.clear()
    box.send_keys(term)
    deadline = time.monotonic() + timeout
    while not done(value := read()) and time.monotonic() <= deadline:
        time.sleep(poll)
    return value


def wait_for_tables(driver, timeout: float = 30.0) -> int:
    """Wait until every interactive table of the open page has been drawn by DataTables
    (a page without one returns at once); returns how many there are."""
    return _wait(lambda: driver.execute_script(
        "if (document.readyState !== 'complete') return null;"
        "const pending = Array.from(document.querySelectorAll('table[id^=itables]'))"
        "  .filter(t => !t.closest('.dt-container, .dataTables_wrapper') || !t.querySelector('tbody td'));"
        "return pending.length ? null : [document.querySelectorAll('table[id^=itables]').length];"),
        timeout, "the interactive tables to render")[0]


# Cell outputs as Quarto (.cell-output-display) and nbconvert's lab template
# (.jp-OutputArea-output) write them.
_LOOSE_TABLES_JS = """
const outputs = '.cell-output-display, .cell-output, .jp-OutputArea-output';
const found = new Set(Array.from(document.querySelectorAll('table'))
  .filter(t => t.closest(outputs) && !t.closest('div.riverton-table')).map(t => t.closest(outputs)));
return Array.from(found).map(o => (o.innerText || '').trim().replace(/\\s+/g, ' ').slice(0, 120));
"""


def loose_tables(driver) -> list[str]:
    """The start of the text of each cell output of the open page that holds a table
    outside the helpers' container (``div.riverton-table``, see runtime.display)."""
    return driver.execute_script(_LOOSE_TABLES_JS)


#: Traces that a progress bar leaves in a page: the widget's data types and tqdm's rate
#: ("3/3 [00:01<00:00, 2.90question/s, Q3]", "1.20s/question", "it/s" in other units).
PROGRESS_MARKERS = ("application/vnd.jupyter.widget", "question/s", "s/question", "it/s]", "it/s,")


def progress_residue(page: str, *extra: str) -> list[str]:
    """The progress-bar traces (:data:`PROGRESS_MARKERS`, then ``extra``) found in ``page``."""
    return [mark for mark in (*PROGRESS_MARKERS, *extra) if mark in page]


def _wait(condition: Callable[[], object], timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.1)
    return value


def check_page(url: str, search_term: str, expected_rows_predicate: Callable[[Row], bool], *,
               table_index: int | None = None, screenshot: Path | None = None, timeout: float = 30.0,
               driver=None) -> PageCheck:
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
        drawn = "const t = tables(); return t.length && t.every(x => x.querySelector('tbody')) ? t.length : 0;"
        _wait(lambda: driver.execute_script(_TABLES_JS + drawn), timeout,
              "an interactive table (table.dataTable) to render")
        time.sleep(0.3)  # let the remaining tables of the page initialise
        n_tables = driver.execute_script(_TABLES_JS + "return tables().length;")
        if table_index is None:
            table_index = _first_searchable(driver, n_tables, search_term)
        before = driver.execute_script(_ROWS_JS, table_index)
        assert before, f"{url}: table {table_index} shows no rows before searching"
        box = driver.execute_script(_SEARCH_JS, table_index, SEARCH_BOX)
        assert box is not None, f"{url}: table {table_index} has no search box"
        # Rows that did not change are reported below with the counts.
        search_and_wait(box, search_term, lambda: driver.execute_script(_ROWS_JS, table_index),
                        lambda rows: rows is not None and rows != before, timeout)
        time.sleep(0.2)
        after = driver.execute_script(_ROWS_JS, table_index)
        console = driver.get_log("browser")
        if screenshot is not None:
            driver.save_screenshot(str(screenshot))
    finally:
        if own_driver:
            driver.quit()

    severe = [entry for entry in console if entry.get("level") == "SEVERE"]
    assert not severe, f"{url}: browser console errors: " + "; ".join(e.get("message", "") for e in severe)
    assert after, f"{url}: searching {search_term!r} left no rows"
    assert len(after) < len(before), (f"{url}: searching {search_term!r} did not reduce the rows "
                                      f"({len(before)} before, {len(after)} after)")
    wrong = [row for row in after if not expected_rows_predicate(row)]
    assert not wrong, f"{url}: after searching {search_term!r} these rows do not match: {wrong}"
    return PageCheck(n_tables, before, after)


def _first_searchable(driver, n_tables: int, search_term: str) -> int:
    """The first table with a search box showing a row with `search_term`, else the first with a box."""
    needle = search_term.lower()
    with_box = [i for i in range(n_tables) if driver.execute_script(_SEARCH_JS, i, SEARCH_BOX) is not None]
    if not with_box:
        raise AssertionError(f"none of the {n_tables} interactive tables has a search box")
    for index in with_box:
        rows = driver.execute_script(_ROWS_JS, index) or []
        if len(rows) > 1 and any(needle in " ".join(row).lower() for row in rows):
            return index
    return with_box[0]


# --------------------------------------------------------------------------- wide tables

_FIT_JS = """
const root = typeof arguments[0] === 'string' ? document.querySelector(arguments[0]) : arguments[0];
if (!root) return {missing: 'nothing matches ' + arguments[0]};
const page = (typeof arguments[1] === 'string' ? document.querySelector(arguments[1]) : arguments[1])
  || document.scrollingElement || document.documentElement;
const box = root.querySelector('div.riverton-table');
if (!box) return {missing: 'no div.riverton-table inside ' + arguments[0]};
const scroller = box.querySelector('.dt-scroll-body') || box;
const table = scroller.querySelector('table');
const rows = table ? Array.from(table.querySelectorAll('tbody tr')).filter(tr => tr.querySelector('td')) : [];
if (!rows.length) return {missing: 'the table inside ' + arguments[0] + ' has no rows'};
const rect = e => { const b = e.getBoundingClientRect(); return {left: b.left, right: b.right, width: b.width}; };
const visible = page === document.scrollingElement || page === document.documentElement
  ? window.innerWidth : page.getBoundingClientRect().right;
const result = {
  viewport: Math.round(visible), page_overflow: page.scrollWidth - page.clientWidth,
  box: rect(box), scroller: rect(scroller), overflow_x: getComputedStyle(scroller).overflowX,
  scroll_width: scroller.scrollWidth, client_width: scroller.clientWidth, table: rect(table),
};
const cells = Array.from(rows[0].querySelectorAll('td'));
const last = cells[cells.length - 1];
const saved = scroller.scrollLeft;
scroller.scrollLeft = scroller.scrollWidth;
result.scrolled_by = scroller.scrollLeft;
// The leading cells of the first row, scrolled to the end: the key columns and any other
// column the table pins (DataTables' FixedColumns and the static tables' CSS both make
// pinned cells position: sticky).
let pinned = 0;
while (pinned < cells.length && getComputedStyle(cells[pinned]).position === 'sticky') pinned++;
result.pinned = pinned;
result.keys = cells.slice(0, Math.max(arguments[2] || 0, pinned, 1)).map(
  td => Object.assign(rect(td), {text: td.textContent.trim()}));
result.first_cell = result.keys[0];
result.first_text = result.keys[0].text;
result.last_cell = rect(last);
scroller.scrollLeft = saved;
return result;
"""


@dataclass
class TableFit:
    """How a table sits in its page: measured by :func:`table_fit`."""

    selector: str
    width: int
    measures: dict
    key_columns: int = 1  # leading columns that must stay in view while the table scrolls

    @property
    def scrolls(self) -> bool:
        return self.measures["scroll_width"] > self.measures["client_width"] + 1

    def problems(self) -> list[str]:
        """What is wrong, in words (empty when the table fits, or scrolls inside its box with
        each of its key columns pinned and in view when scrolled to its right end)."""
        m = self.measures
        if "missing" in m:
            return [m["missing"]]
        found = []
        if m["page_overflow"] > 1:
            found.append(f"the page itself scrolls sideways by {m['page_overflow']} px")
        if m["box"]["right"] > m["viewport"] + 1:
            found.append(f"the table's box ends at {m['box']['right']:.0f} px, past the page's right edge at {m['viewport']} px")
        if self.scrolls:
            if m["overflow_x"] not in ("auto", "scroll"):
                found.append(f"the table is {m['scroll_width']} px wide in a {m['client_width']} px box "
                             f"that does not scroll (overflow-x: {m['overflow_x']})")
            elif m["last_cell"]["right"] > m["scroller"]["right"] + 1:
                found.append("scrolled to the end, the last column is still cut off")
            if m["pinned"] < self.key_columns:
                found.append(f"{m['pinned']} column(s) pinned, not the {self.key_columns} key column(s)")
            for number, cell in enumerate(m["keys"][:max(self.key_columns, m["pinned"])], start=1):
                if cell["left"] < m["scroller"]["left"] - 1 or cell["right"] > m["scroller"]["right"] + 1:
                    found.append(f"scrolled to the end, key column {number} ({cell['text']!r}) is out of view")
        return found


def measure_table(driver, root, page=None, key_columns: int = 1) -> dict:
    """Measure the table in `root` (a CSS selector or an element) as :class:`TableFit` reads it.

    `page` (a selector or an element) is what scrolls the page, such as JupyterLab's
    notebook panel; by default the document itself. The first `key_columns` cells of the
    first row (more, when more are pinned) are measured scrolled to the table's right end.
    """
    return driver.execute_script(_FIT_JS, root, page, key_columns)


def table_fit(driver, url: str, selector: str, width: int, height: int = 1000,
              screenshot: Path | None = None, timeout: float = 60.0, key_columns: int = 1) -> TableFit:
    """Open `url` in a window `width` px wide and measure the table inside `selector`.

    Interactive tables are measured once DataTables has drawn them. With `screenshot`, the
    page is saved scrolled to the table. The window's size is restored afterwards.
    """
    saved = driver.get_window_size()
    try:
        set_inner_width(driver, width, height)
        driver.get(url)
        _wait(lambda: driver.execute_script(
            "const r = document.querySelector(arguments[0]);"
            "return r && r.querySelector('div.riverton-table table') && "
            "(!r.querySelector('table[id^=itables]') || r.querySelector('table.dataTable tbody td'));", selector),
            timeout, f"the table in {selector} to render")
        time.sleep(0.5)  # DataTables adjusts column widths after its first draw
        measures = measure_table(driver, selector, key_columns=key_columns)
        if screenshot is not None:
            driver.execute_script("document.querySelector(arguments[0]).scrollIntoView();", selector)
            driver.save_screenshot(str(screenshot))
    finally:
        driver.set_window_size(saved["width"], saved["height"])
    return TableFit(selector, width, measures, key_columns)


def set_inner_width(driver, width: int, height: int = 1000) -> None:
    """Resize the window so that the page sees `width` CSS pixels (window.innerWidth)."""
    driver.set_window_size(width, height)
    inner = driver.execute_script("return window.innerWidth;")
    if inner != width:
        driver.set_window_size(width + (width - inner), height)
