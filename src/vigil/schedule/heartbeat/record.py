"""A conversation's heartbeat as stored in ``state_meta`` under ``heartbeat:<session_id>``.

The record is a plain JSON object; every change is a pure function from one record to the
next, so the persistence layer (``repo``) can apply it with compare-and-set and
tests can reason about it without a store.

Options (:mod:`vigil.schedule.heartbeat.options`) are part of the record: a daily ``quiet``
window read in ``zone`` (no fire inside it; a slot due inside it fires when it ends), an end
(``ends_at``: the heartbeat is then cleared), ``loud`` (every answer is delivered, even
``HEARTBEAT_OK``) and ``paused_by`` (``budget``: paused because its turns went over
``heartbeat.daily_token_budget``). Records written before the options existed read as
having none of them.

Run accounting lives in the record too: a fire first *reserves* its slot (count + 1, last fire
set, timer re-anchored) and keeps what it replaced in ``pending``; the reservation is then
*confirmed* when the agent begins executing, or *refunded* when the attempt ends before that.
"""

from __future__ import annotations

import secrets
from dataclasses import asdict, dataclass, replace
from typing import Any
from zoneinfo import ZoneInfo

from vigil.schedule.heartbeat.options import HeartbeatOptions, QuietWindow

KEY_PREFIX = "heartbeat:"
ACTIVE = "active"
PAUSED = "paused"
BUDGET = "budget"
"""``paused_by`` of a heartbeat paused for going over ``heartbeat.daily_token_budget``."""
RECORD_FORMAT = 1


def heartbeat_key(session_id: str) -> str:
    """The ``state_meta`` key of a session's heartbeat."""
    return KEY_PREFIX + session_id


class HeartbeatError(Exception):
    """A heartbeat operation cannot be done (no heartbeat, damaged record ...)."""


class NoHeartbeat(HeartbeatError):
    """The conversation has no heartbeat."""


@dataclass(frozen=True, slots=True)
class Route:
    """Where a gateway conversation's heartbeat turns are delivered; ``None`` for the CLI."""

    platform: str
    chat: str
    thread: str | None = None


@dataclass(frozen=True, slots=True)
class Pending:
    """A reservation that has not reached execution yet, with what it replaced.

    ``version`` is the schedule version the slot was reserved under; ``owner`` names the
    process (``host:pid:token``) so that a later start-up can tell a dead owner's leftovers.
    """

    id: str
    owner: str
    reserved_at: float
    version: int
    prev_fire_count: int
    prev_last_fire: float | None
    prev_next_due: float | None
    prev_last_fire_id: str | None = None


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """One conversation's recurring instruction and its schedule.

    ``id`` names this heartbeat (a new one on every set, so a replacement is never mistaken
    for its predecessor); ``version`` is the schedule version and changes on every set, pause
    and resume. A move to a compression continuation keeps it: the schedule is the same, and
    a reservation made before the move stays valid after it. ``next_due`` is ``None`` while
    paused.
    """

    session_id: str
    id: str
    prompt: str
    interval: int
    status: str
    created_at: float
    updated_at: float
    next_due: float | None
    last_fire: float | None = None
    fire_count: int = 0
    version: int = 1
    route: Route | None = None
    pending: Pending | None = None
    last_fire_id: str | None = None
    """The reservation behind ``last_fire``: tells one's own fire from a later one."""
    quiet: str | None = None
    """The daily quiet window, ``22:00-07:00`` (see :class:`QuietWindow`), read in ``zone``."""
    zone: str | None = None
    """The profile's time zone when the heartbeat was set (``None``: the machine's)."""
    ends_at: float | None = None
    """When the heartbeat ends by itself and is cleared (``--for``/``--until``)."""
    loud: bool = False
    """Deliver every answer, ``HEARTBEAT_OK`` included."""
    paused_by: str | None = None
    """Why it was paused when vigil paused it (:data:`BUDGET`); ``None``: a person did."""

    # -- reading ----------------------------------------------------------------------------
    @property
    def active(self) -> bool:
        return self.status == ACTIVE

    @property
    def window(self) -> QuietWindow | None:
        """The quiet window, or ``None``."""
        return None if self.quiet is None else QuietWindow.from_text(self.quiet)

    def ended(self, now: float) -> bool:
        """Whether its end (``--for``/``--until``) has come: it fires no more and is cleared."""
        return self.ends_at is not None and now >= self.ends_at

    def quiet_at(self, now: float) -> bool:
        """Whether ``now`` lies in the quiet window."""
        window = self.window
        return window is not None and window.contains(now, self.zone)

    def fire_at(self) -> float | None:
        """When the next fire may happen: the due time, moved to the end of the quiet window
        when it falls inside one; ``None`` while paused or when the heartbeat ends first."""
        if not self.active or self.next_due is None:
            return None
        due = self.next_due
        window = self.window
        if window is not None:
            due = window.release(due, self.zone)
        if self.ends_at is not None and due >= self.ends_at:
            return None
        return due

    def wake_at(self) -> float | None:
        """When a scheduler must next look at it: its next fire, or its end."""
        fire = self.fire_at()
        return fire if fire is not None else self.ends_at

    def due(self, now: float) -> bool:
        """Whether a fire may be reserved at ``now``: active, due, outside the quiet window
        and not ended."""
        return (
            self.active
            and self.next_due is not None
            and self.next_due <= now
            and not self.ended(now)
            and not self.quiet_at(now)
        )

    # -- schedule changes ---------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        session_id: str,
        prompt: str,
        interval: int,
        now: float,
        *,
        route: Route | None = None,
        replacing: "Heartbeat | None" = None,
        options: HeartbeatOptions | None = None,
    ) -> "Heartbeat":
        """A fresh, active heartbeat whose first fire is one interval from ``now``, with
        ``options`` (validated already; ``None``: none)."""
        options = options or HeartbeatOptions()
        return cls(
            session_id=session_id,
            id=secrets.token_hex(6),
            prompt=prompt,
            interval=int(interval),
            status=ACTIVE,
            created_at=now,
            updated_at=now,
            next_due=now + interval,
            version=(replacing.version + 1) if replacing is not None else 1,
            route=route,
            quiet=None if options.quiet is None else str(options.quiet),
            zone=options.zone,
            ends_at=options.end(now),
            loud=options.loud,
        )

    def paused(self, now: float, by: str | None = None) -> "Heartbeat":
        """Stop firing; interval and prompt stay. A pending reservation stays recorded so its
        attempt can still give the count back. ``by``: why vigil paused it (``None``: a person)."""
        return replace(
            self, status=PAUSED, next_due=None, updated_at=now, version=self.version + 1, paused_by=by
        )

    def resumed(self, now: float) -> "Heartbeat":
        """Start again with the timer restarted from ``now`` (no stale, overdue fire)."""
        return replace(
            self, status=ACTIVE, next_due=now + self.interval, updated_at=now, version=self.version + 1,
            paused_by=None,
        )

    def moved_to(self, session_id: str, now: float) -> "Heartbeat":
        """The same heartbeat and schedule (version and any pending reservation included),
        now scheduled for a compression continuation."""
        return replace(self, session_id=session_id, updated_at=now)

    # -- run accounting -------------------------------------------------------------------------
    def reserved(self, now: float, owner: str, reservation_id: str | None = None) -> "Heartbeat":
        """Reserve the slot at ``now``: count + 1, last fire = now, next due = now + interval.

        Re-anchoring at the actual fire time is what coalesces missed intervals into one fire.
        """
        pending = Pending(
            id=reservation_id or secrets.token_hex(6),
            owner=owner,
            reserved_at=now,
            version=self.version,
            prev_fire_count=self.fire_count,
            prev_last_fire=self.last_fire,
            prev_next_due=self.next_due,
            prev_last_fire_id=self.last_fire_id,
        )
        return replace(
            self,
            fire_count=self.fire_count + 1,
            last_fire=now,
            last_fire_id=pending.id,
            next_due=now + self.interval,
            pending=pending,
        )

    def confirmed(self) -> "Heartbeat":
        """The agent began executing: the reservation is final."""
        return replace(self, pending=None)

    def unconfirmed(self, reserved: "Heartbeat") -> "Heartbeat":
        """Undo a confirmation whose turn never began; ``reserved`` is the record right after
        reserving (it carries the reservation). The same as refunding that reservation."""
        return replace(self, pending=reserved.pending).refunded()

    def refunded(self) -> "Heartbeat":
        """Give a pending reservation back.

        Count and last fire are always restored. The timer is restored only when the schedule
        version is still the one the slot was reserved under: after a pause or resume the
        timer belongs to the new schedule.
        """
        pending = self.pending
        if pending is None:
            return self
        same_schedule = pending.version == self.version
        return replace(
            self,
            fire_count=pending.prev_fire_count,
            last_fire=pending.prev_last_fire,
            last_fire_id=pending.prev_last_fire_id,
            next_due=pending.prev_next_due if same_schedule else self.next_due,
            pending=None,
        )

    # -- serialisation --------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["format"] = RECORD_FORMAT
        return data

    @classmethod
    def from_json(cls, data: Any) -> "Heartbeat":
        """Decode a stored record; raises :class:`HeartbeatError` when it is damaged."""
        if not isinstance(data, dict):
            raise HeartbeatError("a heartbeat record must be a JSON object")
        try:
            # Unknown keys (written by a newer vigil) are ignored rather than fatal.
            fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
            route = fields.get("route")
            pending = fields.get("pending")
            heartbeat = cls(
                **{
                    **fields,
                    "route": Route(**route) if route else None,
                    "pending": Pending(**pending) if pending else None,
                }
            )
        except (TypeError, ValueError) as exc:
            raise HeartbeatError(f"damaged heartbeat record: {exc}") from None
        if heartbeat.status not in (ACTIVE, PAUSED) or heartbeat.interval <= 0:
            raise HeartbeatError("damaged heartbeat record: bad status or interval")
        try:
            heartbeat.window  # noqa: B018 - a damaged window is a damaged record
            if heartbeat.zone is not None and heartbeat.quiet is not None:
                ZoneInfo(heartbeat.zone)
        except (TypeError, ValueError, AttributeError, OSError, KeyError) as exc:
            raise HeartbeatError(f"damaged heartbeat record: bad quiet window or zone ({exc})") from None
        return heartbeat
