"""Each lesson page offers its notebook: a copy to download, and, when the book names its
repository, links that open it in Colab or Binder.

Both engines call :func:`offer_notebooks` on the finished site: the build without Quarto
before it publishes, Quarto's post-render step after it puts the notebooks back as
committed. The copies are the committed notebooks, without outputs, as a student runs
them. The repository's address is set in one place, ``book.repo-url`` in `_quarto.yml`
(with ``book.repo-branch``, default ``main``); a GitHub address adds the two links beside
each page's download link.
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import yaml

from runtime.files import write_text_atomic

#: A page's download link, with the Colab and Binder links of an earlier pass (a page that
#: this render did not write). Its address is the notebook's name in the lesson, but Quarto
#: points a link to a chapter's source at the chapter's page (``../lessons/01-x.html``).
_DOWNLOAD = re.compile(r'<a href="[^"]*"(?P<rest>[^>]*>Download this lesson.s notebook</a>)'
                       r'(?: \(or open it in <a [^>]*>Colab</a> or <a [^>]*>Binder</a>\))?')


def repository(root: Path) -> tuple[str, str] | None:
    """``("owner/name", branch)`` of a GitHub ``book.repo-url`` in `_quarto.yml`, or None."""
    book = (yaml.safe_load((root / "_quarto.yml").read_text(encoding="utf-8")) or {}).get("book",
                                                                                          {})
    found = re.fullmatch(r"https://github\.com/([\w.-]+/[\w.-]+?)(?:\.git)?/?",
                         str(book.get("repo-url") or ""))
    return (found[1], str(book.get("repo-branch") or "main")) if found else None


def offer_notebooks(root: Path, site: Path, sources: list[str]) -> None:
    """Copy the notebooks ``sources`` (project-relative) into ``site`` beside their pages,
    point each page's download link at its copy, and follow it with links to Colab and
    Binder when the repository is known."""
    repo = repository(root)
    for source in (s for s in sources if s.endswith(".ipynb")):
        (site / source).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / source, site / source)
        page = (site / source).with_suffix(".html")
        links = "" if repo is None else (
            f' (or open it in <a href="https://colab.research.google.com/github/{repo[0]}/blob/'
            f'{repo[1]}/{source}">Colab</a> or <a href="https://mybinder.org/v2/gh/{repo[0]}/'
            f'{repo[1]}?labpath={source}">Binder</a>)')
        link = f'<a href="{Path(source).name}"'
        if page.is_file():
            write_text_atomic(page, _DOWNLOAD.sub(lambda m: link + m["rest"] + links,
                                                  page.read_text(encoding="utf-8"), count=1))
