"""Who may talk to the agent from a platform: pairing codes, paired users, and the
``PairingTables`` protocol.

A platform user who is not on the platform's allow-list (config) writes to the agent and is
sent a pairing code instead of an answer; the owner approves the code with
``vigil pairing approve``, which pairs the user. The tables:

- ``pairing_codes``: the pending code of each (platform, user): its SHA-256 (never the code
  itself), the nonce it is derived from (see :mod:`vigil.gateway.pairing`), who asked, from
  which chat, when, and when it expires. One per user; an expired one is kept a day so that
  approving it says "expired" rather than "wrong".
- ``pairing_users``: paired users, approved at, by whom, and revoked at/by (a revoked user is
  kept, so that ``vigil pairing list`` says so).
- ``pairing_events``: what the rate limits count: code requests per user and wrong codes given
  to ``approve``/``deny`` (a day of them is kept).
- ``pairing_speakers``: which allowed users spoke in which platform chat, so that a heartbeat
  of that chat stops firing when one of them is revoked.

Both backends implement the protocol in their ``pairing_tables`` module; a store exposes it as
``store.pairing``. Every method is synchronous, thread-safe and one transaction (the checks and
the write of a code request or an approval cannot be split by another process). Times are Unix
epoch seconds. The limits are the caller's (:class:`Limits`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

ISSUED = "issued"
"""A code request: a new code was stored."""
EXISTING = "existing"
"""A code request: the user has a pending code already (returned, not replaced)."""
FULL = "full"
"""A code request: the platform has as many pending codes as allowed; try later."""
LIMITED = "limited"
"""A code request: this user asked too often; nothing is sent."""

APPROVED = "approved"
DENIED = "denied"
WRONG = "wrong"
EXPIRED = "expired"
LOCKED = "locked"

KEEP_SECONDS = 86_400.0
"""Expired codes and counted events are deleted a day after they stop mattering."""


@dataclass(frozen=True, slots=True)
class Limits:
    """The rate limits a request or an approval is checked against."""

    code_ttl: float = 3600.0
    max_pending: int = 3
    """Pending (unexpired) codes per platform."""
    request_window: float = 900.0
    max_requests: int = 5
    """Code requests (denied messages answered) per user and window; past it, silence."""
    wrong_window: float = 900.0
    max_wrong: int = 5
    """Wrong codes per window before approvals are locked."""


@dataclass(frozen=True, slots=True)
class PendingCode:
    """A pairing code waiting for the owner."""

    platform: str
    user_id: str
    display_name: str
    chat: str
    thread: str
    user_key: str
    code_hash: str
    nonce: str
    created_at: float
    expires_at: float


@dataclass(frozen=True, slots=True)
class PairedUser:
    """A user approved on a platform (``revoked_at`` set: no longer)."""

    platform: str
    user_id: str
    display_name: str
    approved_at: float
    approved_by: str
    revoked_at: float | None = None
    revoked_by: str | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


@dataclass(frozen=True, slots=True)
class CodeRequest:
    """What :meth:`PairingTables.request_code` did: ``outcome`` is one of ``issued``,
    ``existing`` (``code`` is the pending one), ``full`` or ``limited``; ``requests`` is how
    many this user made in the window, this one included (``limited``: the first one past the
    limit is ``max_requests + 1``, so the caller can say so once)."""

    outcome: str
    requests: int
    code: PendingCode | None = None


@dataclass(frozen=True, slots=True)
class CodeDecision:
    """What :meth:`PairingTables.approve` or :meth:`PairingTables.deny` did: ``outcome`` is
    ``approved``/``denied``, ``wrong`` (counted), ``expired`` (the code, ``code``, ran out) or
    ``locked`` (too many wrong codes: nothing was looked at; ``locked_until`` says when it
    ends). ``wrong`` counts this window's wrong codes, this one included."""

    outcome: str
    code: PendingCode | None = None
    user: PairedUser | None = None
    wrong: int = 0
    locked_until: float | None = None


class PairingTables(Protocol):
    """Pairing codes and paired users (see the module docstring)."""

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
        """Count a code request of ``user_id`` and, in the same transaction: past the request
        limit answer ``limited``; with an unexpired code answer ``existing``; with the
        platform's pending codes at the limit answer ``full``; else store ``code_hash`` (and
        ``nonce``), expiring ``limits.code_ttl`` from ``now``, and answer ``issued``. Requests
        past ``max_requests + 1`` are not written (a flood writes nothing)."""
        ...

    def approve(self, code_hash: str, *, by: str, now: float, limits: Limits = Limits()) -> CodeDecision:
        """Pair the user whose pending code has ``code_hash`` (the code is used up) — unless
        approvals are locked (``max_wrong`` wrong codes in ``wrong_window``). A hash that
        matches no code is counted as a wrong code; an expired code is refused (not counted)."""
        ...

    def deny(self, code_hash: str, *, now: float, limits: Limits = Limits()) -> CodeDecision:
        """Delete a pending code without pairing; the same lock and counting as ``approve``."""
        ...

    def lock_state(self, *, now: float, limits: Limits = Limits()) -> CodeDecision:
        """``locked`` (with ``locked_until``) while approvals are locked, else ``approved``
        with the window's wrong-code count (nothing is written)."""
        ...

    def user(self, platform: str, user_id: str) -> PairedUser | None:
        """The user's pairing (revoked ones too), or ``None``."""
        ...

    def pending(self, *, now: float) -> list[PendingCode]:
        """Unexpired codes, oldest first."""
        ...

    def users(self) -> list[PairedUser]:
        """Every paired user (revoked ones too), by platform then approval time."""
        ...

    def revoke(self, platform: str, user_id: str, *, by: str, now: float) -> PairedUser | None:
        """Revoke a paired user and delete their pending code, if any; return the updated
        pairing, or ``None`` (nothing written) when the user was never paired. Revoking a
        revoked user changes nothing and returns it as it is."""
        ...

    def speak(self, adapter: str, chat: str, thread: str, user_id: str, *, now: float) -> None:
        """Record that allowed ``user_id`` spoke in that platform chat (insert or touch)."""
        ...

    def speakers(self, adapter: str, chat: str, thread: str) -> list[str]:
        """The users recorded as having spoken in that chat, first speaker first."""
        ...
