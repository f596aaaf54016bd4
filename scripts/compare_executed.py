#!/usr/bin/env python3
"""Compare two executions of the lessons, cell by cell: did a change alter what a page shows?

BEFORE and AFTER are executed notebooks, or folders of them: a folder's notebooks are
found at any depth and matched by lesson (the nbclient build keeps each lesson's
executions in ``.book-cache/executed/<lesson>/<key>/executed.ipynb``; give a folder that
holds one execution per lesson). Cells are matched by their ``id``; a cell present on one
side only is reported. Outputs are compared after removing what differs from run to run
without meaning anything: timings ("3.2 seconds", "0.41 s"), absolute paths, the random
ids of interactive tables, widgets and SVG figures, the date an SVG figure was drawn,
the line that says where a model was loaded from (its cache may be new), execution counts
and output metadata. A *live check* (``runtime.live_check``: this machine's live replies
beside the recorded ones) is machine-dependent by design: its differences are listed
apart and do not fail the comparison. Every difference is printed with the cell, its
first line and a few characters either side. Exit status 0 when the outputs are the same,
1 otherwise. ``tests/test_second_machine.py`` compares two executions the same way.
"""
from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from pathlib import Path

_NOISE = [
    (re.compile(r"\b\d+(?:\.\d+)?(?:\s| )?(?:seconds?|s|ms|minutes?)\b"), "<time>"),
    (re.compile(r"(?:/[\w.@+-]+){2,}/?"), "<path>"),
    (re.compile(r"\bitables_[0-9a-f]{8}(?:_[0-9a-f]{4}){3}_[0-9a-f]{12}"), "<table-id>"),
    (re.compile(r"<(?:helpers|runtime)\.[\w.]+ object(?: at 0x[0-9a-f]+)?>"), "<object>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<uuid>"),
    (re.compile(r'"model_id": "[0-9a-f]{32}"'), '"model_id": "<widget>"'),
    # matplotlib's SVG: the time it was drawn, and random ids of clip paths and glyphs
    (re.compile(r"<dc:date>[^<]*</dc:date>"), "<dc:date/>"),
    (re.compile(r"(?<=[#\"])(?:[pm]|image)[0-9a-f]{10}\b"), "<svg-id>"),
    # where a model came from: its GGUF file, or the cache that file made the first time
    (re.compile(r"^(\[stdout\] )?Loading [^\n]*", re.M), r"\1Loading <model>"),
]
#: What marks an output as machine-dependent by design: this machine's live replies.
MACHINE_DEPENDENT = "**Live check:**"


def normalised(text: str) -> str:
    for pattern, replacement in _NOISE:
        text = pattern.sub(replacement, text)
    return text


def outputs_text(cell: dict) -> str:
    parts = []
    for output in cell.get("outputs", []):
        kind = output.get("output_type")
        if kind == "stream":
            parts.append(f"[{output.get('name')}] " + "".join(output.get("text", "")))
        elif kind == "error":
            parts.append(f"[error] {output.get('ename')}: {output.get('evalue')}")
        else:
            for mime, value in sorted(output.get("data", {}).items()):
                value = "".join(value) if isinstance(value, list) else value
                if not isinstance(value, str):
                    value = json.dumps(value, sort_keys=True)
                parts.append(f"[{mime}] {value}")
    return normalised("\n".join(parts))


def compare_cells(old_nb: dict, new_nb: dict, ignore_source: bool = True
                  ) -> tuple[list[str], list[str]]:
    """The differences between two executions of one notebook (as dicts): those that
    matter, and those of machine-dependent outputs (live checks), each described."""
    old = {c.get("id"): c for c in old_nb["cells"]}
    new = {c.get("id"): c for c in new_nb["cells"]}
    problems, machine = [], []
    for cell_id, cell in old.items():
        if cell.get("cell_type") != "code":
            continue
        head = "".join(cell.get("source", "")).split("\n", 1)[0][:70]
        if cell_id not in new:
            if cell.get("outputs"):
                problems.append(f"cell {cell_id} ({head!r}) with outputs is gone")
            continue
        a, b = outputs_text(cell), outputs_text(new[cell_id])
        if a != b:
            diff = difflib.unified_diff(a.splitlines(), b.splitlines(), "before", "after",
                                        lineterm="", n=1)
            shown = "\n".join(line[:200] for line in list(diff)[2:14])
            found = f"cell {cell_id} ({head!r}): outputs differ\n{shown}"
            (machine if MACHINE_DEPENDENT in a + b else problems).append(found)
        elif not ignore_source and cell.get("source") != new[cell_id].get("source"):
            pass  # a changed cell with the same outputs is what a refactoring should give
    for cell_id, cell in new.items():
        if cell_id not in old and cell.get("cell_type") == "code" and cell.get("outputs"):
            head = "".join(cell.get("source", "")).split("\n", 1)[0][:70]
            problems.append(f"cell {cell_id} ({head!r}) is new, with outputs")
    return problems, machine


def compare(before: Path, after: Path, ignore_source: bool) -> tuple[list[str], list[str]]:
    return compare_cells(json.loads(before.read_text()), json.loads(after.read_text()),
                         ignore_source)


def lesson_of(path: Path) -> str:
    """The lesson a notebook executes: its own name, or the cache folder's
    (``lessons--01-….`` above ``<key>/executed.ipynb``)."""
    if path.name != "executed.ipynb":
        return path.stem
    return path.parent.parent.name.rpartition("--")[2]


def notebooks(folder: Path) -> dict[str, Path]:
    return {lesson_of(p): p for p in sorted(folder.rglob("*.ipynb"))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="See the module docstring for what counts as a difference.")
    parser.add_argument("before", type=Path, help="an executed notebook, or a folder of them")
    parser.add_argument("after", type=Path, help="the same, after the change")
    parser.add_argument("--ignore-cell-source", action="store_true",
                        help="compare outputs even where a cell's code changed")
    args = parser.parse_args(argv)
    before, after = args.before, args.after
    if after.is_dir():
        old, new = notebooks(before), notebooks(after)
        pairs = [(old.get(name, before / f"{name}.ipynb"), path) for name, path in new.items()]
    else:
        pairs = [(before, after)]
    failed = False
    for old_path, new_path in pairs:
        name = lesson_of(new_path)
        if not old_path.exists():
            print(f"{name}: no execution to compare with in {before}")
            failed = True
            continue
        problems, machine = compare(old_path, new_path, args.ignore_cell_source)
        print(f"{name}: {'same outputs' if not problems else f'{len(problems)} difference(s)'}"
              + (f" ({len(machine)} live check(s) differ, machine-dependent)" if machine else ""))
        for problem in problems + machine:
            print("  " + problem.replace("\n", "\n    "))
        failed |= bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
