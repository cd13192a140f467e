"""Property: over random sequences of user messages, busy periods, clock jumps and heartbeat
commands, the heartbeat never fires twice in one interval window, never while a turn runs or
user input waits, and its count always equals the fires that reached execution.

Turns run through the real agent and store; the model is a client whose answers take a
scripted amount of *fake-clock* time, so busy periods and clock jumps interleave freely. Most
steps may follow each other without waiting for the conversation to settle, so that input
can arrive while a heartbeat is being claimed, prepared or confirmed.

A conversation swallows (and logs) exceptions raised by its listeners, so the checks made
while events arrive are collected in ``violations`` and asserted by the test itself.
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
from vigil.config.settings import Settings
from vigil.models.base import ModelRequest, ModelResponse
from vigil.profiles import Profile
from vigil.runtime.controller import ConversationController
from vigil.runtime.conversation import Conversation
from vigil.runtime.conversation_events import HEARTBEAT, TurnBegan, TurnEnded
from vigil.schedule import estop
from vigil.schedule.heartbeat.text import is_heartbeat_message
from vigil.schedule.heartbeat.scheduler import HeartbeatScheduler
from vigil.store import SQLiteStore

_BUSY = re.compile(r"busy (\d+)")
_STORE_STEPS = 3


async def _stepped(fn: Any, *args: Any) -> Any:
    """The scheduler's store calls, each taking a few event-loop steps instead of a thread:
    the ``yield`` step can then land user input at any point of a claim or confirmation."""
    for _ in range(_STORE_STEPS):
        await asyncio.sleep(0)
    return fn(*args)


class ClockedModel:
    """A ``ModelClient`` whose answer takes ``busy N`` seconds of fake-clock time."""

    provider = "openai"
    model = "clocked"

    def __init__(self, clock: FakeClock, violations: list[str]) -> None:
        self.clock = clock
        self.violations = violations
        self.heartbeat_seconds = 0
        self.sleeping = 0

    async def complete(self, request: ModelRequest, *, on_text: Any = None) -> ModelResponse:
        text = request.messages[-1].content or ""
        if self.sleeping:
            self.violations.append("two turns called the model at once")
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


def _step(op: str, args: st.SearchStrategy[Any], *, may_interleave: bool = True) -> st.SearchStrategy[tuple[str, Any, bool]]:
    """``(op, arg, settle afterwards?)``. Boundaries and the emergency stop always settle
    before and after, because the checks around them need a quiet conversation."""
    settle = st.booleans() if may_interleave else st.just(True)
    return st.tuples(st.just(op), args, settle)


_race = _step(
    # advance exactly to the heartbeat's due time, let k steps of its claim, preparation or
    # confirmation pass, then type something: input racing the heartbeat's dispatch
    "race",
    st.tuples(
        st.sampled_from(range(17)),  # uniform: integers() would favour the ends
        st.sampled_from(["busy 0", "busy 30", "/hb pause", "/hb clear", "/suspend", "/stop", "/new"]),
    ),
)
ops = st.one_of(
    _step("user", st.sampled_from([0, 0, 30, 150, 400, 900])),
    _step("advance", st.integers(min_value=1, max_value=1500)),
    _step("set", st.sampled_from([60, 120, 300])),
    _step("hb_turn", st.sampled_from([0, 45, 200])),
    _step("pause", st.just(0)),
    _step("resume", st.just(0)),
    _step("clear", st.just(0)),
    # let in-flight work progress part of the way (event-loop steps)
    _step("yield", st.sampled_from(range(41))),
    _race,
    _race,
    _step("boundary", st.sampled_from(["/new", "/suspend"]), may_interleave=False),
    # "on-silent": engaged by another process, noticed only when a fire is about to start
    _step("estop", st.sampled_from(["on", "on-silent", "off"]), may_interleave=False),
)


class Harness:
    def __init__(self, home: Path) -> None:
        self.clock = FakeClock(1_800_000_000.0)
        profile = Profile("default", home).ensure()
        self.store = SQLiteStore(profile.state_db, durable=False)
        self.violations: list[str] = []
        self.model = ClockedModel(self.clock, self.violations)
        self.agent = Agent(store=self.store, client=self.model, profile=profile, settings=Settings(), cwd=home, clock=self.clock)
        self.controller = ConversationController(self.agent)
        self.scheduler = HeartbeatScheduler(self.store, clock=self.clock, poll_interval=30, offload=_stepped)
        self.conversation = Conversation(self.controller, scheduler=self.scheduler)
        self.conversation.listeners.append(self.on_event)
        self.fires: Counter[str] = Counter()
        self.last_fire: dict[str, float] = {}
        self.stopped = False
        self.open_turns = 0

    def violated(self, condition: bool, what: str) -> None:
        if not condition:
            self.violations.append(what)

    def on_event(self, event: object) -> None:
        if isinstance(event, TurnEnded):
            self.open_turns -= 1
            return
        if not isinstance(event, TurnBegan):
            return
        # Every announced turn ends; a heartbeat turn is announced when it begins executing.
        self.violated(self.open_turns == 0, "a turn began while another one was running")
        self.open_turns += 1
        if event.kind != HEARTBEAT:
            return
        conversation = self.conversation
        self.violated(conversation.queued == 0, "a heartbeat fired with user input waiting")
        self.violated(self.model.sleeping == 0, "a heartbeat fired while the model was busy")
        self.violated(not self.stopped, "a heartbeat fired under the emergency stop")
        hb = self.controller.heartbeats.get(event.session_id)
        if hb is None or hb.pending is not None or hb.last_fire is None:
            self.violations.append(f"a heartbeat began unconfirmed: {hb}")
            return
        previous = self.last_fire.get(hb.id)
        self.violated(previous is None or hb.last_fire - previous >= hb.interval, "two fires in one window")
        self.last_fire[hb.id] = hb.last_fire
        self.fires[hb.id] += 1

    def stored_heartbeat_messages(self) -> int:
        return sum(
            1
            for session in self.store.list_sessions(limit=None)
            for message in self.store.get_messages(session.id)
            if message.role == "user" and is_heartbeat_message(message.content)
        )

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
        assert self.violations == []
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
        await self.conversation.send("/hb every 60s watch")  # most steps are about a heartbeat
        for op, arg, settle in steps:
            if op in ("boundary", "estop"):
                await self.settle()
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
            elif op == "yield":
                for _ in range(arg):
                    await asyncio.sleep(0)
            elif op == "race":
                steps_before, text = arg
                session_id = self.controller.session_id
                hb = self.controller.heartbeats.get(session_id) if session_id else None
                due = hb.next_due if hb is not None and hb.next_due is not None else 0.0
                await self.clock.set(max(self.clock.now(), due))
                for _ in range(steps_before):
                    await asyncio.sleep(0)
                self.conversation.submit(text)
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
            if settle:
                await self.settle()
                self.check_accounting()
            else:
                assert self.violations == []
        # let everything finish: no busy turn is longer than 900 s
        await self.settle()
        for _ in range(4):
            await self.clock.advance(1000)
            await self.settle()
            self.check_accounting()
        # every fire that reached execution stored its message, and only those did
        assert self.stored_heartbeat_messages() == sum(self.fires.values())
        await self.conversation.close()
        await self.scheduler.stop()
        self.store.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops, min_size=1, max_size=14))
def test_heartbeat_invariants(steps: list[tuple[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as home:
        asyncio.run(Harness(Path(home)).run(steps))
