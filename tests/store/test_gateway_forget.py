"""``GatewayTables.forget_sessions`` on every backend: a deleted conversation's words leave the
inbox and the outbox, its unfinished entries are finished as failed, and other conversations'
entries stay as they were."""

from __future__ import annotations

from vigil.store import SessionStore
from vigil.store.gateway.gateway_tables import ANSWERED, FAILED, FORGOTTEN, PENDING, SENT, NewOutbound

from .gateway_support import SLACK, WEB


def test_forgetting_empties_the_words_and_finishes_what_waits(store: SessionStore) -> None:
    tables = store.gateway
    gone, kept = store.create_session(source="web").id, store.create_session(source="slack").id
    answered, _ = tables.inbox_accept(WEB, "m1", "my secret plan", received_at=1.0, meta={"client": "x"})
    tables.inbox_start(answered.id, gone, now=2.0)
    sent = tables.inbox_finish(answered.id, ANSWERED, now=3.0, reply=NewOutbound(WEB, "the secret answer", session_id=gone))
    assert sent is not None
    tables.outbox_sent(sent.id, now=4.0)
    waiting, _ = tables.inbox_accept(WEB, "m2", "another secret", received_at=5.0)
    tables.inbox_start(waiting.id, gone, now=6.0)
    queued = tables.outbox_add(NewOutbound(WEB, "a reply still to send", session_id=gone), now=7.0)
    other, _ = tables.inbox_accept(SLACK, "s1", "someone else's words", received_at=8.0)
    tables.inbox_start(other.id, kept, now=9.0)

    assert tables.forget_sessions([gone], now=10.0) == 4
    first, second = tables.inbox_get(answered.id), tables.inbox_get(waiting.id)
    assert first is not None and (first.text, first.status, first.meta) == ("", ANSWERED, {})
    assert second is not None and (second.text, second.status, second.error) == ("", FAILED, FORGOTTEN)
    outbox = {e.id: e for e in tables.outbox_list()}
    assert (outbox[sent.id].text, outbox[sent.id].status) == ("", SENT)
    assert (outbox[queued.id].text, outbox[queued.id].status) == ("", FAILED)
    assert tables.outbox_due(100.0) == []  # nothing of it is sent any more
    untouched = tables.inbox_get(other.id)
    assert untouched is not None and (untouched.text, untouched.status) == ("someone else's words", "running")
    assert tables.inbox_finish(waiting.id, ANSWERED, now=11.0, reply=NewOutbound(WEB, "late")) is None
    assert tables.forget_sessions([], now=12.0) == 0
    assert [e.id for e in tables.inbox_unfinished()] == [other.id]
    assert tables.inbox_get(other.id).status != PENDING  # type: ignore[union-attr]
