"""Times in Cairn are integers: epoch milliseconds, UTC.

`END_OF_TIME` stands for an open interval end (a memory still valid, or not retired) so that SQL
range checks stay plain comparisons (`valid_to > :t`) with no NULL cases.
"""

from __future__ import annotations

import math
import re
import time
from datetime import date, datetime, timezone

from .errors import InvalidTime

END_OF_TIME = 2**62  # epoch ms far beyond any real date; never shown to users
_EPOCH_MS = re.compile(r"-?[0-9]+")


def now_ms() -> int:
    """The current time, epoch milliseconds, UTC."""
    return time.time_ns() // 1_000_000


def parse_time(value: str | int | float | datetime | date | None, *, field: str = "time") -> int | None:
    """Parse a user-supplied time into epoch milliseconds, UTC.

    Accepts ISO 8601 (`2026-11-01`, `2026-11-01T09:30`, `2026-11-01T09:30:00+02:00`, `...Z`),
    `now`, an integer of epoch milliseconds, or a datetime/date. A date alone means its start,
    00:00 UTC; a datetime without an offset is taken as UTC.
    Raises InvalidTime naming `field` when the value cannot be read.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise InvalidTime(f"{field}: expected a time, got a boolean")
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidTime(f"{field}: {value!r} is not a time")
    if isinstance(value, (int, float)):
        return int(value)
    if isinstance(value, datetime):
        return _datetime_ms(value)
    if isinstance(value, date):
        return _datetime_ms(datetime(value.year, value.month, value.day))
    text = str(value).strip()
    if text.lower() == "now":
        return now_ms()
    if _EPOCH_MS.fullmatch(text):  # ASCII digits only: "²".isdigit() is true, int("²") fails
        return int(text)
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InvalidTime(
            f"{field}: cannot read {value!r} as a time; use ISO 8601 such as 2026-11-01 or "
            "2026-11-01T09:30:00Z, or epoch milliseconds"
        ) from None
    return _datetime_ms(parsed)


def _datetime_ms(moment: datetime) -> int:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000)


def format_time(ms: int | None) -> str | None:
    """Epoch milliseconds to ISO 8601 UTC (`2026-11-01T09:30:00.000Z`); None and END_OF_TIME give None."""
    if ms is None or ms >= END_OF_TIME:
        return None
    moment = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def format_date(ms: int) -> str:
    """Epoch milliseconds to a calendar date, UTC (`2026-11-01`)."""
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d")
