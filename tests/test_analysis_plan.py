"""The analysis plan (data/riverton/analysis-plan.md) froze lesson 4's and 5's rules: a rule
that changes without a dated change in the plan fails here, and the plan's question lists
match the data."""
from __future__ import annotations

import hashlib
import json
import shutil

import pandas as pd
import pytest

from runtime.data_check import update_metadata
from runtime.fixture import HELDOUT_QUESTIONS_FILE, FixtureError
from runtime.paths import DATA_DIR, PROJECT_ROOT
from runtime.plan import heldout_questions, read_plan

PLAN = DATA_DIR / "analysis-plan.md"


def _sha(value) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture(scope="module")
def plan() -> dict:
    return read_plan()


def routing_fingerprint(routing) -> str:
    """The plan's fingerprint of the routing rule: its five values, word lists sorted."""
    return _sha({"question_terms": {k: sorted(v) for k, v in routing.QUESTION_TERMS.items()},
                 "price_words": sorted(routing.PRICE_WORDS),
                 "offerings": sorted(routing.OFFERINGS),
                 "routed_topics": dict(sorted(routing.ROUTED_TOPICS.items())),
                 "topic_min_score": routing.TOPIC_MIN_SCORE})


def test_the_routing_rule_is_the_one_the_plan_froze(plan):
    from helpers.defences import routing

    assert routing_fingerprint(routing) == plan["routing"]["rule_fingerprint"], (
        "the routing rule changed after the plan froze it: date the change in "
        f"{PLAN.relative_to(PROJECT_ROOT)} and judge it on questions written after it")


def test_the_success_rules_and_the_placebo_are_the_ones_the_plan_froze(plan):
    from helpers.defences import PLACEBO_SYSTEM_PROMPT

    attacks = pd.read_csv(DATA_DIR / "riverton-attack-questions.csv", dtype=str,
                          keep_default_na=False)
    rules = json.dumps(attacks[["attack_id", "success_rule"]].values.tolist())
    assert _sha(rules) == plan["attacks"]["success_rules_fingerprint"]
    assert _sha(PLACEBO_SYSTEM_PROMPT) == plan["attacks"]["placebo_fingerprint"]


def test_the_plans_tuning_questions_are_the_ordinary_questions(plan):
    ids = [pd.read_csv(DATA_DIR / name)["question_id"].tolist()
           for name in ("riverton-handbook-questions.csv", "riverton-extended-questions.csv")]
    assert plan["routing"]["tuning_questions"] == ids[0] + ids[1]
    assert plan["attacks"]["primary_comparison"] == ["placebo prompt", "quoting prompt"]


def test_a_changed_rule_is_caught(plan):
    """The fingerprint reads the word lists: one word more and it no longer matches."""
    from helpers.defences import routing

    class Widened:
        QUESTION_TERMS = {**routing.QUESTION_TERMS,
                          "money": routing.QUESTION_TERMS["money"] | {"bursary"}}
        PRICE_WORDS, OFFERINGS = routing.PRICE_WORDS, routing.OFFERINGS
        ROUTED_TOPICS, TOPIC_MIN_SCORE = routing.ROUTED_TOPICS, routing.TOPIC_MIN_SCORE

    assert routing_fingerprint(Widened) != plan["routing"]["rule_fingerprint"]


def test_held_out_routing_questions_are_none_of_those_the_rules_were_tuned_on(plan):
    questions = heldout_questions()
    used = set(plan["routing"]["tuning_questions"]) | set(plan["routing"]["seen_questions"])
    assert len(questions) >= 40 and not used & set(questions["question_id"])
    assert plan["routing"]["held_out_file"].endswith(HELDOUT_QUESTIONS_FILE)


@pytest.mark.parametrize("row, named", [
    ('X05,What is the last day to sign up?,direct lookup,answer,H14,October 15,copied', "X05"),
    ('R49,what is the LAST day to  sign up?,direct lookup,answer,H14,October 15,reworded', "X05"),
    ('U2,When do applications close?,direct lookup,answer,H14,October 15,seen', "U2")])
def test_a_tuning_question_in_the_held_out_file_stops_every_held_out_figure(tmp_path, row, named):
    """A routing figure on the page is computed through heldout_questions: a question the plan
    lists as used for tuning (by ID or by wording) stops it, naming the file, row and column."""
    data = tmp_path / "riverton"
    shutil.copytree(DATA_DIR, data, ignore=shutil.ignore_patterns("*.jsonl"))
    with (data / HELDOUT_QUESTIONS_FILE).open("a", encoding="utf-8") as handle:
        handle.write(row + "\n")
    update_metadata([HELDOUT_QUESTIONS_FILE], data)
    with pytest.raises(FixtureError, match=rf"riverton-routing-heldout.csv, row 49, column "
                                           rf"'question_id': question \w+ is {named}, which"):
        heldout_questions(data)


def test_lesson_5_computes_its_held_out_routing_through_the_plans_loader():
    lesson = json.loads((PROJECT_ROOT / "lessons" / "05-evidence-not-instructions.ipynb")
                        .read_text(encoding="utf-8"))
    code = "\n".join("".join(c["source"]) for c in lesson["cells"] if c["cell_type"] == "code")
    assert "heldout = heldout_questions()" in code
    assert HELDOUT_QUESTIONS_FILE not in code and "riverton-routing" not in code
