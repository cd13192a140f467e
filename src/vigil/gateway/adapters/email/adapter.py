""":class:`EmailAdapter`: mail behind the adapter protocol, sending through SMTP and, with
``email.imap_url``, receiving over IMAP.

Answers, cron answers (``--deliver email:ADDRESS``) and heartbeats leave the gateway's outbox
as mails to the route's address (:mod:`.compose`, :mod:`.smtp`), a file (``send_file``) attached
to one (:mod:`.attachments`); the outbox retries a try the server put off (4xx, a broken
connection) and gives up on a refusal (5xx). An answer to a
received mail is a reply in its thread (``In-Reply-To``, ``References``, ``Re:``). Received
mail comes from :mod:`.receiver`; without ``imap_url`` the adapter is send-only.

``start`` checks the server as a send would (connect, STARTTLS, login) so that ``vigil
gateway status`` tells a wrong host or password at once; a start that cannot reach it fails,
and the gateway's supervisor tries again with back-off. Without ``email.address`` or
``email.smtp_url`` the adapter says it is misconfigured and the gateway runs on. The password
comes from the environment variable ``email.password_env`` names, read at start and on SIGHUP.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import OrderedDict
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Sequence

from vigil.gateway.adapters.base import AdapterHealth, DeliveryError, GatewayPort
from vigil.gateway.adapters.health import CONNECTED, MISCONFIGURED, STOPPED, HealthState
from vigil.gateway.adapters.email import smtp
from vigil.gateway.adapters.email.attachments import outgoing
from vigil.gateway.adapters.email.compose import compose
from vigil.gateway.adapters.email.receiver import Receiver
from vigil.platforms.email import ADDRESS, Endpoint, endpoint
from vigil.store.gateway.gateway_tables import OutboxEntry, RouteKey

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from vigil.config.settings import Settings
    from vigil.platforms.email import EmailSettings

log = logging.getLogger(__name__)

START_WAIT = 5.0
"""Seconds ``start`` waits for the mailbox to open before it goes on trying in the background."""
MISCONFIGURED_RETRY = 60.0
"""Seconds before a mail queued while the settings are incomplete is tried again."""


class EmailAdapter:
    """See the module docstring. ``timeout`` bounds each exchange with the server."""

    name = "email"

    def __init__(self, *, timeout: float = smtp.TIMEOUT) -> None:
        self.gateway: GatewayPort | None = None
        self.timeout = timeout
        self._settings: EmailSettings | None = None
        self._server: Endpoint | None = None
        self._login: smtp.Login | None = None
        self.health_state = HealthState()
        self._imap: Endpoint | None = None
        self._receiver: Receiver | None = None
        self._task: asyncio.Task[None] | None = None
        self._reading: tuple[str, str, str | None] | None = None
        self._subjects: OrderedDict[str, str] = OrderedDict()
        """Threads' latest subjects, kept by the receiver (a pairing code's reply names none)."""
        self._opened = asyncio.Event()
        """The receiver's own (state, detail, error) while it runs."""

    # -- configuration ----------------------------------------------------------------------
    @property
    def settings(self) -> "EmailSettings":
        """The section in force: the gateway's at start, the reloaded one after SIGHUP."""
        if self._settings is not None:
            return self._settings
        assert self.gateway is not None
        return self.gateway.settings.email

    def _enter(self, state: str, detail: str, error: str | None = None) -> None:
        self.health_state.set(state, detail, error)

    def _configure(self) -> str | None:
        """Read the server and login from the settings and the environment; why not, or ``None``."""
        section = self.settings
        if not section.address or not section.smtp_url:
            return "email.address and email.smtp_url must both be set"
        password: str | None = None
        if section.password_env:
            password = os.environ.get(section.password_env, "").strip() or None
            if password is None:
                return f"the environment variable {section.password_env} (the login password) is not set"
        self._server = endpoint(section.smtp_url)
        self._imap = endpoint(section.imap_url, "imap") if section.imap_url else None
        self._login = smtp.Login(section.username or section.address, password)
        return None

    # -- life cycle -------------------------------------------------------------------------
    async def start(self, gateway: GatewayPort) -> None:
        self.gateway = gateway
        problem = self._configure()
        if problem is not None:
            self._server = self._login = None
            self._enter(MISCONFIGURED, problem, problem)
            return
        assert self._server is not None and self._login is not None
        await asyncio.to_thread(smtp.probe, self._server, self._login, timeout=self.timeout)
        self._enter(CONNECTED, f"sending as {self.settings.address} through {self._server}")
        await self._receive(gateway)

    async def _receive(self, gateway: GatewayPort) -> None:
        """Start reading mail when ``email.imap_url`` is set (and it is not read already), and
        wait up to :data:`START_WAIT` seconds for the mailbox to open (or to fail)."""
        if self._imap is None or self._login is None or (self._task is not None and not self._task.done()):
            return
        section = self.settings
        self._reading = ("retrying", f"connecting to {self._imap}", None)
        self._receiver = Receiver(gateway, self._imap, self._login, mailbox=section.mailbox,
                                  own=section.address or "", poll=section.poll_seconds, state=self._read_state,
                                  subjects=self._subjects)
        self._opened = asyncio.Event()
        self._task = asyncio.create_task(self._receiver.run(), name="email-imap")
        try:
            await asyncio.wait_for(self._opened.wait(), START_WAIT)
        except asyncio.TimeoutError:
            pass

    def _read_state(self, state: str, detail: str, error: str | None) -> None:
        self._reading = (state, detail, error)
        if error is not None:
            self.health_state.last_error = error
        if state == CONNECTED or error is not None:
            self._opened.set()

    async def _stop_receiving(self) -> None:
        task, self._task = self._task, None
        receiver, self._receiver = self._receiver, None
        if receiver is not None:
            receiver.close()
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self._reading = None

    async def stop(self) -> None:
        await self._stop_receiving()
        if self.health_state.state != MISCONFIGURED:
            self._enter(STOPPED, "stopped")

    def http_routes(self) -> "Sequence[BaseRoute]":
        return []

    # -- outbound ---------------------------------------------------------------------------
    async def send(self, message: OutboxEntry) -> None:
        """Mail ``message`` to its route's address; :class:`DeliveryError` as :mod:`.smtp` says."""
        if not ADDRESS.fullmatch(message.route.chat):
            raise DeliveryError(f"'{message.route.chat[:80]}' is not a mail address", retryable=False)
        attachment = await asyncio.to_thread(outgoing, message) if message.kind == "file" else None
        server, login, sender = self._server, self._login, self.settings.address if self.gateway else None
        if server is None or login is None or not sender:
            raise DeliveryError(f"email is not ready ({self.health_state.detail})", retry_after=MISCONFIGURED_RETRY)
        subject, thread = await self._thread(message)
        mail = compose(message, sender=sender, subject=subject or await self._subject(message), now=time.time(),
                       thread=thread, attachment=attachment)
        try:
            await asyncio.to_thread(smtp.send, server, login, mail, timeout=self.timeout)
        except DeliveryError as exc:
            self.health_state.last_error = str(exc)
            raise

    async def _thread(self, message: OutboxEntry) -> tuple[str, list[str]]:
        """The subject and Message-IDs of the mail ``message`` answers (from its inbox entry),
        else of its route's thread (a heartbeat in a mail thread)."""
        if message.inbox_id is not None and self.gateway is not None:
            try:
                entry = await asyncio.to_thread(self.gateway.store.gateway.inbox_get, message.inbox_id)
            except Exception:
                entry = None
            meta = getattr(entry, "meta", None) or {}
            references = [str(ref) for ref in meta.get("references") or [] if isinstance(ref, str)]
            if references:
                return str(meta.get("subject") or ""), references
        thread = message.route.thread
        return (self._subjects.get(thread, ""), [thread]) if thread else ("", [])

    async def _subject(self, message: OutboxEntry) -> str:
        """The cron run's title, else the conversation's, else a default."""
        title = message.meta.get("subject") or message.meta.get("title")
        if isinstance(title, str) and title.strip():
            return title
        if message.session_id and self.gateway is not None:
            store = self.gateway.store
            try:
                record = await asyncio.to_thread(store.get_session, message.session_id)
                return str(getattr(record, "title", "") or "")
            except Exception:  # a deleted conversation: the mail still goes, with the default subject
                log.debug("email: no title for session %s", message.session_id, exc_info=True)
        return ""

    async def live(self, route: RouteKey, event: dict[str, Any]) -> None:
        return None  # a mail is sent whole, once the answer is

    def health(self) -> AdapterHealth:
        sending = self.health_state
        if sending.state == CONNECTED and self._reading is not None:
            state, detail, _ = self._reading
            return replace(sending.view(f"{sending.detail}; {detail}"), ok=state == CONNECTED, state=state)
        return sending.view()

    async def reload(self, settings: "Settings") -> None:
        """New settings (and a new password in the environment) take effect for the next mail;
        a changed server or login is checked again as at start, and reading starts over."""
        reading = ("mailbox", "poll_seconds", "address")
        old = (self._server, self._login, self._imap,
               tuple(getattr(self.settings, name) for name in reading) if self.gateway else None)
        self._settings = settings.email
        if self.gateway is None:
            return
        problem = self._configure()
        if problem is not None:
            await self._stop_receiving()
            self._server = self._login = None
            self._enter(MISCONFIGURED, problem, problem)
            return
        if (self._server, self._login, self._imap, tuple(getattr(settings.email, name) for name in reading)) != old:
            await self._stop_receiving()
        await self._receive(self.gateway)
        if (self._server, self._login) != old[:2] or self.health_state.state != CONNECTED:
            assert self._server is not None and self._login is not None
            try:
                await asyncio.to_thread(smtp.probe, self._server, self._login, timeout=self.timeout)
            except DeliveryError as exc:  # sends try anyway; the outbox retries them
                self._enter(CONNECTED, f"sending as {settings.email.address} through {self._server}", str(exc))
                return
        self._enter(CONNECTED, f"sending as {settings.email.address} through {self._server}")
