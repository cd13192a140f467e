"""Pairing codes and paired users in the SQLite store (``PairingTables``).

Every write is one function inside the store's group commit (``BEGIN IMMEDIATE``), so the
count-then-insert of a code request and the check-then-pair of an approval are serialised
with every other writer of the file. The transactions themselves are in
:mod:`vigil.store.gateway.pairing_rows`, shared with PostgreSQL.
"""

from __future__ import annotations

import sqlite3
from typing import Any, Sequence

from vigil.store.gateway import pairing_rows as rows
from vigil.store.gateway.pairing_tables import CodeDecision, CodeRequest, Limits, PairedUser, PendingCode
from vigil.store.sqlite.conn import Database
from vigil.store.sqlite.group import GroupCommit


def _executor(conn: sqlite3.Connection) -> rows.Exec:
    def x(statement: str, params: Sequence[Any]) -> list[Any]:
        return conn.execute(statement.replace("{s}.", ""), tuple(params)).fetchall()

    return x


class SQLitePairingTables:
    """``PairingTables`` on one SQLite store's file (``SQLiteStore.pairing``)."""

    def __init__(self, db: Database, group: GroupCommit) -> None:
        self._db = db
        self._group = group

    def _read(self, statement: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._db.read() as conn:
            return _executor(conn)(statement, params)

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
        return self._group.run(lambda conn: rows.request_code(
            _executor(conn), platform, user_id, display_name=name, chat=where[0], thread=where[1],
            user_key=where[2], code_hash=digest, nonce=seed, now=now, limits=limits,
        ))

    def approve(self, code_hash: str, *, by: str, now: float, limits: Limits = Limits()) -> CodeDecision:
        digest, who = rows.check_hash(code_hash), rows.clean_name(by)
        return self._group.run(
            lambda conn: rows.decide(_executor(conn), digest, approve=True, by=who, now=now, limits=limits)
        )

    def deny(self, code_hash: str, *, now: float, limits: Limits = Limits()) -> CodeDecision:
        digest = rows.check_hash(code_hash)
        return self._group.run(
            lambda conn: rows.decide(_executor(conn), digest, approve=False, by="", now=now, limits=limits)
        )

    def lock_state(self, *, now: float, limits: Limits = Limits()) -> CodeDecision:
        with self._db.read() as conn:
            return rows.lock_state(_executor(conn), now, limits)

    def user(self, platform: str, user_id: str) -> PairedUser | None:
        platform, user_id = rows.check_key(platform, user_id)
        found = self._read(
            f"SELECT {rows.USER_COLUMNS} FROM pairing_users WHERE platform = ? AND user_id = ?", (platform, user_id)
        )
        return rows.user_from_row(found[0]) if found else None

    def pending(self, *, now: float) -> list[PendingCode]:
        found = self._read(
            f"SELECT {rows.CODE_COLUMNS} FROM pairing_codes WHERE expires_at > ? ORDER BY created_at, rowid", (now,)
        )
        return [rows.code_from_row(row) for row in found]

    def users(self) -> list[PairedUser]:
        found = self._read(f"SELECT {rows.USER_COLUMNS} FROM pairing_users ORDER BY platform, approved_at, rowid")
        return [rows.user_from_row(row) for row in found]

    def revoke(self, platform: str, user_id: str, *, by: str, now: float) -> PairedUser | None:
        platform, user_id = rows.check_key(platform, user_id)
        who = rows.clean_name(by)
        return self._group.run(lambda conn: rows.revoke(_executor(conn), platform, user_id, by=who, now=now))

    def speak(self, adapter: str, chat: str, thread: str, user_id: str, *, now: float) -> None:
        adapter, user_id = rows.check_key(adapter, user_id)
        params = (adapter, rows.check_text(chat, "chat"), rows.check_text(thread, "thread"), user_id, now, now)
        self._group.run(lambda conn: conn.execute(
            "INSERT INTO pairing_speakers (adapter, chat, thread, user_id, first_at, last_at)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (adapter, chat, thread, user_id)"
            " DO UPDATE SET last_at = excluded.last_at",
            params,
        ))

    def speakers(self, adapter: str, chat: str, thread: str) -> list[str]:
        found = self._read(
            "SELECT user_id FROM pairing_speakers WHERE adapter = ? AND chat = ? AND thread = ?"
            " ORDER BY first_at, rowid",
            (adapter, chat, thread),
        )
        return [str(row["user_id"]) for row in found]
