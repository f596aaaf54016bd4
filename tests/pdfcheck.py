"""Read a PDF as a reader would: its text (pdftotext) and pictures of its pages (pdftoppm).

Both tools come from Debian's poppler-utils, which `make test` installs when it runs as
root (scripts/ensure-poppler.sh). Without them the PDF checks are skipped, unless
``BOOK_REQUIRE_POPPLER=1`` (set by CI) makes that an error.

Text is compared without its whitespace (:func:`squeeze`): the PDF wraps text at the
margin and inside table cells, where the website wraps it elsewhere or not at all; and
with straight quotes, where Typst sets typographic ones.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

TOOLS = ("pdftotext", "pdftoppm")


def require_poppler() -> None:
    """Skip the test without poppler-utils, or fail under ``BOOK_REQUIRE_POPPLER=1``."""
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        reason = f"{', '.join(missing)} not found (Debian package poppler-utils)"
        if os.environ.get("BOOK_REQUIRE_POPPLER") == "1":
            pytest.fail(f"BOOK_REQUIRE_POPPLER=1 but {reason}")
        pytest.skip(reason)


def text(pdf: Path, first: int | None = None, last: int | None = None) -> str:
    """The text of the PDF (pages ``first`` to ``last``, counted from 1), in reading order."""
    command = ["pdftotext", "-enc", "UTF-8"]
    if first is not None:
        command += ["-f", str(first)]
    if last is not None:
        command += ["-l", str(last)]
    return subprocess.run([*command, str(pdf), "-"], capture_output=True, text=True, check=True).stdout


def pages(pdf: Path) -> list[str]:
    """The text of each page (pdftotext ends every page with a form feed)."""
    return text(pdf).split("\f")[:-1]


# A line that ends in a hyphen Typst added to break a word: the word goes on the next line.
_HYPHENATED = re.compile(r"[-\u2010\u00ad]\n")


# Typst sets straight quotes as typographic ones.
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})


def squeeze(found: str, hyphenated: bool = False) -> str:
    """``found`` without whitespace, its quotes straight; with ``hyphenated``, also without
    a hyphen at a line's end."""
    if hyphenated:
        found = _HYPHENATED.sub("", found)
    return re.sub(r"\s+", "", found).translate(_QUOTES)


_HYPHENS = re.compile("[-\u2010\u00ad]")


def contains(haystack: str, needle: str, hyphens: bool = True) -> bool:
    """Whether ``needle`` is in the PDF text ``haystack``, whitespace and line-end hyphens
    aside; with ``hyphens=False``, every hyphen aside (a word hyphenated where it has a
    hyphen of its own)."""
    if not hyphens:
        return _HYPHENS.sub("", squeeze(needle)) in _HYPHENS.sub("", squeeze(haystack))
    wanted = squeeze(needle)
    return wanted in squeeze(haystack) or wanted in squeeze(haystack, hyphenated=True)


def page_pictures(pdf: Path, numbers: list[int], folder: Path, dpi: int = 50) -> list[Path]:
    """PNG pictures of the pages ``numbers`` (counted from 1) in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    made = []
    for number in numbers:
        stem = folder / f"page-{number:03d}"
        subprocess.run(["pdftoppm", "-png", "-r", str(dpi), "-f", str(number), "-l", str(number),
                        "-singlefile", str(pdf), str(stem)], capture_output=True, check=True)
        made.append(stem.with_suffix(".png"))
    return made


def ink(picture: Path) -> float:
    """The share of the picture's pixels that are not (nearly) white."""
    from PIL import Image

    with Image.open(picture) as image:
        grey = image.convert("L")
        histogram = grey.histogram()
    return 1 - sum(histogram[245:]) / sum(histogram)
