"""The analysis plan (``data/riverton/analysis-plan.md``): what it froze, and its held-out data.

The plan names, before the data they are judged on existed, each rule lessons 4 and 5 fit
and the questions each was tuned on. :func:`heldout_questions` loads the held-out routing
questions and refuses one that the plan lists as used for tuning or seen before it froze
(by ID, or by wording), so that no held-out figure can be computed on one.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import yaml

from .fixture import EXTENDED_QUESTIONS_FILE, QUESTIONS_FILE, FixtureError, PathLike, load_riverton
from .paths import DATA_DIR

PLAN_FILE = "analysis-plan.md"


def read_plan(data_dir: PathLike = DATA_DIR) -> dict:
    """The plan's machine-readable part: the YAML between its first two ``---`` lines."""
    path = Path(data_dir) / PLAN_FILE
    parts = path.read_text(encoding="utf-8").split("---\n")
    if len(parts) < 3 or parts[0]:
        raise FixtureError(path, "does not open with its YAML part between two '---' lines")
    return yaml.safe_load(parts[1])


def _wording(question: str) -> str:
    return " ".join(question.lower().split())


def heldout_questions(data_dir: PathLike = DATA_DIR) -> pd.DataFrame:
    """The plan's held-out routing questions, validated, none of them a tuning question."""
    routing = read_plan(data_dir)["routing"]
    name = Path(routing["held_out_file"]).name
    questions = load_riverton(data_dir, name).questions
    used = set(routing["tuning_questions"]) | set(routing["seen_questions"])
    tuned = {_wording(q): q_id for file in (QUESTIONS_FILE, EXTENDED_QUESTIONS_FILE)
             for q_id, q in load_riverton(data_dir, file).questions[
                 ["question_id", "question"]].itertuples(index=False)}
    for number, (q_id, question) in enumerate(zip(questions["question_id"],
                                                  questions["question"]), start=1):
        if q_id in used or _wording(question) in tuned:
            same = q_id if q_id in used else tuned[_wording(question)]
            raise FixtureError(Path(data_dir) / name, f"question {q_id} is {same}, which the "
                               f"analysis plan lists as used for tuning: a held-out figure "
                               f"may not be computed on it", row=number, column="question_id")
    return questions
