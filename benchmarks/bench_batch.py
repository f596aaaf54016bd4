"""Time batched decoding on the lessons' own prompts, and check it changes no reply.

Prints, side by side in one run:

- seconds per reply of SmolLM2-135M-Instruct in-process at batch sizes 1, 2, 4, 8 and 16,
  all through the one greedy decoder (``runtime.batch.greedy_batch``, by way of
  ``runtime.readers.generate_all`` with ``RIVERTON_BATCH_SIZE`` set; batch 1 decodes one
  prompt at a time), unconstrained and under lesson 3's reply grammar, each with its ratio
  to batch 1 and the number of replies that are token for token the ones batch 1 gave;
- at the default batch size, the same with the shared beginning of the prompts read once
  per batch and read by every row (the prefix reuse of runtime/batch.py);
- llama.cpp's server on the same unconstrained prompts, one request and four in flight
  (from ``.venv-server/``; skipped when it is not installed);
- each lesson's cold execution time with ``RIVERTON_BATCH_SIZE=1`` and with the default
  batch size, from the book build without Quarto on fresh copies of the project
  (``--no-lessons`` skips this part, which takes several minutes).

The prompts: lesson 1's six (lessons 3 and 4 read them too), lesson 2's six hybrid
prompts and thirty-six of lesson 5's attack prompts (each attack without the attack and
under its first wording, under lesson 1's prompt, the quoting prompt and the datamarking
prompt; ``benchmarks/bench_lesson5.py`` times the lesson itself). Run with
``.venv/bin/python benchmarks/bench_batch.py``; not a test.
"""
from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("RIVERTON_PROGRESS", "0")  # the figures, not a bar per batch
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402

from helpers import attacks  # noqa: E402
from runtime import batch, config  # noqa: E402
from runtime.attack_runs import attack_prompts  # noqa: E402
from runtime.fixture import load_attack_fixture, load_riverton  # noqa: E402
from runtime.lessons import lesson_reader_inputs  # noqa: E402
from runtime.readers import generate_all, load_reader  # noqa: E402
from runtime.llama_server import (  # noqa: E402
    llama_server_installed,
    local_llama_server,
    server_python,
    smollm2_gguf,
)

SMOL = "smollm2_135m_instruct"


def lesson_prompts() -> pd.DataFrame:
    """question_id, messages and retrieved_ids of the lessons' live prompts."""
    parts = [lesson_reader_inputs().assign(lesson="1, 3, 4"),
             lesson_reader_inputs(retriever="hybrid").assign(lesson="2")]
    riverton = load_riverton()
    fixture = load_attack_fixture(handbook=riverton.handbook, metadata=riverton.metadata)
    runs = attacks.attack_reader_inputs(fixture.questions, riverton.handbook, fixture.passages,
                                        fixture.wordings, metadata=riverton.metadata)
    first = runs[(runs["wording"] <= 1) & (runs["position"] != "last")]  # without it; wording 1
    parts.append(attack_prompts(first).assign(lesson="5"))
    return pd.concat([p[["question_id", "messages", "retrieved_ids", "lesson"]] for p in parts],
                     ignore_index=True)


def timed(run):
    """``run()``'s result, its wall time and the CPU time this process spent on it. On a
    shared machine the CPU time is the steadier figure: other processes lengthen the wall
    time of a one-thread run, not the CPU time it needs."""
    started, cpu = time.perf_counter(), time.process_time()
    result = run()
    return result, time.perf_counter() - started, time.process_time() - cpu


def decode_all(reader, prompts, size, constrained):
    """Every prompt's reply through greedy_batch, ``size`` prompts at a time."""
    os.environ[config.BATCH_SIZE] = str(size)
    try:
        return generate_all(reader, prompts, constrained=constrained).attrs["generations"]
    finally:
        del os.environ[config.BATCH_SIZE]


def same(first, second) -> int:
    return sum(a.token_ids == b.token_ids for a, b in zip(first, second))


def lesson_times(batch_size: str | None) -> dict[str, float]:
    """Each lesson's execution time in a cold build without Quarto of a fresh copy."""
    sys.path.insert(0, str(ROOT / "tests"))
    from projects import clean_environment, copy_project

    with tempfile.TemporaryDirectory(prefix="bench-batch-") as folder:
        project = copy_project(Path(folder) / "book")
        env = clean_environment(PYTHONPATH=str(project), RIVERTON_READER_MODE="recorded")
        if batch_size is not None:
            env[config.BATCH_SIZE] = batch_size
        result = subprocess.run([sys.executable, "-m", "bookkit", "--engine", "nbclient",
                                 "--fresh"], cwd=project, env=env, capture_output=True,
                                text=True, timeout=3600)
        if result.returncode != 0:
            raise SystemExit(f"the build failed:\n{result.stdout[-3000:]}{result.stderr[-3000:]}")
        found = re.findall(r"\[build\]\s+(lessons/\S+)\.html\s+([\d.]+) s\s+executed",
                           result.stdout)
        return {Path(page).name: float(seconds) for page, seconds in found}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1,2,4,8,16", help="batch sizes to time")
    parser.add_argument("--prompts", type=int, default=None, help="time the first N prompts only")
    parser.add_argument("--no-server", action="store_true", help="do not time llama.cpp's server")
    parser.add_argument("--no-lessons", action="store_true",
                        help="do not time the lessons' cold executions")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]

    import torch

    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
          f"load average {os.getloadavg()[0]:.2f}")
    prompts = lesson_prompts()
    if args.prompts:
        prompts = prompts.iloc[:args.prompts]
    n = len(prompts)
    reader = load_reader(SMOL, mode="live")
    print(f"{n} prompts (lessons {', '.join(dict.fromkeys(prompts['lesson']))}), "
          f"{reader.spec.cpu_threads or torch.get_num_threads()} thread(s), default batch "
          f"size {batch.DEFAULT_BATCH_SIZE}")

    rows = []
    baseline = {}
    for constrained in (False, True):
        for size in sizes:
            replies, seconds, cpu = timed(lambda: decode_all(reader, prompts, size, constrained))
            baseline.setdefault(constrained, (replies, seconds, cpu))
            base_replies, base_seconds, base_cpu = baseline[constrained]
            rows.append({"decoding": "constrained" if constrained else "unconstrained",
                         "batch": size, "prefix read": "once per batch" if size > 1 else "-",
                         "s per reply": seconds / n, "CPU s per reply": cpu / n,
                         "ratio to batch 1 (CPU)": cpu / base_cpu,
                         "same tokens as batch 1": f"{same(base_replies, replies)} of {n}"})
            print(f"  {rows[-1]['decoding']}, batch {size}: {seconds / n:.2f} s per reply, "
                  f"{cpu / n:.2f} CPU s, load average {os.getloadavg()[0]:.2f}", flush=True)
        # The default batch size without the prefix read once per batch.
        saved = batch.MIN_SHARED_PREFIX
        batch.MIN_SHARED_PREFIX = 10**9
        try:
            size = batch.DEFAULT_BATCH_SIZE
            replies, seconds, cpu = timed(lambda: decode_all(reader, prompts, size, constrained))
        finally:
            batch.MIN_SHARED_PREFIX = saved
        base_replies, base_seconds, base_cpu = baseline[constrained]
        rows.append({"decoding": "constrained" if constrained else "unconstrained",
                     "batch": size, "prefix read": "by every row",
                     "s per reply": seconds / n, "CPU s per reply": cpu / n,
                     "ratio to batch 1 (CPU)": cpu / base_cpu,
                     "same tokens as batch 1": f"{same(base_replies, replies)} of {n}"})

    if not args.no_server:
        if not llama_server_installed():
            print(f"llama.cpp's server: not installed for {server_python()}; not timed")
        else:
            with local_llama_server(smollm2_gguf(), threads=reader.spec.cpu_threads or 1) as url:
                for concurrency in (1, 4):
                    served = load_reader(SMOL, mode="server", url=url, concurrency=concurrency)
                    _, seconds, _ = timed(lambda: generate_all(served, prompts))
                    # The server's work is in another process: wall time only.
                    rows.append({"decoding": "unconstrained", "batch": f"server, {concurrency} "
                                 "in flight", "prefix read": "server's own cache",
                                 "s per reply": seconds / n, "CPU s per reply": float("nan"),
                                 "ratio to batch 1 (CPU)": float("nan"),
                                 "same tokens as batch 1": "(other weights)"})

    table = pd.DataFrame(rows)
    with pd.option_context("display.width", 200, "display.float_format", "{:.2f}".format):
        print(table.to_string(index=False))

    if not args.no_lessons:
        print("lessons' cold execution (build without Quarto, fresh copies, recorded Qwen):")
        before = lesson_times("1")
        after = lesson_times(None)
        lessons = pd.DataFrame({"batch 1 (s)": before,
                                f"batch {batch.DEFAULT_BATCH_SIZE} (s)": after})
        lessons.loc["all lessons"] = lessons.sum()
        with pd.option_context("display.float_format", "{:.1f}".format):
            print(lessons.to_string())
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
