"""The lessons as a student sees them: JupyterLab in headless Chromium.

Lesson 1 is run from top to bottom with "Run All" (in recorded mode, so it takes seconds
and needs no model); every lesson is opened, unexecuted, to check how JupyterLab renders
its prose. JupyterLab is started from this environment on 127.0.0.1 (a free port, no
token) and serves a temporary copy of the lesson notebooks, so nothing it writes can
reach the committed ones; the kernel imports `helpers`, `exercises` and `runtime` and reads `data/`
from the project as a student's would. Needs Chromium and chromedriver, like the page checks:
skipped without them unless BOOK_REQUIRE_BROWSER=1.
"""

from __future__ import annotations

import hashlib
import shutil
import textwrap
import time
from pathlib import Path

import nbformat
import pytest

import labcheck
import pagecheck
from test_lesson_prose import MATHS_TAG  # the tag of a markdown cell meant to hold mathematics
import exercises
from runtime.display import TABLE_MIME
from runtime.fixture import load_riverton
from runtime.paths import PROJECT_ROOT

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LESSON_1 = "lessons/01-answering-from-retrieved-passages.ipynb"
CHECKS = "student-checks.ipynb"
BROKEN = "broken.ipynb"
WIDTH = 1400
#: Every lesson notebook, for the checks of its prose (they execute nothing).
LESSON_FILES = sorted(path.name for path in (PROJECT_ROOT / "lessons").glob("[0-9][0-9]-*.ipynb"))
#: One notebook holding every lesson's markdown cells, in order, each marked with its
#: lesson and cell number, and a control cell at its end (see write_prose_notebook).
PROSE = "every-lessons-prose.ipynb"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_checks_notebook(path: Path) -> None:
    """A notebook with what lesson 1 does not exercise: a wide table shown both ways, a
    progress bar over questions, the build detector as a student's kernel sees it, and
    HTML with dollar signs shown without the helpers, which MathJax must typeset (without
    it, the dollar-sign checks could not fail)."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    setup = textwrap.dedent(
        """\
        import time
        from itables import init_notebook_mode
        from runtime.display import show_table
        from runtime.fixture import load_riverton
        from runtime.progress import QuestionProgress, book_build
        init_notebook_mode(all_interactive=False, connected=False)
        handbook = load_riverton().handbook
        # Ten columns, three of them long text, like lesson 3's side-by-side table.
        wide = handbook.assign(
            again=handbook["text"], once_more=handbook["text"].str.upper(),
            a="answer", b="abstain", c="flag premise", d="EM 0; F1 0.00",
            e="answer_has_citation, numbers_supported",
        )
        labels = {"passage_id": "Passage", "text": "Text", "topic": "Topic", "again": "Text again",
                  "a": "Action A", "once_more": "Text in capitals", "b": "Action B",
                  "c": "Action C", "d": "Agreement", "e": "Failed checks"}
        """
    )
    nb.cells = [nbformat.v4.new_code_cell(source) for source in (
        setup,
        "#| label: tbl-wide-static\nshow_table(wide, labels, name='wide_static')",
        "#| label: tbl-wide-interactive\n"
        "show_table(wide, labels, name='wide_interactive', interactive=True, key_columns=2)",
        "#| label: progress\n"
        "with QuestionProgress(4, 'probe reader (live)') as bar:\n"
        "    for n in range(1, 5):\n"
        "        bar.working_on_batch([f'Q{n}'])\n"
        "        time.sleep(0.3)\n"
        "        bar.finished()",
        "#| label: build-detector\nprint('book build:', book_build())",
        "#| label: mathjax-control\nfrom IPython.display import HTML\nHTML('<p>$a$ and $b$</p>')",
    )]
    nbformat.write(nb, path)


def write_prose_notebook(lessons: list[Path], path: Path) -> None:
    """One notebook with the markdown cells of every lesson, unchanged and in order (each
    cell's metadata names its lesson and its number there), then a control markdown cell
    tagged as meant to hold mathematics: JupyterLab must typeset its two pieces, which
    shows that MathJax runs on this notebook's markdown (without it, the prose check could
    not fail) and that it has reached the end of the notebook. Opening one notebook instead
    of five starts one kernel instead of five."""
    cells = []
    for lesson in lessons:
        nb = nbformat.read(lesson, as_version=4)
        for number, cell in enumerate(nb.cells, start=1):
            if cell.cell_type == "markdown":
                cell.metadata["prose_of"] = {"lesson": lesson.name, "cell": number}
                cells.append(cell)
    control = nbformat.v4.new_markdown_cell("The control of the prose check: $x^2$ and $y$ are mathematics.")
    control.metadata["tags"] = [MATHS_TAG]
    prose = nbformat.v4.new_notebook(cells=[*cells, control])
    prose.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(prose, path)


@pytest.fixture(scope="module")
def driver():
    pagecheck.require_browser()
    chrome = pagecheck.make_driver(WIDTH, 1000)
    yield chrome
    chrome.quit()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab serving a temporary copy of the lessons (and the checks notebook)."""
    pagecheck.require_browser()
    root = tmp_path_factory.mktemp("lab") / "project"
    shutil.copytree(PROJECT_ROOT / "lessons", root / "lessons")
    write_checks_notebook(root / CHECKS)
    broken = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in (
        "x = 1", "raise ValueError('deliberate failure in cell 2')", "y = 2")])
    broken.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(broken, root / BROKEN)
    write_prose_notebook([PROJECT_ROOT / "lessons" / name for name in LESSON_FILES], root / PROSE)
    committed = _digest(PROJECT_ROOT / LESSON_1)
    # Recorded replies: lesson 1 runs in seconds, on any machine, without a model.
    with labcheck.lab_server(root, env={"RIVERTON_READER_MODE": "recorded"}) as server:
        yield server
        kernels = server.kernel_pids()
        assert _digest(PROJECT_ROOT / LESSON_1) == committed, "the committed lesson 1 notebook changed"
    assert kernels, "JupyterLab started no kernel"
    left = [pid for pid in {server.pid, *kernels} if labcheck.alive(pid)]
    assert not left, f"still running after the server was stopped: PIDs {left}"


# --------------------------------------------------------------------------- DOM readers

_TABLE_ROWS_JS = """
const out = arguments[0];
const table = out.querySelector('.dt-scroll-body table') || out.querySelector('div.riverton-table table');
if (!table) return null;
const head = (out.querySelector('.dt-scroll-head table') || table).querySelectorAll('thead th');
const rows = Array.from(table.querySelectorAll('tbody tr'))
  .filter(tr => !tr.querySelector('td.dt-empty, td.dataTables_empty'))
  .map(tr => Array.from(tr.querySelectorAll('td')).map(td => td.textContent));
return {columns: Array.from(head).map(th => th.textContent.trim()), rows,
        math: out.querySelectorAll('mjx-container, .MathJax, .MathJax_Display').length};
"""


def shown_table(driver, output) -> dict:
    found = driver.execute_script(_TABLE_ROWS_JS, output)
    assert found is not None, "the cell's output holds no table"
    return found


def _screen(driver, tmp_path: Path, name: str) -> Path:
    shot = tmp_path / f"{name}.png"
    driver.save_screenshot(str(shot))
    return shot


# --------------------------------------------------------------------------- lesson 1


@pytest.fixture(scope="module")
def lesson_1(lab, driver, tmp_path_factory):
    """Lesson 1 opened in JupyterLab and run from top to bottom."""
    shot = tmp_path_factory.mktemp("lesson-1") / "screen.png"
    labcheck.open_notebook(driver, lab, LESSON_1, screenshot=shot)
    return labcheck.run_all(driver, screenshot=shot)


def test_lesson_1_runs_without_errors(lesson_1):
    code = [c for c in lesson_1["cells"] if c["type"] == "code" and c["source"].strip()]
    errors = [f"cell {c['index'] + 1} ({labcheck.first_line(c['source'])}): {e}"
              for c in code for e in c["errors"]]
    assert not errors, "cells show errors:\n" + "\n".join(errors)
    not_run = [c["index"] + 1 for c in code if c["execution_count"] is None]
    assert not not_run, f"cells never ran: {not_run}; {labcheck.describe(lesson_1)}"
    assert lesson_1["kernel"] == "idle"


def test_questions_table_shows_dollar_signs_as_written_and_no_output_is_typeset(lesson_1, driver, tmp_path):
    found = driver.execute_script(
        "const panel = window.jupyterapp.shell.currentWidget;"
        "return Array.from(panel.node.querySelectorAll('.jp-OutputArea mjx-container'))"
        ".map(m => (m.parentElement.textContent || '').trim().slice(0, 120));"
    )
    assert found == [], f"outputs with text typeset as mathematics: {found}"
    expected = load_riverton().questions.set_index("question_id").loc["Q1", "acceptable_answers"]
    assert expected.count("$") >= 2, "the fixture no longer has two dollar signs in one cell"
    output = labcheck.cell_output_element(driver, "tbl-questions")
    table = shown_table(driver, output)
    column = table["columns"].index("Acceptable short answers")
    q1 = [row for row in table["rows"] if row[0] == "Q1"]
    shot = _screen(driver, tmp_path, "questions-table")
    assert q1, f"no Q1 row in the questions table: {table['rows']} (screenshot {shot})"
    assert q1[0][column] == expected, (
        f"Q1's acceptable answers show as {q1[0][column]!r}, not {expected!r} (screenshot {shot})"
    )
    assert table["math"] == 0, f"MathJax typeset {table['math']} piece(s) of the questions table (screenshot {shot})"


def _table_payload(driver, label: str) -> dict:
    """The rows and column labels the cell's table output carries as JSON (TABLE_MIME)."""
    payloads = labcheck.cell_output_data(driver, label, TABLE_MIME)
    assert len(payloads) == 1, f"the cell {label!r} has {len(payloads)} table outputs"
    return payloads[0]


def test_every_table_of_lesson_1_sits_in_the_helpers_box(lesson_1, driver):
    """Tables shown outside runtime.display.show_table get neither the MathJax-ignore
    container nor the wrapping; lesson 1 shows none."""
    found = driver.execute_script(
        "const panel = window.jupyterapp.shell.currentWidget;"
        "const tables = Array.from(panel.node.querySelectorAll('.jp-OutputArea-output table'));"
        "return {all: tables.length, loose: tables.filter(t => !t.closest('div.riverton-table.mathjax_ignore'))"
        "  .map(t => (t.closest('.jp-OutputArea-output').innerText || '').trim().slice(0, 120))};"
    )
    assert found["all"] > 0
    assert found["loose"] == [], f"tables outside runtime.display.show_table: {found['loose']}"


def test_handbook_search_filters_rows_and_redrawn_rows_keep_their_dollar_signs(lesson_1, driver, tmp_path):
    """Searching leaves exactly the matching passages; DataTables draws new rows on every
    search, and they stay out of MathJax's reach too."""
    handbook = load_riverton().handbook
    payload = _table_payload(driver, "tbl-handbook")  # what the lesson's handbook table shows
    forklift = sorted(row[0] for row in payload["rows"] if "forklift" in " ".join(map(str, row)).lower())
    assert 0 < len(forklift) < len(handbook) and set(forklift) <= set(handbook["passage_id"])
    dollars = {pid: text for pid, text in handbook.set_index("passage_id")["text"].items() if "$" in text}
    assert len(dollars) >= 2, "the fixture no longer has two passages with a dollar sign"
    output = labcheck.cell_output_element(driver, "tbl-handbook")
    before = shown_table(driver, output)
    assert before["columns"] == payload["columns"]
    assert len(before["rows"]) == len(handbook), f"the handbook table shows {len(before['rows'])} rows"
    box = pagecheck.search_box(driver, output)
    assert box is not None, f"the handbook table has no search box (screenshot {_screen(driver, tmp_path, 'handbook')})"
    for term, expected in (("forklift", dict.fromkeys(forklift)), ("$", dollars)):
        after = pagecheck.search_and_wait(box, term, lambda: shown_table(driver, output),
                                          lambda t: sorted(row[0] for row in t["rows"]) == sorted(expected))
        shot = _screen(driver, tmp_path, f"handbook-{term}")
        text = after["columns"].index("Handbook text")
        shown = {row[0]: row[text] if term == "$" else None for row in after["rows"]}
        assert shown == expected, f"searching {term!r} left {sorted(shown)}, expected {sorted(expected)} ({shot})"
        assert after["math"] == 0, f"MathJax typeset part of the rows redrawn by a search ({shot})"


def test_run_all_leaves_every_solution_of_lesson_1_folded(lesson_1, driver, tmp_path):
    """Run All renders every markdown cell and shows its input; each worked solution must
    still show only its title, its code folded away until the student opens it."""
    labcheck.show_notebook(driver, LESSON_1)
    solutions = labcheck.solution_cells(driver)
    shot = _screen(driver, tmp_path, "solutions-after-run-all")
    expected = sorted(key for key, entry in exercises.EXERCISES.items() if entry.lesson == 1)
    assert sorted(s["title"].rsplit(" ", 1)[1] for s in solutions) == expected, (
        f"solution cells found: {[s['title'] for s in solutions]} (screenshot {shot})")
    unfolded = [f"{s['title']}: {s['code_shown']} code block(s) shown, <details> {s['details']}, "
                f"text {s['text'][:150]!r}"
                for s in solutions if s["code_shown"] or s["details"] != "closed"]
    assert not unfolded, "after Run All, solutions are not folded:\n" + "\n".join(unfolded) + f"\n(screenshot {shot})"
    for solution in solutions:
        assert solution["rendered"], solution["title"]
        assert solution["text"] == solution["title"], (solution["title"], solution["text"][:200])


# --------------------------------------------------------------------------- wide tables, progress


@pytest.fixture(scope="module")
def checks(lab, driver, lesson_1, tmp_path_factory):  # after lesson 1: one notebook at a time
    shot = tmp_path_factory.mktemp("checks") / "screen.png"
    labcheck.open_notebook(driver, lab, CHECKS, screenshot=shot)
    finished = labcheck.run_all(driver, screenshot=shot)
    assert not [e for c in finished["cells"] for e in c["errors"]], labcheck.describe(finished)
    return finished


@pytest.mark.parametrize("label", ["tbl-wide-static", "tbl-wide-interactive"])
@pytest.mark.parametrize("width", [1400, 1000])
def test_wide_table_scrolls_inside_its_box_in_jupyterlab(checks, driver, tmp_path, label, width):
    pagecheck.set_inner_width(driver, width)
    try:
        time.sleep(1.0)  # JupyterLab and DataTables re-lay out after a resize
        output = labcheck.cell_output_element(driver, label)
        key_columns = 2 if label == "tbl-wide-interactive" else 1  # as the checks notebook pins them
        measures = pagecheck.measure_table(driver, output, labcheck.notebook_scroller(driver), key_columns)
        fit = pagecheck.TableFit(label, width, measures, key_columns)
        shot = _screen(driver, tmp_path, f"{label}-{width}")
        assert fit.scrolls, f"{label} fits at {width} px: this check needs a table that does not"
        assert not fit.problems(), f"{label} at {width} px: " + "; ".join(fit.problems()) + f" (screenshot {shot})"
        assert measures["first_text"].startswith("H")
    finally:
        pagecheck.set_inner_width(driver, WIDTH)


def test_progress_bar_counts_and_names_the_questions(checks, driver):
    output = labcheck.cell_output_element(driver, "progress")
    # tqdm's widget writes figure spaces (U+2007) so that its digits keep their places.
    text = driver.execute_script("return arguments[0].textContent;", output).replace("\u2007", " ")
    widget = driver.execute_script("return arguments[0].querySelector('.widget-hprogress, .jupyter-widgets progress, progress');", output)
    assert widget is not None, f"no progress widget in the output: {text!r}"
    for part in ("probe reader (live)", "4/4", "Q4"):
        assert part in text, f"the progress bar reads {text!r}, without {part!r}"


def test_mathjax_typesets_dollar_signs_outside_the_helpers(checks, driver):
    """The positive control of the dollar-sign checks: in this JupyterLab, HTML that does not
    go through the helpers has its `$a$` typeset, so a table that lost its protection would
    be typeset too."""
    output = labcheck.cell_output_element(driver, "mathjax-control")
    deadline = time.monotonic() + 30
    while True:
        typeset = driver.execute_script("return arguments[0].querySelectorAll('mjx-container').length;", output)
        if typeset >= 2 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    text = driver.execute_script("return arguments[0].textContent;", output)
    assert typeset == 2, f"MathJax typeset {typeset} of the 2 pieces of mathematics in {text!r}"
    assert "$" not in text


def test_a_students_kernel_is_not_taken_for_a_book_build(checks, driver):
    output = labcheck.cell_output_element(driver, "build-detector")
    text = driver.execute_script("return arguments[0].textContent;", output).strip()
    assert text == "book build: None"


def test_a_failing_cell_ends_the_run_and_is_named(checks, lab, driver):
    """Run All stops at an error, as it does for a student; the check does not wait out
    its timeout and says which cell failed and how."""
    started = time.monotonic()
    labcheck.open_notebook(driver, lab, BROKEN)
    finished = labcheck.run_all(driver, timeout=120)
    assert time.monotonic() - started < 110
    report = labcheck.describe(finished)
    assert "error in cell 2 (raise ValueError('deliberate failure in cell 2')): ValueError: deliberate failure in cell 2" in report
    assert [c["execution_count"] is None for c in finished["cells"]] == [False, False, True]


# --------------------------------------------------------------------------- every lesson's prose


def test_no_lesson_prose_is_typeset_as_mathematics(lab, driver, tmp_path):
    """Every lesson's markdown, opened in one notebook and not run: JupyterLab renders it,
    and nothing outside the cells tagged as meant to hold mathematics (the control cell at
    the end is one) may be taken for mathematics, typeset by MathJax or marked for it by the
    markdown renderer. Money in prose is written so that no renderer takes it for
    mathematics. The control's two pieces must be typeset: shown as TeX, they would fail."""
    shot = tmp_path / "prose.png"
    labcheck.open_notebook(driver, lab, PROSE, screenshot=shot)
    try:
        deadline = time.monotonic() + 120
        labcheck.render_markdown(driver)
        while True:
            cells = labcheck.markdown_cells(driver)
            waiting = [c["index"] + 1 for c in cells if c["source"].strip() and not c["rendered"]]
            control = cells[-1]
            if (not waiting and control["typeset"] == 2) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        driver.save_screenshot(str(shot))
        assert not waiting, f"markdown cells not rendered: {waiting} (screenshot {shot})"
        assert MATHS_TAG in control["tags"] and control["maths"] == control["typeset"] == 2, (
            f"MathJax typeset {control['typeset']} of the control's 2 pieces ({control['maths']} taken "
            f"for mathematics), shown as {control['around']!r} (screenshot {shot})")
        origins = [c.metadata.get("prose_of", {}) for c in
                   nbformat.read(lab.root / PROSE, as_version=4).cells]
        typeset = [f"{origins[c['index']].get('lesson')}, cell {origins[c['index']].get('cell')}: "
                   f"{c['maths']} piece(s) ({c['typeset']} typeset), shown as {c['around']!r}; its source: "
                   + " / ".join(line.strip() for line in c["source"].splitlines() if "$" in line)
                   for c in cells if c["maths"] and MATHS_TAG not in c["tags"]]
        assert not typeset, "prose typeset as mathematics:\n" + "\n".join(typeset)
    finally:
        labcheck.close_notebook(driver, PROSE)
