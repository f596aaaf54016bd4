"""The helper package stays readable: imports run one way, and lesson markers name real headings.

`helpers/` is what the lessons teach and call. Its modules sit in three layers, from the
bottom: plain tools (paths, files, text, progress bars, tables), the stages of the
pipeline (retrieval, reading, parsing, scoring, screening, agreement, the fixture), and
the lessons' own content above them (the review, the judge, attacks and defences,
exercises). A module imports only modules of its own layer or below, never one above,
and no chain of imports comes back to where it started. The book's machinery
(`bookkit/`) may use the helpers; no helper imports it.

Every helper names the lesson section that introduces it (``Lesson 3, "Force the format
with a grammar"``); each such marker must name a heading that the lesson has.
"""
from __future__ import annotations

import ast
import io
import json
import re
import tokenize
from pathlib import Path

import pytest

from helpers.paths import LESSONS_DIR, PROJECT_ROOT

HELPERS = PROJECT_ROOT / "helpers"

#: Each top-level module or subpackage of helpers/, by layer (0 is the bottom).
LAYERS = {
    0: {"__init__", "paths", "files", "text", "progress", "display", "attack_rules",
        "intervals", "values"},
    1: {"retrieval", "dense", "baseline", "parsing", "scoring", "screen", "agreement",
        "fixture", "reader"},
    2: {"review", "judge", "attacks", "defences", "pinned_reader", "exercises"},
}
LAYER_NAMES = {0: "tools", 1: "stages", 2: "lesson content"}


def module_name(path: Path, root: Path) -> str:
    """``helpers.reader.generation`` for helpers/reader/generation.py (a package's
    ``__init__.py`` is the package itself)."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path) -> dict[str, Path]:
    return {module_name(path, root): path for path in sorted(root.rglob("*.py"))
            if "__pycache__" not in path.parts}


def imports(path: Path, name: str, known: set[str]) -> list[tuple[str, int]]:
    """The modules of ``known`` that the file imports, anywhere in it (inside functions
    too), with the line of each import."""
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[:len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            # `from .reader import constrained` imports the submodule, not only the package.
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                       for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # import a.b.c of a module a.b
                target = target.rpartition(".")[0]
            if target and target != name:
                found.append((target, node.lineno))
    return found


def layer_of(name: str) -> int:
    top = name.split(".")[1] if "." in name else "__init__"
    for layer, members in LAYERS.items():
        if top in members:
            return layer
    raise KeyError(name)


def import_graph(root: Path = HELPERS) -> dict[str, list[tuple[str, int]]]:
    found = modules(root)
    return {name: imports(path, name, set(found)) for name, path in found.items()}


def upward_imports(graph) -> list[str]:
    return [f"{source} (layer {LAYER_NAMES[layer_of(source)]}) imports {target} "
            f"(layer {LAYER_NAMES[layer_of(target)]}) at line {line}"
            for source, targets in graph.items() for target, line in sorted(set(targets))
            if layer_of(target) > layer_of(source)]


def circles(graph) -> list[list[str]]:
    """Every import circle, each as the modules in order (found by depth-first search)."""
    edges = {source: sorted({t for t, _ in targets}) for source, targets in graph.items()}
    found, seen = [], set()

    def visit(node, path, on_path):
        for nxt in edges.get(node, []):
            if nxt in on_path:
                cycle = path[path.index(nxt):]
                key = frozenset(cycle)
                if key not in seen:
                    seen.add(key)
                    found.append(cycle + [nxt])
            elif nxt not in done:
                visit(nxt, path + [nxt], on_path | {nxt})
        done.add(node)

    done: set[str] = set()
    for start in sorted(edges):
        if start not in done:
            visit(start, [start], {start})
    return found


def test_every_helper_module_has_a_layer():
    unplaced = [name for name in modules(HELPERS) if _unplaced(name)]
    assert unplaced == [], f"place these modules in a layer of LAYERS: {unplaced}"


def _unplaced(name: str) -> bool:
    try:
        layer_of(name)
    except KeyError:
        return True
    return False


def test_the_helpers_have_no_import_circle_and_no_upward_import():
    graph = import_graph()
    assert sum(len(targets) for targets in graph.values()) > 50, "the import scan found too little"
    assert upward_imports(graph) == []
    assert circles(graph) == []


def test_no_helper_imports_the_books_machinery():
    found = []
    for path in sorted(HELPERS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level
                     else [])
            found += [f"{path.relative_to(PROJECT_ROOT)}:{node.lineno} imports {n}"
                      for n in names if n == "bookkit" or n.startswith("bookkit.")]
    assert found == []


def _write_package(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / "helpers" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "helpers"


def test_the_scan_finds_a_circle_and_an_upward_import(tmp_path):
    """The checks above can fail: a circle through a function-level import, and a stage
    that imports lesson content."""
    root = _write_package(tmp_path, {
        "__init__.py": "",
        "fixture.py": "from .attacks import ATTACK_KINDS\n",
        "attacks.py": "def f():\n    from .fixture import load\n",
        "reader/__init__.py": "from .generation import x\n",
        "reader/generation.py": "from ..text import tokenize\n",
        "text.py": "",
    })
    graph = import_graph(root)
    assert upward_imports(graph) == [
        "helpers.fixture (layer stages) imports helpers.attacks (layer lesson content) at line 1"]
    assert circles(graph) == [["helpers.attacks", "helpers.fixture", "helpers.attacks"]]


# --------------------------------------------------------------------------- markers

MARKER = re.compile(r'\b[Ll]essons?\s+(\d+),\s+"([^"]+)"')
HEADING = re.compile(r"^#{1,4}\s+(.+?)\s*(?:\{[^}]*\})?\s*$", re.M)


def lesson_headings() -> dict[int, set[str]]:
    found = {}
    for path in sorted(LESSONS_DIR.glob("[0-9][0-9]-*.ipynb")):
        notebook = json.loads(path.read_text(encoding="utf-8"))
        text = "\n".join("".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "markdown")
        found[int(path.name[:2])] = {m.group(1) for m in HEADING.finditer(text)}
    return found


def prose(path: Path) -> str:
    """The docstrings and comments of a module, each run of comment lines joined."""
    source = path.read_text(encoding="utf-8")
    parts = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            docstring = ast.get_docstring(node, clean=False)
            if docstring:
                parts.append(docstring)
    comments, last_line = [], None
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            text = token.string.lstrip("#:").strip()
            if last_line is not None and token.start[0] == last_line + 1 and comments:
                comments[-1] += " " + text
            else:
                comments.append(text)
            last_line = token.start[0]
    return "\n".join(parts + comments)


def markers(root: Path = HELPERS) -> list[tuple[str, int, str]]:
    """Every ``Lesson N, "heading"`` in the helpers' docstrings and comments, with line
    breaks and indentation inside a marker read as one space."""
    found = []
    for path in sorted(root.rglob("*.py")):
        text = re.sub(r"\s*\n\s*", " ", prose(path))
        found += [(str(path.relative_to(root.parent)), int(m.group(1)), m.group(2))
                  for m in MARKER.finditer(text)]
    return found


def wrong_markers(found, headings) -> list[str]:
    return [f'{where}: lesson {number} has no heading "{heading}"'
            for where, number, heading in found if heading not in headings.get(number, set())]


def test_every_lesson_marker_names_a_heading_of_that_lesson():
    found = markers()
    assert len(found) > 50, "the marker scan found too few markers"
    assert wrong_markers(found, lesson_headings()) == []


def test_a_marker_with_a_heading_the_lesson_lacks_is_reported(tmp_path):
    root = _write_package(tmp_path, {"constrained.py": '"""Lesson 3, "Force the\n    format"."""\n'})
    found = markers(root)
    assert found == [("helpers/constrained.py", 3, "Force the format")]
    assert wrong_markers(found, lesson_headings()) == [
        'helpers/constrained.py: lesson 3 has no heading "Force the format"']


@pytest.mark.parametrize("number", [1, 2, 3, 4, 5])
def test_the_heading_scan_reads_each_lesson(number):
    assert len(lesson_headings()[number]) >= 8
