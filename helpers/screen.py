"""The six-check citation support screen and its control strings.

Introduced in lesson 1, "Screen citations and surface support" and "Show screen
controls". The screen checks mechanical facts only; whether a cited passage really
supports an answer is a human judgment that stays pending.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

import pandas as pd
import regex

from .parsing import ParsedReply

CHECKS = (
    "parsed",
    "cited_exist",
    "cited_retrieved",
    "answer_has_citation",
    "abstain_sources_ok",
    "numbers_supported",
)
NOT_FLAGGED = "not flagged by screen"
HELD = "held for human review"


def strip_citation_tokens(text: str) -> str:
    """Remove passage IDs such as ``H08`` so their digits are not read as figures."""
    return regex.sub(r"\bH\d{2}\b", "", text)


def numbers_in(text: str | None) -> list[str]:
    """Digit runs not glued to a preceding letter or digit, after removing citations."""
    return regex.findall(r"(?<![\p{L}\p{N}])\d+", strip_citation_tokens(text or ""))


def screen_reply(reply: ParsedReply, retrieved_ids: Iterable[str],
                 passage_texts: Mapping[str, str]) -> dict[str, bool]:
    """The six checks for one parsed reply (:func:`helpers.parsing.parse_reader_output`),
    in :data:`CHECKS` order, given the passages its reader retrieved and those that exist."""
    retrieved, sources = set(retrieved_ids), reply.sources
    cited_text = " ".join(passage_texts[s] for s in sources if s in passage_texts)
    cited_numbers = set(numbers_in(cited_text))
    return {
        "parsed": bool(reply.parse_ok),
        "cited_exist": all(s in passage_texts for s in sources),
        "cited_retrieved": all(s in retrieved for s in sources),
        "answer_has_citation": len(sources) > 0 if reply.action == "answer" else True,
        "abstain_sources_ok": len(sources) == 0 if reply.action == "abstain" else True,
        "numbers_supported": all(n in cited_numbers for n in numbers_in(reply.answer)),
    }


def screen_label(passed: bool) -> str:
    """The two labels: a row that passes every check is only "not flagged"."""
    return NOT_FLAGGED if passed else HELD


def failed_checks(values: Mapping[str, bool]) -> str:
    """Names of the failed checks, comma-joined, or "none"."""
    failed = [name for name in CHECKS if not values[name]]
    return ", ".join(failed) if failed else "none"


def _retrieved_by_question(retrieved: pd.DataFrame) -> dict[str, tuple[str, ...]]:
    ordered = retrieved.sort_values(["question_id", "rank"])
    return {qid: tuple(group["passage_id"]) for qid, group in ordered.groupby("question_id")}


def screen_table(
    parsed: pd.DataFrame, retrieved: pd.DataFrame, handbook: pd.DataFrame
) -> pd.DataFrame:
    """Screen every parsed reply (needs question_id, parsed_answer, parsed_sources,
    parse_ok, observed_action); keeps the six check columns beside the labels."""
    texts = dict(zip(handbook["passage_id"], handbook["text"]))
    by_question = _retrieved_by_question(retrieved)
    rows = []
    for row in parsed.itertuples(index=False):
        reply = ParsedReply(row.parse_ok, row.parsed_answer, tuple(row.parsed_sources),
                            row.observed_action)
        values = screen_reply(reply, by_question.get(row.question_id, ()), texts)
        passed = all(values.values())
        sources = tuple(row.parsed_sources)
        cited = [f"{s}: {texts[s]}" for s in sources if s in texts]
        record = {
            key: getattr(row, key) for key in parsed.columns
            if key in ("control_id", "question_id")
        }
        record.update(
            {
                "parsed_answer": row.parsed_answer,
                "cited_ids": ", ".join(sources) if sources else "none",
                "cited_text": " ".join(cited) if cited else "none",
                **values,
                "surface_support_screen": passed,
                "failed_checks": failed_checks(values),
                "screen_label": screen_label(passed),
                "human_support_review": "pending",
            }
        )
        rows.append(record)
    return pd.DataFrame(rows)


def control_outputs() -> pd.DataFrame:
    """Two author-written control strings (not model outputs) with known faults."""
    return pd.DataFrame(
        {
            "control_id": ["control-unsupported-number", "control-unretrieved-citation"],
            "question_id": ["Q1", "Q1"],
            "parsed_answer": ["The weekly training stipend is $200.",
                              "The stipend is paid weekly."],
            "parsed_sources": [("H08",), ("H14",)],
            "parse_ok": [True, True],
            "observed_action": ["answer", "answer"],
        }
    )
