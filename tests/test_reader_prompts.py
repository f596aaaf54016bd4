"""The reader's prompts, passage blocks, input budget and mode selection (no model needed)."""
import pandas as pd
import pytest

from helpers.reader import (
    MAX_INPUT_TOKENS,
    MAX_NEW_TOKENS,
    NO_PASSAGES,
    REGISTRY,
    REPETITION_PENALTY,
    SYSTEM_PROMPT,
    InputBudgetError,
    build_messages,
    build_user_prompt,
    check_input_budget,
    format_passage_block,
    get_reader_spec,
    reader_inputs,
    resolve_mode,
)
from helpers.reader.lesson import lesson_reader_inputs, lesson_retrieval

OUTPUT_FORMAT = (
    "OUTPUT FORMAT:\n"
    "Answer: <short answer, NOT IN HANDBOOK, or PREMISE NOT SUPPORTED: correction>\n"
    "Sources: <listed passage IDs, or none>"
)

# The tf-idf retrieval of the reference render, in rank order.
REFERENCE_RETRIEVAL = {
    "Q1": ("H08",),
    "Q2": ("H14",),
    "Q3": (),
    "Q4": ("H12", "H03", "H15"),
    "Q5": ("H03", "H01"),
    "Q6": ("H10", "H11", "H03"),
}


@pytest.fixture(scope="module")
def inputs():
    return lesson_reader_inputs().set_index("question_id")


def test_system_prompt_is_the_nine_strings_joined_by_spaces():
    assert SYSTEM_PROMPT == (
        "You are a strict formatter for handbook question answering. Your reply must begin "
        "with Answer: on the first line. The second and final line must begin with Sources:. "
        "Use only IDs that appear in PASSAGES. If no listed passage answers the question, "
        "write Answer: NOT IN HANDBOOK and Sources: none. If the question assumes a fact "
        "contradicted by a listed passage, write Answer: PREMISE NOT SUPPORTED: plus a short "
        "correction. Do not write a blank line, bullet, explanation, or extra source."
    )


def test_lesson_retrieval_matches_the_reference_render():
    _, retrieved = lesson_retrieval()
    got = {
        qid: tuple(group.sort_values("rank")["passage_id"])
        for qid, group in retrieved.groupby("question_id")
    }
    assert {qid: got.get(qid, ()) for qid in REFERENCE_RETRIEVAL} == REFERENCE_RETRIEVAL
    assert set(got) <= set(REFERENCE_RETRIEVAL)


def test_q3_prompt_says_no_passage_was_retrieved(inputs):
    assert inputs.loc["Q3", "retrieved_ids"] == ()
    assert inputs.loc["Q3", "user_prompt"] == (
        "QUESTION ID: Q3\n"
        "QUESTION: Where can my kid stay while I study at night?\n"
        "PASSAGES:\n"
        "No passages were retrieved.\n"
        "\n"
        "OUTPUT FORMAT:\n"
        "Answer: <short answer, NOT IN HANDBOOK, or PREMISE NOT SUPPORTED: correction>\n"
        "Sources: <listed passage IDs, or none>"
    )


def test_q6_prompt_lists_three_passages_in_rank_order(inputs):
    assert inputs.loc["Q6", "user_prompt"] == (
        "QUESTION ID: Q6\n"
        "QUESTION: When does the Saturday forklift session start?\n"
        "PASSAGES:\n"
        "H10: An optional spreadsheet refresher workshop, listed as DSC-105, meets on two "
        "Saturday mornings in September. It does not count toward the certificate.\n"
        "H11: Forklift Operator Licence classes meet on Tuesday and Thursday mornings from "
        "8 a.m. to noon. There are no weekend forklift classes.\n"
        "H03: The Riverton Skills Centre runs two programs this fall: the Data Support "
        "Certificate and the Forklift Operator Licence course.\n"
        "\n"
        "OUTPUT FORMAT:\n"
        "Answer: <short answer, NOT IN HANDBOOK, or PREMISE NOT SUPPORTED: correction>\n"
        "Sources: <listed passage IDs, or none>"
    )


@pytest.mark.parametrize(
    "qid, question, passage_lines",
    [
        ("Q1", "How much is the weekly training stipend?",
         ["H08: Data Support Certificate students receive a training stipend of $150 per "
          "week. Students must attend at least 90 percent of classes to receive it."]),
        ("Q2", "When do applications close?",
         ["H14: Applications for both fall programs close on October 15."]),
        ("Q3", "Where can my kid stay while I study at night?", [NO_PASSAGES]),
        ("Q4", "Do I need data experience to join the Data Support Certificate?",
         ["H12: No prior data experience is required for the Data Support Certificate. "
          "Applicants need basic spreadsheet skills.",
          "H03: The Riverton Skills Centre runs two programs this fall:",
          "H15: Laptops are provided in class"]),
        ("Q5", "How much does parking cost at the centre?",
         ["H03: The Riverton Skills Centre runs two programs",
          "H01: Classes are held at the Riverton Skills Centre on Mill Street in Riverton."]),
        ("Q6", "When does the Saturday forklift session start?",
         ["H10: An optional spreadsheet", "H11: Forklift Operator Licence", "H03: The"]),
    ],
)
def test_each_prompt_has_its_question_passages_and_format(inputs, qid, question,
                                                          passage_lines):
    prompt = inputs.loc[qid, "user_prompt"]
    head = f"QUESTION ID: {qid}\nQUESTION: {question}\nPASSAGES:\n"
    assert prompt.startswith(head)
    assert prompt.endswith("\n\n" + OUTPUT_FORMAT)
    block = prompt[len(head): -len("\n\n" + OUTPUT_FORMAT)]
    assert block == inputs.loc[qid, "passage_block"]
    lines = block.split("\n")
    assert len(lines) == len(passage_lines)
    for line, expected_start in zip(lines, passage_lines):
        assert line.startswith(expected_start)
    assert inputs.loc[qid, "retrieved_ids"] == REFERENCE_RETRIEVAL[qid]
    messages = inputs.loc[qid, "messages"]
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"] == SYSTEM_PROMPT
    assert messages[1]["content"] == prompt


def test_passage_block_keeps_the_given_order_and_handles_none():
    assert format_passage_block([]) == "No passages were retrieved."
    assert format_passage_block([("H02", "b."), ("H01", "a.")]) == "H02: b.\nH01: a."


def test_build_messages_matches_build_user_prompt():
    messages = build_messages("Q9", "Why?", [("H01", "Because.")])
    assert messages[1]["content"] == build_user_prompt("Q9", "Why?", "H01: Because.")


def test_reader_inputs_orders_by_rank_not_row_order():
    questions = pd.DataFrame({"question_id": ["Q1"], "question": ["q"]})
    retrieved = pd.DataFrame(
        {"question_id": ["Q1", "Q1"], "passage_id": ["H02", "H01"], "rank": [2, 1],
         "score": [0.1, 0.2]}
    )
    handbook = pd.DataFrame({"passage_id": ["H01", "H02"], "text": ["one.", "two."]})
    row = reader_inputs(questions, retrieved, handbook).iloc[0]
    assert row["retrieved_ids"] == ("H01", "H02")
    assert row["passage_block"] == "H01: one.\nH02: two."


def test_reader_inputs_refuses_a_passage_missing_from_the_handbook():
    questions = pd.DataFrame({"question_id": ["Q7"], "question": ["q"]})
    retrieved = pd.DataFrame({"question_id": ["Q7"], "passage_id": ["H99"], "rank": [1],
                              "score": [0.5]})
    handbook = pd.DataFrame({"passage_id": ["H01"], "text": ["one."]})
    with pytest.raises(KeyError, match="Q7.*H99"):
        reader_inputs(questions, retrieved, handbook)


def test_budget_check_names_every_question_over_budget():
    counts = {"Q1": 211, "Q2": 769, "Q3": 768, "Q4": 2000}
    with pytest.raises(InputBudgetError) as caught:
        check_input_budget(counts)
    message = str(caught.value)
    assert "Q2 (769 tokens)" in message and "Q4 (2000 tokens)" in message
    assert "Q1" not in message and "Q3" not in message
    assert caught.value.over_budget == {"Q2": 769, "Q4": 2000}
    check_input_budget({"Q1": 211, "Q3": 768})  # at the limit is within budget


def test_budget_check_fires_on_an_oversized_prompt():
    long_passage = ("H01", "word " * 1000)
    messages = build_messages("Q8", "What?", [long_passage])
    # A crude count that can only under-count subword tokens: whitespace-separated words.
    words = sum(len(m["content"].split()) for m in messages)
    with pytest.raises(InputBudgetError, match="Q8"):
        check_input_budget({"Q8": words})


def test_registry_pins_the_lesson_reader_and_settings():
    qwen = get_reader_spec("qwen_1_5b_instruct")
    assert (qwen.model_id, qwen.revision, qwen.license) == (
        "Qwen/Qwen2.5-1.5B-Instruct", "989aa7980e4cf806f80c7fef2b1adb7bc71aa306", "Apache-2.0"
    )
    assert qwen.course_use == (
        "abstractive summarization;paraphrasing;long-text generation;question answering;"
        "chatbot dialogue"
    )
    assert len(qwen.course_uses) == 5
    for spec in REGISTRY.values():
        assert spec.settings == {"do_sample": False, "max_new_tokens": MAX_NEW_TOKENS,
                                 "repetition_penalty": REPETITION_PENALTY}
    assert (MAX_INPUT_TOKENS, MAX_NEW_TOKENS, REPETITION_PENALTY) == (768, 48, 1.05)
    with pytest.raises(KeyError, match="qwen_1_5b_instruct"):
        get_reader_spec("gpt_unknown")


def test_mode_comes_from_argument_then_environment(monkeypatch):
    monkeypatch.delenv("RIVERTON_READER_MODE", raising=False)
    assert resolve_mode() == "auto"
    monkeypatch.setenv("RIVERTON_READER_MODE", "Recorded")
    assert resolve_mode() == "recorded"
    assert resolve_mode("live") == "live"
    monkeypatch.setenv("RIVERTON_READER_MODE", "sometimes")
    with pytest.raises(ValueError, match="RIVERTON_READER_MODE.*sometimes"):
        resolve_mode()
