"""The reader's prompts, passage blocks, input budget, registry and mode (no model needed)."""
import pandas as pd
import pytest

from helpers.decoding import MAX_INPUT_TOKENS, MAX_NEW_TOKENS, REPETITION_PENALTY
from helpers.prompts import (NO_PASSAGES, OUTPUT_FORMAT, RETRIEVAL_K, SYSTEM_PROMPT, InputBudgetError,
                             build_messages, build_user_prompt, check_input_budget,
                             format_passage_block, reader_inputs)
from runtime.lessons import fit_retriever, lesson_reader_inputs
from runtime.readers import generate_all, load_reader, resolve_mode
from runtime.registry import REGISTRY, ReaderError, get_reader_spec

# The tf-idf retrieval of the reference render, in rank order.
REFERENCE_RETRIEVAL = {"Q1": ("H08",), "Q2": ("H14",), "Q3": (), "Q4": ("H12", "H03", "H15"),
                       "Q5": ("H03", "H01"), "Q6": ("H10", "H11", "H03")}


@pytest.fixture(scope="module")
def by_question():
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


def test_lesson_retrieval_matches_the_reference_render(riverton):
    retrieved = fit_retriever("tfidf", riverton.handbook).rank(riverton.questions, k=RETRIEVAL_K)
    got = {qid: tuple(group.sort_values("rank")["passage_id"])
           for qid, group in retrieved.groupby("question_id")}
    assert {qid: got.get(qid, ()) for qid in REFERENCE_RETRIEVAL} == REFERENCE_RETRIEVAL
    assert set(got) <= set(REFERENCE_RETRIEVAL)


def test_each_prompt_shows_its_question_and_passages_in_rank_order(by_question, riverton):
    """The user turn, character for character: the question, each retrieved passage as
    ``ID: text`` in rank order (or the line saying none was retrieved), the format."""
    texts = dict(zip(riverton.handbook["passage_id"], riverton.handbook["text"]))
    for qid, question in zip(riverton.questions["question_id"], riverton.questions["question"]):
        block = "\n".join(f"{p}: {texts[p]}" for p in REFERENCE_RETRIEVAL[qid]) or NO_PASSAGES
        prompt = f"QUESTION ID: {qid}\nQUESTION: {question}\nPASSAGES:\n{block}\n\n{OUTPUT_FORMAT}"
        row = by_question.loc[qid]
        assert (row["passage_block"], row["user_prompt"], row["retrieved_ids"]) == (
            block, prompt, REFERENCE_RETRIEVAL[qid])
        assert row["messages"] == [{"role": "system", "content": SYSTEM_PROMPT},
                                   {"role": "user", "content": prompt}]
    assert OUTPUT_FORMAT == ("OUTPUT FORMAT:\nAnswer: <short answer, NOT IN HANDBOOK, or PREMISE "
                             "NOT SUPPORTED: correction>\nSources: <listed passage IDs, or none>")
    assert NO_PASSAGES == "No passages were retrieved."


def test_reader_inputs_order_passages_by_rank_and_refuse_a_missing_one():
    assert format_passage_block([("H02", "b."), ("H01", "a.")]) == "H02: b.\nH01: a."
    assert build_messages("Q9", "Why?", [("H01", "Because.")])[1]["content"] == \
        build_user_prompt("Q9", "Why?", "H01: Because.")
    questions = pd.DataFrame({"question_id": ["Q1"], "question": ["q"]})
    retrieved = pd.DataFrame({"question_id": ["Q1", "Q1"], "passage_id": ["H02", "H01"],
                              "rank": [2, 1], "score": [0.1, 0.2]})
    handbook = pd.DataFrame({"passage_id": ["H01", "H02"], "text": ["one.", "two."]})
    row = reader_inputs(questions, retrieved, handbook).iloc[0]
    assert row["retrieved_ids"] == ("H01", "H02")
    assert row["passage_block"] == "H01: one.\nH02: two."
    with pytest.raises(KeyError, match="Q1.*H02"):
        reader_inputs(questions, retrieved, handbook.iloc[:1])


def test_the_budget_names_every_question_over_it_and_stops_a_reader(inputs):
    """The check alone, and through generate_all: the recorded Qwen prompts take 211, 187,
    182, 249, 222 and 272 tokens, so a budget of 220 stops Q4, Q5 and Q6 before any reply
    is returned."""
    with pytest.raises(InputBudgetError) as caught:
        check_input_budget({"Q1": 211, "Q2": 769, "Q3": 768, "Q4": 2000})
    assert caught.value.over_budget == {"Q2": 769, "Q4": 2000}
    assert "Q2 (769 tokens)" in str(caught.value) and "Q1" not in str(caught.value)
    check_input_budget({"Q1": 211, "Q3": MAX_INPUT_TOKENS})  # at the limit is within it
    recorded = load_reader("qwen_1_5b_instruct", mode="recorded")
    with pytest.raises(InputBudgetError) as caught:
        generate_all(recorded, inputs, max_input_tokens=220)
    assert caught.value.over_budget == {"Q4": 249, "Q5": 222, "Q6": 272}
    assert "Retrieve fewer or shorter passages" in str(caught.value)


def test_registry_pins_the_lesson_reader_and_settings():
    qwen = get_reader_spec("qwen_1_5b_instruct")
    assert (qwen.model_id, qwen.revision, qwen.license) == (
        "Qwen/Qwen2.5-1.5B-Instruct", "989aa7980e4cf806f80c7fef2b1adb7bc71aa306", "Apache-2.0")
    assert qwen.course_use == ("abstractive summarization;paraphrasing;long-text generation;"
                               "question answering;chatbot dialogue")
    for spec in REGISTRY.values():
        assert spec.settings == {"do_sample": False, "max_new_tokens": MAX_NEW_TOKENS,
                                 "repetition_penalty": REPETITION_PENALTY}
    assert (MAX_INPUT_TOKENS, MAX_NEW_TOKENS, REPETITION_PENALTY) == (768, 48, 1.05)
    with pytest.raises(KeyError, match="qwen_1_5b_instruct"):
        get_reader_spec("gpt_unknown")


def test_mode_comes_from_argument_then_environment(monkeypatch, inputs):
    monkeypatch.delenv("RIVERTON_READER_MODE", raising=False)
    assert resolve_mode() == "auto"
    monkeypatch.setenv("RIVERTON_READER_MODE", "Recorded")
    assert resolve_mode() == "recorded" and resolve_mode("live") == "live"
    monkeypatch.setenv("RIVERTON_READER_MODE", "sometimes")
    with pytest.raises(ValueError, match="RIVERTON_READER_MODE.*sometimes"):
        resolve_mode()
    recorded = load_reader("qwen_1_5b_instruct", mode="recorded")
    with pytest.raises(ReaderError, match="greedily only"):
        generate_all(recorded, inputs, settings={**recorded.settings, "do_sample": True})
