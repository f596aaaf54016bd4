"""Built pages opened in headless Chromium: tables render offline, search filters rows.

Needs Debian's `chromium` and `chromium-driver`. Without them these tests are skipped,
unless BOOK_REQUIRE_BROWSER=1 (as in CI), which turns the skip into a failure.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest

import pagecheck
from helpers.paths import PROJECT_ROOT

pytestmark = pytest.mark.browser

LESSON_1 = "lessons/01-answering-from-retrieved-passages.ipynb"


@pytest.fixture(scope="session")
def browser():
    """A headless Chromium shared by the tests of the session (skip or fail if absent)."""
    reason = pagecheck.browser_missing_reason()
    if reason is not None:
        if os.environ.get("BOOK_REQUIRE_BROWSER") == "1":
            pytest.fail(f"BOOK_REQUIRE_BROWSER=1 but {reason}")
        pytest.skip(reason)
    driver = pagecheck.make_driver()
    yield driver
    driver.quit()


def build(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "helpers.book", "--project", str(project), *args],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
    )


def write_table_project(root: Path) -> Path:
    """A one-lesson book whose lesson shows a 16-row interactive table, offline."""
    (root / "lessons").mkdir(parents=True)
    (root / "_quarto.yml").write_text(
        textwrap.dedent(
            """\
            project:
              type: book
              output-dir: _book
              execute-dir: project
            book:
              title: "Table Book"
              chapters:
                - index.qmd
                - lessons/01-table.ipynb
            execute:
              enabled: true
            jupyter: python3
            """
        )
    )
    (root / "index.qmd").write_text("---\ntitle: Start\n---\n\nThe [table lesson](lessons/01-table.ipynb).\n")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_raw_cell("---\ntitle: Passages\n---"),
        nbformat.v4.new_code_cell(
            "#| echo: false\nimport pandas as pd\nimport itables\nitables.init_notebook_mode(connected=False)"
        ),
        nbformat.v4.new_code_cell(
            textwrap.dedent(
                """\
                #| label: tbl-passages
                #| tbl-cap: Sixteen passages
                passages = pd.DataFrame({
                    "passage_id": [f"H{i:02d}" for i in range(1, 17)],
                    "text": [f"passage number {i}" for i in range(1, 17)],
                })
                itables.show(passages)
                """
            )
        ),
    ]
    nbformat.write(nb, root / "lessons" / "01-table.ipynb")
    return root


@pytest.fixture(scope="module")
def table_site(tmp_path_factory):
    root = write_table_project(tmp_path_factory.mktemp("browser") / "book")
    result = build(root, "--engine", "nbclient")
    assert result.returncode == 0, result.stdout + result.stderr
    return root / "_book"


def test_interactive_table_renders_offline_and_search_filters(browser, table_site, tmp_path):
    shot = tmp_path / "table-page.png"
    with pagecheck.serve_folder(table_site) as base:
        result = pagecheck.check_page(
            base + "lessons/01-table.html", "H13", lambda row: row[0] == "H13",
            screenshot=shot, driver=browser,
        )
    assert result.n_tables == 1
    assert len(result.rows_before) == 10  # first page of 16 rows
    assert result.rows_after == [["H13", "passage number 13"]]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_front_page_has_no_console_errors_and_links_the_lesson(browser, table_site):
    with pagecheck.serve_folder(table_site) as base:
        browser.get(base + "index.html")
        links = browser.execute_script("return Array.from(document.links).map(a => a.getAttribute('href'));")
        console = browser.get_log("browser")
        browser.find_element("css selector", ".book-sidebar a[href='lessons/01-table.html']").click()
        title = browser.execute_script("return document.querySelector('h1').textContent;")
        console += browser.get_log("browser")
    assert "lessons/01-table.html" in links
    assert title == "Passages"
    assert [e for e in console if e["level"] == "SEVERE"] == []


def test_check_page_reports_console_errors(browser, table_site, tmp_path):
    site = tmp_path / "site"
    page = (table_site / "lessons" / "01-table.html").read_text()
    (site / "lessons").mkdir(parents=True)
    (site / "lessons" / "01-table.html").write_text(
        page.replace("</body>", "<script>throw new Error('deliberate failure');</script></body>")
    )
    with pagecheck.serve_folder(site) as base:
        with pytest.raises(AssertionError, match="browser console errors: .*deliberate failure"):
            pagecheck.check_page(base + "lessons/01-table.html", "H13", lambda row: row[0] == "H13", driver=browser)


def test_check_page_reports_rows_that_do_not_match(browser, table_site):
    with pagecheck.serve_folder(table_site) as base:
        with pytest.raises(AssertionError, match="do not match"):
            pagecheck.check_page(base + "lessons/01-table.html", "H1", lambda row: row[0] == "H01", driver=browser)


# --------------------------------------------------------------------------- the real book


def _newest_source_mtime() -> float:
    paths = [PROJECT_ROOT / "_quarto.yml", PROJECT_ROOT / "index.qmd"]
    for folder, pattern in (("lessons", "*.ipynb"), ("helpers", "**/*.py"), ("data", "**/*")):
        paths += [p for p in (PROJECT_ROOT / folder).glob(pattern) if p.is_file()]
    return max(p.stat().st_mtime for p in paths if p.exists())


LESSON_PAGES = [
    # (lesson, search term, which rows may remain)
    (LESSON_1, "H13", lambda row: any("H13" in cell for cell in row)),
    (LESSON_1, "Q3", lambda row: any("Q3" in cell for cell in row)),
    ("lessons/02-when-words-dont-match.ipynb", "X23", lambda row: any("X23" in cell for cell in row)),
    ("lessons/03-format-is-not-truth.ipynb", "Q6", lambda row: any("Q6" in cell for cell in row)),
]


@pytest.fixture(scope="session")
def real_book_site(tmp_path_factory):
    """The whole book: `_book` when it is newer than every source, else built now."""
    missing = [lesson for lesson, *_ in LESSON_PAGES if not (PROJECT_ROOT / lesson).is_file()]
    if missing:
        pytest.fail(f"lessons listed for the page check are missing: {missing}")
    existing = PROJECT_ROOT / "_book"
    pages = [existing / Path(lesson).with_suffix(".html") for lesson, *_ in LESSON_PAGES]
    if all(p.is_file() and p.stat().st_mtime > _newest_source_mtime() for p in pages):
        return existing
    site = tmp_path_factory.mktemp("real-book") / "site"
    result = build(PROJECT_ROOT, "--engine", "nbclient", "--output", str(site))
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return site


@pytest.mark.slow
@pytest.mark.parametrize(("lesson", "term", "predicate"), LESSON_PAGES,
                         ids=[f"{Path(l).stem[:2]}-{t}" for l, t, _ in LESSON_PAGES])
def test_lesson_page_tables_render_and_search_filters(browser, real_book_site, tmp_path,
                                                      lesson, term, predicate):
    page = Path(lesson).with_suffix(".html").as_posix()
    assert (real_book_site / page).is_file(), f"the build wrote no {page}"
    with pagecheck.serve_folder(real_book_site) as base:
        result = pagecheck.check_page(
            base + page, term, predicate,
            screenshot=tmp_path / f"{Path(lesson).stem}.png", driver=browser, timeout=60,
        )
    assert result.n_tables >= 1
    assert result.rows_after and all(predicate(row) for row in result.rows_after)
