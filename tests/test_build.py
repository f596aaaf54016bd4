"""The book's build: configuration, the Quarto dispatch, and the build without Quarto.

Each build test makes a small temporary project (a `_quarto.yml`, a front page and one
notebook) and runs `python -m bookkit` on it in a subprocess, as `make book` does.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bookkit.build import BuildError, chapter_title, load_book_config, read_chapter, select_chapter
from bookkit.cellopts import CellOptionError, parse_cell_options, quarto_markdown_to_commonmark
from bookkit.offline import find_remote_assets
from projects import SAMPLE_LESSON as LESSON, code, markdown, post_render, run_book, write_project
from runtime.paths import PROJECT_ROOT

FAILING_CELLS = [
    markdown("# Parsing\n\nEvery reply must parse."),
    code("replies = {'Q1': 'Answer: 5\\nSources: H1', 'Q7': 'Answer: maybe\\nSources: H2\\nExtra line'}"),
    code(
        """
        #| label: chk-parse
        bad = {q: r for q, r in replies.items() if r.count('\\n') != 1}
        assert not bad, f"{len(bad)} reply did not parse: " + "; ".join(f"{q}: raw output {r!r}" for q, r in bad.items())
        """
    ),
    code("print('never reached')"),
]


def test_failing_assertion_stops_the_build_and_names_notebook_cell_and_question(tmp_path):
    root = write_project(tmp_path / "book", FAILING_CELLS)
    result = run_book(root, "--engine", "nbclient")
    assert result.returncode == 1, result.stdout + result.stderr
    # cell 1 is the front-matter raw cell, so the assert cell is the 4th of 5
    assert f"{LESSON}: cell 4 of 5 (label: chk-parse) failed with AssertionError" in result.stderr
    assert "Q7: raw output 'Answer: maybe\\nSources: H2\\nExtra line'" in result.stderr
    assert "never reached" not in result.stdout
    assert not (root / "_book").exists()
    assert not list(root.glob(".*building*")), "the staging folder was left behind"


GOOD_CELLS = [
    markdown("Intro. The questions are in @tbl-questions.\n\n## Questions {#sec-questions}"),
    code(
        """
        #| echo: false
        import pandas as pd
        import itables
        itables.init_notebook_mode(connected=False)
        HIDDEN_SETUP_MARKER = 1
        """
    ),
    code(
        """
        #| label: tbl-questions
        #| tbl-cap: "Questions with **their** ids"
        questions = pd.DataFrame({
            "question_id": [f"Q{i}" for i in range(1, 15)] + ["H13"],
            "question": [f"question number {i}" for i in range(1, 16)],
        })
        itables.show(questions)
        """
    ),
    code(
        """
        #| output: asis
        print(f"There are **{len(questions)}** questions.")
        """
    ),
    code(
        """
        #| eval: false
        raise RuntimeError("this cell is shown but never run")
        """
    ),
    code(
        """
        #| label: fig-bars
        #| fig-cap: "A tiny figure"
        #| fig-alt: "Two bars, the second twice as tall"
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(2, 1))
        ax.bar([0, 1], [1, 2]);
        """
    ),
    markdown("## Going further\n\nWhat follows is folded."),
    code('print("FOLDED_OUTPUT")'),
    markdown("More folded prose.\n\n## What to remember\n\nIn view again."),
]


@pytest.fixture(scope="module")
def good_book(tmp_path_factory):
    root = write_project(tmp_path_factory.mktemp("good") / "book", GOOD_CELLS)
    result = run_book(root, "--engine", "nbclient")
    assert result.returncode == 0, result.stdout + result.stderr
    return root, result


def test_good_notebook_builds_pages_with_quarto_cell_options(good_book):
    root, result = good_book
    page = (root / "_book" / "lessons" / "01-sample.html").read_text()
    # echo: false hides the code; `#|` lines are stripped from code that is shown
    assert "HIDDEN_SETUP_MARKER" not in page
    assert "#|" not in page and "#&#124;" not in page
    assert "this cell is shown but never run" in page
    # tbl-cap shows as a numbered caption above the table output; label is the element id
    caption = re.search(r'<div class="book-caption book-table-caption">(.*?)</div>', page, re.S)
    assert caption is not None
    assert re.sub(r"<[^>]+>", "", caption.group(1)) == "Table 1.1: Questions with their ids"
    assert re.search(r'<div[^>]*\bid="tbl-questions"', page)
    assert page.index("book-table-caption") < page.index('id="itables_')
    assert '<a href="#tbl-questions">Table 1.1</a>' in page
    # fig-cap goes below the figure, fig-alt becomes the image's alt text
    figure = re.search(r'<div class="book-caption book-figure-caption">(.*?)</div>', page, re.S)
    assert figure is not None and "Figure 1.1:" in figure.group(1) and "A tiny figure" in figure.group(1)
    image = re.search(r'<img[^>]*src="data:image/png[^>]*>', page)
    assert image is not None and image.start() < page.index("book-figure-caption")
    assert 'alt="Two bars, the second twice as tall"' in image.group(0)
    # output: asis renders printed markdown
    assert "There are <strong>15</strong> questions." in page
    # the front matter title heads the page and names it
    assert '<h1 class="book-title">A sample lesson</h1>' in page
    assert "<title>A sample lesson – Sample Book</title>" in page
    # itables' output is offline: the DataTables bundle is embedded in the page itself
    assert find_remote_assets(page) == []
    assert "_itables_" in page and "data_json" in page and "H13" in page
    # "Going further" keeps its heading and folds the rest of its section, closed
    folded = re.search(r'<details class="book-going-further"><summary>(.*?)</details>', page, re.S)
    assert folded and "FOLDED_OUTPUT" in folded[1] and "More folded prose" in folded[1]
    assert "What follows is folded" not in folded[1] and "In view again" not in folded[1]


def test_pages_link_to_each_other_and_say_how_they_were_built(good_book):
    root, result = good_book
    index = (root / "_book" / "index.html").read_text()
    lesson = (root / "_book" / "lessons" / "01-sample.html").read_text()
    assert 'href="lessons/01-sample.html"' in index
    assert 'href="../index.html"' in lesson
    assert "Read <a href=\"lessons/01-sample.html\">the lesson</a> next." in index
    for page in (index, lesson):
        generator = re.search(r'<meta[^>]*name="generator"[^>]*>', page)
        assert generator is not None and "Quarto was not found" in generator.group(0)
    assert "built without Quarto" in result.stdout
    assert re.search(r"lessons/01-sample.html\s+\d+\.\d s", result.stdout)
    assert "2 page(s) written to" in result.stdout


@pytest.mark.parametrize("text, remote", [
    ('<script src="https://cdnjs.cloudflare.com/require.js"></script><a href="https://itables.org/">help</a>'
     "<script>const s = 1;</script>", ["https://cdnjs.cloudflare.com/require.js"]),
    ('<link rel="stylesheet" href="//cdn.example.org/x.css">', ["//cdn.example.org/x.css"]),
    ("<script type=\"module\">import { ITable } from 'https://www.unpkg.com/dt_for_itables/dt_bundle.js';</script>",
     ["https://www.unpkg.com/dt_for_itables/dt_bundle.js"]),
    ('*/@import"https://fonts.googleapis.com/css2?family=Source+Sans+Pro:wght@300&display=swap";:root{}',
     ["https://fonts.googleapis.com/css2?family=Source+Sans+Pro:wght@300&display=swap"]),
    ('@import url("https://x.org/a.css");', ["https://x.org/a.css"]),
], ids=["script", "stylesheet", "module import", "minified css import", "css import"])
def test_find_remote_assets_catches_cdn_scripts_styles_imports_and_web_fonts(text, remote):
    assert find_remote_assets(text) == remote


# What Quarto 1.10 writes into a lesson page with HTML outputs.
QUARTO_WIDGET_HEAD = (
    '<script src="https://cdn.jsdelivr.net/npm/jquery@3.5.1/dist/jquery.min.js" integrity="sha384-Zv" '
    'crossorigin="anonymous"></script><script src="../site_libs/quarto-nav/quarto-nav.js"></script>\n'
    '<p>text</p>\n'
    '<script src="https://cdn.jsdelivr.net/npm/requirejs@2.3.6/require.min.js" integrity="sha384-c9 '
    'sha384-6V" crossorigin="anonymous"></script>\n'
    "<script type=\"application/javascript\">define('jquery', [],function() {return window.jQuery;})</script>\n"
)


def test_post_render_strips_the_widget_loaders_only_and_fails_on_any_other_remote_asset(tmp_path, monkeypatch):
    site = tmp_path / "_book"
    (site / "lessons").mkdir(parents=True)
    page = site / "lessons" / "01-x.html"
    page.write_text(QUARTO_WIDGET_HEAD)
    (tmp_path / "_quarto.yml").write_text("project: {type: book}\nbook: {chapters: [lessons/01-x.ipynb]}\n")
    post_render(tmp_path, monkeypatch, "_book/lessons/01-x.html")
    assert page.read_text() == '<script src="../site_libs/quarto-nav/quarto-nav.js"></script>\n<p>text</p>\n'
    (site / "site_libs").mkdir()
    (site / "site_libs" / "theme.css").write_text('@import"https://fonts.googleapis.com/css2?family=X";')
    said = post_render(tmp_path, monkeypatch, "_book/lessons/01-x.html", status=1)
    assert "[freeze]   site_libs/theme.css: https://fonts.googleapis.com/css2?family=X" in said


def test_only_builds_one_lesson_into_an_existing_site(tmp_path):
    root = write_project(tmp_path / "book", [code("print('first')")])
    assert run_book(root, "--engine", "nbclient").returncode == 0
    write_project(root, [code("print('second')")])
    result = run_book(root, "--engine", "nbclient", "--only", "01", "--output", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    assert "second" in (tmp_path / "out" / "lessons" / "01-sample.html").read_text()
    assert "first" in (root / "_book" / "lessons" / "01-sample.html").read_text()


@pytest.mark.parametrize("cells, args, status, message", [
    ([code("#| label: [unclosed\nx = 1")], [], 1, f"{LESSON}: cell 2: cell options are not valid YAML"),
    ([code("x = 1")], ["--only", "07"], 2, f"--only '07' matches no chapter; chapters are: index.qmd, {LESSON}"),
    (None, [], 2, f"{LESSON}: listed in _quarto.yml but the file does not exist"),
], ids=["bad cell options", "unknown --only", "missing chapter"])
def test_bad_options_and_missing_chapters_stop_the_build_naming_them(tmp_path, cells, args, status, message):
    root = write_project(tmp_path / "book", cells or [])
    if cells is None:
        (root / LESSON).unlink()
    result = run_book(root, "--engine", "nbclient", *args)
    assert result.returncode == status and message in result.stderr, result.stderr
    assert not (root / "_book").exists()


# --------------------------------------------------------------------------- Quarto dispatch


def fake_quarto(bin_dir: Path, exit_code: int) -> Path:
    """A `quarto` stub that records its arguments and working folder, then exits."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    record = bin_dir / "calls.txt"
    stub = bin_dir / "quarto"
    stub.write_text(f'#!/bin/sh\nif [ "$1" = "--version" ]; then echo 9.9.9; exit 0; fi\n'
                    f'echo "$PWD|$*|$QUARTO_PYTHON" >> "{record}"\nexit {exit_code}\n')
    stub.chmod(stub.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return record


def test_quarto_found_is_run_with_this_python_and_its_exit_status_passed_through(tmp_path):
    root = write_project(tmp_path / "book", FAILING_CELLS)  # would fail if executed here
    record = fake_quarto(tmp_path / "bin", exit_code=7)
    env = {k: v for k, v in os.environ.items() if k not in {"QUARTO", "QUARTO_PYTHON"}}  # $QUARTO wins over PATH
    env["PATH"] = f"{tmp_path / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    result = run_book(root, env=env)
    assert result.returncode == 7
    assert "Quarto 9.9.9 found at" in result.stdout and "quarto render" in result.stdout
    assert "engine: Quarto 9.9.9" in result.stdout and "failed with exit status 7" in result.stdout
    # Quarto executes the lessons (and the freeze scripts) with the build's own Python.
    assert record.read_text().splitlines() == [f"{root}|render|{sys.executable}"]
    assert not (root / "_book").exists()
    result = run_book(root, "--only", "01-sample", "--output", "site", env=env)
    assert result.returncode == 7
    assert record.read_text().splitlines()[1] == f"{root}|render {LESSON} --output-dir site|{sys.executable}"
    # --engine nbclient leaves Quarto alone.
    write_project(root, [markdown("Only prose here.")])
    assert run_book(root, "--engine", "nbclient", env=env).returncode == 0
    assert len(record.read_text().splitlines()) == 2 and (root / "_book" / "lessons" / "01-sample.html").is_file()
    # $QUARTO names the Quarto to use, before PATH; one that names no program is a usage error.
    named = fake_quarto(tmp_path / "named", exit_code=0)
    result = run_book(root, env={**env, "QUARTO": str(tmp_path / "named" / "quarto")})
    assert result.returncode == 0 and "($QUARTO)" in result.stdout and named.read_text().count("|render") == 1
    result = run_book(root, env={**env, "QUARTO": str(tmp_path / "no-such-quarto")})
    assert result.returncode == 2
    assert "$QUARTO is" in result.stderr and "not an executable program" in result.stderr


def test_a_failed_quarto_cli_install_is_remembered_until_a_retry(tmp_path):
    """In a virtual environment without pip the install fails at once, as it does offline."""
    from bookkit.quarto import QUARTO_CLI, install_quarto_cli, install_stamp

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    said = []
    assert install_quarto_cli(python=python, prefix=venv, say=said.append) is None
    log = venv / "quarto-cli-install.log"
    assert "No module named pip" in log.read_text()
    assert install_stamp(venv).is_file()
    assert f"could not install {QUARTO_CLI}" in said[-1] and "nbclient + nbconvert" in said[-1]
    said.clear()
    log.unlink()
    assert install_quarto_cli(python=python, prefix=venv, say=said.append) is None
    assert not log.exists(), "pip ran again although the earlier attempt failed"
    assert said == [f"[build] not trying to install {QUARTO_CLI} again ({install_stamp(venv).read_text().strip()}); "
                    "to retry: make book RETRY_QUARTO=1"]
    assert install_quarto_cli(retry=True, python=python, prefix=venv, say=said.append) is None
    assert log.is_file(), "a retry did not run pip"


# --------------------------------------------------------------------------- cell options


def test_parse_cell_options_splits_options_from_code():
    options, source = parse_cell_options("#| label: tbl-x\n#| tbl-cap: 'Ranked: top 3'\n#| echo: false\n\nx = 1\n#| not an option")
    assert options == {"label": "tbl-x", "tbl-cap": "Ranked: top 3", "echo": False}
    assert source == "x = 1\n#| not an option"
    assert parse_cell_options("x = 1") == ({}, "x = 1")
    with pytest.raises(CellOptionError, match="not valid YAML"):
        parse_cell_options("#| label: [oops\nx = 1")
    with pytest.raises(CellOptionError, match="key: value"):
        parse_cell_options("#| just words\nx = 1")


def test_quarto_markdown_rewrites_callouts_headings_crossrefs_and_links():
    text = (
        "## Retrieval {#sec-retrieval .unnumbered}\n\n"
        '::: {.callout-tip title="Remember"}\nSee @tbl-ranks and @fig-none; mail a@tbl-x.org.\n:::\n\n'
        "[next](02-next.ipynb#top)\n\n```\n::: not a div\n```"
    )
    out = quarto_markdown_to_commonmark(text, {"tbl-ranks": "Table 2"}, {"02-next.ipynb": "02-next.html"})
    assert '<a id="sec-retrieval" class="book-anchor"></a>' in out and "## Retrieval\n" in out
    assert '<div class="book-div callout-tip callout">' in out and '<div class="callout-title">Remember</div>' in out
    assert "See [Table 2](#tbl-ranks) and @fig-none; mail a@tbl-x.org." in out
    assert "[next](02-next.html#top)" in out
    assert "```\n::: not a div\n```" in out
    assert out.count("<div") == out.count("</div>") == 2


def test_collapsed_callouts_and_solutions_become_details_closed_until_opened():
    """A collapsed callout becomes <details> (`collapse="false"`: open at first); a solution's
    <details class="solution"> gets the look of one; the markdown inside stays markdown."""
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    text = (
        '::: {.callout-tip collapse="true" title="Solution to exercise 1.1"}\n\n'
        "The answer is **here**.\n\n```python\nx = 1\n```\n\n:::\n\n"
        '::: {.callout-note collapse="false"}\nOpen at first.\n:::\n\n'
        "::: {.callout-note}\nPlain.\n:::\n\n"
        '<details class="solution">\n<summary>Solution to exercise 2.3</summary>\n\n'
        "The answer is **there**.\n\n```python\n<details class=\"solution\">\n```\n\n</details>\n\n"
        "<details>\n<summary>Other</summary>\n\nLeft alone.\n\n</details>"
    )
    out = quarto_markdown_to_commonmark(text)
    assert '<details class="book-div callout-tip callout">' in out
    assert '<summary class="callout-title">Solution to exercise 1.1</summary>' in out
    assert '<details class="book-div callout-note callout" open>' in out
    assert '<div class="book-div callout-note callout">' in out and '<div class="callout-title">Note</div>' in out
    assert ('<details class="book-div callout-tip callout solution">\n'
            '<summary class="callout-title">Solution to exercise 2.3</summary>\n') in out
    assert '```python\n<details class="solution">\n```' in out  # code stays code
    assert "<details>\n<summary>Other</summary>" in out
    assert out.count("</details>") == 4 and out.count("<div") == out.count("</div>") == 2  # and one <details> in code
    page = markdown2html_mistune(out)
    for bold in ("<strong>here</strong>", "<strong>there</strong>"):
        start = page.rindex("<details", 0, page.index(bold))
        assert page.index("<summary", start) < page.index(bold) < page.index("</details>", start)
    assert page.count("<pre") == 2 and page.count(" open") == 1


# --------------------------------------------------------------------------- the real book, numbering


def numbered(root: Path) -> list[tuple[str, int | str | None]]:
    """Each chapter of the book at ``root`` with its number, as the build numbers them."""
    config = load_book_config(root)
    for chapter in config.chapters:
        chapter.title = chapter_title(read_chapter(root, chapter), chapter)
    config.number_chapters()
    return [(c.source, c.number) for c in config.chapters]


def test_chapters_and_appendices_are_numbered_as_quarto_numbers_them(tmp_path):
    root = write_project(tmp_path / "book", [code("x = 1")])
    assert numbered(root) == [("index.qmd", None), (LESSON, 1)]  # an unnumbered front page
    # A numbered front page counts as chapter 1, as in Quarto: the lesson's tables are 2.x.
    (root / "index.qmd").write_text("# Front page\n\nText.\n")
    assert numbered(root) == [("index.qmd", 1), (LESSON, 2)]
    # book.appendices (with the unnumbered front page again): lettered A, B, ... after the
    # numbered chapters, under their own heading in the sidebar, and built like any chapter.
    write_project(root, [code("x = 1")], appendices=["guide.qmd", "notes.qmd"])
    (root / "guide.qmd").write_text("---\ntitle: A guide\n---\n\nHow to edit the book.\n")
    (root / "notes.qmd").write_text("# Notes\n\nMore.\n")
    assert numbered(root) == [("index.qmd", None), (LESSON, 1), ("guide.qmd", "A"), ("notes.qmd", "B")]
    result = run_book(root, "--engine", "nbclient")
    assert result.returncode == 0, result.stdout + result.stderr
    page = (root / "_book" / "guide.html").read_text(encoding="utf-8")
    assert "How to edit the book." in page
    sidebar = re.search(r"<nav [^>]*book-sidebar[^>]*>(.*?)</nav>", page, re.S).group(1)
    assert sidebar.index("A sample lesson") < sidebar.index("Appendices") \
        < sidebar.index("Appendix A: A guide") < sidebar.index("Appendix B: Notes")


def test_a_chapter_part_in_quarto_yml_is_refused_by_name(tmp_path):
    root = write_project(tmp_path / "book", [code("x = 1")],
                         chapters=["index.qmd", LESSON, {"part": "More", "chapters": ["more.qmd"]}])
    with pytest.raises(BuildError, match=r"_quarto.yml: book.chapters\[2\] is not a file: .*'part'"
                                         r".*builds chapters listed as files only"):
        load_book_config(root)


def test_quarto_yml_is_a_book_listing_exactly_the_lessons_present_and_the_front_page_links_them():
    config = yaml.safe_load((PROJECT_ROOT / "_quarto.yml").read_text())
    assert config["project"]["type"] == "book" and config["project"]["output-dir"] == "_book"
    assert config["project"]["execute-dir"] == "project"
    assert config["execute"]["enabled"] is True and config["execute"]["freeze"] == "auto"
    # The freeze scripts exist and are run as Python scripts (Quarto uses QUARTO_PYTHON).
    for step in ("pre-render", "post-render"):
        script, argument = config["project"][step].split()
        assert (PROJECT_ROOT / script).is_file() and script.endswith(".py") and argument == step
    assert config["jupyter"] == "python3" and "theme" in config["format"]["html"]
    chapters = config["book"]["chapters"]
    present = sorted(p.relative_to(PROJECT_ROOT).as_posix() for p in (PROJECT_ROOT / "lessons").glob("*.ipynb"))
    assert chapters == ["index.qmd", *present], "book.chapters must list exactly the notebooks in lessons/, in order"
    assert config["book"]["appendices"] == ["guide.qmd"]
    # The front page is unnumbered, so lesson N is chapter N and its tables are "Table N.x";
    # the appendix is A.
    assert numbered(PROJECT_ROOT) == [("index.qmd", None), *((p, n) for n, p in enumerate(present, 1)),
                                      ("guide.qmd", "A")]
    parsed = load_book_config(PROJECT_ROOT)
    assert select_chapter(parsed, "01").source == "lessons/01-answering-from-retrieved-passages.ipynb"
    with pytest.raises(BuildError):
        select_chapter(parsed, "lessons/99-missing.ipynb")
    index = (PROJECT_ROOT / "index.qmd").read_text()
    assert [p for p in present if f"]({p})" not in index] == [], "index.qmd does not link every lesson"
