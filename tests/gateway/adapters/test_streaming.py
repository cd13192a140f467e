"""The shared streamer over a recording platform: the pace, the first message, the claim,
placeholders, finished turns and the platform's errors."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from vigil.gateway.adapters.base import DeliveryError
from vigil.gateway.adapters.previews import DurablePreviews
from vigil.gateway.adapters.streaming import MessageGone, Outcome, StreamStyle, Streamer
from vigil.store.gateway.gateway_tables import RouteKey
from vigil.testing.waiting import eventually

ROUTE = RouteKey("chatapp", "c1", "", "u1")


class Recorder:
    """A platform that keeps what it was asked, and fails when told to."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, str, Any, str]] = []
        self.fail: list[Exception] = []
        self.typed = 0

    async def post(self, route: RouteKey, text: str) -> Any:
        self._maybe_fail()
        message = f"m{len([c for c in self.calls if c[1] == 'post'])}"
        self.calls.append((time.monotonic(), "post", message, text))
        return message

    async def edit(self, route: RouteKey, message: Any, text: str) -> None:
        self._maybe_fail()
        self.calls.append((time.monotonic(), "edit", message, text))

    async def finish(self, route: RouteKey, message: Any, shown: str, outcome: Outcome) -> None:
        self.calls.append((time.monotonic(), outcome, message, shown))

    async def typing(self, route: RouteKey) -> None:
        self.typed += 1

    def _maybe_fail(self) -> None:
        if self.fail:
            raise self.fail.pop(0)


def _streamer(**style: Any) -> tuple[Recorder, Streamer]:
    recorder = Recorder()
    return recorder, Streamer(recorder, DurablePreviews("chatapp", lambda: None), StreamStyle(**style))


async def test_edits_keep_the_pace_and_the_claim_hands_over_the_message() -> None:
    recorder, streamer = _streamer(interval=0.15, limit=40, suffix=" …", typing_every=0.05)
    began = time.monotonic()
    await streamer.live(ROUTE, {"type": "turn_began", "kind": "user", "text": "hi"})
    for n in range(12):
        await streamer.live(ROUTE, {"type": "delta", "text": f"word{n} "})
        await asyncio.sleep(0.05)  # the model writing
    await eventually(lambda: len(recorder.calls) >= 3 or None, what="a few edits")
    answer = "".join(f"word{n} " for n in range(12)) + "end"
    await streamer.live(ROUTE, {"type": "turn_ended", "content": answer})
    claimed = await streamer.claim(ROUTE, answer)
    assert claimed is not None and claimed.message == "m0"
    times = [at for at, *_ in recorder.calls]
    assert recorder.calls[0][1] == "post" and times[0] - began >= 0.15  # the first after one interval
    assert all(b - a >= 0.14 for a, b in zip(times, times[1:]))  # the pace, between every two calls
    assert time.monotonic() - times[-1] >= 0.14  # the claim leaves the sender's final edit in pace too
    assert all(len(text) <= 40 and text.endswith(" …") for *_, text in recorder.calls)
    assert recorder.typed >= 2
    assert await streamer.claim(ROUTE, answer) is None  # taken once
    await streamer.close()


async def test_a_quick_turn_has_no_message_and_a_stopped_one_is_finished() -> None:
    recorder, streamer = _streamer(interval=0.1)
    await streamer.live(ROUTE, {"type": "turn_began", "kind": "user"})
    await streamer.live(ROUTE, {"type": "delta", "text": "quick"})
    await streamer.live(ROUTE, {"type": "turn_ended", "content": "quick"})
    claimed = await streamer.claim(ROUTE, "quick")
    assert claimed is not None and claimed.message is None and recorder.calls == []
    await streamer.live(ROUTE, {"type": "turn_began", "kind": "user"})
    await streamer.live(ROUTE, {"type": "delta", "text": "slow"})
    await eventually(lambda: recorder.calls or None, what="the first message")
    await streamer.live(ROUTE, {"type": "turn_ended", "cancelled": True})
    await eventually(lambda: recorder.calls[-1][1] == "stopped" or None, what="the message finished")
    assert recorder.calls[-1][2:] == ("m0", "slow") and await streamer.claim(ROUTE) is None
    await streamer.close()


async def test_placeholders_kinds_and_platform_errors() -> None:
    recorder, streamer = _streamer(interval=0.05, placeholder="working", kinds=frozenset({"user"}),
                                   failed_answer_replaces=True)
    await streamer.live(ROUTE, {"type": "turn_began", "kind": "heartbeat"})
    await streamer.live(ROUTE, {"type": "delta", "text": "beat"})
    await streamer.live(ROUTE, {"type": "turn_ended", "content": "beat"})
    assert recorder.calls == [] and await streamer.claim(ROUTE) is None  # not a streamed kind
    recorder.fail = [DeliveryError("slow down", retry_after=0.3)]
    await streamer.live(ROUTE, {"type": "turn_began", "kind": "user"})  # the placeholder's post is refused
    assert recorder.calls == []
    await streamer.live(ROUTE, {"type": "delta", "text": "a"})
    await eventually(lambda: recorder.calls or None, what="the retried post")
    assert recorder.calls[0][1:] == ("post", "m0", "a")
    recorder.fail = [MessageGone("deleted")]
    await streamer.live(ROUTE, {"type": "delta", "text": "b"})  # the edit finds it gone: a new message
    await eventually(lambda: len(recorder.calls) > 1 or None, what="a new message")
    assert recorder.calls[1][1:] == ("post", "m1", "ab")
    await streamer.live(ROUTE, {"type": "turn_ended", "error": "boom"})  # its notice will replace it
    claimed = await streamer.claim(ROUTE)
    assert claimed is not None and claimed.message == "m1"
    await streamer.close()
