"""``vigil gateway run``: the long-running process of a profile.

With no messaging platform configured (the only case so far) it is a pure scheduler: it runs
due cron jobs until SIGINT, SIGTERM or SIGHUP (the terminal it runs in closing), saying what it
does on stdout and in ``logs/gateway.log`` (``activity``). Platform adapters, their routing and the heartbeats of
gateway conversations join here as they arrive.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from dataclasses import dataclass
from typing import Callable

from vigil.clock import Clock, SystemClock
from vigil.config import Settings
from vigil.gateway.activity import LOG_NAME, GatewayActivity
from vigil.models.base import ModelClient
from vigil.profiles import Profile
from vigil.schedule.cron.format import relative
from vigil.schedule.cron.repo import CronRepo
from vigil.runtime.cron_runner import CronRunner
from vigil.schedule.cron.scheduler import POLL_INTERVAL, CronScheduler
from vigil.schedule.cron.schedule import default_zone, format_instant
from vigil.store import SessionStore

log = logging.getLogger(__name__)

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    """How the gateway runs; the defaults are right outside tests."""

    poll_interval: float = POLL_INTERVAL
    stop_grace: float = 10.0


async def serve(
    *,
    store: SessionStore,
    profile: Profile,
    settings: Settings,
    client: ModelClient,
    stop: asyncio.Event,
    announce: Callable[[str], None],
    clock: Clock | None = None,
    config: GatewayConfig = GatewayConfig(),
) -> CronScheduler:
    """Serve until ``stop`` is set; ``announce`` receives every line the gateway says (start-up,
    each cron run's start and end, shut-down), which also go to ``logs/gateway.log``.

    Returns the scheduler (its ``stats`` say what ran)."""
    clock = clock or SystemClock()
    zone = default_zone(settings.timezone)
    activity = GatewayActivity(announce, profile.logs_dir / LOG_NAME, clock=clock, zone=zone)
    try:
        repo = CronRepo(store, clock)
        runner = CronRunner(repo=repo, client=client, profile=profile, settings=settings, clock=clock)
        scheduler = CronScheduler(
            repo, activity.cron_runs(runner.execute), clock=clock, poll_interval=config.poll_interval
        )
        armed = await scheduler.start()
        upcoming = scheduler.engine.next_due()
        when = (
            "" if upcoming is None
            else f", next at {format_instant(upcoming, zone)} ({relative(upcoming - clock.now())})"
        )
        activity.say(
            f"vigil gateway: profile '{profile.name}' — serving the cron scheduler "
            f"({armed} job(s) armed{when}); no messaging platform is configured. "
            f"Stop with Ctrl-C or SIGTERM. Log: {profile.logs_dir / LOG_NAME}"
        )
        try:
            await stop.wait()
        finally:
            await scheduler.stop(config.stop_grace)
            activity.say(f"vigil gateway: stopped ({scheduler.stats.claims} cron run(s) started).")
        return scheduler
    finally:
        activity.close()


async def run_until_signalled(
    *,
    store: SessionStore,
    profile: Profile,
    settings: Settings,
    client: ModelClient,
    announce: Callable[[str], None],
) -> None:
    """:func:`serve` with SIGINT, SIGTERM and SIGHUP setting the stop event (running jobs get
    the stop grace, then are recorded as interrupted; the process exits 0)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in _STOP_SIGNALS:
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # pragma: no cover - non-POSIX
            signal.signal(sig, lambda *_: loop.call_soon_threadsafe(stop.set))
    try:
        await serve(store=store, profile=profile, settings=settings, client=client, stop=stop, announce=announce)
    finally:
        for sig in _STOP_SIGNALS:
            try:
                loop.remove_signal_handler(sig)
            except (NotImplementedError, RuntimeError):  # pragma: no cover
                pass
