"""The outbox claims of the ``GatewayTables`` contract (``outbox_claim``): gateways sharing one
store each send only what they claimed, a chat's replies in order, and what a dead worker
claimed is sent by another once its claim lapses. Every backend, through the protocol only
(raw SQL only to damage a row). Claimers racing on PostgreSQL: test_gateway_concurrency."""

from __future__ import annotations

import pytest

from vigil.store import SessionStore
from vigil.store.errors import DamagedRow
from vigil.store.gateway.gateway_tables import FAILED, PENDING, SENT, NewOutbound

from .gateway_support import SLACK, TELEGRAM_GROUP, WEB, RawSQL, raw_sql_for


@pytest.fixture
def raw(store: SessionStore, request: pytest.FixtureRequest) -> RawSQL:
    return raw_sql_for(store, request)


def texts(entries: list) -> list[str]:
    return [entry.text for entry in entries]


def test_a_claim_hands_out_due_entries_once_until_it_lapses(store: SessionStore) -> None:
    tables = store.gateway
    web = tables.outbox_add(NewOutbound(WEB, "web reply"), now=10.0)
    slack = tables.outbox_add(NewOutbound(SLACK, "slack reply"), now=11.0)
    tables.outbox_add(NewOutbound(TELEGRAM_GROUP, "not due yet"), now=50.0)
    claimed = tables.outbox_claim("worker-a", 20.0, limit=10, hold=30.0)
    assert [(e.id, e.claimed_by, e.claim_until) for e in claimed] == [
        (web.id, "worker-a", 50.0), (slack.id, "worker-a", 50.0)
    ]
    assert tables.outbox_claim("worker-b", 21.0, limit=10, hold=30.0) == []
    assert texts(tables.outbox_due(21.0)) == ["web reply", "slack reply"]  # still pending, claimed
    # worker-a dies; at 50 its claims have lapsed and worker-b takes them, with the new one.
    taken = tables.outbox_claim("worker-b", 50.0, limit=10, hold=30.0)
    assert texts(taken) == ["web reply", "slack reply", "not due yet"]
    assert {(e.claimed_by, e.claim_until) for e in taken} == {("worker-b", 80.0)}
    assert (taken[0].attempts, taken[0].status) == (0, PENDING)  # a claim is not a try


def test_a_workers_own_claims_come_back_renewed(store: SessionStore) -> None:
    tables = store.gateway
    tables.outbox_add(NewOutbound(WEB, "one"), now=1.0)
    first = tables.outbox_claim("worker-a", 2.0, limit=10, hold=10.0)
    tables.outbox_add(NewOutbound(SLACK, "two"), now=3.0)
    again = tables.outbox_claim("worker-a", 5.0, limit=10, hold=10.0)
    assert texts(again) == ["one", "two"] and first[0].claim_until == 12.0
    assert {e.claim_until for e in again} == {15.0}


def test_sent_retry_and_fail_clear_the_claim(store: SessionStore) -> None:
    tables = store.gateway
    sent, retried, failed = (tables.outbox_add(NewOutbound(r, t), now=1.0) for r, t in (
        (WEB, "sent"), (SLACK, "retried"), (TELEGRAM_GROUP, "failed")
    ))
    assert len(tables.outbox_claim("worker-a", 2.0, limit=10, hold=100.0)) == 3
    tables.outbox_sent(sent.id, now=3.0)
    tables.outbox_retry(retried.id, error="HTTP 502", next_attempt_at=5.0)
    tables.outbox_fail(failed.id, error="HTTP 403", now=3.0)
    by_text = {e.text: e for e in tables.outbox_list()}
    assert {(e.claimed_by, e.claim_until) for e in by_text.values()} == {(None, None)}
    # The retried one is anybody's once due, long before worker-a's claim would have lapsed.
    assert tables.outbox_claim("worker-b", 4.0, limit=10, hold=100.0) == []
    [again] = tables.outbox_claim("worker-b", 5.0, limit=10, hold=100.0)
    assert (again.id, again.attempts, again.claimed_by) == (retried.id, 1, "worker-b")
    assert tables.outbox_counts() == {PENDING: 1, SENT: 1, FAILED: 1}


def test_releasing_a_gone_workers_claims_makes_its_pending_replies_claimable_now(store: SessionStore) -> None:
    tables = store.gateway
    for route, text in ((WEB, "one"), (SLACK, "two"), (TELEGRAM_GROUP, "three")):
        tables.outbox_add(NewOutbound(route, text), now=1.0)
    sent, *_ = tables.outbox_claim("worker-a", 2.0, limit=10, hold=100.0)
    tables.outbox_sent(sent.id, now=3.0)
    assert tables.outbox_claim("worker-b", 4.0, limit=10, hold=100.0) == []  # held by worker-a
    assert tables.outbox_release(["worker-c", "worker-a"]) == 2
    taken = tables.outbox_claim("worker-b", 4.0, limit=10, hold=100.0)
    assert texts(taken) == ["two", "three"] and {e.claimed_by for e in taken} == {"worker-b"}
    assert tables.outbox_release(["worker-a"]) == 0  # worker-b's claims are its own
    before = tables.outbox_list()
    for bad in ([""], [None], [3]):
        with pytest.raises((TypeError, ValueError)):
            tables.outbox_release(bad)  # type: ignore[arg-type]
    assert tables.outbox_list() == before


def test_a_chats_replies_are_claimed_in_order_by_one_worker(store: SessionStore) -> None:
    """One chat's replies never go out of order, whichever worker sends them: a reply waits
    while an older one to its chat is claimed by another worker or waits for its retry."""
    tables = store.gateway
    first = tables.outbox_add(NewOutbound(WEB, "first"), now=1.0)
    elsewhere = tables.outbox_add(NewOutbound(SLACK, "elsewhere"), now=1.0)
    assert texts(tables.outbox_claim("worker-a", 2.0, limit=1, hold=10.0)) == ["first"]
    tables.outbox_add(NewOutbound(WEB, "second"), now=3.0)
    assert texts(tables.outbox_claim("worker-b", 3.0, limit=10, hold=10.0)) == ["elsewhere"]
    tables.outbox_sent(elsewhere.id, now=3.0)
    assert texts(tables.outbox_claim("worker-a", 3.0, limit=10, hold=10.0)) == ["first", "second"]
    # The first fails and waits for its retry: the second waits behind it, for everyone.
    tables.outbox_retry(first.id, error="HTTP 429", next_attempt_at=8.0)
    assert tables.outbox_claim("worker-b", 4.0, limit=10, hold=10.0) == []
    assert tables.outbox_claim("worker-a", 4.0, limit=10, hold=10.0) == []
    assert texts(tables.outbox_claim("worker-b", 8.0, limit=10, hold=10.0)) == ["first", "second"]
    tables.outbox_sent(first.id, now=9.0)
    # worker-b still holds the second: worker-a gets nothing until that claim lapses at 18.
    assert tables.outbox_claim("worker-a", 17.0, limit=10, hold=10.0) == []
    assert texts(tables.outbox_claim("worker-a", 18.0, limit=10, hold=10.0)) == ["second"]


def test_next_due_for_a_worker_counts_claims_lapsing(store: SessionStore) -> None:
    tables = store.gateway
    assert tables.outbox_next_due(worker="worker-a") is None
    first = tables.outbox_add(NewOutbound(WEB, "first"), now=10.0)
    tables.outbox_add(NewOutbound(WEB, "second"), now=11.0)
    tables.outbox_add(NewOutbound(SLACK, "later"), now=40.0)
    tables.outbox_claim("worker-a", 12.0, limit=1, hold=20.0)  # the first, until 32
    assert tables.outbox_next_due() == 10.0  # claims aside: the earliest next attempt
    assert tables.outbox_next_due(worker="worker-a") == 10.0  # its own claim: claimable now
    # For worker-b the web chat waits for worker-a's claim on its first reply to lapse.
    assert tables.outbox_next_due(worker="worker-b") == 32.0
    tables.outbox_retry(first.id, error="HTTP 502", next_attempt_at=35.0)
    assert tables.outbox_next_due(worker="worker-b") == 35.0  # the second waits behind it
    tables.outbox_sent(first.id, now=36.0)
    assert tables.outbox_next_due(worker="worker-b") == 11.0
    assert tables.outbox_claim("worker-b", 36.0, limit=10, hold=20.0)[0].text == "second"
    assert tables.outbox_next_due(worker="worker-a") == 40.0


def test_a_limit_of_zero_claims_nothing_and_bad_arguments_write_nothing(store: SessionStore) -> None:
    tables = store.gateway
    entry = tables.outbox_add(NewOutbound(WEB, "x"), now=1.0)
    assert tables.outbox_claim("worker-a", 2.0, limit=0, hold=10.0) == []
    for bad, error in (
        (lambda: tables.outbox_claim("", 2.0, limit=10, hold=10.0), ValueError),
        (lambda: tables.outbox_claim(None, 2.0, limit=10, hold=10.0), TypeError),  # type: ignore[arg-type]
        (lambda: tables.outbox_claim("w", 2.0, limit=-1, hold=10.0), ValueError),
        (lambda: tables.outbox_claim("w", 2.0, limit=10, hold=0.0), ValueError),
        (lambda: tables.outbox_claim("w", 2.0, limit=10, hold=float("inf")), ValueError),
        (lambda: tables.outbox_claim("w", 2.0, limit=10, hold="10"), TypeError),  # type: ignore[arg-type]
        (lambda: tables.outbox_next_due(worker=""), ValueError),
    ):
        with pytest.raises(error):
            bad()
    assert tables.outbox_list() == [entry]


def test_claiming_a_damaged_row_names_it_and_claims_nothing(store: SessionStore, raw: RawSQL) -> None:
    tables = store.gateway
    fine = tables.outbox_add(NewOutbound(SLACK, "fine"), now=1.0)
    damaged = tables.outbox_add(NewOutbound(WEB, "hello"), now=1.0)
    raw(f"UPDATE {{s}}.gateway_outbox SET meta = '[1, 2]' WHERE id = {damaged.id}")
    with pytest.raises(DamagedRow, match=rf"gateway_outbox row {damaged.id}: column meta"):
        tables.outbox_claim("worker-a", 2.0, limit=10, hold=10.0)
    raw(f"UPDATE {{s}}.gateway_outbox SET meta = '{{}}' WHERE id = {damaged.id}")
    assert tables.outbox_list() == [damaged, fine]  # neither claimed: the claim rolled back
