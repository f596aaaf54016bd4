"""The analysis plan (data/riverton/analysis-plan.md) froze lesson 4's and 5's rules: a rule
that changes without a dated change in the plan fails here, and the plan's question lists
match the data."""
from __future__ import annotations

import hashlib
import json

import pandas as pd
import pytest
import yaml

from runtime.paths import DATA_DIR, PROJECT_ROOT

PLAN = DATA_DIR / "analysis-plan.md"


def _sha(value) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture(scope="module")
def plan() -> dict:
    front = PLAN.read_text(encoding="utf-8").split("---\n")[1]
    return yaml.safe_load(front)


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
