"""Time the book's build after each kind of edit, and SmolLM2's load cold and warm.

Works on fresh `git clone`s of the committed HEAD in a temporary folder, so the checkout
is never touched, and prints, for each build, its wall time and the lessons it executed.

With nbclient + nbconvert (the build without Quarto):

- a cold build (nothing cached: no `.book-cache/`, and an empty SmolLM2 model cache of
  its own, `RIVERTON_MODEL_CACHE` in a temporary folder), then a no-op rebuild;
- a rebuild after a prose edit in lesson 1, after a code edit in lesson 3, and after an
  edit to a helper module (which every lesson imports).

With Quarto, when one is found (`$QUARTO`, `quarto` on PATH, or quarto-cli in this
environment), in a clone of its own: a cold `quarto render`, a no-op render, a render
after a prose edit in lesson 1 and one after a data edit.

SmolLM2-135M-Instruct is loaded in a fresh process with an empty model cache (the GGUF
file is dequantised), then three times with the cache filled. A lesson's first load pays
for importing transformers' model code and for the load itself; the "< 2 s" goal is
judged on that total, and both parts are printed.

The goals: a no-op rebuild under 5 s, a lesson-1 prose edit under 10 s, a warm SmolLM2
load (model code + load) under 2 s, and a helper edit that executes every lesson. The
closing summary prints every figure, engine by engine, and each goal met or missed. Run
with `.venv/bin/python benchmarks/bench_build.py` (`--engines nbclient` skips Quarto);
not a test.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent

LOAD_SCRIPT = """
import json, os, sys, time
os.environ.setdefault("HF_HUB_OFFLINE", "1")
started = time.perf_counter()
import torch, transformers
from runtime.readers import load_model_and_tokenizer
from runtime.registry import get_reader_spec
imported = time.perf_counter()
# transformers imports a model's code lazily, on its first load: time that apart.
from transformers import (AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM,
                          PreTrainedTokenizerFast)
model_code = time.perf_counter()
load_model_and_tokenizer(get_reader_spec("smollm2_135m_instruct"))
done = time.perf_counter()
print(json.dumps({"import_s": imported - started, "model_code_s": model_code - imported,
                  "load_s": done - model_code}))
"""

def run(command, cwd, env, timeout=7200):
    started = time.perf_counter()
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                            timeout=timeout)
    return result, time.perf_counter() - started


def clone_head(target: Path) -> str:
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PROJECT, capture_output=True, text=True,
                          check=True).stdout.strip()
    subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(PROJECT), str(target)],
                   check=True)
    subprocess.run(["git", "checkout", "--quiet", head], cwd=target, check=True)
    return head


def lessons_of(clone: Path) -> list[str]:
    import yaml

    chapters = yaml.safe_load((clone / "_quarto.yml").read_text())["book"]["chapters"]
    return [c for c in chapters if c.endswith(".ipynb")]


def freeze_stamps(clone: Path, lessons: list[str]) -> dict[str, float]:
    stamps = {}
    for lesson in lessons:
        result = clone / "_freeze" / Path(lesson).with_suffix("") / "execute-results" / "html.json"
        stamps[lesson] = result.stat().st_mtime if result.exists() else 0.0
    return stamps


def build(clone: Path, env: dict, engine: str, lessons: list[str]) -> tuple[float, list[str], str]:
    """One build: its wall time, the lessons it executed, and its output (for errors)."""
    before = freeze_stamps(clone, lessons)
    result, seconds = run([sys.executable, "-m", "bookkit", "--engine", engine], clone, env)
    report = result.stdout + result.stderr
    if result.returncode != 0:
        raise SystemExit(f"the build failed (exit {result.returncode}):\n{report[-4000:]}")
    if engine == "quarto":
        after = freeze_stamps(clone, lessons)
        executed = [lesson for lesson in lessons if after[lesson] != before[lesson]]
    else:
        executed = re.findall(r"^\[build\] (\S+\.ipynb): executing \(", result.stdout, re.M)
    return seconds, executed, report


def edit_notebook(path: Path, kind: str, text: str) -> None:
    """Append ``text`` to the first cell of ``kind`` (markdown or code) of a notebook."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == kind and c.source.strip())
    cell.source = cell.source.rstrip("\n") + text
    nbformat.write(nb, path)


def smollm2_load(clone: Path, env: dict) -> dict:
    result, seconds = run([sys.executable, "-c", LOAD_SCRIPT], clone, env, timeout=1800)
    if result.returncode != 0:
        raise SystemExit(f"loading SmolLM2 failed:\n{result.stderr[-3000:]}")
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    figures["process_s"] = seconds
    figures["said"] = [line for line in result.stdout.splitlines() if line.startswith("Loading ")]
    return figures


def print_loads(cold: dict, warm: list[dict]) -> None:
    print()
    print("SmolLM2 load, as a lesson's first load pays it: importing transformers' model code + "
          "the load")
    rows = [("cold (empty cache: dequantise, save)", cold)]
    rows += [(f"warm (dequantised cache), run {n}", figures) for n, figures in enumerate(warm, 1)]
    for label, figures in rows:
        print(f"  {label:<40} {lesson_load(figures):6.1f} s  (model code "
              f"{figures['model_code_s']:.1f} s "
              f"+ load {figures['load_s']:.1f} s; torch/transformers import before it "
              f"{figures['import_s']:.1f} s; whole process {figures['process_s']:.1f} s)")
    for line in cold["said"][:1] + warm[0]["said"][:1]:
        print(f"  said: {line}")
    print()


def lesson_load(figures: dict) -> float:
    """What a lesson's first SmolLM2 load costs: importing the model code, then loading."""
    return figures["model_code_s"] + figures["load_s"]


def short(lessons: list[str]) -> str:
    return ", ".join(Path(lesson).name[:2] for lesson in lessons) or "none"


def find_quarto_for_bench() -> str | None:
    """The Quarto that `python -m bookkit` would use, or None."""
    sys.path.insert(0, str(PROJECT))
    from bookkit.quarto import QuartoNotFound, find_quarto

    try:
        found = find_quarto()
    except QuartoNotFound as error:
        raise SystemExit(str(error)) from None
    return found.path if found else None


def time_engine(engine: str, workspace: Path, base_env: dict, steps: list) -> list[tuple]:
    """Run ``steps`` (name, edit or None) on a fresh clone with ``engine``; return the rows."""
    clone = workspace / f"book-{engine}"
    clone_head(clone)
    env = dict(base_env)
    env["PYTHONPATH"] = str(clone)  # the clone's helpers, not the checkout's
    # An empty model cache of this engine's own: the cold build dequantises SmolLM2 itself.
    env["RIVERTON_MODEL_CACHE"] = str(workspace / f"model-cache-{engine}")
    lessons = lessons_of(clone)
    label = {"nbclient": "nbclient + nbconvert", "quarto": "Quarto"}[engine]
    print(f"\n[{label}] clone in {clone}", flush=True)
    print(f"{'build':<40} {'wall':>10}   lessons executed", flush=True)
    rows = []
    for name, edit in steps:
        if edit is not None:
            edit(clone, lessons)
        seconds, executed, _ = build(clone, env, engine, lessons)
        rows.append((name, seconds, executed, lessons))
        print(f"{name:<40} {seconds:8.1f} s   {short(executed)}", flush=True)
    return rows


def prose_edit(clone, lessons):
    edit_notebook(clone / lessons[0], "markdown", "\n\nOne more sentence of prose.")


def code_edit(clone, lessons):
    edit_notebook(clone / lessons[2], "code", "\n# a comment added by the benchmark")


def helper_edit(clone, lessons):
    helper = clone / "helpers" / "text.py"
    helper.write_text(helper.read_text() + "\n# a comment added by the benchmark\n")


def data_edit(clone, lessons):
    notes = clone / "data" / "reviews" / "README.md"
    notes.write_text(notes.read_text() + "\nA line added by the benchmark.\n")


NBCLIENT_STEPS = [
    ("cold build", None),
    ("no-op rebuild", None),
    ("prose edit in lesson 1", prose_edit),
    ("code edit in lesson 3", code_edit),
    ("helper edit (helpers/text.py)", helper_edit),
]
QUARTO_STEPS = [
    ("cold render", None),
    ("no-op render", None),
    ("prose edit in lesson 1", prose_edit),
    ("data edit (data/reviews/README.md)", data_edit),
]


def summary(results: dict, cold_load: dict | None, warm_load: dict | None) -> None:
    """Every figure, engine by engine, and each goal met or missed."""
    print("\nsummary")
    goals = []
    for engine, rows in results.items():
        label = {"nbclient": "nbclient + nbconvert", "quarto": "Quarto"}[engine]
        for name, seconds, executed, lessons in rows:
            every = executed and sorted(executed) == sorted(lessons)
            ran = "every lesson" if every else short(executed)
            print(f"  {f'[{label}] {name}':<62} {seconds:8.1f} s   executed: {ran}")
        by_name = {name: (seconds, executed, lessons) for name, seconds, executed, lessons in rows}
        noop = by_name.get("no-op rebuild") or by_name.get("no-op render")
        prose = by_name.get("prose edit in lesson 1")
        helper = by_name.get("helper edit (helpers/text.py)")
        if noop:
            goals.append((f"[{label}] no-op rebuild under 5 s", noop[0] < 5, f"{noop[0]:.1f} s"))
        if prose:
            goals.append((f"[{label}] prose edit in lesson 1 under 10 s", prose[0] < 10,
                          f"{prose[0]:.1f} s; executed: {short(prose[1])}"))
        if helper:
            goals.append((f"[{label}] helper edit executes every lesson",
                          sorted(helper[1]) == sorted(helper[2]), f"executed: {short(helper[1])}"))
    if cold_load is not None:
        print(f"  {'SmolLM2 load, cold (dequantise and save)':<62} {lesson_load(cold_load):8.1f} "
              "s   "
              f"(model code {cold_load['model_code_s']:.1f} s + load {cold_load['load_s']:.1f} s)")
        print(f"  {'SmolLM2 load, warm (median of three)':<62} {lesson_load(warm_load):8.1f} s   "
              f"(model code {warm_load['model_code_s']:.1f} s + load {warm_load['load_s']:.1f} s)")
        goals.append(("warm SmolLM2 load (model code + load) under 2 s", lesson_load(warm_load) < 2,
                      f"{lesson_load(warm_load):.1f} s = {warm_load['model_code_s']:.1f} s "
                      "model code "
                      f"+ {warm_load['load_s']:.1f} s load"))
    for goal, met, figure in goals:
        print(f"goal: {goal:<60} {'met' if met else 'MISSED'} ({figure})")
    print("Timings on a shared machine vary from run to run.")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", choices=["auto", "nbclient", "quarto"], default="auto",
                        help="auto: nbclient, then Quarto when one is found (default); or only "
                             "one engine")
    parser.add_argument("--keep", action="store_true",
                        help="keep the temporary clones and print their path")
    parser.add_argument("--load-only", action="store_true", help="time only the SmolLM2 loads")
    parser.add_argument("--no-load", action="store_true", help="time only the builds")
    args = parser.parse_args(argv)
    if args.load_only and args.no_load:
        parser.error("--load-only and --no-load leave nothing to time")

    quarto = None
    if args.engines != "nbclient" and not args.load_only:
        quarto = find_quarto_for_bench()
        if quarto is None and args.engines == "quarto":
            raise SystemExit("--engines quarto: no Quarto found ($QUARTO, quarto on PATH, or "
                             "quarto-cli here)")
    engines = [] if args.load_only else (
        ["nbclient"] if args.engines == "nbclient" else
        ["quarto"] if args.engines == "quarto" else ["nbclient", *(["quarto"] if quarto else [])])

    workspace = Path(tempfile.mkdtemp(prefix="bench-build-"))
    env = dict(os.environ)
    env.pop("QUARTO_USE_FILE_FOR_PROJECT_OUTPUT_FILES", None)
    # The default setup is timed: with a reader server set, every build executes every lesson.
    dropped = [name for name in sorted(env) if name.startswith(("RIVERTON_READER_",
                                                                "RIVERTON_REVIEWS_"))]
    for name in dropped:
        del env[name]
    if dropped:
        print(f"not passed to the builds: {', '.join(dropped)} (the default reader settings are "
              "timed)")
    if quarto:
        env["QUARTO"] = quarto
    print(f"workspace {workspace}; engines: {', '.join(engines) or 'none (loads only)'}"
          f"{f' (Quarto: {quarto})' if quarto else ''}; {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f}", flush=True)
    if args.engines == "auto" and not quarto and not args.load_only:
        print("no Quarto found ($QUARTO, quarto on PATH, or quarto-cli here): timing nbclient "
              "only", flush=True)

    cold_load = warm_load = None
    if not args.no_load:
        loads = workspace / "book-loads"
        clone_head(loads)
        load_env = dict(env, PYTHONPATH=str(loads),
                        RIVERTON_MODEL_CACHE=str(workspace / "model-cache-loads"))
        cold_load = smollm2_load(loads, load_env)
        warm_loads = sorted((smollm2_load(loads, load_env) for _ in range(3)), key=lesson_load)
        warm_load = warm_loads[1]  # the median of three
        print_loads(cold_load, warm_loads)

    results = {}
    for engine in engines:
        results[engine] = time_engine(engine, workspace, env,
                                      NBCLIENT_STEPS if engine == "nbclient" else QUARTO_STEPS)
    summary(results, cold_load, warm_load)
    if args.keep:
        print(f"kept: {workspace}")
    else:
        shutil.rmtree(workspace, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
