"""What the fake Bot API knows: its bot, the chats, the pending updates, what the bot sent,
the files, and the faults a test asked for. Thread-safe: the test thread writes (injects
messages, presses buttons) while the server thread serves the bot.

Objects are the Bot API's JSON shapes (https://core.telegram.org/bots/api#available-types)."""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Any

JSON = dict[str, Any]


@dataclass
class Fault:
    """The next ``times`` calls (of ``methods``, or any) answer ``status``."""

    times: int
    status: int
    retry_after: int | None = None
    methods: frozenset[str] | None = None
    params: dict[str, str] | None = None
    """Only calls with these parameter values (compared as text)."""

    def matches(self, method: str, params: dict[str, Any]) -> bool:
        if self.methods is not None and method.lower() not in self.methods:
            return False
        return all(str(params.get(k)) == v for k, v in (self.params or {}).items())


@dataclass
class SentMessage:
    """A message the bot sent, with its current text and every earlier version."""

    chat_id: int
    message_id: int
    text: str
    thread_id: int | None = None
    parse_mode: str | None = None
    reply_markup: JSON | None = None
    edits: list[str] = field(default_factory=list)
    """Earlier texts, oldest first (the message was edited from each to the next)."""
    kind: str = "text"
    """``text``, ``document`` or ``photo``."""
    file_name: str | None = None
    content: bytes | None = None
    sent_at: float = field(default_factory=time.monotonic)


@dataclass
class StoredFile:
    file_id: str
    unique_id: str
    path: str
    content: bytes


@dataclass
class Call:
    """One API request as the fake saw it (no token)."""

    method: str
    params: JSON
    status: int
    at: float = field(default_factory=time.monotonic)
    client: str | None = None
    """``host:port`` of the connection it came on (one client's long polls share one)."""


class FakeBotState:
    """Everything the fake Bot API holds (see the module docstring)."""

    def __init__(self, token: str, username: str) -> None:
        self.lock = threading.RLock()
        self.token = token
        bot_id = int(token.split(":", 1)[0]) if token.split(":", 1)[0].isdigit() else 1000
        self.bot: JSON = {"id": bot_id, "is_bot": True, "first_name": "Vigil", "username": username,
                          "can_join_groups": True, "can_read_all_group_messages": False,
                          "supports_inline_queries": False}
        self.chats: dict[int, JSON] = {}
        self.topics: dict[int, set[int]] = {}
        self.updates: list[JSON] = []
        """Updates not yet confirmed (a ``getUpdates`` offset above their id confirms them)."""
        self.delivered: dict[int, int] = {}
        """How many times each update id was handed out (by getUpdates or the webhook)."""
        self.confirmed_below = 0
        self.sent: list[SentMessage] = []
        self.actions: list[tuple[int, int | None, str]] = []
        self.callback_answers: list[JSON] = []
        self.commands: list[JSON] = []
        self.command_calls = 0
        self.webhook: JSON | None = None
        self.files: dict[str, StoredFile] = {}
        self.faults: list[Fault] = []
        self.calls: list[Call] = []
        self.polls: dict[str, int] = {}
        """Long polls (``getUpdates``) being held now, by client connection."""
        self.max_polls = 0
        """The most long polls held at one moment (two pollers of one bot: 2)."""
        self._update_ids = itertools.count(1)
        self._message_ids: dict[int, itertools.count[int]] = {}
        self._file_ids = itertools.count(1)
        self._callback_ids = itertools.count(1)

    # -- ids --------------------------------------------------------------------------------
    def next_message_id(self, chat_id: int) -> int:
        with self.lock:
            return next(self._message_ids.setdefault(chat_id, itertools.count(1)))

    # -- what users do ----------------------------------------------------------------------
    def chat(self, chat_id: int, kind: str, title: str | None = None, forum: bool = False, user: JSON | None = None) -> JSON:
        with self.lock:
            known = self.chats.get(chat_id)
            if known is not None:
                return known
            chat: JSON = {"id": chat_id, "type": kind}
            if kind == "private" and user is not None:
                chat["first_name"] = user.get("first_name", "User")
                if user.get("username"):
                    chat["username"] = user["username"]
            else:
                chat["title"] = title or f"Group {chat_id}"
                if forum:
                    chat["is_forum"] = True
            self.chats[chat_id] = chat
            return chat

    def add_update(self, body: JSON) -> JSON:
        with self.lock:
            update = {"update_id": next(self._update_ids), **body}
            self.updates.append(update)
            return update

    def add_file(self, content: bytes, folder: str, name: str) -> StoredFile:
        with self.lock:
            number = next(self._file_ids)
            stored = StoredFile(f"FILE{number:06d}x", f"uniq{number}", f"{folder}/file_{number}_{name}", content)
            self.files[stored.file_id] = stored
            return stored

    def new_callback_id(self) -> str:
        with self.lock:
            return f"{next(self._callback_ids):012d}"

    # -- what the bot asks ------------------------------------------------------------------
    def take_fault(self, method: str, params: dict[str, Any]) -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if fault.matches(method, params):
                    fault.times -= 1
                    if fault.times <= 0:
                        self.faults.remove(fault)
                    return fault
            return None

    def pending_updates(self, offset: int | None, limit: int, allowed: list[str] | None) -> list[JSON]:
        """Confirm the updates below ``offset`` and return those from it on (not counted as
        delivered: :meth:`hand_out` does that once the response is written)."""
        with self.lock:
            if offset is not None and offset > 0:
                self.confirmed_below = max(self.confirmed_below, offset)
                self.updates = [u for u in self.updates if u["update_id"] >= offset]
            elif offset is not None and offset < 0:
                self.updates = self.updates[offset:]
            found = [u for u in self.updates if allowed is None or any(k in u for k in allowed) or not allowed]
            return found[:limit]

    def hand_out(self, updates: list[JSON]) -> None:
        with self.lock:
            for update in updates:
                self.delivered[update["update_id"]] = self.delivered.get(update["update_id"], 0) + 1

    def confirm(self, update_id: int) -> None:
        """A webhook delivery succeeded (HTTP 2xx): the update is gone."""
        with self.lock:
            self.updates = [u for u in self.updates if u["update_id"] != update_id]
            self.confirmed_below = max(self.confirmed_below, update_id + 1)

    def record(self, method: str, params: JSON, status: int, client: str | None = None) -> None:
        with self.lock:
            self.calls.append(Call(method, params, status, client=client))

    def poll_started(self, client: str) -> None:
        with self.lock:
            self.polls[client] = self.polls.get(client, 0) + 1
            self.max_polls = max(self.max_polls, sum(self.polls.values()))

    def poll_ended(self, client: str) -> None:
        with self.lock:
            left = self.polls.get(client, 0) - 1
            if left > 0:
                self.polls[client] = left
            else:
                self.polls.pop(client, None)

    def add_sent(self, message: SentMessage) -> None:
        with self.lock:
            self.sent.append(message)

    def find_sent(self, chat_id: int, message_id: int) -> SentMessage | None:
        with self.lock:
            for message in self.sent:
                if message.chat_id == chat_id and message.message_id == message_id:
                    return message
            return None
