"""The ``PairingTables`` contract (``store.pairing``): pairing codes, paired users and the rate
limits, the same on every backend, through the protocol only (raw SQL only to damage a row).

PostgreSQL runs in a fresh schema per test (the shared contract schema is not emptied of these
tables) and is skipped, saying why, where no server answers."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import Iterator

import pytest

from vigil.clock import FakeClock
from vigil.store import SessionStore
from vigil.store.errors import DamagedRow
from vigil.store.gateway.pairing_tables import (
    APPROVED,
    DENIED,
    EXISTING,
    EXPIRED,
    FULL,
    ISSUED,
    LIMITED,
    LOCKED,
    WRONG,
    Limits,
)
from vigil.store.sqlite import SQLiteStore

from .gateway_support import raw_sql_for

LIMITS = Limits()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    if request.param == "sqlite":
        opened: SessionStore = SQLiteStore(tmp_path / "state.db", clock=FakeClock())
    else:
        from vigil.store.postgres import PostgresStore

        opened = PostgresStore(request.getfixturevalue("pg_url"), clock=FakeClock())
    yield opened
    opened.close()


def digest(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


def ask(store: SessionStore, user: str, *, now: float, code: str | None = None, platform: str = "telegram"):
    return store.pairing.request_code(
        platform, user, display_name=f"name of {user}", chat=f"chat-{user}", thread="", user_key="",
        code_hash=digest(code or f"code-{user}-{now}"), nonce=f"nonce-{user}-{now}", now=now,
    )


def test_a_code_is_issued_listed_approved_once_and_the_user_paired(store: SessionStore) -> None:
    asked = ask(store, "42", now=100.0, code="K7QM3XPA")
    assert asked.outcome == ISSUED and asked.code is not None
    assert asked.code.expires_at == 100.0 + LIMITS.code_ttl and asked.code.chat == "chat-42"
    assert [c.user_id for c in store.pairing.pending(now=101.0)] == ["42"]
    assert store.pairing.user("telegram", "42") is None

    decided = store.pairing.approve(digest("K7QM3XPA"), by="owner@host", now=200.0)
    assert decided.outcome == APPROVED and decided.user is not None
    assert decided.user.active and decided.user.approved_by == "owner@host" and decided.user.display_name == "name of 42"
    assert store.pairing.user("telegram", "42") == decided.user
    assert store.pairing.pending(now=201.0) == []
    assert store.pairing.approve(digest("K7QM3XPA"), by="owner", now=201.0).outcome == WRONG  # used up


def test_asking_again_returns_the_pending_code_and_never_replaces_it(store: SessionStore) -> None:
    first = ask(store, "42", now=100.0)
    again = ask(store, "42", now=160.0)
    assert again.outcome == EXISTING and again.code == first.code and again.requests == 2
    later = ask(store, "42", now=100.0 + LIMITS.code_ttl + 1)  # the first expired: a new one
    assert later.outcome == ISSUED and later.code is not None and later.code.code_hash != first.code.code_hash


def test_a_platform_has_at_most_three_pending_codes(store: SessionStore) -> None:
    for user in ("1", "2", "3"):
        assert ask(store, user, now=100.0).outcome == ISSUED
    assert ask(store, "4", now=101.0).outcome == FULL
    assert ask(store, "4", now=101.0, platform="slack").outcome == ISSUED  # per platform
    assert store.pairing.deny(digest("code-1-100.0"), now=102.0).outcome == DENIED
    assert ask(store, "4", now=103.0).outcome == ISSUED
    assert {c.user_id for c in store.pairing.pending(now=104.0) if c.platform == "telegram"} == {"2", "3", "4"}


def test_a_user_asking_too_often_is_limited_and_a_flood_writes_nothing_more(store: SessionStore) -> None:
    outcomes = [ask(store, "42", now=100.0 + i) for i in range(LIMITS.max_requests + 3)]
    assert [o.outcome for o in outcomes[: LIMITS.max_requests]] == [ISSUED] + [EXISTING] * (LIMITS.max_requests - 1)
    assert [o.outcome for o in outcomes[LIMITS.max_requests :]] == [LIMITED] * 3
    # the first one past the limit is told so (requests == max + 1); later ones are not written
    assert [o.requests for o in outcomes[LIMITS.max_requests :]] == [LIMITS.max_requests + 1] + [LIMITS.max_requests + 2] * 2
    assert ask(store, "other", now=110.0).outcome == ISSUED  # per user
    assert ask(store, "42", now=100.0 + LIMITS.request_window + 1).outcome == EXISTING  # the window passed


def test_five_wrong_codes_lock_approvals_even_of_a_right_code_until_the_window_passes(store: SessionStore) -> None:
    ask(store, "42", now=100.0, code="K7QM3XPA")
    for i in range(LIMITS.max_wrong):
        decided = store.pairing.approve(digest(f"WRONG{i}"), by="owner", now=200.0 + i)
        assert decided.outcome == WRONG and decided.wrong == i + 1
    assert decided.locked_until == 200.0 + LIMITS.wrong_window
    locked = store.pairing.approve(digest("K7QM3XPA"), by="owner", now=300.0)
    assert locked.outcome == LOCKED and locked.locked_until == 200.0 + LIMITS.wrong_window
    assert store.pairing.deny(digest("K7QM3XPA"), now=300.0).outcome == LOCKED
    assert store.pairing.lock_state(now=300.0).outcome == LOCKED
    assert store.pairing.user("telegram", "42") is None
    # the oldest wrong code leaves the window: one more try is allowed
    assert store.pairing.lock_state(now=200.0 + LIMITS.wrong_window + 0.5).outcome == APPROVED
    assert store.pairing.approve(digest("K7QM3XPA"), by="owner", now=200.0 + LIMITS.wrong_window + 0.5).outcome == APPROVED


def test_an_expired_code_is_refused_and_not_counted_as_wrong(store: SessionStore) -> None:
    ask(store, "42", now=100.0, code="K7QM3XPA")
    decided = store.pairing.approve(digest("K7QM3XPA"), by="owner", now=100.0 + LIMITS.code_ttl)
    assert decided.outcome == EXPIRED and decided.code is not None and decided.wrong == 0
    assert store.pairing.user("telegram", "42") is None
    assert store.pairing.pending(now=100.0 + LIMITS.code_ttl) == []


def test_revoking_keeps_the_record_and_approving_again_restores_it(store: SessionStore) -> None:
    ask(store, "42", now=100.0, code="K7QM3XPA")
    store.pairing.approve(digest("K7QM3XPA"), by="owner", now=110.0)
    revoked = store.pairing.revoke("telegram", "42", by="owner", now=120.0)
    assert revoked is not None and not revoked.active and revoked.revoked_at == 120.0
    assert store.pairing.revoke("telegram", "42", by="someone", now=130.0) == revoked  # unchanged
    assert store.pairing.revoke("telegram", "nobody", by="owner", now=130.0) is None
    assert [u.user_id for u in store.pairing.users()] == ["42"]
    ask(store, "42", now=140.0, code="ABCDEFGH")
    assert store.pairing.approve(digest("ABCDEFGH"), by="owner", now=150.0).user.active  # type: ignore[union-attr]


def test_revoking_a_paired_user_deletes_their_pending_code_and_an_unpaired_one_writes_nothing(store: SessionStore) -> None:
    ask(store, "42", now=100.0, code="K7QM3XPA")
    assert store.pairing.revoke("telegram", "42", by="owner", now=110.0) is None  # never paired
    assert [c.user_id for c in store.pairing.pending(now=111.0)] == ["42"]
    store.pairing.approve(digest("K7QM3XPA"), by="owner", now=112.0)
    store.pairing.revoke("telegram", "42", by="owner", now=113.0)
    ask(store, "42", now=114.0, code="ABCDEFGH")  # revoked, asks again, is revoked again: no change
    assert store.pairing.revoke("telegram", "42", by="owner", now=115.0).revoked_at == 113.0  # type: ignore[union-attr]
    assert [c.user_id for c in store.pairing.pending(now=116.0)] == ["42"]


def test_speakers_are_recorded_once_per_chat_in_order(store: SessionStore) -> None:
    for user, now in (("alice", 1.0), ("bob", 2.0), ("alice", 3.0)):
        store.pairing.speak("telegram", "group", "", user, now=now)
    store.pairing.speak("telegram", "group", "topic", "carol", now=4.0)
    assert store.pairing.speakers("telegram", "group", "") == ["alice", "bob"]
    assert store.pairing.speakers("telegram", "group", "topic") == ["carol"]
    assert store.pairing.speakers("slack", "group", "") == []


@pytest.mark.parametrize("bad", ["", "x" * 300, "a\nb", "\x00"])
def test_ids_the_store_cannot_hold_are_refused_and_write_nothing(store: SessionStore, bad: str) -> None:
    with pytest.raises(ValueError):
        ask(store, bad, now=1.0)
    with pytest.raises(ValueError):
        store.pairing.revoke("telegram", bad, by="owner", now=1.0)
    with pytest.raises(ValueError):
        store.pairing.approve("not a hash", by="owner", now=1.0)
    assert store.pairing.pending(now=0.0) == [] and store.pairing.users() == []
    assert store.pairing.lock_state(now=1.0).wrong == 0


def test_a_damaged_row_is_reported_by_table_and_user(store: SessionStore, request: pytest.FixtureRequest) -> None:
    ask(store, "42", now=100.0, code="K7QM3XPA")
    store.pairing.approve(digest("K7QM3XPA"), by="owner", now=110.0)
    ask(store, "43", now=120.0)
    raw = raw_sql_for(store, request)
    if isinstance(store, SQLiteStore):
        raw("UPDATE {s}.pairing_users SET revoked_at = 'yesterday'; UPDATE {s}.pairing_codes SET nonce = x'00ff'")
    else:
        raw("ALTER TABLE {s}.pairing_users ALTER COLUMN revoked_at TYPE text;"
            " UPDATE {s}.pairing_users SET revoked_at = 'yesterday'")
    with pytest.raises(DamagedRow, match=r"pairing_users row telegram/42: column revoked_at holds 'yesterday'"):
        store.pairing.user("telegram", "42")
    with pytest.raises(DamagedRow, match="repair or delete this row"):
        store.pairing.users()
    if isinstance(store, SQLiteStore):
        with pytest.raises(DamagedRow, match=r"pairing_codes row telegram/43: column nonce"):
            store.pairing.pending(now=121.0)


def test_concurrent_requests_never_exceed_the_pending_limit(store: SessionStore) -> None:
    results: list[str] = []
    errors: list[BaseException] = []

    def one(user: str) -> None:
        try:
            results.append(ask(store, user, now=100.0).outcome)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(str(i),)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert sorted(results) == sorted([ISSUED] * 3 + [FULL] * 5)
    assert len(store.pairing.pending(now=101.0)) == 3


def test_any_user_id_is_stored_exactly_or_refused_whole(tmp_path: Path) -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    opened = SQLiteStore(tmp_path / "fuzz.db", durable=False)
    roomy = Limits(max_pending=10**9, max_requests=10**9)
    seen: set[str] = set()

    @settings(max_examples=200, deadline=None)
    @given(user=st.text(max_size=300), name=st.text(max_size=300))
    def one(user: str, name: str) -> None:
        try:
            asked = opened.pairing.request_code(
                "fuzz", user, display_name=name, chat=user, thread="", user_key="",
                code_hash=digest(user), nonce="n", now=1.0, limits=roomy,
            )
        except (TypeError, ValueError):
            assert all(c.user_id != user for c in opened.pairing.pending(now=0.0))
            return
        seen.add(user)
        assert asked.code is not None and asked.code.user_id == user and asked.code.chat == user
        assert len(asked.code.display_name) <= 200 and all(ord(c) >= 32 for c in asked.code.display_name)
        assert opened.pairing.revoke("fuzz", user, by="fuzz", now=2.0) is None

    try:
        one()
        assert {c.user_id for c in opened.pairing.pending(now=0.0)} == seen
    finally:
        opened.close()
