"""Time lesson 5's cold execution, and count its live generations, for one or more revisions.

For each revision named on the command line (``WORKTREE`` for the files as they are now,
or any git revision, such as ``main`` or ``HEAD~3``), the script makes a fresh copy of the
project in a temporary folder (a revision through ``git archive``), executes lesson 5
alone with the build without Quarto (``python -m bookkit --engine nbclient --only 05
--fresh``, with ``RIVERTON_READER_MODE=recorded`` so that the pinned Qwen reader is never
looked for elsewhere) and prints, per revision:

- the build's seconds for the lesson (the ``[build]`` line);
- what the executed page says of itself: its seconds, the number of SmolLM2 generations
  it ran live and their seconds;
- the load average before and after, since the machine is shared.

Run with ``.venv/bin/python benchmarks/bench_lesson5.py main WORKTREE``; not a test.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = "lessons/05-evidence-not-instructions.html"
SENTENCE = re.compile(r"This page ran in ([\d.]+) seconds, with SmolLM2 in \w+ mode: "
                      r"(\d+) generations took ([\d.]+) seconds")


def project_copy(revision: str, folder: Path) -> Path:
    """A fresh copy of the project at ``revision`` (``WORKTREE``: as it is now)."""
    target = folder / "book"
    if revision == "WORKTREE":
        sys.path.insert(0, str(ROOT / "tests"))
        from projects import copy_project

        return copy_project(target)
    archive = folder / "book.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", "-o", str(archive),
                    revision], check=True)
    target.mkdir()
    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="data")
    return target


def run(revision: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-lesson5-") as folder:
        project = project_copy(revision, Path(folder))
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("RIVERTON_READER_URL", "QUARTO"))}
        env.update(PYTHONPATH=str(project), RIVERTON_READER_MODE="recorded")
        load_before = os.getloadavg()
        result = subprocess.run([sys.executable, "-m", "bookkit", "--engine", "nbclient",
                                 "--only", "05", "--fresh"], cwd=project, env=env,
                                capture_output=True, text=True, timeout=3600)
        load_after = os.getloadavg()
        if result.returncode != 0:
            raise SystemExit(f"{revision}: the build failed:\n{result.stdout[-3000:]}"
                             f"{result.stderr[-3000:]}")
        build = re.search(r"\[build\]\s+lessons/05-\S+\.html\s+([\d.]+) s\s+executed",
                          result.stdout)
        page = (project / "_book" / PAGE).read_text(encoding="utf-8")
        said = SENTENCE.search(re.sub(r"<[^>]+>", "", page))
        return {"revision": revision, "build_s": float(build.group(1)) if build else None,
                "page_s": float(said.group(1)) if said else None,
                "generations": int(said.group(2)) if said else None,
                "generation_s": float(said.group(3)) if said else None,
                "load_before": load_before, "load_after": load_after}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("revisions", nargs="*", default=["WORKTREE"],
                        help="git revisions, or WORKTREE for the files as they are now")
    args = parser.parse_args(argv)
    print(f"{os.cpu_count()} CPUs")
    for revision in args.revisions:
        found = run(revision)
        per = (found["generation_s"] / found["generations"]
               if found["generations"] else float("nan"))
        print(f"{revision}: lesson 5 executed cold in {found['build_s']} s (the build's "
              f"figure); the page ran {found['generations']} generations in "
              f"{found['generation_s']} s ({per:.2f} s each) of its own {found['page_s']} s; "
              "load average before "
              + "/".join(f"{x:.2f}" for x in found["load_before"]) + ", after "
              + "/".join(f"{x:.2f}" for x in found["load_after"]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
