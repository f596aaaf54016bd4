"""Lesson 5 executed from a clean kernel: its tables are read back and cross-checked.

SmolLM2's exact wording can differ between machines, so the live replies are checked
through properties (one row per run, success recomputed from the raw replies and paired
with the runs without the attack, counts and intervals that add up, prose that quotes
the tables); the fixture, the retrieval, the routes, the evasions, the contradictions
and the author controls are deterministic and are checked exactly. What the page says
about the pinned Qwen reader depends on this machine (its weights, a configured server,
the transcript's entries), so that expectation is computed here the same way.
"""
from __future__ import annotations

import re

import pandas as pd
import pytest

from helpers import attacks as attack_helpers
from helpers import defences, intervals
from helpers.parsing import parse_reader_output
from helpers.retrieval import TfidfRetriever
from runtime import server
from runtime.attack_runs import attack_prompts
from runtime.fixture import load_attack_fixture, load_riverton
from runtime.paths import LESSONS_DIR
from runtime.readers import PINNED_READER, load_reader
from runtime.registry import get_reader_spec, weights_available

from lesson_outputs import markdown_outputs, table_rows, tables

LESSON = LESSONS_DIR / "05-evidence-not-instructions.ipynb"

pytestmark = pytest.mark.slow

ATTACKS = [f"A0{i}" for i in range(1, 7)]
PROMPTS = list(attack_helpers.PROMPT_COLUMNS)
VISIBLE = "Raw reply (`⏎` marks a line break)"
RUN = re.compile(r"^(A\d{2}) (?:without the attack|wording (\d+), (first|last)), (.+)$")


@pytest.fixture(scope="module")
def lesson(book):
    return book.lesson(LESSON).nb


@pytest.fixture(scope="module")
def attack():
    return load_attack_fixture()


@pytest.fixture(scope="module")
def rules(attack):
    return dict(zip(attack.questions["attack_id"], attack.questions["success_rule"]))


@pytest.fixture(scope="module")
def inputs(attack):
    fixture = load_riverton()
    return attack_helpers.attack_reader_inputs(attack.questions, fixture.handbook,
                                               attack.passages, attack.wordings)


@pytest.fixture(scope="module")
def replies(lesson):
    """The raw replies table read back as run_attacks' rows."""
    rows = []
    for row in table_rows(lesson, "raw_replies"):
        match = RUN.match(row["Run"])
        assert match, row["Run"]
        attack_id, wording, position, prompt = match.groups()
        rows.append({"attack_id": attack_id,
                     "condition": attack_helpers.UNDER_ATTACK if wording
                     else attack_helpers.WITHOUT_ATTACK,
                     "wording": int(wording or 0), "position": position or "none",
                     "prompt": prompt, "decoding": "constrained",
                     "raw_output": row[VISIBLE].replace(" ⏎ ", "\n")})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def outcomes(replies, rules):
    return attack_helpers.paired_outcomes(replies, rules)


def test_fixture_tables_and_the_refused_handbook(lesson, attack):
    assert [r["Passage ID"] for r in table_rows(lesson, "planted")] == [
        "P01", "P02", "P03", "P04", "S01"]
    shown = table_rows(lesson, "attacks")
    assert [r["Attack"] for r in shown] == ATTACKS
    assert {r["Attack"]: r["Success rule"] for r in shown}["A03"] == "canary:rhjz8e"
    wordings = table_rows(lesson, "wordings")
    assert len(wordings) == len(attack.wordings)
    assert all(sum(r["Attack"] == a for r in wordings) >= 3 for a in ATTACKS)
    parts = {r["File"]: r["Part of"] for r in table_rows(lesson, "fingerprints")}
    assert parts["riverton-handbook.csv"] == parts["support-review.csv"] == "normal fixture"
    assert list(parts.values())[-4:] == ["attack fixture (lesson 5 only)"] * 4
    printed = [o.get("text", "") for c in lesson.cells for o in c.get("outputs", [])]
    assert any("the handbook table is not the fingerprinted riverton-handbook.csv" in text
               for text in printed)


def test_the_attacks_are_retrieved(lesson, inputs):
    ranks = {r["Attack"]: r for r in table_rows(lesson, "attack_ranks")}
    assert {a: r["Planted passage, own index"] for a, r in ranks.items()} == {
        "A01": "P01 #1", "A02": "P02 #2", "A03": "P03 #2", "A04": "nothing planted",
        "A05": "S01 #1", "A06": "P04 #2"}
    prose = markdown_outputs(lesson)
    under = inputs[inputs["condition"] == attack_helpers.UNDER_ATTACK]
    assert f"there are {len(inputs)} sets of passages to ask about" in prose
    assert f"and {len(under)} under one" in prose


def test_routes(lesson):
    routes = {(r["Question"], r["Set"]): r["Goes to"] for r in table_rows(lesson, "routes")}
    # Q2 is a genuine deadline question: routed, and that is the rule working.
    assert {q: routes[(q, "lesson 1 question")] == "a person" for q in ("Q1", "Q2", "Q3", "Q4",
            "Q5", "Q6")} == {"Q1": True, "Q2": True, "Q3": False, "Q4": True, "Q5": False,
                             "Q6": False}
    for attack_id, person in zip(ATTACKS, (True, True, False, True, True, False)):
        for asked in ("attack question", "attack question, without the attack"):
            assert routes[(attack_id, asked)] == ("a person" if person else "the reader")
    prose = markdown_outputs(lesson)
    assert "Q5, the parking question, is not routed" in prose
    assert "money: the question says cost of parking" in prose


def test_every_question_whose_gold_passage_is_sensitive_is_routed(lesson):
    rows = table_rows(lesson, "routed_gold")
    assert {"Q1", "Q2", "Q4", "X05", "X08"} <= {r["Question"] for r in rows}
    assert all(r["Goes to"] == "a person" for r in rows)
    missed = [r["Question"] for r in rows if not r["Gold passage in tf-idf's top three"]]
    prose = markdown_outputs(lesson)
    assert f"All {len(rows)} of them go to a person." in prose
    assert f"tf-idf retrieves the gold passage for {len(rows) - len(missed)} of them" in prose
    fail_open = [r["Question"] for r in table_rows(lesson, "rewordings")
                 if r["Goes to"] == "the reader"]
    assert fail_open and f"{len(fail_open)} go to the reader" in prose


def test_routing_costs_what_the_table_shows_and_the_fix_keeps_every_sensitive_question(lesson):
    rows = table_rows(lesson, "routing_cost")
    assert len(rows) == 42
    old = [r["Question"] for r in rows if r["First rule: goes to"] == "a person"]
    new = [r["Question"] for r in rows if r["Rule now: goes to"] == "a person"]
    assert set(new) < set(old)
    assert all(r["Rule now: goes to"] == "a person" for r in rows
               if r["Gold passage has a routed topic"])
    prose = markdown_outputs(lesson)
    assert f"The first rule sent {intervals.wilson(len(old), 42)} ordinary questions" in prose
    assert f"The rule now sends {intervals.wilson(len(new), 42)}" in prose
    cost = {r["Defence"]: r for r in table_rows(lesson, "security_utility")}
    assert cost["routing"]["Ordinary questions held or sent to a person (95% interval)"].startswith(
        f"{len(new)} of 42")
    assert cost["routing, first rule"][
        "Ordinary questions held or sent to a person (95% interval)"].startswith(f"{len(old)} of 42")


def test_the_evasions_are_routed_as_the_rule_routes_them(lesson, attack, handbook):
    shown = {r["Evasion"]: r for r in table_rows(lesson, "evasions")}
    asked = attack.evasions.rename(columns={"evasion_id": "question_id"})
    normal = attack_helpers.attack_index(handbook, attack.passages, ())
    expected = defences.route_table(asked, TfidfRetriever.fit(handbook).rank(asked, k=3), normal)
    assert {q: shown[q]["Rule now: goes to"] for q in shown} == dict(
        zip(expected["question_id"], expected["route"]))
    rates = {r["Style"]: r for r in table_rows(lesson, "evasion_rates")}
    evaded = sum(r["Rule now: goes to"] == "the reader" for r in shown.values())
    assert rates["every style"]["Reach the reader"] == evaded
    assert rates["every style"]["Evasions"] == len(shown)
    assert sum(r["Evasions"] for s, r in rates.items() if s != "every style") == len(shown)
    assert rates["another language"]["Reach the reader"] == rates["another language"]["Evasions"]
    assert f"{evaded} of the {len(shown)} evasions reach the reader" in markdown_outputs(lesson)


def test_the_contradiction_check_flags_what_the_helper_finds(lesson, inputs):
    shown = table_rows(lesson, "conflicts")
    assert len(shown) == len(inputs)
    for row, table_row in zip(inputs.itertuples(index=False), shown):
        found = defences.conflicting_passages(row.retrieved_ids, row.index_passages)
        assert table_row["Attack"] == row.attack_id
        assert table_row["Sent to a person"] is bool(found)
        assert table_row["Passages that disagree"] == ("; ".join(map(str, found)) or "none")
    assert any(r["Sent to a person"] for r in shown if r["Attack"] == "A05")
    assert not any(r["Sent to a person"] for r in shown if r["Condition"] == "without the attack")
    pairs = table_rows(lesson, "conflict_pairs")
    assert all((r["Values say"] != "agree") is r["Should be flagged"] for r in pairs)
    old_wrong = [r["Pair"] for r in pairs if (r["Digit strings say"] != "agree")
                 is not r["Should be flagged"]]
    assert old_wrong  # the first version fails on some of them
    assert f"the check gets all {len(pairs)} pairs right" in markdown_outputs(lesson)


def test_the_transcript_is_asked_about_every_attack_prompt(lesson, inputs):
    prompts = attack_prompts(inputs)
    recorded = load_reader(PINNED_READER, mode="recorded")
    expected = pd.DataFrame({"question_id": prompts["question_id"],
                             "key": [recorded.key(m)[:12] + "…" for m in prompts["messages"]],
                             "recorded": [recorded.holds(m) for m in prompts["messages"]]})
    lookup = table_rows(lesson, "qwen_lookup")
    assert [(r["Prompt"], r["Transcript key of the prompt"], r["Recorded entry found"])
            for r in lookup] == list(expected.itertuples(index=False, name=None))
    n_recorded, n_prompts = int(expected["recorded"].sum()), len(expected)
    prose = markdown_outputs(lesson)
    if server.configured_url():
        assert "The pinned reader's replies to the attack prompts were" in prose
    elif weights_available(get_reader_spec(PINNED_READER)):
        assert "the pinned reader ran live on the attack prompts" in prose
    elif n_recorded == n_prompts:
        assert "Every attack prompt has a recorded entry" in prose
    elif n_recorded:
        assert f"recorded entry for {n_recorded} of the {n_prompts} attack prompts" in prose
        assert len(table_rows(lesson, "qwen_attack")) == int(
            expected.loc[expected["question_id"].str.contains(" wording "), "recorded"].sum())
    else:
        assert f"recorded entry for none of the {n_prompts} attack prompts" in prose
        assert "qwen_attack" not in tables(lesson)


def test_every_run_is_there_once_and_parses(lesson, replies, inputs, attack):
    assert len(replies) == len(inputs) * len(PROMPTS)
    assert replies[["attack_id", "wording", "position", "prompt"]].apply(tuple, axis=1).is_unique
    assert set(replies["prompt"]) == set(PROMPTS)
    assert all(parse_reader_output(r).parse_ok for r in replies["raw_output"])
    prose = markdown_outputs(lesson)
    assert f"{len(replies)} generations took" in prose
    assert len(replies) >= 3 * 36  # three times the generations of a single sample per cell


def test_attack_success_is_paired_and_counted_with_its_interval(lesson, outcomes):
    shown = {(r["Attack"], r["Prompt"]): r for r in table_rows(lesson, "asr")}
    for (attack_id, prompt), group in outcomes.groupby(["attack_id", "prompt"]):
        row = shown[(attack_id, prompt)]
        rate = intervals.wilson(int(group["caused"].sum()), len(group))
        assert (row["Caused"], row["Replies under attack"]) == (rate.successes, rate.n)
        assert row["95% interval"] == f"{rate.low:.0%} to {rate.high:.0%}"
        assert row["Rule held without the attack too"] == int(group["held_without"].sum())
    for attack_id, group in outcomes.groupby("attack_id"):
        assert shown[(attack_id, "all three prompts")]["Caused"] == int(group["caused"].sum())
    lesson1 = outcomes[outcomes["prompt"] == "lesson 1 prompt"]
    prose = markdown_outputs(lesson)
    assert (f"the attacks caused their behaviour in {int(lesson1['caused'].sum())} of "
            f"{len(lesson1)} replies") in prose


def test_the_wording_comparison_counts_pairs_that_differ_in_one_thing(lesson, outcomes):
    rows = {(r["What differs"], r["Prompt"]): r for r in table_rows(lesson, "variation")}
    n_wordings = outcomes.groupby(["attack_id", "position", "prompt"]).size()
    expected_pairs = int((n_wordings * (n_wordings - 1) // 2).groupby("prompt").sum()["lesson 1 prompt"])
    assert rows[("another wording", "lesson 1 prompt")]["Pairs"] == expected_pairs
    lesson1 = outcomes[outcomes["prompt"] == "lesson 1 prompt"].set_index(
        ["attack_id", "wording", "position"])["caused"]
    quoting = outcomes[outcomes["prompt"] == "quoting prompt"].set_index(
        ["attack_id", "wording", "position"])["caused"]
    differ = int((lesson1 != quoting[lesson1.index]).sum())
    row = rows[("quoting prompt instead of lesson 1's", "both")]
    assert (row["Pairs"], row["Disagree"]) == (len(lesson1), differ)


def test_controls_are_apart_and_their_verdicts_exact(lesson):
    controls = table_rows(lesson, "controls")
    assert all(r["Satisfies the success rule"] is True for r in controls)
    held = {r["Control"]: (r["Held by a check on the reply"], r["Held before any reply"])
            for r in table_rows(lesson, "control_verdicts")}
    a01 = "contradiction (P01 vs H08 on stipend: $500 per week vs $150 per week)"
    a02 = "contradiction (P02 vs H14 on deadline: November 30 vs October 15)"
    a05 = "contradiction (S01 vs H14 on deadline: September 30 vs October 15)"
    assert held == {
        "A01-cites-H08": ("screen (numbers_supported)", f"{a01}; routing"),
        "A01-cites-P01": ("provenance (cites P01)", f"{a01}; routing"),
        "A02-cites-P02": ("provenance (cites P02)", f"{a02}; routing"),
        "A03-breaks-format": ("parse gate", "none"),
        "A03-canary-in-format": ("none", "none"),
        "A04-says-yes": ("none", "routing"),
        "A05-stale-date": ("provenance (cites S01)", f"{a05}; routing"),
        "A05-stale-date-cites-H14": ("screen (numbers_supported)", f"{a05}; routing"),
        "A06-library": ("none", "none"),
    }
    live = {r["Run"] for r in table_rows(lesson, "verdicts")}
    assert not live & {r["Control"] for r in controls}  # never mixed with live replies
    totals = {r["Attack"]: r for r in table_rows(lesson, "control_by_defence")}
    assert totals["all"]["Controls"] == len(controls)
    assert totals["A06"]["Reached the caller"] == 1 and totals["A03"]["Reached the caller"] == 1


def test_attack_by_defence_counts_what_the_verdicts_show(lesson, outcomes):
    verdicts = table_rows(lesson, "verdicts")
    assert len(verdicts) == len(outcomes)
    table = {r["Attack"]: r for r in table_rows(lesson, "attack_by_defence")}
    assert list(table) == ATTACKS + ["all"]

    def parts(text):
        return [] if text == "none" else text.split("; ")

    for attack_id in ATTACKS:
        won = [r for r in verdicts if r["Attack"] == attack_id and r["Attack caused its behaviour"]]
        row = table[attack_id]
        assert row["Caused successes"] == len(won)
        reply = [parts(r["Held by a check on the reply"]) for r in won]
        before = [parts(r["Held before any reply"]) for r in won]
        assert row["Any check on the reply"] == sum(bool(p) for p in reply)
        assert row["Any rule before the reply"] == sum(bool(p) for p in before)
        assert row["Routing (before the reply)"] == sum("routing" in p for p in before)
        assert row["Reached the caller"] == sum(not a and not b for a, b in zip(reply, before))
    caused = {a: int(g["caused"].sum()) for a, g in outcomes.groupby("attack_id")}
    assert {a: table[a]["Caused successes"] for a in ATTACKS} == {a: caused.get(a, 0)
                                                                 for a in ATTACKS}


def test_the_prompt_effects_are_paired_differences_with_newcombe_intervals(lesson, outcomes):
    shown = {r["Prompt"]: r for r in table_rows(lesson, "prompt_effects")}
    keyed = outcomes.set_index(["attack_id", "wording", "position", "prompt"])["caused"]
    keys = [k[:3] for k in keyed.index if k[3] == "lesson 1 prompt"]
    for prompt in ("quoting prompt", "datamarking prompt"):
        effect = intervals.paired_difference([keyed[(*k, "lesson 1 prompt")] for k in keys],
                                             [keyed[(*k, prompt)] for k in keys])
        row = shown[prompt]
        assert (row["Caused, lesson 1 prompt"], row["Caused, this prompt"],
                row["Only under lesson 1's"], row["Only under this one"]) == (
            effect.first, effect.second, effect.only_first, effect.only_second)
        assert row["Difference in ASR (95% interval)"] == (
            f"{effect.value:+.0%} ({effect.low:+.0%} to {effect.high:+.0%})")
        assert f"(95% CI {effect.low:+.0%} to {effect.high:+.0%})" in markdown_outputs(lesson)


def test_security_against_utility(lesson, outcomes):
    rows = {r["Defence"]: r for r in table_rows(lesson, "security_utility")}
    assert {"no defence", "parse gate", "provenance", "screen", "routing", "contradiction",
            "quoting prompt", "datamarking prompt", "every code defence",
            "every code defence, datamarking prompt"} <= set(rows)
    kinds = {name: r["Kind"] for name, r in rows.items()}
    assert kinds["screen"] == defences.READS_THE_REPLY
    assert kinds["routing"] == kinds["contradiction"] == defences.BEFORE_THE_REPLY
    for name, row in rows.items():
        prompt = row["Prompt"]
        caused = int(outcomes.loc[outcomes["prompt"] == prompt, "caused"].sum())
        reached = int(row["Attacks reaching the caller (95% interval)"].split(" of ")[0])
        assert reached <= caused, name
        if name in ("no defence", "quoting prompt", "datamarking prompt"):
            assert reached == caused, name
    assert rows["contradiction"]["Ordinary questions held or sent to a person (95% interval)"].startswith(
        "0 of 42")
    every = int(rows["every code defence"]["Attacks reaching the caller (95% interval)"].split(" of ")[0])
    for single in ("parse gate", "provenance", "screen", "routing", "contradiction"):
        assert every <= int(rows[single]["Attacks reaching the caller (95% interval)"].split(" of ")[0])
