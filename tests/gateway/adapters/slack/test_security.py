"""Requests not signed by Slack are refused before anything is read: nothing is stored, the
model is not asked, nothing is posted."""

from __future__ import annotations

import sqlite3

import httpx
import pytest

from tests.gateway.adapters.slack.conftest import ALICE, SlackHarness, eventually


def slack_inbox(h: SlackHarness) -> int:
    with sqlite3.connect(h.profile.state_db) as db:
        return db.execute("SELECT count(*) FROM gateway_inbox WHERE adapter = 'slack'").fetchone()[0]


@pytest.mark.parametrize("how", [{"forge": True}, {"unsigned": True}, {"age": 6 * 60}])
async def test_a_forged_missing_or_stale_signature_is_refused(slack: SlackHarness, how: dict) -> None:
    sent = await slack.sender.message("D0SEC", ALICE, "run rm -rf / for me", **how)
    assert sent.response.status_code == 401
    command = await slack.sender.command("heartbeat every 1m exfiltrate", user=ALICE, channel="C0SEC", **how)
    assert command.response.status_code == 401
    challenge = await slack.sender.url_verification("abc", **how)
    assert challenge.status_code == 401 and "abc" not in challenge.text
    assert slack_inbox(slack) == 0
    assert slack.model.requests == []
    assert slack.fake.state.calls_of("chat.postMessage") == []


async def test_a_signature_within_the_window_is_taken(slack: SlackHarness) -> None:
    response = await slack.sender.url_verification("3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", age=4 * 60)
    assert response.status_code == 200
    assert response.json() == {"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}


async def test_a_signed_body_changed_on_the_way_is_refused(slack: SlackHarness) -> None:
    sent = await slack.sender.message("D0SEC", ALICE, "hello")
    tampered = sent.body.replace(b"hello", b"jello")
    response = await slack.sender.post(tampered, "application/json", forge=True)
    assert response.status_code == 401
    headers = {"X-Slack-Request-Timestamp": "1", "X-Slack-Signature": "v0=00", "Content-Type": "application/json"}
    async with httpx.AsyncClient() as client:
        replay = await client.post(slack.sender.url, content=tampered, headers=headers)
    assert replay.status_code == 401


async def test_without_its_secrets_slack_is_misconfigured_and_the_gateway_runs(
    make_slack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SLACK_SIGNING_SECRET")
    h = await make_slack()
    health = h.adapter.health()
    assert not health.ok and health.state == "misconfigured"
    assert "SLACK_SIGNING_SECRET" in health.detail
    assert h.fake.signing_secret not in health.detail and h.fake.bot_token not in health.detail
    refused = await h.sender.message("D0SEC", ALICE, "hello")
    assert refused.response.status_code == 503
    assert slack_inbox(h) == 0
    async with httpx.AsyncClient(base_url=h.run.url) as client:
        assert (await client.get("/healthz")).status_code == 200
    assert any("platforms: slack" in line for line in h.lines)
    assert not any(h.fake.bot_token in line for line in h.lines)


async def test_an_unknown_person_gets_a_pairing_code_and_no_agent_turn(slack: SlackHarness) -> None:
    sent = await slack.sender.message("D0CAROL", "U0CAROL", "hello, who are you?")
    assert sent.response.status_code == 200
    code = await eventually(lambda: slack.answers("D0CAROL"), what="the pairing code")
    assert "pair" in code[0].lower()
    mention = await slack.sender.mention("C0OPS", "U0CAROL", "me too")
    notes = await eventually(lambda: slack.fake.state.ephemerals, what="the pairing note in the channel")
    assert notes[0].user == "U0CAROL" and notes[0].thread_ts == mention.ts  # only Carol sees it
    assert slack.answers("C0OPS", mention.ts) == []
    assert slack.model.requests == []
