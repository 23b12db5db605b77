"""Intervals as specs and SQL write them: "5 seconds", "1 minute", "2 hours", "INTERVAL '5' SECOND"."""

from __future__ import annotations

import re
from datetime import timedelta

_UNITS = {
    "microsecond": 1e-6,
    "millisecond": 1e-3,
    "second": 1,
    "minute": 60,
    "hour": 3600,
    "day": 86400,
    "week": 604800,
}
_PATTERN = re.compile(r"^\s*(?:interval\s+)?'?\s*(\d+(?:\.\d+)?)\s*'?\s*([a-z]+?)s?\s*$", re.IGNORECASE)


def parse_interval(text: str) -> timedelta:
    """Parse one "<number> <unit>" interval; ValueError with the accepted form otherwise."""
    match = _PATTERN.match(str(text))
    unit = match.group(2).lower() if match else ""
    if unit.endswith("s") and unit[:-1] in _UNITS:
        unit = unit[:-1]
    if not match or unit not in _UNITS:
        raise ValueError(f"{text!r} is not an interval like '5 seconds', '1 minute' or '2 hours'")
    return timedelta(seconds=float(match.group(1)) * _UNITS[unit])


def describe(delta: timedelta) -> str:
    """A short, exact rendering: 1 minute, 90 seconds, 2 hours."""
    micros = delta // timedelta(microseconds=1)
    for unit, seconds in (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1)):
        step = int(seconds * 1_000_000)
        if micros and micros % step == 0:
            count = micros // step
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{micros} microseconds"
