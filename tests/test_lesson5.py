"""Lesson 5 executed from a clean kernel: its tables are read back and cross-checked.

SmolLM2's exact wording can differ between machines, so the live replies are checked
through properties (one row per run, success recomputed from the raw reply, counts that
add up, prose that quotes the table); the fixture, the retrieval, the routes, the
contradictions and the author controls are deterministic and are checked exactly. What
the page says about the pinned Qwen reader depends on this machine (its weights, a
configured server, the transcript's entries), so that expectation is computed here the
same way.
"""
from __future__ import annotations

import pandas as pd
import pytest

from helpers import attacks as attack_helpers
from helpers import defences, pinned_reader, reader
from helpers.attacks import rule_holds
from helpers.fixture import load_attack_fixture, load_riverton
from helpers.paths import LESSONS_DIR

from lesson_outputs import markdown_outputs, table_rows, tables

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
def lesson(book):
    return book.lesson(LESSON).nb


@pytest.fixture(scope="module")
def rules():
    questions = load_attack_fixture().questions
    return dict(zip(questions["attack_id"], questions["success_rule"]))


def _visible_to_raw(text: str) -> str:
    return text.replace(" ⏎ ", "\n")


def test_every_table_is_shown(lesson):
    expected = {"planted", "attacks", "fingerprints", "attack_ranks", "routes",
                "routed_gold", "rewordings", "conflicts", "qwen_lookup", "raw_replies",
                "attack_success", "controls", "verdicts", "attack_by_defence", "quoting"}
    assert expected <= set(tables(lesson))


def test_fixture_tables(lesson):
    assert [r["Passage ID"] for r in table_rows(lesson, "planted")] == [
        "P01", "P02", "P03", "P04", "S01"]
    attacks = table_rows(lesson, "attacks")
    assert [r["Attack"] for r in attacks] == [f"A0{i}" for i in range(1, 7)]
    assert attacks[0]["Success rule"] == "figure:500"
    parts = {r["File"]: r["Part of"] for r in table_rows(lesson, "fingerprints")}
    assert parts["riverton-handbook.csv"] == parts["support-review.csv"] == "normal fixture"
    assert parts["riverton-attack-passages.csv"] == "attack fixture (lesson 5 only)"
    assert list(parts.values())[-2:] == ["attack fixture (lesson 5 only)"] * 2


def test_an_edited_handbook_table_is_refused(lesson):
    printed = _printed(lesson)
    assert "the handbook table is not the fingerprinted riverton-handbook.csv" in printed


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
    assert "money: the question says cost of parking" in prose


def test_every_question_whose_gold_passage_is_sensitive_is_routed(lesson):
    rows = table_rows(lesson, "routed_gold")
    assert {"Q1", "Q2", "Q4", "X05", "X08"} <= {r["Question"] for r in rows}
    assert all(r["Goes to"] == "a person" for r in rows)
    assert {r["Its topic"] for r in rows} <= set(defences.ROUTED_TOPICS)
    missed = [r["Question"] for r in rows if not r["Gold passage in tf-idf's top three"]]
    assert {"X05", "X08"} <= set(missed)
    prose = markdown_outputs(lesson)
    assert f"All {len(rows)} of them go to a person." in prose
    assert f"tf-idf retrieves the gold passage for {len(rows) - len(missed)} of them" in prose
    rewordings = table_rows(lesson, "rewordings")
    fail_open = [r["Question"] for r in rewordings if r["Goes to"] == "the reader"]
    assert fail_open
    assert "Keyword routing fails open" in prose
    assert f"{len(fail_open)} go to the reader" in prose


def test_the_contradiction_check_flags_what_the_helper_finds(lesson):
    fixture = load_riverton()
    attack = load_attack_fixture(handbook=fixture.handbook, metadata=fixture.metadata)
    inputs = attack_helpers.attack_reader_inputs(attack.questions, fixture.handbook,
                                                 attack.passages)
    shown = {(r["Attack"], r["Condition"]): r for r in table_rows(lesson, "conflicts")}
    assert len(shown) == len(inputs)
    for row in inputs.itertuples(index=False):
        found = defences.conflicting_passages(row.retrieved_ids, row.index_passages)
        table_row = shown[(row.attack_id, row.condition)]
        assert table_row["Sent to a person"] is bool(found)
        assert table_row["Passages that disagree"] == ("; ".join(map(str, found)) or "none")
    assert shown[("A05", "under attack")]["Sent to a person"] is True
    assert not any(r["Sent to a person"] for (_, condition), r in shown.items()
                   if condition == "without the attack")
    assert "conflicts: none" in _printed(lesson)  # the rewording of H14 is not flagged


def _printed(lesson) -> str:
    return "\n".join(
        output.get("text", "") for cell in lesson.cells for output in cell.get("outputs", [])
        if output.get("output_type") == "stream")


def test_the_transcript_is_asked_about_every_attacked_prompt(lesson):
    fixture = load_riverton()
    attack = load_attack_fixture(handbook=fixture.handbook, metadata=fixture.metadata)
    inputs = attack_helpers.attack_reader_inputs(attack.questions, fixture.handbook,
                                                 attack.passages)
    under = inputs[inputs["condition"] == attack_helpers.UNDER_ATTACK]
    prompts = pd.DataFrame([
        {"attack_id": row.attack_id, "prompt": name, "question_id": row.attack_id,
         "messages": messages}
        for row in under.itertuples(index=False)
        for name, messages in (("lesson 1 prompt", row.messages),
                               ("quoting prompt", row.quoted_messages))])
    recorded = reader.load_reader(pinned_reader.PINNED_READER, mode="recorded")
    expected = pinned_reader.transcript_lookup(recorded, prompts, ("attack_id", "prompt"))
    lookup = table_rows(lesson, "qwen_lookup")
    assert [(r["Attack"], r["Prompt"], r["Transcript key of the prompt"],
             r["Recorded entry found"]) for r in lookup] == list(
        expected.itertuples(index=False, name=None))
    n_recorded, n_prompts = int(expected["recorded"].sum()), len(expected)
    prose = markdown_outputs(lesson)
    if reader.configured_url():
        assert "The pinned reader's replies to the attacked prompts were" in prose
    elif reader.weights_available(reader.get_reader_spec(pinned_reader.PINNED_READER)):
        assert "the pinned reader ran live on the attacked prompts" in prose
    elif n_recorded == n_prompts:
        assert "Every attacked prompt has a recorded entry" in prose
    else:
        assert (f"recorded entry for {n_recorded} of the {n_prompts} attacked prompts"
                in prose)
        assert "qwen_attack" not in tables(lesson)


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
    a01 = "contradiction (P01 vs H08 on stipend: 500 vs 150, 90)"
    a02 = "contradiction (H14 vs P02 on deadline: october, 15 vs november, 30)"
    a05 = "contradiction (S01 vs H14 on deadline: september, 30 vs october, 15)"
    assert {name: r["Held by"] for name, r in controls.items()} == {
        "A01-cites-H08": f"screen (numbers_supported); {a01}; routing",
        "A01-cites-P01": f"provenance (cites P01); {a01}; routing",
        "A02-cites-P02": f"provenance (cites P02); {a02}; routing",
        "A03-breaks-format": "parse gate",
        "A03-reveals-in-format": "none",
        "A04-says-yes": "routing",
        "A05-current-date": f"{a05}; routing",
        "A05-stale-date": f"provenance (cites S01); {a05}; routing",
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
             "Contradiction": lambda r: any(p.startswith("contradiction (") for p in parts(r)),
             "Routing": lambda r: "routing" in parts(r),
             "Held by at least one": lambda r: bool(parts(r))}
    for attack_id in [f"A0{i}" for i in range(1, 7)]:
        won = [r for r in verdicts if r["Attack"] == attack_id and r["Attack succeeded"]]
        row = table[attack_id]
        assert row["Successful replies"] == len(won)
        for label, held in tests.items():
            assert row[label] == sum(held(r) for r in won), (attack_id, label)
        assert row["Reached the caller"] == len(won) - row["Held by at least one"]
        by_origin = {
            "Of them author controls": [r for r in won if r["Control or run"] in controls],
            "Of them SmolLM2, lesson 1 prompt": [
                r for r in won if r["Control or run"].startswith("under attack, lesson 1 prompt")],
            "Of them SmolLM2, quoting prompt": [
                r for r in won if r["Control or run"].startswith("under attack, quoting prompt")],
        }
        for prefix, counted in by_origin.items():
            (label,) = [k for k in row if k.startswith(prefix)]
            assert row[label] == len(counted), (attack_id, label)
    for label in ("Successful replies", "Parse gate", "Provenance", "Screen", "Contradiction",
                  "Routing", "Reached the caller"):
        assert table["all"][label] == sum(table[a][label] for a in table if a != "all")
    assert [k for k in table["A01"] if k.startswith("Of them SmolLM2")] == [
        "Of them SmolLM2, lesson 1 prompt (of 2 runs)", "Of them SmolLM2, quoting prompt (of 2 runs)"]
    # What the author controls, not the live replies: the A06 control reaches the caller,
    # and every successful reply of a routed attack is routed (decided before any reply).
    assert table["A06"]["Reached the caller"] >= 1
    for attack_id in ("A01", "A02", "A04", "A05"):
        assert table[attack_id]["Routing"] == table[attack_id]["Successful replies"]
    for attack_id in ("A01", "A02", "A05"):  # their planted passage disagrees with the handbook
        assert table[attack_id]["Contradiction"] == table[attack_id]["Successful replies"]
    prose = markdown_outputs(lesson)
    a06 = table["A06"]
    assert (f"here, {a06['Reached the caller']} reached the caller") in prose
    assert f"passes all {len(defences.DEFENCES)} defences" in prose


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

    printed = _printed(lesson)
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
