"""``vigil gateway run``: the long-running process of a profile.

One process hosts the schedule engine (cron jobs and the heartbeats of every conversation no
REPL has open), the platform adapters, the gateway core that routes their messages into
conversations (:mod:`vigil.gateway.core`), and one HTTP server on loopback for the web chat,
webhooks, ``/healthz`` and ``/metrics``. It says what it does on stdout and in
``logs/gateway.log`` (``activity``): one line per turn, fire, delivery and error.

SIGTERM and SIGINT: stop taking input, let running turns finish within
``gateway.stop_timeout``, then exit 0. SIGHUP: re-read config.yaml and hand it to the adapters.

On a shared (PostgreSQL) store any number of these processes run as workers
(:mod:`vigil.gateway.cluster.workers`): each keeps its own record in the worker registry, watches the
others' records to recover what a dead one left (heartbeat reservations, cron runs), and runs a
single-receiver platform's loop only while it holds the adapter's lease (:mod:`vigil.gateway.cluster.adapter_lease`).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import signal
import socket
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

from vigil.clock import Clock, SystemClock
from vigil.config.settings import Settings, load_settings
from vigil.gateway.activity import LOG_NAME, GatewayActivity
from vigil.gateway.adapters.base import Adapter
from vigil.gateway.core import Gateway
from vigil.gateway.cron_delivery import CronOutcomes
from vigil.gateway.http import HttpServer, listen, routes_app
from vigil.gateway.lock import acquire
from vigil.gateway.health import store_check
from vigil.gateway.metrics import GatewayMetrics, http_routes
from vigil.gateway.status import StatusKeeper
from vigil.gateway.cluster.workers import WorkerWatch, is_shared, join_as_worker, recovery
from vigil.gateway.token import load_or_create_token
from vigil.gateway.platforms import configured_adapters
from vigil.gateway.supervisor import BACKOFF_BASE, BACKOFF_CAP, WATCH_INTERVAL, health_view, supervise
from vigil.models.base import ModelClient
from vigil.profiles import Profile
from vigil.runtime.cron_runner import CronRunner
from vigil.schedule.cron.format import relative
from vigil.schedule.cron.repo import CronRepo
from vigil.schedule.cron.scheduler import POLL_INTERVAL, CronScheduler
from vigil.schedule.cron.schedule import default_zone, format_instant
from vigil.store import SessionStore

log = logging.getLogger(__name__)

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    """How the gateway runs; the defaults are right outside tests."""

    poll_interval: float = POLL_INTERVAL
    stop_grace: float | None = None
    """Seconds running turns and cron runs get at shutdown (``None``: ``gateway.stop_timeout``)."""
    web_port: int | None = None
    """``--web-port``: overrides ``gateway.web.port``."""
    bind: str | None = None
    """``--bind``: the address to listen on, given explicitly (may be non-loopback)."""
    serve_http: bool = True
    login_link: bool = True
    """Print the login URL with its token at start; off where stdout is kept as a log (the
    systemd journal), which must not hold the token: then only where to find it is said."""
    adapters: Mapping[str, Adapter] | None = None
    """The platform adapters to run instead of the configured ones (tests, embedders)."""
    adapter_backoff: tuple[float, float] = (BACKOFF_BASE, BACKOFF_CAP)
    """First and longest pause between tries to start a failing adapter (seconds)."""
    adapter_watch: float = WATCH_INTERVAL
    """Seconds between looks at a connected adapter's health (a dead receiving loop restarts)."""


@dataclass
class GatewayRun:
    """What a finished :func:`serve` leaves behind (for tests)."""

    cron: CronScheduler
    gateway: Gateway
    url: str | None = None
    reloads: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


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
    reload: asyncio.Event | None = None,
    private: Callable[[str], None] | None = None,
    on_started: Callable[[GatewayRun], None] | None = None,
) -> GatewayRun:
    """Serve until ``stop`` is set. ``announce`` receives every line the gateway says, which
    also go to ``logs/gateway.log``; ``private`` receives lines that must not be logged (the
    login URL with its token). ``reload`` set: re-read config.yaml (SIGHUP). ``on_started``
    is called with the running parts once the gateway serves (for tests and embedders)."""
    clock = clock or SystemClock()
    zone = default_zone(settings.timezone)
    sock: socket.socket | None = None
    if config.serve_http:
        # First of all: a port in use is a clear error before anything is written or started.
        host = config.bind or settings.gateway.web.host
        port = settings.gateway.web.port if config.web_port is None else config.web_port
        sock = listen(host, port)
    activity = GatewayActivity(announce, profile.logs_dir / LOG_NAME, clock=clock, zone=zone)
    grace = settings.gateway.stop_timeout if config.stop_grace is None else config.stop_grace
    http: HttpServer | None = None
    try:
        repo = CronRepo(store, clock)
        runner = CronRunner(repo=repo, client=client, profile=profile, settings=settings, clock=clock)
        scheduler = CronScheduler(
            repo, activity.cron_runs(runner.execute), clock=clock, poll_interval=config.poll_interval
        )
        adapters = supervise(
            dict(config.adapters) if config.adapters is not None else configured_adapters(settings, profile),
            settings, say=activity.say, base=config.adapter_backoff[0], cap=config.adapter_backoff[1],
            watch=config.adapter_watch,
        )
        metrics = GatewayMetrics()
        gateway = Gateway(
            store=store, profile=profile, settings=settings, client=client, adapters=adapters,
            clock=clock, say=activity.say, metrics=metrics,
        )
        scheduler.execute = counted_cron_runs(scheduler.execute, metrics)
        outcomes = CronOutcomes(store).attach(gateway, runner.router, scheduler)
        run = GatewayRun(scheduler, gateway)
        run.extra["cron_runner"] = runner
        token = load_or_create_token(profile)
        run.extra["token"] = token
        if sock is not None:
            routes = [route for adapter in adapters.values() for route in adapter.http_routes()]
            routes += http_routes(
                metrics, store_check(store), authorized=lambda request: bearer_matches(request, run.extra["token"])
            )
            http = HttpServer(
                routes_app(routes), sock, allowed_hosts=(host, *settings.gateway.web.allowed_hosts),
                report=activity.failure,
            )
            run.url = http.url
        worker = join_as_worker(gateway, adapters, clock) if is_shared(store) else None
        keeper = StatusKeeper(store, clock, lambda: _snapshot(run, scheduler), worker=worker)
        await gateway.start()
        await outcomes.catch_up()
        if http is not None:
            await http.start()
        armed = await scheduler.start()
        upcoming = scheduler.engine.next_due()
        when = (
            "" if upcoming is None
            else f", next at {format_instant(upcoming, zone)} ({relative(upcoming - clock.now())})"
        )
        serving = f"the web chat at {run.url}/ and " if run.url is not None and "web" in adapters else ""
        if run.url is not None and "api" in adapters:
            serving += f"the OpenAI-compatible API at {run.url}/v1 and "
        platforms = [f"{name} ({adapter.phase})" for name, adapter in adapters.items() if name not in ("web", "api")]
        activity.say(
            f"vigil gateway: profile '{profile.name}' — serving {serving}the cron scheduler "
            f"({armed} job(s) armed{when}); "
            + (f"platforms: {', '.join(platforms)}. " if platforms else "no messaging platform is configured. ")
            + f"Stop with Ctrl-C or SIGTERM. Log: {profile.logs_dir / LOG_NAME}"
        )
        if run.url is not None and "web" in adapters and private is not None:
            if config.login_link:
                private(f"    Open the web chat: {run.url}/login?token={token}")
                private("    (the same link later: vigil gateway status)")
            else:
                private("    Open the web chat with the login URL `vigil gateway status` prints "
                        "(not written here: this output is kept as a log)")
        await asyncio.to_thread(keeper.write, "running")
        keeping = asyncio.create_task(keeper.run(), name="gateway-status")
        watching: asyncio.Task[None] | None = None
        if worker is not None:
            watch = WorkerWatch(store, clock, worker.worker_id, recovery(gateway, repo, scheduler, activity.say))
            run.extra["watch"] = watch
            watching = asyncio.create_task(watch.run(keeper.interval), name="gateway-workers")
        if on_started is not None:
            on_started(run)
        try:
            await _wait(stop, reload, lambda: _reload(run, profile, activity))
        finally:
            activity.say("vigil gateway: stopping (no new input; running turns may finish)")
            await _quietly(asyncio.to_thread(keeper.write, "stopping"))
            await gateway.stop(grace)
            if http is not None:
                await http.stop()
            await scheduler.stop(grace)
            await outcomes.close()
            for task in (keeping, watching):
                if task is not None:
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
            await _quietly(asyncio.to_thread(keeper.write, "stopped"))
            activity.say(
                f"vigil gateway: stopped ({gateway.answered} message(s) answered, "
                f"{scheduler.stats.claims} cron run(s) started)."
            )
        return run
    finally:
        activity.close()
        if http is None and sock is not None:
            sock.close()


def _snapshot(run: GatewayRun, cron: CronScheduler) -> dict[str, Any]:
    """What the status record says, from the running parts (no store call)."""
    snapshot = run.gateway.snapshot()
    snapshot["adapters"] = [health_view(name, a.health()) for name, a in run.gateway.adapters.items()]
    snapshot["url"] = run.url
    snapshot["next_cron_run"] = cron.engine.next_due()
    return snapshot


def bearer_matches(request: Any, token: str) -> bool:
    """``Authorization: Bearer <token>`` carries the gateway's login token."""
    header = request.headers.get("authorization", "")
    scheme, _, given = header.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


def counted_cron_runs(execute: Any, metrics: GatewayMetrics) -> Any:
    """``execute`` counting each cron run's outcome in the metrics."""

    async def counted(claim: Any) -> Any:
        try:
            record = await execute(claim)
        except BaseException:
            metrics.cron_runs.labels(outcome="interrupted").inc()
            raise
        if record is not None:
            metrics.cron_runs.labels(outcome=getattr(record, "status", "done")).inc()
        return record

    return counted


async def _quietly(work: Any) -> None:
    try:
        await work
    except Exception as exc:  # the status record is advice; shutting down must go on
        log.warning("could not write the gateway status: %s", exc)


async def _wait(stop: asyncio.Event, reload: asyncio.Event | None, on_reload: Callable[[], Any]) -> None:
    while not stop.is_set():
        waits = [asyncio.ensure_future(stop.wait())]
        if reload is not None:
            waits.append(asyncio.ensure_future(reload.wait()))
        done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        if reload is not None and reload.is_set() and not stop.is_set():
            reload.clear()
            await on_reload()


async def _reload(run: GatewayRun, profile: Profile, activity: GatewayActivity) -> None:
    try:
        settings = await asyncio.to_thread(load_settings, profile.config_path)
    except Exception as exc:  # a broken file keeps the running configuration
        activity.say(f"vigil gateway: SIGHUP: config.yaml not reloaded, keeping the running configuration: {exc}")
        return
    try:  # /metrics takes the token the web chat takes (a deleted token file makes a new one)
        run.extra["token"] = await asyncio.to_thread(load_or_create_token, profile)
    except OSError as exc:
        activity.say(f"vigil gateway: error: SIGHUP: cannot read the login token, keeping the old one: {exc}")
    run.gateway.authorization.reload(settings)
    _reload_mcp_servers(run, settings, activity)
    for adapter in run.gateway.adapters.values():
        try:
            await adapter.reload(settings)
        except Exception as exc:
            activity.say(f"vigil gateway: error: adapter {adapter.name} could not reload: {exc}")
    run.reloads += 1
    activity.say("vigil gateway: SIGHUP: adapter configuration reloaded")


def _reload_mcp_servers(run: GatewayRun, settings: Settings, activity: GatewayActivity) -> None:
    """New sessions (conversations and cron runs) pin the re-read ``mcp.servers``; a running
    session keeps the tools it pinned (the prompt cache), so nothing else needs to change."""
    gateway = run.gateway
    if settings.mcp == gateway.settings.mcp:
        return
    gateway.settings = gateway.settings.copy_with(update={"mcp": settings.mcp})
    runner = run.extra.get("cron_runner")
    if isinstance(runner, CronRunner):
        runner.settings = runner.settings.copy_with(update={"mcp": settings.mcp})
    names = ", ".join(settings.mcp.servers) or "none"
    activity.say(f"vigil gateway: SIGHUP: MCP servers for new sessions: {names}")


async def run_until_signalled(
    *,
    store: SessionStore,
    profile: Profile,
    settings: Settings,
    client: ModelClient,
    announce: Callable[[str], None],
    private: Callable[[str], None] | None = None,
    config: GatewayConfig = GatewayConfig(),
    web_port: int | None = None,
    bind: str | None = None,
    on_locked: Callable[[], None] | None = None,
) -> None:
    """:func:`serve` with SIGINT and SIGTERM setting the stop event and SIGHUP the reload
    event (running turns get the stop grace, then are interrupted; the process exits 0).
    ``web_port`` and ``bind`` are ``--web-port`` and ``--bind``; ``on_locked`` is called once
    the profile's gateway lock is held (warnings that a refused second gateway must not print)."""
    if web_port is not None or bind is not None:
        config = replace(config, web_port=web_port if web_port is not None else config.web_port,
                         bind=bind if bind is not None else config.bind)
    stop, reload = asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()
    handlers = [(sig, stop) for sig in _STOP_SIGNALS] + [(signal.SIGHUP, reload)]
    for sig, flag in handlers:
        try:
            loop.add_signal_handler(sig, flag.set)
        except (NotImplementedError, RuntimeError):  # pragma: no cover - non-POSIX
            signal.signal(sig, lambda *_, f=flag: loop.call_soon_threadsafe(f.set))
    try:
        with acquire(profile, shared=is_shared(store)):
            if on_locked is not None:
                on_locked()
            await serve(
                store=store, profile=profile, settings=settings, client=client, stop=stop,
                announce=announce, private=private, config=config, reload=reload,
            )
    finally:
        for sig, _ in handlers:
            try:
                loop.remove_signal_handler(sig)
            except (NotImplementedError, RuntimeError):  # pragma: no cover
                pass
