"""Pairing codes and paired users in the PostgreSQL store (``PairingTables``).

Each method is one transaction from the store's pool. A write first takes a transaction-level
advisory lock on the schema's pairing tables, so two gateways (or a gateway and ``vigil
pairing approve``) cannot both count three pending codes and each add one. The transactions
themselves are in :mod:`vigil.store.gateway.pairing_rows`, shared with SQLite.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence, TypeVar

import psycopg

from vigil.store.gateway import pairing_rows as rows
from vigil.store.gateway.pairing_tables import CodeDecision, CodeRequest, Limits, PairedUser, PendingCode
from vigil.store.postgres.conn import Database

T = TypeVar("T")

_LOCK_CLASS = 0x76706169  # "vpai": apart from the migrations' lock class
_CODE_COLUMNS = rows.CODE_COLUMNS
_USER_COLUMNS = rows.USER_COLUMNS


class PostgresPairingTables:
    """``PairingTables`` in one PostgreSQL store's schema (``PostgresStore.pairing``)."""

    def __init__(self, db: Database, schema: str) -> None:
        self._db = db
        self._schema = schema

    def _executor(self, conn: psycopg.Connection[Any]) -> rows.Exec:
        def x(statement: str, params: Sequence[Any]) -> list[Any]:
            cursor = self._db.run(conn, statement.replace("?", "%s"), params)
            return cursor.fetchall() if cursor.description is not None else []

        return x

    def _write(self, work: Callable[[rows.Exec], T]) -> T:
        with self._db.write() as conn:
            conn.execute(
                "SELECT pg_catalog.pg_advisory_xact_lock(%s::int4, pg_catalog.hashtext(%s))",
                (_LOCK_CLASS, self._schema),
            )
            return work(self._executor(conn))

    def _read(self, statement: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._db.read() as conn:
            return self._executor(conn)(statement, params)

    def request_code(
        self,
        platform: str,
        user_id: str,
        *,
        display_name: str,
        chat: str,
        thread: str,
        user_key: str,
        code_hash: str,
        nonce: str,
        now: float,
        limits: Limits = Limits(),
    ) -> CodeRequest:
        platform, user_id = rows.check_key(platform, user_id)
        name = rows.clean_name(display_name)
        where = (rows.check_text(chat, "chat"), rows.check_text(thread, "thread"), rows.check_text(user_key, "user_key"))
        digest, seed = rows.check_hash(code_hash), rows.check_text(nonce, "nonce")
        return self._write(lambda x: rows.request_code(
            x, platform, user_id, display_name=name, chat=where[0], thread=where[1], user_key=where[2],
            code_hash=digest, nonce=seed, now=now, limits=limits,
        ))

    def approve(self, code_hash: str, *, by: str, now: float, limits: Limits = Limits()) -> CodeDecision:
        digest, who = rows.check_hash(code_hash), rows.clean_name(by)
        return self._write(lambda x: rows.decide(x, digest, approve=True, by=who, now=now, limits=limits))

    def deny(self, code_hash: str, *, now: float, limits: Limits = Limits()) -> CodeDecision:
        digest = rows.check_hash(code_hash)
        return self._write(lambda x: rows.decide(x, digest, approve=False, by="", now=now, limits=limits))

    def lock_state(self, *, now: float, limits: Limits = Limits()) -> CodeDecision:
        with self._db.read() as conn:
            return rows.lock_state(self._executor(conn), now, limits)

    def user(self, platform: str, user_id: str) -> PairedUser | None:
        platform, user_id = rows.check_key(platform, user_id)
        found = self._read(
            f"SELECT {_USER_COLUMNS} FROM {{s}}.pairing_users WHERE platform = ? AND user_id = ?", (platform, user_id)
        )
        return rows.user_from_row(found[0]) if found else None

    def pending(self, *, now: float) -> list[PendingCode]:
        found = self._read(
            f"SELECT {_CODE_COLUMNS} FROM {{s}}.pairing_codes WHERE expires_at > ? ORDER BY created_at, platform, user_id",
            (now,),
        )
        return [rows.code_from_row(row) for row in found]

    def users(self) -> list[PairedUser]:
        found = self._read(f"SELECT {_USER_COLUMNS} FROM {{s}}.pairing_users ORDER BY platform, approved_at, user_id")
        return [rows.user_from_row(row) for row in found]

    def revoke(self, platform: str, user_id: str, *, by: str, now: float) -> PairedUser | None:
        platform, user_id = rows.check_key(platform, user_id)
        who = rows.clean_name(by)
        return self._write(lambda x: rows.revoke(x, platform, user_id, by=who, now=now))

    def speak(self, adapter: str, chat: str, thread: str, user_id: str, *, now: float) -> None:
        adapter, user_id = rows.check_key(adapter, user_id)
        params = (adapter, rows.check_text(chat, "chat"), rows.check_text(thread, "thread"), user_id, now, now)
        with self._db.write() as conn:
            self._db.run(
                conn,
                "INSERT INTO {s}.pairing_speakers (adapter, chat, thread, user_id, first_at, last_at)"
                " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (adapter, chat, thread, user_id)"
                " DO UPDATE SET last_at = excluded.last_at",
                params,
            )

    def speakers(self, adapter: str, chat: str, thread: str) -> list[str]:
        found = self._read(
            "SELECT user_id FROM {s}.pairing_speakers WHERE adapter = ? AND chat = ? AND thread = ?"
            " ORDER BY first_at, user_id",
            (adapter, chat, thread),
        )
        return [str(row["user_id"]) for row in found]
