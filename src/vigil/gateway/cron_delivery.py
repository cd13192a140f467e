"""Cron answers for platform targets (``NAME:<chat>``, ``web`` …), sent through the gateway's outbox.

The gateway registers an :class:`OutboxDelivery` with the cron runner's
:class:`~vigil.schedule.cron.delivery.DeliveryRouter` for every platform adapter it runs. A
delivery queues the answer as an outbox entry of kind ``cron`` (``meta``: ``cron_job``,
``cron_run``, ``title``) to the target's route, and the run is recorded with delivery status
``queued`` and the entry's id. The outbox sends it like every reply, retried with back-off;
:class:`CronOutcomes` writes its final outcome back into the run record: ``delivered``, or
``failed`` once the outbox gave up. ``vigil cron runs`` shows all three in its tables.

Routes: ``NAME:<chat>[:<thread>]`` is that chat and thread of the platform (a channel and a
thread's timestamp, a chat and a forum topic id ...); a target named alone, such as ``web``, is the run's own
conversation (chat = the cron session's id, like every web route): a page showing that
conversation shows the answer, every other open page shows a notice linking to it, and with no
page open the answer waits in the conversation list (the conversation is the run's session).

The run record is written by the cron runner only after the delivery returned, so the outbox
may finish an entry before its run is recorded: an outcome for a run still in flight is kept
and applied when the run's ``execute`` returns. A gateway that stopped between the two finds
the outcome in the outbox at its next start (:meth:`CronOutcomes.reconcile`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from vigil import platforms as registry
from vigil.schedule.cron.delivery import QUEUED, DeliveryResult, Outgoing, Target
from vigil.schedule.cron.runs import RunRecord, run_key
from vigil.store import SessionStore, StoreError
from vigil.store.gateway.gateway_tables import FAILED, SENT, NewOutbound, OutboxEntry, RouteKey

if TYPE_CHECKING:
    from vigil.gateway.parts import CronDeliveryHost
    from vigil.schedule.cron.delivery import DeliveryRouter

log = logging.getLogger(__name__)

KIND = "cron"
DELIVERED = "delivered"
RECONCILE_LIMIT = 1000
"""Finished outbox entries looked at on start for outcomes a stopped gateway did not record."""

RunKey = tuple[str, str]


def delivery_target_names() -> list[str]:
    """The platforms the registry lets cron deliver to (read at each use: a test may add one)."""
    return [platform.name for platform in registry.delivery_targets()]


def route_for(target: Target, session_id: str) -> RouteKey:
    """The outbox route of a platform target (see the module docstring)."""
    platform = registry.get(target.platform)
    if platform is None or platform.target is None:
        raise ValueError(f"{target} is not a platform target the gateway delivers to")
    if platform.target.chat is None:  # named alone: the run's own conversation
        return RouteKey(target.platform, session_id)
    if not target.chat:
        raise ValueError(f"{target} names no chat")
    return RouteKey(target.platform, target.chat, target.thread or "")


class OutboxDelivery:
    """A :class:`~vigil.schedule.cron.delivery.Delivery` that queues answers in the outbox.
    ``wake``: tell the gateway's outbox sender (in another process it finds the entry within
    its idle recheck, :data:`vigil.gateway.outbox.IDLE_RECHECK`)."""

    def __init__(self, store: SessionStore, outcomes: "CronOutcomes", *,
                 now: Callable[[], float], wake: Callable[[], None] = lambda: None) -> None:
        self.store = store
        self.outcomes = outcomes
        self.now = now
        self.wake = wake

    async def deliver(self, message: Outgoing) -> DeliveryResult:
        route = route_for(message.target, message.session_id)
        self.outcomes.in_flight.add((message.job, message.stamp))
        entry = await asyncio.to_thread(
            self.store.gateway.outbox_add,
            NewOutbound(route, message.answer, kind=KIND, session_id=message.session_id,
                        meta={"cron_job": message.job, "cron_run": message.stamp, "title": message.title}),
            now=self.now(),
        )
        self.wake()
        return DeliveryResult(
            QUEUED, f"queued in the gateway's outbox for {message.target} (entry {entry.id})",
            extra={"outbox_id": entry.id, "target": str(message.target)},
        )


def hand_to_running_gateway(store: SessionStore, router: "DeliveryRouter", adapters: list[dict[str, Any]],
                            now: Callable[[], float]) -> "CronOutcomes":
    """For ``vigil cron run`` and ``tick`` beside a running gateway: queue answers for the
    platforms it serves (``adapters``: its status record's) in its outbox. Call
    :meth:`CronOutcomes.reconcile` after the run: the gateway may have sent it already."""
    outcomes = CronOutcomes(store)
    delivery = OutboxDelivery(store, outcomes, now=now)
    for adapter in adapters:
        name = adapter.get("name")
        if name in delivery_target_names() and adapter.get("state") != "misconfigured":
            router.register(str(name), delivery)
    return outcomes


class CronOutcomes:
    """Writes the outbox's final outcome of each cron entry into its run record."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.in_flight: set[RunKey] = set()
        """Runs whose answer was queued but whose record the runner has not written yet."""
        self._early: dict[RunKey, tuple[int, str, str]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- wiring -------------------------------------------------------------------------------
    def attach(self, gateway: "CronDeliveryHost", router: "DeliveryRouter", scheduler: Any) -> "CronOutcomes":
        """Serve every platform ``gateway`` runs an adapter for, follow its outbox's reports,
        and wrap ``scheduler.execute`` (:meth:`tracked`). Returns ``self``."""
        delivery = OutboxDelivery(gateway.store, self, now=gateway.clock.now, wake=gateway.outbox.wake)
        for name in delivery_target_names():
            if name in gateway.adapters:
                router.register(name, delivery)
        previous = gateway.outbox.report

        def report(what: str, entry: OutboxEntry, error: str | None) -> None:
            previous(what, entry, error)
            self.on_report(what, entry, error)

        gateway.outbox.report = report
        scheduler.execute = self.tracked(scheduler.execute)
        return self

    def tracked(self, execute: Callable[[Any], Awaitable[Any]]) -> Callable[[Any], Awaitable[Any]]:
        """``execute`` (the scheduler's, taking a claim) that applies an outcome the outbox
        reported before the run was recorded, once it is."""

        async def run(claim: Any) -> Any:
            key = (claim.job.name, claim.record.stamp)
            try:
                return await execute(claim)
            finally:
                self.in_flight.discard(key)
                early = self._early.pop(key, None)
                if early is not None:
                    await self._apply(key, *early)

        return run

    # -- outcomes -----------------------------------------------------------------------------
    def on_report(self, what: str, entry: OutboxEntry, error: str | None) -> None:
        """The outbox's report of one try (``sent``, ``retry``, ``failed``): a retry shows in
        the run's delivery detail (still ``queued``), the others end it."""
        key = _run_key(entry) if entry.kind == KIND else None
        if key is None or what not in ("sent", "retry", "failed"):
            return
        status, detail = _outcome(what, entry, error, entry.attempts + 1)
        if key in self.in_flight:
            if what != "retry":
                self._early[key] = (entry.id, status, detail)
            return
        task = asyncio.ensure_future(self._apply(key, entry.id, status, detail))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        """Wait for outcomes still being written (before the store closes)."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _apply(self, key: RunKey, outbox_id: int, status: str, detail: str) -> None:
        try:
            await asyncio.to_thread(self.record, key, outbox_id, status, detail)
        except StoreError as exc:  # the outbox keeps the outcome: reconciled at the next start
            log.warning("cannot record the delivery of cron run %s/%s: %s", *key, exc)

    def record(self, key: RunKey, outbox_id: int, status: str, detail: str) -> bool:
        """Set the delivery outcome of run ``key`` if its record names ``outbox_id`` and is
        still ``queued`` (blocking). Returns whether the record changed."""
        for _ in range(5):
            entry = self.store.get_meta(run_key(*key))
            record = None if entry is None else RunRecord.from_json(entry.value)
            delivery = dict(record.delivery or {}) if record is not None else {}
            if record is None or delivery.get("outbox_id") != outbox_id or delivery.get("status") != QUEUED:
                return False
            delivery.update(status=status, detail=detail)
            changed = RunRecord(**{**record.to_json(), "delivery": delivery})
            if self.store.compare_and_set_meta(record.key, entry.value, changed.to_json()):
                return True
        return False

    async def catch_up(self) -> None:
        """:meth:`reconcile` at start; a store error is logged (the next start tries again)."""
        try:
            await asyncio.to_thread(self.reconcile)
        except Exception as exc:  # advice for the run log; serving goes on
            log.warning("cannot record cron delivery outcomes from the outbox: %s", exc)

    def reconcile(self) -> int:
        """Record outcomes the outbox reached while no gateway recorded them (blocking);
        returns how many run records changed."""
        changed = 0
        for entry in self.store.gateway.outbox_list(statuses=(SENT, FAILED), limit=RECONCILE_LIMIT):
            key = _run_key(entry) if entry.kind == KIND else None
            if key is not None:
                sent = entry.status == SENT  # a failed entry's attempts count its last try already
                status, detail = _outcome("sent" if sent else "failed", entry, entry.last_error,
                                          entry.attempts + 1 if sent else entry.attempts)
                changed += self.record(key, entry.id, status, detail)
        return changed


def _run_key(entry: OutboxEntry) -> RunKey | None:
    job, stamp = entry.meta.get("cron_job"), entry.meta.get("cron_run")
    return (job, stamp) if isinstance(job, str) and isinstance(stamp, str) else None


def _outcome(what: str, entry: OutboxEntry, error: str | None, tries: int) -> tuple[str, str]:
    where = _describe(entry.route)
    if what == "sent":
        return DELIVERED, f"delivered to {where} (outbox entry {entry.id}, try {tries})"
    reason = " ".join((error or "unknown error").split())
    if what == "retry":
        return QUEUED, f"queued for {where} (outbox entry {entry.id}); try {tries} failed, retrying: {reason}"
    return FAILED, f"delivery to {where} failed after {tries} {'try' if tries == 1 else 'tries'} (outbox entry {entry.id}): {reason}"


def _describe(route: RouteKey) -> str:
    if route.adapter == "web":
        return "the web chat"
    return ":".join(part for part in (route.adapter, route.chat, route.thread) if part)
