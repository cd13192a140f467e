"""Refresh requests and damage checks for stored system prompts (no model needed)."""

from __future__ import annotations

from dataclasses import dataclass

from vigil.prompt.epoch import REFRESH_KEY, REQUESTED, RefreshState
from vigil.store import SessionRecord, SessionStore, StoreError, prompt_hash

_CAS_ATTEMPTS = 50


@dataclass(frozen=True, slots=True)
class RefreshRequest:
    """What ``refresh-prompts`` recorded."""

    scope: str  # "profile" or "session"
    epoch: int
    sessions_with_prompt: int
    requested_session: str | None = None
    target_session: str | None = None

    @property
    def redirected(self) -> bool:
        return self.requested_session is not None and self.requested_session != self.target_session

    def as_dict(self) -> dict[str, object]:
        data: dict[str, object] = {
            "scope": self.scope,
            "epoch": self.epoch,
            "sessions_with_prompt": self.sessions_with_prompt,
        }
        if self.scope == "session":
            data.update(
                requested_session=self.requested_session,
                target_session=self.target_session,
                redirected=self.redirected,
            )
        return data


def _next_counter(store: SessionStore, *, profile_wide: bool) -> int:
    """Take the next counter value atomically (several processes may ask at once)."""
    for _ in range(_CAS_ATTEMPTS):
        entry = store.get_meta(REFRESH_KEY)
        state = RefreshState.from_value(entry.value if entry is not None else None)
        counter = state.counter + 1
        new = RefreshState(counter, counter if profile_wide else state.profile_epoch)
        if store.compare_and_set_meta(REFRESH_KEY, entry.value if entry else None, new.as_value()):
            return counter
    raise StoreError("could not record the refresh request: the store is too busy, try again")


def request_refresh(store: SessionStore, session_ref: str | None = None) -> RefreshRequest:
    """Record a refresh request for every session, or for one (by id or unique prefix).

    A session that was compressed forwards the request to its newest continuation. Nothing
    is rebuilt here: each session rebuilds on its next turn, in whichever process runs it.
    """
    if session_ref is None:
        counter = _next_counter(store, profile_wide=True)
        count = sum(1 for s in store.list_sessions() if s.system_prompt_hash)
        return RefreshRequest("profile", counter, count)
    asked = store.resolve_session(session_ref)
    target = store.newest_continuation(asked)
    counter = _next_counter(store, profile_wide=False)
    session = store.update_session(
        target,
        model_config=lambda config: {
            **config,
            REQUESTED: max(counter, int(config.get(REQUESTED, 0) or 0)),
        },
    )
    return RefreshRequest("session", counter, 1 if session.system_prompt_hash else 0, asked, target)


@dataclass(frozen=True, slots=True)
class Damage:
    """A session whose stored prompt cannot be replayed."""

    session: SessionRecord
    problem: str  # "missing", "empty" or "hash mismatch"


def find_damaged(store: SessionStore, session_ref: str | None = None) -> list[Damage]:
    """Sessions whose stored prompt row is missing, empty or does not match its hash.

    Sessions that never built a prompt are healthy: they build one on their first turn.
    """
    if session_ref is not None:
        sessions = [store.get_session(store.resolve_session(session_ref))]
    else:
        sessions = store.list_sessions()
    damaged: list[Damage] = []
    verdicts: dict[str, str | None] = {}
    for session in sessions:
        digest = session.system_prompt_hash
        if not digest:
            continue
        if digest not in verdicts:
            verdicts[digest] = _check(store.get_prompt(digest), digest)
        problem = verdicts[digest]
        if problem is not None:
            damaged.append(Damage(session, problem))
    return damaged


def _check(text: str | None, digest: str) -> str | None:
    if text is None:
        return "missing"
    if not text.strip():
        return "empty"
    if prompt_hash(text) != digest:
        return "hash mismatch"
    return None
