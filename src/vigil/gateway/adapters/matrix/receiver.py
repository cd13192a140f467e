"""The ``/sync`` loop: every event for the agent handed to the gateway, and the sync token moved
past it only once the gateway has it.

A homeserver hands out what came after the ``since`` token of a ``/sync``, so the token is the
commit: it is stored (``state_meta['matrix.next_batch.<user id>']``) after every event of a
response is in the gateway's inbox (or was found not to be for the agent). A response whose
hand-over failed for a passing reason (the gateway is starting or stopping, the store is
down) is fetched again from the old token; a crash before the token was stored fetches it
again too, and the inbox (keyed by event id) answers it once. The first sync after a start
asks for the rooms' full state (members, encryption), so a restarted gateway knows which
rooms are direct. An account's very first sync only sets the token: what was said before
the agent ran is history, not questions.

Invitations are accepted from the people on ``matrix.allow`` (or paired) and declined from
anyone else. Lost connections, 5xx and 429 are retried with back-off; a refused token makes
the adapter ``misconfigured`` until a SIGHUP brings a new one (it keeps trying meanwhile).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from vigil.backoff import Backoff, Streak
from vigil.gateway.adapters.base import DeliveryError, GatewayClosed, Inbound
from vigil.gateway.adapters.matrix import inbound as routing
from vigil.gateway.adapters.saved_files import conversation_directory
from vigil.store import StoreError

if TYPE_CHECKING:
    from vigil.gateway.adapters.matrix.adapter import MatrixAdapter

log = logging.getLogger(__name__)

POLL_MS = 25_000
POISON_TRIES = 3
ENCRYPTED_NOTICE = ("This room is encrypted, and vigil answers in unencrypted rooms only here "
                    "(install matrix-nio[e2e] for encrypted rooms). Write to me in an unencrypted room.")


class Receiver:
    """The sync loop of one adapter run (see the module docstring)."""

    def __init__(self, adapter: "MatrixAdapter", *, backoff: tuple[float, float] = (1.0, 60.0),
                 poll_ms: int = POLL_MS) -> None:
        self.adapter = adapter
        self.backoff = Streak(Backoff(*backoff))
        self.poll_ms = poll_ms
        self.token: str | None = None
        self._tries: dict[str, int] = {}
        self._told: set[str] = set()

    @property
    def key(self) -> str:
        return f"matrix.next_batch.{self.adapter.client_or_fail().user_id}"

    async def run(self) -> None:
        adapter = self.adapter
        gateway = adapter.gateway
        assert gateway is not None
        stored = await asyncio.to_thread(gateway.store.get_meta, self.key)
        self.token = stored.value if stored is not None and isinstance(stored.value, str) else None
        first = True
        while True:
            if not await adapter.take_lease():
                continue
            client = adapter.client_or_fail()
            client.nio.next_batch = ""  # nio skips a response whose token it saw (a retry, a full state)
            try:
                response = await client.call(client.nio.sync(timeout=0 if first else self.poll_ms, since=self.token,
                                                             full_state=first or None))
            except DeliveryError as exc:
                refused = not exc.retryable
                await self._pause(f"the homeserver refuses the access token: {exc}" if refused else f"sync failed: {exc}",
                                  "misconfigured" if refused else "retrying", exc.retry_after)
                continue
            self.backoff.reset()
            adapter.set_state("connected", f"syncing as {client.user_id}" + (" (encrypted rooms too)" if client.encrypts else ""))
            try:
                if self.token is None:
                    await self._invitations(response)  # the past is not answered; invitations still count
                else:
                    await self._hand_over(response)
            except (GatewayClosed, StoreError, OSError, DeliveryError) as exc:
                await self._pause(f"could not hand the events to the gateway: {exc}", "connected", None)
                continue
            await self._commit(response.next_batch)
            first = False
            adapter.synced.set()
            if client.encrypts:
                await adapter.crypto_upkeep()

    async def _pause(self, why: str, state: str, delay: float | None) -> None:
        pause = self.backoff.next() if delay is None else delay
        self.adapter.set_state(state, f"{why} (retrying in {pause:.3g} s)")
        await asyncio.sleep(pause)

    async def _commit(self, token: str) -> None:
        gateway = self.adapter.gateway
        assert gateway is not None
        try:
            await asyncio.to_thread(gateway.store.set_meta, self.key, token)
        except StoreError as exc:  # kept in memory: at worst a restart fetches events again, answered once
            log.warning("matrix: the sync token is not stored: %s", exc)
        self.token = token

    # -- what a response brings ---------------------------------------------------------------
    async def _hand_over(self, response: Any) -> None:
        await self._invitations(response)
        client = self.adapter.client_or_fail()
        for room_id, info in response.rooms.join.items():
            room = client.nio.rooms.get(room_id)
            direct = room is not None and room.member_count <= 2
            names = tuple(name for name in (room.user_name(client.user_id) if room else None,
                                            client.user_id[1:].split(":", 1)[0]) if name)
            for event in info.timeline.events:
                event_id = str(getattr(event, "event_id", "") or "")
                try:
                    await self._event(room_id, event, direct, names)
                except (GatewayClosed, StoreError, OSError, DeliveryError, asyncio.CancelledError):
                    raise
                except Exception:
                    tries = self._tries[event_id] = self._tries.get(event_id, 0) + 1
                    log.exception("matrix: event %s could not be handled (try %d)", event_id, tries)
                    if tries < POISON_TRIES:
                        raise OSError(f"event {event_id} failed") from None
                    log.error("matrix: event %s skipped after %d tries", event_id, tries)
                self._tries.pop(event_id, None)

    async def _event(self, room_id: str, event: Any, direct: bool, names: tuple[str, ...]) -> None:
        from nio import MegolmEvent

        adapter = self.adapter
        gateway = adapter.gateway
        client = adapter.client_or_fail()
        assert gateway is not None
        if isinstance(event, MegolmEvent):
            await self._undecryptable(room_id, event, direct)
            return
        source = dict(getattr(event, "source", None) or {})
        reacted = routing.reaction(source)
        if reacted is not None:
            adapter.approvals.reacted(*reacted)
            return
        found = routing.candidate(source, room_id, bot=client.user_id, names=names, direct=direct)
        if found is None:
            return
        verdict = routing.decision(found.text)
        if verdict is not None and adapter.approvals.pending(found.route):
            if adapter.approvals.replied(found.route, found.sender, verdict):
                return
        if found.needs_route and await asyncio.to_thread(gateway.store.gateway.route_get, found.route) is None:
            return
        text = found.text
        if found.file is not None:
            text = await self._with_file(found)
        if not text.strip():
            return
        await gateway.receive(Inbound(found.route, found.event_id, text, sender=found.sender,
                                      meta={"matrix": {"room": room_id, "event_id": found.event_id}}))

    async def _with_file(self, found: routing.Candidate) -> str:
        adapter = self.adapter
        gateway = adapter.gateway
        assert gateway is not None and found.file is not None
        if not await adapter.allowed(found.sender):  # a stranger's file is not downloaded
            return f"{found.text}\n\n[The user sent the file '{found.file['name']}'; it was not saved]".strip()
        directory = await conversation_directory(gateway, found.route)
        from vigil.gateway.adapters.matrix.files import save

        note = await save(adapter.client_or_fail(), found.file, directory, gateway.settings.gateway.upload_max_bytes)
        return f"{found.text}\n\n{note}" if found.text.strip() else note

    async def _undecryptable(self, room_id: str, event: Any, direct: bool) -> None:
        """An encrypted message this client cannot read: without encryption here, the room is
        told once (per run) why the agent stays silent; with it, the keys are missing."""
        adapter = self.adapter
        client = adapter.client_or_fail()
        if client.encrypts:
            log.warning("matrix: cannot decrypt event %s in %s (its keys have not reached this device)",
                        event.event_id, room_id)
            return
        if room_id in self._told or not await adapter.allowed(event.sender):
            return
        self._told.add(room_id)
        from vigil.gateway.adapters.matrix.content import message

        try:
            await client.send(room_id, message(ENCRYPTED_NOTICE, msgtype="m.notice", formatted=False),
                              txn=f"vigil-encrypted-{event.event_id}")
        except DeliveryError as exc:
            log.warning("matrix: cannot tell %s it is encrypted: %s", room_id, exc)

    async def _invitations(self, response: Any) -> None:
        from nio import InviteMemberEvent

        adapter = self.adapter
        client = adapter.client_or_fail()
        for room_id, info in response.rooms.invite.items():
            inviter = next((event.sender for event in info.invite_state if isinstance(event, InviteMemberEvent)
                            and event.state_key == client.user_id and event.membership == "invite"), None)
            if inviter is not None and await adapter.allowed(inviter):
                await client.call(client.nio.join(room_id))
                log.info("matrix: joined %s, invited by %s", room_id, inviter)
            else:
                log.warning("matrix: declined the invitation to %s from %s (not on matrix.allow, not paired)",
                            room_id, inviter)
                try:
                    await client.call(client.nio.room_leave(room_id))
                except DeliveryError as exc:
                    if exc.retryable:
                        raise
