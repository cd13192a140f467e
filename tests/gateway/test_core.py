"""The gateway core in-process: routing, order, exactly-once, outbox, recovery."""

from __future__ import annotations


from tests.gateway.settling import until_settled
from tests.gateway.conftest import GatewayFactory, eventually
from vigil.gateway.adapters.base import GatewayClosed, Inbound
from vigil.store.gateway.gateway_tables import ANSWERED, FAILED, PENDING, SENT, RouteKey
from vigil.testing.scripting import Reply

CHAT = RouteKey("chat", "c1")


async def test_messages_are_answered_in_order_through_the_outbox(make_gateway: GatewayFactory) -> None:
    h = await make_gateway()
    h.fake.queue("first answer", "second answer", "third answer")
    for n, text in enumerate(["one", "two", "three"]):
        receipt = await h.gateway.receive(Inbound(CHAT, f"m{n}", text))
        assert not receipt.duplicate
    await eventually(lambda: len(h.adapter.sent) == 3, what="three replies")
    assert h.adapter.texts() == ["first answer", "second answer", "third answer"]
    asked = [r.last_user_text for r in h.fake.requests]
    assert asked == ["one", "two", "three"]
    session_id = h.store.gateway.route_get(CHAT)
    users = [m.content for m in h.store.get_messages(session_id) if m.role == "user"]
    assert users == ["one", "two", "three"]
    assert h.store.gateway.inbox_counts()[ANSWERED] == 3


async def test_a_redelivered_message_is_answered_once(make_gateway: GatewayFactory) -> None:
    h = await make_gateway()
    first = await h.gateway.receive(Inbound(CHAT, "same-id", "hello"))
    again = await h.gateway.receive(Inbound(CHAT, "same-id", "hello"))
    assert again.duplicate and again.inbox_id == first.inbox_id
    await eventually(lambda: h.adapter.sent, what="a reply")
    await until_settled(h.store)
    assert len(h.adapter.sent) == 1
    assert len(h.fake.requests) == 1


async def test_slash_commands_work_from_an_adapter(make_gateway: GatewayFactory) -> None:
    h = await make_gateway()
    await h.gateway.receive(Inbound(CHAT, "a", "hello"))
    await h.gateway.receive(Inbound(CHAT, "b", "/heartbeat every 10m check the deploy"))
    await eventually(lambda: len(h.adapter.sent) == 2, what="two replies")
    assert h.adapter.sent[1].kind == "command"
    assert h.adapter.sent[1].text.startswith("♥ Heartbeat set (every 10m): check the deploy")
    session_id = h.store.gateway.route_get(CHAT)
    heartbeat = h.gateway.heartbeat_repo.get(session_id)
    assert heartbeat is not None and heartbeat.route is not None
    assert (heartbeat.route.platform, heartbeat.route.chat) == ("chat", "c1")
    await h.gateway.receive(Inbound(CHAT, "c", "/new"))
    await eventually(lambda: len(h.adapter.sent) == 3, what="the /new reply")
    new_id = h.store.gateway.route_get(CHAT)
    assert new_id != session_id
    assert h.gateway.heartbeat_repo.get(session_id) is None  # /new ends the old heartbeat (spec)


async def test_each_chat_is_its_own_conversation(make_gateway: GatewayFactory) -> None:
    h = await make_gateway()
    other = RouteKey("chat", "c2")
    await h.gateway.receive(Inbound(CHAT, "1", "hello from one"))
    await h.gateway.receive(Inbound(other, "1", "hello from two"))  # same id, other chat: same adapter, so a duplicate
    await h.gateway.receive(Inbound(other, "2", "hello from two"))
    await eventually(lambda: len(h.adapter.sent) == 2, what="two replies")
    assert h.store.gateway.route_get(CHAT) != h.store.gateway.route_get(other)


async def test_a_failing_platform_is_retried_and_finally_marked_failed(make_gateway: GatewayFactory) -> None:
    h = await make_gateway(outbox_attempts=3)
    h.adapter.failures = 2
    await h.gateway.receive(Inbound(CHAT, "x", "hello"))
    await eventually(lambda: h.adapter.sent, what="the reply after two failures")
    # The platform has it before the outbox marks it sent.
    await eventually(lambda: h.store.gateway.outbox_counts()[SENT] == 1, what="the reply marked sent")
    assert len(h.adapter.sent) == 1
    h.adapter.failures = 5
    await h.gateway.receive(Inbound(CHAT, "y", "again"))
    await eventually(lambda: h.store.gateway.outbox_counts()[FAILED] == 1, what="the reply marked failed")
    failed = h.store.gateway.outbox_list(statuses=[FAILED])
    assert failed[0].attempts == 3 and "down" in (failed[0].last_error or "")
    # The report line follows the store's mark.
    await eventually(lambda: any("marked failed" in line for line in h.lines), what="the failure reported")


async def test_no_input_once_stopping(make_gateway: GatewayFactory) -> None:
    h = await make_gateway()
    await h.gateway.stop(1.0)
    try:
        await h.gateway.receive(Inbound(CHAT, "late", "hello"))
    except GatewayClosed:
        pass
    else:
        raise AssertionError("a stopping gateway took input")
    assert h.store.gateway.inbox_counts()[PENDING] == 0


async def test_unanswered_messages_are_answered_once_at_the_next_start(make_gateway: GatewayFactory) -> None:
    h = await make_gateway(start=False)
    tables = h.store.gateway
    never_started, _ = tables.inbox_accept(CHAT, "n1", "never started", received_at=1.0)
    await h.gateway.start()
    await eventually(lambda: len(h.adapter.sent) == 1, what="the recovered reply")
    assert tables.inbox_get(never_started.id).status == ANSWERED
    assert len(h.fake.requests) == 1


async def test_an_answer_stored_before_a_crash_is_not_given_twice(make_gateway: GatewayFactory) -> None:
    """The turn finished but the crash came before the entry was marked: start-up finishes it
    with the stored answer and asks the model nothing."""
    h = await make_gateway(start=False)
    tables = h.store.gateway
    entry, _ = tables.inbox_accept(CHAT, "done-1", "what is 2+2", received_at=1.0)
    session = h.store.create_session(source="chat", tool_names=())
    tables.route_set(CHAT, session.id, now=1.0)
    tables.inbox_start(entry.id, session.id, now=1.0)
    from vigil.store import NewMessage

    h.store.append_message(session.id, NewMessage("user", "what is 2+2", meta={"inbox": entry.id}))
    h.store.append_message(session.id, NewMessage("assistant", "4", meta={"stop_reason": "stop"}))
    await h.gateway.start()
    await eventually(lambda: h.adapter.sent, what="the stored answer delivered")
    assert h.adapter.texts() == ["4"]
    assert h.fake.requests == []
    assert tables.inbox_get(entry.id).status == ANSWERED


async def test_a_turn_cut_off_by_a_crash_is_answered_again_once(make_gateway: GatewayFactory) -> None:
    h = await make_gateway(start=False)
    tables = h.store.gateway
    entry, _ = tables.inbox_accept(CHAT, "cut-1", "long question", received_at=1.0)
    session = h.store.create_session(source="chat", tool_names=())
    tables.route_set(CHAT, session.id, now=1.0)
    tables.inbox_start(entry.id, session.id, now=1.0)
    from vigil.store import NewMessage

    h.store.append_message(session.id, NewMessage("user", "long question", meta={"inbox": entry.id}))
    h.fake.queue("the answer")
    await h.gateway.start()
    await eventually(lambda: h.adapter.sent, what="the answer")
    await until_settled(h.store)
    assert h.adapter.texts() == ["the answer"]
    assert len(h.fake.requests) == 1
    assert tables.inbox_get(entry.id).attempts == 2


async def test_busy_interrupt_stops_the_running_turn(make_gateway: GatewayFactory) -> None:
    from vigil.testing.fake_model import Reply

    h = await make_gateway(busy="interrupt")
    h.fake.queue(Reply.text(["slow "] * 50, chunk_delay=0.2), "quick answer")
    await h.gateway.receive(Inbound(CHAT, "1", "slow please"))
    await eventually(lambda: h.fake.requests, what="the first model call")
    await h.gateway.receive(Inbound(CHAT, "2", "never mind"))
    await eventually(lambda: any(e.text == "quick answer" for e in h.adapter.sent), what="the second answer")
    assert h.store.gateway.inbox_counts()[ANSWERED] == 2


async def test_live_events_reach_watchers_and_the_platform(make_gateway: GatewayFactory) -> None:
    h = await make_gateway()
    receipt = await h.gateway.receive(Inbound(CHAT, "1", "hello"))
    assert receipt.session_id is not None
    watch = h.gateway.subscribe(receipt.session_id)
    await h.gateway.receive(Inbound(CHAT, "2", "stream this"))
    kinds = []
    while "turn_ended" not in kinds or len([k for k in kinds if k == "turn_ended"]) < 2:
        item = await watch.next(timeout=10)
        assert item is not None
        kinds.append(item["type"])
    assert "turn_began" in kinds and "delta" in kinds
    assert any(event["type"] == "turn_ended" for _, event in h.adapter.live_events)
    watch.close()


async def test_the_status_after_a_turn_says_idle_unless_a_message_waits(make_gateway: GatewayFactory) -> None:
    h = await make_gateway()
    h.fake.queue(Reply.text(["slow "] * 5, chunk_delay=0.1))
    receipt = await h.gateway.receive(Inbound(CHAT, "1", "first"))
    assert receipt.session_id is not None
    watch = h.gateway.subscribe(receipt.session_id)
    await h.gateway.receive(Inbound(CHAT, "2", "second, queued behind the first"))
    statuses = []
    while len(statuses) < 2:
        item = await watch.next(timeout=10)
        assert item is not None
        if item["type"] == "status":
            statuses.append((item["busy"], item["queued"]))
    watch.close()
    assert statuses == [(True, 1), (False, 0)]


async def test_a_heartbeat_set_from_a_platform_fires_unprompted_and_again_after_a_restart(
    make_gateway: GatewayFactory, monkeypatch
) -> None:
    monkeypatch.setenv("VIGIL_TEST_HEARTBEAT_MIN_SECONDS", "1")
    h = await make_gateway()
    h.fake.set_default_reply("all quiet")
    await h.gateway.receive(Inbound(CHAT, "1", "/heartbeat every 1s check the deploy"))
    heartbeats = lambda: [e for e in h.adapter.sent if e.kind == "heartbeat"]  # noqa: E731
    await eventually(heartbeats, what="a heartbeat answer delivered to the chat")
    assert heartbeats()[0].route == CHAT and heartbeats()[0].text == "all quiet"
    assert any("heartbeat fired" in line for line in h.lines)
    await h.gateway.stop(1.0)
    session_id = h.store.gateway.route_get(CHAT)
    fired = h.gateway.heartbeat_repo.get(session_id).fire_count

    again = await make_gateway()  # a new process on the same store: no new message
    await eventually(lambda: [e for e in again.adapter.sent if e.kind == "heartbeat"], what="a fire after the restart")
    assert again.gateway.heartbeat_repo.get(session_id).fire_count > fired
    assert any("armed from the store" in line for line in again.lines)


async def _approval_round(h, approve: bool | None, target) -> list[dict]:
    from vigil.testing.scripting import Reply, ToolCallSpec

    h.fake.queue(
        Reply.tool_calls(ToolCallSpec("terminal", {"command": f"mkfs.ext4 /nonexistent/vigil-device; touch {target}/ran"})),
        "done",
    )
    first = await h.gateway.receive(Inbound(CHAT, "warm", "hello"))
    await eventually(lambda: h.adapter.sent, what="the first answer")
    watch = h.gateway.subscribe(first.session_id)
    await h.gateway.receive(Inbound(CHAT, "danger", "clean up"))
    seen = []
    while True:
        item = await watch.next(timeout=15)
        assert item is not None
        seen.append(item)
        if item["type"] == "approval_request" and approve is not None:
            assert h.gateway.resolve_approval(item["id"], approve)
            assert not h.gateway.resolve_approval(item["id"], approve)  # decided once
        if item["type"] == "turn_ended":
            return seen


async def test_a_dangerous_command_waits_for_approval(make_gateway: GatewayFactory, tmp_path) -> None:
    h = await make_gateway()
    h.fake.queue("hi")
    target = tmp_path / "approved"
    target.mkdir()
    seen = await _approval_round(h, True, target)
    resolved = [e for e in seen if e["type"] == "approval_resolved"]
    assert resolved and resolved[0]["approved"] is True
    assert (target / "ran").exists()


async def test_no_answer_to_an_approval_means_denied(make_gateway: GatewayFactory, tmp_path) -> None:
    h = await make_gateway(approval_timeout=0.5)
    h.fake.queue("hi")
    target = tmp_path / "keep-me"
    target.mkdir()
    seen = await _approval_round(h, None, target)
    resolved = [e for e in seen if e["type"] == "approval_resolved"]
    assert resolved and resolved[0]["approved"] is False and resolved[0]["reason"] == "timeout"
    assert not (target / "ran").exists()
    tool_results = [e for e in seen if e["type"] == "tool_finished"]
    assert tool_results and "declined" in tool_results[0]["content"]


async def test_a_message_cut_off_by_three_crashes_is_still_answered(make_gateway: GatewayFactory) -> None:
    """A process death is an interruption, not a failed attempt: an entry started three times
    without finishing is answered (it was found cut off by one death, not three in a row)."""
    h = await make_gateway(start=False)
    tables = h.store.gateway
    entry, _ = tables.inbox_accept(CHAT, "cut-thrice", "answer me", received_at=1.0)
    for _ in range(3):
        tables.inbox_start(entry.id, "", now=1.0)
    await h.gateway.start()
    await eventually(lambda: h.adapter.sent, what="the answer")
    assert h.adapter.texts() == ["ok"]
    assert tables.inbox_get(entry.id).status == ANSWERED
