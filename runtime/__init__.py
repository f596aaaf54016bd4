"""The machinery that serves the lessons; a student need not open it.

What the lessons teach lives in ``helpers/``. This package loads and validates the
fixture, runs or replays the readers (live, recorded, server), batches their prompts,
keeps the model cache and the transcript of recorded replies, checks reviews, shows
tables, and offers one command line (``python -m runtime``). A lesson imports only the
entry points below, by name (``from runtime import load_reader, show_table``); so do the
exercises' checks. A taught module never imports the runtime: it is given what it needs
as an argument. ``tests/test_structure.py`` keeps it so.
"""
from __future__ import annotations

import importlib

#: Every name a lesson or an exercise check may import from the runtime, and its module.
ENTRY_POINTS = {
    # the fixture (lesson 1, "Load the reader and the handbook")
    "load_riverton": "fixture", "load_attack_fixture": "fixture", "read_metadata": "fixture",
    "QUESTIONS_FILE": "fixture", "EXTENDED_QUESTIONS_FILE": "fixture", "DATA_DIR": "paths",
    "PROJECT_ROOT": "paths",
    # readers (lesson 1, "Ask the reader for two lines"; lessons 2-5)
    "load_reader": "readers", "generate_all": "readers", "mode_sentence": "readers",
    "live_check": "readers",
    "ReplayError": "readers",
    "load_encoder": "encoder", "ENGINES": "server", "UNKNOWN_ENGINE": "server",
    # the page
    "show_table": "display", "show_source": "display", "Markdown": "display",
    "interactive_tables": "display", "check_claim": "claims", "pipeline_figure": "figures",
    "QuestionProgress": "progress",
    # lesson 4's review
    "recorded_replies": "reviews", "load_review": "reviews", "load_student_reviews": "reviews",
    "write_template": "reviews", "reviews_dir": "reviews", "system_label": "reviews",
    "retriever_of": "reviews", "judge_replies": "reviews", "review_requests": "reviews",
    "ReviewError": "reviews", "JUDGMENT_COLUMNS": "reviews", "fit_retriever": "lessons",
    "load_corruptions": "reviews", "load_second_reading": "reviews",
    # lesson 5's runs
    "run_attacks": "attack_runs", "ordinary_inputs": "attack_runs", "run_name": "attack_runs",
    "attack_prompts": "attack_runs", "heldout_questions": "plan", "read_plan": "plan",
}

__all__ = sorted(ENTRY_POINTS)


def __getattr__(name: str):
    """Import an entry point's module only when the name is first asked for."""
    if name not in ENTRY_POINTS:
        raise AttributeError(f"module 'runtime' has no entry point {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{ENTRY_POINTS[name]}"), name)
