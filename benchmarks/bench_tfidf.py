"""Fit time, per-query latency and peak memory of the lesson's tf-idf retriever beside
scikit-learn's TfidfVectorizer, on a synthetic handbook of 100,000 passages.

    .venv/bin/python benchmarks/bench_tfidf.py [--passages N] [--queries Q] [--seed S]

The handbook is generated deterministically from the seed: a vocabulary of a few
thousand made-up words (plus the lesson's stop words) drawn with Zipf-like frequencies,
15 to 40 tokens per passage. Both retrievers use the lesson's tokenizer and stop words,
so they index the same terms; scikit-learn runs with ``smooth_idf=False`` and scores with
``linear_kernel`` (its rows are unit length, so that is cosine similarity) followed by a
top-3 selection of positive scores.

Each retriever is measured in its own child process so that peak resident memory
(``ru_maxrss``) belongs to it alone:

* fit: wall time of one fit on all passages;
* query: one question at a time, median and 95th percentile over the queries; for the
  custom retriever both the public ``rank()`` (sparse scores, then a DataFrame of the top
  3) and the bare ``score_sparse()``;
* memory: the tracemalloc peak of a second, separate fit (tracemalloc slows Python code,
  so it is not on while timing), and the process's peak RSS after the timed fit and the
  queries, beside the RSS before fitting.

This is a benchmark, not a test: it prints figures and asserts nothing about speed.
"""
from __future__ import annotations

import argparse
import gc
import json
import platform
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

PROJECT_ROOT = Path(__file__).resolve().parent.parent
if str(PROJECT_ROOT) not in sys.path:
    sys.path.insert(0, str(PROJECT_ROOT))

from helpers.text import STOP_WORDS  # noqa: E402

LETTERS = np.array(list("abcdefghijklmnopqrstuvwxyz"))


def make_vocabulary(size: int, rng: np.random.Generator) -> list[str]:
    """``size`` distinct made-up lower-case words, 3 to 10 letters, none a stop word."""
    words: list[str] = []
    seen = set(STOP_WORDS)
    while len(words) < size:
        length = int(rng.integers(3, 11))
        word = "".join(rng.choice(LETTERS, size=length))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def make_handbook(n_passages: int, n_queries: int, vocabulary_size: int, seed: int):
    """Deterministic passages and queries; returns (passage_ids, texts, queries)."""
    rng = np.random.default_rng(seed)
    content = make_vocabulary(vocabulary_size, rng)
    words = np.array(content + sorted(STOP_WORDS))
    # Zipf-like weights for content words; stop words are frequent, as in real text.
    weights = np.concatenate([
        1.0 / np.arange(1, len(content) + 1) ** 1.07,
        np.full(len(STOP_WORDS), 0.02),
    ])
    weights /= weights.sum()
    lengths = rng.integers(15, 41, size=n_passages)
    draws = rng.choice(len(words), size=int(lengths.sum()), p=weights)
    texts = []
    start = 0
    for length in lengths:
        tokens = words[draws[start:start + length]]
        start += length
        texts.append(" ".join(tokens).capitalize() + ".")
    width = len(str(n_passages))
    passage_ids = [f"P{i:0{width}d}" for i in range(1, n_passages + 1)]
    query_lengths = rng.integers(3, 9, size=n_queries)
    queries = []
    for length in query_lengths:
        tokens = words[rng.choice(len(words), size=int(length), p=weights)]
        queries.append(" ".join(tokens).capitalize() + "?")
    return passage_ids, texts, queries


def _rss_mib() -> float:
    """Current resident set size, from /proc (Linux); NaN elsewhere."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return float("nan")
    return pages * resource.getpagesize() / 2**20


def _peak_rss_mib() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def _latencies_ms(function, queries) -> dict[str, float]:
    function(queries[0])  # warm-up, not counted
    times = []
    for query in queries:
        start = time.perf_counter()
        function(query)
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return {
        "median_ms": statistics.median(times),
        "p95_ms": times[min(len(times) - 1, int(np.ceil(0.95 * len(times))) - 1)],
    }


def _traced_peak_mib(fit) -> float:
    """Peak Python-tracked allocation of one more, separate fit (MiB)."""
    gc.collect()
    tracemalloc.start()
    fit()
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return peak


def _custom(passage_ids, texts, queries) -> dict:
    import pandas as pd

    from helpers.retrieval import TfidfRetriever

    frame = pd.DataFrame({"passage_id": passage_ids, "text": texts})
    fit = lambda: TfidfRetriever.fit(frame)  # noqa: E731
    rss_before = _rss_mib()
    start = time.perf_counter()
    retriever = fit()
    fit_s = time.perf_counter() - start

    def rank_one(query):
        return retriever.rank(pd.DataFrame({"question_id": ["q"], "question": [query]}), k=3)

    result = {
        "fit_s": fit_s,
        "terms": len(retriever.idf),
        "query_rank": _latencies_ms(rank_one, queries),
        "query_score_only": _latencies_ms(lambda q: retriever.score_sparse([q]), queries),
        "rss_before_mib": rss_before,
        "peak_rss_mib": _peak_rss_mib(),
    }
    del retriever
    result["tracemalloc_fit_peak_mib"] = _traced_peak_mib(fit)
    return result


def _sklearn(passage_ids, texts, queries) -> dict:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.metrics.pairwise import linear_kernel

    from helpers.text import content_tokens

    def fit():
        vectorizer = TfidfVectorizer(analyzer=content_tokens, lowercase=False, smooth_idf=False)
        return vectorizer, vectorizer.fit_transform(texts)

    ids = np.asarray(passage_ids)
    rss_before = _rss_mib()
    start = time.perf_counter()
    vectorizer, matrix = fit()
    fit_s = time.perf_counter() - start

    def top3(query):
        scores = linear_kernel(vectorizer.transform([query]), matrix).ravel()
        candidates = np.argpartition(-scores, 3)[:3]
        candidates = candidates[np.lexsort((ids[candidates], -scores[candidates]))]
        return [(ids[i], scores[i]) for i in candidates if scores[i] > 0]

    result = {
        "fit_s": fit_s,
        "terms": len(vectorizer.idf_),
        "query_rank": _latencies_ms(top3, queries),
        "rss_before_mib": rss_before,
        "peak_rss_mib": _peak_rss_mib(),
    }
    del vectorizer, matrix
    result["tracemalloc_fit_peak_mib"] = _traced_peak_mib(fit)
    return result


METHODS = {"custom": _custom, "sklearn": _sklearn}
LABELS = {
    "custom": "helpers.retrieval.TfidfRetriever",
    "sklearn": "sklearn TfidfVectorizer + linear_kernel",
}


def _child(args) -> None:
    data = make_handbook(args.passages, args.queries, args.vocabulary, args.seed)
    gc.collect()
    print(json.dumps(METHODS[args.method](*data)))


def _run_child(method: str, args) -> dict:
    command = [
        sys.executable, str(Path(__file__).resolve()), "--method", method,
        "--passages", str(args.passages), "--queries", str(args.queries),
        "--vocabulary", str(args.vocabulary), "--seed", str(args.seed),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise SystemExit(f"the {method} run failed with exit status {done.returncode}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--vocabulary", type=int, default=4_000)
    parser.add_argument("--seed", type=int, default=20261202)
    parser.add_argument("--method", choices=sorted(METHODS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.method:
        _child(args)
        return

    import sklearn

    _, texts, queries = make_handbook(args.passages, args.queries, args.vocabulary, args.seed)
    tokens = sum(len(text.split()) for text in texts)
    print(f"Synthetic handbook: {len(texts):,} passages, {tokens:,} tokens "
          f"(15-40 per passage), {args.vocabulary:,}-word vocabulary plus stop words, "
          f"seed {args.seed}; {len(queries)} single-question queries.")
    print(f"Python {platform.python_version()}, scikit-learn {sklearn.__version__}, "
          f"numpy {np.__version__}, {platform.machine()}")
    del texts, queries
    results = {method: _run_child(method, args) for method in METHODS}

    header = (f"{'retriever':<42}{'terms':>7}{'fit s':>8}{'query median ms':>17}"
              f"{'query p95 ms':>14}{'tracemalloc MiB':>17}{'peak RSS MiB':>14}"
              f"{'RSS before':>12}")
    print()
    print(header)
    print("-" * len(header))
    for method, r in results.items():
        print(f"{LABELS[method]:<42}{r['terms']:>7,}{r['fit_s']:>8.2f}"
              f"{r['query_rank']['median_ms']:>17.2f}{r['query_rank']['p95_ms']:>14.2f}"
              f"{r['tracemalloc_fit_peak_mib']:>17.1f}{r['peak_rss_mib']:>14.1f}"
              f"{r['rss_before_mib']:>12.1f}")
    score_only = results["custom"]["query_score_only"]
    print()
    print("Query time for the custom retriever is its public rank() with k=3, which builds a "
          "small DataFrame;")
    print(f"its sparse scoring alone (score_sparse) takes median {score_only['median_ms']:.2f} ms, "
          f"p95 {score_only['p95_ms']:.2f} ms.")
    print("tracemalloc: peak Python-tracked allocation during a separate fit; peak RSS: the "
          "whole child process, data generation included.")


if __name__ == "__main__":
    main()
