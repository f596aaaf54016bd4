"""Guards for the figures a lesson's prose quotes.

A conclusion on a page is a sentence its author wrote after reading the result. The
cell after it (hidden on the website, collapsed in JupyterLab) calls :func:`check_claim`
with the sentence, the figures it states and the figures this run computed; the page
shows a small "checked" mark under the sentence that opens to those figures. When they
differ, the render stops there, as the parse gate of lesson 1 stops it, with a message
that quotes the sentence, the figures it states and the figures of this run; so a page
never publishes a sentence its own results no longer support.

The figures the book's guards check are the same on every machine: replies are replayed
from the transcript, and model scores are rounded before they are compared. A reader a
student runs live (``load_reader(..., mode="live")``) can still give another token on
another machine; then the message also names the reader, its revision and the package
versions. Setting ``RIVERTON_GUARDS=warn`` (in a notebook: ``%env RIVERTON_GUARDS=warn``
in a cell) lets the render go on and shows the same message as a visible warning beside
the sentence instead: never a false sentence without a word. In JupyterLab the error
shows the message alone (:meth:`ClaimMismatch._render_traceback_`), which says so.
"""
from __future__ import annotations

import contextlib
import html
import importlib.metadata
import math

from . import config



class ClaimMismatch(AssertionError):
    """A sentence of the page states figures that this run does not give."""

    def _render_traceback_(self) -> list[str]:
        """What IPython shows for this error (JupyterLab, the build's report): the message
        first and alone, not the lines of this module that raised it."""
        return [f"ClaimMismatch: {self}"]


def _same(claimed, computed) -> bool:
    if isinstance(claimed, float) or isinstance(computed, float):
        try:
            return math.isclose(float(claimed), float(computed), rel_tol=0, abs_tol=1e-9)
        except (TypeError, ValueError):
            return False
    if isinstance(claimed, (list, tuple)) and isinstance(computed, (list, tuple)):
        return len(claimed) == len(computed) and all(map(_same, claimed, computed))
    if isinstance(claimed, dict) and isinstance(computed, dict):
        return claimed.keys() == computed.keys() and all(_same(claimed[k], computed[k])
                                                         for k in claimed)
    return claimed == computed


def _plain(value):
    """A value as the message shows it: numpy scalars and tuples as plain Python."""
    if hasattr(value, "item") and not isinstance(value, (list, tuple, dict)):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def package_versions(*packages: str) -> str:
    """The installed versions of ``packages``, as "torch 2.5.1, transformers 4.46.3"; a
    package that is not installed is left out."""
    found = []
    for package in packages:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            found.append(f"{package} {importlib.metadata.version(package)}")
    return ", ".join(found)


def live_context(reader) -> str:
    """What a live reader's figures depend on: the model, its revision, the packages."""
    versions = package_versions("torch", "transformers", "llguidance")
    return (f" These figures come from {reader.model_id} running live on this machine "
            f"(revision {reader.revision}; {versions}). Its replies can differ on another "
            "machine or package version from the ones the sentence was written from.")


def _show_mark(sentence: str, claimed, computed) -> None:
    """The small mark under a guarded sentence: closed, "checked"; opened, the figures the
    sentence states and those this run gave. A printed page shows nothing."""
    from IPython import get_ipython
    from IPython.display import display

    if get_ipython() is None:
        return
    figures = (f"<em>{html.escape(sentence)}</em><br>The sentence states "
               f"{html.escape(repr(claimed))}; this run gives {html.escape(repr(computed))}.")
    display({"text/html": f'<details class="riverton-check" style="font-size: 0.8em; color: '
                          f'#5b6e5b; margin: -0.4em 0 0.6em 0;"><summary title="The figures of '
                          f'the sentence above are checked against this run">&#10003; checked'
                          f'</summary>{figures}</details>',
             "text/markdown": "", "text/plain": f"checked: {sentence}"}, raw=True)


def check_claim(sentence: str, claimed, computed, *, reader=None) -> None:
    """Stop the render unless ``computed`` (this run's figures) equals ``claimed`` (the
    figures ``sentence`` states). Numbers are compared to 1e-9; sequences and dicts item
    by item. ``reader``: the reader whose replies the figures come from, named in the
    message when it ran live."""
    __tracebackhide__ = True  # pytest shows the caller's line, not this function's
    claimed, computed = _plain(claimed), _plain(computed)
    if _same(claimed, computed):
        _show_mark(sentence, claimed, computed)
        return
    message = (f'The page says: "{sentence}" (that is {claimed!r}), but this run gives '
               f"{computed!r}.")
    if reader is not None and getattr(reader, "mode", None) == "live":
        message += live_context(reader)
    message += (" Rewrite the sentence (and this check) for the new result, or find what "
                f"changed. To go on meanwhile, run `%env {config.GUARDS}=warn` in a cell (or "
                f"set {config.GUARDS}=warn before you start JupyterLab or the build) and run "
                "the cells again: each sentence that no longer holds then shows this message "
                "as a warning beside it.")
    if config.text(config.GUARDS).lower() != "warn":
        raise ClaimMismatch(message)
    from IPython.display import display

    display({"text/html": f'<div class="riverton-claim-warning" style="border-left: 4px solid '
                          f'#c0392b; padding: 0.5em 1em;"><strong>Warning: this sentence no '
                          f'longer holds.</strong> {html.escape(message)}</div>',
             "text/markdown": f"::: {{.callout-warning}}\n## This sentence no longer holds\n\n"
                              f"{message}\n:::\n",
             "text/plain": f"WARNING: {message}"}, raw=True)
