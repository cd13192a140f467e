"""What the fake Slack workspace holds: channels, the bot's messages (with their edits),
ephemeral messages, uploaded and hosted files, the calls it was sent, and the faults it is
told to inject. Thread-safe: the test thread reads it while the server thread writes it."""

from __future__ import annotations

import itertools
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Message:
    """A message the bot posted (``chat.postMessage``), as it is now."""

    channel: str
    ts: str
    text: str
    thread_ts: str | None = None
    blocks: list[dict[str, Any]] | None = None
    edits: list[str] = field(default_factory=list)
    """Every text it had after a ``chat.update``, in order."""
    deleted: bool = False


@dataclass
class Ephemeral:
    channel: str
    user: str
    text: str
    thread_ts: str | None = None
    blocks: list[dict[str, Any]] | None = None


@dataclass
class Upload:
    """A file the bot uploaded (files.getUploadURLExternal + upload + completeUploadExternal)."""

    id: str
    filename: str
    length: int
    data: bytes | None = None
    channel: str | None = None
    thread_ts: str | None = None
    initial_comment: str | None = None
    title: str | None = None


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    status: int
    at: float


class SlackState:
    """The workspace of one fake. Ids follow Slack's shapes (``T…``, ``U…``, ``C…``/``D…``)."""

    def __init__(self, *, bot_token: str, team_id: str = "T0VIGIL", bot_user: str = "U0VIGILBOT") -> None:
        self.lock = threading.RLock()
        self.bot_token = bot_token
        self.team_id = team_id
        self.bot_user = bot_user
        self.bot_id = "B0VIGILBOT"
        self.app_token = "xapp-1-A0VIGIL-" + secrets.token_hex(8)
        self.base_url = ""
        """The fake's own address (set when it serves): where ``response_url`` s point."""
        self.responses: list[dict[str, Any]] = []
        """What apps posted to a slash command's ``response_url``."""
        self.socket_url: str | None = None
        """Where ``apps.connections.open`` sends apps (the fake's Socket Mode server)."""
        self.channels: dict[str, str] = {}
        """Channel id → ``im`` or ``channel``: messages to any other id are ``channel_not_found``."""
        self.messages: list[Message] = []
        self.ephemerals: list[Ephemeral] = []
        self.uploads: dict[str, Upload] = {}
        self.hosted: dict[str, bytes] = {}
        """Inbound files the users "shared", by path, served to the bearer token only."""
        self.calls: list[Call] = []
        self.fail_status: int | None = None
        self.fail_count = 0
        self.fail_until = 0.0
        self.fail_method: str | None = None
        self.fail_error = "fatal_error"
        self.rate_limited = 0
        self.retry_after = 1
        self._clock = itertools.count(1)

    # -- what tests set up ------------------------------------------------------------------
    def channel(self, channel_id: str, kind: str = "channel") -> None:
        with self.lock:
            self.channels.setdefault(channel_id, kind)

    def new_ts(self) -> str:
        """A fresh message timestamp, unique and increasing (``seconds.micro``)."""
        with self.lock:
            return f"{int(time.time())}.{next(self._clock):06d}"

    def new_id(self, prefix: str) -> str:
        return prefix + secrets.token_hex(5).upper()

    # -- fault injection --------------------------------------------------------------------
    def fault(self, *, status: int | None = None, count: int = 0, seconds: float = 0.0,
              method: str | None = None, error: str = "fatal_error") -> None:
        """Answer the next ``count`` Web API calls (or every call for ``seconds``) with
        ``status`` (a 5xx; or 200, Slack's refusal: ``ok`` false with ``error``, such as
        ``not_in_channel``) — only calls of ``method`` if given; ``status=None`` clears it."""
        with self.lock:
            self.fail_error = error
            self.fail_method = method
            self.fail_status = status
            self.fail_count = count
            self.fail_until = time.monotonic() + seconds if seconds else 0.0

    def rate_limit(self, count: int, retry_after: int = 1) -> None:
        """Answer the next ``count`` calls with 429 and ``Retry-After: retry_after``."""
        with self.lock:
            self.rate_limited = count
            self.retry_after = retry_after

    def injected(self, method: str = "") -> tuple[int, dict[str, str]] | None:
        """The fault a call of ``method`` gets, if any (consumes one of a counted fault)."""
        with self.lock:
            if self.rate_limited > 0:
                self.rate_limited -= 1
                return 429, {"Retry-After": str(self.retry_after)}
            if self.fail_status is not None and self.fail_method in (None, method):
                if self.fail_until and time.monotonic() < self.fail_until:
                    return self.fail_status, {}
                if self.fail_count > 0:
                    self.fail_count -= 1
                    return self.fail_status, {}
                self.fail_status = None
            return None

    # -- what tests read --------------------------------------------------------------------
    def posted(self, channel: str | None = None, thread_ts: str | None = None) -> list[Message]:
        """Messages the bot posted (and did not delete), oldest first; ``thread_ts`` filters
        to that thread (``""``: top level only)."""
        with self.lock:
            found = [m for m in self.messages if not m.deleted and (channel is None or m.channel == channel)]
        if thread_ts is not None:
            found = [m for m in found if (m.thread_ts or "") == thread_ts]
        return found

    def texts(self, channel: str | None = None, thread_ts: str | None = None) -> list[str]:
        return [m.text for m in self.posted(channel, thread_ts)]

    def calls_of(self, method: str) -> list[Call]:
        with self.lock:
            return [c for c in self.calls if c.method == method]

    def reset(self) -> None:
        """Forget what the bot did, and the faults still to come."""
        with self.lock:
            self.fail_status, self.fail_count, self.fail_until, self.rate_limited = None, 0, 0.0, 0
            self.messages.clear()
            self.ephemerals.clear()
            self.responses.clear()
            self.uploads.clear()
            self.calls.clear()
            self.fault()
            self.rate_limited = 0
