"""Telegram failing in the ways it does — 502s, 429 with ``retry_after``, the API gone, a bad
or missing token, a crash between fetching an update and confirming it — and nothing lost,
nothing answered twice, and the gateway never down."""

from __future__ import annotations

from tests.gateway.adapters.telegram.conftest import OWNER, TOKEN_ENV, Factory, eventually
from vigil.store.gateway.gateway_tables import RouteKey


def _answers(n: int) -> list[str]:
    return [f"answer {k}" for k in range(1, n + 1)]


async def test_502s_and_429s_then_recovery_every_message_answered_once_in_order(make_telegram: Factory) -> None:
    h = await make_telegram()
    for k in range(1, 5):
        h.model.rule(contains=f"message {k}", reply=f"answer {k}")
    h.fake.fail(3, 502, methods=["getUpdates"])
    h.fake.rate_limit(1, retry_after=1, methods=["getUpdates"])
    h.fake.fail(2, 502, methods=["sendMessage"])
    h.fake.rate_limit(1, retry_after=1, methods=["sendMessage", "editMessageText"])
    for k in range(1, 5):
        h.fake.message(OWNER, OWNER, f"message {k}")
    await eventually(lambda: h.fake.texts(OWNER) == _answers(4) and h.idle() and not h.fake.faults_left(),
                     timeout=30, what="four answers")
    assert h.fake.texts(OWNER) == _answers(4)
    assert len(h.store.gateway.inbox_get(4).text) and h.store.gateway.inbox_get(5) is None
    health = h.adapter.health()
    assert health.state == "connected" and health.last_error is not None  # it did retry
    assert any("retrying" in line for line in h.lines)  # the outbox said so


async def test_an_update_stored_but_never_confirmed_is_fetched_again_and_answered_once(
    make_telegram: Factory,
) -> None:
    h = await make_telegram()
    update = h.fake.message(OWNER, OWNER, "remember me")
    # every confirmation of it (the next getUpdates offset) is lost: as if the process died
    h.fake.fail(10_000, 502, methods=["getUpdates"], params={"offset": update["update_id"] + 1})
    await h.answered(OWNER, 1)
    await h.gateway.stop(1.0)
    assert h.fake.pending() == 1  # Telegram still has it
    h.fake.clear_faults()
    again = await make_telegram(store=h.store)
    await eventually(lambda: h.fake.delivered(update["update_id"]) == 2 and h.fake.pending() == 0,
                     what="the update fetched again")
    await eventually(lambda: again.gateway.answered == 0 and not again.outbox_pending(), what="settled")
    assert h.fake.texts(OWNER) == ["ok"]  # answered once
    assert len(h.model.requests) == 1


async def test_an_update_the_gateway_did_not_take_is_fetched_again_and_answered_once(make_telegram: Factory) -> None:
    h = await make_telegram(start=False)
    update = h.fake.message(OWNER, OWNER, "early bird")
    await h.adapter.start(h.gateway)  # the gateway does not take input yet: receive refuses
    await eventually(lambda: h.fake.delivered(update["update_id"]) >= 2, what="the update fetched again")
    assert h.store.gateway.inbox_get(1) is None
    await h.gateway.start()
    assert await h.answered(OWNER, 1) == ["ok"]
    assert h.store.gateway.inbox_get(2) is None
    assert len(h.model.requests) == 1


async def test_the_api_gone_and_back_is_retried_with_state_shown(make_telegram: Factory) -> None:
    h = await make_telegram()
    h.fake.stop()
    await eventually(lambda: h.adapter.health().state == "retrying", what="the retrying state")
    health = h.adapter.health()
    assert health.since is not None and health.last_error and not health.ok
    h.fake.message(OWNER, OWNER, "are you back?")
    h.fake.start()
    assert await h.answered(OWNER, 1) == ["ok"]
    assert h.adapter.health().state == "connected"


async def test_a_refused_token_is_retried_and_the_gateway_runs_on(make_telegram: Factory, monkeypatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, "42:not-the-bots-token")
    h = await make_telegram()
    health = await eventually(lambda: h.adapter.health() if h.adapter.health().last_error else None, what="an error")
    assert health.state == "retrying" and "not-the-bots-token" not in (health.last_error or "")
    assert h.gateway.accepting
    assert not any("not-the-bots-token" in line for line in h.lines)


async def test_a_missing_token_is_misconfigured_and_the_gateway_runs_on(make_telegram: Factory, monkeypatch) -> None:
    monkeypatch.delenv(TOKEN_ENV)
    h = await make_telegram()
    health = h.adapter.health()
    assert health.state == "misconfigured" and TOKEN_ENV in health.detail and not health.ok
    assert h.gateway.accepting
    assert any("misconfigured" in line for line in h.lines)
    route = RouteKey("telegram", str(OWNER))
    assert h.store.gateway.route_get(route) is None


async def test_a_token_set_later_is_taken_on_reload(make_telegram: Factory, monkeypatch) -> None:
    monkeypatch.delenv(TOKEN_ENV)
    h = await make_telegram()
    assert h.adapter.health().state == "misconfigured"
    monkeypatch.setenv(TOKEN_ENV, h.fake.token)
    await h.adapter.reload(h.settings)  # what SIGHUP does
    assert h.adapter.health().state == "connected"
    h.fake.message(OWNER, OWNER, "now?")
    assert await h.answered(OWNER, 1) == ["ok"]


async def test_a_bot_blocked_by_the_user_fails_the_reply_at_once_and_says_so(make_telegram: Factory) -> None:
    h = await make_telegram()
    h.fake.fail(100, 403, methods=["sendMessage", "editMessageText"])  # blocked: every send refused
    h.model.queue("You will not see this.")
    h.fake.message(OWNER, OWNER, "hello")
    await eventually(lambda: h.store.gateway.outbox_counts().get("failed") == 1, what="the failed reply")
    [entry] = [e for e in h.store.gateway.outbox_list() if e.status == "failed"]
    assert entry.attempts <= 1 and "blocked" in (entry.last_error or "")
    await eventually(lambda: any("marked failed" in line for line in h.lines), what="the failure said")
