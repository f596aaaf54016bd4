"""Money, times, dates and other figures read from text as values, not as digit strings.

Introduced in lesson 5, "Two passages that disagree". Comparing the digit strings of two
passages mistakes a rewording for a contradiction ("$150.00" has a digit run "00" that
"$150" lacks) and misses real contradictions ("$150 per month" has the same digits as
"$150 per week"). So each figure is read with what it measures:

* **money**: a dollar amount in cents, with the period it is paid per when the text says
  one ("$150 per week", "$150 a week", "$150 weekly", "a weekly stipend of $150");
* **time**: minutes after midnight ("6 p.m.", "18:00" and "6:00 pm" are all 1080;
  "noon" is 720);
* **date**: a month and, when given, a day ("October 15", "Oct. 15", "15 October",
  "10/15" and "2026-10-15" are all October 15; "in October" is October, day unknown);
* **weekday**: a day of the week ("Monday", "Mondays");
* **number**: any other digit run not glued to a letter, as the screen reads figures
  (the digits of a passage ID such as ``H08`` are not a figure).

A numeric date is read month first, as the handbook's readers write it, unless the
first number cannot be a month ("15/10" is October 15). "May" counts as a month only
with a day beside it, because the handbook uses it as a verb. Every rule is a regular
expression below; what none of them matches is not read.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

import regex

MONTHS = {
    "january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7,
    "august": 8, "september": 9, "october": 10, "november": 11, "december": 12,
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9,
    "sept": 9, "oct": 10, "nov": 11, "dec": 12,
}
MONTH_NAMES = ("January February March April May June July August September October "
               "November December").split()
WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
#: What money is paid per: the words after "per", "a", "each" or "every", and the
#: adjectives that say the same ("weekly").
PERIODS = {"hour": "hour", "day": "day", "week": "week", "month": "month", "year": "year",
           "ride": "ride", "trip": "ride", "class": "class", "hourly": "hour",
           "daily": "day", "weekly": "week", "monthly": "month", "yearly": "year",
           "annual": "year", "annually": "year"}

_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
_NOUN_PERIODS = "hour|day|week|month|year|ride|trip|class"
_ADJECTIVE_PERIODS = "hourly|daily|weekly|monthly|yearly|annually|annual"

_MONEY = regex.compile(
    r"(?:\$\s?(?P<dollars>\d{1,3}(?:,\d{3})+|\d+)(?:\.(?P<cents>\d{2}))?"
    r"|(?<![\p{L}\p{N}.])(?P<worded>\d+)(?:\.(?P<wcents>\d{2}))?\s+dollars?\b)"
    rf"(?:\s*(?:per|a|an|each|every|/)\s*(?P<per>{_NOUN_PERIODS})s?\b"
    rf"|\s+(?P<after>{_ADJECTIVE_PERIODS})\b)?",
    regex.IGNORECASE)
#: An adjective period a few words before an amount: "a weekly training stipend of $150".
_PERIOD_BEFORE = regex.compile(rf"\b({_ADJECTIVE_PERIODS})\b(?:\W+\w+){{0,4}}\W*$",
                               regex.IGNORECASE)
_TIME_12 = regex.compile(
    r"(?<![\p{L}\p{N}:])(?P<hour>1[0-2]|0?[1-9])(?::(?P<minute>[0-5]\d))?\s*"
    r"(?P<half>a\.?\s?m\.?|p\.?\s?m\.?)(?![\p{L}])", regex.IGNORECASE)
_TIME_24 = regex.compile(r"(?<![\p{L}\p{N}:])(?P<hour>[01]?\d|2[0-3]):(?P<minute>[0-5]\d)"
                         r"(?![\p{N}])")
_TIME_WORDS = regex.compile(r"\b(?P<word>noon|midday|midnight)\b", regex.IGNORECASE)
_DATE_ISO = regex.compile(r"(?<![\p{N}])\d{4}-(?P<month>\d{2})-(?P<day>\d{2})(?![\p{N}])")
_DATE_NUMERIC = regex.compile(
    r"(?<![\p{L}\p{N}/])(?P<first>\d{1,2})/(?P<second>\d{1,2})(?:/(?:\d{4}|\d{2}))?"
    r"(?![\p{N}/])")
_DATE_MONTH_DAY = regex.compile(
    rf"\b(?P<month>{_MONTH})\.?\s+(?P<day>\d{{1,2}})(?:st|nd|rd|th)?(?![\p{{N}}])",
    regex.IGNORECASE)
_DATE_DAY_MONTH = regex.compile(
    rf"(?<![\p{{L}}\p{{N}}])(?P<day>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<month>{_MONTH})\b",
    regex.IGNORECASE)
_MONTH_ALONE = regex.compile(
    r"\b(?P<month>january|february|march|april|june|july|august|september|october|"
    r"november|december)\b", regex.IGNORECASE)
_WEEKDAY = regex.compile(rf"\b(?P<day>{'|'.join(WEEKDAYS)})s?\b", regex.IGNORECASE)


@dataclass(frozen=True)
class Value:
    """One value a text states: its kind, what it amounts to, and how it was written.

    ``amount`` is cents for money, minutes after midnight for a time, ``(month, day)``
    for a date (day 0 when the text gives none), the weekday's name, or the number.
    ``per`` is what money is paid per ("" when the text does not say).
    """

    kind: str
    amount: object
    per: str = ""
    written: str = field(default="", compare=False)

    def __str__(self) -> str:
        return self.written


def compatible(first: Value, second: Value) -> bool:
    """Whether two values of one kind can both be true: equal, or one says less.

    Lesson 5, "Two passages that disagree". Money agrees when the amounts are equal and
    the periods are equal or one is not given; a date agrees when the months are equal
    and the days are equal or one is not given; anything else must be equal.
    """
    if first.kind != second.kind:
        return False
    if first.kind == "money":
        return first.amount == second.amount and (
            first.per == second.per or not first.per or not second.per)
    if first.kind == "date":
        (m1, d1), (m2, d2) = first.amount, second.amount
        return m1 == m2 and (d1 == d2 or not d1 or not d2)
    return first.amount == second.amount


def _blank(text: str, span: tuple[int, int]) -> str:
    """``text`` with ``span`` replaced by spaces, so nothing is read twice."""
    start, end = span
    return text[:start] + " " * (end - start) + text[end:]


def _date(month: int, day: int, written: str) -> Value | None:
    if not 1 <= month <= 12 or not 0 <= day <= 31:
        return None
    name = MONTH_NAMES[month - 1]
    return Value("date", (month, day), written=f"{name} {day}" if day else name)


def stated_values(text: str) -> tuple[Value, ...]:
    """Every value ``text`` states, once each, in the order the text states them.

    Lesson 5, "Two passages that disagree" (see the module docstring for the rules).
    """
    found: list[tuple[int, Value]] = []
    rest = text

    def take(pattern, read):
        nonlocal rest
        for match in list(pattern.finditer(rest)):
            value = read(match)
            if value is not None:
                found.append((match.start(), value))
                rest = _blank(rest, match.span())

    def money(match):
        if match.group("dollars") is not None:
            dollars, cents = match.group("dollars").replace(",", ""), match.group("cents")
        else:
            dollars, cents = match.group("worded"), match.group("wcents")
        per_word = match.group("per") or match.group("after")
        if per_word is None:
            before = _PERIOD_BEFORE.search(text[:match.start()])
            per_word = before.group(1) if before else None
        per = PERIODS[per_word.lower()] if per_word else ""
        amount = int(dollars) * 100 + int(cents or 0)
        shown = f"${int(dollars):,}" + (f".{cents}" if cents and cents != "00" else "")
        return Value("money", amount, per, shown + (f" per {per}" if per else ""))

    def time12(match):
        hour, minute = int(match.group("hour")) % 12, int(match.group("minute") or 0)
        if match.group("half").lower().startswith("p"):
            hour += 12
        return Value("time", hour * 60 + minute, written=f"{hour:02d}:{minute:02d}")

    def time24(match):
        hour, minute = int(match.group("hour")), int(match.group("minute"))
        return Value("time", hour * 60 + minute, written=f"{hour:02d}:{minute:02d}")

    def time_word(match):
        minutes = 0 if match.group("word").lower() == "midnight" else 720
        return Value("time", minutes, written=f"{minutes // 60:02d}:00")

    def iso(match):
        return _date(int(match.group("month")), int(match.group("day")), match.group())

    def numeric(match):
        first, second = int(match.group("first")), int(match.group("second"))
        month, day = (first, second) if first <= 12 else (second, first)
        return _date(month, day, match.group())

    def month_day(match):
        return _date(MONTHS[match.group("month").lower()], int(match.group("day")),
                     match.group())

    def month_alone(match):
        return _date(MONTHS[match.group("month").lower()], 0, match.group())

    def weekday(match):
        day = match.group("day").lower()
        return Value("weekday", day, written=day.capitalize())

    take(_MONEY, money)
    take(_TIME_12, time12)
    take(_TIME_24, time24)
    take(_TIME_WORDS, time_word)
    take(_DATE_ISO, iso)
    take(_DATE_NUMERIC, numeric)
    take(_DATE_MONTH_DAY, month_day)
    take(_DATE_DAY_MONTH, month_day)
    take(_MONTH_ALONE, month_alone)
    take(_WEEKDAY, weekday)
    for match in regex.finditer(r"(?<![\p{L}\p{N}])\d+(?:\.\d+)?", rest):
        found.append((match.start(), Value("number", Decimal(match.group()),
                                             written=match.group())))
    ordered, seen = [], set()
    for _, value in sorted(found, key=lambda pair: pair[0]):
        if value not in seen:
            seen.add(value)
            ordered.append(value)
    return tuple(ordered)
