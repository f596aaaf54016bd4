"""benchmarks/bench_tfidf.py: its workload, its correctness check, its memory estimate, and
one small run end to end (without bm25s, which only the benchmark extra installs)."""
from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest

from runtime.paths import PROJECT_ROOT
from helpers.text import STOP_WORDS, content_tokens

SCRIPT = PROJECT_ROOT / "benchmarks" / "bench_tfidf.py"  # loaded by the `bench` fixture


def test_the_workload_is_the_one_described(bench):
    texts, questions = bench.make_workload(3000, 40, 5000, 6, seed=11)
    again = bench.make_workload(3000, 40, 5000, 6, seed=11)
    assert (texts, questions) == again  # deterministic from the seed
    assert bench.make_workload(3000, 40, 5000, 6, seed=12)[0] != texts
    lengths = [len(content_tokens(text)) for text in texts]
    assert min(lengths) == 10 and max(lengths) == 40
    assert all(len(content_tokens(q)) == 6 for q in questions)
    counts = Counter(token for text in texts for token in content_tokens(text))
    assert len(counts) <= 5000 and not set(counts) & STOP_WORDS
    # Zipf with exponent 1: the commonest word has share 1 / H(5000), about 0.11.
    share = counts.most_common(1)[0][1] / sum(lengths)
    harmonic = sum(1 / r for r in range(1, 5001))
    assert share == pytest.approx(1 / harmonic, rel=0.1)
    ranks = [count for _, count in counts.most_common(10)]
    assert ranks[0] / ranks[9] == pytest.approx(10, rel=0.3)


def test_the_brute_force_check_catches_a_wrong_top_3(bench):
    texts, questions = bench.make_workload(400, 6, 300, 6, seed=5)
    sample = [0, 3]
    tops = bench._brute_force_top(texts, [questions[i] for i in sample], 3)
    assert all(len(top) == 3 for top in tops)
    brute = {"top": tops}
    right = {"custom": {"top": {"Q1": tops[0], "Q4": tops[1]}}}
    assert bench._check(right, brute, sample).startswith("Check: the custom top 3 equals")
    swapped = {"custom": {"top": {"Q1": tops[0], "Q4": [tops[1][1], tops[1][0], tops[1][2]]}}}
    with pytest.raises(SystemExit, match="question Q4"):
        bench._check(swapped, brute, sample)
    nudged = [[pid, score + 1e-9] for pid, score in tops[0]]
    with pytest.raises(SystemExit, match="question Q1"):
        bench._check({"custom": {"top": {"Q1": nudged, "Q4": tops[1]}}}, brute, sample)


def test_the_memory_estimate_scales_what_grows_with_the_passages(bench):
    results = {"custom": {"rss_start_mib": 100.0, "peak_rss_child_mib": 600.0},
               "sklearn": {"rss_start_mib": 100.0, "peak_rss_child_mib": 1100.0}}
    estimate = bench._estimate_gib(results, 100_000, 1_000_000)
    assert estimate["custom"] == pytest.approx((100 + 500 * 10) / 1024)
    assert estimate["sklearn"] == pytest.approx((100 + 1000 * 10) / 1024)
    # 1,000,000 needs 9.9 GiB for scikit-learn; 500,000 needs 5.0 GiB, 1,000,000 is over 8.
    assert bench._largest_fitting(results, 100_000, 8.0, 1_000_000) == 500_000
    assert bench._largest_fitting(results, 100_000, 0.1, 1_000_000) == 0


def test_a_small_run_prints_the_table_the_goals_and_the_check():
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--passages", "3000", "--questions", "12",
         "--vocabulary", "4000", "--check", "4", "--scale-to", "0",
         "--methods", "custom,sklearn"],
        capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "== 3,000 passages" in out
    assert "TfidfRetriever (inverted index)" in out and "scikit-learn TfidfVectorizer" in out
    assert "fit vs scikit-learn" in out and "peak memory vs scikit-learn" in out
    assert "one question vs bm25s" not in out  # bm25s was left out
    assert "Check: the custom top 3 equals a brute-force computation" in out
    assert "building the returned DataFrame alone takes" in out


def test_unknown_methods_are_refused():
    done = subprocess.run([sys.executable, str(SCRIPT), "--methods", "custom,lucene"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    assert "unknown methods ['lucene']" in done.stderr
