"""Every setting the book reads from the environment, in one place (``runtime.config``).

Each ``RIVERTON_*`` variable is named here once, and read here only: :func:`text` for a
value as it is, :func:`number` for a number in a range (an argument, when one is given,
wins over the variable), :func:`switched_off` for a switch. An unusable value is an error
that names the variable and what it expected. The book's build hashes every variable of
the prefix into each lesson's key (:mod:`bookkit.cache`), so that a changed setting
executes a lesson again.
"""
from __future__ import annotations

import os
from collections.abc import Mapping

PREFIX = "RIVERTON_"

#: How a reader answers: auto, live, recorded or server.
READER_MODE = "RIVERTON_READER_MODE"
#: An OpenAI-compatible server, its API key, requests in flight and seconds per request.
READER_URL = "RIVERTON_READER_URL"
READER_API_KEY = "RIVERTON_READER_API_KEY"
READER_CONCURRENCY = "RIVERTON_READER_CONCURRENCY"
READER_TIMEOUT = "RIVERTON_READER_TIMEOUT"
#: Prompts a live reader decodes together.
BATCH_SIZE = "RIVERTON_BATCH_SIZE"
#: ``warn``: a sentence that no longer holds shows a warning instead of stopping the page.
GUARDS = "RIVERTON_GUARDS"
#: ``0``, ``off``, ``false`` or ``no`` hide the progress bars.
PROGRESS = "RIVERTON_PROGRESS"
#: Set by the book build, to the engine's name, in the kernels that execute the lessons.
BOOK_BUILD = "RIVERTON_BOOK_BUILD"
#: Where dequantised models are kept (default: the user's cache folder).
MODEL_CACHE = "RIVERTON_MODEL_CACHE"
#: The folder of students' reviews that lesson 4 reads (default: data/reviews).
REVIEWS_DIR = "RIVERTON_REVIEWS_DIR"

_OFF = {"0", "off", "false", "no"}


def text(name: str, environ: Mapping[str, str] | None = None) -> str:
    """The variable's value, stripped; ``""`` when it is not set."""
    return (os.environ if environ is None else environ).get(name, "").strip()


def switched_off(name: str, environ: Mapping[str, str] | None = None) -> bool:
    """Whether the variable says ``0``, ``off``, ``false`` or ``no``."""
    return text(name, environ).lower() in _OFF


def number(name: str, value=None, *, default, low, high, kind=int, error=ValueError,
           argument: str = "argument"):
    """``value`` (the ``argument``), else the variable, else ``default``: a number of
    ``kind`` from ``low`` to ``high``, or ``error`` naming where it came from."""
    source = argument if value is not None else f"environment variable {name}"
    raw = value if value is not None else text(name)
    if raw == "":
        return default
    try:
        number = kind(raw) if isinstance(raw, str) or kind is float else raw
    except (TypeError, ValueError):
        number = None
    if isinstance(raw, bool) or not isinstance(number, kind) or not low <= number <= high:
        raise error(f"{source} is {raw!r}; expected a {'whole ' if kind is int else ''}"
                    f"number from {low} to {high}")
    return number
