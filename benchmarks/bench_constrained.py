"""Seconds per question for SmolLM2 without and with the reply grammar (lesson 3).

Usage: python benchmarks/bench_constrained.py [--questions FILE] [--repeats N]

Loads SmolLM2-135M-Instruct live once, warms both paths up on the first question, then
times each question, alone, unconstrained and constrained in alternation (so a busy
machine slows both alike), through ``runtime.readers.generate_all`` as lesson 3 asks it,
and prints the median over the repeats, seconds per output token, and how much of the
constrained time the grammar itself takes (compiling the grammar and computing token
masks with :class:`helpers.grammar.GrammarMask`, measured without the model). Not a test:
the figures depend on the machine.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("RIVERTON_PROGRESS", "0")  # the figures, not a bar per question
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from helpers.grammar import GrammarMask, build_grammar  # noqa: E402
from runtime.fixture import QUESTIONS_FILE  # noqa: E402
from runtime.lessons import lesson_reader_inputs  # noqa: E402
from runtime.readers import generate_all, load_reader  # noqa: E402


def _grammar_only_seconds(tokenizer, retrieved_ids, token_ids) -> float:
    """Time to compile the grammar and compute one mask per generated token."""
    started = time.perf_counter()
    mask = GrammarMask(tokenizer, build_grammar(retrieved_ids))
    width = len(tokenizer)
    for position in range(len(token_ids)):
        mask.allowed_after(list(token_ids[:position]), width)
    return time.perf_counter() - started


def _one(reader, rows, constrained):
    """The reply to the one prompt of ``rows``."""
    return generate_all(reader, rows, constrained=constrained).attrs["generations"][0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", default=QUESTIONS_FILE,
                        help=f"question file in data/riverton (default {QUESTIONS_FILE})")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    started = time.perf_counter()
    live = load_reader("smollm2_135m_instruct", mode="live")
    load_seconds = time.perf_counter() - started
    inputs = lesson_reader_inputs(args.questions)
    rows = [inputs.iloc[[n]] for n in range(len(inputs))]

    _one(live, rows[0], False)
    _one(live, rows[0], True)

    free_times, forced_times, grammar_times = [], [], []
    free_tokens = forced_tokens = 0
    for row in rows:
        free_runs, forced_runs = [], []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            free = _one(live, row, False)
            free_runs.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            forced = _one(live, row, True)
            forced_runs.append(time.perf_counter() - t0)
        free_times.append(statistics.median(free_runs))
        forced_times.append(statistics.median(forced_runs))
        free_tokens += free.output_tokens
        forced_tokens += forced.output_tokens
        grammar_times.append(
            _grammar_only_seconds(live.tokenizer, row["retrieved_ids"].iloc[0],
                                  forced.token_ids))

    n = len(rows)
    free_per_q = sum(free_times) / n
    forced_per_q = sum(forced_times) / n
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    threads = live.spec.cpu_threads or torch.get_num_threads()
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, {threads} torch "
          f"thread(s) while generating, load average {load:.2f} at the end")
    print(f"model: {live.model_id} ({live.revision}); loaded in {load_seconds:.1f} s")
    print(f"questions: {n} from {args.questions}; median of {args.repeats} runs each")
    print(f"unconstrained: {free_per_q:.3f} s per question, "
          f"{sum(free_times) / max(free_tokens, 1):.4f} s per output token "
          f"({free_tokens} tokens)")
    print(f"constrained:   {forced_per_q:.3f} s per question, "
          f"{sum(forced_times) / max(forced_tokens, 1):.4f} s per output token "
          f"({forced_tokens} tokens)")
    print(f"constrained / unconstrained per question: {forced_per_q / free_per_q:.2f}x")
    print(f"grammar alone (compile + masks, no model): {sum(grammar_times) / n:.3f} s "
          f"per question, {sum(grammar_times) / max(forced_tokens, 1) * 1000:.2f} ms per token")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
