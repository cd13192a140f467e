"""The refresh epoch: how a request to rebuild system prompts reaches the sessions.

``state_meta`` holds one record for the profile. Every refresh request takes the next value of
a counter that only grows; a profile-wide request also raises the epoch every session must
satisfy, a per-session request is recorded in that session's model configuration. A session
records the counter value its stored prompt satisfies.
"""

from __future__ import annotations

from dataclasses import dataclass

from vigil.store import SessionRecord, SessionStore, StoreError

REFRESH_KEY = "prompt:refresh"
"""state_meta: ``{"counter": N, "profile_epoch": M}``. ``counter`` only grows; every refresh
request takes the next value. ``profile_epoch`` is the value every session must satisfy."""
SATISFIED = "prompt_epoch"
REQUESTED = "prompt_refresh_request"
EVENTS = "prompt_events"


class PromptDamaged(StoreError):
    """A session's stored prompt is missing, empty or does not match its hash."""


@dataclass(frozen=True, slots=True)
class RefreshState:
    """The profile's refresh counters (both 0 before the first request)."""

    counter: int = 0
    profile_epoch: int = 0

    @classmethod
    def from_value(cls, value: object) -> "RefreshState":
        """Parse the stored record; anything unreadable counts as no request yet."""
        if not isinstance(value, dict):
            return cls()
        return cls(int(value.get("counter", 0) or 0), int(value.get("profile_epoch", 0) or 0))

    def as_value(self) -> dict[str, int]:
        return {"counter": self.counter, "profile_epoch": self.profile_epoch}


def read_refresh_state(store: SessionStore) -> RefreshState:
    """One point read of the profile's refresh counters."""
    entry = store.get_meta(REFRESH_KEY)
    return RefreshState.from_value(entry.value if entry is not None else None)


def needs_rebuild(session: SessionRecord, state: RefreshState) -> str | None:
    """Why this session must rebuild its prompt now, or ``None`` to replay the stored one."""
    if session.system_prompt_hash is None:
        return "new session"
    satisfied = int(session.model_config.get(SATISFIED, 0) or 0)
    if state.profile_epoch > satisfied:
        return "profile refresh"
    if int(session.model_config.get(REQUESTED, 0) or 0) > satisfied:
        return "session refresh"
    return None
