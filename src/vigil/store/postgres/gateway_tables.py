"""The gateway's routes, inbox and outbox in the PostgreSQL store (``GatewayTables``).

Each method is one transaction from the store's pool. Writes run at READ COMMITTED and are
made race-free by the statements themselves rather than by locks taken beforehand: an insert
of an inbox entry whose platform id is being stored by another transaction waits for it and
then does nothing (``ON CONFLICT DO NOTHING``), and a status change is an ``UPDATE ... WHERE
status = ...`` that a concurrent one makes wait and then re-checks, so of two processes
finishing one entry, one finds it already finished.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Sequence

import psycopg

from vigil.store.checks import optional_limit
from vigil.store.errors import SessionNotFound
from vigil.store.gateway.gateway_rows import (
    INBOX,
    INBOX_COLUMNS,
    OUTBOX,
    OUTBOX_COLUMNS,
    ROUTE_COLUMNS,
    ROUTE_MATCH,
    OutboundParams,
    check_id,
    check_text,
    counts_of,
    finish_status,
    inbox_from_row,
    inbox_statuses,
    meta_json,
    outbound_params,
    outbox_from_row,
    outbox_statuses,
    claim_params,
    route_of,
    route_params,
    started_session,
)
from vigil.store.gateway.gateway_tables import (
    FORGOTTEN,
    INBOX_STATUSES,
    OUTBOX_STATUSES,
    InboxEntry,
    NewOutbound,
    OutboxEntry,
    RouteKey,
)
from vigil.store.postgres.conn import Database, Run

_ROUTE = ROUTE_MATCH.format(p="%s")
# Status values are written into the SQL (never user input) so that the partial index on
# pending outbox entries can serve the queries that need it.
_UNFINISHED = "status IN ('pending', 'running')"
_SAME_CHAT = "o.adapter = {e}.adapter AND o.chat = {e}.chat AND o.thread = {e}.thread AND o.user_key = {e}.user_key"
_CLAIM = (
    "WITH locked AS (SELECT id, adapter, chat, thread, user_key FROM {s}.gateway_outbox"
    " WHERE status = 'pending' AND next_attempt_at <= %s"
    " AND (claim_until IS NULL OR claim_until <= %s OR claimed_by = %s)"
    " ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED),"
    " picked AS (SELECT l.id AS picked_id FROM locked l WHERE NOT EXISTS (SELECT 1 FROM {s}.gateway_outbox o"
    f" WHERE o.status = 'pending' AND {_SAME_CHAT.format(e='l')} AND o.id < l.id"
    " AND o.id NOT IN (SELECT id FROM locked)))"
    " UPDATE {s}.gateway_outbox SET claimed_by = %s, claim_until = %s FROM picked"
    f" WHERE id = picked_id RETURNING {OUTBOX_COLUMNS}"
)
"""Lock the claimable entries no other transaction has locked, and claim those whose chat has
no older pending entry left out of them: one left out is not due, held by another worker's
claim, or locked by another claimer this very moment (which may be claiming it)."""
_NEXT_CLAIMABLE = (
    "SELECT MIN(CASE WHEN e.claimed_by <> %s AND e.claim_until > e.next_attempt_at"
    " THEN e.claim_until ELSE e.next_attempt_at END) FROM {s}.gateway_outbox e WHERE e.status = 'pending'"
    " AND NOT EXISTS (SELECT 1 FROM {s}.gateway_outbox o WHERE o.status = 'pending'"
    f" AND {_SAME_CHAT.format(e='e')} AND o.id < e.id)"
)
"""When each chat's oldest pending entry may be claimed by a worker; the earliest of those."""
_RELEASE_LATER = (
    "UPDATE {s}.gateway_outbox SET claimed_by = NULL, claim_until = NULL WHERE status = 'pending' AND id > %s"
    f" AND claimed_by IS NOT NULL AND ({ROUTE_COLUMNS}) = (SELECT {ROUTE_COLUMNS} FROM {{s}}.gateway_outbox WHERE id = %s)"
)
_RELEASE_WORKERS = (
    "UPDATE {s}.gateway_outbox SET claimed_by = NULL, claim_until = NULL"
    " WHERE status = 'pending' AND claimed_by = ANY(%s)"
)
_INTERRUPTED = (
    "UPDATE {s}.gateway_inbox AS e SET status = 'pending', deaths = CASE WHEN NOT %s THEN e.deaths"
    " WHEN EXISTS (SELECT 1 FROM {s}.gateway_inbox o WHERE o.finished_at >= e.started_at AND o.id <> e.id)"
    f" THEN 0 ELSE e.deaths + 1 END WHERE e.id = %s AND e.status = 'running' RETURNING {INBOX_COLUMNS}"
)
"""See ``GatewayTables.inbox_interrupted``: a death counts unless other work finished since
the entry started. Only start-up and take-overs run it, so the scan of finished entries is rare."""
_REQUEUE = (
    "UPDATE {s}.gateway_inbox SET status = 'pending', deaths = 0, finished_at = NULL, error = NULL"
    f" WHERE id = %s AND status = 'set_aside' RETURNING {INBOX_COLUMNS}"
)
_INSERT_OUTBOX = (
    f"INSERT INTO {{s}}.gateway_outbox ({ROUTE_COLUMNS}, kind, text, session_id, inbox_id, meta,"
    " created_at, next_attempt_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
    f" RETURNING {OUTBOX_COLUMNS}"
)


class PostgresGatewayTables:
    """``GatewayTables`` in one PostgreSQL store's schema (``PostgresStore.gateway``)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    # -- routes -----------------------------------------------------------------------------
    def route_get(self, key: RouteKey) -> str | None:
        rows = self._db.query(f"SELECT session_id FROM {{s}}.gateway_routes WHERE {_ROUTE}", route_params(key))
        return None if not rows else str(rows[0][0])

    def route_set(self, key: RouteKey, session_id: str, *, now: float) -> None:
        params = route_params(key)
        check_text(session_id, "session_id", empty=False)
        with self._db.write() as conn:
            try:
                self._db.run(
                    conn,
                    f"INSERT INTO {{s}}.gateway_routes ({ROUTE_COLUMNS}, session_id, created_at, updated_at)"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (adapter, chat, thread, user_key)"
                    " DO UPDATE SET session_id = excluded.session_id, updated_at = excluded.updated_at",
                    (*params, session_id, now, now),
                )
            except psycopg.errors.ForeignKeyViolation as exc:
                raise SessionNotFound(session_id) from exc

    def route_delete(self, key: RouteKey) -> bool:
        params = route_params(key)
        with self._db.write() as conn:
            return bool(self._db.run(conn, f"DELETE FROM {{s}}.gateway_routes WHERE {_ROUTE}", params).rowcount)

    def routes_of(self, session_id: str) -> list[RouteKey]:
        with self._db.read() as conn:
            rows = self._db.run(
                conn,
                f"SELECT {ROUTE_COLUMNS} FROM {{s}}.gateway_routes WHERE session_id = %s"
                " ORDER BY created_at, created_order",
                (session_id,),
            ).fetchall()
        return [route_of(row) for row in rows]

    # -- inbox ------------------------------------------------------------------------------
    def inbox_accept(
        self,
        route: RouteKey,
        external_id: str,
        text: str,
        *,
        sender: str = "",
        received_at: float,
        meta: dict[str, Any] | None = None,
    ) -> tuple[InboxEntry, bool]:
        params = (
            *route_params(route),
            check_text(external_id, "external_id", empty=False),
            check_text(text, "text"),
            check_text(sender, "sender"),
            received_at,
            meta_json(meta),
        )
        with self._db.write() as conn:
            run = partial(self._db.run, conn)
            inserted = run(
                f"INSERT INTO {{s}}.gateway_inbox ({ROUTE_COLUMNS}, external_id, text, sender, received_at, meta)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (adapter, external_id) DO NOTHING"
                f" RETURNING {INBOX_COLUMNS}",
                params,
            ).fetchone()
            if inserted is not None:
                return inbox_from_row(inserted), True
            # The conflicting row is committed (ON CONFLICT waited for it), and this statement
            # takes a new snapshot: it sees the row.
            stored = run(
                f"SELECT {INBOX_COLUMNS} FROM {{s}}.gateway_inbox WHERE adapter = %s AND external_id = %s",
                (params[0], external_id),
            ).fetchone()
            return inbox_from_row(stored), False

    def inbox_get(self, entry_id: int) -> InboxEntry | None:
        check_id(entry_id)
        with self._db.read() as conn:
            row = self._db.run(
                conn, f"SELECT {INBOX_COLUMNS} FROM {{s}}.gateway_inbox WHERE id = %s", (entry_id,)
            ).fetchone()
        return None if row is None else inbox_from_row(row)

    def inbox_unfinished(self, *, limit: int | None = None) -> list[InboxEntry]:
        wanted = optional_limit(limit)
        with self._db.read() as conn:
            rows = self._db.run(
                conn,
                f"SELECT {INBOX_COLUMNS} FROM {{s}}.gateway_inbox WHERE {_UNFINISHED} ORDER BY id LIMIT %s",
                (wanted,),
            ).fetchall()
        return [inbox_from_row(row) for row in rows]

    def inbox_start(self, entry_id: int, session_id: str, *, now: float) -> InboxEntry:
        check_id(entry_id)
        started_in = started_session(session_id)
        with self._db.write() as conn:
            run = partial(self._db.run, conn)
            started = run(
                "UPDATE {s}.gateway_inbox SET status = 'running', session_id = %s, attempts = attempts + 1,"
                f" started_at = %s WHERE id = %s AND {_UNFINISHED} RETURNING {INBOX_COLUMNS}",
                (started_in, now, entry_id),
            ).fetchone()
            return inbox_from_row(started if started is not None else _inbox_row(run, entry_id))

    def inbox_finish(
        self,
        entry_id: int,
        status: str,
        *,
        now: float,
        error: str | None = None,
        reply: NewOutbound | None = None,
    ) -> OutboxEntry | None:
        check_id(entry_id)
        finish_status(status)
        if error is not None:
            check_text(error, "error")
        queued = None if reply is None else outbound_params(reply)
        with self._db.write() as conn:
            run = partial(self._db.run, conn)
            finished = run(
                "UPDATE {s}.gateway_inbox SET status = %s, finished_at = %s, error = %s"
                f" WHERE id = %s AND {_UNFINISHED} RETURNING session_id",
                (status, now, error, entry_id),
            ).fetchone()
            if finished is None:
                _inbox_row(run, entry_id)  # KeyError for an unknown id
                return None
            if queued is None:
                return None
            return _queue(run, queued, now, entry_id, finished["session_id"])

    def inbox_interrupted(self, entry_id: int, *, died: bool) -> InboxEntry:
        check_id(entry_id)
        return self._inbox_update(_INTERRUPTED, (bool(died), entry_id), entry_id)

    def inbox_requeue(self, entry_id: int) -> InboxEntry:
        check_id(entry_id)
        return self._inbox_update(_REQUEUE, (entry_id,), entry_id)

    def _inbox_update(self, statement: str, params: tuple[Any, ...], entry_id: int) -> InboxEntry:
        """Run one guarded ``UPDATE ... RETURNING`` of an entry; the entry as it is when the
        guard left it alone (``KeyError`` for an unknown id)."""
        with self._db.write() as conn:
            run = partial(self._db.run, conn)
            changed = run(statement, params).fetchone()
            return inbox_from_row(changed if changed is not None else _inbox_row(run, entry_id))

    def inbox_list(self, *, statuses: Sequence[str] = INBOX_STATUSES, limit: int = 100) -> list[InboxEntry]:
        wanted = inbox_statuses(statuses)
        count = optional_limit(limit)
        with self._db.read() as conn:
            rows = self._db.run(
                conn,
                f"SELECT {INBOX_COLUMNS} FROM {{s}}.gateway_inbox WHERE status = ANY(%s) ORDER BY id DESC LIMIT %s",
                (wanted, count),
            ).fetchall()
        return [inbox_from_row(row) for row in rows]

    def inbox_counts(self) -> dict[str, int]:
        return self._counts("gateway_inbox", INBOX, INBOX_STATUSES)

    # -- outbox -----------------------------------------------------------------------------
    def outbox_add(self, message: NewOutbound, *, now: float) -> OutboxEntry:
        queued = outbound_params(message)
        with self._db.write() as conn:
            return _queue(partial(self._db.run, conn), queued, now, None, None)

    def outbox_due(self, now: float, *, limit: int = 100) -> list[OutboxEntry]:
        wanted = optional_limit(limit)
        with self._db.read() as conn:
            rows = self._db.run(
                conn,
                f"SELECT {OUTBOX_COLUMNS} FROM {{s}}.gateway_outbox WHERE status = 'pending'"
                " AND next_attempt_at <= %s ORDER BY id LIMIT %s",
                (now, wanted),
            ).fetchall()
        return [outbox_from_row(row) for row in rows]

    def outbox_claim(self, worker: str, now: float, *, limit: int, hold: float) -> list[OutboxEntry]:
        worker, wanted, until = claim_params(worker, now, limit, hold)
        with self._db.write() as conn:
            rows = self._db.run(conn, _CLAIM, (now, now, worker, wanted, worker, until)).fetchall()
            claimed = [outbox_from_row(row) for row in rows]  # a damaged row rolls the claim back
        return sorted(claimed, key=lambda entry: entry.id)  # RETURNING keeps no order

    def outbox_next_due(self, *, worker: str | None = None) -> float | None:
        if worker is None:
            rows = self._db.query("SELECT MIN(next_attempt_at) FROM {s}.gateway_outbox WHERE status = 'pending'")
        else:
            rows = self._db.query(_NEXT_CLAIMABLE, (check_text(worker, "worker", empty=False),))
        value = rows[0][0]
        return None if value is None else float(value)

    def outbox_release(self, workers: Sequence[str]) -> int:
        names = [check_text(worker, "worker", empty=False) for worker in workers]
        if not names:
            return 0
        with self._db.write() as conn:
            cursor = self._db.run(conn, _RELEASE_WORKERS, (names,))
            return int(cursor.rowcount)

    def outbox_sent(self, entry_id: int, *, now: float) -> None:
        self._outbox_update(entry_id, "status = 'sent', sent_at = %s", (now,))

    def outbox_retry(self, entry_id: int, *, error: str, next_attempt_at: float) -> None:
        check_text(error, "error")
        self._outbox_update(
            entry_id, "last_error = %s, next_attempt_at = %s", (error, next_attempt_at), release_later=True
        )

    def outbox_fail(self, entry_id: int, *, error: str, now: float) -> None:
        check_text(error, "error")
        self._outbox_update(entry_id, "status = 'failed', last_error = %s, failed_at = %s", (error, now))

    def _outbox_update(
        self, entry_id: int, assignments: str, params: tuple[Any, ...], *, release_later: bool = False
    ) -> None:
        """One try's outcome for a pending entry (``assignments`` are fixed SQL, never input);
        ``release_later``: its chat's later replies, which must wait behind it, are claimable
        by whoever claims it next (see ``GatewayTables.outbox_retry``)."""
        check_id(entry_id)
        with self._db.write() as conn:
            run = partial(self._db.run, conn)
            changed = run(
                "UPDATE {s}.gateway_outbox SET attempts = attempts + 1, claimed_by = NULL, claim_until = NULL,"
                f" {assignments}"
                " WHERE id = %s AND status = 'pending'",
                (*params, entry_id),
            ).rowcount
            if not changed and run("SELECT 1 FROM {s}.gateway_outbox WHERE id = %s", (entry_id,)).fetchone() is None:
                raise KeyError(f"no gateway outbox entry {entry_id}")
            if changed and release_later:
                run(_RELEASE_LATER, (entry_id, entry_id))

    def outbox_list(
        self, *, statuses: Sequence[str] = OUTBOX_STATUSES, limit: int = 100
    ) -> list[OutboxEntry]:
        wanted = outbox_statuses(statuses)
        count = optional_limit(limit)
        with self._db.read() as conn:
            rows = self._db.run(
                conn,
                f"SELECT {OUTBOX_COLUMNS} FROM {{s}}.gateway_outbox WHERE status = ANY(%s)"
                " ORDER BY id DESC LIMIT %s",
                (wanted, count),
            ).fetchall()
        return [outbox_from_row(row) for row in rows]

    def outbox_counts(self) -> dict[str, int]:
        return self._counts("gateway_outbox", OUTBOX, OUTBOX_STATUSES)

    def _counts(self, table: str, name: str, statuses: Sequence[str]) -> dict[str, int]:
        with self._db.read() as conn:
            rows = self._db.run(
                conn, f"SELECT status, COUNT(*) AS n, MIN(id) AS first FROM {{s}}.{table} GROUP BY status"
            ).fetchall()
        return counts_of(rows, name, statuses)

    # -- housekeeping -----------------------------------------------------------------------
    def forget_sessions(self, session_ids: Sequence[str], *, now: float) -> int:
        wanted = [check_text(sid, "session_id", empty=False) for sid in session_ids]
        if not wanted:
            return 0
        with self._db.write() as conn:
            run = partial(self._db.run, conn)
            inbox = run(
                "UPDATE {s}.gateway_inbox SET text = '', meta = '{}',"
                " error = CASE WHEN status IN ('answered', 'failed') THEN error ELSE %s END,"
                " finished_at = COALESCE(finished_at, %s),"
                " status = CASE WHEN status IN ('answered', 'failed') THEN status ELSE 'failed' END"
                " WHERE session_id = ANY(%s)",
                (FORGOTTEN, now, wanted),
            ).rowcount
            outbox = run(
                "UPDATE {s}.gateway_outbox SET text = '', meta = '{}',"
                " last_error = CASE WHEN status = 'pending' THEN %s ELSE last_error END,"
                " failed_at = CASE WHEN status = 'pending' THEN %s ELSE failed_at END,"
                " claimed_by = NULL, claim_until = NULL,"
                " status = CASE WHEN status = 'pending' THEN 'failed' ELSE status END"
                " WHERE session_id = ANY(%s)",
                (FORGOTTEN, now, wanted),
            ).rowcount
        return int(inbox) + int(outbox)

    def prune(self, before: float) -> int:
        with self._db.write() as conn:
            run = partial(self._db.run, conn)
            inbox = run(
                "DELETE FROM {s}.gateway_inbox WHERE status IN ('answered', 'failed') AND finished_at < %s",
                (before,),
            ).rowcount
            outbox = run("DELETE FROM {s}.gateway_outbox WHERE status = 'sent' AND sent_at < %s", (before,)).rowcount
        return int(inbox) + int(outbox)


# -- helpers that run inside a write transaction ------------------------------------------------
def _inbox_row(run: Run, entry_id: int) -> dict[str, Any]:
    row: dict[str, Any] | None = run(
        f"SELECT {INBOX_COLUMNS} FROM {{s}}.gateway_inbox WHERE id = %s", (entry_id,)
    ).fetchone()
    if row is None:
        raise KeyError(f"no gateway inbox entry {entry_id}")
    return row


def _queue(run: Run, queued: OutboundParams, now: float, inbox_id: int | None, session_id: str | None) -> OutboxEntry:
    """Insert a pending entry due now; ``inbox_id`` and ``session_id`` fill in what the
    message leaves out (the entry it answers)."""
    *route, kind, text, own_session, own_inbox, meta = queued
    params = (
        *route,
        kind,
        text,
        own_session if own_session is not None else session_id,
        own_inbox if own_inbox is not None else inbox_id,
        meta,
        now,
        now,
    )
    return outbox_from_row(run(_INSERT_OUTBOX, params).fetchone())
