"""The PDF edition: Quarto renders the book to PDF (Typst) from the website's execution.

The first test renders a small book with the project's real `_quarto.yml` formats,
filters, PDF template and freeze scripts, three times (seconds each): one execution
serves the website and the PDF, a frozen lesson is not executed again for the PDF and
still shows its outputs in it, and the PDF's tables, references, figure captions and
solutions appendix are what a reader needs. The other tests read the PDF of the session's
Quarto build of the whole book (tests/book_session.py), never a render of their own.

The PDF is read with pdftotext and pdftoppm (poppler-utils, tests/pdfcheck.py): skipped
without them, unless BOOK_REQUIRE_POPPLER=1 (as in CI).
"""
from __future__ import annotations

import datetime
import re
import shutil
import textwrap
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
import yaml

import pdfcheck
from bookkit.build import NO_PDF, load_book_config
from runtime.paths import PROJECT_ROOT
from projects import PACKAGES, copy_project
from test_quarto import executions, real_scripts, rendered, write_logged_lesson

LESSON = "lessons/01-print.ipynb"
ALT = "Two bars, the second twice as tall as the first"


def book_pdf(project: Path) -> Path:
    """The PDF the book's `_quarto.yml` names, in the project's output folder."""
    config = load_book_config(project)
    assert config.pdf, "_quarto.yml declares no typst format"
    return project / config.output_dir / config.pdf


def write_print_book(root: Path) -> Path:
    """A one-lesson book with the real `_quarto.yml`'s book options, filters and formats.

    The lesson shows a table through ``show_table`` (referenced as @tbl-answers), an
    interactive table of 45 rows, a figure with alt text and no caption, and an exercise
    with its solution; its first cell logs every execution (test_quarto.executions).
    """
    real = yaml.safe_load((PROJECT_ROOT / "_quarto.yml").read_text(encoding="utf-8"))
    copy_project(root, (*PACKAGES, "print", "solutions.lua", "going-further.lua", "book.scss"))
    book = {key: real["book"][key] for key in ("date", "date-format", "output-file", "downloads")}
    config = {
        "project": {"type": "book", "output-dir": "_book", "execute-dir": "project", **real_scripts()},
        "book": {"title": "Print Book", "subtitle": "A book to print", **book,
                 "chapters": ["index.qmd", LESSON]},
        "execute": {"enabled": True, "freeze": "auto"},
        "jupyter": "python3",
        "filters": real["filters"],
        "format": real["format"],
    }
    (root / "_quarto.yml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    (root / "index.qmd").write_text("# Start {.unnumbered}\n\nThe lesson follows.\n")
    (root / "lessons").mkdir()
    write_logged_lesson(
        root, LESSON, "The printed lesson", "@tbl-answers lists the answers.",
        textwrap.dedent("""\
            import matplotlib.pyplot as plt
            import pandas as pd
            from runtime.display import interactive_tables, show_table
            interactive_tables()"""),
        textwrap.dedent("""\
            #| label: tbl-answers
            #| tbl-cap: The accepted answers
            show_table(pd.DataFrame({"question_id": ["Q1"],
                                     "answers": ["$150|$150 per week"],
                                     "revision": ["989aa7980e4cf806f80c7fef2b1adb7bc71aa306"]}),
                       {"question_id": "Question", "answers": "Acceptable answers",
                        "revision": "Revision"}, name="answers")"""),
        textwrap.dedent("""\
            #| label: tbl-rows
            #| tbl-cap: A long interactive table
            show_table(pd.DataFrame({"row": [f"R{i:02d}" for i in range(45)]}), {"row": "Row"},
                       name="rows", interactive=True)"""),
        textwrap.dedent(f"""\
            #| fig-alt: {ALT}.
            fig, ax = plt.subplots(figsize=(9, 3))
            ax.bar([1, 2], [1, 2])
            plt.show()"""),
        nbformat.v4.new_markdown_cell("### Exercise 1.1: Count the rows\n\nHow many rows are there?"),
        "rows = ...  # Exercise 1.1",
        nbformat.v4.new_markdown_cell(
            '<details class="solution">\n<summary>Solution to exercise 1.1</summary>\n\n'
            "There are *forty-five* rows.\n\n```python\nrows = 45\n```\n\n</details>"),
    )
    return root


def _page_of(pages: list[str], needle: str, after: int = 0) -> int:
    """The number (from 1) of the first page after page ``after`` that shows ``needle``."""
    for number, page in enumerate(pages, start=1):
        if number > after and pdfcheck.contains(page, needle):
            return number
    raise AssertionError(f"no page after {after} shows {needle!r}")


def check_print_book_pdf(root: Path) -> None:
    """What the PDF of :func:`write_print_book` must show, however its lesson ran."""
    pdf = book_pdf(root)
    assert pdf.is_file(), f"the render wrote no {pdf.name}"
    text = pdfcheck.text(pdf)
    pages = pdfcheck.pages(pdf)
    # The front page: title, subtitle and the date of the render.
    today = datetime.date.today()
    for wanted in ("Print Book", "A book to print", f"{today:%B} {today.day}, {today.year}"):
        assert pdfcheck.contains(pages[0], wanted), f"the front page lacks {wanted!r}"
    # The table as text, with its caption, and the reference to it resolved.
    for wanted in ("Table 1.1: The accepted answers", "Table 1.1 lists the answers.",
                   "$150|$150 per week", "989aa7980e4cf806f80c7fef2b1adb7bc71aa306",
                   "Table 1.2: A long interactive table", "R00", "R19"):
        assert pdfcheck.contains(text, wanted), f"the PDF lacks {wanted!r}"
    assert "@tbl-" not in text and "?@" not in text, "an unresolved reference"
    # The long table is cut, and says so; the itables set-up prints nothing.
    assert not pdfcheck.contains(text, "R20") and not pdfcheck.contains(text, "R44")
    assert pdfcheck.contains(text, "Only the first 20 of the table's 45 rows are printed here; "
                                   "the website and the notebook show all 45.")
    assert "<IPython" not in text and "IPython.core" not in text
    # The figure has its alt text as its caption.
    assert pdfcheck.contains(text, f"Figure 1.1: {ALT}.")
    # The solution is in the appendix, linked from the exercise by page and back.
    pointer = _page_of(pages, "Solution to exercise 1.1: in the appendix")
    said = re.search(r"in the appendix\s+“Solutions”,\s+page\s+(\d+)", text)
    assert said, "the exercise does not give the solution's page"
    solutions = _page_of(pages, "The worked solutions to the exercises", after=pointer)
    solution = _page_of(pages, "There are forty-five rows.", after=pointer)
    assert int(said.group(1)) == solution >= solutions
    assert not pdfcheck.contains(pages[pointer - 1], "forty-five"), "the solution is shown at the exercise"
    back = re.search(r"Back to exercise 1\.1\s+\(page\s+(\d+)\)", text)
    assert back and int(back.group(1)) == pointer


@pytest.mark.quarto
def test_one_execution_serves_the_website_and_the_pdf(quarto, poppler, tmp_path):
    root = write_print_book(tmp_path / "book")
    committed = (root / LESSON).read_bytes()

    cold = rendered(quarto, root)
    assert executions(root, LESSON) == 1, "the lesson executed once per format"
    check_print_book_pdf(root)
    page = (root / "_book" / "lessons" / "01-print.html").read_text(encoding="utf-8")
    assert "$150|$150 per week" in page
    # The website's download button links to the PDF.
    index = (root / "_book" / "index.html").read_text(encoding="utf-8")
    links = re.findall(r'href="([^"]+\.pdf)"', index)
    assert links and all((root / "_book" / link.lstrip("/")).resolve() == book_pdf(root) for link in links)
    assert (root / LESSON).read_bytes() == committed
    assert "put back 1 notebook(s) as committed" in cold

    # Frozen: the website thaws the lesson, and the PDF shows the same execution's outputs.
    book_pdf(root).unlink()
    again = rendered(quarto, root)
    assert f"[freeze] {LESSON}: frozen result kept: inputs unchanged" in again
    assert executions(root, LESSON) == 1, "a frozen lesson was executed again for the PDF"
    check_print_book_pdf(root)
    assert (root / LESSON).read_bytes() == committed

    # Without the notebook of that execution the PDF would lose the outputs: execute again.
    shutil.rmtree(root / ".book-cache" / "quarto" / "executed")
    fresh = rendered(quarto, root)
    assert (f"[freeze] {LESSON}: frozen result removed, will execute: no notebook of its "
            "execution is kept for the PDF") in fresh
    assert executions(root, LESSON) == 2
    check_print_book_pdf(root)


# --------------------------------------------------------------------------- the whole book

#: Lesson 1's figures from the source page, as test_lesson1.py checks them in the notebook.
LESSON_1_FIGURES = ["Qwen/Qwen2.5-1.5B-Instruct", "989aa7980e4cf806f80c7fef2b1adb7bc71aa306",
                    "$150|$150 per week|$150 a week|150 dollars per week", "stipend, training",
                    "certificate, data, experience, need, support", "H08 (#1, 0.356)",
                    "H12 (#1, 0.588); H03 (#2, 0.108); H15 (#3, 0.098)",
                    "H10 (#1, 0.261); H11 (#2, 0.140); H03 (#3, 0.089)", "not retrieved (all scores 0)",
                    "Answer: $150 per week ⏎ Sources: H08",
                    "Answer: NO PRIOR DATA EXPERIENCE IS REQUIRED ⏎ Sources: H12", "EM 0; F1 0.57",
                    "reasonable abstention from retrieved passages", "failed before reading",
                    "held for human review", "control-unsupported-number",
                    "The reader answered three questions and abstained on three; it flagged no premise.",
                    "Its action matched the declared one on 4 of the 6 questions",
                    "The screen holds two rows, Q5 and Q6, both abstentions that cite a passage"]


@dataclass
class PrintedBook:
    """The session's Quarto build as the PDF shows it."""

    project: Path
    pdf: Path
    pages: list[str]  # the text of each page
    titles: dict[str, str]  # lesson -> its title
    starts: dict[str, int]  # lesson -> the page (from 1) its chapter opens on

    def lesson_pages(self, lesson: str) -> str:
        """The text of the lesson's pages, up to the next chapter."""
        following = [page for page in self.starts.values() if page > self.starts[lesson]]
        end = min(following) - 1 if following else len(self.pages)
        return "\f".join(self.pages[self.starts[lesson] - 1:end])


@pytest.fixture(scope="module")
def printed_book(quarto_site, poppler) -> PrintedBook:
    project = quarto_site.project
    pdf = book_pdf(project)
    assert pdf.is_file(), f"the Quarto build wrote no {pdf.name}:\n{quarto_site.report[-3000:]}"
    pages = pdfcheck.pages(pdf)
    titles, starts, after = {}, {}, 0
    for chapter in load_book_config(project).chapters:
        if not chapter.source.endswith(".ipynb"):
            continue
        raw = nbformat.read(project / chapter.source, as_version=4).cells[0].source
        titles[chapter.source] = yaml.safe_load(raw.strip().strip("-"))["title"]
        # A chapter opens with its number and title ("1. Answering ..."), after the
        # contents, the front page's list of lessons and the chapter before it.
        after = starts[chapter.source] = _page_of(pages, f"{len(titles)}. {titles[chapter.source]}", after)
    return PrintedBook(project, pdf, pages, titles, starts)


@pytest.mark.slow
@pytest.mark.quarto
def test_the_pdf_holds_every_lesson_and_lesson_1s_figures(printed_book):
    book = printed_book
    text = "\f".join(book.pages)
    print(f"{book.pdf.name}: {len(book.pages)} pages, lessons from pages {list(book.starts.values())}")
    assert len(book.starts) == 5
    lesson_1 = book.lesson_pages(next(iter(book.starts)))
    missing = [figure for figure in LESSON_1_FIGURES if not pdfcheck.contains(lesson_1, figure)]
    assert not missing, f"lesson 1's pages lack {missing}"
    assert "<IPython" not in text and "IPython.core" not in text
    solutions = _page_of(book.pages, "The worked solutions to the exercises", max(book.starts.values()))
    assert pdfcheck.contains(book.pages[solutions - 1], "Solutions")


def _first_printed_row(printed: str) -> list[str]:
    """The cells of the first body row of a pipe table (Markdown escapes undone)."""
    rows = [line for line in printed.splitlines() if line.startswith("|")]
    assert len(rows) >= 3, f"no body row in {printed[:200]!r}"
    cells = re.split(r"(?<!\\)\|", rows[2].strip())[1:-1]
    return [re.sub(r"\\(.)", r"\1", cell.strip()) for cell in cells]


def _caption_pages(book: PrintedBook, lesson: str, number: str) -> list[int]:
    """The lesson's pages (from 1) from the one with the caption "Table <number>:" to the
    one with the next table's caption: where that table is printed."""
    chapter, index = number.split(".")
    following = [page for page in book.starts.values() if page > book.starts[lesson]]
    pages = range(book.starts[lesson], (min(following) if following else len(book.pages) + 1))
    first = next((n for n in pages if re.search(rf"Table\s+{number}:", book.pages[n - 1])), None)
    assert first, f"no caption Table {number}: in the pages of {lesson}"
    last = next((n for n in pages if n >= first and re.search(
        rf"Table\s+{chapter}\.{int(index) + 1}:", book.pages[n - 1])), pages[-1])
    return list(range(first, last + 1))


@pytest.mark.slow
@pytest.mark.quarto
def test_every_table_of_the_pdf_shows_its_rows(printed_book):
    """No empty table: every table a lesson shows has a representation for print, and the
    words of each cell of its first row are on the pages it is printed on (between its
    caption and the next; in the lesson, for a table without a caption). Words, because
    the reading order of a tall row may take a cell's lines apart. A table cut short says
    so."""
    from runtime.display import PRINT_MAX_ROWS, TABLE_MIME

    book = printed_book
    empty, tables = [], 0
    for chapter, lesson in enumerate(book.titles, start=1):
        captioned = 0
        # The notebook of the execution the PDF was rendered from (kept by the freeze scripts).
        for cell in nbformat.read(book.project / ".book-cache" / "quarto" / "executed" / lesson, as_version=4).cells:
            for output in cell.get("outputs", []):
                table = output.get("data", {}).get(TABLE_MIME)
                if not table:
                    continue
                labelled = re.search(r"^#\|\s*label:\s*tbl-", cell.source, re.MULTILINE)
                captioned += bool(labelled)
                if labelled:
                    pages = _caption_pages(book, lesson, f"{chapter}.{captioned}")
                    where = "\f".join(book.pages[n - 1] for n in pages)
                else:
                    where = book.lesson_pages(lesson)
                if not table["rows"]:
                    continue
                tables += 1
                printed = output["data"].get("text/markdown")
                assert printed, f"{lesson}: table {table['name']} has no representation for print"
                first = _first_printed_row(printed)
                assert len(first) == len(table["columns"]), (lesson, table["name"], first)
                for value, data in zip(first, table["rows"][0]):
                    if isinstance(data, str):
                        assert value == " ".join(data.split()), (lesson, table["name"], value, data)
                lost = [word for value in first for word in value.split()
                        if not pdfcheck.contains(where, word, hyphens=False)]
                if lost:
                    empty.append((lesson, table["name"], lost))
                if len(table["rows"]) > PRINT_MAX_ROWS:
                    note = f"of the table's {len(table['rows'])} rows are printed here"
                    assert note in printed and pdfcheck.contains(where, note), (lesson, table["name"])
    assert tables > 50, f"only {tables} tables found in the executed lessons"
    assert not empty, f"tables printed without their rows (lesson, table, words not found): {empty}"


@pytest.mark.slow
@pytest.mark.quarto
def test_pdf_pages_are_not_blank(printed_book, tmp_path):
    pdf, pages = printed_book.pdf, printed_book.pages
    def first(caption: str) -> int:
        return next(number for number, page in enumerate(pages, start=1) if re.search(caption, page))

    picked = sorted({1, first(r"Table\s+1\.1:"), first(r"Figure\s+\d+\.\d+:"), len(pages)})
    for picture in pdfcheck.page_pictures(pdf, picked, tmp_path):
        assert pdfcheck.ink(picture) > 0.01, f"{picture.name} is (nearly) blank"


@pytest.mark.slow
def test_the_build_without_quarto_says_it_makes_no_pdf(nbclient_site):
    config = load_book_config(nbclient_site.project)
    assert f"[build] no PDF: {NO_PDF.format(pdf=config.pdf)}" in nbclient_site.report
    assert not (nbclient_site.folder / config.pdf).exists()
