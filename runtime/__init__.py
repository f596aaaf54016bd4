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

#: The names a lesson or an exercise check may import from the runtime, by module.
_NAMES = {
    # the fixture (lesson 1, "Load the reader and the handbook")
    "fixture": "load_riverton load_attack_fixture read_metadata QUESTIONS_FILE "
               "EXTENDED_QUESTIONS_FILE BLIND_READING_FILE",
    "paths": "DATA_DIR PROJECT_ROOT",
    # readers (lesson 1, "Ask the reader for two lines"; lessons 2-5)
    "readers": "load_reader generate_all mode_sentence live_check ReplayError",
    "encoder": "load_encoder", "server": "ENGINES UNKNOWN_ENGINE",
    # the page
    "display": "show_table show_source Markdown interactive_tables", "claims": "check_claim",
    "figures": "pipeline_figure", "progress": "QuestionProgress",
    # lesson 4's review
    "reviews": "recorded_replies load_review load_student_reviews write_template reviews_dir "
               "system_label retriever_of judge_replies review_requests ReviewError "
               "JUDGMENT_COLUMNS load_corruptions load_second_reading",
    "lessons": "fit_retriever",
    # lesson 5's runs
    "attack_runs": "run_attacks ordinary_inputs run_name attack_prompts",
    "plan": "heldout_questions read_plan",
}
#: Every entry point and its module.
ENTRY_POINTS = {name: module for module, names in _NAMES.items() for name in names.split()}

__all__ = sorted(ENTRY_POINTS)


def __getattr__(name: str):
    """Import an entry point's module only when the name is first asked for."""
    if name not in ENTRY_POINTS:
        raise AttributeError(f"module 'runtime' has no entry point {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{ENTRY_POINTS[name]}"), name)
