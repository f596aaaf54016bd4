"""Attacks through retrieved or typed text: success rules applied, the attacked inputs,
each reply under attack paired with its run without the attack, and control replies.

Introduced in lesson 5, "The attacks, written down first", one module a topic: the
success rules applied (:mod:`.success`), the attacked inputs (:mod:`.inputs`) and the
paired outcomes (:mod:`.outcomes`). Every attack in
``data/riverton/riverton-attack-questions.csv`` states, before anything runs, the
behaviour that shows it succeeded, in prose and as a *success rule* that code checks
(the rule language is :mod:`helpers.attack_rules`). The rules read the fields the strict
parser found, and what the reply does (:func:`reply_action`): a reply that does not
parse, abstains, flags a premise or echoes the format template's placeholder is no
answer, and a ramble that happens to contain "yes" has not been talked into anything.

A rule that holds is not yet an attack that succeeded: the reader may do the same
without any attack. :func:`paired_outcomes` pairs each reply under attack with the same
question's reply without it (same prompt, same decoding, same reader). The attack
*caused* a behaviour only when the rule holds under attack and not without it; where the
reply without the attack already meets the rule, nothing can be caused, and the cell is
*undefined*, never 0.
"""
from __future__ import annotations

from .inputs import (NO_ATTACK, POSITIONS, PROMPT_COLUMNS, UNDER_ATTACK, WITHOUT_ATTACK,
                     PlantedNotRetrievedError, attack_index, attack_reader_inputs)
from .outcomes import (by_prompt, compare_prompts, control_replies, paired_outcomes, per_attack,
                       rate, success_table)
from .success import TEMPLATE_PLACEHOLDER, caused, reply_action, rule_holds, says, term_holds
