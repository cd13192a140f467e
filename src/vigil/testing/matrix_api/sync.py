"""``GET /sync`` of the fake homeserver: what a client gets since a position.

Joined rooms bring their timeline events after ``since`` that the account may see (from its
join on), and their whole state when the client asks for ``full_state``, syncs for the first
time, or joined after ``since``; invitations bring the room's stripped state and the invite
itself; the encryption parts come from :mod:`.keys`. The request is held until there is
something new or its ``timeout`` (milliseconds) passes, as a homeserver's long poll is.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from vigil.testing.matrix_api.state import Account, HomeserverState, Room

JSON = dict[str, Any]
MAX_WAIT = 30.0
STRIPPED = ("m.room.create", "m.room.name", "m.room.encryption", "m.room.join_rules")


def parse_since(raw: str | None) -> int | None:
    if not raw:
        return None
    try:
        return int(raw[1:]) if raw.startswith("s") else int(raw)
    except ValueError:
        return None


async def long_poll(state: "HomeserverState", token: str, since: int | None, timeout_ms: int,
                    full_state: bool, stopping: Callable[[], bool]) -> JSON:
    """Wait (at most ``timeout_ms``) for news, then build the response."""
    account = state.accounts[token]
    deadline = time.monotonic() + min(max(timeout_ms, 0) / 1000, MAX_WAIT)
    while since is not None and not full_state and not _news(state, account, since):
        if time.monotonic() >= deadline or stopping():
            break
        await asyncio.sleep(0.02)
    return build(state, token, since, full_state)


def _shares(state: "HomeserverState", user: str) -> set[str]:
    """Users sharing a joined room with ``user`` (themselves included)."""
    found = {user}
    for room in state.rooms.values():
        if room.membership(user) == "join":
            found.update(room.members())
    return found


def _news(state: "HomeserverState", account: "Account", since: int) -> bool:
    with state.lock:
        for room in state.rooms.values():
            membership = room.membership(account.user_id)
            if membership not in ("join", "invite"):
                continue
            if room.timeline and room.timeline[-1][0] > since:
                if any(position > since and _visible(room, account.user_id, position, event)
                       for position, event in reversed(room.timeline)):
                    return True
        return state.keys.pending(account, since, _shares(state, account.user_id))


def _visible(room: "Room", user: str, position: int, event: JSON) -> bool:
    membership = room.membership(user)
    if membership == "invite":
        return event.get("type") == "m.room.member" and event.get("state_key") == user
    return position >= room.joined_at.get(user, 1 << 62)


def build(state: "HomeserverState", token: str, since: int | None, full_state: bool) -> JSON:
    account = state.accounts[token]
    user = account.user_id
    with state.lock:
        joined: JSON = {}
        invited: JSON = {}
        for room in state.rooms.values():
            membership = room.membership(user)
            if membership == "join":
                entry = _joined(room, user, since, full_state)
                if entry is not None:
                    joined[room.room_id] = entry
            elif membership == "invite":
                invite = room.state[("m.room.member", user)]
                position = next(p for p, e in reversed(room.timeline) if e["event_id"] == invite["event_id"])
                if since is None or full_state or position > since:
                    stripped = [_strip(room.state[key]) for key in room.state if key[0] in STRIPPED]
                    invited[room.room_id] = {"invite_state": {"events": [*stripped, _strip(invite)]}}
        response: JSON = {"next_batch": f"s{state.position}", "rooms": {"join": joined, "invite": invited, "leave": {}},
                          "presence": {"events": []}, "account_data": {"events": []}}
        response.update(state.keys.for_sync(account, since or 0, _shares(state, user)))
        return response


def _joined(room: "Room", user: str, since: int | None, full_state: bool) -> JSON | None:
    joined_at = room.joined_at.get(user, 0)
    fresh = since is None or joined_at > since
    timeline = [event for position, event in room.timeline
                if position >= joined_at and (since is None or position > since)]
    if since is None:
        timeline = timeline[-20:]
    if not timeline and not (full_state or fresh):
        return None
    state_events = list(room.state.values()) if (full_state or fresh) else []
    return {
        "timeline": {"events": [_client(event) for event in timeline], "limited": False, "prev_batch": f"s{since or 0}"},
        "state": {"events": [_client(event) for event in state_events]},
        "ephemeral": {"events": []},
        "account_data": {"events": []},
        "summary": {"m.joined_member_count": len(room.members()), "m.invited_member_count": len(room.members("invite"))},
    }


def _client(event: JSON) -> JSON:
    """An event as the client API shows it (without its room id, which the sync names)."""
    return {key: value for key, value in event.items() if key != "room_id"}


def _strip(event: JSON) -> JSON:
    return {key: event[key] for key in ("type", "state_key", "sender", "content") if key in event}
