"""The same book on a second machine: every lesson executed again under another CPU code path.

A figure computed from a model's floats can hold where its sentence was written and move
on the next laptop. So each lesson runs a second time, in a clean kernel, as another
machine would run it: torch without its vectorised kernels (``ATEN_CPU_CAPABILITY=default``),
MKL and oneDNN held to older instruction sets, OpenBLAS (numpy's) on a generic core, one
thread everywhere, and another batch of prompts (``RIVERTON_BATCH_SIZE``). Its guards stop
at any sentence whose figures change, as they would in a book build; then every output
(tables, figures, printed and computed lines) is compared with the session's own
execution, cell by cell, with ``scripts/compare_executed.py``'s rules: only timings,
paths, random ids and where a model was loaded from may differ. A live check (this
machine's live replies beside the recorded ones) is machine-dependent by design; a
difference there is reported as a warning, not a failure.
"""
from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path

import pytest

from lesson_outputs import LessonRun
from runtime.paths import LESSONS_DIR, PROJECT_ROOT

#: The second machine: another CPU code path, thread count and batch size.
SECOND_MACHINE = {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
                  "ONEDNN_MAX_CPU_ISA": "SSE41", "OPENBLAS_CORETYPE": "Prescott", "OMP_NUM_THREADS": "1",
                  "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "RIVERTON_BATCH_SIZE": "3"}

LESSONS = sorted(p.relative_to(PROJECT_ROOT).as_posix() for p in LESSONS_DIR.glob("[0-9][0-9]-*.ipynb"))


def _comparison():
    script = PROJECT_ROOT / "scripts" / "compare_executed.py"
    spec = importlib.util.spec_from_file_location("compare_executed", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


compare_executed = _comparison()


def test_the_second_machine_differs_from_the_first():
    """Each setting names a real switch, and the batch differs from the default one."""
    from runtime.batch import DEFAULT_BATCH_SIZE

    assert int(SECOND_MACHINE["RIVERTON_BATCH_SIZE"]) != DEFAULT_BATCH_SIZE
    assert len(LESSONS) == 5


def test_the_comparison_ignores_noise_and_keeps_meaning():
    """Timings and the model's loading line may differ; a figure may not; a live check that
    differs is set apart."""
    def nb(*outputs):
        return {"cells": [{"cell_type": "code", "id": f"c{i}", "source": "x", "outputs": [o]}
                          for i, o in enumerate(outputs)]}

    def stream(text):
        return {"output_type": "stream", "name": "stdout", "text": text}

    def markdown(text):
        return {"output_type": "display_data", "data": {"text/markdown": text}}

    first = nb(stream("Loading m from its GGUF file: dequantising\nLoaded in 3.1 seconds"),
               markdown("AUC 0.82"), markdown("**Live check:** 6 of the 6 prompts"))
    same = nb(stream("Loading m from the dequantised cache\nLoaded in 0.4 seconds"),
              markdown("AUC 0.82"), markdown("**Live check:** 6 of the 6 prompts"))
    assert compare_executed.compare_cells(first, same) == ([], [])
    moved = nb(stream("Loading m\nLoaded in 1 s"), markdown("AUC 0.83"),
               markdown("**Live check:** 5 of the 6 prompts"))
    problems, machine = compare_executed.compare_cells(first, moved)
    assert len(problems) == 1 and "AUC 0.83" in problems[0]
    assert len(machine) == 1 and "5 of the 6" in machine[0]


@pytest.mark.slow
@pytest.mark.parametrize("lesson", LESSONS)
def test_every_claim_and_table_is_the_same_on_a_second_machine(book, lesson):
    first = book.lesson(lesson)
    second = LessonRun(book.root, lesson, dict(book.env, **SECOND_MACHINE))
    try:
        problems, machine = compare_executed.compare_cells(first.nb, second.nb)
    finally:
        second.close()
    for note in machine:
        warnings.warn(f"{Path(lesson).name}, machine-dependent: {note}", stacklevel=1)
    assert problems == [], (f"{Path(lesson).name} shows other outputs under "
                            f"{SECOND_MACHINE}:\n" + "\n".join(problems))
