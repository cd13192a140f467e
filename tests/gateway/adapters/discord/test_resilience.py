"""The Gateway session through what Discord and networks do: asked to reconnect, cut off,
invalidated (resumable), Discord away for a while (``retrying``, then back and resumed), a restart that
resumes the session and gets what was written meanwhile, and the two refusals a person must fix
(the token, the Message Content intent) shown as ``misconfigured`` with what to do; and with
several workers, the session held by the one holding the adapter's lease, handed over resumed."""

from __future__ import annotations

from typing import Any

import pytest

from tests.gateway.settling import settled_at
from tests.gateway.adapters.discord.conftest import ALICE, TOKEN_ENV, DiscordHarness
from vigil.gateway.cluster.adapter_lease import AdapterLease
from vigil.store.gateway.gateway_tables import OutboxEntry, RouteKey
from vigil.testing.discord_api import FakeDiscordServer
from vigil.testing.waiting import eventually


async def _answered(h: DiscordHarness, text: str) -> None:
    dm = h.fake.dm_channel(ALICE)
    before = len(h.answers(dm))
    h.fake.dm(ALICE, text)
    await eventually(lambda: len(h.answers(dm)) > before or None, what=f"the answer to {text!r}")


async def test_the_session_is_resumed_after_a_reconnect_a_cut_and_an_outage(make_discord: Any) -> None:
    h: DiscordHarness = await make_discord()
    fake = h.fake
    h.model.set_default_reply("ok")
    fake.reconnect()  # op 7
    await eventually(lambda: fake.hub.resumes == 1 or None, what="the resume")
    await _answered(h, "after a reconnect")
    fake.drop()  # no close frame
    await eventually(lambda: fake.hub.resumes == 2 or None, what="the resume after the cut")
    await _answered(h, "after a cut")
    fake.stop()
    await eventually(lambda: h.adapter.health().state == "retrying" or None, what="retrying while Discord is away")
    assert not h.adapter.health().ok and "trying again in" in h.adapter.health().detail
    fake.start()
    await eventually(lambda: h.adapter.health().ok or None, what="connected again", timeout=20)
    await _answered(h, "after the outage")
    fake.invalidate(resumable=True)  # op 9, "you may resume"
    await eventually(lambda: fake.hub.resumes == 4 or None, what="the resume after op 9")
    await _answered(h, "after an invalid session")
    assert fake.hub.identifies == 1 and h.answers(fake.dm_channel(ALICE)) == ["ok"] * 4


async def test_a_restarted_adapter_resumes_and_answers_what_was_written_meanwhile(make_discord: Any) -> None:
    h: DiscordHarness = await make_discord()
    fake = h.fake
    h.model.set_default_reply("ok")
    await _answered(h, "before the stop")
    await h.adapter.stop()
    written = fake.dm(ALICE, "while the bot was away")  # kept for the session, as Discord does
    assert h.stored(written["id"]) is None
    await h.adapter.start(h.gateway)
    await eventually(lambda: h.answers(fake.dm_channel(ALICE)) == ["ok", "ok"] or None, what="the answer")
    assert fake.hub.identifies == 1 and fake.hub.resumes == 1
    await eventually(lambda: settled_at(h.profile.state_db), what="nothing left to answer or send")
    assert h.answers(fake.dm_channel(ALICE)) == ["ok", "ok"]


@pytest.mark.parametrize("fault, said", [
    ("token", "Discord refuses the bot token"),
    ("intent", "turn it on for the bot in the Developer Portal"),
])
async def test_what_a_person_must_fix_is_misconfigured(make_discord: Any, fake_discord: FakeDiscordServer,
                                                       monkeypatch: pytest.MonkeyPatch, fault: str, said: str) -> None:
    if fault == "token":
        monkeypatch.setenv(TOKEN_ENV, "not.the.token")
    else:
        fake_discord.state.message_content_intent = False  # as the Developer Portal has it
    h: DiscordHarness = await make_discord(connected=False)
    await eventually(lambda: h.adapter.health().state == "misconfigured" or None, what="misconfigured")
    assert said in h.adapter.health().detail and not h.adapter.health().ok
    assert h.gateway.accepting  # the gateway runs on without it


async def test_with_several_workers_only_the_lease_holder_holds_the_session(make_discord: Any) -> None:
    h: DiscordHarness = await make_discord()
    fake, store = h.fake, h.gateway.store
    h.model.set_default_reply("ok")
    other = AdapterLease(store, "discord", token="worker-b", seconds=1.5)  # a live worker (this process)
    assert other.take()
    await h.adapter.stop()
    h.adapter.inner.poll_lease = AdapterLease(store, "discord", token="worker-a", seconds=1.5)
    await h.adapter.start(h.gateway)
    health = h.adapter.health()
    assert health.ok and "sending only, worker worker-b receives" in health.detail
    assert fake.connected() == 0
    dm = fake.dm_channel(ALICE)
    await h.adapter.send(OutboxEntry(id=1, route=RouteKey("discord", dm), kind="heartbeat", text="sent anyway",
                                     session_id=None, inbox_id=None, created_at=0, status="pending", attempts=0,
                                     next_attempt_at=0))
    fake.dm(ALICE, "written while worker-b held the session")
    assert h.answers(dm) == ["sent anyway"]
    other.release()  # worker-b stops: worker-a takes the lease and resumes the session
    await eventually(lambda: h.answers(dm) == ["sent anyway", "ok"] or None, what="the answer", timeout=10)
    assert fake.hub.resumes == 1 and "receives" not in h.adapter.health().detail
