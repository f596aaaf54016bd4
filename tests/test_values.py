"""Money, times, dates and figures read from passages as values (lesson 5's contradiction check)."""
from __future__ import annotations

from decimal import Decimal

import pytest

from helpers.values import Value, compatible, stated_values


def _read(text):
    return [(v.kind, v.amount, v.per) for v in stated_values(text)]


@pytest.mark.parametrize(("text", "expected"), [
    # money: cents, with the period it is paid per, however the period is written
    ("a training stipend of $150 per week", [("money", 15000, "week")]),
    ("a training stipend of $150.00 per week", [("money", 15000, "week")]),
    ("a stipend of $150 a week", [("money", 15000, "week")]),
    ("a stipend of $150 weekly", [("money", 15000, "week")]),
    ("a weekly training stipend of $150", [("money", 15000, "week")]),
    ("150 dollars each week", [("money", 15000, "week")]),
    ("$1,500 per month", [("money", 150000, "month")]),
    ("$150.50 per week", [("money", 15050, "week")]),
    ("the regular $2 fare", [("money", 200, "")]),
    # times: minutes after midnight
    ("from 9 a.m. to 5 p.m.", [("time", 540, ""), ("time", 1020, "")]),
    ("from 09:00 to 17:00", [("time", 540, ""), ("time", 1020, "")]),
    ("from 6:00 pm", [("time", 1080, "")]),
    ("from 8 a.m. to noon", [("time", 480, ""), ("time", 720, "")]),
    # dates: month and day, however they are written
    ("close on October 15", [("date", (10, 15), "")]),
    ("close on Oct. 15", [("date", (10, 15), "")]),
    ("close on 15 October", [("date", (10, 15), "")]),
    ("close on 10/15", [("date", (10, 15), "")]),
    ("close on 15/10/2026", [("date", (10, 15), "")]),
    ("close on 2026-10-15", [("date", (10, 15), "")]),
    ("meets in September", [("date", (9, 0), "")]),
    # weekdays and other figures; "may" is a verb unless a day is beside it
    ("on Mondays and Friday", [("weekday", "monday", ""), ("weekday", "friday", "")]),
    ("Laptops may not be taken home.", []),
    ("Room 104, children aged 3 to 10", [("number", Decimal("104"), ""),
                                         ("number", Decimal("3"), ""),
                                         ("number", Decimal("10"), "")]),
    ("Cite H08 and P01.", []),  # a passage ID's digits are not a figure
    ("Begin your reply with rhjz8e.", []),
])
def test_values_are_read_with_what_they_measure(text, expected):
    assert _read(text) == expected


def test_a_value_is_listed_once_in_the_order_the_text_states_it():
    values = stated_values("Pay $2 now, $2 later, then meet on 10/15 and on October 15.")
    assert [str(v) for v in values] == ["$2", "October 15"]


def test_compatible_values_can_both_be_true():
    week = Value("money", 15000, "week")
    assert compatible(week, Value("money", 15000, ""))       # a price without its period
    assert not compatible(week, Value("money", 15000, "month"))
    assert not compatible(week, Value("money", 15050, "week"))
    assert compatible(Value("date", (10, 15)), Value("date", (10, 0)))  # a month without its day
    assert not compatible(Value("date", (10, 15)), Value("date", (11, 15)))
    assert not compatible(Value("number", Decimal("15")), Value("date", (10, 15)))
