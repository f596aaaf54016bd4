"""Encoding time per passage and query time per question: dense retrieval beside tf-idf.

    .venv/bin/python benchmarks/bench_dense.py [--passages N] [--seed S] [--repeats R]

Lesson 2 ("A dense retriever") swaps tf-idf for all-MiniLM-L6-v2. This script measures
what that costs on a synthetic handbook of 10,000 passages (by default):

* fit: tf-idf's ``TfidfRetriever.fit`` against ``DenseRetriever.fit`` (which embeds every
  passage), reported in total and per passage; the one-off encoder load is timed apart;
* query: each of the 42 fixture questions (the original six and the extended set) ranked
  on its own with ``rank(k=3)``, median and 95th percentile over ``repeats`` passes, and
  the same 42 questions scored as one batch.

The synthetic passages are drawn from the real handbook's words (stop words included)
plus random numbers and course codes, 15 to 40 words each, so their length in encoder
word pieces resembles the handbook's. Everything runs on the CPU with the thread count
torch picks; the figures depend on the machine and on its load. This is a benchmark, not
a test: it prints figures and asserts nothing about speed.
"""
from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

PROJECT_ROOT = Path(__file__).resolve().parent.parent
if str(PROJECT_ROOT) not in sys.path:
    sys.path.insert(0, str(PROJECT_ROOT))

from helpers import dense  # noqa: E402
from helpers.retrieval import TfidfRetriever  # noqa: E402
from helpers.text import tokenize  # noqa: E402
from runtime.encoder import load_encoder  # noqa: E402
from runtime.fixture import load_riverton  # noqa: E402


def synthetic_handbook(handbook: pd.DataFrame, n_passages: int, seed: int) -> pd.DataFrame:
    """``n_passages`` passages of 15-40 words drawn from the handbook's own words."""
    rng = np.random.default_rng(seed)
    words = np.array(sorted({w for t in handbook["text"] for w in tokenize(t)}))
    texts = []
    for _ in range(n_passages):
        length = int(rng.integers(15, 41))
        chosen = list(rng.choice(words, size=length))
        # A number and a course code in most passages, as in the handbook.
        chosen[int(rng.integers(length))] = str(int(rng.integers(1, 500)))
        if rng.random() < 0.3:
            chosen[int(rng.integers(length))] = f"DSC-{int(rng.integers(100, 1000))}"
        texts.append(" ".join(chosen).capitalize() + ".")
    return pd.DataFrame({"passage_id": [f"S{i:06d}" for i in range(n_passages)],
                         "text": texts})


def per_question_ms(retriever, questions: pd.DataFrame, repeats: int) -> list[float]:
    """Milliseconds for ``rank(k=3)`` of one question at a time, over ``repeats`` passes."""
    times = []
    for _ in range(repeats):
        for i in range(len(questions)):
            one = questions.iloc[i : i + 1]
            dense._VECTORS.clear()  # time the encoding, not the memory of an earlier pass
            start = time.perf_counter()
            retriever.rank(one, k=3)
            times.append((time.perf_counter() - start) * 1000)
    return times


def p95(values: list[float]) -> float:
    return float(np.percentile(values, 95))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    import torch

    original = load_riverton()
    extended = load_riverton(questions="riverton-extended-questions.csv")
    questions = pd.concat([original.questions, extended.questions], ignore_index=True)
    passages = synthetic_handbook(original.handbook, args.passages, args.seed)

    start = time.perf_counter()
    model = load_encoder()
    load_s = time.perf_counter() - start
    pieces = [len(model.tokenizer(t)["input_ids"]) for t in passages["text"].iloc[:500]]

    print(f"machine: {platform.machine()}, Python {platform.python_version()}, "
          f"torch {torch.__version__} with {torch.get_num_threads()} CPU threads")
    print(f"synthetic handbook: {len(passages):,} passages, mean "
          f"{passages['text'].str.split().str.len().mean():.1f} words and "
          f"{statistics.mean(pieces):.1f} encoder word pieces (first 500)")
    print(f"queries: {len(questions)} fixture questions, {args.repeats} passes each")
    print(f"encoder load (once per process): {load_s:.2f} s")

    start = time.perf_counter()
    tfidf = TfidfRetriever.fit(passages)
    tfidf_fit = time.perf_counter() - start
    start = time.perf_counter()
    dense_retriever = dense.DenseRetriever.fit(passages, model)
    dense_fit = time.perf_counter() - start

    results = {}
    for name, retriever in (("tf-idf", tfidf), ("dense", dense_retriever)):
        retriever.rank(questions.iloc[:1], k=3)  # warm up
        single = per_question_ms(retriever, questions, args.repeats)
        dense._VECTORS.clear()
        start = time.perf_counter()
        retriever.score(questions["question"].tolist())
        batch_ms = (time.perf_counter() - start) * 1000 / len(questions)
        results[name] = (single, batch_ms)

    print()
    print(f"{'':8s}{'fit total':>12s}{'per passage':>14s}{'query median':>15s}"
          f"{'query p95':>12s}{'batched/query':>15s}")
    for name, fit_s in (("tf-idf", tfidf_fit), ("dense", dense_fit)):
        single, batch_ms = results[name]
        print(f"{name:8s}{fit_s:10.2f} s{fit_s / len(passages) * 1e3:11.3f} ms"
              f"{statistics.median(single):12.2f} ms{p95(single):9.2f} ms{batch_ms:12.2f} ms")
    ratio_fit = dense_fit / tfidf_fit
    ratio_query = statistics.median(results["dense"][0]) / statistics.median(results["tf-idf"][0])
    print()
    print(f"dense / tf-idf: fit {ratio_fit:.0f}x slower, median query {ratio_query:.1f}x")
    print(f"dense embedding matrix: {dense_retriever.passage_embeddings.nbytes / 2**20:.1f} MiB "
          f"({dense_retriever.passage_embeddings.shape[1]} "
          f"{dense_retriever.passage_embeddings.dtype} values per passage)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
