"""The SSE body of one page, over the gateway's real event bus."""

from __future__ import annotations

import asyncio
import json

from vigil.gateway.adapters.web.events import QUEUE_LIMIT, OpenPages, event_stream
from vigil.gateway.bus import EventBus


async def test_events_are_framed_keepalives_sent_while_quiet_and_closing_unsubscribes() -> None:
    bus, pages = EventBus(), OpenPages()
    stream = event_stream(bus.subscribe("s1"), pages, "s1", keepalive=0.01)
    assert await stream.__anext__() == ": connected\n\n"
    assert bus.watched("s1") and pages.count("s1") == 1
    bus.publish("s1", {"type": "delta", "session_id": "s1", "text": "hi\nthere"})
    frame = await stream.__anext__()
    assert frame.startswith("data: ") and frame.endswith("\n\n") and frame.count("\n") == 2
    assert json.loads(frame[len("data: "):]) == {"type": "delta", "session_id": "s1", "text": "hi\nthere"}
    assert await stream.__anext__() == ": keepalive\n\n"
    pages.publish({"s1"}, {"type": "reply", "text": "from the outbox"})
    assert json.loads((await stream.__anext__())[6:])["text"] == "from the outbox"
    await stream.aclose()  # the browser went away
    assert pages.count("s1") == 0
    await asyncio.sleep(0)
    assert not bus.watched("s1")


async def test_stopping_the_adapter_ends_every_open_stream() -> None:
    bus, pages = EventBus(), OpenPages()
    streams = [event_stream(bus.subscribe("s1"), pages, "s1", keepalive=60) for _ in range(2)]
    for stream in streams:
        await stream.__anext__()
    pages.end_all()
    for stream in streams:
        assert [frame async for frame in stream] == []
    assert pages.count() == 0


async def test_a_page_that_stops_reading_is_cut_off_instead_of_growing_without_bound() -> None:
    bus, pages = EventBus(), OpenPages()
    stream = event_stream(bus.subscribe("s1"), pages, "s1", keepalive=60)
    await stream.__anext__()
    for n in range(QUEUE_LIMIT + 10):
        pages.publish({"s1"}, {"type": "delta", "text": str(n)})
    frames = [frame async for frame in stream]
    assert 0 < len(frames) < QUEUE_LIMIT + 10
    assert pages.count() == 0
