"""Time the book's build after each kind of edit, and SmolLM2's load cold and warm.

Works on a fresh `git clone` of the committed HEAD in a temporary folder, so the checkout
is never touched, and prints, for each build, its wall time and the lessons it executed:

- a cold build (nothing cached), then a no-op rebuild;
- a rebuild after a prose edit in lesson 1, after a code edit in lesson 3, and after an
  edit to a helper module (which every lesson imports);
- SmolLM2-135M-Instruct loaded in a fresh process with an empty model cache (the GGUF
  file is dequantised) and three times with the cache filled. The load is timed after
  transformers' model code is imported (a lesson's first load pays that import too, about
  as long again; it is printed beside).

The goals: a no-op rebuild under 5 s, a lesson-1 prose edit under 10 s, a warm SmolLM2
load under 2 s, and a helper edit that executes every lesson. The default engine is
nbclient + nbconvert; `--engine quarto` times `quarto render` instead (Quarto from
`$QUARTO` or PATH). Run with `.venv/bin/python benchmarks/bench_build.py`; not a test.
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
from helpers.reader import get_reader_spec
from helpers.reader.generation import load_model_and_tokenizer
imported = time.perf_counter()
# transformers imports a model's code lazily, on its first load: time that apart.
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM, PreTrainedTokenizerFast
model_code = time.perf_counter()
load_model_and_tokenizer(get_reader_spec("smollm2_135m_instruct"))
done = time.perf_counter()
print(json.dumps({"import_s": imported - started, "model_code_s": model_code - imported,
                  "load_s": done - model_code}))
"""

def run(command, cwd, env, timeout=7200):
    started = time.perf_counter()
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    return result, time.perf_counter() - started


def clone_head(target: Path) -> str:
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PROJECT, capture_output=True, text=True,
                          check=True).stdout.strip()
    subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(PROJECT), str(target)], check=True)
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
    result, seconds = run([sys.executable, "-m", "helpers.book", "--engine", engine], clone, env)
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
    print("SmolLM2 load (model code imported beforehand; in brackets: + importing transformers' model code,")
    print("which a lesson's first load also pays, and the whole process)")
    rows = [("cold (empty cache: dequantise, save)", cold)]
    rows += [(f"warm (dequantised cache), run {n}", figures) for n, figures in enumerate(warm, 1)]
    for label, figures in rows:
        print(f"  {label:<40} {figures['load_s']:6.1f} s  "
              f"({figures['model_code_s'] + figures['load_s']:.1f} s; process {figures['process_s']:.1f} s)")
    for line in cold["said"][:1] + warm[0]["said"][:1]:
        print(f"  said: {line}")
    print()


def short(lessons: list[str]) -> str:
    return ", ".join(Path(lesson).name[:2] for lesson in lessons) or "none"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=["nbclient", "quarto"], default="nbclient")
    parser.add_argument("--keep", action="store_true", help="keep the temporary clone and print its path")
    parser.add_argument("--load-only", action="store_true", help="time only the SmolLM2 loads")
    args = parser.parse_args(argv)

    workspace = Path(tempfile.mkdtemp(prefix="bench-build-"))
    clone = workspace / "book"
    head = clone_head(clone)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(clone)  # the clone's helpers, not the checkout's
    env["RIVERTON_MODEL_CACHE"] = str(workspace / "model-cache")  # a cold SmolLM2 cache
    env.pop("QUARTO_USE_FILE_FOR_PROJECT_OUTPUT_FILES", None)
    if args.engine == "quarto" and not (env.get("QUARTO") or shutil.which("quarto")):
        raise SystemExit("--engine quarto: set $QUARTO or put quarto on PATH")
    lessons = lessons_of(clone)
    print(f"clone of {head[:12]} in {clone}; engine {args.engine}; {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f}", flush=True)

    cold_load = smollm2_load(clone, env)
    warm_loads = sorted((smollm2_load(clone, env) for _ in range(3)), key=lambda f: f["load_s"])
    warm_load = warm_loads[1]  # the median of three
    if args.load_only:
        print_loads(cold_load, warm_loads)
        shutil.rmtree(workspace, ignore_errors=True)
        return 0

    rows = []

    def step(name, edit=None):
        if edit is not None:
            edit()
        seconds, executed, _ = build(clone, env, args.engine, lessons)
        rows.append((name, seconds, executed))
        print(f"{name:<34} {seconds:8.1f} s   executed: {short(executed)}", flush=True)
        return seconds, executed

    print(f"{'build':<34} {'wall':>10}   lessons", flush=True)
    step("cold build")
    noop, _ = step("no-op rebuild")
    prose, prose_ran = step("prose edit in lesson 1", lambda: edit_notebook(
        clone / lessons[0], "markdown", "\n\nOne more sentence of prose."))
    step("code edit in lesson 3", lambda: edit_notebook(
        clone / lessons[2], "code", "\n# a comment added by the benchmark"))
    helper = clone / "helpers" / "text.py"
    _, helper_ran = step("helper edit (helpers/text.py)", lambda: helper.write_text(
        helper.read_text() + "\n# a comment added by the benchmark\n"))

    print_loads(cold_load, warm_loads)
    goals = [
        ("no-op rebuild under 5 s", noop < 5, f"{noop:.1f} s"),
        ("prose edit in lesson 1 under 10 s", prose < 10, f"{prose:.1f} s"),
        ("warm SmolLM2 load under 2 s", warm_load["load_s"] < 2,
         f"{warm_load['load_s']:.1f} s, median of three"),
        ("helper edit executes every lesson", sorted(helper_ran) == sorted(lessons), short(helper_ran)),
    ]
    for goal, met, figure in goals:
        print(f"goal: {goal:<36} {'met' if met else 'NOT MET'} ({figure})")
    print(f"note: the cold build took {rows[0][1]:.0f} s and the no-op rebuild {noop:.1f} s; a lesson-1 prose "
          f"edit took {prose:.1f} s (executed: {short(prose_ran)}); SmolLM2 loaded in "
          f"{cold_load['load_s']:.1f} s cold and {warm_load['load_s']:.1f} s warm. Timings on a "
          "shared machine vary from run to run.")
    if args.keep:
        print(f"kept: {workspace}")
    else:
        shutil.rmtree(workspace, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
