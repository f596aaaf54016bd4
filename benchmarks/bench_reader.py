"""Time the reader: SmolLM2-135M-Instruct in-process (transformers) and on llama.cpp's server.

Prints the load time, seconds per question, generated tokens per second and peak memory
for the six lesson prompts, first in-process with transformers (decoded together, as the
lessons decode them, by ``runtime.batch.greedy_batch``; the reader's registered thread
count, then torch's default), then through llama.cpp's OpenAI-compatible server
(llama-cpp-python, started here on 127.0.0.1 with the same GGUF file and one thread, from
the Python of ``.venv-server/``),
one request at a time and four at a time, all in one run. The closing note gives the
ratio. Run with ``.venv/bin/python benchmarks/bench_reader.py``; not a test.

The server half needs the ``test-server`` extra in ``.venv-server/`` (``make test``
installs it there; ``BOOK_LLAMA_SERVER_PYTHON`` names another Python that has it); without
it the script says so and times transformers only. vLLM is not timed: it needs a GPU.
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
os.environ.setdefault("RIVERTON_PROGRESS", "0")  # the figures, not a bar per pass
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runtime.lessons import lesson_reader_inputs  # noqa: E402
from runtime.llama_server import (  # noqa: E402
    llama_server_installed,
    local_llama_server,
    server_python,
    smollm2_gguf,
)
from runtime.readers import LiveReader, generate_all, load_reader  # noqa: E402
from runtime.registry import get_reader_spec  # noqa: E402


def peak_rss_mib() -> float:
    # ru_maxrss is in KiB on Linux, bytes on macOS.
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def run_questions(reader, inputs) -> tuple[float, int, int, list[str]]:
    """One pass over the prompts in-process: its seconds, tokens, prompts and replies."""
    started = time.perf_counter()
    table = generate_all(reader, inputs)
    seconds = time.perf_counter() - started
    return seconds, int(table["output_tokens"].sum()), len(inputs), list(table["raw_output"])


def run_server(url: str, reader_key: str, inputs, concurrency: int):
    """One pass over the prompts through a fresh server reader (its reply cache empty)."""
    reader = load_reader(reader_key, mode="server", url=url, concurrency=concurrency)
    started = time.perf_counter()
    generations = generate_all(reader, inputs).attrs["generations"]
    seconds = time.perf_counter() - started
    # llama-cpp-python leaves the end-of-sequence token out of its count; add it back so
    # both sides count the same tokens (transformers counts it).
    eos_fix = 0 if reader.server.engine.counts_eos is not False else 1
    tokens = sum(g.output_tokens + (eos_fix if g.ended_by_eos else 0) for g in generations)
    return reader, seconds, tokens, [g.raw_output for g in generations]


#: Within this fraction of each other, two timings count as the same.
SAME_WITHIN = 0.10


def bound_sentence(sequential_spq: float, batched_spq: float, in_flight: int) -> str:
    """What the measured timings say about sending ``in_flight`` requests at once."""
    speedup = sequential_spq / batched_spq
    said = (f"With {in_flight} requests in flight the server took {batched_spq:.2f} s per "
            f"question against {sequential_spq:.2f} s one at a time ({speedup:.2f}x the "
            "speed)")
    if speedup >= 1 + SAME_WITHIN:
        return f"{said}: the bound paid on this server."
    if speedup > 1 - SAME_WITHIN:
        return (f"{said}, within {SAME_WITHIN:.0%} of each other, so the bound bought "
                "nothing on this server; an engine that batches requests (vLLM) is where "
                "it could pay.")
    return f"{said}: the bound cost time on this server."


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reader", default="smollm2_135m_instruct")
    parser.add_argument("--repeats", type=int, default=1,
                        help="passes over the six prompts per setting")
    parser.add_argument("--no-server", action="store_true",
                        help="time transformers only")
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
    in_process = {}
    live_texts = None
    for threads in settings:
        spec = dataclasses.replace(reader.spec, cpu_threads=threads)
        timed = LiveReader(spec)  # the model is cached; this only changes the thread count
        label = f"{threads} thread(s)" if threads else (
            f"torch default ({torch.get_num_threads()} threads)")
        for repeat in range(args.repeats):
            seconds, tokens, questions, texts = run_questions(timed, inputs)
            live_texts = live_texts or texts
            in_process.setdefault(threads, []).append((seconds, tokens))
            print(f"transformers in-process, {label}, pass {repeat + 1}: "
                  f"{seconds / questions:.2f} s per question, "
                  f"{tokens / seconds:.1f} generated tokens per second "
                  f"({tokens} tokens over {questions} questions in {seconds:.1f} s)")
    print(f"peak memory of this process (max RSS): {peak_rss_mib():.0f} MiB")

    if args.no_server:
        return 0
    if not llama_server_installed():
        print(f"llama.cpp's server: not installed for {server_python()} (the test-server "
              "extra; `make test` installs it there), so it was not timed")
        return 0
    if get_reader_spec(args.reader).gguf_filename is None:
        print(f"llama.cpp's server: reader {args.reader} has no GGUF file to serve")
        return 0

    questions = len(inputs)
    started = time.perf_counter()
    with local_llama_server(smollm2_gguf(), threads=registered or 1) as url:
        print(f"llama.cpp's server started in {time.perf_counter() - started:.1f} s "
              f"at {url} with {registered or 1} thread(s)")
        served = {}
        server_texts = None
        for concurrency in (1, 4):
            for repeat in range(args.repeats):
                server_reader, seconds, tokens, texts = run_server(url, args.reader, inputs,
                                                                   concurrency)
                server_texts = server_texts or texts
                served.setdefault(concurrency, []).append((seconds, tokens))
                print(f"{server_reader.server.engine_label} server, {concurrency} request(s) "
                      f"in flight, pass {repeat + 1}: {seconds / questions:.2f} s per "
                      f"question, {tokens / seconds:.1f} generated tokens per second "
                      f"({tokens} tokens, end of sequence included, in {seconds:.1f} s)")

    def best(runs):
        seconds, tokens = min(runs)
        return seconds / questions, tokens / seconds

    live_spq, live_tps = best(in_process[registered])
    server_spq, server_tps = best(served[1])
    batched_spq, _ = best(served[4])
    same = sum(a == b for a, b in zip(live_texts, server_texts))
    threads = registered or 1
    print(
        f"note: on the same six prompts and {threads} thread(s) each, llama.cpp's server "
        f"took {server_spq:.2f} s per question against {live_spq:.2f} s in-process with "
        f"transformers, a ratio of {server_spq / live_spq:.2f} (server / in-process; "
        f"{live_spq / server_spq:.1f}x the speed), and {server_tps / live_tps:.2f} times the "
        f"generated tokens per second. {bound_sentence(server_spq, batched_spq, 4)} "
        f"{same} of {questions} replies were "
        f"identical between the two (llama.cpp computes on the quantised GGUF weights and "
        f"penalises repeats within the reply only; transformers de-quantises the weights "
        f"and penalises the prompt's tokens too). The server reuses the shared prompt "
        f"prefix between questions; in-process, the batch reads it once. vLLM was not run here: "
        f"this machine has no GPU."
    )
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
