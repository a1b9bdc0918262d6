"""Time expressions in a search query, read as a date window.

`find_time_window(query, reference)` finds the time expression a query names ("last week", "in
March", "3 days ago", "yesterday", "on 2023-05-08", "8 May, 2023", "in 2022" ...) and returns the
window of time it means (UTC, epoch ms, `until` exclusive) and the query without it, or None when the
query names no time. Relative expressions count from `reference` (the search's "now").

The forms read, case-insensitive (D a day of the month, 1st/2nd/... allowed; N digits or a number
word up to twelve, "a", "a couple of", "a few"):

| form | window |
|---|---|
| 2023-05-08, 8 May 2023, 8th May, 2023, May 8, 2023 | that day |
| 8 May, May 8 (no year) | that day in the latest year not after the reference |
| May 2023; in May (a bare month after in, during, since, of, early, late, mid) | that month (the latest one past) |
| in / during / since 2022 | that year |
| today, yesterday, the day before yesterday | that day |
| N days / weeks / months / years ago | the day, calendar week (Monday to Monday), month or year it falls in |
| last / past / previous N days / weeks / months / years | from N units before the reference to the end of its day |
| last / previous week, month, year; this week, month, year | that calendar week, month or year |
| last Monday ... last Sunday, last weekend | that day; that Saturday and Sunday |

When a query names several, an absolute date wins over a relative one, then the longest expression.
Why not a library: dateparser 1.5.0 (checked on PyPI) reads single expressions well but pulls in
regex, pytz, tzdata, tzlocal and python-dateutil (15 MB installed) for the plugin's runtime, takes
190 ms for its first parse, and its search_dates, which finds the expression in a sentence, reads
"we" as Wednesday and the verb "may" as a month; its answer is a date with a period, so the window
would be computed here anyway. The grammar above is that of the questions asked of past sessions.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from ..timeutil import format_time

_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_MONTHS["sept"] = 9
_WEEKDAYS = {name.lower(): i for i, name in enumerate(calendar.day_name)}
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
            "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "a few": 3,
            "couple of": 2, "few": 3}

# Full month names, and abbreviations but "may" (a verb too), which stands only next to a day or a year.
_MONTH_FULL = "|".join(calendar.month_name[1:])
_MONTH_ANY = _MONTH_FULL + "|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec"
_M = rf"(?P<month>{_MONTH_ANY})\.?"
_D = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_Y = r"(?P<year>(?:19|20)\d\d)"
_N = (r"(?P<n>\d{1,3}|a couple of|couple of|a few|few|an?|one|two|three|four|five|six|seven|eight|nine|ten|"
      r"eleven|twelve)")
_UNIT = r"(?P<unit>day|week|month|year)s?"
_ON = r"(?:(?:on|in|during|since|from|of|by)\s+)?"

# (kind, pattern); absolute forms first. Each pattern is matched with word boundaries around it.
_FORMS: list[tuple[str, str]] = [
    ("iso", rf"{_ON}(?P<year>\d{{4}})-(?P<mon>\d{{2}})-(?P<day>\d{{2}})"),
    ("day", rf"{_ON}(?:the\s+)?{_D}\s+(?:of\s+)?{_M},?\s*{_Y}"),
    ("day", rf"{_ON}{_M}\s+{_D},?\s*{_Y}"),
    ("month", rf"{_ON}{_M},?\s+{_Y}"),
    ("day", rf"{_ON}(?:the\s+)?{_D}\s+(?:of\s+)?{_M}"),
    ("day", rf"{_ON}{_M}\s+{_D}"),
    ("month", rf"(?:in|during|since|of|early|late|mid)\s+(?:the\s+month\s+of\s+)?(?P<month>{_MONTH_FULL}|may)"),
    ("year", rf"(?:in|during|since)\s+(?:the\s+year\s+)?{_Y}"),
    ("today", r"(?:earlier\s+)?today|this\s+morning|tonight"),
    ("yesterday", r"(?P<before>the\s+day\s+before\s+)?yesterday"),
    ("ago", rf"{_N}\s+{_UNIT}\s+ago"),
    ("past", rf"(?:in\s+|over\s+|during\s+)?(?:the\s+)?(?:last|past|previous)\s+{_N}\s+{_UNIT}"),
    ("last", r"(?:(?P<which>last|previous|this)|earlier\s+this)\s+(?P<unit>week|month|year)"),
    ("weekend", r"last\s+weekend"),
    ("weekday", r"last\s+(?P<weekday>" + "|".join(calendar.day_name) + ")"),
]
_PATTERNS = [(kind, re.compile(rf"(?<![\w-]){pattern}(?![\w-])", re.IGNORECASE)) for kind, pattern in _FORMS]
_ABSOLUTE = {"iso", "day", "month", "year"}
_DAY = timedelta(days=1)


@dataclass(frozen=True)
class TimeWindow:
    """A query's time expression and the window it means. since/until: epoch ms, UTC, until
    exclusive. query: the query with the expression taken out (the words searched for)."""

    expression: str
    since: int
    until: int
    query: str

    def to_json(self) -> dict[str, Any]:
        """{"expression", "since", "until"}: the times as ISO 8601 UTC."""
        return {"expression": self.expression, "since": format_time(self.since), "until": format_time(self.until)}


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _calendar_unit(unit: str, back: int, today: datetime, week: datetime) -> tuple[datetime, datetime]:
    """The whole calendar day, week (from `week`, the reference week's Monday), month or year
    `back` units before the reference's (`today`: its day's start)."""
    if unit == "day":
        start = today - back * _DAY
        return start, start + _DAY
    if unit == "week":
        start = week - 7 * back * _DAY
        return start, start + 7 * _DAY
    if unit == "month":
        return _month_start(today.year, today.month - back), _month_start(today.year, today.month - back + 1)
    return (datetime(today.year - back, 1, 1, tzinfo=timezone.utc),
            datetime(today.year - back + 1, 1, 1, tzinfo=timezone.utc))


def _month_start(year: int, month: int) -> datetime:
    while month < 1:
        year, month = year - 1, month + 12
    while month > 12:
        year, month = year + 1, month - 12
    return datetime(year, month, 1, tzinfo=timezone.utc)


def _latest(ref: datetime, month: int, day: int | None = None) -> int:
    """The year of the latest (month, day) not after `ref`'s day."""
    if (month, day or 1) <= (ref.month, ref.day):
        return ref.year
    return ref.year - 1


def _window(kind: str, m: re.Match[str], ref: datetime) -> tuple[datetime, datetime] | None:
    groups = m.groupdict()
    today = ref.replace(hour=0, minute=0, second=0, microsecond=0)
    week = today - timedelta(days=today.weekday())  # this Monday
    if kind in ("iso", "day"):
        month = int(groups["mon"]) if kind == "iso" else _MONTHS[groups["month"].lower().rstrip(".")]
        day = int(groups["day"])
        year = int(groups["year"]) if groups.get("year") else _latest(ref, month, day)
        try:
            start = datetime(year, month, day, tzinfo=timezone.utc)
        except ValueError:
            return None  # 31 April, month 13: not a date
        return start, start + _DAY
    if kind == "month":
        month = _MONTHS[groups["month"].lower().rstrip(".")]
        year = int(groups["year"]) if groups.get("year") else _latest(ref, month)
        return _month_start(year, month), _month_start(year, month + 1)
    if kind == "year":
        year = int(groups["year"])
        return datetime(year, 1, 1, tzinfo=timezone.utc), datetime(year + 1, 1, 1, tzinfo=timezone.utc)
    if kind == "today":
        return today, today + _DAY
    if kind == "yesterday":
        start = today - (2 if groups.get("before") else 1) * _DAY
        return start, start + _DAY
    if kind in ("ago", "past"):
        n = _NUMBERS.get(" ".join(groups["n"].lower().split()), None)
        n = int(groups["n"]) if n is None else n
        unit = groups["unit"].lower()
        if kind == "past":  # a rolling window up to the end of the reference's day
            if unit == "day":
                return today - n * _DAY, today + _DAY
            if unit == "week":
                return today - 7 * n * _DAY, today + _DAY
            if unit == "month":
                return _month_start(today.year, today.month - n).replace(day=min(today.day, 28)), today + _DAY
            return today.replace(year=today.year - n, day=min(today.day, 28)), today + _DAY
        return _calendar_unit(unit, n, today, week)
    if kind == "last":
        back = 1 if (groups.get("which") or "this").lower() in ("last", "previous") else 0
        return _calendar_unit(groups["unit"].lower(), back, today, week)
    if kind == "weekend":
        saturday = today - timedelta(days=(today.weekday() - 5) % 7 or 7)
        if today.weekday() == 6 and saturday == today - _DAY:
            saturday -= 7 * _DAY  # on a Sunday "last weekend" is the one before this
        return saturday, saturday + 2 * _DAY
    if kind == "weekday":
        target = _WEEKDAYS[groups["weekday"].lower()]
        start = today - timedelta(days=(today.weekday() - target) % 7 or 7)
        return start, start + _DAY
    return None


def find_time_window(query: str, reference: int) -> TimeWindow | None:
    """The time expression `query` names, as a window (see the module's table), relative to
    `reference` (epoch ms, UTC); None when it names none. An impossible day (31 April 2023) is
    not read as a day (its month and year still are)."""
    ref = datetime.fromtimestamp(reference / 1000, tz=timezone.utc)
    found: list[tuple[bool, int, int, re.Match[str], tuple[datetime, datetime]]] = []
    for kind, pattern in _PATTERNS:
        for m in pattern.finditer(query):
            window = _window(kind, m, ref)
            if window is not None:
                found.append((kind in _ABSOLUTE, m.end() - m.start(), -m.start(), m, window))
    if not found:
        return None
    _, _, _, m, (start, end) = max(found, key=lambda f: f[:3])
    rest = " ".join((query[: m.start()] + " " + query[m.end():]).split())
    rest = re.sub(r"\s+([,.;:!?])", r"\1", rest).strip(" ,")
    return TimeWindow(expression=" ".join(m.group(0).split()), since=_ms(start), until=_ms(end),
                      query=rest or query)
