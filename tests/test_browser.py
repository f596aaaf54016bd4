"""Built pages opened in headless Chromium: tables render offline, search filters rows.

The whole book is built once per engine and test session, each time into a fresh copy of
the project (tests/book_session.py): with nbclient + nbconvert, re-using the session's
lesson executions, and with real Quarto when a `quarto` command is found ($QUARTO or PATH;
skipped otherwise, an error under BOOK_REQUIRE_QUARTO=1). Every page check runs on both
sites.

Needs Debian's `chromium` and `chromium-driver`. Without them these tests are skipped,
unless BOOK_REQUIRE_BROWSER=1 (as in CI), which turns the skip into a failure.
"""

from __future__ import annotations

import ast
import time
from pathlib import Path

import nbformat
import pandas as pd
import pytest

import pagecheck
from book_session import BuiltSite
from projects import code, run_book, write_project
from runtime.paths import PROJECT_ROOT

pytestmark = pytest.mark.browser

LESSON_1 = "lessons/01-answering-from-retrieved-passages.ipynb"


TABLE_CELLS = [
    code("#| echo: false\nimport pandas as pd\nimport itables\nitables.init_notebook_mode(connected=False)"),
    code(
        """
        #| label: tbl-passages
        #| tbl-cap: Sixteen passages
        passages = pd.DataFrame({
            "passage_id": [f"H{i:02d}" for i in range(1, 17)],
            "text": [f"passage number {i}" for i in range(1, 17)],
        })
        itables.show(passages)
        """
    ),
    # A plain table, shown without the helpers (this book shows every DataFrame as an itable).
    code("from IPython.display import HTML\nHTML(passages.head(2).to_html())"),
]
TABLE_PAGE = "lessons/01-sample.html"


@pytest.fixture(scope="module")
def table_site(tmp_path_factory):
    """A one-lesson book whose lesson shows a 16-row interactive table, offline."""
    root = write_project(tmp_path_factory.mktemp("browser") / "book", TABLE_CELLS, title="Passages")
    result = run_book(root, "--engine", "nbclient")
    assert result.returncode == 0, result.stdout + result.stderr
    return root / "_book"


def test_interactive_table_renders_offline_and_search_filters(browser, table_site, tmp_path):
    shot = tmp_path / "table-page.png"
    with pagecheck.serve_folder(table_site) as base:
        result = pagecheck.check_page(base + TABLE_PAGE, "H13", lambda row: row[0] == "H13",
                                      screenshot=shot, driver=browser)
        loose = pagecheck.loose_tables(browser)
    assert result.n_tables == 1
    assert len(result.rows_before) == 10  # first page of 16 rows
    assert result.rows_after == [["H13", "passage number 13"]]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Both tables of the page are shown without runtime.display: the interactive one and a plain one.
    assert len(loose) == 2 and all("passage number 1" in text for text in loose), loose


def test_front_page_has_no_console_errors_and_links_the_lesson(browser, table_site):
    with pagecheck.serve_folder(table_site) as base:
        browser.get(base + "index.html")
        links = browser.execute_script("return Array.from(document.links).map(a => a.getAttribute('href'));")
        console = browser.get_log("browser")
        browser.find_element("css selector", f".book-sidebar a[href='{TABLE_PAGE}']").click()
        title = browser.execute_script("return document.querySelector('h1').textContent;")
        console += browser.get_log("browser")
    assert TABLE_PAGE in links
    assert title == "Passages"
    assert [e for e in console if e["level"] == "SEVERE"] == []


@pytest.mark.parametrize("error, term, predicate, message", [
    (True, "H13", lambda row: row[0] == "H13", "browser console errors: .*deliberate failure"),
    (False, "H1", lambda row: row[0] == "H01", "do not match"),
])
def test_check_page_reports_console_errors_and_rows_that_do_not_match(browser, table_site, tmp_path,
                                                                      error, term, predicate, message):
    site = tmp_path / "site"
    (site / "lessons").mkdir(parents=True)
    page = (table_site / TABLE_PAGE).read_text()
    if error:
        page = page.replace("</body>", "<script>throw new Error('deliberate failure');</script></body>")
    (site / TABLE_PAGE).write_text(page)
    with pagecheck.serve_folder(site) as base, pytest.raises(AssertionError, match=message):
        pagecheck.check_page(base + TABLE_PAGE, term, predicate, driver=browser)


def _wide_page(folder: Path, key_columns: int) -> str:
    """A page holding one interactive table, too wide for a 700 px window, that pins
    ``key_columns`` columns; its scripts are inline, so it works offline."""
    import itables.options
    from itables.javascript import generate_init_offline_itables_html

    from runtime.display import bundle

    columns = {f"c{n}": f"Column {n}" for n in range(8)}
    frame = pd.DataFrame({name: [f"{name} row {r} " + "words " * 12 for r in range(3)] for name in columns})
    html = bundle(frame, columns, name="wide", interactive=True, key_columns=key_columns)["text/html"]
    name = f"wide-{key_columns}.html"
    scripts = generate_init_offline_itables_html(itables.options.dt_bundle)
    (folder / name).write_text(f"<!doctype html><html><body>{scripts}<div id='wide'>{html}</div></body></html>",
                               encoding="utf-8")
    return name


def test_table_fit_checks_every_key_column_scrolled_to_the_end(browser, tmp_path):
    """Two key columns: pinned both, the table passes; pinned one, the second is reported."""
    pages = {n: _wide_page(tmp_path, n) for n in (2, 1)}
    with pagecheck.serve_folder(tmp_path) as base:
        fits = {n: pagecheck.table_fit(browser, base + page, "#wide", 700, key_columns=2)
                for n, page in pages.items()}
    assert fits[2].scrolls and fits[1].scrolls
    assert fits[2].problems() == [], fits[2].measures
    assert [cell["text"][:9] for cell in fits[2].measures["keys"]] == ["c0 row 0 ", "c1 row 0 "]
    assert fits[1].problems() == [
        "1 column(s) pinned, not the 2 key column(s)",
        f"scrolled to the end, key column 2 ({fits[1].measures['keys'][1]['text']!r}) is out of view",
    ]


# --------------------------------------------------------------------------- the real book, both engines

LESSON_PAGES = [
    # (lesson, search term, which rows may remain)
    (LESSON_1, "H13", lambda row: any("H13" in cell for cell in row)),
    (LESSON_1, "Q3", lambda row: any("Q3" in cell for cell in row)),
    ("lessons/02-when-words-dont-match.ipynb", "X23", lambda row: any("X23" in cell for cell in row)),
    ("lessons/03-format-is-not-truth.ipynb", "Q6", lambda row: any("Q6" in cell for cell in row)),
    ("lessons/04-human-support-review.ipynb", "wrong abstention",
     lambda row: any("wrong abstention" in cell for cell in row)),
    ("lessons/05-evidence-not-instructions.ipynb", "evasion",  # the routing misses' table
     lambda row: any("evasion" in cell for cell in row)),
]
LESSONS = sorted({lesson for lesson, *_ in LESSON_PAGES})
ENGINES = ["nbclient", "quarto"]


@pytest.fixture(scope="session", params=ENGINES)
def site(request) -> BuiltSite:
    """The whole book as one engine built it, once per session, in a copy of the project
    (tests/book_session.py): never the checkout's `_book`, which may be stale or another
    engine's."""
    built = request.getfixturevalue(f"{request.param}_site")
    missing = [lesson for lesson in LESSONS if not (PROJECT_ROOT / lesson).is_file()]
    assert not missing, f"lessons listed for the page check are missing: {missing}"
    for lesson in LESSONS:
        assert (built.folder / Path(lesson).with_suffix(".html")).is_file(), \
            f"the {built.engine} build wrote no page for {lesson}"
    return built


def _page(lesson: str) -> str:
    return Path(lesson).with_suffix(".html").as_posix()


@pytest.mark.slow
@pytest.mark.parametrize("page", ["index.html", "guide.html"])
def test_pages_without_tables_load_without_console_errors(browser, site, page):
    """The front page and the guide for authors; every lesson page gets the same checks
    in the search test below."""
    with pagecheck.serve_folder(site.folder) as base:
        browser.get_log("browser")  # drop entries left by earlier pages of the shared browser
        browser.get(base + page)
        pagecheck.wait_for_tables(browser, timeout=60)
        console = browser.get_log("browser")
        title = browser.execute_script("const h = document.querySelector('h1'); return h && h.textContent;")
    assert title, f"{site.engine}: {page} has no title"
    if page == "guide.html":
        assert "For authors and instructors" in title
    severe = [e["message"] for e in console if e["level"] == "SEVERE"]
    assert severe == [], f"{site.engine}: {page}: browser console errors: {severe}"


@pytest.mark.slow
@pytest.mark.parametrize(("lesson", "term", "predicate"), LESSON_PAGES,
                         ids=[f"{Path(page).stem[:2]}-{t}" for page, t, _ in LESSON_PAGES])
def test_lesson_page_loads_without_console_errors_and_search_filters(browser, site, tmp_path,
                                                                     lesson, term, predicate):
    """Every lesson page has a title, no console error (check_page fails on one), tables
    that render offline, each in the helpers' box, and a search box that filters rows."""
    with pagecheck.serve_folder(site.folder) as base:
        result = pagecheck.check_page(base + _page(lesson), term, predicate,
                                      screenshot=tmp_path / f"{Path(lesson).stem}.png", driver=browser,
                                      timeout=60)
        title = browser.execute_script("const h = document.querySelector('h1'); return h && h.textContent;")
        boxes = browser.execute_script("return document.querySelectorAll('div.riverton-table').length;")
        loose = pagecheck.loose_tables(browser)
    assert title, f"{site.engine}: {_page(lesson)} has no title"
    assert result.n_tables >= 1
    assert result.rows_after and all(predicate(row) for row in result.rows_after)
    assert boxes >= 1 and loose == [], f"{site.engine}: {lesson}: tables outside runtime.display.show_table: {loose}"


# --------------------------------------------------------------------------- exercises on the page

# Solutions as either engine writes them: nbclient's build a <details> whose <summary> is
# the title; Quarto 1.10 a callout whose body is a Bootstrap `.callout-collapse.collapse`,
# shown once it has `.show`.
_SOLUTIONS_JS = """
const found = [];
for (const box of document.querySelectorAll('details, div.callout')) {
  let title, parts, open, toggle, kind, collapsed;
  if (box.tagName === 'DETAILS') {
    toggle = box.querySelector(':scope > summary');
    if (!toggle) continue;
    title = toggle.textContent.trim();
    parts = Array.from(box.children).filter(c => c.tagName !== 'SUMMARY');
    open = box.open; collapsed = !box.open; kind = 'details';
  } else {
    toggle = box.querySelector(':scope > .callout-header');
    const body = box.querySelector(':scope > .callout-collapse');
    if (!toggle || !body) continue;
    const heading = toggle.querySelector('.callout-title-container').cloneNode(true);
    heading.querySelectorAll('.screen-reader-only').forEach(e => e.remove());
    title = heading.textContent.trim();
    parts = [body];
    open = body.classList.contains('show') && !body.classList.contains('collapsing');
    collapsed = body.classList.contains('collapse') && !body.classList.contains('show');
    kind = 'callout';
  }
  if (!title.startsWith('Solution to exercise')) continue;
  found.push({title, open, collapsed, kind, toggle,
              shown: parts.some(c => c.checkVisibility() && c.getBoundingClientRect().height > 0),
              code: parts.reduce((n, c) => n + c.querySelectorAll('pre').length, 0)});
}
return found;
"""
SOLUTION_KIND = {"nbclient": "details", "quarto": "callout"}


def _solutions(browser) -> list[dict]:
    return browser.execute_script(_SOLUTIONS_JS)


def _distinctive_line(cell, lesson) -> str:
    """A line of a solution's code that no other cell of the lesson contains."""
    nb = nbformat.read(PROJECT_ROOT / lesson, as_version=4)
    others = "\n".join(c.source for c in nb.cells if c.source != cell.solution_markdown)
    return next(line.strip() for line in cell.solution_code.splitlines()
                if len(line.strip()) > 12 and line.strip() not in others)


def _lessons_with_exercises() -> list[str]:
    """The lessons that test_exercises.py requires to have exercises, as page paths."""
    from exercise_cells import LESSONS as EXERCISE_LESSONS

    return [f"lessons/{notebook}" for _, notebook in sorted(EXERCISE_LESSONS.items())]


@pytest.mark.slow
@pytest.mark.parametrize("lesson", _lessons_with_exercises(), ids=lambda lesson: Path(lesson).stem[:2])
def test_solutions_are_collapsed_on_the_page_until_opened(browser, site, lesson):
    from exercise_cells import exercise_cells

    cells = exercise_cells(nbformat.read(PROJECT_ROOT / lesson, as_version=4), lesson)
    assert cells, f"{lesson} has no exercises"
    lines = [_distinctive_line(cell, lesson) for cell in cells]
    with pagecheck.serve_folder(site.folder) as base:
        browser.get_log("browser")  # drop entries left by earlier pages of the shared browser
        browser.get(base + _page(lesson))
        solutions = _solutions(browser)
        visible_text = browser.execute_script("return document.body.innerText;")
        assert solutions, f"{site.engine}: {lesson} shows no solution"
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", solutions[0]["toggle"])
        solutions[0]["toggle"].click()
        deadline = time.monotonic() + 10
        while not ((opened := _solutions(browser)[0])["open"] and opened["shown"]) and time.monotonic() < deadline:
            time.sleep(0.1)
        visible_after = browser.execute_script("return document.body.innerText;")
        after = _solutions(browser)
        console = browser.get_log("browser")
    engine = site.engine
    assert [s["title"] for s in solutions] == [f"Solution to exercise {c.key}" for c in cells], engine
    assert {s["kind"] for s in solutions} == {SOLUTION_KIND[engine]}, engine
    shown = [s["title"] for s in solutions if s["open"] or s["shown"] or not s["collapsed"]]
    assert shown == [], f"{engine}: solutions open before the reader opens them: {shown}"
    assert all(s["code"] >= 1 for s in solutions)
    # The starter cells ran: every check cell shows its placeholder verdict.
    for cell in cells:
        assert f"Exercise {cell.key}: not attempted yet." in visible_text, f"{engine}: {lesson}, {cell.key}"
    hidden = [line for line in lines if line in visible_text]
    assert hidden == [], f"{engine}: solution code visible before any is opened: {hidden}"
    assert opened["open"] and opened["shown"] and lines[0] in visible_after, f"{engine}: {opened}"
    # Opening one solution opens that one only.
    assert not any(s["open"] or s["shown"] for s in after[1:]), engine
    assert all(line not in visible_after for line in lines[1:]), engine
    assert [e for e in console if e["level"] == "SEVERE"] == []


# --------------------------------------------------------------------------- wide tables, dollar signs, progress

LESSON_4 = "lessons/04-human-support-review.ipynb"


def _key_columns(lesson: str, label: str) -> int:
    """The ``key_columns`` that the cell labelled ``label`` passes to show_table (default 1)."""
    nb = nbformat.read(PROJECT_ROOT / lesson, as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "code" and f"#| label: {label}" in c.source.splitlines())
    call = next(n for n in ast.walk(ast.parse(cell.source))
                if isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", None)) == "show_table")
    given = [k.value for k in call.keywords if k.arg == "key_columns"]
    return ast.literal_eval(given[0]) if given else 1


@pytest.mark.slow
@pytest.mark.parametrize("width", [1400, 1000, 700])
def test_the_review_table_fits_or_scrolls_inside_its_box(browser, site, tmp_path, width):
    """Lesson 4's widest table, the review with its notes: the page never scrolls sideways,
    the table does so inside its own box, and scrolled to its last column it still shows its
    key column."""
    key_columns = _key_columns(LESSON_4, "tbl-review")
    shot = tmp_path / f"review-{site.engine}-{width}.png"
    with pagecheck.serve_folder(site.folder) as base:
        fit = pagecheck.table_fit(browser, base + _page(LESSON_4), "#tbl-review", width,
                                  screenshot=shot, key_columns=key_columns)
    where = f"{site.engine}: {_page(LESSON_4)} at {width} px"
    assert not fit.problems(), f"{where}: " + "; ".join(fit.problems()) + f" (screenshot {shot})"
    if width == 700:
        assert fit.scrolls, f"{where}: the table fits, so its key columns were never tested"
    assert fit.measures["first_text"].startswith("R")


@pytest.mark.slow
def test_questions_table_keeps_its_dollar_signs_on_the_page(browser, site):
    """The built page shows Q1's acceptable answers as the fixture holds them, untypeset."""
    from runtime.fixture import load_riverton

    expected = load_riverton().questions.set_index("question_id").loc["Q1", "acceptable_answers"]
    assert expected == "$150|$150 per week|$150 a week|150 dollars per week"
    with pagecheck.serve_folder(site.folder) as base:
        browser.get(base + _page(LESSON_1))
        time.sleep(1.0)  # MathJax, where a page loads it, typesets after the page has loaded
        found = browser.execute_script(
            """
            const table = document.querySelector('#tbl-questions table');
            if (!table) return null;
            const heads = Array.from(table.querySelectorAll('thead th')).map(th => th.textContent.trim());
            const row = Array.from(table.querySelectorAll('tbody tr')).find(tr => tr.cells[0].textContent.trim() === 'Q1');
            return {cell: row ? row.cells[heads.indexOf('Acceptable short answers')].innerText : null,
                    math: document.querySelectorAll('mjx-container, .MathJax, span.math').length};
            """
        )
    assert found is not None, f"{site.engine}: the page has no table under #tbl-questions"
    assert found["cell"] == expected, site.engine
    assert found["math"] == 0, site.engine


@pytest.mark.slow
@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: Path(lesson).stem[:2])
def test_lesson_pages_carry_no_progress_bar(site, lesson):
    page = (site.folder / _page(lesson)).read_text(encoding="utf-8")
    residue = pagecheck.progress_residue(page)
    assert residue == [], f"{site.engine}: {lesson}: progress-bar residue in the page: {residue}"
