"""The live conversation: one input queue, at most one running turn, user input first.

Everything a person sends (messages and slash commands) goes through one FIFO queue that a
single worker task drains, so turns and commands never overlap. A heartbeat is not queued:
when it comes due the worker is only told so, and it fires the heartbeat at the next moment
when no turn runs and the queue is empty. A heartbeat that came due during a long turn
therefore fires once, right after it; a user message waiting in the queue goes first, even
one that arrives while the heartbeat's turn is being prepared: the fire is confirmed only
just before the agent begins executing (:mod:`vigil.runtime.heartbeat_attempt`).

A front end with a line editor reports the person's draft (:meth:`Conversation.drafting`,
:meth:`Conversation.draft_cleared`): while a half-typed line is there, a due heartbeat waits
(it is not claimed, so nothing is counted) until the draft is sent or cleared, or until
:data:`DRAFT_QUIET` seconds pass without a keystroke.

The runtime knows nothing about terminals or platforms; front ends subscribe to its events.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from vigil.agent.events import Compressed, Steered, TurnEvent
from vigil.agent.turn import TurnDeclined
from vigil.runtime.background import BackgroundTasks
from vigil.runtime.controller import ConversationController
from vigil.runtime.conversation_events import (
    HEARTBEAT,
    USER,
    ConversationEvent,
    Listener,
    Outcome,
    TurnBegan,
    TurnEnded,
)
from vigil.runtime.heartbeat_attempt import HeartbeatAttempt
from vigil.runtime.slash import CommandReply
from vigil.runtime.immediate import Immediate
from vigil.schedule.heartbeat.text import heartbeat_header, heartbeat_message
from vigil.schedule.heartbeat.scheduler import HeartbeatScheduler

log = logging.getLogger(__name__)

DRAFT_QUIET = 120.0
"""Seconds without a keystroke after which a draft no longer holds a due heartbeat back."""

URGENT_COMMANDS = frozenset({"stop", "suspend"})
"""Commands that interrupt the running turn and jump the queue: waiting behind the very turn
they are meant to stop would defeat them. Whether one did interrupt a turn is
``controller.stopped_turn`` while it runs."""


@dataclass(eq=False)
class _Item:
    text: str
    future: asyncio.Future[Outcome] = field(repr=False)
    meta: dict[str, Any] | None = None
    on_start: Callable[[], Awaitable[None]] | None = field(default=None, repr=False)
    resume: bool = False
    interrupted: bool = False
    """An urgent command that interrupted the running turn when it arrived."""
    stop: bool = False
    """Interrupted before its turn began (while it was being started): the turn ends at once."""


class Conversation:
    """Drives one conversation for one front end; see the module docstring."""

    def __init__(
        self,
        controller: ConversationController,
        *,
        scheduler: HeartbeatScheduler | None = None,
    ) -> None:
        self.controller = controller
        self.scheduler = scheduler
        self.listeners: list[Listener] = []
        self.heartbeats_fired = 0
        """Heartbeat turns this conversation started (each counted in the store too)."""
        self.on_refund: Callable[[str, str], object] | None = None
        """Called with (session id, why) when a reserved heartbeat slot is given back because
        the attempt ended before the agent began executing (a front end counts and logs it)."""
        self.authorize_heartbeat: Callable[[str], Awaitable[str | None]] | None = None
        """Asked (with the session id) once a heartbeat slot is reserved: why the people this
        conversation answers may not have it fire (the gateway's authorization), or ``None``."""
        self._queue: deque[_Item] = deque()
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()  # nothing runs before the worker starts (a conversation not started is not busy)
        self._heartbeat_wanted = False
        self._current: _Item | None = None
        self._running: asyncio.Task[object] | None = None
        self._attempt: HeartbeatAttempt | None = None
        self._worker: asyncio.Task[None] | None = None
        self._tracked: str | None = None
        self._draft_timer: asyncio.Task[None] | None = None  # runs while a draft holds heartbeats
        self.immediate = Immediate(self._queue, lambda: self.running_turn, controller.is_command)
        """``/steer`` and ``/queue``; what waits in the queue, and withdrawing one of it."""
        self.background = BackgroundTasks(self)  # /background, /btw: side tasks and their notes

    # -- life cycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        """Take ownership of the current session's heartbeat and start the worker."""
        await self._track(refresh=True)
        await self.background.recover()
        if self._worker is None:
            self._worker = asyncio.create_task(self._work(), name="conversation")

    async def close(self) -> None:
        """Stop the worker (a running turn is cancelled) and give up the heartbeat."""
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.cancel()
            try:
                await worker
            except asyncio.CancelledError:
                pass
        await self.background.close()  # no turn runs now: interrupted tasks' notes are stored
        for item in [*self._queue, *([self._current] if self._current else [])]:
            if not item.future.done():
                item.future.cancel()
        self._queue.clear()
        self._heartbeat_wanted = False
        self._idle.set()  # closed: nothing will run
        self._stop_draft_timer()
        if self.scheduler is not None and self._tracked is not None:
            self.scheduler.disown(self._tracked, self)
        self._tracked = None

    # -- state ----------------------------------------------------------------------------------
    @property
    def session_id(self) -> str | None:
        return self.controller.session_id

    @property
    def busy(self) -> bool:
        """A turn, a command or a heartbeat's preparation is in progress."""
        return not self._idle.is_set()

    @property
    def running_turn(self) -> bool:
        return self._running is not None and not self._running.done()

    @property
    def queued(self) -> int:
        """Inputs waiting behind the current one."""
        return len(self._queue)

    @property
    def idle(self) -> bool:
        """Nothing runs, nothing waits, and no heartbeat is about to fire (one held back by
        a draft is not about to fire)."""
        return self._idle.is_set() and not self._queue and not (self._heartbeat_wanted and not self.draft_held)

    @property
    def draft_held(self) -> bool:
        """A draft at the front end holds heartbeats back."""
        return self._draft_timer is not None

    @property
    def heartbeat_waiting_for_draft(self) -> bool:
        """A heartbeat is due and waits for the person's draft to be sent or cleared."""
        return self._heartbeat_wanted and self.draft_held

    async def wait_idle(self) -> None:
        """Return once :attr:`idle` holds."""
        while not self.idle:
            await self._idle.wait()
            if not self.idle:
                await asyncio.sleep(0)

    # -- input ------------------------------------------------------------------------------------
    def submit(
        self,
        text: str,
        *,
        meta: dict[str, Any] | None = None,
        on_start: Callable[[], Awaitable[None]] | None = None,
        resume: bool = False,
    ) -> asyncio.Future[Outcome]:
        """Queue a message or slash command; the future resolves when it has been handled.
        ``meta`` is stored with the user message of the turn (not with commands);
        ``on_start`` is awaited when the input leaves the queue, just before it is handled
        (an input withdrawn while it waits never starts); ``resume``: the turn for this
        ``meta`` may have begun before a restart (:meth:`vigil.agent.turn.Agent.run_turn`)."""
        future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        if self.immediate.handle(text, future, meta):
            return future
        text = self.immediate.plain(text)
        item = _Item(text, future, meta, on_start, resume)
        if self._is_urgent(text):
            item.interrupted = self.interrupt()
            self._queue.appendleft(item)
        else:
            self._queue.append(item)
        self._idle.clear()
        self._wake.set()
        return future

    async def send(self, text: str) -> Outcome:
        """Submit and wait for the outcome."""
        return await self.submit(text)

    def interrupt(self) -> bool:
        """Cancel the running turn, if any (the conversation keeps what was stored). A message
        taken from the queue whose turn has not begun yet (its start hook, its announcement)
        is stopped too: its turn ends, cancelled, as soon as it begins."""
        if self._running is not None and not self._running.done():
            self._running.cancel()
            return True
        current = self._current
        if current is not None and not self.controller.is_command(current.text):
            current.stop = True
            return True
        return False

    def cancel(self, future: asyncio.Future[Outcome]) -> None:
        """Withdraw a submitted input: drop it if still queued, interrupt it if running."""
        for item in list(self._queue):
            if item.future is future:
                self._queue.remove(item)
                if not future.done():
                    kind = "command" if self.controller.is_command(item.text) else "turn"
                    future.set_result(Outcome(kind, cancelled=True))
                return
        if self._current is not None and self._current.future is future:
            self.interrupt()

    def drop_queued(self) -> int:
        """Withdraw every input still waiting (their futures are cancelled); the running one
        goes on. For a front end that stops taking input but lets the current turn finish."""
        dropped = 0
        while self._queue:
            item = self._queue.popleft()
            if not item.future.done():
                item.future.cancel()
            dropped += 1
        return dropped

    def withdraw_queued(self) -> int:
        """Withdraw every input still waiting as its sender would (:meth:`cancel`): each future
        resolves to a cancelled outcome, so a front end can settle what it handed in. The
        running input goes on (:meth:`interrupt` ends it)."""
        withdrawn = 0
        while self._queue:
            item = self._queue.popleft()
            if not item.future.done():
                kind = "command" if self.controller.is_command(item.text) else "turn"
                item.future.set_result(Outcome(kind, cancelled=True))
            withdrawn += 1
        return withdrawn

    def drafting(self) -> None:
        """The person typed into a non-empty draft: hold heartbeats back for another
        :data:`DRAFT_QUIET` seconds."""
        self._stop_draft_timer()
        quiet_until = self.controller.agent.clock.now() + DRAFT_QUIET
        self._draft_timer = asyncio.ensure_future(self._draft_quiet(quiet_until))

    def draft_cleared(self) -> None:
        """The draft was sent or emptied: a heartbeat that waited for it may fire."""
        if self._draft_timer is not None:
            self._stop_draft_timer()
            self._release_heartbeat()

    async def _draft_quiet(self, until: float) -> None:
        await self.controller.agent.clock.sleep_until(until)
        self._draft_timer = None  # the keyboard has been quiet long enough
        self._release_heartbeat()

    def _stop_draft_timer(self) -> None:
        timer, self._draft_timer = self._draft_timer, None
        if timer is not None and timer is not asyncio.current_task():
            timer.cancel()

    def _release_heartbeat(self) -> None:
        if self._heartbeat_wanted:
            self._idle.clear()
            self._wake.set()

    # -- HeartbeatTarget ------------------------------------------------------------------------
    def heartbeat_due(self, session_id: str) -> None:
        """Called by the scheduler: fire at the next idle moment (never interrupts)."""
        if session_id != self.controller.session_id:
            return
        self._heartbeat_wanted = True
        self._idle.clear()
        self._wake.set()

    # -- the worker -------------------------------------------------------------------------------
    async def _work(self) -> None:
        while True:
            if self._queue:
                self._idle.clear()
                await self._process(self._queue.popleft())
            elif self._heartbeat_wanted and not self.draft_held:
                self._idle.clear()
                self._heartbeat_wanted = False
                await self._fire_heartbeat()
            else:
                self._wake.clear()
                self._idle.set()
                await self._wake.wait()

    async def _process(self, item: _Item) -> None:
        self._current = item
        try:
            if item.on_start is not None:
                try:
                    await item.on_start()
                except Exception:  # bookkeeping of the front end; the input is handled all the same
                    log.exception("the start hook of an input failed")
            if self.controller.is_command(item.text):
                self.controller.stopped_turn = item.interrupted
                try:
                    outcome = await self._command(item.text)
                finally:
                    self.controller.stopped_turn = False
            else:
                outcome = await self._turn(USER, item.text, meta=item.meta, resume=item.resume)
        finally:
            self._current = None
        if not item.future.done():
            item.future.set_result(outcome)

    async def _command(self, text: str) -> Outcome:
        try:
            reply = await self.controller.command(text)
        except Exception as exc:  # a failing command must not end the conversation
            log.exception("slash command failed: %s", text)
            reply = CommandReply(f"Error: {exc}", is_error=True)
        await self._track(refresh=True)
        return Outcome("command", reply=reply)

    async def _turn(
        self, kind: str, text: str, attempt: HeartbeatAttempt | None = None, *,
        meta: dict[str, Any] | None = None, resume: bool = False,
    ) -> Outcome:
        """Run one turn. A user turn is announced (``TurnBegan``) at once; a heartbeat turn
        only when its attempt begins executing, and not at all if it never does: then its
        slot is given back and no ``TurnEnded`` follows."""
        if attempt is None:
            await self._emit(TurnBegan(kind, text, self.controller.session_id))
        task = asyncio.ensure_future(
            self.controller.turn(
                text,
                on_event=self._forward,
                auto_title=kind == USER,
                before_execution=None if attempt is None else attempt.before_execution,
                unattended=kind == HEARTBEAT,
                user_meta=meta,
                resume=resume,
                steering=self.immediate.steering.take,
            )
        )
        self._running, self._attempt = task, attempt
        if attempt is None and self._current is not None and self._current.stop:
            task.cancel()  # stopped while it was being started
        ended: TurnEnded | None
        try:
            try:
                result = await task
            finally:
                self._running = self._attempt = None
                for steer in reversed(self.immediate.steering.leftover()):  # not reached: answered next
                    self._queue.appendleft(_Item(steer.text, steer.future, steer.meta))
        except TurnDeclined:
            ended = None
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling() > 0:  # the conversation closes, not only the turn
                if attempt is not None and not attempt.began:
                    await attempt.give_back()
                    self._refunded(attempt, "the conversation closed before it began")
                raise
            ended = TurnEnded(kind, cancelled=True)
        except Exception as exc:
            ended = TurnEnded(kind, error=exc)
        else:
            ended = TurnEnded(kind, result=result)
        if attempt is not None and not attempt.began:
            # Ended before the agent began executing (declined, cancelled, preparation
            # rejected): the slot goes back and the fire does not count.
            error = None if ended is None else ended.error
            if error is not None:
                log.warning("heartbeat turn not started, slot refunded: %s", error)
            await attempt.give_back(failed=error is not None)
            self._refunded(attempt, "declined just before the agent began" if error is None else f"preparation failed: {error}")
            if self.draft_held and error is None:
                # Declined because the person started typing: it fires once the draft is done.
                self._heartbeat_wanted = True
            ended = None
        await self._track(refresh=False)
        if ended is None:
            return Outcome("turn", cancelled=True)
        await self._emit(ended)
        return Outcome("turn", result=ended.result, error=ended.error, cancelled=ended.cancelled)

    async def _fire_heartbeat(self) -> None:
        scheduler, session_id = self.scheduler, self.controller.session_id
        if scheduler is None or session_id is None or not scheduler.owns(session_id):
            return
        reservation = await scheduler.claim(session_id)
        if reservation is None:
            return
        heartbeat = reservation.heartbeat
        text, header = heartbeat_message(heartbeat), heartbeat_header(heartbeat.interval)

        async def begin(running_in: str) -> None:
            # The agent begins executing: from here the fire counts, whatever the turn does.
            self.heartbeats_fired += 1
            await self._emit(TurnBegan(HEARTBEAT, text, running_in, header))

        attempt = HeartbeatAttempt(
            scheduler, reservation, refusal=lambda: self._refusal(session_id), on_begin=begin
        )
        refusal = self._refusal(session_id)
        if refusal is None and self.controller.session_id != session_id:
            refusal = "the conversation moved to another session"
        if refusal is not None:
            log.info("heartbeat of %s refunded: %s", session_id, refusal)
            await attempt.give_back()
            self._refunded(attempt, refusal)
            if self.draft_held:
                self._heartbeat_wanted = True
            return
        denied = None if self.authorize_heartbeat is None else await self.authorize_heartbeat(session_id)
        if denied is not None:
            log.info("heartbeat of %s refunded: %s", session_id, denied)
            await attempt.give_back(failed=True)  # held off: tried again later, not at once
            self._refunded(attempt, denied)
            return
        # The slot this turn fires, kept with its question: one slot, one stored turn.
        slot = {"due": reservation.due, "reserved_at": heartbeat.last_fire}
        await self._turn(HEARTBEAT, text, attempt, meta={"heartbeat_slot": slot})

    def _refusal(self, session_id: str) -> str | None:
        """Why this conversation may not run the heartbeat of ``session_id`` now (``None``:
        it may). Checked before the turn starts and again just before it executes."""
        if self._queue:
            return "user input is waiting (it goes first)"
        if self.draft_held:
            return "the person is typing (a heartbeat waits for the draft)"
        if self._worker is None:
            return "the conversation is closing"
        if self.scheduler is None or not self.scheduler.owns(session_id):
            return "the conversation no longer owns this heartbeat"
        return None

    # -- helpers ------------------------------------------------------------------------------------
    def _refunded(self, attempt: HeartbeatAttempt, why: str) -> None:
        if self.on_refund is not None:
            try:
                self.on_refund(attempt.origin.session_id, why)
            except Exception:
                log.exception("on_refund failed")

    async def _track(self, *, refresh: bool) -> None:
        """Own the heartbeat of the current session (after /new, /resume, /suspend, compression)."""
        scheduler = self.scheduler
        if scheduler is None:
            return
        current = self.controller.session_id
        if current != self._tracked:
            if self._tracked is not None:
                scheduler.disown(self._tracked, self)
            self._tracked = current
            self._heartbeat_wanted = False
            if current is not None:
                scheduler.own(current, self)
                await scheduler.refresh(current)
        elif refresh and current is not None:
            await scheduler.refresh(current)

    def _is_urgent(self, text: str) -> bool:
        command = self.controller.is_command(text) and self.controller.registry.find(text.strip()[1:].split(maxsplit=1)[0])
        return bool(command) and command.name in URGENT_COMMANDS

    async def _forward(self, event: TurnEvent) -> None:
        if isinstance(event, Compressed) and self._attempt is not None:
            self._attempt.follow(event.parent_id, event.child_id)
        if isinstance(event, Steered):
            self.immediate.steering.stored(event.text)
        await self._emit(event)

    async def _emit(self, event: ConversationEvent) -> None:
        for listener in list(self.listeners):
            try:
                result = listener(event)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("a conversation listener failed on %r", type(event).__name__)
