""":class:`MatrixAdapter`: Matrix behind the adapter protocol, on matrix-nio.

Events come by the ``/sync`` long poll (:mod:`.receiver`), which hands each message for the
agent (:mod:`.inbound` decides which, and where it routes) to the gateway before it moves its
sync token on. Replies leave the outbox as Markdown with an HTML twin (:mod:`.content`,
:mod:`.outbound`), finishing the turn's streamed preview (:mod:`.editing`, on the shared
:mod:`vigil.gateway.adapters.streaming`) by an edit;
approvals are reactions or a reply (:mod:`.approvals`); files go both ways (:mod:`.files`).
The access token comes from the environment variable ``matrix.token_env`` names; without it
the adapter says it is misconfigured and the gateway runs on. With matrix-nio's ``e2e`` extra
the adapter keeps its encryption keys in the profile's ``matrix/`` folder and answers in
encrypted rooms too (``matrix.encryption``); without, it tells an encrypted room it cannot.

With several workers on one store the gateway gives the adapter a poll lease
(:attr:`MatrixAdapter.poll_lease`): every worker sends, one syncs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from vigil.gateway.adapters.base import AdapterHealth, DeliveryError, GatewayPort
from vigil.gateway.adapters.health import MISCONFIGURED, RETRYING, HealthState
from vigil.gateway.adapters.live import hand_on
from vigil.gateway.adapters.matrix.approvals import Approvals
from vigil.gateway.adapters.matrix.editing import streamer
from vigil.gateway.adapters.matrix.inbound import NAME
from vigil.gateway.adapters.matrix.outbound import deliver
from vigil.gateway.adapters.previews import DurablePreviews, Preview
from vigil.platforms.matrix import MatrixSettings, encryption_available
from vigil.store import StoreError
from vigil.store.gateway.gateway_tables import OutboxEntry, RouteKey

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from vigil.config.settings import Settings
    from vigil.gateway.adapters.matrix.client import Homeserver

log = logging.getLogger(__name__)

START_TIMEOUT = 5.0
"""Seconds ``start`` waits for the homeserver before it goes on trying in the background."""


class MatrixAdapter:
    """See the module docstring. ``backoff``, ``poll_ms`` and ``edit_interval`` are for tests."""

    name = NAME

    def __init__(self, settings: MatrixSettings | None = None, *, backoff: tuple[float, float] = (1.0, 60.0),
                 poll_ms: int | None = None, edit_interval: float | None = None) -> None:
        self.settings = settings or MatrixSettings()
        self.gateway: GatewayPort | None = None
        self.client: Homeserver | None = None
        self.previews = DurablePreviews(NAME, lambda: self.gateway)
        self.streams, self.messages = streamer(lambda: self.client, self.previews, interval=edit_interval)
        self.approvals = Approvals(lambda: self.client, lambda: self.gateway)
        self.claimed: dict[int, tuple[str, Preview | None]] = {}
        """Outbox entries whose preview they finish (by outbox id): (its event id, its record)."""
        self.poll_lease: Any = None
        """Set by a gateway sharing its store with others: only the lease's holder syncs."""
        self.health_state = HealthState()
        self._backoff = backoff
        self._poll_ms = poll_ms
        self._task: asyncio.Task[None] | None = None
        self._token = ""
        self.synced = asyncio.Event()
        """Set once this run's first sync is in: the rooms (and which are encrypted) are known."""

    # -- life cycle -------------------------------------------------------------------------
    async def start(self, gateway: GatewayPort) -> None:
        self.gateway = gateway
        if self._task is not None and not self._task.done():
            return
        self.settings = gateway.settings.matrix
        s = self.settings
        await self.previews.load()
        self._token = os.environ.get(s.token_env, "").strip()
        missing = ("the environment variable " + s.token_env + " (the access token)" if not self._token
                   else "matrix.homeserver" if not s.homeserver else "matrix.user_id" if not s.user_id else None)
        if missing:
            self.set_state("misconfigured", f"{missing} is not set")
            return
        try:
            from vigil.gateway.adapters.matrix.client import Homeserver
        except ImportError:
            self.set_state("misconfigured", "matrix-nio is not installed: pip install 'vigil[matrix]'")
            return
        store = self._keys_folder() if s.encryption and encryption_available() else None
        self.client = Homeserver(str(s.homeserver), str(s.user_id), self._token, store=store)
        self.set_state("retrying", "connecting")
        ready = asyncio.Event()
        self._task = asyncio.create_task(self._run(ready), name="matrix")
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(ready.wait(), START_TIMEOUT)

    def _keys_folder(self) -> Path:
        assert self.gateway is not None
        return Path(self.gateway.profile.home) / "matrix"

    async def _run(self, ready: asyncio.Event) -> None:
        """Log in, then sync; an unexpected error starts it over after a pause."""
        from vigil.gateway.adapters.matrix.receiver import Receiver

        kwargs: dict[str, Any] = {"backoff": self._backoff}
        if self._poll_ms is not None:
            kwargs["poll_ms"] = self._poll_ms
        receiver = Receiver(self, **kwargs)
        while True:
            try:
                await self._login(receiver, ready)
                ready.set()
                await receiver.run()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                delay = receiver.backoff.next()
                log.exception("matrix: the adapter failed; starting over in %.3g s", delay)
                self.set_state("retrying", f"retrying in {delay:.3g} s", f"{type(exc).__name__}: {exc}")
                ready.set()
                await asyncio.sleep(delay)

    async def _login(self, receiver: Any, ready: asyncio.Event) -> None:
        client = self.client_or_fail()
        while True:
            try:
                user = await client.login()
                break
            except DeliveryError as exc:
                delay = receiver.backoff.next()
                state = "retrying" if exc.retryable else "misconfigured"
                self.set_state(state, f"retrying in {delay:.3g} s", f"whoami failed: {exc}")
                ready.set()
                await asyncio.sleep(delay)
        if user != self.settings.user_id:
            log.warning("matrix: the access token is %s's, not matrix.user_id %s: answering as %s",
                        user, self.settings.user_id, user)
        receiver.backoff.reset()
        self.set_state("connected", f"signed in as {user}")
        if client.encrypts:
            await self.crypto_upkeep()

    async def crypto_upkeep(self) -> None:
        """Publish this device's keys, learn the others', and send the keys it owes (between syncs)."""
        nio = self.client_or_fail().nio
        client = self.client_or_fail()
        try:
            if nio.should_upload_keys:
                await client.call(nio.keys_upload())
            if nio.should_query_keys:
                await client.call(nio.keys_query())
            if nio.should_claim_keys:
                await client.call(nio.keys_claim(nio.get_users_for_key_claiming()))
            await nio.send_to_device_messages()
        except DeliveryError as exc:
            log.warning("matrix: encryption keys not exchanged yet: %s", exc)

    async def take_lease(self) -> bool:
        """Whether this worker may sync now (always, without a lease); waits a while if not."""
        lease = self.poll_lease
        if lease is None:
            return True
        try:
            held = await asyncio.to_thread(lease.take)
        except StoreError as exc:
            log.warning("matrix: cannot renew the sync lease: %s", exc)
            held = lease.holds()
        if not held:
            self.set_state("connected", "sending; another worker syncs")
            await asyncio.sleep(lease.renew_every)
        return held

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await self.streams.close()
        await self.previews.close()
        self.approvals.clear()
        self.claimed.clear()
        self.synced.clear()
        if self.poll_lease is not None:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self.poll_lease.release)
        client, self.client = self.client, None
        if client is not None:
            await client.close()
        if self.health_state.state != MISCONFIGURED:
            self.set_state("stopped", "stopped")

    async def reload(self, settings: "Settings") -> None:
        """New settings: the allow-list at once; a new token, homeserver or account reconnects."""
        old, new = self.settings, settings.matrix
        self.settings = new
        if self.gateway is None:
            return
        token = os.environ.get(new.token_env, "").strip()
        connection = ("homeserver", "user_id", "token_env", "encryption")
        if token != self._token or any(getattr(old, f) != getattr(new, f) for f in connection) or self.client is None:
            gateway = self.gateway
            await self.stop()
            await self.start(gateway)

    def http_routes(self) -> "Sequence[BaseRoute]":
        return []

    def health(self) -> AdapterHealth:
        return self.health_state.view()

    # -- the gateway's side -----------------------------------------------------------------
    async def send(self, message: OutboxEntry) -> None:
        client = self.client
        if client is None or not client.device_id:
            # retryable even when misconfigured: a SIGHUP with the token set sends it after all
            raise DeliveryError(f"Matrix is not available: {self.health_state.detail}")
        if not self.synced.is_set():  # the rooms are known (and encrypted ones told apart) after it
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.synced.wait(), START_TIMEOUT)
            if not self.synced.is_set():
                raise DeliveryError("Matrix: the first sync has not come back yet")
        await deliver(self, client, message)

    async def live(self, route: RouteKey, event: dict[str, Any]) -> None:
        if self.client is None:
            return
        await hand_on(route, event, self.streams, self.approvals)
        if event.get("type") == "turn_ended":  # a Matrix typing notice lasts until turned off
            with contextlib.suppress(DeliveryError):
                await self.messages.stop_typing(route)

    # -- helpers ------------------------------------------------------------------------------
    def client_or_fail(self) -> "Homeserver":
        if self.client is None:
            raise DeliveryError("the Matrix adapter is not running")
        return self.client

    async def allowed(self, user: str) -> bool:
        """Whether ``user`` may talk to the agent (``matrix.allow``, or paired)."""
        if user in self.settings.allow:
            return True
        return self.gateway is not None and await self.gateway.may_talk(NAME, user)

    def set_state(self, state: str, detail: str, error: str | None = None) -> None:
        """Enter ``state`` (:mod:`vigil.gateway.adapters.health`); trouble is logged as it
        begins, and a misconfiguration said on the gateway's console too."""
        if state != self.health_state.state and state in (MISCONFIGURED, RETRYING) and detail != "connecting":
            log.warning("matrix adapter %s: %s%s", state, detail, f" ({error})" if error else "")
            say = getattr(self.gateway, "say", None)
            if callable(say) and state == MISCONFIGURED:
                say(f"vigil gateway: error: matrix adapter {state}: {error or detail}")
        self.health_state.set(state, detail, error if error is not None or state != MISCONFIGURED else detail)
