"""How a gateway turn rides out a failure: wait and ask again, or give up.

The delivery semantics are in :mod:`vigil.store.gateway.gateway_tables`. A user turn that raises is
judged here (:func:`classify`) before its conversation moves on, so the messages queued behind
it keep their order:

- *transient* (the model endpoint down, slow, 5xx, 429, an answer that broke off; the store
  busy, unreachable or unwritable — a lost PostgreSQL server, a full disk): asked again after jittered exponential back-off (:class:`~vigil.models.retry.RetryPolicy`
  capped at ``gateway.retry_max_delay``, the provider's ``Retry-After`` honoured), without a
  fixed number of tries, until ``gateway.retry_window`` runs out;
- *no model configured*: the person is told how to set one up, once, and the turn looks again
  every few seconds (the model client re-reads config.yaml when it changes), without a window;
- *internal* (a bug): asked again shortly, until the same error came :data:`INTERNAL_REPEATS`
  times in a row (then the message is set aside as poison);
- *permanent*: not asked again.

While a turn waits, its inbox entry is ``pending`` (a death of the process meanwhile is no
evidence against it), the conversation's pages and platform get a ``waiting`` live event, and
:attr:`Patience.waiting` feeds ``vigil gateway status``, until the model answers again (the
conversation's next streamed text or step: :meth:`Patience.progressed`) or the message settles.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vigil.agent.turn import EmptyMessage
from vigil.gateway.wire import event
from vigil.models.base import ModelError, ModelStreamInterrupted
from vigil.models.factory import ModelNotConfigured
from vigil.models.retry import RetryPolicy, is_transient, retry_after_of
from vigil.store import StoreError
from vigil.store.errors import AmbiguousSession, DamagedRow, SchemaTooNew, SessionNotFound, StoreUnreadable
from vigil.store.gateway.gateway_tables import NewOutbound

if TYPE_CHECKING:
    from vigil.gateway.parts import PatienceHost
    from vigil.gateway.live import LiveConversation

log = logging.getLogger(__name__)

TRANSIENT = "transient"
NO_MODEL = "no_model"
INTERNAL = "internal"
PERMANENT = "permanent"

INTERNAL_REPEATS = 3
"""The same internal error this many times in a row sets a message aside."""
INTERNAL_LIMIT = 10
"""Internal errors of any kind one turn may raise before its message is set aside."""
NO_MODEL_RECHECK = 5.0
"""Longest pause between two looks for a model while none is configured."""
BASE_DELAY = 1.0
"""The first pause before a transient failure is tried again (then doubling, jittered)."""

_PERMANENT_STORE_ERRORS = (SessionNotFound, AmbiguousSession, DamagedRow, SchemaTooNew, StoreUnreadable)


def classify(exc: BaseException) -> str:
    """``transient``, ``no_model``, ``internal`` or ``permanent`` (see the module docstring)."""
    if isinstance(exc, ModelNotConfigured):
        return NO_MODEL
    if isinstance(exc, ModelStreamInterrupted) or is_transient(exc):
        return TRANSIENT  # a broken-off answer was kept; the turn resumes after it
    if isinstance(exc, (ModelError, EmptyMessage, *_PERMANENT_STORE_ERRORS)):
        return PERMANENT
    if isinstance(exc, StoreError):
        return TRANSIENT
    return INTERNAL


def one_line(exc: BaseException) -> str:
    """``exc``'s message on one line (its type when it has none)."""
    return " ".join((str(exc) or type(exc).__name__).split())


def signature(exc: BaseException) -> str:
    """What makes two internal errors "the same": their type and message."""
    return f"{type(exc).__name__}: {exc}"


@dataclass(frozen=True, slots=True)
class Waiting:
    """A message whose turn waits to be tried again."""

    inbox_id: int
    session_id: str | None
    reason: str
    """``transient``, ``no_model`` or ``internal``."""
    detail: str
    since: float
    retry_at: float

    def view(self) -> dict[str, Any]:
        return {"inbox_id": self.inbox_id, "session_id": self.session_id, "reason": self.reason,
                "detail": self.detail, "since": self.since, "retry_at": self.retry_at}


def waiting_text(reason: str, seconds: float, *, store: bool = False) -> str:
    """What the conversation shows while it waits, e.g. "waiting for the model (retrying,
    next try in 40 s)"; ``store``: the session store, not the model, failed."""
    shown = f"{seconds:.0f} s" if seconds >= 1 else "a moment"  # "in 0 s" reads like a bug
    if reason == NO_MODEL:
        return f"waiting for a model to be configured (next look in {shown})"
    if reason == INTERNAL:
        return f"an error stopped the answer (trying again in {shown})"
    what = "the session store" if store else "the model"
    return f"waiting for {what} (retrying, next try in {shown})"


class Patience:
    """The waiting turns of one gateway (see the module docstring)."""

    def __init__(self, gateway: "PatienceHost") -> None:
        self.gateway = gateway
        settings = gateway.settings.gateway
        self.window = settings.retry_window
        self.policy = RetryPolicy(base_delay=BASE_DELAY, max_delay=settings.retry_max_delay,
                                  max_retry_after=max(settings.retry_max_delay, self.window))
        self.waiting: dict[int, Waiting] = {}
        """The messages waiting now (or being tried again), by inbox id."""
        self._waiting_in: dict[int, "LiveConversation"] = {}
        self._first_failure: dict[int, float] = {}
        self._errors: dict[int, tuple[str, int, int]] = {}  # inbox id -> (signature, in a row, in all)
        self._told_no_model: set[int] = set()
        self._closing = asyncio.Event()

    def close(self) -> None:
        """The gateway stops: every wait ends now (its turn is interrupted, its message kept)."""
        self._closing.set()

    def forget(self, inbox_id: int) -> None:
        """The message is settled: drop what was counted for it."""
        self._first_failure.pop(inbox_id, None)
        self._errors.pop(inbox_id, None)
        self._told_no_model.discard(inbox_id)
        self._stop_waiting(inbox_id)

    def progressed(self, live: "LiveConversation") -> None:
        """The model answers in ``live`` again: what waited there no longer does (and a later
        outage in the same turn has a retry window of its own)."""
        for inbox_id in [i for i, known in self._waiting_in.items() if known is live]:
            self._first_failure.pop(inbox_id, None)
            self._stop_waiting(inbox_id)

    def _stop_waiting(self, inbox_id: int) -> None:
        live = self._waiting_in.pop(inbox_id, None)
        if self.waiting.pop(inbox_id, None) is None:
            return
        self.gateway.gauge_waiting()
        if live is not None:
            self.gateway.announce(live, event("waiting", live.session_id, inbox_id=inbox_id, reason=None, text=None))

    async def try_again(self, live: "LiveConversation", inbox_id: int, exc: BaseException, attempt: int) -> bool:
        """Whether the turn of ``inbox_id``, which raised ``exc`` on its ``attempt`` (0-based),
        runs again, once this has waited for its next try; ``False``: it ends with ``exc``."""
        kind = classify(exc)
        now = self.gateway.clock.now()
        if kind == PERMANENT:
            return False
        if kind == INTERNAL:
            before = self._errors.get(inbox_id)
            same = before is not None and before[0] == signature(exc)
            in_a_row, in_all = (before[1] + 1 if same else 1), (before[2] + 1 if before else 1)
            self._errors[inbox_id] = (signature(exc), in_a_row, in_all)
            log.warning("the turn of inbox entry %d failed (%d in a row): %s", inbox_id, in_a_row, signature(exc),
                        exc_info=exc)
            if in_a_row >= INTERNAL_REPEATS or in_all >= INTERNAL_LIMIT:
                return False
            delay = self.policy.delay(in_a_row - 1)
        elif kind == TRANSIENT:
            if inbox_id not in self._first_failure:
                self._first_failure[inbox_id] = now
                self.gateway.say(f"vigil gateway: message {inbox_id} waits, retrying with back-off for up to "
                                 f"{self.window:g} s: {one_line(exc)}")
            left = self.window - (now - self._first_failure[inbox_id])
            if left <= 0:
                return False
            delay = min(self.policy.delay(attempt, retry_after_of(exc)), left)
        else:
            await self._tell_no_model(live, inbox_id, exc)
            delay = min(self.policy.delay(attempt), NO_MODEL_RECHECK)
        await self._wait(live, inbox_id, kind, exc, delay)
        return True

    async def _wait(self, live: "LiveConversation", inbox_id: int, kind: str, exc: BaseException, delay: float) -> None:
        gateway = self.gateway
        now = gateway.clock.now()
        self.waiting[inbox_id] = Waiting(inbox_id, live.session_id, kind, one_line(exc), now, now + delay)
        self._waiting_in[inbox_id] = live
        gateway.gauge_waiting()
        gateway.suspects.leave(inbox_id)  # waiting, it is no evidence against itself
        await self._store(gateway.store.gateway.inbox_interrupted, inbox_id, died=False)
        gateway.announce(live, event("waiting", live.session_id, inbox_id=inbox_id, reason=kind,
                                     text=waiting_text(kind, delay, store=isinstance(exc, StoreError)), retry_in=delay, retry_at=now + delay))
        sleeping = asyncio.ensure_future(gateway.clock.sleep(delay))
        closing = asyncio.ensure_future(self._closing.wait())
        try:
            await asyncio.wait({sleeping, closing}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeping.cancel()
            closing.cancel()
        if self._closing.is_set():
            raise asyncio.CancelledError("the gateway stops; the message is answered at the next start")
        await self._store(gateway.store.gateway.inbox_start, inbox_id, live.session_id or "", now=gateway.clock.now())

    async def _tell_no_model(self, live: "LiveConversation", inbox_id: int, exc: BaseException) -> None:
        """Once per message: say in its conversation that no model is configured and how to
        set one up (as ``vigil chat`` says it), and that the message waits."""
        if inbox_id in self._told_no_model or live.route is None:
            return
        self._told_no_model.add(inbox_id)
        text = (f"⚠ vigil cannot answer yet. {exc}\n"
                "Your message is kept: it is answered as soon as a model is configured (a change to "
                "config.yaml is picked up within seconds; environment variables need a restart of the gateway).")
        gateway = self.gateway
        gateway.say(f"vigil gateway: message {inbox_id} waits: no model is configured")
        reply = NewOutbound(live.route, text, kind="notice", session_id=live.session_id, inbox_id=inbox_id)
        if await self._store(gateway.store.gateway.outbox_add, reply, now=gateway.clock.now()):
            gateway.outbox.wake()

    async def _store(self, fn: Any, *args: Any, **kwargs: Any) -> bool:
        """A bookkeeping write: a store error is logged, and the wait goes on."""
        try:
            await asyncio.to_thread(fn, *args, **kwargs)
        except (StoreError, KeyError) as exc:
            log.warning("could not record a waiting message: %s", exc)
            return False
        return True
