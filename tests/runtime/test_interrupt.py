"""Interrupting a conversation (the Stop button, /stop, deleting it) at every moment of a
message's start: a message taken from the queue whose turn has not begun yet is stopped too."""

from __future__ import annotations

import asyncio

from tests.runtime.conftest import Runtime
from vigil.testing.fake_model import FakeModelServer


async def test_a_message_stopped_while_it_is_being_started_never_reaches_the_model(
    rt: Runtime, fake_model: FakeModelServer,
) -> None:
    await rt.send("hello")
    asked = len(fake_model.requests)
    starting, release = asyncio.Event(), asyncio.Event()

    async def on_start() -> None:  # the front end's bookkeeping, in progress
        starting.set()
        await release.wait()

    future = rt.conversation.submit("count to a million", on_start=on_start)
    await starting.wait()
    assert rt.conversation.interrupt() is True
    assert rt.conversation.interrupt() is True  # still stopping: says so again, changes nothing
    release.set()
    outcome = await future
    assert outcome.cancelled
    assert [e.cancelled for e in rt.ended()][-1] is True
    assert len(fake_model.requests) == asked
    assert (await rt.send("still there?")).result is not None  # the conversation goes on


async def test_interrupting_an_idle_conversation_stops_nothing(rt: Runtime) -> None:
    await rt.send("hello")
    assert rt.conversation.interrupt() is False

