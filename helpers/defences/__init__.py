"""Defences written in code against attacks that arrive through retrieved or typed text.

Introduced in lesson 5, one module a topic. Each defence is a small pure function that
looks at one thing.
Some read the reply, and hold it for what it says:

* **provenance** ("Every defence on every reply"): a reply may cite only passages of
  the fingerprinted handbook; a citation of anything else is held;
* the first lesson's parse gate and support screen, applied unchanged by
  :func:`defence_verdicts` (:mod:`.verdicts`).

Others are decided before any reply exists, and hold every reply to the question:

* **routing** ("Routing decided before the reader runs"): questions about money,
  eligibility and deadlines go to a person, decided from the question's words and the
  topic of the first retrieved *handbook* passage when it scores enough
  (:func:`routing_topics`), never from the reply;
* **contradiction** ("Two passages that disagree"): retrieved passages that share a
  topic but state values that cannot both be true (money with its period, times,
  dates; :mod:`helpers.values`) send the question to a person, who is shown both.

Three are prompts, requests to the model rather than rules ("Prompts that mark passages
as data"): **quoting** wraps every passage and the caller's question in tags and says
they are quotations, not instructions; **datamarking** (Hines et al. 2024) puts a
marker between the words of every passage and says marked text is data; the
**placebo** is as long as quoting and says nothing about either. Lesson 1's prompt is
left exactly as it was, because its recorded replies are keyed by it.
:func:`defence_costs` counts what the defences cost on ordinary questions, right
replies held apart from wrong ones ("What the defences cost").

None of them reads the reply to decide whether a question is sensitive, and none of
them can tell whether an answer is true.
"""
from __future__ import annotations

from .contradiction import Conflict, conflicting_passages, disagreement
from .marking import (DATAMARK, DATAMARKING_SYSTEM_PROMPT, DATAMARKING_SYSTEM_PROMPT_PARTS,
                      PLACEBO_SYSTEM_PROMPT, PLACEBO_SYSTEM_PROMPT_PARTS, PROMPTS,
                      QUOTING_SYSTEM_PROMPT, QUOTING_SYSTEM_PROMPT_PARTS, build_datamarked_messages,
                      build_placebo_messages, build_quoted_messages, build_quoted_user_prompt,
                      datamark, datamarked_passage_block, quote, quoted_passage_block)
from .provenance import (HANDBOOK_FILE, Provenance, UntrustedHandbookError, check_fingerprinted,
                         handbook_fingerprint, provenance_check, trusted_ids)
from .routing import (OFFERINGS, PRICE_WORDS, QUESTION_TERMS, ROUTED_TOPICS, TOPIC_MIN_SCORE, Route,
                      route_question, route_table, routing_topics, topic_routes)
from .verdicts import (BEFORE_THE_REPLY, DEFENCE_KINDS, DEFENCES, READS_THE_REPLY, VERDICT_COLUMNS,
                       defence_costs, defence_verdicts, held_by_any_of, right_reply, security,
                       verdicts_for_reply)
