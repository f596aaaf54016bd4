"""The lesson's tf-idf retriever beside scikit-learn and bm25s on a large synthetic handbook:
fit time, latency of one question, batch throughput and peak memory, all in one run.

    .venv/bin/python benchmarks/bench_tfidf.py     # 100,000 passages, then 1,000,000 if it fits
    .venv/bin/python benchmarks/bench_tfidf.py --quick    # 20,000 passages, 50 questions: a minute
    .venv/bin/python benchmarks/bench_tfidf.py --passages 300000 --scale-to 0

bm25s comes from the benchmark-only ``bench`` extra (``pip install -e '.[bench]'``, which
``make benchmarks`` runs); the book never needs it.

The workload (printed by the script): passages of 10 to 40 words drawn with Zipf
frequencies (``p(rank r) ~ 1/r``) from a vocabulary of 50,000 made-up lower-case words,
and 200 questions of 6 words drawn the same way, each asked on its own for its top 3
passages. Everything is generated from the seed. All three retrievers read the same
tokens: the lesson's tokenizer (``helpers.text.content_tokens``), also given to bm25s as
pre-tokenized input, so the comparison is about indexing and scoring, not tokenizing.
bm25s scores BM25 (its defaults), not the lesson's tf-idf: it is a yardstick for speed,
not for ranking quality.

What is measured, for each retriever in a fresh child process of its own, so that memory
belongs to that retriever alone:

* fit: wall and CPU time of one fit on every passage (tokenizing included), after a
  warm-up fit on 200 passages that loads whatever the library imports on first use;
* one question: top 3 for each question on its own, through each library's public call
  (``TfidfRetriever.rank`` on a one-row table, returning a DataFrame; ``TfidfVectorizer.
  transform`` + ``linear_kernel`` + a top-3 selection; ``BM25.retrieve``), median and
  95th percentile of wall time over the questions (and the median CPU time, steadier on
  a busy machine), after one warm-up question; for ``rank``, also the share of its time
  that building the returned DataFrame takes, timed alone and under cProfile;
* batch: every question at once through the same calls (scikit-learn in blocks of 50
  questions, whose dense score rows it would otherwise hold all together), as questions
  per second, the median of three runs; for the custom retriever also through
  ``score_sparse``, one sparse product per block of 50 questions, then ``rank_scores``;
* memory: the index's own size; the tracemalloc peak of a second, separate fit (traced
  allocations only, numpy's included; tracemalloc slows Python code, so it is never on
  while timing); and the peak resident set size (``ru_maxrss``) of the child above its
  resident size after loading the texts, once after the fit and once after all queries.

The passages are written to a temporary folder once and read back by each child, so no
child's peak includes generating them. Before the optional larger run (``--scale-to``),
each retriever's peak RSS is extrapolated linearly in passages from this run; the larger
run goes ahead only if every estimate stays under ``--memory-limit-gib`` (by default
half of the memory available when the script starts, read from /proc/meminfo; 8 GiB where
that file is missing), otherwise the script runs the largest round size whose estimate fits.

Correctness is checked too: for a sample of questions, an independent pure-Python
computation of the lesson's formula (counts times ln(N/df), cosine, every passage scored,
ties by passage ID) must give the custom retriever's top 3, the same passages in the same
order with scores within 1e-12; the script stops with an error otherwise.

This is a benchmark, not a test: apart from that check it asserts nothing, and its
figures depend on the machine and on how busy it is.
"""
from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from pathlib import Path

import numpy as np

PROJECT_ROOT = Path(__file__).resolve().parent.parent
if str(PROJECT_ROOT) not in sys.path:
    sys.path.insert(0, str(PROJECT_ROOT))

from helpers.text import STOP_WORDS, content_tokens  # noqa: E402

METHODS = ("custom", "sklearn", "bm25s")
LABELS = {
    "custom": "TfidfRetriever (inverted index)",
    "sklearn": "scikit-learn TfidfVectorizer",
    "bm25s": "bm25s BM25",
}
ZIPF_EXPONENT = 1.0
TOP_K = 3
#: Batches that hold a score row per question go in blocks of this many questions.
BATCH_BLOCK = 50
GOALS = {"one question vs bm25s": 1.0, "fit vs scikit-learn": 1.5,
         "peak memory vs scikit-learn": 1.5}
MIB = 2**20
GIB = 2**30


# --- the workload ------------------------------------------------------------------


def make_vocabulary(size: int, rng: np.random.Generator) -> list[str]:
    """``size`` distinct made-up lower-case words of 3 to 10 letters, none a stop word."""
    words: list[str] = []
    seen = set(STOP_WORDS)
    while len(words) < size:
        lengths = rng.integers(3, 11, size=size)
        letters = rng.integers(0, 26, size=(size, 10)) + ord("a")
        for length, row in zip(lengths.tolist(), letters.tolist()):
            word = "".join(map(chr, row[:length]))
            if word not in seen:
                seen.add(word)
                words.append(word)
                if len(words) == size:
                    break
    return words


def make_workload(n_passages: int, n_questions: int, vocabulary_size: int,
                  question_words: int, seed: int) -> tuple[list[str], list[str]]:
    """Deterministic passage texts and question texts (see the module docstring)."""
    rng = np.random.default_rng(seed)
    words = np.array(make_vocabulary(vocabulary_size, rng))
    weights = 1.0 / np.arange(1, vocabulary_size + 1) ** ZIPF_EXPONENT
    weights /= weights.sum()
    lengths = rng.integers(10, 41, size=n_passages)
    draws = words[rng.choice(vocabulary_size, size=int(lengths.sum()), p=weights)]
    ends = np.cumsum(lengths).tolist()
    texts = [" ".join(draws[end - length:end]).capitalize() + "."
             for end, length in zip(ends, lengths.tolist())]
    questions = [" ".join(words[rng.choice(vocabulary_size, size=question_words, p=weights)])
                 .capitalize() + "?" for _ in range(n_questions)]
    return texts, questions


def passage_ids(n_passages: int) -> list[str]:
    width = len(str(n_passages))
    return [f"P{i:0{width}d}" for i in range(1, n_passages + 1)]


def _write_lines(path: Path, lines: list[str]) -> None:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _read_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


# --- measuring ----------------------------------------------------------------------


def _rss_mib() -> float:
    """Current resident set size, from /proc (Linux); NaN elsewhere."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return float("nan")
    return pages * resource.getpagesize() / MIB


def _peak_rss_mib() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / MIB if sys.platform == "darwin" else peak / 2**10


def _percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    return sorted_values[min(len(sorted_values) - 1,
                             max(0, math.ceil(fraction * len(sorted_values)) - 1))]


#: A slow retriever stops being timed on single questions after this many seconds (it
#: has then answered at least MIN_TIMED of them), and its batch is run once, not three times.
TIME_BUDGET_S = 60.0
MIN_TIMED = 20


def _latencies_ms(function, items) -> dict[str, float]:
    function(items[0])  # warm-up, not counted
    times, cpu_times = [], []
    began = time.perf_counter()
    for item in items:
        start, cpu = time.perf_counter(), time.process_time()
        function(item)
        times.append((time.perf_counter() - start) * 1000)
        cpu_times.append((time.process_time() - cpu) * 1000)
        if len(times) >= MIN_TIMED and time.perf_counter() - began > TIME_BUDGET_S:
            break
    times.sort()
    return {"median_ms": statistics.median(times), "p95_ms": _percentile(times, 0.95),
            "cpu_median_ms": statistics.median(cpu_times), "timed": len(times)}


def _throughput(function, n_questions: int, runs: int = 3) -> float:
    """Questions per second of one call over every question, the median of ``runs``."""
    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        function()
        seconds.append(time.perf_counter() - start)
        if sum(seconds) > TIME_BUDGET_S / 2:
            break
    return n_questions / statistics.median(seconds)


#: Passages of the small fit (and one question) that each child runs before measuring,
#: so that modules a library imports on first use are loaded before the baseline.
WARM_UP = 200


def _baseline(warm_up) -> dict:
    """Warm the library up, then record the resident size everything is measured from."""
    warm_up()
    gc.collect()
    return {"rss_data_mib": _rss_mib()}


def _timed_fit(fit, result: dict):
    """Fit once, recording wall and CPU seconds and the peak RSS it reached."""
    wall, cpu = time.perf_counter(), time.process_time()
    fitted = fit()
    result["fit_s"] = time.perf_counter() - wall
    result["fit_cpu_s"] = time.process_time() - cpu
    result["peak_rss_fit_mib"] = _peak_rss_mib()
    return fitted


def _profiled_share(function, outer: str, inner: str) -> float:
    """Under cProfile, the share of the time in functions named ``outer`` spent in
    ``inner`` (cumulative times, from helpers/retrieval.py)."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.runcall(function)
    cumulative = {}
    for (filename, _, name), (_, _, _, total, _) in pstats.Stats(profiler).stats.items():
        if filename.endswith("retrieval.py") and name in (outer, inner):
            cumulative[name] = cumulative.get(name, 0.0) + total
    return cumulative.get(inner, 0.0) / cumulative[outer]


def _traced_peak_mib(fit, traced: bool) -> float:
    """Peak traced allocation of one more, separate fit (MiB); NaN when not traced."""
    if not traced:
        return float("nan")
    gc.collect()
    tracemalloc.start()
    fitted = fit()
    peak = tracemalloc.get_traced_memory()[1] / MIB
    tracemalloc.stop()
    del fitted
    return peak


# --- the three retrievers, each run in a child process --------------------------------


def _custom(texts, questions, sample, traced) -> dict:
    import pandas as pd

    from helpers import retrieval
    from helpers.retrieval import TfidfRetriever, rank_scores

    ids = passage_ids(len(texts))
    frame = pd.DataFrame({"passage_id": ids, "text": texts})
    question_ids = [f"Q{i + 1}" for i in range(len(questions))]
    one_row = [pd.DataFrame({"question_id": [qid], "question": [text]})
               for qid, text in zip(question_ids, questions)]
    table = pd.DataFrame({"question_id": question_ids, "question": questions})

    def fit(passages=frame):
        return TfidfRetriever.fit(passages)

    result = _baseline(lambda: fit(frame.iloc[:WARM_UP]).rank(one_row[0], k=TOP_K))
    retriever = _timed_fit(fit, result)
    index = retriever.term_matrix  # its weights, passage positions and row offsets
    result["index_mib"] = (index.data.nbytes + index.indices.nbytes + index.indptr.nbytes) / MIB
    result["terms"] = len(retriever.idf)
    result["postings"] = int(retriever.term_matrix.nnz)
    result["one"] = _latencies_ms(lambda q: retriever.rank(q, k=TOP_K), one_row)

    # How much of rank() is the DataFrame it returns: the same hits, framed alone.
    framed = [(row["question_id"].tolist(),
               retriever.hits(row["question_id"].tolist(), row["question"].tolist(), TOP_K))
              for row in one_row]
    result["frame_only"] = _latencies_ms(
        lambda item: retrieval._ranking_frame(item[0], item[1], retriever.passage_array),
        framed)
    result["batch_qps"] = _throughput(lambda: retriever.rank(table, k=TOP_K), len(questions))
    result["peak_rss_mib"] = _peak_rss_mib()
    # The same batch through sparse products, which hold a score row per question.
    def through_products():
        for first in range(0, len(questions), BATCH_BLOCK):
            rank_scores(retriever.score_sparse(questions[first:first + BATCH_BLOCK]),
                        retriever.passage_array, question_ids[first:first + BATCH_BLOCK],
                        k=TOP_K, id_order=retriever.id_order)

    result["batch_product_qps"] = _throughput(through_products, len(questions))
    result["peak_rss_product_mib"] = _peak_rss_mib()
    result["profiled_frame_share"] = _profiled_share(
        lambda: [retriever.rank(q, k=TOP_K) for q in one_row], "rank", "_ranking_frame")
    ranked = retriever.rank(table.iloc[sample], k=TOP_K)
    result["top"] = {qid: [[r.passage_id, r.score] for r in group.itertuples()]
                     for qid, group in ranked.groupby("question_id", sort=False)}
    retriever = None  # free the index before the traced fit
    result["peak_rss_child_mib"] = _peak_rss_mib()  # everything but the traced fit
    result["traced_fit_mib"] = _traced_peak_mib(fit, traced)
    return result


def _sklearn(texts, questions, sample, traced) -> dict:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.metrics.pairwise import linear_kernel

    ids = np.asarray(passage_ids(len(texts)))

    def fit(passages=texts):
        vectorizer = TfidfVectorizer(analyzer=content_tokens, lowercase=False,
                                     smooth_idf=False)
        return vectorizer, vectorizer.fit_transform(passages)

    def top(scores: np.ndarray) -> list[tuple[str, float]]:
        candidates = np.argpartition(-scores, TOP_K)[:TOP_K]
        candidates = candidates[np.lexsort((ids[candidates], -scores[candidates]))]
        return [(ids[i], float(scores[i])) for i in candidates if scores[i] > 0]

    def one(question):
        return top(linear_kernel(vectorizer.transform([question]), matrix).ravel())

    def batch():
        for first in range(0, len(questions), BATCH_BLOCK):
            block = linear_kernel(vectorizer.transform(questions[first:first + BATCH_BLOCK]),
                                  matrix)
            for row in block:
                top(row)

    def warm_up():
        small, rows = fit(texts[:WARM_UP])
        linear_kernel(small.transform(questions[:1]), rows)

    result = _baseline(warm_up)
    vectorizer, matrix = _timed_fit(fit, result)
    result["index_mib"] = (matrix.data.nbytes + matrix.indices.nbytes
                           + matrix.indptr.nbytes) / MIB
    result["terms"] = len(vectorizer.idf_)
    result["postings"] = int(matrix.nnz)
    result["one"] = _latencies_ms(one, questions)
    result["batch_qps"] = _throughput(batch, len(questions))
    result["peak_rss_mib"] = _peak_rss_mib()
    vectorizer = matrix = None  # free the index before the traced fit
    result["peak_rss_child_mib"] = _peak_rss_mib()
    result["traced_fit_mib"] = _traced_peak_mib(fit, traced)
    return result


def _bm25s(texts, questions, sample, traced) -> dict:
    import bm25s

    def fit(passages=texts):
        retriever = bm25s.BM25()
        retriever.index([content_tokens(text) for text in passages], show_progress=False)
        return retriever

    def one(tokens):
        return retriever.retrieve([tokens], k=TOP_K, show_progress=False)

    result = _baseline(lambda: fit(texts[:WARM_UP]).retrieve(
        [content_tokens(questions[0])], k=TOP_K, show_progress=False))
    retriever = _timed_fit(fit, result)
    scores = retriever.scores
    result["index_mib"] = sum(scores[key].nbytes for key in ("data", "indices", "indptr")) / MIB
    result["terms"] = len(retriever.vocab_dict)
    result["postings"] = int(len(scores["data"]))
    # The question's own tokenizing is part of each call, as it is for the others.
    result["one"] = _latencies_ms(lambda q: one(content_tokens(q)), questions)
    result["batch_qps"] = _throughput(
        lambda: retriever.retrieve([content_tokens(q) for q in questions], k=TOP_K,
                                   show_progress=False), len(questions))
    result["peak_rss_mib"] = _peak_rss_mib()
    result["version"] = bm25s.__version__
    retriever = None  # free the index before the traced fit
    result["peak_rss_child_mib"] = _peak_rss_mib()
    result["traced_fit_mib"] = _traced_peak_mib(fit, traced)
    return result


RUNNERS = {"custom": _custom, "sklearn": _sklearn, "bm25s": _bm25s}


def _brute_force_top(texts: list[str], questions: list[str], k: int) -> list[list]:
    """The lesson's formula computed directly, every passage scored, in pure Python.

    Two passes over the passages, so that nothing but the document frequencies and the
    scores of the sampled questions is kept: the first counts, for each term, the
    passages that contain it; the second weighs each passage (count x ln(N/df)), takes
    its length, and its dot product with each question's weights.
    """
    n = len(texts)
    document_frequency: Counter = Counter()
    for text in texts:
        document_frequency.update(set(content_tokens(text)))
    idf = {term: math.log(n / df) for term, df in document_frequency.items()}
    wanted = []
    for question in questions:
        weights = {t: c * idf[t] for t, c in Counter(content_tokens(question)).items()
                   if t in idf}
        wanted.append((weights, math.sqrt(sum(w * w for w in weights.values()))))
    scores = np.zeros((len(questions), n))
    for column, text in enumerate(texts):
        bag = Counter(content_tokens(text))
        norm = math.sqrt(sum((c * idf[t]) ** 2 for t, c in bag.items()))
        if norm == 0:
            continue
        for row, (weights, question_norm) in enumerate(wanted):
            dot = sum(w * bag[t] * idf[t] for t, w in weights.items() if t in bag)
            if dot:
                scores[row, column] = dot / (norm * question_norm)
    ids = np.asarray(passage_ids(n))
    tops = []
    for row in scores:
        positive = np.flatnonzero(row > 0)
        order = positive[np.lexsort((ids[positive], -np.round(row[positive], 12)))][:k]
        tops.append([[str(ids[i]), float(row[i])] for i in order])
    return tops


def _child(method: str, folder: Path, sample: list[int], traced: bool) -> None:
    if method == "check":
        texts = _read_lines(folder / "passages.txt")
        questions = _read_lines(folder / "questions.txt")
        chosen = [questions[i] for i in sample]
        print(json.dumps({"top": _brute_force_top(texts, chosen, TOP_K)}))
        return
    if method == "bm25s":
        import bm25s  # noqa: F401  (imported before the baseline, like the others' libraries)
    else:
        import pandas  # noqa: F401
        import sklearn.feature_extraction.text  # noqa: F401
    result = {"rss_start_mib": _rss_mib()}
    texts = _read_lines(folder / "passages.txt")
    questions = _read_lines(folder / "questions.txt")
    gc.collect()
    result.update(RUNNERS[method](texts, questions, sample, traced))
    result["questions"] = len(questions)
    print(json.dumps(result))


def _run_child(method: str, folder: Path, sample: list[int], traced: bool = True) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), "--child", method,
               "--data", str(folder), "--sample", ",".join(map(str, sample))]
    if not traced:
        command.append("--no-trace")
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise SystemExit(f"the {method} run failed with exit status {done.returncode}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- one size, end to end ------------------------------------------------------------


def _check(results: dict, brute: dict, sample: list[int]) -> str:
    custom = results["custom"]["top"]
    for position, question in enumerate(sample):
        qid = f"Q{question + 1}"
        mine, expected = custom.get(qid, []), brute["top"][position]
        same = ([pid for pid, _ in mine] == [pid for pid, _ in expected]
                and all(abs(a - b) <= 1e-12 for (_, a), (_, b) in zip(mine, expected)))
        if not same:
            raise SystemExit(f"question {qid}: the retriever's top {TOP_K} {mine} differs "
                             f"from the brute-force computation {expected}")
    return (f"Check: the custom top {TOP_K} equals a brute-force computation of the lesson's "
            f"formula for {len(sample)} questions (same passages and order, scores within 1e-12).")


def run_size(n_passages: int, args, methods: list[str], check: int, traced: bool) -> dict:
    texts, questions = make_workload(n_passages, args.questions, args.vocabulary,
                                     args.question_words, args.seed)
    tokens = sum(len(content_tokens(text)) for text in texts[:10_000]) * n_passages / min(
        n_passages, 10_000)
    print(f"\n== {n_passages:,} passages (about {tokens / 1e6:.1f} million content tokens), "
          f"{len(questions)} questions of {args.question_words} words, top {TOP_K} ==")
    sample = sorted(set(np.linspace(0, len(questions) - 1, check).astype(int).tolist())) \
        if check else []
    with tempfile.TemporaryDirectory(prefix="bench-tfidf-") as scratch:
        folder = Path(scratch)
        _write_lines(folder / "passages.txt", texts)
        _write_lines(folder / "questions.txt", questions)
        del texts
        results = {}
        for method in methods:
            start = time.perf_counter()
            results[method] = _run_child(method, folder, sample, traced)
            print(f"  {method}: done in {time.perf_counter() - start:.0f} s", flush=True)
        brute = _run_child("check", folder, sample) if sample and "custom" in methods else None
    _print_table(results)
    if brute is not None:
        print(_check(results, brute, sample))
    return results


def _print_table(results: dict) -> None:
    columns = [("retriever", 32, "s"), ("fit s", 7, ".2f"), ("fit CPU s", 10, ".2f"),
               ("1 q median ms", 14, ".3f"),
               ("1 q p95 ms", 11, ".3f"), ("batch q/s", 10, ",.0f"), ("index MiB", 10, ".1f"),
               ("traced fit MiB", 15, ".1f"), ("RSS fit MiB", 12, ".1f"),
               ("RSS all MiB", 12, ".1f")]
    header = "".join(f"{name:<{width}}" if fmt == "s" else f"{name:>{width}}"
                     for name, width, fmt in columns)
    print()
    print(header)
    print("-" * len(header))
    for method, r in results.items():
        values = [LABELS[method], r["fit_s"], r["fit_cpu_s"], r["one"]["median_ms"],
                  r["one"]["p95_ms"],
                  r["batch_qps"], r["index_mib"], r["traced_fit_mib"],
                  r["peak_rss_fit_mib"] - r["rss_data_mib"],
                  r["peak_rss_mib"] - r["rss_data_mib"]]
        print("".join(f"{value:<{width}}" if fmt == "s" else f"{value:>{width}{fmt}}"
                      for value, (_, width, fmt) in zip(values, columns)))
    print("traced fit: tracemalloc peak of a second fit. RSS columns: peak resident size "
          "above the child's size once the texts were loaded, after the fit and after all "
          "queries through the public calls.")
    for method, r in results.items():
        if r["one"]["timed"] < r["questions"]:
            print(f"{LABELS[method]}: one question timed on the first {r['one']['timed']} "
                  f"of {r['questions']} questions (time budget {TIME_BUDGET_S:g} s).")
    if any(math.isnan(r["traced_fit_mib"]) for r in results.values()):
        print("Traced fit peaks were not measured in this run (nan).")
    if "custom" in results:
        r = results["custom"]
        print(f"Custom rank(): of its median {r['one']['median_ms']:.3f} ms for one question, "
              f"building the returned DataFrame alone takes {r['frame_only']['median_ms']:.3f} ms "
              f"({r['frame_only']['median_ms'] / r['one']['median_ms']:.0%}); under cProfile, "
              f"which inflates Python-heavy code such as pandas' constructors, "
              f"{r['profiled_frame_share']:.0%} of rank()'s time is in _ranking_frame.")
        print(f"Custom batch through sparse products (score_sparse per {BATCH_BLOCK} "
              f"questions, then rank_scores): "
              f"{r['batch_product_qps']:,.0f} q/s, peak RSS "
              f"{r['peak_rss_product_mib'] - r['rss_data_mib']:,.1f} MiB above the texts; "
              f"rank() adds up postings question by question instead: "
              f"{r['batch_qps']:,.0f} q/s.")
        print(f"Terms indexed: custom {r['terms']:,}"
              + "".join(f", {m} {results[m]['terms']:,}" for m in results if m != "custom")
              + f"; postings: custom {r['postings']:,}"
              + "".join(f", {m} {results[m]['postings']:,}" for m in results if m != "custom")
              + ".")
    ratios = []
    if {"custom", "bm25s"} <= set(results):
        c, b = results["custom"]["one"], results["bm25s"]["one"]
        ratios.append(("one question vs bm25s", c["median_ms"] / b["median_ms"],
                       "median latency"))
        ratios.append(("one question vs bm25s", c["cpu_median_ms"] / b["cpu_median_ms"],
                       "median CPU time"))
    if {"custom", "sklearn"} <= set(results):
        c, s = results["custom"], results["sklearn"]
        ratios.append(("fit vs scikit-learn", c["fit_s"] / s["fit_s"], "fit wall time"))
        ratios.append(("fit vs scikit-learn", c["fit_cpu_s"] / s["fit_cpu_s"], "fit CPU time"))
        if not math.isnan(c["traced_fit_mib"]):
            ratios.append(("peak memory vs scikit-learn",
                           c["traced_fit_mib"] / s["traced_fit_mib"], "traced fit peak"))
        ratios.append(("peak memory vs scikit-learn",
                       (c["peak_rss_fit_mib"] - c["rss_data_mib"])
                       / (s["peak_rss_fit_mib"] - s["rss_data_mib"]), "RSS fit peak"))
    if ratios:
        print("\nGoals (custom / other, measured in this run):")
        for goal, ratio, what in ratios:
            limit = GOALS[goal]
            print(f"  {goal:<28} {what:<16} {ratio:6.2f}x  (goal <= {limit:.1f}x: "
                  f"{'met' if ratio <= limit else 'NOT met'})")


def _estimate_gib(results: dict, n_passages: int, target: int) -> dict[str, float]:
    """Each child's peak RSS at ``target`` passages, linear in passages from this run.

    What the interpreter and libraries hold before reading the texts stays; everything
    above it (texts, index, fit and query buffers) grows in proportion. The peak is the
    child's before its traced fit, whose bookkeeping the larger run does not have.
    """
    return {method: (r["rss_start_mib"] + (r["peak_rss_child_mib"] - r["rss_start_mib"])
                     * target / n_passages) * MIB / GIB
            for method, r in results.items()}


def _largest_fitting(results: dict, n_passages: int, limit_gib: float, target: int) -> int:
    """The largest round size (1, 2 or 5 times a power of ten) whose estimate fits."""
    sizes = sorted({m * 10**e for e in range(3, 8) for m in (1, 2, 5)
                    if n_passages < m * 10**e <= target})
    fitting = [s for s in sizes if max(_estimate_gib(results, n_passages, s).values()) < limit_gib]
    return fitting[-1] if fitting else 0


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=100_000, help="passages (100,000)")
    parser.add_argument("--questions", type=int, default=200, help="questions (200)")
    parser.add_argument("--question-words", type=int, default=6, help="words per question (6)")
    parser.add_argument("--vocabulary", type=int, default=50_000, help="vocabulary size (50,000)")
    parser.add_argument("--seed", type=int, default=20261202)
    parser.add_argument("--scale-to", type=int, default=1_000_000,
                        help="then this many passages if the memory estimate fits (0: no)")
    parser.add_argument("--memory-limit-gib", type=float, default=None,
                        help="largest estimated peak RSS of one child for the larger run "
                             "(default: half of the memory available now, else 8)")
    parser.add_argument("--check", type=int, default=20,
                        help="questions checked against a brute-force computation (20; 0: none)")
    parser.add_argument("--methods", default=",".join(METHODS),
                        help=f"comma-separated subset of {', '.join(METHODS)}")
    parser.add_argument("--quick", action="store_true",
                        help="20,000 passages, 50 questions, 5 checked, no larger run")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--sample", default="", help=argparse.SUPPRESS)
    parser.add_argument("--no-trace", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child, args.data, [int(i) for i in args.sample.split(",") if i],
               traced=not args.no_trace)
        return
    if args.quick:
        args.passages, args.questions, args.check, args.scale_to = 20_000, 50, 5, 0
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        parser.error(f"unknown methods {unknown}; choose from {', '.join(METHODS)}")
    if "bm25s" in methods:
        try:
            import bm25s  # noqa: F401
        except ImportError:
            parser.error("bm25s is not installed: pip install -e '.[bench]' (make benchmarks "
                         "does), or leave it out with --methods custom,sklearn")

    import pandas
    import scipy
    import sklearn

    versions = f"scikit-learn {sklearn.__version__}, scipy {scipy.__version__}, " \
               f"numpy {np.__version__}, pandas {pandas.__version__}"
    if "bm25s" in methods:
        import bm25s
        versions += f", bm25s {bm25s.__version__}"
    print(f"Workload: passages of 10-40 words and questions of {args.question_words} words, "
          f"drawn with Zipf frequencies (exponent {ZIPF_EXPONENT:g}) from "
          f"{args.vocabulary:,} made-up words; seed {args.seed}.")
    print(f"Python {platform.python_version()} on {platform.machine()}, {versions}.")
    print(f"{_load()} at the start.")
    if args.memory_limit_gib is None:
        available = _available_gib()
        args.memory_limit_gib = round(available / 2, 1) if available else 8.0
        print(f"Memory limit for the larger run: {args.memory_limit_gib:g} GiB per child ("
              + (f"half of the {available:.1f} GiB available now" if available
                 else "no /proc/meminfo to read; the fallback") + ").")
    results = run_size(args.passages, args, methods, args.check, traced=True)

    if args.scale_to and args.scale_to > args.passages:
        estimate = _estimate_gib(results, args.passages, args.scale_to)
        print(f"\nEstimated peak RSS at {args.scale_to:,} passages (linear in passages from "
              f"this run): " + ", ".join(f"{m} {g:.2f} GiB" for m, g in estimate.items())
              + f"; limit {args.memory_limit_gib:g} GiB per child.")
        size = args.scale_to
        if max(estimate.values()) >= args.memory_limit_gib:
            size = _largest_fitting(results, args.passages, args.memory_limit_gib, args.scale_to)
            print(f"{args.scale_to:,} passages would not fit; the largest round size that "
                  f"fits is {size:,}." if size else
                  f"No larger round size than {args.passages:,} fits.")
        if size:
            print("The larger run skips the traced second fit (tracemalloc multiplies a "
                  "fit's time) and checks fewer questions.")
            larger = run_size(size, args, methods, min(args.check, 5), traced=False)
            measured = {m: larger[m]["peak_rss_child_mib"] * MIB / GIB for m in larger}
            print("Measured peak RSS of each child: "
                  + ", ".join(f"{m} {g:.2f} GiB" for m, g in measured.items()))
    print(f"{_load()} at the end.")


def _available_gib() -> float | None:
    """MemAvailable from /proc/meminfo in GiB, or None where there is no such file."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024 / GIB
    except OSError:
        return None
    return None


def _load() -> str:
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "Load average unknown"
    return (f"Load average {one:.1f} / {five:.1f} / {fifteen:.1f} (1 / 5 / 15 min) on "
            f"{os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
