"""The ``GatewayTables`` contract (``store.gateway``): routes, inbox and outbox, the same on
every backend, through the protocol only (raw SQL only to damage or break a table)."""

from __future__ import annotations

import pytest

from vigil.store import SessionNotFound, SessionStore, StoreError
from vigil.store.errors import DamagedRow
from vigil.store.gateway.gateway_tables import (
    ANSWERED,
    FAILED,
    PENDING,
    RUNNING,
    SENT,
    SET_ASIDE,
    NewOutbound,
    RouteKey,
)

from .gateway_support import (
    BREAK_OUTBOX,
    REPAIR_OUTBOX,
    SLACK,
    TELEGRAM_GROUP,
    TELEGRAM_GROUP_BOB,
    WEB,
    RawSQL,
    backend_of,
    raw_sql_for,
)


@pytest.fixture
def raw(store: SessionStore, request: pytest.FixtureRequest) -> RawSQL:
    return raw_sql_for(store, request)


def session(store: SessionStore) -> str:
    return store.create_session(source="gateway").id


# -- routes ---------------------------------------------------------------------------------
def test_a_route_is_set_read_replaced_and_deleted(store: SessionStore) -> None:
    tables = store.gateway
    first, second = session(store), session(store)
    assert tables.route_get(WEB) is None
    tables.route_set(WEB, first, now=10.0)
    assert tables.route_get(WEB) == first
    tables.route_set(WEB, second, now=20.0)  # /new: the chat now talks to another session
    assert tables.route_get(WEB) == second
    assert tables.routes_of(first) == [] and tables.routes_of(second) == [WEB]
    assert tables.route_delete(WEB) is True
    assert tables.route_get(WEB) is None and tables.routes_of(second) == []
    assert tables.route_delete(WEB) is False


def test_every_part_of_a_route_tells_conversations_apart(store: SessionStore) -> None:
    tables = store.gateway
    alice, bob, whole_chat, slack = (session(store) for _ in range(4))
    tables.route_set(TELEGRAM_GROUP, alice, now=1.0)
    tables.route_set(TELEGRAM_GROUP_BOB, bob, now=1.0)
    tables.route_set(RouteKey("telegram", "-100200", thread="7"), whole_chat, now=1.0)
    tables.route_set(SLACK, slack, now=1.0)
    assert tables.route_get(TELEGRAM_GROUP) == alice
    assert tables.route_get(TELEGRAM_GROUP_BOB) == bob
    assert tables.route_get(RouteKey("telegram", "-100200", thread="7")) == whole_chat
    assert tables.route_get(RouteKey("telegram", "-100200")) is None  # another thread
    assert tables.route_get(RouteKey("slack", "C01")) is None
    assert tables.route_get(SLACK) == slack


def test_routes_of_a_session_oldest_first_even_when_replaced(store: SessionStore) -> None:
    tables = store.gateway
    shared, other = session(store), session(store)
    tables.route_set(SLACK, shared, now=5.0)
    tables.route_set(WEB, shared, now=5.0)  # same moment: creation order decides
    tables.route_set(TELEGRAM_GROUP, other, now=3.0)
    tables.route_set(TELEGRAM_GROUP, shared, now=9.0)  # created at 3.0: the oldest
    tables.route_set(SLACK, shared, now=12.0)  # re-pointing at the same session keeps its place
    assert tables.routes_of(shared) == [TELEGRAM_GROUP, SLACK, WEB]
    assert tables.routes_of(other) == []


def test_a_route_to_a_missing_session_is_refused(store: SessionStore) -> None:
    with pytest.raises(SessionNotFound):
        store.gateway.route_set(WEB, "0123456789ab", now=1.0)
    assert store.gateway.route_get(WEB) is None


def test_deleting_a_session_deletes_its_routes_only(store: SessionStore) -> None:
    tables = store.gateway
    gone, kept = session(store), session(store)
    tables.route_set(WEB, gone, now=1.0)
    tables.route_set(SLACK, gone, now=1.0)
    tables.route_set(TELEGRAM_GROUP, kept, now=1.0)
    entry, _ = tables.inbox_accept(WEB, "m1", "hello", received_at=2.0)
    tables.inbox_start(entry.id, gone, now=3.0)
    store.delete_session(gone)
    assert tables.route_get(WEB) is None and tables.route_get(SLACK) is None
    assert tables.route_get(TELEGRAM_GROUP) == kept
    # The inbox keeps its record of where the message went; the gateway starts afresh.
    assert tables.inbox_get(entry.id).session_id == gone  # type: ignore[union-attr]
    tables.route_set(WEB, kept, now=4.0)
    assert tables.routes_of(kept) == [TELEGRAM_GROUP, WEB]


@pytest.mark.parametrize(
    "bad",
    [RouteKey("", "chat"), RouteKey("web", 7), ("web", "chat")],  # type: ignore[arg-type]
    ids=["no adapter", "not a string", "not a RouteKey"],
)
def test_a_malformed_route_is_refused(store: SessionStore, bad: RouteKey) -> None:
    target = session(store)
    with pytest.raises((TypeError, ValueError)):
        store.gateway.route_set(bad, target, now=1.0)
    with pytest.raises((TypeError, ValueError)):
        store.gateway.inbox_accept(bad, "m1", "hi", received_at=1.0)
    assert store.gateway.routes_of(target) == [] and store.gateway.inbox_unfinished() == []


# -- inbox ----------------------------------------------------------------------------------
def test_an_accepted_message_is_stored_pending(store: SessionStore) -> None:
    entry, new = store.gateway.inbox_accept(
        TELEGRAM_GROUP, "4711", "what's the weather?", sender="alice", received_at=100.5, meta={"lang": "en"}
    )
    assert new is True
    assert (entry.route, entry.external_id, entry.text, entry.sender) == (
        TELEGRAM_GROUP, "4711", "what's the weather?", "alice"
    )
    assert (entry.received_at, entry.status, entry.session_id, entry.attempts) == (100.5, PENDING, None, 0)
    assert entry.finished_at is None and entry.error is None and entry.started_at is None
    assert entry.meta == {"lang": "en"}
    assert store.gateway.inbox_get(entry.id) == entry


def test_a_redelivery_is_stored_once(store: SessionStore) -> None:
    tables = store.gateway
    first, new = tables.inbox_accept(WEB, "client-key-1", "hello", received_at=1.0)
    again, repeated = tables.inbox_accept(WEB, "client-key-1", "hello (resent)", received_at=5.0, meta={"x": 1})
    assert new is True and repeated is False
    assert again == first  # what was stored the first time, nothing of the redelivery
    assert tables.inbox_counts() == {PENDING: 1, RUNNING: 0, ANSWERED: 0, FAILED: 0, SET_ASIDE: 0}
    # The id is unique per adapter: another platform may use the same one.
    other, new_elsewhere = tables.inbox_accept(SLACK, "client-key-1", "hi", received_at=6.0)
    assert new_elsewhere is True and other.id != first.id
    # ...and a redelivery on another chat of the same adapter is still the same message.
    _, repeated_elsewhere = tables.inbox_accept(RouteKey("web", "browser-2"), "client-key-1", "x", received_at=7.0)
    assert repeated_elsewhere is False


def test_unfinished_entries_oldest_first(store: SessionStore) -> None:
    tables = store.gateway
    target = session(store)
    ids = [tables.inbox_accept(WEB, f"m{n}", f"message {n}", received_at=float(n))[0].id for n in range(5)]
    assert ids == sorted(ids)
    tables.inbox_start(ids[1], target, now=10.0)
    tables.inbox_finish(ids[2], ANSWERED, now=11.0)
    tables.inbox_start(ids[3], target, now=12.0)
    tables.inbox_finish(ids[3], FAILED, now=13.0, error="the model is down")
    unfinished = tables.inbox_unfinished()
    assert [(e.id, e.status) for e in unfinished] == [(ids[0], PENDING), (ids[1], RUNNING), (ids[4], PENDING)]
    assert [e.id for e in tables.inbox_unfinished(limit=2)] == ids[:2]
    assert tables.inbox_unfinished(limit=0) == []
    assert tables.inbox_counts() == {PENDING: 2, RUNNING: 1, ANSWERED: 1, FAILED: 1, SET_ASIDE: 0}


def test_start_then_finish_queues_the_reply_with_it(store: SessionStore) -> None:
    tables = store.gateway
    target = session(store)
    entry, _ = tables.inbox_accept(WEB, "m1", "hello", received_at=1.0)
    started = tables.inbox_start(entry.id, target, now=2.0)
    assert (started.status, started.session_id, started.attempts, started.started_at) == (RUNNING, target, 1, 2.0)
    reply = tables.inbox_finish(entry.id, ANSWERED, now=3.0, reply=NewOutbound(WEB, "hi there", meta={"turn": 1}))
    assert reply is not None
    assert (reply.route, reply.kind, reply.text, reply.meta) == (WEB, "reply", "hi there", {"turn": 1})
    assert (reply.inbox_id, reply.session_id) == (entry.id, target)  # filled in from the entry
    assert (reply.status, reply.attempts, reply.created_at, reply.next_attempt_at) == (PENDING, 0, 3.0, 3.0)
    finished = tables.inbox_get(entry.id)
    assert finished is not None and (finished.status, finished.finished_at, finished.error) == (ANSWERED, 3.0, None)
    assert tables.outbox_due(3.0) == [reply] and tables.inbox_unfinished() == []


def test_a_crash_mid_turn_restarts_the_entry(store: SessionStore) -> None:
    tables = store.gateway
    first_try, second_try = session(store), session(store)
    entry, _ = tables.inbox_accept(WEB, "m1", "hello", received_at=1.0)
    tables.inbox_start(entry.id, first_try, now=2.0)
    # The process died; on start-up the entry is still unfinished and is started again.
    assert [e.id for e in tables.inbox_unfinished()] == [entry.id]
    again = tables.inbox_start(entry.id, second_try, now=9.0)
    assert (again.attempts, again.session_id, again.started_at) == (2, second_try, 9.0)


def test_starting_before_the_session_exists(store: SessionStore) -> None:
    """A new conversation makes its session with its first turn: the entry is running in no
    session yet, and the reply names the session that answered."""
    tables = store.gateway
    entry, _ = tables.inbox_accept(WEB, "m1", "hello", received_at=1.0)
    started = tables.inbox_start(entry.id, "", now=2.0)
    assert (started.status, started.session_id, started.attempts) == (RUNNING, None, 1)
    answered_in = session(store)
    reply = tables.inbox_finish(entry.id, ANSWERED, now=3.0, reply=NewOutbound(WEB, "hi", session_id=answered_in))
    assert reply is not None and (reply.session_id, reply.inbox_id) == (answered_in, entry.id)


def test_finishing_twice_writes_nothing(store: SessionStore) -> None:
    tables = store.gateway
    entry, _ = tables.inbox_accept(WEB, "m1", "hello", received_at=1.0)
    tables.inbox_start(entry.id, session(store), now=2.0)
    first = tables.inbox_finish(entry.id, ANSWERED, now=3.0, reply=NewOutbound(WEB, "one"))
    assert tables.inbox_finish(entry.id, FAILED, now=4.0, error="late", reply=NewOutbound(WEB, "two")) is None
    stored = tables.inbox_get(entry.id)
    assert stored is not None and (stored.status, stored.finished_at, stored.error) == (ANSWERED, 3.0, None)
    assert tables.outbox_list() == [first]
    # A finished entry is not started again either: a message is answered once.
    assert tables.inbox_start(entry.id, session(store), now=5.0) == stored


def test_finishing_without_a_reply_and_unknown_entries(store: SessionStore) -> None:
    tables = store.gateway
    entry, _ = tables.inbox_accept(WEB, "m1", "/stop", received_at=1.0)
    assert tables.inbox_finish(entry.id, ANSWERED, now=2.0) is None
    assert tables.inbox_get(entry.id).status == ANSWERED  # type: ignore[union-attr]
    assert tables.outbox_counts() == {PENDING: 0, SENT: 0, FAILED: 0}
    unknown = entry.id + 1000
    assert tables.inbox_get(unknown) is None
    with pytest.raises(KeyError):
        tables.inbox_start(unknown, session(store), now=3.0)
    with pytest.raises(KeyError):
        tables.inbox_finish(unknown, ANSWERED, now=3.0, reply=NewOutbound(WEB, "x"))
    assert tables.outbox_list() == []


@pytest.mark.parametrize("status", [PENDING, RUNNING, "done", SENT])
def test_finishing_with_another_status_is_refused(store: SessionStore, status: str) -> None:
    entry, _ = store.gateway.inbox_accept(WEB, "m1", "hello", received_at=1.0)
    with pytest.raises(ValueError, match="answered or failed"):
        store.gateway.inbox_finish(entry.id, status, now=2.0)
    assert store.gateway.inbox_get(entry.id) == entry


def test_the_reply_and_the_finish_are_one_transaction(
    store: SessionStore, raw: RawSQL
) -> None:
    tables = store.gateway
    entry, _ = tables.inbox_accept(WEB, "m1", "hello", received_at=1.0)
    running = tables.inbox_start(entry.id, session(store), now=2.0)
    raw(BREAK_OUTBOX[backend_of(store)])
    with pytest.raises(StoreError, match="the outbox is broken"):
        tables.inbox_finish(entry.id, ANSWERED, now=3.0, reply=NewOutbound(WEB, "hi"))
    # The reply could not be queued, so the entry was not marked answered either: it is
    # still there to be answered, not answered without a reply.
    assert tables.inbox_get(entry.id) == running
    assert [e.id for e in tables.inbox_unfinished()] == [entry.id]
    raw(REPAIR_OUTBOX[backend_of(store)])
    reply = tables.inbox_finish(entry.id, ANSWERED, now=4.0, reply=NewOutbound(WEB, "hi"))
    assert reply is not None and tables.outbox_list() == [reply]


def test_bad_input_to_the_inbox_changes_nothing(store: SessionStore) -> None:
    tables = store.gateway
    with pytest.raises(ValueError, match="external_id"):
        tables.inbox_accept(WEB, "", "hello", received_at=1.0)
    with pytest.raises(TypeError, match="meta"):
        tables.inbox_accept(WEB, "m1", "hello", received_at=1.0, meta=["not", "a", "dict"])  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        tables.inbox_accept(WEB, "m1", "hello", received_at=1.0, meta={"x": float("nan")})
    entry, _ = tables.inbox_accept(WEB, "m1", "hello", received_at=1.0)
    with pytest.raises(ValueError, match="unknown outbox kind"):
        tables.inbox_finish(entry.id, ANSWERED, now=2.0, reply=NewOutbound(WEB, "x", kind="shout"))
    assert tables.inbox_get(entry.id) == entry and tables.outbox_list() == []
    with pytest.raises(ValueError):
        tables.inbox_unfinished(limit=-1)


def test_text_comes_back_exactly(store: SessionStore) -> None:
    awkward = "NUL \x00 here, \ufdd0 escape, emoji 🦉, quote ' and \\ and 'x'); DROP TABLE x; --"
    route = RouteKey("web", "chat \x00 1", thread="\ufdd0", user="ü")
    entry, _ = store.gateway.inbox_accept(route, awkward, awkward, sender=awkward, received_at=1.0, meta={"k": awkward})
    stored = store.gateway.inbox_get(entry.id)
    assert stored == entry and stored.text == awkward and stored.route == route  # type: ignore[union-attr]
    assert store.gateway.inbox_accept(route, awkward, "again", received_at=2.0)[1] is False
    queued = store.gateway.outbox_add(NewOutbound(route, awkward, meta={"k": awkward}), now=3.0)
    assert store.gateway.outbox_due(3.0) == [queued] and queued.text == awkward


# -- outbox ---------------------------------------------------------------------------------
def test_outbox_add_and_due(store: SessionStore) -> None:
    tables = store.gateway
    assert tables.outbox_due(100.0) == [] and tables.outbox_next_due() is None
    first = tables.outbox_add(NewOutbound(WEB, "heartbeat answer", kind="heartbeat", session_id="abc123"), now=10.0)
    assert (first.kind, first.session_id, first.inbox_id, first.status, first.attempts) == (
        "heartbeat", "abc123", None, PENDING, 0
    )
    assert (first.created_at, first.next_attempt_at, first.last_error, first.sent_at) == (10.0, 10.0, None, None)
    second = tables.outbox_add(NewOutbound(SLACK, "notice", kind="notice"), now=11.0)
    assert tables.outbox_due(9.0) == []
    assert tables.outbox_due(10.0) == [first]
    assert tables.outbox_due(11.0) == [first, second]
    assert tables.outbox_due(11.0, limit=1) == [first]
    assert tables.outbox_next_due() == 10.0


def test_outbox_retry_then_sent(store: SessionStore) -> None:
    tables = store.gateway
    first = tables.outbox_add(NewOutbound(WEB, "one"), now=10.0)
    second = tables.outbox_add(NewOutbound(WEB, "two"), now=10.0)
    tables.outbox_retry(first.id, error="HTTP 502", next_attempt_at=40.0)
    assert tables.outbox_due(20.0) == [second]  # the retried one waits its back-off
    assert tables.outbox_next_due() == 10.0
    tables.outbox_sent(second.id, now=21.0)
    assert tables.outbox_next_due() == 40.0
    [retried] = tables.outbox_due(40.0)
    assert (retried.id, retried.attempts, retried.last_error, retried.next_attempt_at) == (first.id, 1, "HTTP 502", 40.0)
    tables.outbox_retry(first.id, error="HTTP 503", next_attempt_at=80.0)
    tables.outbox_sent(first.id, now=81.0)
    sent = {e.id: e for e in tables.outbox_list(statuses=[SENT])}
    assert (sent[first.id].attempts, sent[first.id].sent_at, sent[first.id].last_error) == (3, 81.0, "HTTP 503")
    assert (sent[second.id].attempts, sent[second.id].sent_at) == (1, 21.0)
    assert tables.outbox_next_due() is None and tables.outbox_due(1e9) == []


def test_due_entries_go_oldest_first_even_after_a_retry(store: SessionStore) -> None:
    """Replies to one chat keep their order: one retried and due again goes before a younger one."""
    tables = store.gateway
    first = tables.outbox_add(NewOutbound(WEB, "first"), now=10.0)
    tables.outbox_retry(first.id, error="HTTP 429", next_attempt_at=15.0)
    second = tables.outbox_add(NewOutbound(WEB, "second"), now=12.0)
    assert [e.text for e in tables.outbox_due(20.0)] == ["first", "second"]
    assert tables.outbox_next_due() == 12.0 and second.next_attempt_at == 12.0


def test_outbox_fail_keeps_the_entry_and_its_error(store: SessionStore) -> None:
    tables = store.gateway
    entry = tables.outbox_add(NewOutbound(WEB, "lost cause"), now=10.0)
    tables.outbox_retry(entry.id, error="timeout", next_attempt_at=20.0)
    tables.outbox_fail(entry.id, error="HTTP 403 blocked by user", now=20.5)
    [failed] = tables.outbox_list(statuses=[FAILED])
    assert (failed.id, failed.status, failed.attempts, failed.last_error, failed.failed_at) == (
        entry.id, FAILED, 2, "HTTP 403 blocked by user", 20.5
    )
    assert tables.outbox_due(1e9) == [] and tables.outbox_counts() == {PENDING: 0, SENT: 0, FAILED: 1}
    # A late outcome of a try already given up changes nothing.
    tables.outbox_sent(entry.id, now=30.0)
    tables.outbox_retry(entry.id, error="again", next_attempt_at=40.0)
    assert tables.outbox_list() == [failed]


def test_outbox_unknown_entries_raise_key_error(store: SessionStore) -> None:
    tables = store.gateway
    unknown = tables.outbox_add(NewOutbound(WEB, "x"), now=1.0).id + 1000
    for call in (
        lambda: tables.outbox_sent(unknown, now=2.0),
        lambda: tables.outbox_retry(unknown, error="e", next_attempt_at=3.0),
        lambda: tables.outbox_fail(unknown, error="e", now=2.0),
    ):
        with pytest.raises(KeyError):
            call()
    assert tables.outbox_counts() == {PENDING: 1, SENT: 0, FAILED: 0}


def test_outbox_list_newest_first_by_status_and_counts(store: SessionStore) -> None:
    tables = store.gateway
    entries = [tables.outbox_add(NewOutbound(WEB, f"m{n}"), now=float(n)) for n in range(6)]
    tables.outbox_sent(entries[0].id, now=10.0)
    tables.outbox_sent(entries[3].id, now=10.0)
    tables.outbox_fail(entries[4].id, error="gone", now=10.0)
    listed = tables.outbox_list()
    assert [e.id for e in listed] == [e.id for e in reversed(entries)]
    assert [e.id for e in tables.outbox_list(statuses=[PENDING])] == [entries[5].id, entries[2].id, entries[1].id]
    assert [e.id for e in tables.outbox_list(statuses=[SENT, FAILED], limit=2)] == [entries[4].id, entries[3].id]
    assert tables.outbox_list(statuses=[]) == []
    assert tables.outbox_counts() == {PENDING: 3, SENT: 2, FAILED: 1}
    with pytest.raises(ValueError, match="unknown outbox status"):
        tables.outbox_list(statuses=["lost"])
    with pytest.raises(TypeError):
        tables.outbox_list(statuses=PENDING)  # a bare string is not a list of statuses


# -- housekeeping ---------------------------------------------------------------------------
def test_prune_keeps_what_is_not_finished(store: SessionStore) -> None:
    tables = store.gateway
    target = session(store)
    pending, _ = tables.inbox_accept(WEB, "pending", "p", received_at=1.0)
    running, _ = tables.inbox_accept(WEB, "running", "r", received_at=1.0)
    tables.inbox_start(running.id, target, now=2.0)
    old, _ = tables.inbox_accept(WEB, "old", "o", received_at=1.0)
    reply = tables.inbox_finish(old.id, ANSWERED, now=5.0, reply=NewOutbound(WEB, "reply to old"))
    failed, _ = tables.inbox_accept(WEB, "failed", "f", received_at=1.0)
    tables.inbox_finish(failed.id, FAILED, now=6.0, error="no")
    recent, _ = tables.inbox_accept(WEB, "recent", "n", received_at=1.0)
    tables.inbox_finish(recent.id, ANSWERED, now=50.0)
    sent = tables.outbox_add(NewOutbound(WEB, "sent"), now=1.0)
    tables.outbox_sent(sent.id, now=7.0)
    gave_up = tables.outbox_add(NewOutbound(WEB, "failed"), now=1.0)
    tables.outbox_fail(gave_up.id, error="blocked", now=7.0)
    waiting = tables.outbox_add(NewOutbound(WEB, "waiting"), now=1.0)
    assert reply is not None

    assert tables.prune(before=10.0) == 3  # old, failed (inbox); sent (outbox)
    assert tables.inbox_get(old.id) is None and tables.inbox_get(failed.id) is None
    assert [e.id for e in tables.inbox_unfinished()] == [pending.id, running.id]
    assert tables.inbox_get(recent.id) is not None
    # The reply to a pruned message is still sent; a failed send stays visible.
    assert {e.id for e in tables.outbox_list()} == {reply.id, gave_up.id, waiting.id}
    assert tables.prune(before=10.0) == 0
    assert tables.prune(before=1e12) == 1  # recent; nothing pending or running ever goes
    assert tables.inbox_counts() == {PENDING: 1, RUNNING: 1, ANSWERED: 0, FAILED: 0, SET_ASIDE: 0}


def test_ids_are_not_given_out_again_after_prune(store: SessionStore) -> None:
    tables = store.gateway
    entry, _ = tables.inbox_accept(WEB, "m1", "x", received_at=1.0)
    tables.inbox_finish(entry.id, ANSWERED, now=2.0)
    queued = tables.outbox_add(NewOutbound(WEB, "x"), now=2.0)
    tables.outbox_sent(queued.id, now=2.0)
    assert tables.prune(before=3.0) == 2
    assert tables.inbox_accept(WEB, "m2", "y", received_at=4.0)[0].id > entry.id
    assert tables.outbox_add(NewOutbound(WEB, "y"), now=4.0).id > queued.id


# -- damaged rows ---------------------------------------------------------------------------
def test_a_damaged_inbox_row_is_named_not_guessed(store: SessionStore, raw: RawSQL) -> None:
    tables = store.gateway
    target = session(store)
    entry, _ = tables.inbox_accept(WEB, "m1", "hello", received_at=1.0)
    fine, _ = tables.inbox_accept(WEB, "m2", "fine", received_at=1.0)
    raw(f"UPDATE {{s}}.gateway_inbox SET meta = '{{not json' WHERE id = {entry.id}")
    for read in (lambda: tables.inbox_get(entry.id), tables.inbox_unfinished):
        with pytest.raises(DamagedRow, match=rf"gateway_inbox row {entry.id}: column meta") as caught:
            read()
        assert "repair or delete" in str(caught.value) and "\n" not in str(caught.value)
    # Starting it fails and changes nothing; the other entry is unaffected.
    with pytest.raises(DamagedRow):
        tables.inbox_start(entry.id, target, now=2.0)
    raw(f"UPDATE {{s}}.gateway_inbox SET meta = '{{}}', status = 'lost' WHERE id = {entry.id}")
    with pytest.raises(DamagedRow, match=rf"gateway_inbox row {entry.id}: column status holds unknown status 'lost'"):
        tables.inbox_get(entry.id)
    with pytest.raises(DamagedRow, match=rf"gateway_inbox row {entry.id}"):
        tables.inbox_counts()
    raw(f"UPDATE {{s}}.gateway_inbox SET status = 'pending' WHERE id = {entry.id}")
    assert tables.inbox_get(entry.id) == entry  # attempts still 0: the failed start wrote nothing
    assert tables.inbox_get(fine.id) == fine


def test_a_damaged_outbox_row_is_named_not_sent(store: SessionStore, raw: RawSQL) -> None:
    tables = store.gateway
    entry = tables.outbox_add(NewOutbound(WEB, "hello"), now=1.0)
    raw(f"UPDATE {{s}}.gateway_outbox SET meta = '[1, 2]' WHERE id = {entry.id}")
    for read in (lambda: tables.outbox_due(5.0), tables.outbox_list):
        with pytest.raises(DamagedRow, match=rf"gateway_outbox row {entry.id}: column meta") as caught:
            read()
        assert isinstance(caught.value, StoreError)
    raw(f"UPDATE {{s}}.gateway_outbox SET meta = '{{}}', status = 'in flight' WHERE id = {entry.id}")
    with pytest.raises(DamagedRow, match=rf"gateway_outbox row {entry.id}: column status"):
        tables.outbox_counts()
