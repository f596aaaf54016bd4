"""Tables for the rendered lessons: static HTML or interactive itables, one call.

Introduced in lesson 1, "Set up". Each table is displayed as a bundle with three
representations: ``text/html`` for readers, ``text/plain`` for terminals, and
:data:`TABLE_MIME` (the rows as JSON) so tests can read the table an executed notebook
shows without scraping HTML. Renderers ignore the JSON type they do not know.
"""
from __future__ import annotations

import json
from collections.abc import Mapping

import pandas as pd

TABLE_MIME = "application/vnd.riverton.table+json"

# Notebook front ends right-align table cells; text columns read better left-aligned.
_STYLE = (
    "<style>.riverton-table th, .riverton-table td "
    "{text-align: left !important; vertical-align: top;}</style>"
)


def _cell(value: object) -> object:
    if value is None or value is pd.NA or (isinstance(value, float) and pd.isna(value)):
        return "NA"
    if isinstance(value, (tuple, list)):
        return ", ".join(str(v) for v in value) or "none"
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    return value


def prepare(frame: pd.DataFrame, labels: Mapping[str, str]) -> pd.DataFrame:
    """Keep the columns named in ``labels`` (in that order) under their display names.

    Missing values show as "NA" and tuples as comma-joined text.
    """
    missing = [column for column in labels if column not in frame.columns]
    if missing:
        raise KeyError(f"table has no column(s) {missing}; it has {list(frame.columns)}")
    shown = frame[list(labels)].rename(columns=dict(labels))
    return shown.astype(object).map(_cell)


def bundle(frame: pd.DataFrame, labels: Mapping[str, str], name: str,
           interactive: bool = False, **itables_options) -> dict:
    """The MIME bundle for one table; ``name`` identifies it for tests."""
    shown = prepare(frame, labels)
    if interactive:
        from itables import to_html_datatable

        # A search box even on short tables (itables hides it when a table fits one page).
        options = {"connected": False, "classes": "display compact", "paging": False,
                   "scrollX": True,
                   "layout": {"topStart": None, "topEnd": "search",
                              "bottomStart": None, "bottomEnd": None}}
        options.update(itables_options)
        html = to_html_datatable(shown, **options)
    else:
        html = shown.to_html(index=False, escape=True, border=0,
                             classes="table table-sm riverton-table")
    # itables opens with a comment that tells Quarto to leave the table alone; keep it first.
    directive = ""
    if html.startswith("<!--|"):
        directive, html = html.split("\n", 1)
        directive += "\n"
    html = f'{directive}{_STYLE}<div class="riverton-table">{html}</div>'
    payload = {"name": name, "columns": list(shown.columns),
               "rows": shown.to_numpy().tolist()}
    return {
        "text/html": html,
        "text/plain": shown.to_string(index=False),
        TABLE_MIME: json.loads(json.dumps(payload, default=str)),
    }


def show_table(frame: pd.DataFrame, labels: Mapping[str, str], name: str,
               interactive: bool = False, **itables_options) -> None:
    """Display a table in the notebook (see :func:`bundle`)."""
    from IPython.display import display

    display(bundle(frame, labels, name, interactive, **itables_options), raw=True)
