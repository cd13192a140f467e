"""What the fake homeserver holds: accounts and their access tokens, rooms with their state and
timelines on one stream of positions, transactions, media, typing notices, and the people's
side of it (create a room, invite, write, react, upload) for tests to play. Thread-safe: the
server thread and the test thread share it under one lock.

A sync token is ``s<position>``: a client that syncs ``since`` a token gets what came after
that position. :meth:`HomeserverState.confirmed` is the highest position a client synced
from, the "acknowledgement" of everything before it (the next ``/sync`` moving its token past
an event is the only sign a Matrix client gives that it has the event).
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from vigil.testing.matrix_api.keys import DeviceKeys

JSON = dict[str, Any]
SERVER_NAME = "vigil.test"


@dataclass
class Room:
    room_id: str
    state: dict[tuple[str, str], JSON] = field(default_factory=dict)
    timeline: list[tuple[int, JSON]] = field(default_factory=list)
    joined_at: dict[str, int] = field(default_factory=dict)
    """Position of each member's (latest) join: what they may see of the timeline."""

    def membership(self, user: str) -> str | None:
        event = self.state.get(("m.room.member", user))
        return None if event is None else event["content"].get("membership")

    def members(self, membership: str = "join") -> list[str]:
        return [key for (kind, key), event in self.state.items()
                if kind == "m.room.member" and event["content"].get("membership") == membership]

    @property
    def encrypted(self) -> bool:
        return ("m.room.encryption", "") in self.state


@dataclass
class Fault:
    """The next ``times`` requests whose path holds ``path`` answer ``status``."""

    times: int
    status: int
    path: str
    body: JSON


@dataclass
class Account:
    user_id: str
    device_id: str
    displayname: str


class HomeserverState:
    """See the module docstring."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.position = 0
        self.accounts: dict[str, Account] = {}
        """By access token."""
        self.rooms: dict[str, Room] = {}
        self.transactions: dict[tuple[str, str], str] = {}
        self.media: dict[str, tuple[bytes, str, str]] = {}
        self.typing: list[tuple[str, str, bool]] = []
        """Every typing notice: (room, user, typing)."""
        self.synced_from: dict[str, int] = {}
        """Highest position each access token synced from."""
        self.sync_calls: dict[str, int] = {}
        self.faults: list[Fault] = []
        self.keys = DeviceKeys(self)

    # -- accounts -----------------------------------------------------------------------------
    def register(self, user_id: str, *, token: str | None = None, device_id: str | None = None,
                 displayname: str | None = None) -> str:
        """An account (or another device of one) and its access token."""
        token = token or "syt_" + secrets.token_urlsafe(24)
        with self.lock:
            self.accounts[token] = Account(user_id, device_id or "DEV" + secrets.token_hex(4).upper(),
                                           displayname or user_id[1:].split(":", 1)[0])
        return token

    def account(self, token: str) -> Account | None:
        with self.lock:
            return self.accounts.get(token)

    def displayname(self, user_id: str) -> str:
        with self.lock:
            for account in self.accounts.values():
                if account.user_id == user_id:
                    return account.displayname
        return user_id[1:].split(":", 1)[0]

    # -- the stream -----------------------------------------------------------------------------
    def next_position(self) -> int:
        with self.lock:
            self.position += 1
            return self.position

    def add_event(self, room_id: str, sender: str, kind: str, content: JSON, *, state_key: str | None = None,
                  txn: str | None = None) -> JSON:
        """Append an event to a room's timeline (and its state, for a state event)."""
        with self.lock:
            room = self.rooms[room_id]
            position = self.next_position()
            event: JSON = {"event_id": "$" + secrets.token_urlsafe(18), "sender": sender, "type": kind,
                           "origin_server_ts": int(time.time() * 1000), "content": content, "room_id": room_id,
                           "unsigned": {"transaction_id": txn} if txn else {}}
            if state_key is not None:
                event["state_key"] = state_key
                room.state[(kind, state_key)] = event
                if kind == "m.room.member" and content.get("membership") == "join":
                    room.joined_at[state_key] = position
            room.timeline.append((position, event))
            return event

    def replay(self, room_id: str, event_id: str) -> None:
        """Hand an event out once more, as a server does to a client resuming from an older
        token: the same event (same id) again at a new position."""
        with self.lock:
            room = self.rooms[room_id]
            event = next(event for _position, event in room.timeline if event["event_id"] == event_id)
            room.timeline.append((self.next_position(), event))

    def confirmed(self, token: str) -> int:
        with self.lock:
            return self.synced_from.get(token, 0)

    # -- the people's side ------------------------------------------------------------------------
    def create_room(self, creator: str, *, invite: list[str] = (), name: str | None = None,  # type: ignore[assignment]
                    encrypted: bool = False, direct: bool = False, members: list[str] = ()) -> str:  # type: ignore[assignment]
        """A room ``creator`` made (with ``members`` joined at once) and the invitations sent."""
        room_id = f"!{secrets.token_urlsafe(12)}:{SERVER_NAME}"
        with self.lock:
            self.rooms[room_id] = Room(room_id)
            self.add_event(room_id, creator, "m.room.create", {"creator": creator, "room_version": "10"}, state_key="")
            self.add_event(room_id, creator, "m.room.member", self._member("join", creator), state_key=creator)
            if name:
                self.add_event(room_id, creator, "m.room.name", {"name": name}, state_key="")
            if encrypted:
                self.add_event(room_id, creator, "m.room.encryption", {"algorithm": "m.megolm.v1.aes-sha2"}, state_key="")
            for member in members:
                self.add_event(room_id, member, "m.room.member", self._member("join", member), state_key=member)
            for user in invite:
                self.invite(room_id, creator, user, direct=direct)
        return room_id

    def invite(self, room_id: str, inviter: str, user: str, *, direct: bool = False) -> None:
        content = {"membership": "invite", **({"is_direct": True} if direct else {})}
        self.add_event(room_id, inviter, "m.room.member", content, state_key=user)

    def join(self, room_id: str, user: str) -> None:
        self.add_event(room_id, user, "m.room.member", self._member("join", user), state_key=user)

    def leave(self, room_id: str, user: str) -> None:
        self.add_event(room_id, user, "m.room.member", {"membership": "leave"}, state_key=user)

    def _member(self, membership: str, user: str) -> JSON:
        return {"membership": membership, "displayname": self.displayname(user)}

    def say(self, room_id: str, sender: str, body: str, *, thread: str | None = None, mentions: list[str] = (),  # type: ignore[assignment]
            reply_to: str | None = None, **content: Any) -> str:
        """A person writes ``body`` (in the thread rooted at ``thread``); returns the event id."""
        message: JSON = {"msgtype": "m.text", "body": body, **content}
        if mentions:
            message["m.mentions"] = {"user_ids": list(mentions)}
        if thread:
            message["m.relates_to"] = {"rel_type": "m.thread", "event_id": thread, "is_falling_back": True,
                                       "m.in_reply_to": {"event_id": reply_to or thread}}
        elif reply_to:
            message["m.relates_to"] = {"m.in_reply_to": {"event_id": reply_to}}
        return self.add_event(room_id, sender, "m.room.message", message)["event_id"]

    def react(self, room_id: str, sender: str, event_id: str, key: str) -> str:
        content = {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": key}}
        return self.add_event(room_id, sender, "m.reaction", content)["event_id"]

    def share_file(self, room_id: str, sender: str, name: str, data: bytes, mimetype: str = "text/plain",
                   caption: str = "") -> str:
        """A person uploads a file and posts it in the room (with ``caption`` as its body, as
        Matrix 1.10 has it); returns the event id."""
        url = self.store_media(data, mimetype, name)
        content = {"msgtype": "m.file", "body": caption or name, "filename": name, "url": url,
                   "info": {"mimetype": mimetype, "size": len(data)}}
        return self.add_event(room_id, sender, "m.room.message", content)["event_id"]

    def store_media(self, data: bytes, mimetype: str, name: str) -> str:
        media_id = secrets.token_urlsafe(12)
        with self.lock:
            self.media[media_id] = (data, mimetype, name)
        return f"mxc://{SERVER_NAME}/{media_id}"

    # -- what a test reads -----------------------------------------------------------------------
    def events(self, room_id: str, *, kind: str | None = None, sender: str | None = None) -> list[JSON]:
        """The room's events as a person sees them now: each once, redacted ones left out."""
        with self.lock:
            timeline = self.rooms[room_id].timeline
            seen: set[str] = {str(event["content"].get("redacts")) for _position, event in timeline
                              if event["type"] == "m.room.redaction"}
            found = []
            for _position, event in timeline:
                if event["event_id"] in seen:
                    continue
                seen.add(event["event_id"])
                if (kind is None or event["type"] == kind) and (sender is None or event["sender"] == sender):
                    found.append(event)
            return found

    def messages(self, room_id: str, sender: str, *, thread: str | None | bool = False) -> list[JSON]:
        """``sender``'s messages in the room as a person sees them now (edits applied, the
        edits themselves left out), oldest first; ``thread``: only those in that thread
        (``None``: only those outside any thread; ``False``: all)."""
        events = self.events(room_id, kind="m.room.message", sender=sender)
        latest: dict[str, JSON] = {}
        for event in events:
            relation = event["content"].get("m.relates_to") or {}
            if relation.get("rel_type") == "m.replace":
                latest[relation["event_id"]] = event["content"].get("m.new_content") or {}
        shown = []
        for event in events:
            relation = event["content"].get("m.relates_to") or {}
            if relation.get("rel_type") == "m.replace":
                continue
            root = relation.get("event_id") if relation.get("rel_type") == "m.thread" else None
            if thread is not False and root != thread:
                continue
            shown.append({**event, "content": {**event["content"], **latest.get(event["event_id"], {})}})
        return shown

    def texts(self, room_id: str, sender: str, *, thread: str | None | bool = False) -> list[str]:
        """The bodies of :meth:`messages`."""
        return [str(event["content"].get("body", "")) for event in self.messages(room_id, sender, thread=thread)]

    # -- faults -------------------------------------------------------------------------------------
    def fail(self, times: int, status: int = 502, *, path: str = "", retry_after_ms: int | None = None) -> None:
        """The next ``times`` requests whose path holds ``path`` answer ``status`` (429 with
        ``retry_after_ms``: M_LIMIT_EXCEEDED)."""
        body: JSON = {"errcode": "M_UNKNOWN", "error": f"injected {status}"}
        if status == 429:
            body = {"errcode": "M_LIMIT_EXCEEDED", "error": "Too many requests",
                    **({"retry_after_ms": retry_after_ms} if retry_after_ms is not None else {})}
        with self.lock:
            self.faults.append(Fault(times, status, path, body))

    def take_fault(self, path: str) -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if fault.path in path and fault.times > 0:
                    fault.times -= 1
                    return fault
            return None

    def clear_faults(self) -> None:
        with self.lock:
            self.faults.clear()
