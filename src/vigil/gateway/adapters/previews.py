"""Streamed previews that outlive the process: the message a turn's answer streams into, kept
in the store's ``state_meta`` so that a restarted gateway finishes that message with the
answer instead of sending the answer a second time (and leaves no "working" message behind).

One record per preview, written once, when the message is first shown (key
``<adapter>.preview.<chat>.<message id>``): the route, the message id, the turn's kind and
session, a digest of the turn's input and one of the text first shown. They link a preview to
its outbox reply after a restart: a reply's inbox entry holds the text the turn began with,
and every answer begins with what its preview first showed (heartbeats, which have no inbox
entry, are linked by that alone; the outbox need not send in the old order after a restart). A record is deleted
:data:`SETTLE` seconds after its answer went out (so a crash before the outbox recorded the
reply as sent still finds it), in the commit of the next record where there is one.

At start the records a previous process left are loaded as *orphans*: a turn resumed after
the crash takes its preview over (:meth:`DurablePreviews.adopt`), and an outbox reply that
has no preview of its own finishes its orphan (:meth:`DurablePreviews.find`). Records older
than :data:`MAX_AGE`, and those of conversations with nothing left unfinished, are deleted
at load; orphans nobody took within :data:`ORPHAN_WAIT` are deleted later. Nothing piles up.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from vigil.store import StoreError
from vigil.store.gateway.gateway_tables import PENDING, OutboxEntry, RouteKey
from vigil.store.records import MetaSwap

if TYPE_CHECKING:
    from vigil.gateway.adapters.base import GatewayPort
    from vigil.store import SessionStore

log = logging.getLogger(__name__)

SETTLE = 2.0
"""Seconds a delivered preview's record is kept: the outbox marks the reply sent meanwhile."""
MAX_AGE = 2 * 86_400.0
"""Seconds after which a record is deleted at load whatever it is."""
ORPHAN_WAIT = 3_600.0
"""Seconds after load an orphan may wait for its resumed turn or its reply."""
PENDING_LIMIT = 100_000


def digest(text: str) -> str:
    """The input's fingerprint stored in a record (no message text goes to ``state_meta``)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:20]


@dataclass(frozen=True)
class Preview:
    """One durable preview record."""

    key: str
    route: RouteKey
    message: Any
    """The platform's id of the message (an int on some platforms, a timestamp string on others)."""
    input: str
    kind: str
    session: str | None
    value: dict[str, Any]
    """As stored (the expected value when it is deleted)."""
    shown: str = ""
    """A digest of the text the preview first showed (``""``: a placeholder of its own)."""
    shown_len: int = 0
    at: float = 0.0
    """When it was recorded (the store's clock)."""


class DurablePreviews:
    """The durable previews of one adapter (see the module docstring)."""

    def __init__(self, adapter: str, gateway: Callable[[], "GatewayPort | None"]) -> None:
        self.adapter = adapter
        self.prefix = f"{adapter}.preview."
        self._gateway = gateway
        self._orphans: dict[RouteKey, list[Preview]] = {}
        self._orphans_until = 0.0
        self._settled: dict[str, tuple[Preview, float]] = {}
        """Delivered previews (by key) and when: deleted :data:`SETTLE` s later."""
        self._flusher: asyncio.Task[None] | None = None

    def _store(self) -> "SessionStore | None":
        gateway = self._gateway()
        return None if gateway is None else gateway.store

    # -- start -------------------------------------------------------------------------------
    async def load(self) -> None:
        """Take up what the last process left (at adapter start; a store error leaves none)."""
        store = self._store()
        if store is None:
            return
        try:
            orphans, stale = await asyncio.to_thread(self._read, store)
            if stale:
                await asyncio.to_thread(store.compare_and_set_many, [MetaSwap(k, v, None) for k, v in stale])
        except StoreError as exc:
            log.warning("%s: the previews of the last run are not known: %s", self.prefix.rstrip("."), exc)
            return
        self._orphans = {}
        for preview in orphans:
            self._orphans.setdefault(preview.route, []).append(preview)
        self._orphans_until = time.monotonic() + ORPHAN_WAIT
        if self._settled and (self._flusher is None or self._flusher.done()):
            self._flusher = asyncio.get_running_loop().create_task(self._flush_later())

    def _read(self, store: "SessionStore") -> tuple[list[Preview], list[tuple[str, Any]]]:
        """(the orphans, oldest first; the records to delete as (key, value))."""
        entries = [entry for entry in store.list_meta(self.prefix) if entry.key not in self._settled]
        if not entries:
            return [], []
        busy = {entry.route for entry in store.gateway.inbox_unfinished()}
        busy.update(entry.route for entry in store.gateway.outbox_list(statuses=(PENDING,), limit=PENDING_LIMIT))
        oldest = time.time() - MAX_AGE
        keep, stale = [], []
        for entry in entries:
            preview = _parse(self.adapter, entry.key, entry.value, entry.updated_at)
            if preview is not None and preview.route in busy and preview.at >= oldest:
                keep.append(preview)
            else:
                stale.append((entry.key, entry.value))
        return sorted(keep, key=lambda p: p.at), stale

    # -- orphans -----------------------------------------------------------------------------
    def adopt(self, route: RouteKey, kind: str, text: str) -> Preview | None:
        """The orphan of a person's turn resumed after a restart (same conversation and
        input), taken: the turn streams into it instead of a new message. A heartbeat turn
        is never resumed (the next fire is another turn): it adopts nothing."""
        if kind != "user" or not self._orphans.get(route):
            return None
        wanted = digest(text)
        return self._take(route, lambda p: p.kind == "user" and p.input == wanted)

    async def find(self, entry: OutboxEntry) -> Preview | None:
        """The orphan that showed ``entry``'s answer, taken, or ``None``. A reply is linked
        by its inbox entry's text, a heartbeat's answer by kind (and session)."""
        if not self._orphans.get(entry.route):
            return None
        if entry.inbox_id is not None:
            store = self._store()
            if store is None:
                return None
            try:
                inbound = await asyncio.to_thread(store.gateway.inbox_get, entry.inbox_id)
            except StoreError as exc:
                log.warning("%s: cannot read inbox entry %d: %s", self.prefix.rstrip("."), entry.inbox_id, exc)
                return None
            if inbound is None:
                return None
            wanted = digest(inbound.text)

            def asked(p: Preview) -> bool:
                return p.kind != "heartbeat" and p.input == wanted

            # two turns asked the same: the one whose preview began like this answer first
            return (self._take(entry.route, lambda p: asked(p) and begins(p, entry.text))
                    or self._take(entry.route, asked))
        if entry.kind != "heartbeat":
            return None
        return self._take(entry.route, lambda p: p.kind == "heartbeat" and bool(p.shown) and begins(p, entry.text))

    def _take(self, route: RouteKey, wanted: Callable[[Preview], bool]) -> Preview | None:
        candidates = self._orphans.get(route, [])
        for preview in candidates:
            if wanted(preview):
                candidates.remove(preview)
                if not candidates:
                    self._orphans.pop(route, None)
                return preview
        return None

    # -- this run's previews -----------------------------------------------------------------
    async def remember(self, route: RouteKey, message: Any, *, kind: str, text: str, session: str | None,
                       shown: str | None = None) -> Preview | None:
        """Record a preview just shown (``text``: the turn's input; ``shown``: the answer's
        start it shows, if any) in one commit, which also deletes the settled records;
        ``None`` when the store refused (the preview is then only as durable as the process)."""
        store = self._store()
        if store is None:
            return None
        value = {"chat": route.chat, "thread": route.thread, "user": route.user, "message": message,
                 "input": digest(text), "kind": kind, "session": session}
        if shown:
            value.update(shown=digest(shown), shown_len=len(shown))
        preview = _parse(self.adapter, self.key(route, message), value, time.time())
        assert preview is not None
        settled = [p for p in self._due() if p.key != preview.key]
        try:
            done = await asyncio.to_thread(store.compare_and_set_many,
                                           [MetaSwap(preview.key, None, value), *_deletes(settled)])
            if not done[0]:  # an old record under this key (a reused id): this one replaces it
                await asyncio.to_thread(store.set_meta, preview.key, value)
        except StoreError as exc:
            log.warning("%s: a preview is not recorded: %s", self.prefix.rstrip("."), exc)
            return None
        self._forget(settled)
        return preview

    def done(self, preview: Preview | None) -> None:
        """``preview`` is finished with (its answer went out, or none will come): its record
        goes :data:`SETTLE` seconds from now."""
        if preview is None:
            return
        self._settled[preview.key] = (preview, time.monotonic())
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush_later())

    def key(self, route: RouteKey, message: Any) -> str:
        return f"{self.prefix}{route.chat}.{message}"

    async def close(self) -> None:
        """Adapter stop: delete what has settled; a record still settling stays for the next
        start, which drops it once its conversation has nothing unfinished."""
        flusher, self._flusher = self._flusher, None
        if flusher is not None:
            flusher.cancel()
            await asyncio.gather(flusher, return_exceptions=True)
        await self._delete(self._due())

    async def _flush_later(self) -> None:
        while self._settled:
            oldest = min(at for _preview, at in self._settled.values())
            await asyncio.sleep(max(0.0, oldest + SETTLE - time.monotonic()) + 0.05)
            await self._delete(self._due())

    async def _delete(self, previews: list[Preview]) -> None:
        store = self._store()
        if not previews or store is None:
            return
        try:
            await asyncio.to_thread(store.compare_and_set_many, _deletes(previews))
        except StoreError as exc:
            log.warning("%s: previews not deleted (the next start does it): %s", self.prefix.rstrip("."), exc)
            return
        self._forget(previews)

    def _due(self) -> list[Preview]:
        """Settled records, and orphans past :data:`ORPHAN_WAIT`, to delete now."""
        now = time.monotonic()
        due = [preview for preview, at in self._settled.values() if now - at >= SETTLE]
        if self._orphans and now > self._orphans_until:
            due.extend(p for previews in self._orphans.values() for p in previews if p.key not in self._settled)
            self._orphans = {}
        return due

    def _forget(self, previews: list[Preview]) -> None:
        for preview in previews:
            self._settled.pop(preview.key, None)


def begins(preview: Preview, answer: str) -> bool:
    """Whether ``answer`` begins with what ``preview`` first showed."""
    return bool(preview.shown) and digest(answer[: preview.shown_len]) == preview.shown


def _deletes(previews: list[Preview]) -> list[MetaSwap]:
    unique = {preview.key: preview for preview in previews}
    return [MetaSwap(preview.key, preview.value, None) for preview in unique.values()]


def _parse(adapter: str, key: str, value: Any, at: float) -> Preview | None:
    """The record under ``key``, or ``None`` for one this version cannot read."""
    if not isinstance(value, dict):
        return None
    try:
        route = RouteKey(adapter, str(value["chat"]), str(value.get("thread") or ""),
                         str(value.get("user") or ""))
        session = value.get("session")
        return Preview(key, route, value["message"], str(value.get("input") or ""), str(value.get("kind") or "user"),
                       None if session is None else str(session), value, shown=str(value.get("shown") or ""),
                       shown_len=int(value.get("shown_len") or 0), at=at)
    except (KeyError, TypeError, ValueError):
        return None
