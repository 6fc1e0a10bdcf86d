"""Cron parsing, missed-run arithmetic and usage-limit recognition (pure)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from supervisor.schedule import last_fire_between, parse_cron, usage_limit

NOW = datetime(2026, 11, 30, 14, 0, 0, tzinfo=timezone.utc)


def test_cron_five_and_six_fields_and_errors() -> None:
    five = parse_cron("30 2 * * *", "UTC")
    assert five.get_next_fire_time(None, NOW) == datetime(2026, 12, 1, 2, 30, tzinfo=timezone.utc)
    six = parse_cron("*/10 * * * * *", "UTC")
    assert six.get_next_fire_time(None, NOW + timedelta(seconds=1)) == NOW + timedelta(seconds=10)
    berlin = parse_cron("0 9 * * *", "Europe/Berlin")
    assert berlin.get_next_fire_time(None, NOW).astimezone(timezone.utc).hour == 8
    with pytest.raises(ValueError, match="5 fields"):
        parse_cron("* *", "UTC")
    with pytest.raises(ValueError, match="not valid"):
        parse_cron("61 * * * *", "UTC")


def test_last_fire_between() -> None:
    trig = parse_cron("0 * * * * *", "UTC")  # every minute at second 0
    assert last_fire_between(trig, NOW - timedelta(seconds=30), NOW + timedelta(seconds=5)) == NOW
    assert last_fire_between(trig, NOW + timedelta(seconds=1), NOW + timedelta(seconds=59)) is None
    assert last_fire_between(trig, NOW - timedelta(minutes=3), NOW - timedelta(seconds=1)) == NOW - timedelta(minutes=1)


@pytest.mark.parametrize(
    ("text", "reset"),
    [
        ("Error: usage limit reached for this plan, try again in 4 seconds", NOW + timedelta(seconds=4)),
        ("You've hit your usage limit. Try again in 2 hours.", NOW + timedelta(hours=2)),
        ("Claude usage limit reached. Your limit will reset at 5pm", NOW.replace(hour=17)),
        ("stream error: status 429 Too Many Requests; retry at 2026-11-30T15:30:00Z", NOW.replace(hour=15, minute=30)),
        ("rate limit exceeded", None),
        ("Quota exceeded for the day", None),
    ],
)
def test_usage_limit_messages(text: str, reset: datetime | None) -> None:
    found = usage_limit("some output\n" + text + "\nfake> ", now=NOW)
    assert found is not None and found.line == text.strip()
    assert found.reset_at == reset


@pytest.mark.parametrize(
    "text",
    [
        "Implementing a rate limit middleware for the API",
        "Passed 429 tests in 3.1s",
        "def check_usage_limit(user): ...",
        "the quota is configurable",
    ],
)
def test_ordinary_output_is_not_a_usage_limit(text: str) -> None:
    assert usage_limit(text, now=NOW) is None


def test_usage_limit_finds_every_shape_in_any_case_around_plain_output() -> None:
    filler = "".join(f"step {i}: compiled module_{i}.py\n" for i in range(40))
    for line in ("QUOTA EXCEEDED for this month", "You've hit your weekly limit", "Out Of Credits",
                 "error: 429", "Too Many Requests", "Usage limit reached — résumé at 5pm"):
        found = usage_limit(filler + line + "\n" + filler)
        assert found is not None and found.line == line.strip(), line
    assert usage_limit(filler) is None and usage_limit(filler + "héllo\n") is None
