"""Random sequences of gateway table operations, on every backend, against a plain Python model
of what the tables should then hold: every answer and every later read must agree with it."""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vigil.clock import FakeClock
from vigil.store import SessionStore
from vigil.store.gateway.gateway_tables import (
    ANSWERED,
    FAILED,
    INBOX_STATUSES,
    OUTBOX_KINDS,
    OUTBOX_STATUSES,
    PENDING,
    RUNNING,
    SENT,
    InboxEntry,
    NewOutbound,
    OutboxEntry,
    RouteKey,
)
from vigil.store.sqlite import SQLiteStore

from .conftest import BACKENDS, empty_schema

ROUTES = [
    RouteKey("web", "a"),
    RouteKey("web", "a", thread="t"),
    RouteKey("telegram", "a"),
    RouteKey("telegram", "a", user="u"),
]
SESSIONS = ["aaaaaaaaaaa1", "aaaaaaaaaaa2"]
EXTERNAL_IDS = ["m1", "m2", "m3", "m4"]
NEVER_ISSUED = 10**12

_route = st.sampled_from(ROUTES)
_session = st.sampled_from(SESSIONS)
_pick = st.integers(0, 1000)  # one of the ids issued so far, or one never issued (see Model.pick)
_tick = st.tuples(st.just("tick"), st.integers(1, 20))
# Routes set, re-pointed and set again at later times decide the order of routes_of, so
# each setting moves the clock on by 0 to 2 seconds first.
_route_set = st.tuples(st.just("route_set"), _route, _session, st.integers(0, 2))
ROUTE_OPERATIONS = st.one_of(
    _route_set,
    st.tuples(st.just("route_delete"), _route),
    st.tuples(st.just("recreate_session"), _session),
)
MESSAGE_OPERATIONS = st.one_of(
    st.tuples(st.just("accept"), _route, st.sampled_from(EXTERNAL_IDS), st.text(max_size=5)),
    st.tuples(st.just("start"), _pick, _session),
    st.tuples(st.just("finish"), _pick, st.sampled_from([ANSWERED, FAILED]), st.booleans()),
    st.tuples(st.just("outbox_add"), _route, st.sampled_from(OUTBOX_KINDS)),
    st.tuples(st.just("sent"), _pick),
    st.tuples(st.just("retry"), _pick, st.integers(1, 30)),
    st.tuples(st.just("fail"), _pick),
    st.tuples(st.just("prune"), st.integers(-1, 25)),  # how long ago "before" is
    _tick,
)


@dataclasses.dataclass
class Model:
    """What the tables should hold: plain dicts, with the transitions the protocol describes."""

    now: float = 1000.0
    routes: dict[RouteKey, str] = dataclasses.field(default_factory=dict)
    route_order: dict[RouteKey, tuple[float, int]] = dataclasses.field(default_factory=dict)
    created: int = 0
    inbox: dict[int, InboxEntry] = dataclasses.field(default_factory=dict)
    outbox: dict[int, OutboxEntry] = dataclasses.field(default_factory=dict)
    issued_inbox: list[int] = dataclasses.field(default_factory=list)
    issued_outbox: list[int] = dataclasses.field(default_factory=list)

    def pick(self, issued: list[int], index: int) -> int:
        index %= len(issued) + 1
        return issued[index] if index < len(issued) else NEVER_ISSUED

    def route_set(self, key: RouteKey, session_id: str) -> None:
        if key not in self.routes:
            self.created += 1
            self.route_order[key] = (self.now, self.created)
        self.routes[key] = session_id

    def route_delete(self, key: RouteKey) -> bool:
        self.route_order.pop(key, None)
        return self.routes.pop(key, None) is not None

    def session_deleted(self, session_id: str) -> None:
        for key in [k for k, s in self.routes.items() if s == session_id]:
            self.route_delete(key)

    def routes_of(self, session_id: str) -> list[RouteKey]:
        return sorted((k for k, s in self.routes.items() if s == session_id), key=self.route_order.__getitem__)

    def unfinished(self) -> list[InboxEntry]:
        return [e for _, e in sorted(self.inbox.items()) if e.status in (PENDING, RUNNING)]

    def counts(self, entries: Any, statuses: tuple[str, ...]) -> dict[str, int]:
        counts = dict.fromkeys(statuses, 0)
        for entry in entries:
            counts[entry.status] += 1
        return counts


def apply(store: SessionStore, model: Model, op: tuple[Any, ...]) -> None:
    """Run one operation on the store and the model; the store's answer must be the model's."""
    tables, name, args = store.gateway, op[0], op[1:]
    if name == "route_set":
        model.now += args[2]
        tables.route_set(args[0], args[1], now=model.now)
        model.route_set(args[0], args[1])
    elif name == "route_delete":
        assert tables.route_delete(args[0]) is model.route_delete(args[0])
    elif name == "recreate_session":
        store.delete_session(args[0])
        store.create_session(source="gateway", session_id=args[0])
        model.session_deleted(args[0])
    elif name == "accept":
        route, external_id, text = args
        entry, new = tables.inbox_accept(route, external_id, text, received_at=model.now)
        stored = [e for e in model.inbox.values() if (e.route.adapter, e.external_id) == (route.adapter, external_id)]
        if stored:
            assert (entry, new) == (stored[0], False)
        else:
            assert new is True and all(entry.id > issued for issued in model.issued_inbox)
            expected = InboxEntry(entry.id, route, external_id, text, "", model.now, PENDING, None, 0)
            assert entry == expected
            model.inbox[entry.id] = expected
            model.issued_inbox.append(entry.id)
    elif name == "start":
        entry_id = model.pick(model.issued_inbox, args[0])
        before = model.inbox.get(entry_id)
        if before is None:
            with pytest.raises(KeyError):
                tables.inbox_start(entry_id, args[1], now=model.now)
            return
        if before.status in (PENDING, RUNNING):
            model.inbox[entry_id] = dataclasses.replace(
                before, status=RUNNING, session_id=args[1], attempts=before.attempts + 1, started_at=model.now
            )
        assert tables.inbox_start(entry_id, args[1], now=model.now) == model.inbox[entry_id]
    elif name == "finish":
        entry_id = model.pick(model.issued_inbox, args[0])
        status, with_reply = args[1], args[2]
        reply = NewOutbound(ROUTES[0], f"reply to {entry_id}") if with_reply else None
        error = "it broke" if status == FAILED else None
        before = model.inbox.get(entry_id)
        if before is None:
            with pytest.raises(KeyError):
                tables.inbox_finish(entry_id, status, now=model.now, error=error, reply=reply)
            return
        queued = tables.inbox_finish(entry_id, status, now=model.now, error=error, reply=reply)
        if before.status not in (PENDING, RUNNING):
            assert queued is None
            return
        model.inbox[entry_id] = dataclasses.replace(before, status=status, finished_at=model.now, error=error)
        if reply is None:
            assert queued is None
            return
        assert queued is not None and queued.id not in model.issued_outbox
        expected = OutboxEntry(
            queued.id, reply.route, "reply", reply.text, before.session_id, entry_id,
            model.now, PENDING, 0, model.now,
        )  # fmt: skip
        assert queued == expected
        model.outbox[queued.id] = expected
        model.issued_outbox.append(queued.id)
    elif name == "outbox_add":
        added = tables.outbox_add(NewOutbound(args[0], "notice text", kind=args[1]), now=model.now)
        assert all(added.id > issued for issued in model.issued_outbox)
        expected = OutboxEntry(added.id, args[0], args[1], "notice text", None, None, model.now, PENDING, 0, model.now)
        assert added == expected
        model.outbox[added.id] = expected
        model.issued_outbox.append(added.id)
    elif name in ("sent", "retry", "fail"):
        entry_id = model.pick(model.issued_outbox, args[0])
        before_out = model.outbox.get(entry_id)
        call: Callable[[], None] = {
            "sent": lambda: tables.outbox_sent(entry_id, now=model.now),
            "retry": lambda: tables.outbox_retry(entry_id, error="502", next_attempt_at=model.now + args[-1]),
            "fail": lambda: tables.outbox_fail(entry_id, error="403", now=model.now),
        }[name]
        if before_out is None:
            with pytest.raises(KeyError):
                call()
            return
        call()
        if before_out.status == PENDING:
            tried = dataclasses.replace(before_out, attempts=before_out.attempts + 1)
            model.outbox[entry_id] = {
                "sent": lambda: dataclasses.replace(tried, status=SENT, sent_at=model.now),
                "retry": lambda: dataclasses.replace(tried, last_error="502", next_attempt_at=model.now + args[-1]),
                "fail": lambda: dataclasses.replace(tried, status=FAILED, last_error="403", failed_at=model.now),
            }[name]()
    elif name == "prune":
        before_time = model.now - args[0]
        gone_in = [i for i, e in model.inbox.items() if e.status in (ANSWERED, FAILED) and e.finished_at < before_time]  # type: ignore[operator]
        gone_out = [i for i, e in model.outbox.items() if e.status == SENT and e.sent_at < before_time]  # type: ignore[operator]
        assert tables.prune(before_time) == len(gone_in) + len(gone_out)
        for i in gone_in:
            del model.inbox[i]
        for i in gone_out:
            del model.outbox[i]
    elif name == "tick":
        model.now += args[0]
    else:
        raise AssertionError(f"unknown operation {name}")


def check_routes(store: SessionStore, model: Model) -> None:
    for key in ROUTES:
        assert store.gateway.route_get(key) == model.routes.get(key)
    for session_id in SESSIONS:
        assert store.gateway.routes_of(session_id) == model.routes_of(session_id)


def check_lists(store: SessionStore, model: Model) -> None:
    """The reads the gateway makes all the time: cheap enough after every operation."""
    tables = store.gateway
    assert tables.inbox_unfinished() == model.unfinished()
    assert tables.outbox_list(limit=1000) == [e for _, e in sorted(model.outbox.items(), reverse=True)]
    due = [e for _, e in sorted(model.outbox.items()) if e.status == PENDING and e.next_attempt_at <= model.now]
    assert tables.outbox_due(model.now) == due


def check_everything(store: SessionStore, model: Model) -> None:
    tables = store.gateway
    check_lists(store, model)
    for entry_id in model.issued_inbox:
        assert tables.inbox_get(entry_id) == model.inbox.get(entry_id)
    assert tables.inbox_counts() == model.counts(model.inbox.values(), INBOX_STATUSES)
    assert tables.outbox_counts() == model.counts(model.outbox.values(), OUTBOX_STATUSES)
    pending = [e.next_attempt_at for e in model.outbox.values() if e.status == PENDING]
    assert tables.outbox_next_due() == (min(pending) if pending else None)


@pytest.fixture(params=BACKENDS)
def fresh_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], SessionStore]]:
    """A store with nothing in it but the sessions, new for every example hypothesis runs."""
    opened: list[SessionStore] = []
    if request.param == "postgres":
        # Opened here, not inside an example: the connection pool draws on the global random
        # state, which hypothesis wants its examples to leave alone.
        from vigil.store.postgres import PostgresStore

        url = request.getfixturevalue("pg_clean_url")
        opened.append(PostgresStore(url, clock=FakeClock()))
        opened[0].schema_version()

    def fresh() -> SessionStore:
        if request.param == "sqlite":
            while opened:
                opened.pop().close()
            opened.append(SQLiteStore(tmp_path / f"{uuid.uuid4().hex}.db", clock=FakeClock()))
        else:
            empty_schema(request.getfixturevalue("postgres_server"), url.rpartition("schema=")[2])
        store = opened[0]
        for session_id in SESSIONS:
            store.create_session(source="gateway", session_id=session_id)
        return store

    yield fresh
    for store in opened:
        store.close()


_EXAMPLES = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@_EXAMPLES
@given(operations=st.lists(ROUTE_OPERATIONS, min_size=5, max_size=40))
def test_random_route_operations_agree_with_the_model(
    fresh_store: Callable[[], SessionStore], operations: list[tuple[Any, ...]]
) -> None:
    store, model = fresh_store(), Model()
    for op in operations:
        apply(store, model, op)
        check_routes(store, model)


@_EXAMPLES
@given(operations=st.lists(MESSAGE_OPERATIONS, min_size=15, max_size=60))
def test_random_inbox_and_outbox_operations_agree_with_the_model(
    fresh_store: Callable[[], SessionStore], operations: list[tuple[Any, ...]]
) -> None:
    store, model = fresh_store(), Model()
    for op in operations:
        apply(store, model, op)
        check_lists(store, model)
    check_everything(store, model)
