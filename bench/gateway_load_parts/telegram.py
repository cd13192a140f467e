"""The Telegram side of ``gateway_load.py``: users writing to the bot through the fake Bot API,
and what reached them.

The fake (:class:`FakeTelegramServer`) runs in the bench's process, in its own thread, like the
fake model. Each bench user has a private chat with the bot (chat id = user id). Message ``n``
of user ``u`` carries the tag ``[u.n]`` and the fake model answers it ``ok u.n`` (one rule per
message), so every answer names its message. A message is *available to the bot* once
:meth:`FakeTelegramServer.message` returned (the next ``getUpdates`` hands it out); its answer
has *reached the fake* when a ``sendMessage`` or ``editMessageText`` carrying that whole text
was served. The fake's call log is watched by wrapping its ``record`` hook: no polling.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from vigil.testing.fake_model import FakeModelServer
from vigil.testing.telegram_api.server import FakeTelegramServer

FIRST_USER = 700_000_001
ANSWER_METHODS = frozenset({"sendmessage", "editmessagetext"})

Key = tuple[int, int]
"""(user, message number)."""


def answer_of(key: Key) -> str:
    return f"ok {key[0]}.{key[1]}"


def key_of(text: str) -> Key | None:
    if not text.startswith("ok "):
        return None
    user, _, n = text[3:].partition(".")
    return (int(user), int(n)) if user.isdigit() and n.isdigit() else None


@dataclass
class Watch:
    """Answers as they reach the fake (when, per message) and waiters woken on the bench's loop."""

    times: dict[Key, list[float]] = field(default_factory=dict)
    waiters: dict[Key, asyncio.Event] = field(default_factory=dict)

    def seen(self, key: Key, at: float) -> None:  # on the bench's loop
        self.times.setdefault(key, []).append(at)
        event = self.waiters.get(key)
        if event is not None:
            event.set()

    async def wait(self, key: Key, timeout: float) -> float | None:
        """When the first answer to ``key`` reached the fake, or ``None`` after ``timeout`` s."""
        if key not in self.times:
            event = self.waiters.setdefault(key, asyncio.Event())
            try:
                await asyncio.wait_for(event.wait(), timeout)
            except asyncio.TimeoutError:
                return None
            finally:
                self.waiters.pop(key, None)
        return self.times[key][0]


def watch(fake: FakeTelegramServer, loop: asyncio.AbstractEventLoop) -> Watch:
    """Start recording ``fake``'s answers for code running on ``loop``."""
    seen = Watch()
    state = fake.state
    record = state.record

    def recording(method: str, params: dict[str, Any], status: int, client: str | None = None) -> None:
        record(method, params, status, client)
        if status == 200 and method.lower() in ANSWER_METHODS:
            key = key_of(str(params.get("text")))
            if key is not None:
                loop.call_soon_threadsafe(seen.seen, key, time.perf_counter())

    state.record = recording  # type: ignore[method-assign]
    return seen


@dataclass
class Side:
    """One phase's figures for the Telegram users."""

    latencies: list[float] = field(default_factory=list)
    written: dict[Key, float] = field(default_factory=dict)
    """When each message became available to the bot."""
    timeouts: int = 0
    ended: float = 0.0


def users(count: int) -> list[int]:
    return [FIRST_USER + n for n in range(count)]


def script(model: FakeModelServer, allow: list[int], messages: int) -> None:
    """The fake model answers each Telegram message with its own text (see the module docstring)."""
    for user in allow:
        for n in range(messages):
            model.rule(contains=f"[{user}.{n}]", reply=answer_of((user, n)))


async def conversation(fake: FakeTelegramServer, seen: Watch, user: int, messages: int, side: Side,
                       counter: list[int], timeout: float) -> None:
    """``user`` writes ``messages`` messages, each once the previous one is answered (a
    message not answered within ``timeout`` seconds is counted and the next one written)."""
    for n in range(messages):
        fake.message(user, user, f"message {n} from telegram user {user} [{user}.{n}]")
        available = time.perf_counter()
        side.written[(user, n)] = available
        counter[0] += 1
        answered = await seen.wait((user, n), timeout)
        if answered is None:
            side.timeouts += 1
        else:
            side.latencies.append(answered - available)
    side.ended = max(side.ended, time.perf_counter())


def delivered(fake: FakeTelegramServer, side: Side) -> dict[str, int]:
    """What the users see: for each message written, the bot messages showing its answer
    (lost: none, duplicated: more than one)."""
    shown = Counter(key_of(m.text) for m in fake.sent() if m.kind == "text")
    return {"written": len(side.written), "lost": sum(1 for key in side.written if shown[key] == 0),
            "duplicated": sum(1 for key in side.written if shown[key] > 1),
            "other": sum(count for key, count in shown.items() if key is None)}


def doubles(seen: Watch, killed: float) -> int:
    """Answers shown once before the kill and again by the restarted gateway."""
    return sum(1 for times in seen.times.values() if len(times) > 1 and times[0] < killed < times[-1])


def calls(fake: FakeTelegramServer) -> str:
    """The Bot API calls the gateway made, by method, and how many failed."""
    made = Counter(call.method for call in fake.calls())
    failed = Counter(f"{call.method} {call.status}" for call in fake.calls() if call.status != 200)
    listed = ", ".join(f"{method} {count}" for method, count in made.most_common())
    return listed + (f"; failed: {', '.join(f'{k} x{v}' for k, v in failed.most_common())}" if failed else "; none failed")


def all_delivered(fake: FakeTelegramServer, side: Side) -> bool:
    return delivered(fake, side)["lost"] == 0


def config(fake: FakeTelegramServer, allow: list[int]) -> str:
    """The ``telegram`` section of the gateway's config.yaml."""
    listed = ", ".join(f"'{user}'" for user in allow)
    return f"telegram:\n  enabled: true\n  api_url: {fake.api_url}\n  allow: [{listed}]\n"
