"""A live conversation wired like the REPL wires it: a real agent talking to the fake model
over HTTP, a real SQLite store, the heartbeat scheduler — all on one fake clock."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable

import pytest

from vigil.agent.turn import Agent
from vigil.clock import FakeClock
from vigil.config.settings import ModelSettings, Settings
from vigil.models.factory import build_client
from vigil.models.retry import RetryPolicy
from vigil.profiles import Profile
from vigil.runtime.controller import ConversationController
from vigil.runtime.conversation import Conversation
from vigil.runtime.conversation_events import HEARTBEAT, ConversationEvent, Outcome, TurnBegan, TurnEnded
from vigil.schedule.heartbeat.record import Heartbeat
from vigil.schedule.heartbeat.scheduler import HeartbeatScheduler
from vigil.store import SQLiteStore
from vigil.testing.fake_model import FakeModelServer

T0 = 1_800_000_000.0


async def _no_sleep(_seconds: float) -> None:
    return None


@dataclass
class Runtime:
    """One conversation and everything around it, with helpers to drive it."""

    clock: FakeClock
    store: SQLiteStore
    agent: Agent
    controller: ConversationController
    scheduler: HeartbeatScheduler
    conversation: Conversation
    events: list[ConversationEvent] = field(default_factory=list)

    async def send(self, text: str) -> Outcome:
        outcome = await self.conversation.send(text)
        await self.settle()
        return outcome

    async def command(self, text: str) -> str:
        outcome = await self.send(text)
        assert outcome.reply is not None
        return outcome.reply.text

    async def advance(self, seconds: float) -> None:
        await self.clock.advance(seconds)
        await self.settle()

    def quiet(self) -> bool:
        due = self.scheduler.engine.next_due()
        return (
            self.conversation.idle
            and self.scheduler.quiet
            and (due is None or due > self.clock.now())
        )

    async def settle(self, timeout: float = 10.0) -> None:
        """Wait (in real time, briefly) until every consequence of the last step played out:
        the conversation is idle and the engine has nothing overdue."""
        deadline = time.monotonic() + timeout
        stable = 0
        while stable < 3:
            if time.monotonic() > deadline:
                raise TimeoutError("the conversation did not settle")
            await asyncio.sleep(0.002)
            stable = stable + 1 if self.quiet() else 0

    @property
    def session_id(self) -> str:
        assert self.controller.session_id is not None
        return self.controller.session_id

    def heartbeat(self, session_id: str | None = None) -> Heartbeat | None:
        return self.controller.heartbeats.get(session_id or self.session_id)

    def began(self, kind: str | None = None) -> list[TurnBegan]:
        return [e for e in self.events if isinstance(e, TurnBegan) and (kind is None or e.kind == kind)]

    def heartbeat_turns(self) -> list[TurnBegan]:
        return self.began(HEARTBEAT)

    def ended(self) -> list[TurnEnded]:
        return [e for e in self.events if isinstance(e, TurnEnded)]

    def order(self) -> list[str]:
        """The kinds and texts of the turns so far, heartbeats shown as ``♥``."""
        return ["♥" if e.kind == HEARTBEAT else e.text for e in self.began()]


RuntimeFactory = Callable[..., Awaitable[Runtime]]


@pytest.fixture
def provider() -> str:
    return "openai"


@pytest.fixture
def profile(tmp_path: Path) -> Profile:
    return Profile("default", tmp_path / "home").ensure()


def model_settings(server: FakeModelServer, provider: str, **overrides: Any) -> ModelSettings:
    base = server.base_url if provider == "openai" else server.anthropic_base_url
    values: dict[str, Any] = {
        "provider": provider, "name": "fake-model", "base_url": base, "api_key": server.api_key, "timeout": 10,
    }
    values.update(overrides)
    return ModelSettings.from_data(values)


@pytest.fixture
async def make_runtime(
    fake_model: FakeModelServer, provider: str, profile: Profile, tmp_path: Path
) -> AsyncIterator[RuntimeFactory]:
    """Build runtimes sharing one state.db and one fake clock (like processes on one host)."""
    clock = FakeClock(T0)
    store = SQLiteStore(profile.state_db, durable=False)
    built: list[Runtime] = []
    workdir = tmp_path / "work"
    workdir.mkdir()

    async def factory(
        *,
        settings: Settings | None = None,
        session_id: str | None = None,
        scheduler_cls: type[HeartbeatScheduler] = HeartbeatScheduler,
        owner: str | None = None,
        start: bool = True,
        **model_overrides: Any,
    ) -> Runtime:
        settings = (settings or Settings()).copy_with(
            update={"model": model_settings(fake_model, provider, **model_overrides)}
        )
        client = await build_client(settings.model, {}, retry=RetryPolicy(max_retries=0, sleep=_no_sleep))
        agent = Agent(store=store, client=client, profile=profile, settings=settings, cwd=workdir, clock=clock)
        controller = ConversationController(agent, session_id=session_id)
        kwargs: dict[str, Any] = {"clock": clock, "poll_interval": 30}
        if owner is not None:
            kwargs["owner"] = owner
        scheduler = scheduler_cls(store, **kwargs)
        conversation = Conversation(controller, scheduler=scheduler)
        runtime = Runtime(clock, store, agent, controller, scheduler, conversation)
        conversation.listeners.append(runtime.events.append)
        if start:
            await scheduler.start()
            await conversation.start()
            await runtime.settle()
        built.append(runtime)
        return runtime

    yield factory
    for runtime in built:
        await runtime.conversation.close()
        await runtime.scheduler.stop()
        await runtime.agent.client.aclose()
    store.close()


@pytest.fixture
async def rt(make_runtime: RuntimeFactory) -> Runtime:
    """A started runtime with one exchanged message (so the conversation has a session)."""
    runtime = await make_runtime()
    await runtime.send("hello")
    return runtime
