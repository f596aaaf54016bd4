"""Progress bars for the batches a model decodes.

Machinery first seen in lesson 3, "Run the six prompts as they are", the first lesson whose
model runs live; :func:`runtime.readers.generate_all` shows one for every live or server
reader. While a person runs a notebook, a bar shows how many
questions are done and which one the model is working on (``tqdm.auto``: a widget in
JupyterLab, a line on standard error in a terminal).

A book build executes the same cells, and a bar would leave a widget, or its text, in
the published page. So the bars stay off whenever a build runs the code:

- ``python -m bookkit`` sets ``RIVERTON_BOOK_BUILD`` in the environment of every kernel
  it starts (:func:`build_environment`), with either engine;
- a plain ``quarto render`` sets ``QUARTO_DOCUMENT_PATH`` (and ``QUARTO_EXECUTE_INFO``)
  in the environment of the kernel that executes a document; Quarto sets neither in a
  JupyterLab session.

``RIVERTON_PROGRESS=0`` turns the bars off anywhere else too.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Mapping, Sequence
from typing import Any

from . import config

#: Environment variables that ``quarto render`` sets in the kernel executing a document.
QUARTO_MARKERS = ("QUARTO_DOCUMENT_PATH", "QUARTO_EXECUTE_INFO")


def book_build(environ: Mapping[str, str] | None = None) -> str | None:
    """The book build executing this process (``"nbclient"``, ``"quarto"`` ...), or None
    when a person is running it."""
    if (value := config.text(config.BOOK_BUILD, environ)) and not config.switched_off(
            config.BOOK_BUILD, environ):
        return value
    if any(config.text(name, environ) for name in QUARTO_MARKERS):
        return "quarto"
    return None


def bars_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether progress bars are shown: not in a book build, not switched off."""
    return book_build(environ) is None and not config.switched_off(config.PROGRESS, environ)


def build_environment(engine: str, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of ``base`` (default: this process's environment) marked as a book build."""
    return {**(os.environ if base is None else base), config.BOOK_BUILD: engine}


class QuestionProgress:
    """A progress bar over questions, shown only while a person runs the code.

    Use it as a context manager: :meth:`working_on_batch` names the questions being worked
    on and :meth:`finished` counts them once they are done. If the work raises, the bar
    closes where it stopped (red in JupyterLab) and names the questions that failed. With
    ``show=False``, in a book build or with ``RIVERTON_PROGRESS=0`` nothing is displayed.
    """

    def __init__(self, total: int, desc: str, *, show: bool = True):
        from tqdm.auto import tqdm  # disabled, it prints nothing and makes no widget

        self.shown = bool(show) and bars_enabled()
        self._bar = tqdm(total=total, desc=desc, unit="question", disable=not self.shown)
        self.done = 0  # questions finished so far

    def __enter__(self) -> "QuestionProgress":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._bar.close()

    def finished(self, count: int = 1) -> None:
        """Count the question in progress (or the ``count`` questions of a batch) as done."""
        self.done += count
        self._bar.update(count)

    def working_on_batch(self, question_ids: Sequence[str]) -> None:
        """Show the questions of the batch in progress: all of them when they are few,
        else the first, the last and how many."""
        ids = [str(q) for q in question_ids]
        label = ", ".join(ids) if len(ids) <= 4 else f"{ids[0]} … {ids[-1]} ({len(ids)} together)"
        self._bar.set_postfix_str(label, refresh=True)


@contextlib.contextmanager
def quiet_loading(**environ: str):
    """Load a model with ``environ`` set and no progress bar (a bar would land in a rendered
    page), then restore both: transformers' bars, and the one the GGUF de-quantizer draws
    outside transformers' switch."""
    import transformers.modeling_gguf_pytorch_utils as gguf_utils
    from transformers.utils import logging as hf_logging

    saved = {name: os.environ.get(name) for name in environ}
    enabled, original = hf_logging.is_progress_bar_enabled(), gguf_utils.tqdm
    hf_logging.disable_progress_bar()
    os.environ.update(environ)
    gguf_utils.tqdm = functools.partial(original, disable=True)
    try:
        yield
    finally:
        os.environ.update({name: value for name, value in saved.items() if value is not None})
        for name in (name for name, value in saved.items() if value is None):
            os.environ.pop(name, None)
        gguf_utils.tqdm = original
        if enabled:
            hf_logging.enable_progress_bar()
