"""Property: over random sequences of user messages, busy periods, clock jumps and heartbeat
commands, the heartbeat never fires twice in one interval window, never while a turn runs or
user input waits, and its count always equals the fires that reached execution.

Turns run through the real agent and store; the model is a client whose answers take a
scripted amount of *fake-clock* time, so busy periods and clock jumps interleave freely.
"""

from __future__ import annotations

import asyncio
import re
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vigil.agent.turn import Agent
from vigil.clock import FakeClock
from vigil.config import Settings
from vigil.models.base import ModelRequest, ModelResponse
from vigil.profiles import Profile
from vigil.runtime.controller import ConversationController
from vigil.runtime.conversation import Conversation
from vigil.runtime.conversation_events import HEARTBEAT, TurnBegan
from vigil.schedule import estop
from vigil.schedule.heartbeat_text import is_heartbeat_message
from vigil.schedule.scheduler import HeartbeatScheduler
from vigil.store import SQLiteStore

_BUSY = re.compile(r"busy (\d+)")


class ClockedModel:
    """A ``ModelClient`` whose answer takes ``busy N`` seconds of fake-clock time."""

    provider = "openai"
    model = "clocked"

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.heartbeat_seconds = 0
        self.sleeping = 0

    async def complete(self, request: ModelRequest, *, on_text: Any = None) -> ModelResponse:
        text = request.messages[-1].content or ""
        seconds = self.heartbeat_seconds if is_heartbeat_message(text) else int(_BUSY.search(text).group(1))
        self.sleeping += 1
        try:
            await self.clock.sleep(seconds)
        finally:
            self.sleeping -= 1
        return ModelResponse("ok")

    async def list_models(self) -> list[str]:
        return [self.model]

    async def aclose(self) -> None:
        return None


ops = st.one_of(
    st.tuples(st.just("user"), st.sampled_from([0, 0, 30, 150, 400, 900])),
    st.tuples(st.just("advance"), st.integers(min_value=1, max_value=1500)),
    st.tuples(st.just("set"), st.sampled_from([60, 120, 300])),
    st.tuples(st.just("hb_turn"), st.sampled_from([0, 45, 200])),
    st.tuples(st.just("pause"), st.just(0)),
    st.tuples(st.just("resume"), st.just(0)),
    st.tuples(st.just("clear"), st.just(0)),
    st.tuples(st.just("boundary"), st.sampled_from(["/new", "/stop"])),
    # "on-silent": engaged by another process, noticed only when a fire is about to start
    st.tuples(st.just("estop"), st.sampled_from(["on", "on-silent", "off"])),
)


class Harness:
    def __init__(self, home: Path) -> None:
        self.clock = FakeClock(1_800_000_000.0)
        profile = Profile("default", home).ensure()
        self.store = SQLiteStore(profile.state_db, durable=False)
        self.model = ClockedModel(self.clock)
        self.agent = Agent(store=self.store, client=self.model, profile=profile, settings=Settings(), cwd=home, clock=self.clock)
        self.controller = ConversationController(self.agent)
        self.scheduler = HeartbeatScheduler(self.store, clock=self.clock, poll_interval=30)
        self.conversation = Conversation(self.controller, scheduler=self.scheduler)
        self.conversation.listeners.append(self.on_event)
        self.fires: Counter[str] = Counter()
        self.last_fire: dict[str, float] = {}
        self.stopped = False

    def on_event(self, event: object) -> None:
        if not isinstance(event, TurnBegan) or event.kind != HEARTBEAT:
            return
        conversation = self.conversation
        assert conversation.queued == 0, "a heartbeat fired with user input waiting"
        assert not conversation.running_turn, "a heartbeat fired during a turn"
        assert not self.stopped, "a heartbeat fired under the emergency stop"
        hb = self.controller.heartbeats.get(event.session_id)
        assert hb is not None and hb.pending is None and hb.last_fire is not None
        previous = self.last_fire.get(hb.id)
        assert previous is None or hb.last_fire - previous >= hb.interval, "two fires in one window"
        self.last_fire[hb.id] = hb.last_fire
        self.fires[hb.id] += 1

    def quiet(self) -> bool:
        due = self.scheduler.engine.next_due()
        return (
            self.scheduler.quiet
            and (due is None or due > self.clock.now())
            and (self.conversation.idle or self.model.sleeping > 0)
        )

    async def settle(self) -> None:
        deadline = time.monotonic() + 10
        stable = 0
        while stable < 2:
            assert time.monotonic() < deadline, "did not settle"
            await asyncio.sleep(0.001)
            stable = stable + 1 if self.quiet() else 0

    def check_accounting(self) -> None:
        session_id = self.controller.session_id
        hb = self.controller.heartbeats.get(session_id) if session_id else None
        if hb is None:
            return
        assert hb.fire_count == self.fires[hb.id], "count differs from fires that reached execution"
        if self.conversation.idle and hb.active and not self.stopped:
            assert hb.next_due > self.clock.now(), "an overdue heartbeat did not fire while idle"

    async def run(self, steps: list[tuple[str, Any]]) -> None:
        await self.scheduler.start()
        await self.conversation.start()
        await self.conversation.send("busy 0")
        for op, arg in steps:
            if op == "user":
                self.conversation.submit(f"busy {arg}")
            elif op == "advance":
                await self.clock.advance(arg)
            elif op == "set":
                self.conversation.submit(f"/hb every {arg}s watch")
            elif op == "boundary":
                old = self.controller.session_id
                self.conversation.submit(arg)
                await self.settle()
                if old is not None and not self.conversation.busy:
                    assert self.controller.heartbeats.get(old) is None, "a boundary kept the heartbeat"
            elif op == "hb_turn":
                self.model.heartbeat_seconds = arg
            elif op == "estop":
                if arg == "off":
                    estop.release(self.store)
                else:
                    estop.engage(self.store, self.clock.now())
                if arg != "on-silent":
                    await self.scheduler.check_changes()
                self.stopped = arg != "off"
            else:
                self.conversation.submit(f"/hb {op}")
            await self.settle()
            self.check_accounting()
        # let everything finish: no busy turn is longer than 900 s
        for _ in range(4):
            await self.clock.advance(1000)
            await self.settle()
            self.check_accounting()
        await self.conversation.close()
        await self.scheduler.stop()
        self.store.close()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops, min_size=1, max_size=14))
def test_heartbeat_invariants(steps: list[tuple[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as home:
        asyncio.run(Harness(Path(home)).run(steps))
