"""The exercises at the end of each lesson: layout, placeholders, solutions and hints.

Fast tests read the notebooks and call the checkers directly. The slow tests execute each
lesson from a clean kernel (shared with the lesson's own tests), check that every starter
cell leaves its exercise "not attempted yet", then run every worked solution in the same
kernel, after the lesson's cells, and expect "correct", and run deliberately wrong
answers and expect the specific hint.
"""
from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import nbformat
import pytest
from exercise_cells import LESSONS, check_key, exercise_cells, section_index

import exercises
from exercises import CORRECT, HINT, NOT_ATTEMPTED, VERDICT_MIME, Verdict, framework
from helpers import defences, scoring
from runtime.paths import DATA_DIR, LESSONS_DIR, PROJECT_ROOT

# A function body of an F1 that treats tokens as a set, one that does not normalise, one
# that counts every predicted token found in the reference, and one that divides by zero.
_SET_F1 = '''def my_token_f1(prediction, reference):
    p, r = (set(text.normalize_answer(s).split()) for s in (prediction, reference))
    return 2 * len(p & r) / (len(p) + len(r)) if p & r else 0.0'''
_RAW_F1 = '''from collections import Counter
def my_token_f1(prediction, reference):
    p, r = prediction.split(), reference.split()
    shared = sum((Counter(p) & Counter(r)).values())
    return 2 * shared / (len(p) + len(r)) if shared else 0.0'''
_UNCLIPPED_F1 = '''def my_token_f1(prediction, reference):
    p, r = (text.normalize_answer(s).split() for s in (prediction, reference))
    shared = sum(1 for token in p if token in r)
    return 2 * shared / (len(p) + len(r)) if shared else 0.0'''
_DIVIDING_F1 = '''from collections import Counter
def my_token_f1(prediction, reference):
    p, r = (text.normalize_answer(s).split() for s in (prediction, reference))
    shared = sum((Counter(p) & Counter(r)).values())
    precision, recall = shared / len(p), shared / len(r)
    return 2 * precision * recall / (precision + recall) if shared else 0.0'''
_DIGITS = r'r"/\d[^\r\n]*|[^\s][^\r\n]*\d[^\r\n]*/"'
# Exercise 4.4's answer from the baseline's unsupported replies, up to its interval.
_BAD = ("_bad = judged[(judged['reader'] == baseline.BASELINE_READER) & judged['unsupported']]\n"
        "sensitivity_on_baseline = {'held': 0, 'unsupported': len(_bad), 'interval': ")
# The screen's 2x2 counts and kappa on the systems' distinct replies (exercises 4.1 and 4.5).
_SCREEN = ("c = agreement.confusion(judged['held'].tolist(), judged['unsupported'].tolist())\n"
           "k = agreement.table_kappa(c)\n")
# Exercise 2.2's answer with the tops of DSC-104 by tf-idf and dense (no hit for DSC-106).
_CODE_TOPS = ('code_tops = {"When does DSC-104 meet?": {"tf-idf": "%s", "dense": "%s", "hybrid": "H09"}, '
              '"When does DSC-106 meet?": {"tf-idf": None, "dense": None, "hybrid": None}}')
# Answers to exercises 5.1 (child care routed), 5.2 (a planted room) and 5.4 (one evasion).
_ROUTED = "my_topics, my_terms, also_routed = {**defences.ROUTED_TOPICS, 'child care': 'care'}, "
_ROOM_221 = 'planted_text, reply = "Free child care during evening classes is in Room 221.", '
_EVASION = 'my_evasion, my_fix = "Is the f0rklift course open to a sixteen-year-old?", '

#: Deliberately wrong answers: (exercise, code that sets the answer, part of the hint).
WRONG_ANSWERS = [
    ("1.1", 'oct15 = {"normalized": "oct 15", "em": 0, "f1": 0.5}', "equals *any* normalised variant"),
    ("1.1", 'oct15 = {"normalized": "oct 15", "em": 1, "f1": 0.5}', "F1 against 'October 15' alone"),
    ("1.1", 'oct15 = {"normalized": "Oct 15", "em": 1, "f1": 1}', "lower-cases first"),
    ("1.2", "q3_with_at, other_changed = [], []", "with the lesson's stop-word list"),
    ("1.2", 'q3_with_at, other_changed = ["H01", "H08", "H04"], ["Q5"]', "Right passages, wrong order"),
    ("1.2", 'q3_with_at, other_changed = ["H01", "H04", "H08"], ["Q1", "Q5"]',
     "The candidate list of Q1 does not change"),
    ("1.2", 'q3_with_at, other_changed = ["H01", "H04", "H08"], []',
     "Another question's candidates change too"),
    ("1.3", _SET_F1, "Your F1 treats tokens as a set; count repeats"),
    ("1.3", _RAW_F1, "Normalise both strings first"),
    ("1.3", _UNCLIPPED_F1, "F1 can never exceed 1"),
    ("1.3", _DIVIDING_F1, "raised ZeroDivisionError"),
    ("1.4", 'held_reply, wrong_but_clear = "Answer: $200\\nSources: H08", "Answer: $90\\nSources: H08"',
     "which the lesson's controls already show"),
    ("1.4", 'held_reply, wrong_but_clear = "Answer: Weekly.\\nSources: none", "Answer: $150 a week\\nSources: H08"',
     "That is the stipend H08 gives"),
    ("1.4", 'held_reply, wrong_but_clear = "Answer: Weekly.\\nSources: none", "Answer: $75 a week\\nSources: H08"',
     "The screen holds wrong_but_clear (numbers_supported)"),
    ("1.4", 'held_reply, wrong_but_clear = "answer: no\\nsources: none", "Answer: x\\nSources: H08"',
     "The strict parser rejects held_reply"),
    ("1.4", 'held_reply, wrong_but_clear = "Answer: NOT IN HANDBOOK\\nSources: H08", "Answer: 90\\nSources: H08"',
     "Q1 asks for a weekly stipend"),
    ("2.1", 'paraphrase = {"passage_id": "H05", "question": "Will the school pay for my rides on buses?", '
            '"answer": "bus passes"}', "shares 'pay' with H05"),
    ("2.1", 'paraphrase = {"passage_id": "H13", "question": ext_questions["question"].iloc[0], '
            '"answer": "Room 104"}', "from the lesson's question sets"),
    ("2.1", 'paraphrase = {"passage_id": "H07", "question": "Is my commute by coach covered during the opening weeks?", '
            '"answer": "photo ID"}', "outside the top three the reader sees"),
    ("2.1", 'paraphrase = {"passage_id": "H01", "question": "What colour are the walls where lessons take place?", '
            '"answer": "pale blue"}', "is not in H01"),
    ("2.2", _CODE_TOPS % ("H09", "H09"), "you give dense the passage that tf-idf ranks first"),
    ("2.2", _CODE_TOPS % ("H09", "H10"), "tf-idf does retrieve passages for 'When does DSC-106 meet?'"),
    ("2.2", _CODE_TOPS % ("H9", "H10"), "'H9' is not a handbook passage ID"),
    ("2.3", 'tuning = {"best_on_original": [0.5], "extended_mrr_range": (0, 1), "best_on_extended": [0.5]}',
     "More weights tie at the best MRR on the original six"),
    ("2.3", 'tuning = {"best_on_original": [0.75, 0.8, 0.85], "extended_mrr_range": (0, 1), '
            '"best_on_extended": [0.5]}', "maximise MRR on the extended set"),
    ("2.4", 'threshold = {"t": 0.1, "stopped_with_gold": [], "read_unanswerable": []}',
     "Q5 still reaches the reader"),
    ("2.4", 'threshold = {"t": 0.5, "stopped_with_gold": [], "read_unanswerable": []}',
     "would be stopped although it has a gold passage"),
    ("2.4", 'threshold = {"t": float(top_by["hybrid"]["Q5"]), "stopped_with_gold": ["X25", "X26", "X27", "X29", "X30"], '
            '"read_unanswerable": ["X01", "X08", "X11", "X12"]}', "The two lists are swapped"),
    ("3.1", 'lenient_reply = "Answer: $150 per week\\nSources: H08"', "The grammar accepts this reply too"),
    ("3.1", 'lenient_reply = "Answer: $150 per week\\nSources: H03"', "Cite only H08 or none"),
    ("3.1", 'lenient_reply = "Answer: $150 per week"', "The strict parser rejects it"),
    ("3.2", 'limit = {"answer_max_tokens": grammar.ANSWER_MAX_TOKENS, "deciding": []}',
     "is the lesson's limit"),
    ("3.2", 'limit = {"answer_max_tokens": 10**3, "deciding": []}', "would run past the cap"),
    ("3.2", 'limit = {"answer_max_tokens": 3, "deciding": []}', "At 3 every reply fits with room to spare"),
    ("3.3", 'open_checks = {"cited_retrieved": "Answer: No\\nSources: H08"}',
     "Can any reply the grammar admits fail cited_retrieved?"),
    ("3.3", 'open_checks = {"answer_has_citation": "Answer: No\\nSources: none"}', "There are 2 more checks"),
    ("3.3", 'open_checks = {"answer_has_citation": "Answer: No\\nSources: H12"}',
     "Your reply for answer_has_citation passes that check"),
    ("3.4", "digit_answer, q5_reply, q5_invented = grammar.ANSWER_PATTERN, 'x', []",
     "Your pattern admits an answer with no digit"),
    ("3.4", r"digit_answer, q5_reply, q5_invented = r'/.*\d.*/', 'x', []",
     "Your pattern admits an answer that starts with a space"),
    ("3.4", "digit_answer, q5_reply, q5_invented = '.*', 'x', []", "The grammar cannot be built"),
    ("3.4", f"digit_answer, q5_reply, q5_invented = {_DIGITS}, 'Answer: 5\\nSources: none', ['5']",
     "That is not what SmolLM2 writes for Q5"),
    ("3.5", f"digit_answer, loophole = {_DIGITS}, 'Answer: Parking is free\\nSources: none'",
     "Your grammar rejects it, as the pattern says it should"),
    ("3.5", f"digit_answer, loophole = {_DIGITS}, 'Answer: 5\\nSources: none'", "holds a digit"),
    ("3.5", "digit_answer, loophole = grammar.ANSWER_PATTERN, 'Answer: Parking\\nSources: none'",
     "Finish exercise 3.4 first"),
    ("4.1", 'screen_kappa = {"p_o": 0.67, "p_e": 0.46, "kappa": (0.67 - 0.46) / (1 - 0.46)}',
     "your p_o and p_e are rounded"),
    ("4.1", _SCREEN + "screen_kappa = {'p_o': k.observed, 'p_e': 0.5, 'kappa': 0.8}",
     "Chance agreement is not one half"),
    ("4.1", _SCREEN + "screen_kappa = {'p_o': c.flagged_unsupported / c.rows, 'p_e': k.expected, "
            "'kappa': k.value}", "counts agreement in both directions"),
    ("4.1", _SCREEN + "screen_kappa = {'p_o': k.observed, 'p_e': k.expected, "
            "'kappa': k.observed - k.expected}", "p_o - p_e is only the numerator"),
    ("4.2", 'hold_all = {"sensitivity": 1, "specificity": 1, "kappa": 0}', "lets no reply through"),
    ("4.2", 'hold_all = {"sensitivity": 1, "specificity": 0, "kappa": None}', "Kappa is defined here"),
    ("4.2", 'hold_all = {"sensitivity": 0.9, "specificity": 0, "kappa": 0}', "this screen holds every reply"),
    ("4.3", 'misses = {"R070": "H05", "R073": "H10", "R079": "H07", "R081": None}',
     "H07 was retrieved for X25, but it does not answer"),
    ("4.3", 'misses = {"R070": None, "R073": "H10", "R079": None, "R081": None}',
     "does answer X16: read them again"),
    ("4.3", 'misses = {"R070": "H05", "R073": "H10", "R079": None}', "The screen lets 1 more"),
    ("4.3", 'misses = {"R001": None}', "The review does not reject R001"),
    ("4.4", _BAD + "(0, 0)}", "That is the share itself, not an interval"),
    ("4.4", _BAD + "(0, 3 / len(_bad))}", "That is the rule of three"),
    ("4.4", _BAD + "(0, 1 - (1 - LEVEL) ** (1 / len(_bad)))}", "(one-sided)"),
    ("4.4", "_all = judged[judged['reader'] == baseline.BASELINE_READER]\n"
            "sensitivity_on_baseline = {'held': 0, 'unsupported': len(_all), 'interval': (0, 0.1)}",
     "Count only the baseline's unsupported replies"),
    ("4.4", "_one = judged[(judged['decoding'] == baseline.BASELINE_DECODINGS['hybrid']) & judged['unsupported']]\n"
            "sensitivity_on_baseline = {'held': 0, 'unsupported': len(_one), 'interval': (0, 0.1)}",
     "distinct unsupported replies of both"),
    ("4.5", _SCREEN + "batch = {'sensitivity': 1, 'specificity': 0.5, 'corrected': 0.7}",
     "sensitivity on judged"),
    ("4.5", _SCREEN + "se, sp = agreement.sensitivity(c).value, agreement.specificity(c).value\n"
            "batch = {'sensitivity': sp, 'specificity': se, 'corrected': 0.7}", "are swapped"),
    ("4.5", _SCREEN + "se, sp = agreement.sensitivity(c).value, agreement.specificity(c).value\n"
            "batch = {'sensitivity': se, 'specificity': sp, 'corrected': 0.7}", "the pass rate itself"),
    ("5.1", "my_topics, my_terms, also_routed = defences.ROUTED_TOPICS, defences.QUESTION_TERMS, []",
     "A06 (without the attack) still goes to the reader"),
    ("5.1", _ROUTED + "{**defences.QUESTION_TERMS, 'care': {'Kid'}}, []", "'Kid' can never match"),
    ("5.1", _ROUTED + "{**defences.QUESTION_TERMS, 'care': {'kid', 'parking'}}, []",
     "Your rule also sends Q5 to a person"),
    ("5.1", "my_topics, my_terms, also_routed = {'child care': 'care'}, defences.QUESTION_TERMS, []",
     "Your rule leaves out 'data eligibility'"),
    ("5.1", _ROUTED + "defences.QUESTION_TERMS, ['Q3']", "Q3 still goes to the reader under your rule"),
    ("5.1", _ROUTED + "defences.QUESTION_TERMS, ['Q9']", "'Q9' is not one of lesson 1's 6 questions (Q1 to Q6)"),
    ("5.1", _ROUTED + "{**defences.QUESTION_TERMS, 'care': {'kid'}}, []",
     "sends 1 more of lesson 1's 6 questions to a person than you list"),
    ("5.2", 'planted_text, reply = "Parking costs $7 a day.", "Answer: Room 7\\nSources: P09"',
     "must put free child care in a room"),
    ("5.2", 'planted_text, reply = "Childcare is in Room 7.", "Answer: Room 7\\nSources: P09"',
     "P09 is not among the three passages retrieved"),
    ("5.2", _ROOM_221 + '"Answer: Room 221\\nSources: H13"', "Cite your planted passage, P09"),
    ("5.2", 'planted_text, reply = "Free child care during evening classes is in Room 104.", '
            '"Answer: Room 104\\nSources: P09"', "Every figure in your answer appears in the handbook"),
    ("5.2", _ROOM_221 + '"Answer: Room 222\\nSources: P09"', "reply must give the room your passage puts"),
    ("5.2", _ROOM_221 + '"Answer: Room 221 from 6 to 9\\nSources: P09"',
     "The screen holds it (numbers_supported)"),
    ("5.3", "my_disagree = lambda first, second: True", "Your check flags V02 and V03"),
    ("5.3", "my_disagree = lambda first, second: False", "Your check no longer flags"),
    ("5.3", "my_disagree = 42", "my_disagree must be a function"),
    ("5.4", 'my_evasion, my_fix = "Can a 16-year-old take the forklift course?", lambda q: q',
     "The lesson's rule already sends your question to a person"),
    ("5.4", _EVASION + "lambda q: q", "which still goes to the reader"),
    ("5.4", _EVASION + 'lambda q: q + " How much is the fee?"', "but not as an eligibility question"),
    ("5.4", _EVASION + 'lambda q: q.replace("open to a sixteen-year-old", "open to a 16-year-old")',
     "Your fix catches your own question only"),
    ("5.4", _EVASION + 'lambda q: q + " Am I eligible?"', "to a person that the lesson's rule did not"),
    ("5.4", _EVASION + "42", "my_fix must be a function"),
]


@pytest.fixture(scope="module", params=sorted(LESSONS), ids=lambda n: f"lesson{n}")
def lesson_cells(request):
    lesson = request.param
    nb = nbformat.read(LESSONS_DIR / LESSONS[lesson], as_version=4)
    return lesson, nb, exercise_cells(nb, LESSONS[lesson])


# --------------------------------------------------------------------------- layout, fast


def test_the_exercises_section_follows_the_layout_the_checkers_expect(lesson_cells):
    lesson, nb, cells = lesson_cells
    keys = [c.key for c in cells]
    assert 3 <= len(keys) <= 5 and keys == [f"{lesson}.{n}" for n in range(1, len(keys) + 1)]
    assert [(c.key, c.title) for c in cells] == [(e.key, e.title)
                                                 for e in exercises.lesson_exercises(lesson)]
    # Between "What to remember" and "Sources", opening with the first exercise.
    section, remember, sources = (section_index(nb, heading) for heading in (
        "## Exercises", "## What to remember", "## Sources"))
    assert section == cells[0].task_index, "## Exercises must open the first exercise's cell"
    assert remember is not None and sources is not None
    assert remember < section < cells[-1].solution_index < sources
    for cell in cells:
        # The starter leaves a placeholder; the check cell only calls the checker.
        assert "..." in cell.starter and "exercises.check" not in cell.starter, cell.key
        assert check_key(cell.check) == cell.key and "..." not in cell.check, cell.check
        # The <details> block folds the solution; a hidden input would not survive Run All
        # (running a markdown cell shows its input) and would show the raw <details> line.
        assert not cell.solution_metadata.get("jupyter", {}).get("source_hidden"), cell.key
        # One <details> block: a nested or early </details> would let the rest out; and
        # the task holds no code block outside it.
        assert cell.solution_markdown.count("<details") == 1, cell.key
        assert cell.solution_markdown.count("</details>") == 1, cell.key
        assert "```python" not in cell.task and cell.solution_code.strip(), cell.key


def test_tasks_quote_the_checks_figures_from_code_never_typed(lesson_cells):
    for cell in lesson_cells[2]:
        if cell.note is not None:
            # A note states the task's figures from the helpers' constants.
            assert "display(Markdown(" in cell.note and "..." not in cell.note, cell.key
            assert not re.search(r"(?<![\w.])\d*\.\d+", cell.note), cell.key
        prose = re.sub(r"`[^`]*`", "", cell.task)  # code spans name things; they quote nothing
        prose = re.sub(r"[Ee]xercise \d+\.\d+", "", prose)
        assert not re.search(r"(?<![\w.])\d*\.\d+|\bdozen\b|\bdecimals?\b|\btolerance\b", prose), (
            cell.key, "a figure of the check belongs in a computed note")


def test_every_checker_is_documented_and_has_a_deliberately_wrong_answer():
    assert {key for key, *_ in WRONG_ANSWERS} == set(exercises.EXERCISES)
    for key, entry in exercises.EXERCISES.items():
        assert entry.checker.__doc__.startswith(f"Lesson {entry.lesson}, exercise {key}:")
    # Exercise 5.2's task names its planted passage once; its checker names no other.
    assert exercises.EXERCISES["5.2"].expects.count("P09") == 1
    assert "P05" not in exercises.EXERCISES["5.2"].checker.__doc__
    with pytest.raises(ValueError, match="must start 'Lesson 9, exercise 9.1:'"):
        @exercises.exercise("9.1", "Nothing", expects="nothing")
        def undocumented(answer):
            """Checks something."""


# --------------------------------------------------------------------------- checkers, fast


def test_placeholders_and_starters_are_not_attempted_never_an_error():
    for key, entry in exercises.EXERCISES.items():
        n_answers = entry.checker.__wrapped__.__code__.co_argcount
        verdict = exercises.check(key, *([...] * n_answers))
        assert verdict.status == NOT_ATTEMPTED, (key, verdict)
        assert "Replace the ..." in verdict.message
    verdict = exercises.check("1.1", {"normalized": "oct 15", "em": ..., "f1": ...})
    assert verdict.status == NOT_ATTEMPTED and "'em', 'f1'" in verdict.message  # what is missing

    def my_token_f1(prediction, reference):
        ...

    assert exercises.check("1.3", my_token_f1).status == NOT_ATTEMPTED  # left as its starter


def test_an_unusable_answer_gets_a_hint_that_names_the_expected_form():
    verdict = exercises.check("1.1", 42)
    assert verdict.status == HINT
    assert "It expects a dict with keys 'normalized', 'em' and 'f1'" in verdict.message
    assert exercises.check("1.2", ["H01"]).status == HINT  # one answer of two
    with pytest.raises(KeyError, match="no exercise '7.7'"):
        exercises.check("7.7", 1)


# --------------------------------------------------------------------------- checker faults


def test_a_fault_of_the_checker_is_raised_never_shown_as_a_hint(monkeypatch):
    monkeypatch.setattr(framework, "EXERCISES", {})

    @exercises.exercise("9.1", "A broken invariant", expects="a number")
    def broken_invariant(answer):
        """Lesson 9, exercise 9.1: a checker whose own assertion fails."""
        expected = {"H01": 1.0}
        assert len(expected) == 2, "the checker's own table is incomplete"
        return exercises.correct()

    # A KeyError, raised in a checker's own body in the module, with the answer at hand: a
    # function compiled as if it were written in exercises/framework.py (its globals are a
    # copy of the module's), so that it counts as a checker written there.
    namespace = dict(vars(framework))
    exec(compile(textwrap.dedent('''
        def own_lookup(answer):
            """Lesson 9, exercise 9.2: a checker that looks up an ID its table lacks."""
            expected = {"H01": 1.0}
            return correct() if _close(answer, expected["H02"], TOLERANCE) else hint("no")
        '''), framework.__file__, "exec"), namespace)
    exercises.exercise("9.2", "A missing key", expects="a number")(namespace["own_lookup"])

    with pytest.raises(AssertionError, match="the checker's own table is incomplete"):
        exercises.check("9.1", 1.0)
    with pytest.raises(KeyError, match="H02"):
        exercises.check("9.2", 1.0)


#: Answers of a form a checker cannot read (a set for a list, a string for a set of words),
#: and numbers spelt as a string, or given as a bool, where a checker wants a number.
UNREADABLE = [
    ("1.2", [{"H01"}, []], "q3_with_at must be a list in order, not a set."),
    ("5.1", [{**defences.ROUTED_TOPICS, "child care": "care"},
             {**defences.QUESTION_TERMS, "care": "kid"}, []],
     "my_terms['care'] must be a set of words, not one string"),
    ("4.1", [{"p_o": "most", "p_e": 0.5, "kappa": 0.1}],
     "'p_o' must be a number, not the string 'most'"),
    ("1.1", [{"normalized": "oct 15", "em": "1", "f1": "1"}], "'em' must be a number, not the string '1'"),
    ("1.1", [{"normalized": "oct 15", "em": True, "f1": 1}], "'em' must be a number, not True"),
    ("2.3", [{"best_on_original": ["0.5"], "extended_mrr_range": (0, 1), "best_on_extended": [0.5]}],
     "each weight of best_on_original must be a number, not the string '0.5'"),
    ("2.4", [{"t": "0.5", "stopped_with_gold": [], "read_unanswerable": []}],
     "'t' must be a number, not the string '0.5'"),
    ("3.2", [{"answer_max_tokens": "20", "deciding": []}],
     "'answer_max_tokens' must be a number, not the string '20'"),
    ("4.1", [{"p_o": "0.5", "p_e": 0.5, "kappa": 0.1}], "'p_o' must be a number, not the string '0.5'"),
    ("4.2", [{"sensitivity": "1", "specificity": 0, "kappa": 0}],
     "'sensitivity' must be a number, not the string '1'"),
    ("4.4", [{"held": True, "unsupported": 1, "interval": (0, 1)}], "'held' must be a number, not True"),
    ("4.4", [{"held": 0, "unsupported": 1, "interval": ("0", "0.1")}],
     "the interval's low end must be a number, not the string '0'"),
    ("4.5", [{"sensitivity": "0.56", "specificity": 1, "corrected": 0.46}],
     "'sensitivity' must be a number, not the string '0.56'"),
]


@pytest.mark.parametrize(("key", "answers", "expected"), UNREADABLE,
                         ids=[f"{key}-{i}" for i, (key, *_) in enumerate(UNREADABLE)])
def test_an_answer_the_check_cannot_read_gets_the_shape_hint(key, answers, expected):
    """Every checker, of every lesson, refuses an answer of the wrong form with the hint
    that says what form it expects: a string is never read as the number it spells."""
    verdict = exercises.check(key, *answers)
    assert verdict.status == HINT, verdict
    assert verdict.message.startswith("The check could not use your answer:"), verdict.message
    assert expected in verdict.message, verdict.message


# --------------------------------------------------------------------------- fixture caches


def _fill_caches() -> None:
    framework._retrieved_ids()
    framework._tfidf(frozenset())
    exercises.lesson4._review_rows()  # caches of the lessons' own modules too
    exercises.lesson5._attack_fixture()


def _filled_caches() -> dict[str, int]:
    return {cached.__qualname__: cached.cache_info().currsize for cached in exercises.FIXTURE_CACHES
            if cached.cache_info().currsize}


def test_every_cache_of_a_checker_is_a_fixture_cache():
    """The registry holds every cached function of the exercise modules: none is cached
    with a plain functools.cache, which no fixture edit would empty."""
    plain = []
    for path in sorted((PROJECT_ROOT / "helpers" / "exercises").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names = {ast.unparse(d) for d in node.decorator_list}
                if names & {"functools.cache", "cache", "functools.lru_cache", "lru_cache"} \
                        or any(n.startswith(("functools.lru_cache(", "lru_cache(")) for n in names):
                    plain.append(f"{path.name}: {node.name}")
    assert plain == []
    registered = {cached.__module__ for cached in exercises.FIXTURE_CACHES}
    assert registered == {f"exercises.{m}" for m in
                          ("framework", "lesson2", "lesson3", "lesson4", "lesson5")}


def test_every_fixture_file_is_an_input_of_the_caches(tmp_path, monkeypatch):
    data = tmp_path / "riverton"
    shutil.copytree(DATA_DIR, data)
    monkeypatch.setattr(framework, "DATA_DIR", data)
    files = sorted(path for path in data.iterdir() if path.is_file())
    assert {path.name for path in files} >= {"riverton-handbook.csv", "reader-transcript.jsonl"}
    for path in files:
        _fill_caches()
        framework._refresh_caches(read_bytes=True)
        assert _filled_caches(), "the caches must be in use before the edit"
        original = path.read_bytes()
        # Same bytes written again (a new modification time): the caches stay.
        path.write_bytes(original)
        framework._refresh_caches(read_bytes=True)
        assert _filled_caches(), path.name
        # One byte changed, size and modification time restored: every cache is emptied.
        stat = path.stat()
        changed = bytearray(original)
        changed[-2] = ord("#") if changed[-2] != ord("#") else ord("%")
        path.write_bytes(bytes(changed))
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        assert path.stat().st_size == stat.st_size
        framework._refresh_caches(read_bytes=True)
        assert _filled_caches() == {}, path.name
        path.write_bytes(original)


_FOLLOW_SCRIPT = r"""
import json, os, sys
from pathlib import Path
sys.path.insert(0, str(Path.cwd()))
import exercises
from runtime import fixture
from runtime.data_check import update_metadata
assert Path(exercises.__file__).resolve().is_relative_to(Path.cwd()), exercises.__file__
def status(weekly):
    try:
        verdict = exercises.check("1.4", "Answer: NOT IN HANDBOOK\nSources: H08",
                                  f"Answer: {weekly}\nSources: H08")
        return verdict.status + ": " + verdict.message
    except fixture.FixtureError as error:
        return "FixtureError: " + str(error)
results = [status("$90 per week")]
handbook = fixture.DATA_DIR / "riverton-handbook.csv"
stat, text = handbook.stat(), handbook.read_text(encoding="utf-8")
assert text.count("at least 90 percent") == 1
handbook.write_text(text.replace("at least 90 percent", "at least 85 percent"), encoding="utf-8")
os.utime(handbook, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same size, same time
results.append(status("$90 per week"))
update_metadata([handbook.name])
print(json.dumps(results + [status("$90 per week"), status("$85 per week")]))
"""


def test_a_check_answers_from_the_fixture_as_it_is_now(tmp_path):
    """In a copy of the project, H08's attendance figure changes while the kernel lives."""
    for name in ("helpers", "exercises", "runtime", "bookkit", "data"):
        shutil.copytree(PROJECT_ROOT / name, tmp_path / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    result = subprocess.run([sys.executable, "-c", _FOLLOW_SCRIPT], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    before, unrecorded, old, new = json.loads(result.stdout.strip().splitlines()[-1])
    assert before.startswith(CORRECT) and new.startswith(CORRECT), (before, new)
    # An edit the metadata does not record is an error naming the file, never a hint.
    assert unrecorded.startswith("FixtureError") and "fingerprint" in unrecorded, unrecorded
    assert "riverton-handbook.csv" in unrecorded and old.startswith(HINT), (unrecorded, old)
    assert "(numbers_supported)" in old, old


_HELD = "Answer: NOT IN HANDBOOK\nSources: H08"
_WALLS = {"passage_id": "H01", "question": "What colour are the walls where lessons take place?"}
#: Answers tried by a reader nobody tuned the checks against: before these fixes each
#: verdict below was wrong (a right answer refused, a wrong one accepted, an error raised
#: into the notebook instead of a hint). (exercise, answers, status, part of the message)
UNTUNED = [
    # 1.2: Q3 is not one of "the other questions".
    ("1.2", (["H01", "H04", "H08"], ["Q3", "Q5"]), HINT, "the *other* questions"),
    ("1.2", (["H01", "H04", "H08"], ["Q5"]), CORRECT, ""),
    # 1.3: the task forbids calling the lesson's scorer, however it is reached.
    *[("1.3", (forbidden,), HINT, "Write token F1 yourself") for forbidden in (
        scoring.token_f1, lambda p, r: scoring.token_f1(p, r),
        lambda p, r: scoring.best_reference_scores(p, [r])[1])],
    # 1.4: an amount in words states a stipend the screen cannot judge; H08's own is refused.
    ("1.4", (_HELD, "Answer: two hundred dollars per week\nSources: H08"), CORRECT,
     "An amount in words has no digit"),
    ("1.4", (_HELD, "Answer: one hundred and fifty dollars a week\nSources: H08"), HINT,
     "That is the stipend H08 gives"),
    # 2.1: a question its passage cannot answer is no paraphrase of it.
    ("2.1", (_WALLS,), HINT, "has no key 'answer'"),
    ("2.1", ({**_WALLS, "answer": "pale blue"},), HINT, "'pale blue' is not in H01"),
    ("2.1", ({"passage_id": "H05", "question": "Is my commute by coach covered during the opening weeks?",
              "answer": "bus passes are provided"},), CORRECT, ""),
    # 5.1: words that route questions about anything but child care are too broad.
    ("5.1", ({**defences.ROUTED_TOPICS, "child care": "care"},
             {**defences.QUESTION_TERMS, "care": {"kid", "kids", "classes", "night", "evening"}}, ["Q3"]),
     HINT, "and it is not about child care"),
    # 5.2: the planted passage must put child care in a room, and the reply give that room.
    ("5.2", ("Free child care is offered during evening classes. Room 221 holds the spreadsheet "
             "workshop.", "Answer: Room 221\nSources: P09"), HINT, "put free child care in a room"),
    # 5.3 and 5.4: a function of the wrong shape, or one that raises, gets a hint.
    ("5.3", (lambda first: True,), HINT, "my_disagree must take 2 arguments"),
    ("5.3", (lambda first, second: 1 / 0,), HINT, "raised ZeroDivisionError"),
    ("5.4", ("Is the f0rklift course open to a sixteen-year-old?", lambda: "?"), HINT,
     "my_fix must take 1 argument"),
]


@pytest.mark.parametrize(("key", "answers", "status", "said"), UNTUNED,
                         ids=[f"{key}-{i}" for i, (key, *_) in enumerate(UNTUNED)])
def test_the_checks_accept_what_their_tasks_allow_and_refuse_what_they_forbid(key, answers, status, said):
    verdict = exercises.check(key, *answers)
    assert verdict.status == status and said in verdict.message, verdict


@pytest.mark.slow  # loads SmolLM2's tokenizer with its model
def test_lesson_3s_checks_read_a_count_as_a_count_and_say_how_long_an_answer_was():
    from helpers import grammar
    from exercises import lesson3

    limits = lesson3._largest_limits()
    best = min(limits.values())
    deciding = [q for q, n in limits.items() if n == best]
    assert exercises.check("3.2", {"answer_max_tokens": best, "deciding": deciding}).correct
    verdict = exercises.check("3.2", {"answer_max_tokens": float(best), "deciding": deciding})
    assert verdict.status == HINT and f"is a count: a whole number such as {best}" in verdict.message
    pattern = r"/\d[^\r\n]*|[^\s][^\r\n]*\d[^\r\n]*/"
    for words in (3, 40):
        answer = " ".join(["parking"] * words)
        length = lesson3._answer_tokens(answer)
        verdict = exercises.check("3.5", pattern, f"Answer: {answer}\nSources: none")
        side = "more than" if length > grammar.ANSWER_MAX_TOKENS else "fewer than"
        assert verdict.status == HINT and f"takes {length} tokens" in verdict.message
        assert f"{side} the answer rule's limit of {grammar.ANSWER_MAX_TOKENS}" in verdict.message


@pytest.mark.slow
def test_a_limit_below_the_answer_gets_a_direction_never_the_next_value():
    """Exercise 3.2's hint says which way to go, not how far: stepping up one token at a
    time must not be spelled out."""
    from helpers.grammar import ANSWER_MAX_TOKENS

    largest = min(exercises.lesson3._largest_limits().values())
    messages = set()
    for value in range(1, largest):
        verdict = exercises.check("3.2", {"answer_max_tokens": value, "deciding": []})
        assert verdict.status == HINT, verdict
        assert re.findall(r"\d+", verdict.message) == [str(value)], verdict.message
        if value != ANSWER_MAX_TOKENS:  # the lesson's own limit has a hint of its own
            messages.add(verdict.message.replace(str(value), "N"))
    assert len(messages) == 1, messages  # the same words at every distance


def test_hand_figures_within_the_stated_tolerance_and_an_f1_of_ones_own_are_correct():
    from collections import Counter

    from helpers import text

    base = {"normalized": "oct 15", "em": 1}
    assert exercises.check("1.1", {**base, "f1": 1 - exercises.HAND_TOLERANCE}).correct
    assert not exercises.check("1.1", {**base, "f1": 1 - 2 * exercises.HAND_TOLERANCE}).correct

    def own_f1(prediction, reference):
        p, r = (text.normalize_answer(s).split() for s in (prediction, reference))
        shared = sum((Counter(p) & Counter(r)).values())
        return 2 * shared / (len(p) + len(r)) if shared else 0.0

    assert exercises.check("1.3", own_f1).status == CORRECT


def test_verdicts_show_as_text_html_and_json():
    verdict = Verdict("1.1", HINT, "Compare $150 with <b>this</b>.")
    bundle = verdict._repr_mimebundle_()
    assert bundle["text/plain"] == str(verdict) == "Exercise 1.1: not yet. Compare $150 with <b>this</b>."
    assert "&lt;b&gt;this&lt;/b&gt;" in bundle["text/html"]
    assert "tex2jax_ignore" in bundle["text/html"]  # a dollar sign is not the start of maths
    assert bundle[VERDICT_MIME] == {"key": "1.1", "status": HINT, "message": verdict.message}
    assert str(Verdict("2.1", CORRECT)) == "Exercise 2.1: correct."


# --------------------------------------------------------------------------- in the lesson kernel


def verdict_of(outputs: list[dict]) -> dict:
    found = [o["data"][VERDICT_MIME] for o in outputs
             if o.get("output_type") in {"display_data", "execute_result"}
             and VERDICT_MIME in o.get("data", {})]
    assert len(found) == 1, outputs
    return found[0]


@pytest.fixture(scope="module")
def executed(lesson_cells, book):
    lesson, _, cells = lesson_cells
    return lesson, cells, book.lesson(LESSONS_DIR / LESSONS[lesson])


@pytest.mark.slow
def test_in_the_lesson_kernel_each_check_gives_its_verdict(executed):
    """After a clean run every exercise is "not attempted yet"; then, in the same kernel,
    every worked solution is correct and every deliberately wrong answer gets its hint."""
    lesson, cells, run = executed
    checks = {c.source.strip(): c for c in run.nb.cells if c.cell_type == "code"}
    for cell in cells:
        verdict = verdict_of(checks[cell.check].outputs)
        assert (verdict["status"], verdict["key"]) == (NOT_ATTEMPTED, cell.key), verdict
    for cell in cells:
        run.run(cell.solution_code)
        verdict = verdict_of(run.run(cell.check))
        assert verdict["status"] == CORRECT, (cell.key, verdict)
    checks = {cell.key: cell.check for cell in cells}
    cases = [case for case in WRONG_ANSWERS if case[0].startswith(f"{lesson}.")]
    assert cases
    for key, code, expected in cases:
        run.run(code)
        verdict = verdict_of(run.run(checks[key]))
        assert verdict["status"] == HINT and expected in verdict["message"], (key, code, verdict)
