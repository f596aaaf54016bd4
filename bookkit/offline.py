"""Pages that work offline: no script, stylesheet or font fetched from the network.

Both engines must publish pages that a student can open with no internet. The build
without Quarto checks its own pages with :func:`find_remote_assets`. Quarto needs two
repairs, both made by the post-render step (:mod:`bookkit.freeze`):

- Quarto adds require.js and jQuery from a CDN, and a ``define('jquery', ...)`` line that
  needs require.js, to every page with an HTML output, in case the output is a JavaScript
  widget that expects them (Quarto's ``widgets.ts``). The book's HTML outputs need
  neither: static tables are plain HTML, and itables runs offline with its own bundle
  (``connected=False``). Offline, the CDN scripts fail and the ``define`` line throws
  "define is not defined" on every lesson page. :func:`make_pages_offline` removes the
  three.
- The cosmo theme imports its web font from Google Fonts; ``book.scss`` turns that off
  (``$web-font-path: false``), so the pages use the system font stack.

Whatever still refers to the network afterwards is reported by :func:`remote_assets_in_site`,
and the render fails naming the file and the address.
"""
from __future__ import annotations

import re
from pathlib import Path

from runtime.files import write_text_atomic

_REMOTE_ASSET_PATTERNS = [
    re.compile(r"<script\b[^>]*\bsrc\s*=\s*[\"']?\s*((?:https?:)?//[^\"'\s>]+)", re.I),
    re.compile(r"<link\b[^>]*\bhref\s*=\s*[\"']?\s*((?:https?:)?//[^\"'\s>]+)", re.I),
    re.compile(r"(?<!@)\bimport\s*(?:[\w$*{}\s,]+\s*from\s*)?"
               r"\(?\s*[\"']((?:https?:)?//[^\"']+)[\"']", re.I),
    # CSS: @import url(...), @import "..." and minified @import"..."
    re.compile(r"@import\s*(?:url\()?\s*[\"']?((?:https?:)?//[^\"')\s;]+)", re.I),
]

# What Quarto adds to a page for JavaScript widgets (see the module docstring): a script
# tag for require.js, one for jQuery (moved to the top of <head>, often on one line with
# Quarto's own scripts) and an inline script that registers jQuery with require.js.
_WIDGET_LOADERS = [
    re.compile(r"<script\b[^>]*\bsrc=\"https://[^\"]*/require(?:js)?[@/][^\"]*?"
               r"require(?:\.min)?\.js\"[^>]*>\s*</script>\n?", re.I),
    re.compile(r"<script\b[^>]*\bsrc=\"https://[^\"]*/jquery[@/][^\"]*?"
               r"jquery(?:\.min)?\.js\"[^>]*>\s*</script>\n?", re.I),
    re.compile(r"<script\b[^>]*>\s*define\('jquery',\s*\[\],\s*function\(\)\s*\{\s*return "
               r"window\.jQuery;\s*\}\)\s*</script>\n?"),
]


def find_remote_assets(text: str) -> list[str]:
    """URLs of scripts, stylesheets, modules or CSS imports that ``text`` would fetch."""
    return [url for pattern in _REMOTE_ASSET_PATTERNS for url in pattern.findall(text)]


def make_pages_offline(pages: list[Path]) -> None:
    """Remove Quarto's widget loaders (require.js, jQuery, the define line) from every page
    in ``pages``."""
    for page in pages:
        text = stripped = page.read_text(encoding="utf-8")
        for pattern in _WIDGET_LOADERS:
            stripped = pattern.sub("", stripped)
        if stripped != text:
            write_text_atomic(page, stripped)


def remote_assets_in_site(site: Path) -> list[str]:
    """``"FILE: URL"`` for every remote asset an HTML or CSS file of the site refers to."""
    files = [p for p in sorted(site.rglob("*")) if p.suffix in {".html", ".css"} and p.is_file()]
    return [f"{path.relative_to(site).as_posix()}: {url}" for path in files for url in
            sorted(set(find_remote_assets(path.read_text(encoding="utf-8", errors="replace"))))]
