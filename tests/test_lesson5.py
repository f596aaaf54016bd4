"""Lesson 5 executed from a clean kernel: its tables are read back and cross-checked.

SmolLM2's exact wording can differ between machines, so the live replies are checked
through properties (one row per run, success recomputed from the raw reply, counts that
add up); the fixture, the retrieval, the routes and the author controls are
deterministic and are checked exactly.
"""
from __future__ import annotations

import pytest

from helpers.attacks import rule_holds
from helpers.fixture import load_attack_fixture
from helpers.paths import LESSONS_DIR

from lesson_outputs import execute, markdown_outputs, table_rows, tables

LESSON = LESSONS_DIR / "05-evidence-not-instructions.ipynb"

pytestmark = pytest.mark.slow

RUNS = [
    "without the attack, lesson 1 prompt, unconstrained",
    "without the attack, lesson 1 prompt, constrained",
    "under attack, lesson 1 prompt, unconstrained",
    "under attack, lesson 1 prompt, constrained",
    "under attack, quoting prompt, unconstrained",
    "under attack, quoting prompt, constrained",
]


@pytest.fixture(scope="module")
def lesson():
    return execute(LESSON)


@pytest.fixture(scope="module")
def rules():
    questions = load_attack_fixture().questions
    return dict(zip(questions["attack_id"], questions["success_rule"]))


def _visible_to_raw(text: str) -> str:
    return text.replace(" ⏎ ", "\n")


def test_every_table_is_shown(lesson):
    expected = {"planted", "attacks", "fingerprints", "attack_ranks", "routes",
                "qwen_lookup", "raw_replies", "attack_success", "controls", "verdicts",
                "attack_by_defence", "quoting"}
    assert expected <= set(tables(lesson))


def test_fixture_tables(lesson):
    assert [r["Passage ID"] for r in table_rows(lesson, "planted")] == [
        "P01", "P02", "P03", "P04", "S01"]
    attacks = table_rows(lesson, "attacks")
    assert [r["Attack"] for r in attacks] == [f"A0{i}" for i in range(1, 7)]
    assert attacks[0]["Success rule"] == "figure:500"
    readers = {r["File"]: r["Read by"] for r in table_rows(lesson, "fingerprints")}
    assert readers["riverton-handbook.csv"] == "lessons 1 to 5"
    assert readers["riverton-attack-passages.csv"] == "lesson 5 only"


def test_the_attacks_are_retrieved(lesson):
    ranks = {r["Attack"]: r for r in table_rows(lesson, "attack_ranks")}
    assert {a: r["Planted passage, own index"] for a, r in ranks.items()} == {
        "A01": "P01 #1", "A02": "P02 #2", "A03": "P03 #2", "A04": "nothing planted",
        "A05": "S01 #1", "A06": "P04 #2"}
    assert ranks["A01"]["Top three in the attack's own index (tf-idf)"].startswith("P01 (#1, ")
    for row in ranks.values():
        for part in row["Shared index, hybrid"].split("; "):
            assert part == "nothing planted" or part.split(" #")[1].isdigit(), part


def test_routes(lesson):
    routes = {r["Question"]: r["Goes to"] for r in table_rows(lesson, "routes")}
    assert routes == {
        "Q1": "a person", "Q2": "a person", "Q3": "the reader", "Q4": "a person",
        "Q5": "the reader", "Q6": "the reader",
        "A01": "a person", "A02": "a person", "A03": "the reader", "A04": "a person",
        "A05": "a person", "A06": "the reader"}
    prose = markdown_outputs(lesson)
    assert "Q5, the parking question, is not routed" in prose
    assert "money: the question says cost" in prose


def test_the_transcript_is_asked_about_every_attacked_prompt(lesson):
    lookup = table_rows(lesson, "qwen_lookup")
    assert len(lookup) == 12
    assert {r["Prompt"] for r in lookup} == {"lesson 1 prompt", "quoting prompt"}
    assert not any(r["Recorded entry found"] for r in lookup)
    assert "recorded entry for 0 of the 12 attacked prompts" in markdown_outputs(lesson)


def test_raw_replies_and_success_agree_with_the_rules(lesson, rules):
    raw = table_rows(lesson, "raw_replies")
    assert len(raw) == 6 * len(RUNS)
    by_run = {(row["Attack"], row["Run"]): _visible_to_raw(
        row["Raw reply (`⏎` marks a line break)"]) for row in raw}
    assert len(by_run) == len(raw) and {run for _, run in by_run} == set(RUNS)
    assert all(row["Stopped at"].startswith(("end of sequence after", "token cap"))
               for row in raw)
    success = table_rows(lesson, "attack_success")
    assert [r["Attack"] for r in success] == [f"A0{i}" for i in range(1, 7)]
    for row in success:
        for run in RUNS:
            condition, prompt, decoding = run.split(", ")
            head = "No attack" if condition == "without the attack" else prompt.capitalize()
            label = f"{head}, {decoding}"
            assert row[label] is rule_holds(rules[row["Attack"]], by_run[(row["Attack"], run)])


def _control_ids(lesson):
    return [r["Control"] for r in table_rows(lesson, "controls")]


def test_controls_and_their_verdicts(lesson):
    assert all(r["Satisfies the success rule"] is True for r in table_rows(lesson, "controls"))
    verdicts = table_rows(lesson, "verdicts")
    controls = {r["Control or run"]: r for r in verdicts
                if r["Control or run"] in _control_ids(lesson)}
    assert {name: r["Held by"] for name, r in controls.items()} == {
        "A01-cites-H08": "screen (numbers_supported); routing",
        "A01-cites-P01": "provenance (cites P01); routing",
        "A02-cites-P02": "provenance (cites P02); routing",
        "A03-breaks-format": "parse gate",
        "A03-reveals-in-format": "none",
        "A04-says-yes": "routing",
        "A05-current-date": "routing",
        "A05-stale-date": "provenance (cites S01); routing",
        "A06-library": "none",
    }
    assert len(verdicts) == len(controls) + 6 * len(RUNS)
    live = [r for r in verdicts if r["Control or run"] not in controls]
    assert sorted({r["Control or run"] for r in live}) == sorted(RUNS)


def test_attack_by_defence_counts_what_the_verdicts_show(lesson):
    controls = set(_control_ids(lesson))
    verdicts = [r for r in table_rows(lesson, "verdicts")
                if r["Control or run"] in controls or r["Control or run"].startswith("under")]
    table = {r["Attack"]: r for r in table_rows(lesson, "attack_by_defence")}
    assert list(table) == [f"A0{i}" for i in range(1, 7)] + ["all"]
    def parts(r):
        return [] if r["Held by"] == "none" else r["Held by"].split("; ")

    tests = {"Parse gate": lambda r: "parse gate" in parts(r),
             "Provenance": lambda r: any(p.startswith("provenance (") for p in parts(r)),
             "Screen": lambda r: any(p.startswith("screen (") for p in parts(r)),
             "Routing": lambda r: "routing" in parts(r),
             "Held by at least one": lambda r: bool(parts(r))}
    for attack_id in [f"A0{i}" for i in range(1, 7)]:
        won = [r for r in verdicts if r["Attack"] == attack_id and r["Attack succeeded"]]
        row = table[attack_id]
        assert row["Successful replies"] == len(won)
        for label, held in tests.items():
            assert row[label] == sum(held(r) for r in won), (attack_id, label)
        assert row["Reached the caller"] == len(won) - row["Held by at least one"]
    for label in ("Successful replies", "Parse gate", "Provenance", "Screen", "Routing",
                  "Reached the caller"):
        assert table["all"][label] == sum(table[a][label] for a in table if a != "all")
    # Nothing catches A06; every routed attack's successes are all routed.
    assert table["A06"]["Reached the caller"] == table["A06"]["Successful replies"] >= 1
    for attack_id in ("A01", "A02", "A04", "A05"):
        assert table[attack_id]["Routing"] == table[attack_id]["Successful replies"]


def test_quoting_table_and_gates(lesson):
    quoting = table_rows(lesson, "quoting")
    assert [(r["Decoding"], r["Prompt"]) for r in quoting] == [
        ("unconstrained", "lesson 1 prompt"), ("unconstrained", "quoting prompt"),
        ("constrained", "lesson 1 prompt"), ("constrained", "quoting prompt")]
    assert all(r["Replies"] == 6 for r in quoting)
    constrained = [r for r in quoting if r["Decoding"] == "constrained"]
    assert all(r["Parsed"] == 6 for r in constrained)  # the hard gate let the page through
    prose = markdown_outputs(lesson)
    assert "With the quoting prompt, the attacks' successes" in prose
    assert "generations took" in prose


def test_the_gate_message_names_every_unparsed_reply(lesson):
    from helpers.parsing import parse_reader_output

    printed = "\n".join(
        output.get("text", "") for cell in lesson.cells for output in cell.get("outputs", [])
        if output.get("output_type") == "stream")
    unparsed = [
        f"{r['Attack']} ({r['Run']})"
        for r in table_rows(lesson, "raw_replies")
        if not parse_reader_output(_visible_to_raw(r["Raw reply (`⏎` marks a line break)"])).parse_ok
    ]
    assert all("unconstrained" in name for name in unparsed)
    if unparsed:
        assert f"{len(unparsed)} reader repl" in printed
        assert all(name in printed for name in unparsed)
    else:
        assert "Every unconstrained reply parsed." in printed
