"""Who may talk to the agent: an in-process gateway with a recording "telegram" platform (and
others), the fake model over HTTP, and the real ``vigil pairing`` command on the same profile.

Security acceptance: an unknown user gets a pairing code and the model is never asked; the
approved code lets the next message through; revoking shuts the user out again; wrong codes
lock approvals; an expired code is refused; a flood of requests is answered with silence.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest

from tests.cli.helpers import run_cli
from tests.gateway.conftest import GatewayFactory, Harness, RecordingAdapter, eventually
from vigil.config.settings import Settings
from vigil.gateway import pairing
from vigil.gateway.adapters.base import Inbound, Receipt
from vigil.platforms.telegram import TelegramSettings
from vigil.store.gateway.gateway_tables import RouteKey

CODE = re.compile(r"vigil pairing approve ([A-Z2-9]{8})")


async def platform_gateway(
    make_gateway: GatewayFactory, monkeypatch: pytest.MonkeyPatch, *names: str, allow: list[str] | None = None
) -> tuple[Harness, dict[str, RecordingAdapter]]:
    """A started gateway with recording platforms named ``names`` (none exempt from the
    sender checks), whose profile the ``vigil`` command in this test uses."""
    settings = Settings().copy_with(update={"telegram": TelegramSettings(allow=allow or [])})
    h = await make_gateway(settings=settings, start=False)
    platforms = {name: RecordingAdapter(name=name) for name in names}
    h.gateway.adapters.update(platforms)
    await h.gateway.start()
    monkeypatch.setenv("VIGIL_HOME", str(h.profile.home))
    h.fake.set_default_reply("Hello from the agent.")
    return h, platforms


def dm(user: str, n: int, text: str = "hello?", platform: str = "telegram", **meta: Any) -> Inbound:
    return Inbound(RouteKey(platform, f"chat-{user}"), f"{platform}-{user}-{n}", text, sender=user, meta=meta)


async def pairing_texts(adapter: RecordingAdapter, count: int) -> list[str]:
    await eventually(lambda: len([e for e in adapter.sent if e.kind == "pairing"]) >= count, what="pairing replies")
    return [e.text for e in adapter.sent if e.kind == "pairing"]


def cli(*args: str) -> tuple[int, str]:
    result = run_cli("pairing", *args)
    assert "Traceback" not in result.output
    return result.exit_code, result.output


async def test_a_stranger_gets_a_code_and_nothing_reaches_the_model_until_approved(
    make_gateway: GatewayFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    h, platforms = await platform_gateway(make_gateway, monkeypatch, "telegram")
    telegram = platforms["telegram"]
    receipt = await h.gateway.receive(dm("1001", 1, "what is the admin password?", sender_name="Mallory"))
    assert receipt == Receipt(0, False, None, denied=True)
    [text] = await pairing_texts(telegram, 1)
    code = CODE.search(text).group(1)  # type: ignore[union-attr]
    assert "ask the owner" in text.lower() and "valid for 60 more minutes" in text
    assert telegram.sent[0].route == RouteKey("telegram", "chat-1001")
    assert h.fake.requests == []  # the model was never asked
    assert h.store.gateway.inbox_counts() == {"pending": 0, "running": 0, "answered": 0, "failed": 0, "set_aside": 0}
    assert h.store.list_sessions() == [] and h.gateway.live == {}  # no conversation either

    listed = json.loads(cli("list", "--json")[1])
    assert [(p["platform"], p["user"], p["name"]) for p in listed["pending"]] == [("telegram", "1001", "Mallory")]
    assert code not in json.dumps(listed)  # only the person who asked has the code

    assert cli("approve", code.lower()) == (0, "✓ Paired telegram user 1001 (Mallory): their messages are answered from now on.\n")
    answered = await h.gateway.receive(dm("1001", 2, "hi again"))
    assert not answered.denied and answered.inbox_id > 0
    await eventually(lambda: [e for e in telegram.sent if e.kind == "reply"], what="the answer")
    assert [e.text for e in telegram.sent if e.kind == "reply"] == ["Hello from the agent."]
    assert len(h.fake.requests) == 1 and "what is the admin password" not in json.dumps(h.fake.requests[0].body)

    code_back, output = cli("revoke", "telegram", "1001", "--json")
    assert code_back == 0 and json.loads(output)["revoked"]["status"] == "revoked"
    again = await h.gateway.receive(dm("1001", 3, "still there?"))
    assert again.denied
    await pairing_texts(telegram, 2)
    assert len(h.fake.requests) == 1  # revoked: the model is not asked again


async def test_asking_again_resends_the_same_code_then_a_flood_gets_silence(
    make_gateway: GatewayFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    h, platforms = await platform_gateway(make_gateway, monkeypatch, "telegram")
    limit = pairing.LIMITS.max_requests
    for n in range(limit + 4):
        assert (await h.gateway.receive(dm("2002", n))).denied
    texts = await pairing_texts(platforms["telegram"], limit + 1)
    codes = {m.group(1) for m in map(CODE.search, texts[:limit]) if m}
    assert len(codes) == 1 and "already have a pairing code" in texts[1]
    assert texts[limit] == pairing.LIMITED_MESSAGE
    assert any("too often" in line for line in h.lines)
    await h.gateway.outbox.drain()
    assert len([e for e in platforms["telegram"].sent if e.kind == "pairing"]) == limit + 1  # then silence
    assert h.fake.requests == []


async def test_at_most_three_codes_wait_per_platform_then_try_later(
    make_gateway: GatewayFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    h, platforms = await platform_gateway(make_gateway, monkeypatch, "telegram", "matrix")
    for user in ("1", "2", "3", "4"):
        await h.gateway.receive(dm(user, 0))
    texts = await pairing_texts(platforms["telegram"], 4)
    assert [bool(CODE.search(t)) for t in texts] == [True, True, True, False]
    assert texts[3] == pairing.FULL_MESSAGE
    # another platform (one vigil has no settings for: only paired users) has its own three
    assert (await h.gateway.receive(dm("4", 0, platform="matrix"))).denied
    assert CODE.search((await pairing_texts(platforms["matrix"], 1))[0])
    assert h.fake.requests == []


async def test_the_allow_list_lets_in_without_pairing_and_a_missing_sender_is_refused(
    make_gateway: GatewayFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    h, platforms = await platform_gateway(make_gateway, monkeypatch, "telegram", allow=["777"])
    assert not (await h.gateway.receive(dm("777", 1))).denied
    await eventually(lambda: [e for e in platforms["telegram"].sent if e.kind == "reply"], what="the answer")
    nameless = await h.gateway.receive(Inbound(RouteKey("telegram", "chat-x"), "tg-x", "hi"))
    assert nameless.denied
    await h.gateway.outbox.drain()
    assert [e.kind for e in platforms["telegram"].sent] == ["reply"]  # nobody to send a code to
    assert len(h.fake.requests) == 1
    h.profile.config_path.write_text("telegram:\n  allow: ['777']\n")  # what the CLI reads
    exit_code, output = cli("revoke", "telegram", "777")
    assert exit_code == 1 and "telegram.allow in config.yaml" in output


async def test_wrong_codes_lock_approvals_and_an_expired_code_is_refused(
    make_gateway: GatewayFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    h, platforms = await platform_gateway(make_gateway, monkeypatch, "telegram")
    await h.gateway.receive(dm("3003", 1))
    code = CODE.search((await pairing_texts(platforms["telegram"], 1))[0]).group(1)  # type: ignore[union-attr]
    wrong = [c for c in ("AAAAAAAA", "BBBBBBBB", "CCCCCCCC", "DDDDDDDD", "EEEEEEEE") if c != code]
    for n, guess in enumerate(wrong[:4], start=1):
        exit_code, output = cli("approve", guess)
        assert exit_code == 1 and f"{5 - n} more wrong code" in output
    exit_code, output = cli("approve", wrong[4], "--json")
    assert exit_code == 1 and "approvals are locked" in json.loads(output)["error"]["message"]
    exit_code, output = cli("approve", code)  # even the right one, while locked
    assert exit_code == 1 and "approvals are locked after 5 wrong codes" in output and "try again in" in output
    assert h.store.pairing.user("telegram", "3003") is None
    assert "approvals_locked_until" in json.loads(cli("list", "--json")[1])

    # an expired code (asked for over an hour ago) is refused, and does not count as wrong
    h.store.pairing.request_code(
        "telegram", "4004", display_name="", chat="c", thread="", user_key="",
        code_hash=pairing.code_hash("K7QM3XPA"), nonce="n", now=time.time() - 3700,
    )
    later = h.store.pairing.approve(pairing.code_hash("K7QM3XPA"), by="t", now=time.time() + 901)
    assert later.outcome == "expired" and h.store.pairing.user("telegram", "4004") is None
    assert h.fake.requests == []


async def test_a_revoked_users_heartbeat_is_refunded_and_not_fired(
    make_gateway: GatewayFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VIGIL_TEST_HEARTBEAT_MIN_SECONDS", "1")
    h, platforms = await platform_gateway(make_gateway, monkeypatch, "telegram")
    await h.gateway.receive(dm("5005", 1))
    code = CODE.search((await pairing_texts(platforms["telegram"], 1))[0]).group(1)  # type: ignore[union-attr]
    assert cli("approve", code)[0] == 0
    receipt = await h.gateway.receive(dm("5005", 2, "/heartbeat every 1s check the deploy"))
    await eventually(lambda: [e for e in platforms["telegram"].sent if e.kind == "heartbeat"], what="a heartbeat fired")
    assert cli("revoke", "telegram", "5005")[0] == 0
    await eventually(lambda: any("authorization is denied" in line for line in h.lines), what="a refund", timeout=20)
    await h.gateway.outbox.drain()
    refund = next(line for line in h.lines if "authorization is denied" in line)
    assert "slot refunded" in refund and "telegram user 5005 is not allowed" in refund
    after = h.gateway.heartbeat_repo.get(receipt.session_id)
    assert after is not None and after.pending is None  # the reservation was given back
    delivered = [e for e in platforms["telegram"].sent if e.kind == "heartbeat"]
    assert after.fire_count == len(delivered)  # every counted fire ran and answered; the refused one is not counted
    assert len(h.fake.requests) == len(delivered)  # one model request per fire that ran, none after


async def test_a_group_heartbeat_stops_when_anyone_who_spoke_there_is_revoked(
    make_gateway: GatewayFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VIGIL_TEST_HEARTBEAT_MIN_SECONDS", "1")
    h, platforms = await platform_gateway(make_gateway, monkeypatch, "telegram", allow=["ann"])
    group = RouteKey("telegram", "group-1")  # one conversation for the whole group
    await h.gateway.receive(Inbound(group, "g-bob-0", "hi", sender="bob"))
    code = CODE.search((await pairing_texts(platforms["telegram"], 1))[0]).group(1)  # type: ignore[union-attr]
    assert cli("approve", code)[0] == 0
    await h.gateway.receive(Inbound(group, "g-bob-1", "hello all", sender="bob"))
    receipt = await h.gateway.receive(Inbound(group, "g-ann-1", "/hb every 1s watch the build", sender="ann"))
    await eventually(lambda: [e for e in platforms["telegram"].sent if e.kind == "heartbeat"], what="a heartbeat fired")
    assert h.store.pairing.speakers("telegram", "group-1", "") == ["bob", "ann"]
    assert cli("revoke", "telegram", "bob")[0] == 0  # ann (allow-listed) still is, bob is not
    await eventually(lambda: any("telegram user bob is not allowed" in line for line in h.lines), what="a refund", timeout=20)
    await h.gateway.outbox.drain()
    after = h.gateway.heartbeat_repo.get(receipt.session_id)
    assert after is not None and after.fire_count == len([e for e in platforms["telegram"].sent if e.kind == "heartbeat"])

    h.gateway.authorization.reload(Settings().copy_with(update={"telegram": TelegramSettings(allow=[])}))
    assert not h.gateway.authorization.allowed("telegram", "ann")  # SIGHUP's allow-lists apply at once


@pytest.mark.parametrize("configured", [True, False], ids=["adapter-running", "adapter-not-configured"])
async def test_an_adopted_heartbeat_routed_to_a_never_paired_chat_is_refunded(
    make_gateway: GatewayFactory, monkeypatch: pytest.MonkeyPatch, configured: bool
) -> None:
    from vigil.schedule.heartbeat.record import Route
    from vigil.schedule.heartbeat.repo import HeartbeatRepo

    monkeypatch.setenv("VIGIL_TEST_HEARTBEAT_MIN_SECONDS", "1")
    h = await make_gateway(start=False)
    if configured:
        h.gateway.adapters["telegram"] = RecordingAdapter(name="telegram")
    session = h.store.create_session(source="cli").id
    HeartbeatRepo(h.store).set(session, "report the weather", 1, route=Route("telegram", "9999", None))
    await h.gateway.start()  # adopts it: nobody else runs it
    await eventually(lambda: any("telegram user 9999 is not allowed" in line for line in h.lines), what="a refund")
    heartbeat = h.gateway.heartbeat_repo.get(session)
    assert heartbeat is not None and heartbeat.fire_count == 0 and heartbeat.pending is None
    assert h.fake.requests == []


async def test_a_strangers_slash_commands_do_nothing_either(
    make_gateway: GatewayFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    h, platforms = await platform_gateway(make_gateway, monkeypatch, "telegram")
    for n, text in enumerate(["/heartbeat every 1m run rm -rf ~", "/new", "/resume", "/stop"]):
        assert (await h.gateway.receive(dm("6006", n, text))).denied
    texts = await pairing_texts(platforms["telegram"], 4)
    assert len({CODE.search(t).group(1) for t in texts}) == 1  # type: ignore[union-attr]
    assert h.store.list_sessions() == [] and h.gateway.heartbeat_repo.list() == []
    assert h.fake.requests == [] and h.gateway.live == {}
