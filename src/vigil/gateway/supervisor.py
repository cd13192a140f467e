"""Adapter supervision: a platform that fails is retried with back-off, alone.

The gateway runs every adapter inside a :class:`Supervised` wrapper. Its ``start`` never raises:
a failed ``start()`` of the platform adapter (network down, token revoked, 5xx) is tried again
after :func:`delay` (1 s doubling to 60 s) in the background, while the gateway and the other
adapters serve. Once connected, the wrapper watches the adapter's own health: an adapter whose
receiving loop died reports ``ok=False`` with state ``stopped`` (or no state), and is stopped and
started again with the same back-off. An adapter that retries by itself reports ``retrying``
and is left to it.

An enabled platform whose secret is missing from the environment (:func:`missing_secrets`) is
``misconfigured``: said once at start, shown by ``vigil gateway status``, never started; the
gateway runs without it. What ``vigil gateway status`` shows comes from :meth:`Supervised.health`
(state, since, last error).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import TYPE_CHECKING, Any, Callable, Sequence

from vigil import platforms as registry
from vigil.backoff import Backoff
from vigil.gateway.adapters.base import Adapter, AdapterHealth, DeliveryError, GatewayPort
from vigil.store.gateway.gateway_tables import OutboxEntry, RouteKey

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from vigil.config.settings import Settings

log = logging.getLogger(__name__)

CONNECTED = "connected"
RETRYING = "retrying"
MISCONFIGURED = "misconfigured"
STOPPED = "stopped"

BACKOFF_BASE = 1.0
BACKOFF_CAP = 60.0
START_TIMEOUT = 10.0
"""Seconds one ``start()`` may take before it counts as a failed try."""
WATCH_INTERVAL = 1.0
"""Seconds between looks at a connected adapter's health."""


def delay(failures: int, base: float = BACKOFF_BASE, cap: float = BACKOFF_CAP) -> float:
    """Seconds before the next try after ``failures`` failed ones in a row (1, 2, 4 … 60):
    the shared formula without jitter, since the log line says when the next try comes (one
    adapter of a kind runs per gateway; a polling lease keeps workers from reconnecting together)."""
    return Backoff(base, cap, jitter=None).delay(failures - 1)


def missing_secrets(platform: str, settings: "Settings") -> list[str]:
    """The environment variables an enabled ``platform`` needs and does not have (their names
    only: a secret's value is never read into a message)."""
    declared = registry.get(platform)
    return [] if declared is None else declared.missing_secrets(settings, os.environ)


def misconfiguration(platform: str, settings: "Settings") -> str | None:
    """Why an enabled ``platform`` cannot start, or ``None``."""
    missing = missing_secrets(platform, settings)
    if not missing:
        return None
    return f"{platform} is enabled but {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set in the environment"


class Unavailable:
    """Stands for an enabled platform that has no adapter (its secret is missing, its extra is
    not installed): shown as misconfigured; what is queued for it waits in the outbox."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def start(self, gateway: GatewayPort) -> None:
        return None

    async def stop(self) -> None:
        return None

    def http_routes(self) -> "Sequence[BaseRoute]":
        return []

    async def send(self, message: OutboxEntry) -> None:
        raise DeliveryError(f"{self.name} is not running (misconfigured)")

    async def live(self, route: RouteKey, event: dict[str, Any]) -> None:
        return None

    def health(self) -> AdapterHealth:
        return AdapterHealth(False, "not available", MISCONFIGURED)

    async def reload(self, settings: "Settings") -> None:
        return None


class Supervised:
    """An adapter kept running: see the module docstring. Other attributes are the adapter's."""

    def __init__(
        self,
        adapter: Adapter,
        *,
        say: Callable[[str], None] = lambda line: None,
        problem: str | None = None,
        base: float = BACKOFF_BASE,
        cap: float = BACKOFF_CAP,
        watch: float = WATCH_INTERVAL,
        start_timeout: float = START_TIMEOUT,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.inner = adapter
        self.name = adapter.name
        self.say = say
        self.problem = problem
        self.base, self.cap, self.watch, self.start_timeout = base, cap, watch, start_timeout
        self.wall = wall
        self.phase = STOPPED
        """``connected``, ``retrying``, ``misconfigured`` or ``stopped`` (not ``state``: the
        adapter may have its own)."""
        self.since = wall()
        self.last_error: str | None = None
        self.failures = 0
        self.starts = 0
        """Successful starts (a restart after a dead loop counts again)."""
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._next_try: float | None = None
        """When (monotonic) the next start is tried while retrying."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    # -- life cycle -----------------------------------------------------------------------------
    async def start(self, gateway: GatewayPort) -> None:
        """Start the adapter once here; on failure keep trying in the background. Never raises."""
        self._stopping = False
        if self.problem is not None or isinstance(self.inner, Unavailable):
            self._enter(MISCONFIGURED, self.problem or (
                f"{self.name} is enabled but no adapter could be built for it "
                f"(is the 'vigil[{self.name}]' extra installed?)"))
            self.say(f"vigil gateway: error: {self.last_error}; {self.name} is not started "
                     "(the gateway runs without it; `vigil gateway status` shows it)")
            return
        await self._try(gateway)
        self._task = asyncio.create_task(self._keep(gateway), name=f"adapter-{self.name}")

    async def stop(self) -> None:
        self._stopping = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if self.phase != MISCONFIGURED:
            try:
                await self.inner.stop()
            finally:
                self._enter(STOPPED, self.last_error)

    async def _try(self, gateway: GatewayPort) -> bool:
        try:
            await asyncio.wait_for(self.inner.start(gateway), self.start_timeout)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # any failure of one platform is retried; the gateway goes on
            if isinstance(exc, asyncio.TimeoutError):
                exc = TimeoutError(f"start() took longer than {self.start_timeout:g} s")
            self._failed(" ".join(str(exc).split()) or type(exc).__name__)
            await self._quiet_stop()  # release what a half-done start took (stop is idempotent)
            return False
        if self.failures:
            self.say(f"vigil gateway: {self.name} connected again after {self.failures} failed tries")
        self.failures = 0
        self.starts += 1
        self._enter(CONNECTED, self.last_error)
        return True

    def _failed(self, error: str) -> None:
        self.failures += 1
        repeated = error == self.last_error and self.phase == RETRYING
        self._enter(RETRYING, error, keep_since=self.phase == RETRYING)
        if not repeated:  # said when it starts or changes, not at every try
            self.say(f"vigil gateway: error: {self.name} failed: {error}; retrying in "
                     f"{delay(self.failures, self.base, self.cap):g} s (then up to every {self.cap:g} s)")

    async def _keep(self, gateway: GatewayPort) -> None:
        while not self._stopping:
            try:
                await self._step(gateway)
            except asyncio.CancelledError:
                raise
            except Exception:  # supervision must outlive any one failure
                log.exception("supervising adapter %s", self.name)
                await asyncio.sleep(self.cap)

    async def _step(self, gateway: GatewayPort) -> None:
        if self.phase == CONNECTED:
            await asyncio.sleep(self.watch)
            dead = self._died()
            if dead is not None:
                await self._quiet_stop()
                self._failed(dead)
            return
        pause = delay(self.failures, self.base, self.cap)
        self._next_try = time.monotonic() + pause
        await asyncio.sleep(pause)
        if not self._stopping:
            await self._try(gateway)

    def _died(self) -> str | None:
        """The adapter's reason when it says its receiving loop ended, else ``None``."""
        try:
            health = self.inner.health()
        except Exception as exc:
            return f"health check failed: {exc}"
        if health.ok or health.state in (RETRYING, CONNECTED, MISCONFIGURED):
            return None
        return health.last_error or health.detail or "its receiving loop ended"

    async def _quiet_stop(self) -> None:
        try:
            await self.inner.stop()
        except Exception:
            log.exception("adapter %s did not stop cleanly", self.name)

    def _enter(self, state: str, error: str | None, *, keep_since: bool = False) -> None:
        if not (keep_since and state == self.phase):
            self.since = self.wall()
        self.phase, self.last_error = state, error

    # -- the adapter protocol -------------------------------------------------------------------
    def http_routes(self) -> "Sequence[BaseRoute]":
        return self.inner.http_routes()

    async def send(self, message: OutboxEntry) -> None:
        if self.phase in (RETRYING, MISCONFIGURED):
            # the outbox tries again once the adapter may be back, not before
            wait = None if self._next_try is None else max(0.5, self._next_try - time.monotonic() + 0.5)
            raise DeliveryError(f"{self.name} is not connected ({self.phase}: {self.last_error})",
                                retry_after=wait if self.phase == RETRYING else None)
        await self.inner.send(message)

    async def live(self, route: RouteKey, event: dict[str, Any]) -> None:
        if self.phase == CONNECTED:
            await self.inner.live(route, event)

    def health(self) -> AdapterHealth:
        if self.phase != CONNECTED:
            return AdapterHealth(False, self.last_error or self.phase, self.phase, self.since, self.last_error)
        try:
            inner = self.inner.health()
        except Exception as exc:
            return AdapterHealth(False, f"health check failed: {exc}", RETRYING, self.since, str(exc))
        state = inner.state or (CONNECTED if inner.ok else STOPPED)
        since = inner.since if inner.since is not None else self.since
        return AdapterHealth(inner.ok, inner.detail, state, since, inner.last_error or self.last_error)

    async def reload(self, settings: "Settings") -> None:
        if self.phase != MISCONFIGURED:
            await self.inner.reload(settings)


def health_view(name: str, health: AdapterHealth) -> dict[str, Any]:
    """One adapter in the status record."""
    state = health.state or (CONNECTED if health.ok else STOPPED)
    return {"name": name, "ok": health.ok, "detail": health.detail, "state": state,
            "since": health.since, "last_error": health.last_error}


def supervise(
    adapters: "dict[str, Adapter]", settings: "Settings", *, say: Callable[[str], None], **options: Any
) -> "dict[str, Supervised]":
    """Every adapter wrapped, plus a stand-in for each enabled platform without one."""
    wrapped: dict[str, Supervised] = {}
    for platform in registry.platforms():
        # A platform with a section of its own may fail to become an adapter (no SDK, no secret).
        if platform.section is not None and platform.enabled(settings) and platform.name not in adapters:
            adapters = {**adapters, platform.name: Unavailable(platform.name)}
    for name, adapter in adapters.items():
        wrapped[name] = Supervised(adapter, say=say, problem=misconfiguration(name, settings), **options)
    return wrapped
