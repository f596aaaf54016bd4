"""Built pages opened in headless Chromium: tables render offline, search filters rows.

Needs Debian's `chromium` and `chromium-driver`. Without them these tests are skipped,
unless BOOK_REQUIRE_BROWSER=1 (as in CI), which turns the skip into a failure.
"""

from __future__ import annotations

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
    ("lessons/04-human-support-review.ipynb", "wrong abstention",
     lambda row: any("wrong abstention" in cell for cell in row)),
    ("lessons/05-evidence-not-instructions.ipynb", "A06",
     lambda row: any("A06" in cell for cell in row)),
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


# --------------------------------------------------------------------------- exercises on the page

_SOLUTIONS_JS = """
return Array.from(document.querySelectorAll('details')).filter(d => {
  const s = d.querySelector(':scope > summary');
  return s && s.textContent.trim().startsWith('Solution to exercise');
}).map(d => ({
  title: d.querySelector(':scope > summary').textContent.trim(),
  open: d.open,
  shown: Array.from(d.children).some(c => c.tagName !== 'SUMMARY' && c.checkVisibility()),
  code: d.querySelectorAll('pre').length,
}));
"""


def _distinctive_line(cell, lesson) -> str:
    """A line of a solution's code that no other cell of the lesson contains."""
    nb = nbformat.read(PROJECT_ROOT / lesson, as_version=4)
    others = "\n".join(c.source for c in nb.cells if c.source != cell.solution_markdown)
    return next(line.strip() for line in cell.solution_code.splitlines()
                if len(line.strip()) > 12 and line.strip() not in others)


def _lessons_with_exercises() -> list[str]:
    """The lessons that test_exercises.py requires to have exercises, as page paths."""
    from test_exercises import LESSONS

    return [f"lessons/{notebook}" for _, (notebook, _env) in sorted(LESSONS.items())]


@pytest.mark.slow
@pytest.mark.parametrize("lesson", _lessons_with_exercises(),
                         ids=lambda lesson: Path(lesson).stem[:2])
def test_solutions_are_collapsed_on_the_page_until_opened(browser, real_book_site, lesson):
    from exercise_cells import exercise_cells

    cells = exercise_cells(nbformat.read(PROJECT_ROOT / lesson, as_version=4), lesson)
    assert cells, f"{lesson} has no exercises"
    page = Path(lesson).with_suffix(".html").as_posix()
    with pagecheck.serve_folder(real_book_site) as base:
        browser.get_log("browser")  # drop entries left by earlier pages of the shared browser
        browser.get(base + page)
        solutions = browser.execute_script(_SOLUTIONS_JS)
        visible_text = browser.execute_script("return document.body.innerText;")
        first_line = _distinctive_line(cells[0], lesson)
        browser.find_element("css selector", "details > summary").click()
        opened = browser.execute_script(_SOLUTIONS_JS)[0]
        visible_after = browser.execute_script("return document.body.innerText;")
        console = browser.get_log("browser")
    assert [s["title"] for s in solutions] == [f"Solution to exercise {c.key}" for c in cells]
    assert not any(s["open"] or s["shown"] for s in solutions), solutions
    assert all(s["code"] >= 1 for s in solutions)
    # The starter cells ran: every check cell shows its placeholder verdict.
    for cell in cells:
        assert f"Exercise {cell.key}: not attempted yet." in visible_text
    assert first_line not in visible_text
    assert opened["open"] and opened["shown"] and first_line in visible_after
    assert [e for e in console if e["level"] == "SEVERE"] == []


@pytest.mark.slow
@pytest.mark.parametrize("width", [1400, 1000, 700])
def test_side_by_side_table_fits_or_scrolls_inside_its_box(browser, real_book_site, tmp_path, width):
    """Lesson 3's widest table: the page never scrolls sideways, the table does so inside its
    own box, and scrolled to its last column it still shows the question IDs."""
    page = "lessons/03-format-is-not-truth.html"
    shot = tmp_path / f"side-by-side-{width}.png"
    with pagecheck.serve_folder(real_book_site) as base:
        fit = pagecheck.table_fit(browser, base + page, "#tbl-side-by-side", width, screenshot=shot)
    assert not fit.problems(), f"{page} at {width} px: " + "; ".join(fit.problems()) + f" (screenshot {shot})"
    assert fit.measures["first_text"].startswith("Q")


@pytest.mark.slow
def test_questions_table_keeps_its_dollar_signs_on_the_page(browser, real_book_site):
    """The built page shows Q1's acceptable answers as the fixture holds them, untypeset."""
    from helpers.fixture import load_riverton

    expected = load_riverton().questions.set_index("question_id").loc["Q1", "acceptable_answers"]
    page = Path(LESSON_1).with_suffix(".html").as_posix()
    with pagecheck.serve_folder(real_book_site) as base:
        browser.get(base + page)
        found = browser.execute_script(
            """
            const table = document.querySelector('#tbl-questions table');
            if (!table) return null;
            const heads = Array.from(table.querySelectorAll('thead th')).map(th => th.textContent.trim());
            const row = Array.from(table.querySelectorAll('tbody tr')).find(tr => tr.cells[0].textContent.trim() === 'Q1');
            return {cell: row ? row.cells[heads.indexOf('Acceptable short answers')].textContent : null,
                    math: document.querySelectorAll('mjx-container, .MathJax, span.math').length};
            """
        )
    assert found is not None, f"{page} has no table under #tbl-questions"
    assert found["cell"] == expected
    assert found["math"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("lesson", sorted({lesson for lesson, *_ in LESSON_PAGES}))
def test_lesson_pages_carry_no_progress_bar(real_book_site, lesson):
    page = (real_book_site / Path(lesson).with_suffix(".html")).read_text(encoding="utf-8")
    residue = [mark for mark in ("application/vnd.jupyter.widget", "s/question", "question/s", "it/s]")
               if mark in page]
    assert residue == [], f"{lesson}: progress-bar residue in the page: {residue}"
