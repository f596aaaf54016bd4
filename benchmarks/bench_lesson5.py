"""Time lesson 5's cold execution for one or more revisions, and its generations live.

For each revision named on the command line (``WORKTREE`` for the files as they are now,
or any git revision, such as ``main`` or ``HEAD~3``), the script makes a fresh copy of the
project in a temporary folder (a revision through ``git archive``), executes lesson 5
alone with the build without Quarto (``python -m bookkit --engine nbclient --only 05
--fresh``, with ``RIVERTON_READER_MODE=recorded`` so that the pinned Qwen reader is never
looked for elsewhere) and prints, per revision, the build's seconds for the lesson (the
``[build]`` line; the target is 165 s, the lesson's time before it replayed its replies)
and the load average before and after, since the machine is shared.

The page replays SmolLM2's recorded replies by default. With ``--live``, the script also
runs, with SmolLM2 live and in batches, exactly the generations the page's tables use
(every attacked input and every ordinary question under each prompt) and prints their
count and seconds: what a student who switches the page to ``mode="live"`` waits for.

Run with ``.venv/bin/python benchmarks/bench_lesson5.py main WORKTREE [--live]``; not a test.
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
        assert (project / "_book" / PAGE).is_file(), f"{revision}: no page {PAGE}"
        return {"revision": revision, "build_s": float(build.group(1)) if build else None,
                "load_before": load_before, "load_after": load_after}


def live_generations() -> tuple[int, float]:
    """SmolLM2 live on every prompt lesson 5's tables use, in batches: (replies, seconds)."""
    import time

    import pandas as pd

    sys.path.insert(0, str(ROOT))
    from helpers.attacks import attack_reader_inputs
    from helpers.retrieval import TfidfRetriever
    from runtime import (EXTENDED_QUESTIONS_FILE, generate_all, load_attack_fixture,
                         load_reader, load_riverton, ordinary_inputs, run_attacks)

    fixture = load_riverton()
    attack = load_attack_fixture(handbook=fixture.handbook, metadata=fixture.metadata)
    inputs = attack_reader_inputs(attack.questions, fixture.handbook, attack.passages,
                                  attack.wordings, metadata=fixture.metadata)
    ordinary = pd.concat([fixture.questions,
                          load_riverton(questions=EXTENDED_QUESTIONS_FILE).questions])
    asked = ordinary_inputs(ordinary, TfidfRetriever.fit(fixture.handbook).rank(ordinary, k=3),
                            fixture.handbook)
    reader = load_reader("smollm2_135m_instruct", mode="live")
    started = time.perf_counter()
    runs = run_attacks(reader, inputs)
    replies = generate_all(reader, asked, constrained=True)
    return len(runs) + len(replies), time.perf_counter() - started


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("revisions", nargs="*", default=["WORKTREE"],
                        help="git revisions, or WORKTREE for the files as they are now")
    parser.add_argument("--live", action="store_true",
                        help="also time SmolLM2 live on every generation the tables use")
    args = parser.parse_args(argv)
    print(f"{os.cpu_count()} CPUs")
    for revision in args.revisions:
        found = run(revision)
        print(f"{revision}: lesson 5 executed cold in {found['build_s']} s (the build's "
              "figure; target at most 165 s); load average before "
              + "/".join(f"{x:.2f}" for x in found["load_before"]) + ", after "
              + "/".join(f"{x:.2f}" for x in found["load_after"]), flush=True)
    if args.live:
        count, seconds = live_generations()
        print(f"live: {count} SmolLM2 generations in {seconds:.1f} s "
              f"({seconds / count:.2f} s each)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
