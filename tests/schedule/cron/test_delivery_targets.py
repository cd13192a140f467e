"""Delivery targets: their parser (fuzzed) and the warning `cron add --deliver` gives."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vigil.config.settings import Settings
from vigil.schedule.cron.delivery import Target, parse_target, unconfigured_warning
from vigil.schedule.cron.errors import InvalidJob

channels = st.from_regex(r"#?[A-Za-z0-9][A-Za-z0-9_.-]{0,20}", fullmatch=True)
threads = st.from_regex(r"\d{1,12}\.\d{1,9}", fullmatch=True)
chats = st.from_regex(r"-?\d{1,20}|@[A-Za-z][A-Za-z0-9_]{4,31}", fullmatch=True)
topics = st.integers(1, 2**31 - 1).map(str)


@given(channel=channels, thread=st.none() | threads)
def test_slack_targets_name_a_channel_and_maybe_a_thread(channel: str, thread: str | None) -> None:
    text = f"slack:{channel}" + (f":{thread}" if thread else "")
    target = parse_target(text)
    assert target == Target("slack", channel, thread)
    assert parse_target(str(target)) == target


@given(chat=chats, topic=st.none() | topics)
def test_telegram_targets_name_a_chat_and_maybe_a_forum_topic(chat: str, topic: str | None) -> None:
    text = f"telegram:{chat}" + (f":{topic}" if topic else "")
    target = parse_target(text)
    assert target == Target("telegram", chat, topic)
    assert str(target) == text and parse_target(str(target)) == target


@settings(max_examples=300)
@given(st.text(max_size=60) | st.from_regex(r"(slack|telegram|web|local)(:[^\s]{0,20}){0,3}", fullmatch=True))
def test_any_text_is_a_target_that_prints_back_or_a_clear_error(text: str) -> None:
    try:
        target = parse_target(text)
    except InvalidJob as exc:
        assert "invalid delivery target" in str(exc)
        return
    assert target.platform in ("local", "slack", "telegram", "web")
    assert parse_target(str(target)) == target


@pytest.mark.parametrize("text, message", [
    ("telegram:@my_channel:0", "forum topic is its numeric id"),
    ("telegram:123:general", "forum topic is its numeric id"),
    ("telegram:123:4:5", "forum topic"),
    ("slack:C1:notats", "Slack thread is a message timestamp"),
    ("web:page", "use local"),
])
def test_malformed_targets_say_what_is_expected(text: str, message: str) -> None:
    with pytest.raises(InvalidJob, match=message):
        parse_target(text)


def test_the_warning_names_only_a_platform_the_config_does_not_turn_on() -> None:
    plain = Settings()
    assert unconfigured_warning(parse_target("local"), "j", plain) is None
    assert unconfigured_warning(parse_target("web"), "j", plain) is None  # the gateway serves the web chat
    warned = unconfigured_warning(parse_target("slack:C1"), "j", plain)
    assert warned and "slack is not configured (slack.enabled is not true" in warned and "cron/output/j/" in warned
    enabled = plain.copy_with(update={
        "slack": plain.slack.copy_with(update={"enabled": True}),
        "telegram": plain.telegram.copy_with(update={"enabled": True}),
    })
    assert unconfigured_warning(parse_target("slack:C1:1.2"), "j", enabled) is None
    assert unconfigured_warning(parse_target("telegram:42:7"), "j", enabled) is None
    no_web = plain.copy_with(update={"gateway": plain.gateway.copy_with(update={
        "web": plain.gateway.web.copy_with(update={"enabled": False})})})
    warned = unconfigured_warning(parse_target("web"), "j", no_web)
    assert warned and "gateway.web.enabled is false" in warned
