"""Tables and computed prose for the lessons: what a student sees must be what the data say.

Introduced in lesson 1, "Set up". Each table is displayed as a bundle with four
representations: ``text/html`` for readers of the website and the notebook,
``text/markdown`` (a pipe table) for the printed book, ``text/plain`` for terminals, and
:data:`TABLE_MIME` (the rows as JSON) so tests can read the table an executed notebook
shows without scraping HTML. Renderers ignore the JSON type they do not know.

One execution of a lesson serves the website and the PDF (Quarto renders the PDF from
the outputs of the website's execution), so a cell cannot know which of the two it is
displayed in; each renderer picks its representation from the bundle. Notebook front
ends and Quarto's HTML take ``text/html``; Quarto's Typst (PDF) output cannot show HTML
and takes ``text/markdown``, which keeps the cell's caption and label, so ``@tbl-...``
references resolve in print too. :func:`interactive_tables` loads the interactive
tables' script the same way: HTML for the website, nothing at all in print.

Two things about the HTML are deliberate:

- **Dollar signs stay dollar signs.** JupyterLab typesets any text between two ``$`` in
  an output as mathematics (MathJax 3 scans the rendered text, so HTML entities do not
  help). Answers such as ``$150|$150 per week`` would lose their dollar signs. Every
  table therefore sits in a container with the class ``mathjax_ignore`` (and
  ``tex2jax_ignore``, its name in MathJax 2 front ends), and computed prose goes through
  :class:`Markdown`, which does the same for text with dollar signs in it.
- **Wide tables stay inside their box.** Text wraps; a table that still does not fit
  scrolls sideways inside its own container, and its first column (the question or
  passage ID in every lesson table) stays in view while it does.

The printed table (:func:`markdown_table`) shows the same text as the HTML, escaped so
that Markdown reads none of it as markup (no dollar sign becomes mathematics). A table
too wide for the page takes the full text width: each column gets room for its longest
word, the rest of the line is shared by how much more text each holds, and the text
wraps inside the cells. A table longer than
:data:`PRINT_MAX_ROWS` rows prints its first :data:`PRINT_ROWS` rows and a sentence
saying how many rows the website shows.
"""
from __future__ import annotations

import csv
import functools
import inspect
import itertools
import json
import re
import textwrap
from collections.abc import Mapping
from pathlib import Path

import pandas as pd
from IPython.display import Markdown as _IPythonMarkdown

TABLE_MIME = "application/vnd.riverton.table+json"

#: Classes that tell MathJax to leave an element's text alone: ``mathjax_ignore`` for
#: MathJax 3 and later (JupyterLab 4, Notebook 7), ``tex2jax_ignore`` for MathJax 2.
NO_MATH_CLASSES = "mathjax_ignore tex2jax_ignore"

CONTAINER_CLASS = "riverton-table"

#: Columns whose longest value has more characters than this are "long text": they get
#: a minimum width, so that a table too wide for its box scrolls rather than squeezing
#: them into a word per line.
LONG_TEXT = 40

LONG_CLASS = "riverton-long"

#: A table with more rows than this is cut in print to its first :data:`PRINT_ROWS` rows.
PRINT_MAX_ROWS = 40
PRINT_ROWS = 20

#: Pandoc gives a pipe table the full text width, its columns sized by the dashes under
#: the header, only when one of its lines is longer than this (pandoc's ``--columns``);
#: a narrower table keeps the width of its text.
PANDOC_COLUMNS = 72

#: In print a table line holds about this many characters (A4, in the table's small
#: type), and each column's padding takes :data:`PRINT_PAD` of them. A column is given
#: room for its longest text, up to :data:`PRINT_WIDEST` characters a line, when the
#: line has room for that; and at least room for its longest word in the data, up to
#: :data:`PRINT_WORD` (print/typst-show.typ lets a longer run of characters break
#: anywhere, and hyphenates a longer word), and for :data:`PRINT_HEADER_WORD`
#: characters of its header's longest word (a longer one is hyphenated).
PRINT_LINE = 106
PRINT_PAD = 3
PRINT_WIDEST = 48
PRINT_WORD = 12
PRINT_HEADER_WORD = 6

#: The tables' style, from ``tables.css`` beside this file, its comments and line breaks
#: left out (every table's HTML carries it).
_STYLE = Path(__file__).with_name("tables.css").read_text(encoding="utf-8")
_STYLE = "<style>" + re.sub(r"/\*.*?\*/|\n", "", _STYLE, flags=re.DOTALL) + "</style>"


#: What a table shows for a missing value: the one phrase every table uses.
NOT_APPLICABLE = "not applicable"


def _cell(value: object) -> object:
    if value is None or value is pd.NA or (isinstance(value, float) and pd.isna(value)):
        return NOT_APPLICABLE
    if isinstance(value, (tuple, list)):
        return ", ".join(str(v) for v in value) or "none"
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    # A helper's figure (a count, a share with its interval) becomes text only here.
    return value if isinstance(value, (str, int, float, bool)) else str(value)


#: The book's vocabulary of column labels (and number formats): one file, so that a column
#: reads the same in every table of every lesson.
LABELS_FILE = Path(__file__).with_name("labels.csv")


@functools.cache
def vocabulary() -> dict[str, tuple[str, str]]:
    """Each column name's display label and number format (``""``: as pandas shows it)."""
    with LABELS_FILE.open(encoding="utf-8", newline="") as handle:
        return {row["column"]: (row["label"], row["format"]) for row in csv.DictReader(handle)}


def labels_of(frame: pd.DataFrame) -> dict[str, str]:
    """Every column of ``frame`` with its display label: the table's own (``attrs["labels"]``,
    set by the helper that makes it), else the book's vocabulary (``runtime/labels.csv``).
    A column with neither is an error that says where to add it."""
    own = frame.attrs.get("labels", {})
    missing = [c for c in frame.columns if c not in own and c not in vocabulary()]
    if missing:
        raise KeyError(f"column(s) {missing} have no display label: add them to "
                       f"{LABELS_FILE.name} (or choose the table's columns first)")
    return {c: own.get(c) or vocabulary()[c][0] for c in frame.columns}


def prepare(frame: pd.DataFrame, labels: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Keep the columns named in ``labels`` (in that order; default: every column with its
    label from :func:`labels_of`) under their display names, numbers in the vocabulary's
    format. Missing values show as "not applicable" and tuples as comma-joined text."""
    labels = labels_of(frame) if labels is None else labels
    missing = [column for column in labels if column not in frame.columns]
    if missing:
        raise KeyError(f"table has no column(s) {missing}; it has {list(frame.columns)}")
    shown = frame[list(labels)].astype(object).map(_cell)
    for column in labels:
        style = vocabulary().get(column, ("", ""))[1]
        if style:  # a number format leaves text ("not applicable", "none") as it is
            numeric = style[-1] in "defg%"
            shown[column] = [value if value == NOT_APPLICABLE or numeric and isinstance(value, str)
                             else format(value, style) for value in shown[column]]
    return shown.rename(columns=dict(labels))


def long_text_columns(shown: pd.DataFrame, threshold: int = LONG_TEXT) -> list[int]:
    """Positions of the columns holding text longer than ``threshold`` characters."""
    return [position for position, column in enumerate(shown.columns)
            if max((len(str(value)) for value in shown[column]), default=0) > threshold]


def _mark_columns(html: str, positions: list[int], css_class: str) -> str:
    """Give the cells at ``positions`` of every row of a pandas HTML table ``css_class``."""
    wanted = set(positions)

    def row(match: re.Match) -> str:
        place = itertools.count()  # the position of each cell of the row, in turn
        return re.sub(r"<(t[hd])>", lambda tag: f'<{tag[1]} class="{css_class}">'
                      if next(place) in wanted else tag[0], match[0])

    return re.sub(r"<tr\b[^>]*>.*?</tr>", row, html, flags=re.DOTALL)


def bundle(frame: pd.DataFrame, labels: Mapping[str, str] | None, name: str,
           interactive: bool = False, key_columns: int = 1, **itables_options) -> dict:
    """The MIME bundle for one table; ``name`` identifies it for tests.

    ``key_columns`` leading columns (the ID first) stay in view while a table too wide
    for its box scrolls sideways; static tables can pin only their first column.
    """
    shown = prepare(frame, labels)
    if not 0 <= key_columns <= len(shown.columns):
        raise ValueError(f"table {name!r}: key_columns={key_columns}, but it has "
                         f"{len(shown.columns)} columns")
    long_columns = long_text_columns(shown)
    if interactive:
        from itables import to_html_datatable

        # A search box even on short tables (itables hides it when a table fits one page);
        # a paged table says which rows it shows ("1 to 10 of 269") and has its pager; a
        # click on a column's name sorts by it, not only one on its small arrows.
        paged = itables_options.get("paging", False)
        options = {"connected": False, "classes": "display compact", "paging": False,
                   "text_in_header_can_be_selected": False,
                   "scrollX": True, "showIndex": False, "layout": {
                       "topStart": None, "topEnd": "search",
                       "bottomStart": "info" if paged else None,
                       "bottomEnd": "paging" if paged else None}}
        if key_columns:
            options["fixedColumns"] = {"start": key_columns}
        column_defs = list(itables_options.pop("columnDefs", [])) + (
            [{"targets": long_columns, "className": LONG_CLASS}] if long_columns else [])
        options.update({"columnDefs": column_defs} if column_defs else {}, **itables_options)
        html = to_html_datatable(shown, **options)
    else:
        if key_columns > 1:
            raise ValueError(f"table {name!r}: a static table pins only its first column; "
                             f"use interactive=True for key_columns={key_columns}")
        html = shown.to_html(index=False, escape=True, border=0,
                             classes="table table-sm table-striped small riverton-table")
        html = _mark_columns(html, long_columns, LONG_CLASS)
        # Quarto would rebuild the table and drop the column classes; keep it as written.
        html = html.replace("<table ", '<table data-quarto-disable-processing="true" ', 1)
    # itables opens with a comment that tells Quarto to leave the table alone; keep it first.
    directive, line_end, html = (html.partition("\n") if html.startswith("<!--|") else
                                 ("", "", html))
    pin = " riverton-pin-first" if key_columns and not interactive else ""
    html = (f'{directive}{line_end}{_STYLE}'
            f'<div class="{CONTAINER_CLASS}{pin} {NO_MATH_CLASSES}">{html}</div>')
    payload = {"name": name, "columns": list(shown.columns),
               "rows": shown.to_numpy().tolist()}
    return {
        "text/html": html,
        "text/markdown": markdown_table(shown),
        "text/plain": shown.to_string(index=False),
        TABLE_MIME: json.loads(json.dumps(payload, default=str)),
    }


# --------------------------------------------------------------------------- tables in print

# Pandoc's Markdown reads a backslash before any ASCII punctuation as that character itself.
_MARKDOWN_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")


def markdown_text(value: str) -> str:
    """``value`` as literal Markdown text: every ASCII punctuation character escaped (so
    ``$150|$150`` stays text, never mathematics or a cell border), line breaks as spaces,
    as the HTML table shows them."""
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", " ".join(str(value).split()))


def cell_texts(shown: pd.DataFrame) -> list[list[str]]:
    """Each cell of ``shown`` (see :func:`prepare`) as the HTML table writes it: numbers
    formatted as pandas formats them (``display.precision`` included)."""
    from pandas.io.formats.format import format_array

    columns = [[text.strip() for text in format_array(shown.iloc[:, position].to_numpy(), None,
                                                      justify="all", leading_space=False)]
               for position in range(len(shown.columns))]
    return [list(row) for row in zip(*columns)] if columns else []


def _print_widths(header: list[str], rows: list[list[str]]) -> list[float]:
    """Room for each column, in characters, padding included: each gets its least room (its
    longest word, see :data:`PRINT_LINE`), and what is left of the line is shared by how
    much more each one wants (its longest text)."""
    least, most = [], []
    for position, label in enumerate(header):
        values = [row[position] for row in rows]
        word = max((len(w) for value in values for w in value.split()), default=0)
        header_word = max((len(w) for w in label.split()), default=0)
        low = max(3, min(word, PRINT_WORD), min(header_word, PRINT_HEADER_WORD))
        longest = max(len(text) for text in [label, *values])
        least.append(low)
        most.append(max(low, min(longest, PRINT_WIDEST)))
    line = PRINT_LINE - PRINT_PAD * len(header)
    if sum(most) <= line or sum(least) >= line:
        text = most if sum(most) <= line else least
    else:
        spare = line - sum(least)
        wants = [high - low for low, high in zip(least, most)]
        text = [low + want * spare / sum(wants) for low, want in zip(least, wants)]
    return [width + PRINT_PAD for width in text]


def markdown_table(shown: pd.DataFrame, max_rows: int = PRINT_MAX_ROWS,
                   rows_kept: int = PRINT_ROWS) -> str:
    """``shown`` (see :func:`prepare`) as a Markdown pipe table, for print.

    Introduced in lesson 1, "Set up" (every table carries one). Cells hold the text of
    the HTML table, escaped by :func:`markdown_text`. A table wider than
    :data:`PANDOC_COLUMNS` characters takes the full text width, each column's share in
    proportion to :func:`_print_widths`, with its text wrapped inside the cells; a
    narrower one keeps its natural width. A table longer than ``max_rows`` rows keeps
    its first ``rows_kept`` and ends with a sentence that says so.
    """
    header, rows = [str(column) for column in shown.columns], cell_texts(shown)
    total = len(rows)
    rows = rows[:rows_kept] if total > max_rows else rows
    header_md = [markdown_text(label) for label in header]
    rows_md = [[markdown_text(text) for text in row] for row in rows]
    widths = _print_widths(header, rows)
    lines = ["| " + " | ".join(cells) + " |" for cells in [header_md, *rows_md]]
    # Relative widths: pandoc reads each column's share from its dashes.
    dashes = ([max(3, round(width * 120 / sum(widths))) for width in widths]
              if max(len(line) for line in lines) > PANDOC_COLUMNS else [3] * len(header))
    # Left-aligned, as the HTML tables are.
    separator = "|" + "|".join(":" + "-" * (count - 1) for count in dashes) + "|"
    table = "\n".join([lines[0], separator, *lines[1:]]) + "\n"
    if total > max_rows:
        table += (f"\nOnly the first {rows_kept} of the table's {total} rows are printed here; "
                  f"the website and the notebook show all {total}.\n")
    return table


def show_table(frame: pd.DataFrame, labels: Mapping[str, str] | str | None = None,
               name: str | None = None, interactive: bool = False, key_columns: int = 1,
               **itables_options) -> None:
    """Display a table in the notebook (see :func:`bundle`): ``show_table(frame, "name")``
    shows every column of ``frame`` under its label (:func:`labels_of`)."""
    from IPython.display import display

    if isinstance(labels, str):
        labels, name = None, labels
    display(bundle(frame, labels, name, interactive, key_columns, **itables_options), raw=True)


# --------------------------------------------------------------------------- taught code

def source_of(*objects) -> tuple[str, str]:
    """The source of functions, classes or methods of one module, in the order given, and
    where they live ("helpers/retrieval.py, lines 120-160 and 170-190"). A docstring is
    cut to its first paragraph: the page around the code says the rest."""
    files, parts, spans = set(), [], []
    for obj in objects:
        obj = inspect.unwrap(getattr(obj, "__func__", obj))
        lines, start = inspect.getsourcelines(obj)
        files.add(Path(inspect.getsourcefile(obj)).resolve())
        text = textwrap.dedent("".join(lines))
        doc = inspect.getdoc(obj) or ""
        if doc:
            quoted = re.search(r'(?s)([ \t]*)[rR]?("""|\'\'\')(.*?)\2\n', text)
            first = doc.split("\n\n")[0].replace("\n", "\n" + quoted.group(1))
            text = text[:quoted.start()] + f'{quoted.group(1)}"""{first}"""\n' + text[quoted.end():]
        parts.append(text.rstrip())
        spans.append(f"{start}-{start + len(lines) - 1}")
    if len(files) != 1:
        raise ValueError("show_source shows code of one module at a time")
    path = files.pop()
    root = Path(__file__).resolve().parent.parent
    where = path.relative_to(root).as_posix() if path.is_relative_to(root) else path.name
    return "\n\n\n".join(parts), f"{where}, lines {' and '.join(spans)}"


def show_source(*objects) -> None:
    """Show the code of helper functions where the lesson teaches them, from the helper
    itself (one source of truth): highlighted HTML for the website and the notebook, a
    Python code block for the printed book, and the file and lines it comes from; one
    block for each module, in the order given."""
    from IPython.display import display
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    for _, group in itertools.groupby(objects, key=lambda o: inspect.getmodule(o).__name__):
        code, where = source_of(*group)
        html = highlight(code, PythonLexer(), HtmlFormatter(
            noclasses=True, nobackground=True,
            prestyles="overflow-x: auto; white-space: pre; margin: 0; font-family: "
                      "var(--jp-code-font-family, SFMono-Regular, Menlo, Consolas, monospace);"))
        display({
            "text/html": f'<div class="riverton-source {NO_MATH_CLASSES}" style="border-left: '
                         f'3px solid #9bb0c6; padding: 0.1em 0 0.1em 0.9em; margin: 0.4em 0;">'
                         f'<p class="riverton-source-file" style="margin: 0.3em 0; color: '
                         f'#555;">From <code>{where}</code></p>{html}</div>',
            "text/markdown": f"From `{where}`:\n\n```python\n{code}\n```\n",
            "text/plain": f"# {where}\n{code}",
        }, raw=True)


def interactive_tables() -> None:
    """Load the interactive tables' script into the page, so that they work offline.

    Introduced in lesson 1, "Set up". This is itables' ``init_notebook_mode`` (offline,
    and no DataFrame made interactive unless :func:`show_table` is asked to), with its
    outputs shown as HTML only: a printed page, which cannot run the script, shows
    nothing instead of ``<IPython.core.display.HTML object>``.
    """
    from IPython.display import display
    from IPython.utils.capture import capture_output
    from itables import init_notebook_mode

    with capture_output(stdout=False, stderr=False) as captured:
        init_notebook_mode(all_interactive=False, connected=False)
    for output in captured.outputs:
        data = {mime: value for mime, value in output.data.items() if mime != "text/plain"}
        # An empty Markdown text is what a renderer that cannot show HTML picks, and shows.
        data["text/markdown"] = ""
        display(data, metadata=output.metadata, raw=True)


# --------------------------------------------------------------------------- prose

# A run of backticks opens a code span (or fence) that the same run closes (an unclosed run
# is only itself); a dollar sign is a dollar sign unless an odd number of backslashes
# already escapes it.
_CODE_OR_DOLLAR = re.compile(r"(?s)(?P<code>(?P<ticks>`+)(?:.*?(?<!`)(?P=ticks)(?!`))?)"
                             r"|(?P<backslashes>\\*)\$")


def literal_dollars(text: str) -> str:
    """``text`` (Markdown) with every dollar sign outside code written as ``\\$``.

    A backslash-escaped dollar is plain text to pandoc (Quarto) and to nbconvert's
    Markdown renderer, so neither reads ``$150 and $200`` as mathematics. Code spans and
    fences are copied unchanged: there a backslash would be shown.
    """
    def one(match: re.Match) -> str:
        slashes = match["backslashes"]
        return match["code"] or slashes + ("$" if len(slashes) % 2 else "\\$")

    return _CODE_OR_DOLLAR.sub(one, text)


class Markdown(_IPythonMarkdown):
    """IPython's ``Markdown`` for prose computed in a cell, with dollar signs kept literal.

    Introduced in lesson 1, "Set up". Text without a dollar sign is displayed exactly as
    given. Text with one is escaped by :func:`literal_dollars` (for Quarto) and wrapped
    in a ``<div>`` carrying :data:`NO_MATH_CLASSES` (for JupyterLab, whose MathJax would
    otherwise typeset "$150 and $200" whatever the escaping); the blank lines around the
    text keep it Markdown inside the ``<div>`` for every renderer.
    """

    def _repr_markdown_(self):
        shown = super()._repr_markdown_()
        data, metadata = shown if isinstance(shown, tuple) else (shown, None)
        if data and "$" in data:
            data = f'<div class="{NO_MATH_CLASSES}">\n\n{literal_dollars(data)}\n\n</div>'
        return (data, metadata) if metadata else data
