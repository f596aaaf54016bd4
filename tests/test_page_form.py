"""How long a built lesson page takes to read, measured as a reader reads it.

For each lesson page of both builds (Quarto and nbclient), the core (every section before
"Exercises" but "Going further") is measured from what the page shows:

- words: prose words (paragraphs, list items, quotes; not formulas, tables, code or folded
  parts);
- code: code lines shown, the lesson's own cells and a helper's source a cell displays
  (``show_source``), blank lines left out; a cell hidden on the page is not shown;
- guard: of those, lines of cells that call ``check_claim``;
- tables: distinct "Table N.M" numbers first met in the core;
- minutes: words / 200 + code / 8 + tables, a careful reader's pace;

and "Going further" is measured in words. The limits: guard code at most
:data:`MAX_GUARD_SHARE` of the code shown, "Going further" at most
:data:`MAX_GOING_FURTHER_WORDS` words and folded (closed) on the page, and the core
within :data:`MAX_MINUTES`: 45 minutes, 55 for lesson 1, which carries every figure of
the source page.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

MAX_GUARD_SHARE = 0.10
MAX_GOING_FURTHER_WORDS = 1500
#: How long each lesson's core may take, in minutes, under either engine.
MAX_MINUTES = {"01": 55, "02": 45, "03": 45, "04": 45, "05": 45}

WORD = re.compile(r"[A-Za-z0-9$%'’.-]*[A-Za-z0-9]")
PROSE = ["p", "li", "blockquote", "dd"]
OUTPUT = re.compile(r"jp-OutputArea|cell-output")
HIGHLIGHTED = re.compile(r"highlight|sourceCode")
INPUT = re.compile(r"jp-InputArea|cell-code")


def _lines(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.strip())


def _section(element, sections: dict) -> str:
    """The part a page element belongs to: "core", "going_further" or "after" (the
    exercises and sources), by the last level-2 heading before it."""
    heading = element if element.name == "h2" else element.find_previous("h2")
    return sections.get(id(heading), "core")


def measure(html: str) -> dict:
    """Words, code lines shown, guard lines, tables and minutes of a page's core, and the
    words of its "Going further"."""
    soup = BeautifulSoup(html, "html.parser")
    main = soup.find("main") or soup.find(id="quarto-content") or soup.body
    # Formulas are read as formulas, not as words (Quarto's pages hold them twice: as
    # MathML and as the TeX it came from).
    for junk in main.find_all(["nav", "script", "style", "math"]) + main.find_all(class_="math"):
        junk.decompose()
    sections, after = {}, False
    for heading in main.find_all("h2"):
        title = heading.get_text(" ", strip=True).lower()
        after = after or title.startswith(("exercises", "sources"))
        sections[id(heading)] = ("after" if after else "going_further"
                                 if title.startswith("going further") else "core")
    found = {"words": 0, "going_further": 0, "code": 0, "guard": 0}
    for element in main.find_all(PROSE):
        part = _section(element, sections)
        if part != "after" and element.find_parent(["table", "pre", "code", "figure"]) is None \
                and not (element.name == "p" and element.find_parent(["li", "blockquote", "dd"])) \
                and (part == "going_further" or element.find_parent("details") is None):
            found["words" if part == "core" else part] += len(
                WORD.findall(element.get_text(" ", strip=True)))
    for pre in main.find_all("pre"):
        if _section(pre, sections) != "core" or pre.find_parent("details") is not None:
            continue
        in_output = pre.find_parent(class_=OUTPUT) is not None
        highlighted = (pre.find_parent(class_=HIGHLIGHTED) is not None
                       or "sourceCode" in (pre.get("class") or []))
        if highlighted or pre.find_parent(class_=INPUT) is not None and not in_output:
            shown = _lines(pre.get_text())
            found["code"] += shown
            found["guard"] += shown if "check_claim(" in pre.get_text() and not in_output else 0
    first_seen = {}
    for text in main.find_all(string=re.compile(r"Table\s+\d+\.\d+")):
        for number in re.findall(r"Table\s+(\d+\.\d+)", text):
            first_seen.setdefault(number, _section(text.parent, sections))
    found["tables"] = sum(1 for part in first_seen.values() if part == "core")
    found["minutes"] = round(found["words"] / 200 + found["code"] / 8 + found["tables"])
    return found


def check_form(page: Path) -> list[str]:
    """What is wrong with one built page's form, one line per limit it breaks."""
    text = page.read_text(encoding="utf-8")
    found, lesson = measure(text), page.name[:2]
    heading = BeautifulSoup(text, "html.parser").find(
        "h2", string=re.compile(r"^\s*Going further"))
    fold = heading and heading.find_next("details", class_="book-going-further")
    return [problem for broken, problem in (
        (heading is not None and (fold is None or fold.has_attr("open")),
         "'Going further' is not folded, closed, after its heading"),
        (found["guard"] > MAX_GUARD_SHARE * found["code"],
         f"{found['guard']} of {found['code']} code lines shown are guards"),
        (found["going_further"] > MAX_GOING_FURTHER_WORDS,
         f"'Going further' has {found['going_further']} words"),
        (found["minutes"] > MAX_MINUTES[lesson],
         f"the core takes {found['minutes']} minutes, over {MAX_MINUTES[lesson]}: {found}"))
        if broken]


@pytest.mark.slow
@pytest.mark.parametrize("site", ["nbclient_site", "quarto_site"])
def test_every_lesson_page_keeps_its_form(site, request):
    pages = sorted(request.getfixturevalue(site).folder.glob("lessons/[0-9][0-9]-*.html"))
    assert {page.name[:2]: check_form(page) for page in pages} == {n: [] for n in MAX_MINUTES}


def test_the_measure_counts_what_a_reader_reads(tmp_path):
    """Prose, shown code, a shown guard, a hidden cell's absence, a table caption and the
    parts after "Going further" and "Exercises", each counted where it belongs."""
    guard = 'check_claim("one", 1, 1)\n'
    page = f"""<html><body><main>
      <p>Five words of prose here.</p>
      <div class="cell-code"><pre class="sourceCode">a = 1\n\nb = 2</pre></div>
      <div class="cell-code"><pre class="sourceCode">{guard}</pre></div>
      <div class="cell-output"><pre>printed output is not code</pre></div>
      <details><summary>checked</summary><p>folded words are not read</p></details>
      <p>Table 1.1: a caption</p>
      <h2>Going further</h2><details open><p>three more words</p>
      <div class="cell-code"><pre class="sourceCode">not = "core"</pre></div>
      <p>Table 1.2: not a core table</p></details>
      <h2>What to remember</h2><p>core again, four</p>
      <h2>Exercises</h2><p>not counted at all</p>
      <div class="cell-code"><pre class="sourceCode">x = 1</pre></div>
    </main></body></html>"""
    found = measure(page)
    assert found == {"words": 5 + 4 + 3, "going_further": 3 + 6, "code": 3, "guard": 1,
                     "tables": 1, "minutes": round(12 / 200 + 3 / 8 + 1)}
    path = tmp_path / "01-x.html"
    path.write_text(page.replace(guard, guard * 40), encoding="utf-8")
    assert check_form(path) == ["'Going further' is not folded, closed, after its heading",
                                "40 of 42 code lines shown are guards"]
