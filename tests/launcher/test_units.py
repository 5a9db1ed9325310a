"""Human units shared by the launcher (--slice-mtbf, --step-time) and the planner."""

from __future__ import annotations

import pytest

from elxpk.units import format_duration, parse_duration, parse_size


@pytest.mark.parametrize(("text", "seconds"), [
    ("90s", 90.0), ("2h", 7200.0), ("30d", 2_592_000.0), ("1.5m", 90.0), ("500ms", 0.5), ("1w", 604_800.0),
    ("42", 42.0), (" 3 h ", 10_800.0), ("1e3s", 1000.0), (7, 7.0),
])
def test_durations(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(("text", "size"), [
    ("120GiB", 120 * 2**30), ("500MB", 500 * 10**6), ("1TiB", 2**40), ("4096", 4096.0), ("2kib", 2048.0),
])
def test_sizes(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize(("parse", "text", "says"), [
    (parse_duration, "3 parsecs", "unknown duration unit 'parsecs'"),
    (parse_duration, "-5s", "not a number with a unit"),
    (parse_duration, "s", "not a number with a unit"),
    (parse_size, "12 GiBs", "unknown size unit 'gibs'"),
])
def test_nonsense_is_a_value_error_that_says_why(parse, text, says):
    with pytest.raises(ValueError, match=says):
        parse(text)


@pytest.mark.parametrize(("seconds", "text"), [(0.42, "0.4s"), (45, "45s"), (125, "2m05s"), (11_400, "3h10m"),
                                               (187_200, "2d04h")])
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text
