"""Slack failing while an answer goes out: down, 5xx and 429 are retried (429 after its
Retry-After) and the answer lands once; a revoked token fails the entry at once."""

from __future__ import annotations

import asyncio
import time

from tests.gateway.adapters.slack.conftest import ALICE, SlackHarness, eventually
from vigil.clock import SystemClock
from vigil.schedule.cron.jobs import JobSpec, new_job
from vigil.schedule.cron.repo import CronRepo


async def test_slack_down_while_the_answer_is_sent_then_back(slack: SlackHarness) -> None:
    slack.model.queue("sent when Slack is back")
    slack.fake.stop()  # connection refused from now on
    try:
        sent = await slack.sender.message("D0ALICE", ALICE, "are you there?")
        assert sent.response.status_code == 200  # the gateway took it: Slack's side is down, not ours
        await eventually(lambda: any("failed, retrying" in line for line in slack.lines), what="a failed try")
        health = slack.adapter.health()
        assert health.state == "retrying" and health.last_error and "cannot reach" in health.last_error
    finally:
        slack.fake.start()
    assert await eventually(lambda: slack.answers("D0ALICE"), what="the answer") == ["sent when Slack is back"]
    await eventually(slack.settled, what="nothing left to send")
    assert slack.answers("D0ALICE") == ["sent when Slack is back"]
    assert slack.adapter.health().state == "connected"


async def test_server_errors_are_retried_and_the_answer_lands_once(slack: SlackHarness) -> None:
    slack.model.queue("after the 503s")
    slack.fake.state.fault(status=503, count=2)
    await slack.sender.message("D0ALICE", ALICE, "hello")
    assert await eventually(lambda: slack.answers("D0ALICE"), what="the answer") == ["after the 503s"]
    failed = [c for c in slack.fake.state.calls_of("chat.postMessage") if c.status == 503]
    assert len(failed) == 2
    await eventually(slack.settled, what="nothing left to send")
    assert slack.answers("D0ALICE") == ["after the 503s"]


async def test_a_rate_limit_is_waited_out_for_its_retry_after(slack: SlackHarness) -> None:
    slack.model.queue("after the rate limit")
    slack.fake.state.rate_limit(2, retry_after=2)
    await slack.sender.message("D0ALICE", ALICE, "hello")
    assert await eventually(lambda: slack.answers("D0ALICE"), what="the answer") == ["after the rate limit"]
    calls = slack.fake.state.calls_of("chat.postMessage")
    limited = [c.at for c in calls if c.status == 429]
    landed = [c.at for c in calls if c.status == 200][-1]
    assert len(limited) == 2 and landed - limited[-1] >= 1.9


async def test_a_revoked_token_fails_the_answer_without_retrying(slack: SlackHarness) -> None:
    slack.model.queue("never seen")
    real = slack.fake.state.bot_token
    slack.fake.state.bot_token = "xoxb-someone-else"
    try:
        await slack.sender.message("D0ALICE", ALICE, "hello")
        await eventually(lambda: any("marked failed" in line for line in slack.lines), what="the failure")
        failed = slack.gateway.store.gateway.outbox_list(statuses=["failed"])
        assert len(failed) == 1 and "invalid_auth" in (failed[0].last_error or "") and failed[0].attempts == 1
    finally:
        slack.fake.state.bot_token = real
    assert slack.answers("D0ALICE") == []
    started = time.time()
    assert all(c.at <= started for c in slack.fake.state.calls)


async def test_slack_unreachable_at_start_is_retried_until_it_answers(make_slack, slack_env) -> None:
    slack_env.stop()
    try:
        h = await make_slack()
        health = h.adapter.health()
        assert not health.ok and health.state == "retrying" and "auth.test" in health.detail
        assert any("slack adapter retrying" in line for line in h.lines)
        assert h.run.gateway.accepting  # the gateway runs on without Slack
    finally:
        slack_env.start()
    await eventually(lambda: h.adapter.health().state == "connected", what="Slack connected")
    assert h.adapter.bot_user == slack_env.state.bot_user


async def test_a_cron_delivery_while_slack_is_down_lands_once_it_is_back(slack: SlackHarness) -> None:
    repo = CronRepo(slack.gateway.store, SystemClock())
    thread = slack.fake.state.new_ts()
    slack.fake.state.channel("C0OPS")
    repo.add(new_job("standup", JobSpec(schedule="every 1h", prompt="remind the team", deliver=f"slack:C0OPS:{thread}"),
                     now=time.time(), default_tz="UTC", skills_dir=None))  # type: ignore[arg-type]
    slack.model.queue("Standup in 5.")
    slack.fake.stop()
    try:
        claim = await asyncio.to_thread(repo.claim_manual, "standup")
        assert await slack.run.cron.execute(claim) is not None
        await eventually(lambda: any("failed, retrying" in line for line in slack.lines), what="a failed delivery")
    finally:
        slack.fake.start()
    assert await eventually(lambda: slack.answers("C0OPS", thread), what="the delivery") == ["Standup in 5."]
    await eventually(slack.settled, what="nothing left to send")
    assert slack.answers("C0OPS", thread) == ["Standup in 5."] and slack.answers("C0OPS", "") == []
