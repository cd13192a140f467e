"""Cron test fixtures: a real SQLite store and profile, a fake clock, and runners that talk to
the fake model server over HTTP (the OpenAI wire; the agent tests cover both providers)."""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path
from typing import AsyncIterator, Awaitable, Callable, Iterator
from zoneinfo import ZoneInfo

import pytest

from tests.schedule.backends import pg_schema, pg_url, postgres_server, shared_store, store_location
from vigil.clock import FakeClock
from vigil.config.settings import ModelSettings, Settings
from vigil.models.factory import build_client
from vigil.models.retry import RetryPolicy
from vigil.profiles import Profile
from vigil.schedule.cron.jobs import CronJob, JobSpec, new_job
from vigil.schedule.cron.repo import CronRepo
from vigil.runtime.cron_runner import CronRunner
from vigil.schedule.cron.scheduler import CronScheduler
from vigil.store import SQLiteStore
from vigil.testing.fake_model import FakeModelServer

START = datetime(2026, 3, 2, 8, 0, tzinfo=ZoneInfo("UTC")).timestamp()
"""A Monday, 08:00 UTC: a round start for fake clocks."""

__all__ = ["pg_schema", "pg_url", "postgres_server", "shared_store", "store_location"]


async def settle(scheduler: CronScheduler, timeout: float = 10.0) -> None:
    """Wait (real time) until no claim or run of the scheduler is in progress."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        for _ in range(5):
            await asyncio.sleep(0)
        if scheduler.busy == 0:
            return
        while scheduler.busy:
            await asyncio.sleep(0.002)
            assert loop.time() < deadline, "the scheduler did not settle"


def at(text: str, tz: str = "UTC") -> float:
    """Epoch seconds of a local wall-clock time such as ``2026-03-29 02:30``."""
    return datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(tz)).timestamp()


@pytest.fixture
def profile(vigil_home: Path) -> Profile:
    return Profile("default", vigil_home).ensure()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


@pytest.fixture
def store(profile: Profile) -> Iterator[SQLiteStore]:
    s = SQLiteStore(profile.state_db)
    yield s
    s.close()


@pytest.fixture
def repo(store: SQLiteStore, clock: FakeClock) -> CronRepo:
    return CronRepo(store, clock)


AddJob = Callable[..., CronJob]


@pytest.fixture
def add_job(repo: CronRepo, profile: Profile) -> AddJob:
    """``add_job(name, schedule, prompt="...", tz="UTC", **spec)`` validated and stored at the clock's now."""

    def add(name: str, schedule: str, prompt: str = "do the thing", *, tz: str = "UTC", **spec: object) -> CronJob:
        job = new_job(
            name,
            JobSpec(schedule=schedule, prompt=prompt, tz=tz, **spec),  # type: ignore[arg-type]
            now=repo.clock.now(),
            default_tz="UTC",
            skills_dir=profile.skills_dir,
        )
        return repo.add(job)

    return add


def model_settings(server: FakeModelServer) -> ModelSettings:
    return ModelSettings.from_data(
        {"provider": "openai", "name": "fake-model", "base_url": server.base_url, "api_key": server.api_key, "timeout": 10}
    )


async def _no_sleep(_seconds: float) -> None:
    return None


MakeRunner = Callable[..., Awaitable[CronRunner]]


@pytest.fixture
async def make_runner(
    fake_model: FakeModelServer, repo: CronRepo, profile: Profile, clock: FakeClock
) -> AsyncIterator[MakeRunner]:
    """Runners over the real model client (no retries, so failures are quick)."""
    clients = []

    async def make(*, settings: Settings | None = None, **kwargs: object) -> CronRunner:
        settings = (settings or Settings()).copy_with(update={"model": model_settings(fake_model)})
        client = await build_client(settings.model, {}, retry=RetryPolicy(max_retries=0, sleep=_no_sleep))
        clients.append(client)
        return CronRunner(repo=repo, client=client, profile=profile, settings=settings, clock=clock, **kwargs)  # type: ignore[arg-type]

    yield make
    for client in clients:
        await client.aclose()
