"""benchmarks/bench_reader.py: its closing note follows the figures it measured.

Nothing here runs the benchmark or times anything; it checks the sentence the script
prints about the concurrency bound against the server timings it is given.
"""
from __future__ import annotations

import pytest

from runtime.paths import PROJECT_ROOT

SCRIPT = PROJECT_ROOT / "benchmarks" / "bench_reader.py"  # loaded by the `bench` fixture


@pytest.mark.parametrize("sequential, batched, verdict", [
    (2.0, 0.5, "the bound paid on this server"),            # a batching engine
    (2.0, 1.96, "so the bound bought nothing on this server"),  # one request at a time
    (2.0, 2.5, "the bound cost time on this server"),
])
def test_the_note_on_the_bound_follows_the_measured_figures(bench, sequential, batched, verdict):
    sentence = bench.bound_sentence(sequential, batched, 4)
    assert verdict in sentence
    others = {"the bound paid on this server", "so the bound bought nothing on this server",
              "the bound cost time on this server"} - {verdict}
    assert not any(other in sentence for other in others)
    assert f"took {batched:.2f} s per question against {sequential:.2f} s" in sentence
    assert f"({sequential / batched:.2f}x the speed)" in sentence
