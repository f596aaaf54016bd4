"""Time the live reader: SmolLM2-135M-Instruct from its wheel's GGUF file, on this CPU.

Prints the load time, seconds per question, generated tokens per second and peak memory
for the six lesson prompts, first with the reader's registered thread count, then with
torch's default. Run with ``.venv/bin/python benchmarks/bench_reader.py``; not a test.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import resource
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from helpers.reader import get_reader_spec, load_reader  # noqa: E402
from helpers.reader.generation import LiveReader  # noqa: E402
from helpers.reader.lesson import lesson_reader_inputs  # noqa: E402


def peak_rss_mib() -> float:
    # ru_maxrss is in KiB on Linux, bytes on macOS.
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def run_questions(reader, inputs) -> tuple[float, int, int]:
    started = time.perf_counter()
    tokens = 0
    for qid, messages in zip(inputs["question_id"], inputs["messages"]):
        tokens += reader.generate(messages, qid).output_tokens
    return time.perf_counter() - started, tokens, len(inputs)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reader", default="smollm2_135m_instruct")
    parser.add_argument("--repeats", type=int, default=1,
                        help="passes over the six prompts per thread setting")
    args = parser.parse_args(argv)

    import torch

    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
          f"torch threads by default {torch.get_num_threads()}, "
          f"load average {os.getloadavg()[0]:.2f}")
    inputs = lesson_reader_inputs()
    rss_before = peak_rss_mib()
    started = time.perf_counter()
    reader = load_reader(args.reader, mode="live")
    load_seconds = time.perf_counter() - started
    print(f"reader: {reader.spec.model_id} ({reader.revision})")
    print(f"load time: {load_seconds:.1f} s (peak RSS {rss_before:.0f} MiB before, "
          f"{peak_rss_mib():.0f} MiB after)")

    registered = reader.spec.cpu_threads
    settings = [registered, None] if registered is not None else [None]
    for threads in settings:
        spec = dataclasses.replace(reader.spec, cpu_threads=threads)
        timed = LiveReader(spec)  # the model is cached; this only changes the thread count
        label = f"{threads} thread(s)" if threads else (
            f"torch default ({torch.get_num_threads()} threads)")
        for repeat in range(args.repeats):
            seconds, tokens, questions = run_questions(timed, inputs)
            print(f"{label}, pass {repeat + 1}: {seconds / questions:.2f} s per question, "
                  f"{tokens / seconds:.1f} generated tokens per second "
                  f"({tokens} tokens over {questions} questions in {seconds:.1f} s)")
    print(f"peak memory (max RSS of this process): {peak_rss_mib():.0f} MiB")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
