"""Quarto cell options (`#|` lines at the top of a code cell) and Quarto-flavoured markdown.

Used by `bookkit.build` when the book is built without Quarto. Quarto reads the same
options itself, so lessons are written once for both paths.
"""

from __future__ import annotations

import html
import itertools
import re

import yaml

_OPTION_LINE = re.compile(r"^#\|\s?(.*)$")
_FENCED_DIV_OPEN = re.compile(r"^(:{3,})\s*(\{[^}]*\}|[\w-]+)\s*$")
_FENCED_DIV_CLOSE = re.compile(r"^:{3,}\s*$")
#: A callout written as HTML, which JupyterLab shows as plain markdown and Quarto as a callout.
_HTML_CALLOUT = re.compile(r'^<div class="(callout-[\w-]+)">$')
_HEADING_ATTRS = re.compile(r"^(#{1,6}\s+.*?)\s+\{([^}]*)\}\s*$")
_SOLUTION_OPEN = '<details class="solution">'
_SUMMARY = re.compile(r"^<summary>(.*)</summary>$")
_CROSSREF = re.compile(r"(?<![\w@/\[])@((?:tbl|fig|sec|lst|eq)-[\w-]*\w)")


class CellOptionError(ValueError):
    """A cell's `#|` option block is not valid YAML or not a mapping."""


def parse_cell_options(source: str) -> tuple[dict, str]:
    """Split a code cell's leading `#|` lines from its code.

    Returns (options, code): options parsed as YAML (an empty dict when there are none)
    and the source without the option lines, as a reader should see it.
    """
    lines = source.splitlines()
    option_lines = [match[1] for match in itertools.takewhile(bool, map(_OPTION_LINE.match, lines))]
    if not option_lines:
        return {}, source
    text = "\n".join(option_lines)
    try:
        options = yaml.safe_load(text) or {}
    except yaml.YAMLError as error:
        raise CellOptionError(f"cell options are not valid YAML: {error}") from None
    if not isinstance(options, dict):
        raise CellOptionError(f"cell options must be `key: value` lines, got {text!r}")
    return options, "\n".join(lines[len(option_lines) :]).lstrip("\n")


def split_front_matter(text: str) -> tuple[dict, str]:
    """Split YAML front matter (between leading `---` lines) from a document."""
    match = re.match(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", text, re.DOTALL)
    if match is None:
        return {}, text
    meta = yaml.safe_load(match.group(1)) or {}
    if not isinstance(meta, dict):
        raise ValueError("front matter must be a YAML mapping")
    return meta, text[match.end() :]


def _parse_attributes(spec: str) -> tuple[str | None, list[str], dict[str, str]]:
    """Parse a Pandoc attribute block like `{#id .class key="value"}`."""
    spec = spec.strip()
    if not (spec.startswith("{") and spec.endswith("}")):  # `::: note` shorthand: a bare class name
        return None, [spec], {}
    found = re.findall(r'(#[\w:.-]+)|(\.[\w-]+)|([\w-]+)=("[^"]*"|\'[^\']*\'|\S+)', spec)
    idents = [ident[1:] for ident, _, _, _ in found if ident]  # the last one counts
    classes = [css[1:] for _, css, _, _ in found if css]
    attrs = {name: value.strip("\"'") for ident, css, name, value in found if name}
    return (idents[-1] if idents else None), classes, attrs


def quarto_markdown_to_commonmark(text: str, crossrefs: dict[str, str] | None = None,
                                  link_targets: dict[str, str] | None = None) -> str:
    """Rewrite the Quarto extensions a lesson uses into markdown any renderer shows.

    - fenced divs (`::: {.callout-note title="..."}` ... `:::`) become HTML divs with the
      markdown inside left as markdown (blank lines around the tags keep it that way); a
      callout with `collapse="true"` becomes `<details>` with its title as `<summary>`, so
      it stays closed until the reader opens it, as Quarto's collapsed callout does
      (`collapse="false"`: the same, open at first);
    - an exercise's solution, written `<details class="solution">` with a `<summary>` line
      (which every Jupyter front end shows closed), gets the classes of such a collapsed
      callout and its title's class, so it looks like one (on Quarto's side, solutions.lua
      makes it a collapsed callout);
    - heading attributes (`## Title {#sec-x .unnumbered}`) are removed, an `#id` kept as
      an anchor;
    - cross-references (`@tbl-x`) become links whose text is given by `crossrefs`
      (unknown references stay as written);
    - links to chapter sources are replaced by `link_targets` (source -> page).
    """
    crossrefs = crossrefs or {}
    out: list[str] = []
    # Each open div, innermost last: its closing tag, and whether it opened as an HTML callout
    # (then its own `</div>` line closes it, as a `:::` line closes a fenced div).
    closers: list[tuple[str, bool]] = []
    in_code = after_solution_open = False
    lines = text.splitlines()
    for number, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")) or in_code:
            in_code ^= stripped.startswith(("```", "~~~"))
            out.append(line)
            continue
        if html_callout := _HTML_CALLOUT.match(stripped):  # read as the fenced div it stands for
            stripped = f"::: {{.{html_callout[1]}}}"
        elif stripped == "</div>" and closers and closers[-1][1]:
            stripped = ":::"
        summary = _SUMMARY.match(stripped) if after_solution_open else None
        after_solution_open = stripped == _SOLUTION_OPEN
        if summary:
            out.append(f'<summary class="callout-title">{summary.group(1)}</summary>')
        elif after_solution_open:
            out.append('<details class="book-div callout-tip callout solution">')
        elif opening := _FENCED_DIV_OPEN.match(stripped):
            ident, classes, attrs = _parse_attributes(opening.group(2))
            css = " ".join(["book-div", *classes])
            callout = next((c for c in classes if c.startswith("callout")), None)
            id_attr = f' id="{html.escape(ident)}"' if ident else ""
            collapse = attrs.get("collapse", "").lower() if callout else ""
            tag = "details" if collapse in {"true", "false"} else "div"
            open_attr = " open" if collapse == "false" else ""
            classes = html.escape(css) + (" callout" if callout else "")
            out += ["", f'<{tag} class="{classes}"{id_attr}{open_attr}>']
            # As in Quarto, a callout's title is its title attribute, else a heading that
            # opens it (taken out of its body), else its kind: "Note", "Tip", ...
            first = next((n for n in range(number + 1, len(lines)) if lines[n].strip()), None)
            heading = first is not None and re.match(r"#{1,6}\s+(.+)$", lines[first].strip())
            if callout and heading and not attrs.get("title"):
                attrs["title"], lines[first] = heading[1], ""
            if callout:
                title = attrs.get("title") or (callout.partition("-")[2] or "note").title()
                title_tag = "summary" if tag == "details" else "div"
                out.append(f'<{title_tag} class="callout-title">{html.escape(title)}</{title_tag}>')
            out.append("")
            closers.append((f"</{tag}>", bool(html_callout)))
        elif closers and _FENCED_DIV_CLOSE.match(stripped):
            out.extend(["", closers.pop()[0], ""])
        else:
            if heading := _HEADING_ATTRS.match(line):
                ident = _parse_attributes("{" + heading.group(2) + "}")[0]
                line = heading.group(1)
                if ident:
                    out += [f'<a id="{html.escape(ident)}" class="book-anchor"></a>', ""]
            line = _CROSSREF.sub(lambda m: f"[{crossrefs[m[1]]}](#{m[1]})" if m[1] in crossrefs
                                 else m[0], line)
            line = re.sub(r"\]\(([^)\s#]+)(#[^)\s]*)?\)",
                          lambda m: f"]({(link_targets or {}).get(m[1], m[1])}{m[2] or ''})", line)
            out.append(line)
    while closers:
        out.extend(["", closers.pop()[0]])
    return tex_math_to_mathml("\n".join(out))


# TeX maths as pandoc reads it (tex_math_dollars): $$...$$ for display; $...$ inline when
# the opening $ has no space after it and the closing one no space before it and no digit
# after it, so "$150 and $200" stays money. Code spans and fences are left alone.
_MATH = re.compile(r"(?s)(?P<code>`+).*?(?P=code)|^(?P<fence>```|~~~).*?^(?P=fence)"
                   r"|(?<!\\)\$\$(?P<display>.+?)\$\$"
                   r"|(?<![\\$])\$(?P<inline>[^\s$`](?:[^$\n`]*?[^\s\\$`])?)\$(?!\d)", re.M)


def tex_math_to_mathml(text: str) -> str:
    """``text`` with its TeX maths written as MathML, which browsers show with no script,
    offline (Quarto does the same with ``html-math-method: mathml``)."""
    from latex2mathml.converter import convert

    def one(match: re.Match) -> str:
        if match["display"] is not None:
            return "\n" + convert(match["display"].strip(), display="block") + "\n"
        if match["inline"] is not None:
            return convert(match["inline"])
        return match[0]

    return _MATH.sub(one, text)
