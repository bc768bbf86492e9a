"""Dates in free text → half-open ranges of aware UTC datetimes, against an injected clock.

A date phrase is a relation (``since``, ``before`` …, or none) and a *period*: a day, a week, a
month, a quarter, a year, or a rolling window. It becomes ``[start, end)`` conditions:

========================  =======================================================
``in``/``on``/``from``/-  ``gte start`` and ``lt end``
``since``/``as of``       ``gte start``
``after``                 ``gte end`` (after March = from April 1st)
``before``/``prior to``   ``lt start``
``until``/``through``     ``lt end`` (until March = up to the end of March)
``between A and B``       ``gte start(A)`` and ``lt end(B)`` (``from A to B`` too)
``older than N days``     ``lt start`` of "last N days"
========================  =======================================================

The rules (``now`` is the injected clock, ``today`` its UTC date):

* weeks start on Monday; ``this``/``last``/``next`` week, month, quarter and year are calendar
  periods (``last week`` is Monday to Monday before this week's Monday);
* ``last``/``past``/``previous N days`` (weeks, months, years) is the rolling window of whole days
  ending with today, today included: ``last 7 days`` = ``[today - 6 days, tomorrow)``; ``past week``
  and ``the last week`` (month, year) are the rolling window of one unit;
* a month, a quarter, a day of a month or a weekday without a year is the most recent one that is
  not in the future (on 2025-06-18, ``March`` is March 2025, ``July`` is July 2024, ``Monday`` is
  2025-06-16; ``last Monday`` is strictly before today);
* a bare month name, weekday, quarter or year counts only after a relation word (``in March``,
  ``since 2024``), so ``Route 66`` or a campaign called ``Q3 webinar`` is no date;
* ``N days ago`` is that single day; ``by Friday`` is a deadline, which no column holds.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from persistence import Op
from rag_agent.understanding.rules.gates import Said
from rag_agent.understanding.rules.patterns import first_letter

__all__ = ["DateMatch", "find_dates"]

_MONTHS = {
    "january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7,
    "august": 8, "september": 9, "october": 10, "november": 11, "december": 12,
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "sept": 9,
    "oct": 10, "nov": 11, "dec": 12,
}  # fmt: skip
_WEEKDAYS = {
    "monday": 0, "tuesday": 1, "wednesday": 2, "thursday": 3, "friday": 4, "saturday": 5,
    "sunday": 6, "mon": 0, "tue": 1, "tues": 1, "wed": 2, "thu": 3, "thur": 3, "thurs": 3,
    "fri": 4, "sat": 5, "sun": 6,
}  # fmt: skip
_MONTH = "(?:" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\b\.?"
_WEEKDAY = "(?:" + "|".join(sorted(_WEEKDAYS, key=len, reverse=True)) + r")\b"
_ORD = r"(?:st|nd|rd|th)?"
_YEAR = r"(?:19|20)[0-9]{2}"
_UNIT = r"(?:day|week|month|quarter|year)s?"
_NUMBER_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
_N = r"(?:[0-9]{1,4}|a|an|one|two|three|four|five|six)"

# Periods that stand on their own, and those that need a relation word before them.
_FREE = [
    r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?![\w-])",
    rf"{_YEAR}-[0-9]{{1,2}}(?![\w-])",
    rf"{_MONTH}\s+[0-9]{{1,2}}{_ORD}(?:,?\s+{_YEAR})?(?![\w-])",
    rf"[0-9]{{1,2}}{_ORD}\s+(?:of\s+)?{_MONTH}(?:,?\s+{_YEAR})?(?![\w-])",
    rf"{_MONTH},?\s+{_YEAR}(?![\w-])",
    rf"Q[1-4]\s+{_YEAR}(?![\w-])",
    r"today|yesterday|tomorrow",
    r"(?:this|last|next|previous|current)\s+(?:week|month|quarter|year)\b",
    rf"(?:the\s+)?(?:last|past|previous)\s+(?:{_N}\s+)?{_UNIT}\b",
    rf"{_N}\s+{_UNIT}\s+ago\b",
    rf"(?:last|this)\s+{_WEEKDAY}",
]
_BOUND = [rf"{_MONTH}(?![\w-])", rf"{_WEEKDAY}", r"Q[1-4](?![\w-])", rf"{_YEAR}(?![\w-])"]
_PERIOD = "(?:" + "|".join(_FREE + _BOUND) + ")"
_FREE_PERIOD = "(?:" + "|".join(_FREE) + ")"

_RELATIONS = {
    "since": "since", "as of": "since", "starting": "since", "after": "after",
    "later than": "after", "before": "before", "prior to": "before", "earlier than": "before",
    "until": "until", "till": "until", "through": "until", "up to": "until", "in": "in",
    "on": "in", "during": "in", "from": "in", "for": "in", "within": "in", "over": "in",
    "by": "by",
}  # fmt: skip
_REL = "(?:" + "|".join(sorted(_RELATIONS, key=len, reverse=True)).replace(" ", r"\s+") + ")"

# Every free period holds a digit, a month (its short name), or one of these words.
_FREE_NEEDS = (
    *"0123456789",
    *(month for month in _MONTHS if len(month) == 3),
    "today", "yesterday", "tomorrow", "this", "last", "next", "previous", "current", "past",
    "ago",
)  # fmt: skip
_FREE_NEEDS_RE = re.compile("|".join(_FREE_NEEDS))
# Every period holds what a free one holds, or a weekday (its short name) or a "Q1"-"Q4" quarter
# (a digit): a text with none of these holds no related date either.
_PERIOD_NEEDS_RE = re.compile("|".join((*_FREE_NEEDS, *(d for d in _WEEKDAYS if len(d) == 3))))
_RANGE_NEEDS = re.compile("between|from")
_OLDER_NEEDS = re.compile("older|newer")
# Gates (see :mod:`.gates`), finer than the pre-checks above, when the text's words are known.
# A free period holds a year (four digits), one of these words written whole (a month, a
# quarter, "last"...), or a word starting "today" (the regex ends none of those three at a
# word's end).
_FREE_WORDS = frozenset(
    {"this", "last", "next", "previous", "current", "past", "ago", "q1", "q2", "q3", "q4"}
) | frozenset(_MONTHS)
_DAY_WORDS = ("today", "yesterday", "tomorrow")
# Any period holds what a free one holds, or a weekday written whole.
_PERIOD_WORDS = _FREE_WORDS | frozenset(_WEEKDAYS)
_RELATION_WORDS = frozenset(word for phrase in _RELATIONS for word in phrase.split())
_RANGE_WORDS = frozenset({"between", "from"})
_OLDER_WORDS = frozenset({"older", "newer"})


def _may_hold_free(said: Said) -> bool:
    return said.four_digits or said.any_of(_FREE_WORDS) or said.starts_any(_DAY_WORDS)


def _may_hold_period(said: Said, free: bool | None = None) -> bool:
    """``free``: :func:`_may_hold_free` of ``said``, when already known."""
    return (_may_hold_free(said) if free is None else free) or said.any_of(_PERIOD_WORDS)


# The patterns below that :func:`.patterns.first_letter` writes: one test of the characters a
# match may start with at each position, instead of every alternative in turn.
_RANGE = (
    rf"\b(?:between|from)\s+(?P<a>{_PERIOD})\s+(?:and|to|until|till|through)\s+(?P<b>{_PERIOD})"
)
_RANGE_RE = re.compile(first_letter("bf", _RANGE), re.IGNORECASE)
_OLDER = rf"\b(?P<rel>older|newer)\s+than\s+(?P<n>{_N})\s+(?P<unit>{_UNIT})\b"
_OLDER_RE = re.compile(first_letter("on", _OLDER), re.IGNORECASE)
_RELATED = rf"\b(?P<rel>{_REL})\s+(?P<p>{_PERIOD})"
# (written by :func:`.patterns.first_letter`: one test of the relations' first letters at each
# position, instead of every relation in turn)
_RELATED_RE = re.compile(
    first_letter("".join(sorted({relation[0] for relation in _RELATIONS})), _RELATED),
    re.IGNORECASE,
)
_FREE_MATCH = rf"(?<![\w-])(?P<p>{_FREE_PERIOD})"
# A free period starts with a digit, a month, a quarter ("Q3"), "today", "this", "last",
# "the", "a", "one"... (see :data:`_FREE`).
_FREE_RE = re.compile(first_letter("0-9acdfjlmnopqsty", _FREE_MATCH), re.IGNORECASE)
# Things that happened on a date no column records: "we met in March", "updated last week".
_VERBS = (
    r"\b(?:met|meet|spoke|spoken|talked|talk|called|visited|saw|seen|demoed|pitched|chatted|"
    r"contacted|emailed|updated|modified|changed|edited|replied|responded|touched|reached\s+out)\b"
)
_EVENT_RE = re.compile(
    rf"\b(?:we|i|they|you|he|she)\s+(?:have\s+|had\s+|first\s+|last\s+)?{_VERBS}"
    r"(?:\s+[\w']+){0,4}?\s*$"
    rf"|{_VERBS}(?:\s+(?:to|with))?\s*$",
    re.IGNORECASE,
)

# Something to do on a date: "who should I call today", "leads to email this week". The date is
# when to act, not a date any column holds.
_TODO_RE = re.compile(
    r"\b(?:should|must|shall|need\s+to|have\s+to|got\s+to|going\s+to|want\s+to|to)\s+"
    r"(?:(?:i|we)\s+)?(?:call|phone|ring|contact|email|e-mail|mail|ping|text|message|meet|"
    r"visit|follow\s+up(?:\s+with)?|reach\s+out(?:\s+to)?|chase)\b(?:\s+[\w']+){0,3}?\s*$",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class DateMatch:
    """A date phrase at ``[start, end)`` of the text: its conditions, or why it is not applied."""

    start: int
    end: int
    bounds: tuple[tuple[Op, dt.datetime], ...]
    ignored_reason: str | None = None


def _midnight(day: dt.date) -> dt.datetime:
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)


def _add_months(day: dt.date, months: int) -> dt.date:
    index = day.year * 12 + day.month - 1 + months
    year, month = divmod(index, 12)
    month += 1
    last = (dt.date(year + month // 12, month % 12 + 1, 1) - dt.timedelta(days=1)).day
    return dt.date(year, month, min(day.day, last))


def _month(year: int, month: int) -> tuple[dt.date, dt.date]:
    first = dt.date(year, month, 1)
    return first, _add_months(first, 1)


def _count(raw: str) -> int:
    return _NUMBER_WORDS.get(raw.lower()) or int(raw)


def _rolling(today: dt.date, n: int, unit: str) -> tuple[dt.date, dt.date]:
    """The ``n`` units of whole days ending with today, today included."""
    unit = unit.lower().rstrip("s")
    tomorrow = today + dt.timedelta(days=1)
    if unit in ("day", "week"):
        return tomorrow - dt.timedelta(days=n * (7 if unit == "week" else 1)), tomorrow
    months = {"month": 1, "quarter": 3, "year": 12}[unit] * n
    return _add_months(tomorrow, -months), tomorrow


def _calendar(today: dt.date, which: str, unit: str) -> tuple[dt.date, dt.date]:
    shift = {"this": 0, "current": 0, "last": -1, "previous": -1, "next": 1}[which]
    if unit == "week":
        monday = today - dt.timedelta(days=today.weekday()) + dt.timedelta(weeks=shift)
        return monday, monday + dt.timedelta(weeks=1)
    if unit == "month":
        first = _add_months(dt.date(today.year, today.month, 1), shift)
        return first, _add_months(first, 1)
    if unit == "quarter":
        first = dt.date(today.year, (today.month - 1) // 3 * 3 + 1, 1)
        first = _add_months(first, 3 * shift)
        return first, _add_months(first, 3)
    return dt.date(today.year + shift, 1, 1), dt.date(today.year + shift + 1, 1, 1)


def _recent_year(today: dt.date, month: int, day: int = 1) -> int:
    """The year of the most recent (month, day) that is not in the future."""
    return today.year if (month, day) <= (today.month, today.day) else today.year - 1


def _period(raw: str, today: dt.date) -> tuple[dt.date, dt.date] | None:
    """``[start, end)`` days of one period phrase, or ``None`` when it names no real day."""
    text = " ".join(raw.lower().replace(",", " ").replace(".", " ").split())
    words = text.split()
    try:
        if re.fullmatch(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}", text):
            day = dt.date.fromisoformat("-".join(p.zfill(2) for p in text.split("-")))
            return day, day + dt.timedelta(days=1)
        if re.fullmatch(r"[0-9]{4}-[0-9]{1,2}", text):
            year, month = (int(p) for p in text.split("-"))
            return _month(year, month)
        if text in ("today", "yesterday", "tomorrow"):
            day = today + dt.timedelta(days={"today": 0, "yesterday": -1, "tomorrow": 1}[text])
            return day, day + dt.timedelta(days=1)
        if words[0] in ("the", "last", "past", "previous") and words[-1].rstrip("s") in (
            "day", "week", "month", "quarter", "year"
        ):  # fmt: skip
            rolling = words[0] == "the"  # "the last week" is the last seven days
            words = words[1:] if rolling else words
            if len(words) == 2 and words[0] in ("last", "previous") and not rolling:
                return _calendar(today, words[0], words[1])
            return _rolling(today, _count(words[1]) if len(words) == 3 else 1, words[-1])
        if words[0] in ("this", "next", "current"):
            if words[1] in _WEEKDAYS:
                return _weekday(today, _WEEKDAYS[words[1]], strictly_before=False)
            return _calendar(today, words[0], words[1])
        if words[0] == "last" and words[1] in _WEEKDAYS:
            return _weekday(today, _WEEKDAYS[words[1]], strictly_before=True)
        if words[-1] == "ago":
            n, unit = _count(words[0]), words[1].rstrip("s")
            if unit in ("day", "week"):
                day = today - dt.timedelta(days=n * (7 if unit == "week" else 1))
            else:
                day = _add_months(today, -n * {"month": 1, "quarter": 3, "year": 12}[unit])
            return day, day + dt.timedelta(days=1)
        if words[0] in _WEEKDAYS and len(words) == 1:
            return _weekday(today, _WEEKDAYS[words[0]], strictly_before=False)
        if re.fullmatch(r"q[1-4]( [0-9]{4})?", text):
            quarter = int(text[1])
            year = int(words[1]) if len(words) == 2 else _recent_year(today, quarter * 3 - 2)
            first = dt.date(year, quarter * 3 - 2, 1)
            return first, _add_months(first, 3)
        if re.fullmatch(_YEAR, text):
            return dt.date(int(text), 1, 1), dt.date(int(text) + 1, 1, 1)
        return _month_phrase(words, today)
    except (ValueError, OverflowError):
        return None


def _month_phrase(words: list[str], today: dt.date) -> tuple[dt.date, dt.date] | None:
    words = [w for w in words if w != "of"]
    month_words = [w for w in words if w in _MONTHS]
    if len(month_words) != 1:
        return None
    month = _MONTHS[month_words[0]]
    numbers = [int(re.sub(r"\D", "", w)) for w in words if w not in _MONTHS]
    years = [n for n in numbers if n >= 1900]
    days = [n for n in numbers if n < 1900]
    if days:
        year = years[0] if years else _recent_year(today, month, days[0])
        day = dt.date(year, month, days[0])
        return day, day + dt.timedelta(days=1)
    return _month(years[0] if years else _recent_year(today, month), month)


def _weekday(today: dt.date, weekday: int, *, strictly_before: bool) -> tuple[dt.date, dt.date]:
    back = (today.weekday() - weekday) % 7
    if back == 0 and strictly_before:
        back = 7
    day = today - dt.timedelta(days=back)
    return day, day + dt.timedelta(days=1)


def _bounds(relation: str, period: tuple[dt.date, dt.date]) -> tuple[tuple[Op, dt.datetime], ...]:
    start, end = (_midnight(day) for day in period)
    if relation == "since":
        return ((Op.GTE, start),)
    if relation == "after":
        return ((Op.GTE, end),)
    if relation == "before":
        return ((Op.LT, start),)
    if relation == "until":
        return ((Op.LT, end),)
    return ((Op.GTE, start), (Op.LT, end))


# Gates (see :mod:`.gates`): every event holds one of its verbs written whole, and every to-do
# one of these words.
_EVENT_WORDS = frozenset(re.findall(r"[a-z]{2,}", _VERBS))  # the verbs (and "out")
_TODO_WORDS = frozenset({"should", "must", "shall", "to"})


def _event(prefix: str, said: Said | None = None) -> tuple[str, str] | None:
    """An event or to-do phrase that ends right before a date, and why no column holds it.

    ``said``: the words of the text ``prefix`` begins, when known (the date starts no word).
    """
    tail = prefix[-40:]
    if len(prefix) > len(tail) and prefix[-41:-39].isalnum():
        said = None  # the tail starts inside a word, which may read as another word
    match = _EVENT_RE.search(tail) if said is None or said.any_of(_EVENT_WORDS) else None
    if match is not None:
        return match.group(), f"no column records when {' '.join(match.group().split())}"
    match = _TODO_RE.search(tail) if said is None or said.any_of(_TODO_WORDS) else None
    if match is not None:
        return match.group(), "a date to act on, which no column records"
    return None


def _name_follows(text: str, match: re.Match[str]) -> bool:
    """Whether a lone month or weekday begins a name: "March Networks", "Monday.com"."""
    if not re.fullmatch(rf"{_MONTH}|{_WEEKDAY}", match["p"], re.IGNORECASE):
        return False
    rest = text[match.end() :]
    following = rest.split(maxsplit=1)[0] if rest.strip() else ""
    if (rest[:1] in (".", "-") and rest[1:2].isalnum()) or rest[:2] in ("'s", "\u2019s"):
        return True  # "Monday.com", "Friday's event"
    word = following.strip(",.;:!?").lower()
    return following[:1].isupper() and word not in _MONTHS and not word.isdigit()


def find_dates(text: str, now: dt.datetime, said: Said | None = None) -> list[DateMatch]:
    """Every date phrase of ``text`` (claimed spans are NUL), left to right, not overlapping.

    ``said``: the words of ``text`` (:func:`.gates.said`), when known: a kind of date phrase
    whose words are none of them is not looked for.
    """
    today = now.astimezone(dt.UTC).date()  # first, so that a bad ``now`` fails as before
    if said is not None and not said.any_of(_OLDER_WORDS) and not _may_hold_period(said):
        return []  # every gate below is closed (most questions hold no date): no set-up
    found: list[DateMatch] = []
    taken: list[tuple[int, int]] = []

    def free(start: int, end: int) -> bool:
        return all(end <= a or start >= b for a, b in taken)

    def add(start: int, end: int, bounds: tuple[tuple[Op, dt.datetime], ...]) -> None:
        event = _event(text[:start], said)
        reason = None
        if event is not None:
            phrase, reason = event
            start -= len(phrase)
            bounds = ()
        taken.append((start, end))
        found.append(DateMatch(start, end, bounds, reason))

    folded = text.lower() if text.isascii() else None

    def may_hold(needs: re.Pattern[str]) -> bool:  # a cheap pre-check: no word, no match
        return folded is None or needs.search(folded) is not None

    if said is not None:
        bare = _may_hold_free(said)
        any_period = _may_hold_period(said, bare)
        ranges = any_period and said.any_of(_RANGE_WORDS)
        older = said.any_of(_OLDER_WORDS)
        related = any_period and said.any_of(_RELATION_WORDS)
    else:
        ranges, older = may_hold(_RANGE_NEEDS), may_hold(_OLDER_NEEDS)
        related, bare = may_hold(_PERIOD_NEEDS_RE), may_hold(_FREE_NEEDS_RE)
    for match in _RANGE_RE.finditer(text) if ranges else ():
        first, last = _period(match["a"], today), _period(match["b"], today)
        if first is not None and last is not None and free(*match.span()):
            add(*match.span(), ((Op.GTE, _midnight(first[0])), (Op.LT, _midnight(last[1]))))
    for match in _OLDER_RE.finditer(text) if older else ():
        try:
            window = _rolling(today, _count(match["n"]), match["unit"])
        except (ValueError, OverflowError):
            continue  # "older than 9999 years": before the calendar starts
        if free(*match.span()):
            relation = "before" if match["rel"].lower() == "older" else "since"
            add(*match.span(), _bounds(relation, window))
    for match in _RELATED_RE.finditer(text) if related else ():
        period = _period(match["p"], today)
        if period is None or not free(*match.span()) or _name_follows(text, match):
            continue
        relation = _RELATIONS[" ".join(match["rel"].lower().split())]
        if relation == "by":
            taken.append(match.span())
            found.append(DateMatch(*match.span(), (), "a deadline; no column holds one"))
            continue
        add(*match.span(), _bounds(relation, period))
    for match in _FREE_RE.finditer(text) if bare else ():
        period = _period(match["p"], today)
        if period is not None and free(*match.span()):
            add(*match.span(), _bounds("in", period))
    return sorted(found, key=lambda m: m.start)
