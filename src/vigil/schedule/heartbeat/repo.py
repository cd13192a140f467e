"""Heartbeat records in the session store, changed only by compare-and-set.

Every change reads the record, computes the next one with a pure transition
(:mod:`vigil.schedule.heartbeat`) and swaps it in with ``compare_and_set_meta``; a lost race
re-reads and tries again. That is what makes a reservation a durable claim: two processes on
one store can never both reserve the same slot, because the second swap finds the record
already changed.

All methods are synchronous (the store is); async callers run them in a worker thread.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Callable

from vigil.clock import Clock, SystemClock
from vigil.schedule.changes import bump_generation
from vigil.schedule.heartbeat.record import (
    KEY_PREFIX,
    Heartbeat,
    HeartbeatError,
    NoHeartbeat,
    BUDGET,
    Route,
    heartbeat_key,
)
from vigil.schedule.heartbeat.options import HeartbeatOptions
from vigil.schedule.liveness import Liveness
from vigil.schedule.processes import PROCESS_OWNER
from vigil.store import SessionStore

STALE_AFTER = 600.0
"""A reservation still pending after this many seconds is abandoned whoever made it, this
process included (its refund may have failed for good): the span between reserving and
executing is a few store round trips and the turn's preparation. Reclaiming a reservation
that is in fact still alive is safe, only wasteful: its confirmation then fails, because it
no longer holds the record, and its turn does not run."""

_ATTEMPTS = 50


class _Abort(Exception):
    """A transition found the record in a state where it does not apply."""


@dataclass(frozen=True, slots=True)
class Listed:
    """One stored heartbeat record as ``vigil heartbeat list`` shows it: the heartbeat, or
    the reason it cannot be read."""

    session_id: str
    heartbeat: Heartbeat | None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Reservation:
    """A reserved slot, not yet executing. ``heartbeat`` is the record right after reserving;
    ``due`` is when the slot was due (for lateness)."""

    session_id: str
    id: str
    heartbeat: Heartbeat
    due: float


class HeartbeatRepo:
    """Reads and changes heartbeat records in one profile's store."""

    def __init__(
        self, store: SessionStore, clock: Clock | None = None, *, owner: str = PROCESS_OWNER,
        alive: Callable[[str], bool] | None = None,
    ):
        self.store = store
        self.clock = clock or SystemClock()
        self.owner = owner
        if alive is None:
            alive = Liveness(store, self.clock).owner_alive
        self.alive = alive
        """Whether another owner still runs: by pid on this host, by the store's worker and
        lease holder records elsewhere (:mod:`vigil.schedule.liveness`)."""

    # -- reading ----------------------------------------------------------------------------
    def get(self, session_id: str) -> Heartbeat | None:
        """The session's heartbeat, or ``None``. Raises ``HeartbeatError`` for a damaged record."""
        entry = self.store.get_meta(heartbeat_key(session_id))
        return None if entry is None else Heartbeat.from_json(entry.value)

    def list(self) -> list[Heartbeat]:
        """Every readable heartbeat of the profile, by session id; damaged records are skipped."""
        return [item.heartbeat for item in self.scan() if item.heartbeat is not None]

    def scan(self) -> list[Listed]:
        """Every heartbeat record of the profile, by session id, damaged ones included."""
        out = []
        for entry in self.store.list_meta(KEY_PREFIX):
            session_id = entry.key[len(KEY_PREFIX):]
            try:
                out.append(Listed(session_id, Heartbeat.from_json(entry.value)))
            except HeartbeatError as exc:
                out.append(Listed(session_id, None, str(exc)))
        return out

    # -- schedule changes (each bumps the profile's schedule generation) ------------------------
    def set(
        self, session_id: str, prompt: str, interval: int, *, route: Route | None = None,
        options: HeartbeatOptions | None = None,
    ) -> tuple[Heartbeat, Heartbeat | None]:
        """Set or replace the session's heartbeat; returns (new, replaced or ``None``).

        Validation (interval, prompt, options) is the caller's job and happens before this is
        called, so that bad input never touches the stored record.
        """
        previous: list[Heartbeat | None] = [None]

        def change(current: Heartbeat | None) -> Heartbeat:
            previous[0] = current
            return Heartbeat.create(
                session_id, prompt, interval, self.clock.now(), route=route, replacing=current,
                options=options,
            )

        new = self._update(session_id, change, create=True)
        bump_generation(self.store)
        assert new is not None
        return new, previous[0]

    def pause(self, session_id: str) -> tuple[Heartbeat, bool]:
        """Pause; returns the record and whether it changed (``False``: it was paused already)."""
        return self._toggle(session_id, pause=True)

    def resume(self, session_id: str) -> tuple[Heartbeat, bool]:
        """Resume with the timer restarted from now; ``False`` when it was active already."""
        return self._toggle(session_id, pause=False)

    def clear(self, session_id: str) -> Heartbeat | None:
        """Delete the heartbeat; returns what was removed (``None``: there was none)."""
        removed: list[Heartbeat | None] = [None]

        def change(current: Heartbeat | None) -> None:
            if current is None:
                raise _Abort
            removed[0] = current
            return None

        try:
            self._update(session_id, change)
        except _Abort:
            return None
        except HeartbeatError:
            # A damaged record cannot be read, but it can still be cleared.
            if not self.store.delete_meta(heartbeat_key(session_id)):
                return None
        bump_generation(self.store)
        return removed[0]

    def expire(self, session_id: str) -> Heartbeat | None:
        """Clear the heartbeat if its end (``--for``/``--until``) has come; returns what was
        removed (``None``: there was none, or it has not ended)."""
        removed: list[Heartbeat | None] = [None]

        def change(current: Heartbeat | None) -> None:
            if current is None or not current.ended(self.clock.now()):
                raise _Abort
            removed[0] = current
            return None

        try:
            self._update(session_id, change)
        except _Abort:
            return None
        bump_generation(self.store)
        return removed[0]

    def pause_over_budget(self, session_id: str, version: int) -> Heartbeat | None:
        """Pause the heartbeat because its turns went over the daily token budget, if it is
        still the active schedule ``version``; returns the paused record (``None``: changed
        meanwhile, nothing done)."""

        def change(current: Heartbeat | None) -> Heartbeat:
            if current is None or current.version != version or not current.active:
                raise _Abort
            return current.paused(self.clock.now(), by=BUDGET)

        try:
            paused = self._update(session_id, change)
        except _Abort:
            return None
        bump_generation(self.store)
        return paused

    def move(self, parent_id: str, child_id: str) -> Heartbeat | None:
        """Move the heartbeat of ``parent_id`` to ``child_id`` (a compression continuation);
        returns the heartbeat now on the child, or ``None`` when the parent had none.

        Afterwards exactly one of the two holds it. The copy is written to the child first
        (only where there is no record), then the parent's record is removed by
        compare-and-set against what was copied. If the parent changed in between (a
        reservation, a refund, a pause from another process), the copy is taken back and the
        move starts again from the parent's new record. Copying first means that a crash
        between the two writes leaves a duplicate on the ended parent, never a lost heartbeat.
        A child that already has a heartbeat of its own keeps it (it was set after the
        compression, so it is the newer one) and the parent's is removed.
        """
        parent_key, child_key = heartbeat_key(parent_id), heartbeat_key(child_id)
        for _ in range(_ATTEMPTS):
            entry = self.store.get_meta(parent_key)
            if entry is None:
                return None
            current = Heartbeat.from_json(entry.value)
            moved = current.moved_to(child_id, self.clock.now()).to_json()
            if not self.store.compare_and_set_meta(child_key, None, moved):
                if self.store.compare_and_set_meta(parent_key, entry.value, None):
                    bump_generation(self.store)
                    return self.get(child_id)
                continue
            if self.store.compare_and_set_meta(parent_key, entry.value, None):
                bump_generation(self.store)
                return Heartbeat.from_json(moved)
            if not self.store.compare_and_set_meta(child_key, moved, None):
                # The copy was changed already, so it is live where it is: the parent's goes.
                self.store.delete_meta(parent_key)
                bump_generation(self.store)
                return self.get(child_id)
        raise HeartbeatError(f"the heartbeat of {parent_id} keeps changing; try again")

    # -- run accounting ---------------------------------------------------------------------
    def reserve(self, session_id: str) -> Reservation | None:
        """Claim the due slot durably; ``None`` when there is nothing to claim (no heartbeat,
        paused, not due yet, or another process claimed the slot first)."""
        rid = secrets.token_hex(6)
        due: list[float] = [0.0]

        def change(current: Heartbeat | None) -> Heartbeat:
            now = self.clock.now()
            if current is not None and current.pending is not None:
                if not self._abandoned(current, now):
                    raise _Abort  # another attempt is between reserving and executing
                current = current.refunded()
            if current is None or not current.due(now):
                raise _Abort
            due[0] = current.next_due or now
            return current.reserved(now, self.owner, rid)

        try:
            reserved = self._update(session_id, change)
        except _Abort:
            return None
        assert reserved is not None
        return Reservation(session_id, rid, reserved, due[0])

    def confirm(self, reservation: Reservation) -> bool:
        """Make the reservation final as the agent begins executing.

        Fails (``False``) when the heartbeat was cleared, replaced, paused, resumed or moved
        since the slot was reserved: the attempt must then not execute.
        """

        def change(current: Heartbeat | None) -> Heartbeat:
            if not _holds(current, reservation) or current is None:
                raise _Abort
            if current.version != reservation.heartbeat.version or not current.active:
                raise _Abort
            return current.confirmed()

        try:
            self._update(reservation.session_id, change)
        except _Abort:
            return False
        return True

    def unconfirm(self, reservation: Reservation) -> Heartbeat | None:
        """Undo :meth:`confirm` for an attempt that did not begin executing after all (it was
        cancelled, or user input arrived, while the confirmation was being written): the
        count and timer are restored as by a refund. ``None`` when the record has moved on
        since (cleared, replaced, fired again or undone already): nothing of ours to undo."""
        reserved = reservation.heartbeat

        def change(current: Heartbeat | None) -> Heartbeat:
            if (
                current is None
                or current.id != reserved.id
                or current.pending is not None
                or current.last_fire_id != reservation.id
            ):
                raise _Abort
            return current.unconfirmed(reserved)

        try:
            return self._update(reservation.session_id, change)
        except _Abort:
            return None

    def refund(self, reservation: Reservation) -> Heartbeat | None:
        """Give the slot back (see :meth:`Heartbeat.refunded`); returns the record after the
        refund, or ``None`` when there was nothing to refund (the heartbeat was cleared or
        replaced, or the reservation was already confirmed or refunded)."""

        def change(current: Heartbeat | None) -> Heartbeat:
            if not _holds(current, reservation) or current is None:
                raise _Abort
            return current.refunded()

        try:
            return self._update(reservation.session_id, change)
        except _Abort:
            return None

    def refund_orphans(self, is_alive: Callable[[str], bool] | None = None) -> list[Heartbeat]:
        """Refund reservations left pending by processes that died before executing them.

        ``is_alive(owner)`` decides about other owners (default: :attr:`alive`); this
        process's own reservations are left alone unless stale. A reservation older than
        :data:`STALE_AFTER` is refunded whoever owns it. Returns the refunded records.
        """
        now = self.clock.now()
        refunded = []
        for entry in self.store.list_meta(KEY_PREFIX):
            # Decode only records with a reservation: start-up scans every heartbeat.
            if not isinstance(entry.value, dict) or not entry.value.get("pending"):
                continue
            try:
                heartbeat = Heartbeat.from_json(entry.value)
            except HeartbeatError:
                continue
            pending = heartbeat.pending
            if pending is None or not self._abandoned(heartbeat, now, is_alive):
                continue
            stale = Reservation(heartbeat.session_id, pending.id, heartbeat, pending.prev_next_due or now)
            after = self.refund(stale)
            if after is not None:
                refunded.append(after)
        return refunded

    # -- internals ----------------------------------------------------------------------------
    def _abandoned(
        self, heartbeat: Heartbeat, now: float, is_alive: Callable[[str], bool] | None = None
    ) -> bool:
        """Whether the record's pending reservation was abandoned: left behind by a dead
        process, or stale (older than :data:`STALE_AFTER`), whoever made it."""
        pending = heartbeat.pending
        if pending is None:
            return False
        if now - pending.reserved_at >= STALE_AFTER:
            return True
        if pending.owner == self.owner:
            return False
        return not (is_alive or self.alive)(pending.owner)

    def _toggle(self, session_id: str, *, pause: bool) -> tuple[Heartbeat, bool]:
        changed = [False]

        def change(current: Heartbeat | None) -> Heartbeat:
            if current is None:
                raise NoHeartbeat(session_id)
            if current.active != pause:
                raise _Abort
            changed[0] = True
            now = self.clock.now()
            return current.paused(now) if pause else current.resumed(now)

        try:
            result = self._update(session_id, change)
        except _Abort:
            existing = self.get(session_id)
            if existing is None:
                raise NoHeartbeat(session_id) from None
            return existing, False
        bump_generation(self.store)
        assert result is not None
        return result, changed[0]

    def _update(
        self,
        session_id: str,
        change: Callable[[Heartbeat | None], Heartbeat | None],
        *,
        create: bool = False,
    ) -> Heartbeat | None:
        """Apply ``change`` with compare-and-set, retrying lost races. ``change`` raises
        ``_Abort`` (or a ``HeartbeatError``) when it does not apply."""
        key = heartbeat_key(session_id)
        for _ in range(_ATTEMPTS):
            entry = self.store.get_meta(key)
            raw = None if entry is None else entry.value
            current = None
            if raw is not None:
                try:
                    current = Heartbeat.from_json(raw)
                except HeartbeatError:
                    if not create:
                        raise
            new = change(current)
            if self.store.compare_and_set_meta(key, raw, None if new is None else new.to_json()):
                return new
        raise HeartbeatError(f"the heartbeat of {session_id} keeps changing; try again")


def _holds(current: Heartbeat | None, reservation: Reservation) -> bool:
    return (
        current is not None
        and current.id == reservation.heartbeat.id
        and current.pending is not None
        and current.pending.id == reservation.id
    )

