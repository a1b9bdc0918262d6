"""Time expressions in a session search query, read as date windows (cairn.sessions.timewindow)."""

from __future__ import annotations

import pytest

from cairn import find_time_window, format_time, parse_time

REFERENCE = parse_time("2023-08-20T12:00:00Z")  # a Sunday


@pytest.mark.parametrize(("query", "expression", "since", "until", "rest"), [
    ("what did we decide last week", "last week", "2023-08-07", "2023-08-14", "what did we decide"),
    ("the cache decision in March?", "in March", "2023-03-01", "2023-04-01", "the cache decision?"),
    ("in September", "in September", "2022-09-01", "2022-10-01", "in September"),  # the latest one past
    ("the error 3 days ago", "3 days ago", "2023-08-17", "2023-08-18", "the error"),
    ("what broke yesterday", "yesterday", "2023-08-19", "2023-08-20", "what broke"),
    ("deploy on 2023-05-08", "on 2023-05-08", "2023-05-08", "2023-05-09", "deploy"),
    ("What did Tim read on 8th December, 2022?", "on 8th December, 2022", "2022-12-08", "2022-12-09",
     "What did Tim read?"),
    ("shared on December 1,2022", "on December 1,2022", "2022-12-01", "2022-12-02", "shared"),
    ("donations in December 2022", "in December 2022", "2022-12-01", "2023-01-01", "donations"),
    ("what we switched in 2022", "in 2022", "2022-01-01", "2023-01-01", "what we switched"),
    ("bugs from the past 2 weeks", "the past 2 weeks", "2023-08-06", "2023-08-21", "bugs from"),
    ("a couple of weeks ago", "a couple of weeks ago", "2023-07-31", "2023-08-07", "a couple of weeks ago"),
    ("last month's outage", "last month", "2023-07-01", "2023-08-01", "'s outage"),
    ("this year", "this year", "2023-01-01", "2024-01-01", "this year"),
    ("what Caroline did last weekend", "last weekend", "2023-08-12", "2023-08-14", "what Caroline did"),
    ("the demo last Friday", "last Friday", "2023-08-18", "2023-08-19", "the demo"),
    # An absolute date wins over a relative expression in the same query.
    ("finished last Friday on 23 January, 2022", "on 23 January, 2022", "2022-01-23", "2022-01-24",
     "finished last Friday"),
])
def test_time_expressions_become_windows(query, expression, since, until, rest):
    window = find_time_window(query, REFERENCE)
    assert window is not None
    assert (window.expression, format_time(window.since)[:10], format_time(window.until)[:10], window.query) == \
        (expression, since, until, rest)


@pytest.mark.parametrize("query", [
    "When did Melanie paint a sunrise?", "Did they may go to the park?", "we march on", "the 10 day forecast",
    "what did we decide about X", "error E0425 in main.rs", "room 2023",
])
def test_words_that_only_look_like_times_are_not_windows(query):
    assert find_time_window(query, REFERENCE) is None


def test_an_impossible_day_is_read_as_its_month():
    window = find_time_window("on 31 April 2023", REFERENCE)
    assert window is not None and window.expression == "April 2023"
