"""The REPL of ``vigil chat``.

The prompt stays open while the conversation works, so the person can type during a running
turn: a message sent then waits behind it (it is shown as queued, with its number), ``/steer
TEXT`` reaches the running turn after its current step and ``/queue`` lists or withdraws what
waits (:mod:`vigil.runtime.immediate`). What the turn prints — its streamed answer, its tool
calls, a heartbeat turn — appears above the prompt (``patch_stdout``), whole lines at a time;
the line being written is shown just above the prompt until it is complete
(:mod:`vigil.cli.repl.live`). Ctrl-C interrupts the running turn and keeps the draft; with
nothing running, at an empty prompt the first Ctrl-C says how to leave and a second within two
seconds leaves, as Ctrl-D does (Ctrl-D during a turn leaves at once, interrupting it). An
approval a turn needs closes the prompt for its question and opens it again with the draft.
Every keystroke is reported to the conversation, so that a due heartbeat waits while a
half-typed line is on the prompt (the toolbar says so). A dumb terminal (``TERM=dumb``), where
nothing can be drawn above a prompt, waits for each input before prompting again.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from collections import Counter, deque
from typing import Callable

from prompt_toolkit import PromptSession
from prompt_toolkit.application import get_app
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.patch_stdout import patch_stdout
from prompt_toolkit.utils import is_dumb_terminal
from rich.markup import escape

from vigil.agent.events import PromptRebuilt, TextDelta, ToolFinished, ToolStarted
from vigil.cli.render import shorten
from vigil.cli.repl.live import LiveLine
from vigil.cli.repl.reading import SlashCompleter, ask_approval, console, private_history
from vigil.cli.repl.screen import mark_closed, show_recap, toolbar
from vigil.profiles import Profile
from vigil.runtime.conversation import URGENT_COMMANDS, Conversation
from vigil.runtime.conversation_events import (
    HEARTBEAT,
    USER,
    BackgroundNote,
    ConversationEvent,
    Outcome,
    TurnBegan,
    TurnEnded,
)
from vigil.runtime.steering import steer_text
from vigil.schedule.heartbeat.text import asks_for_silence, is_silent_answer

LEAVE_WINDOW = 2.0
"""Seconds within which a second Ctrl-C at an empty prompt leaves the REPL."""

PROMPT = "you › "


class _PromptClosed(Exception):
    """The prompt was closed to make way (an approval to ask, the REPL leaving); its draft is kept."""


class Repl:
    """Reads lines, hands them to the conversation, and shows whatever it reports."""

    def __init__(self, conversation: Conversation, profile: Profile, *, stream: bool = True):
        self.conversation = conversation
        self.controller = conversation.controller
        self.profile = profile
        self.stream = stream
        self._prompt_open = False
        self._gap_interrupts = 0  # Ctrl-C pressed while no prompt was open (see _loop)
        self._streaming = False  # this turn's answer is written as it arrives
        self._live = LiveLine()  # the streamed answer: whole lines printed, the last one shown
        self._streamed_any = False
        self._quiet_beat = False  # a heartbeat turn that may answer HEARTBEAT_OK: shown at its end
        self._turn_kind: str | None = None  # the kind of the turn running now
        self._ctrl_c_at: float | None = None  # when Ctrl-C last hit an empty prompt
        self._draft = ""  # put back on the prompt when it opens again after closing for something
        self._leaving = False
        self._asks: deque[tuple[str, str, asyncio.Future[bool]]] = deque()  # approvals to ask
        self._waiting: Counter[str] = Counter()  # messages shown as queued, not begun yet
        self._settling: set[asyncio.Task[None]] = set()
        # A dumb terminal cannot draw above a prompt: there each input is waited for, as
        # before the prompt stayed open during turns.
        self._one_at_a_time = is_dumb_terminal()
        self._on_sigint: Callable[[], object] = self._interrupted_between_prompts  # see _catch_sigint
        self.session: PromptSession[str] = PromptSession(
            history=private_history(profile.history_path),
            completer=SlashCompleter(self.controller.registry.names()),
            complete_while_typing=True,
            key_bindings=self._key_bindings(),
            bottom_toolbar=self._toolbar,
            refresh_interval=5.0,
        )
        buffer = self.session.default_buffer
        buffer.on_text_changed += self._on_keystroke
        buffer.on_cursor_position_changed += self._on_keystroke
        conversation.listeners.append(self._on_event)
        self.controller.agent.approve = self._approve

    def _key_bindings(self) -> KeyBindings:
        bindings = KeyBindings()

        @bindings.add("escape", "enter")
        def _newline(event) -> None:  # type: ignore[no-untyped-def]
            event.current_buffer.insert_text("\n")

        @bindings.add("c-c")
        def _interrupt(event) -> None:  # type: ignore[no-untyped-def]
            # A running turn is stopped and the draft stays; otherwise prompt_toolkit's own
            # Ctrl-C (the prompt ends with KeyboardInterrupt, see _leaves_on_interrupt).
            if self.conversation.interrupt():
                self._ctrl_c_at = None
                return
            event.app.exit(exception=KeyboardInterrupt, style="class:aborting")

        return bindings

    def _message(self) -> str:
        """The prompt, with the answer's line being written above it (not in its final
        drawing: that line is printed whole once it is complete)."""
        app = get_app()
        shown = "" if app.is_done else self._live.shown(app.output.get_size().columns)
        return f"{shown}\n{PROMPT}" if shown else PROMPT

    def _redraw(self) -> None:
        if self._prompt_open and self.session.app.is_running:
            self.session.app.invalidate()

    def _close_prompt(self) -> None:
        """End the open prompt (its draft is kept for the next one), erasing it from the screen."""
        app = self.session.app
        if self._prompt_open and app.is_running and not app.is_done:
            app.erase_when_done = True
            app.exit(exception=_PromptClosed())

    def _on_keystroke(self, buffer) -> None:  # type: ignore[no-untyped-def]
        """A half-typed line holds a due heartbeat back (see ``Conversation.drafting``)."""
        if not self._prompt_open:
            return
        waiting = self.conversation.heartbeat_waiting_for_draft
        if buffer.text.strip():
            self.conversation.drafting()
        else:
            self.conversation.draft_cleared()
        if waiting != self.conversation.heartbeat_waiting_for_draft:
            self.session.app.invalidate()  # the toolbar says what the heartbeat waits for

    def _toolbar(self) -> str:
        return toolbar(self.conversation, self.profile.name)

    async def run(self) -> int:
        console.print(
            f"[bold]vigil[/bold] — profile {self.profile.name}, model {escape(self.controller.model_name())}. "
            "Type /help for commands, /quit to leave."
        )
        if self.controller.session_id:
            console.print(f"[dim]Resumed session {self.controller.session_id}[/dim]")
            await asyncio.to_thread(show_recap, self.controller.store, self.controller.session_id)
        await self._loop()
        session_id = self.controller.session_id
        if session_id:
            await asyncio.to_thread(mark_closed, self.controller.store, session_id, self.controller.agent.clock.now())
            console.print(f"[dim]Conversation kept: vigil chat --resume {session_id}[/dim]")
        return 0

    async def _loop(self) -> None:
        self._catch_sigint()
        try:
            await self._prompts()
        finally:
            asyncio.get_running_loop().remove_signal_handler(signal.SIGINT)

    def _catch_sigint(self) -> None:
        # Between two prompts the terminal is not in raw mode, so Ctrl-C is a SIGINT rather
        # than a key: without this it would end the process with a traceback-like "Aborted!".
        # (A prompt_toolkit prompt takes SIGINT over while it runs and removes it when done.)
        asyncio.get_running_loop().add_signal_handler(signal.SIGINT, self._on_sigint)

    def _interrupted_between_prompts(self) -> None:
        self._gap_interrupts += 1

    async def _prompts(self) -> None:
        while not self._leaving:
            if self._gap_interrupts:
                self._gap_interrupts = 0
                if self._leaves_on_interrupt(at_prompt=False):
                    return
            if self._asks:
                try:
                    await self._ask_approvals()
                finally:
                    self._catch_sigint()
                continue
            self._prompt_open = True
            try:
                # Output is routed above the prompt only while the prompt is open; otherwise
                # it goes straight to the terminal, unchanged by the proxy.
                with patch_stdout(raw=True):
                    text = await self.session.prompt_async(self._message, default=self._draft)
            except _PromptClosed:
                self._draft = self.session.default_buffer.text
                continue
            except KeyboardInterrupt:
                self._draft = ""
                self.conversation.draft_cleared()
                if self._leaves_on_interrupt():
                    return
                continue
            except EOFError:
                self.conversation.draft_cleared()
                self._say_left_during_turn()
                return
            finally:
                self._prompt_open = False
                self.session.app.erase_when_done = False
                self._catch_sigint()
            self._draft = ""
            self._ctrl_c_at = None
            if not text.strip():
                self.conversation.draft_cleared()
                continue
            future, settled = self._send(text)
            if self._one_at_a_time:
                await self._wait_for(future, settled)

    async def _wait_for(self, future: asyncio.Future[Outcome], settled: asyncio.Task[None]) -> None:
        """Wait until an input is handled and shown, the prompt closed; Ctrl-C withdraws or
        interrupts it."""

        def interrupt() -> None:
            self.conversation.interrupt()
            self.conversation.cancel(future)

        self._on_sigint = interrupt
        self._catch_sigint()
        try:
            await asyncio.shield(settled)
        finally:
            self._on_sigint = self._interrupted_between_prompts
            self._catch_sigint()

    def _leaves_on_interrupt(self, *, at_prompt: bool = True) -> bool:
        """Ctrl-C at the prompt: it stops the running turn, or drops the draft; at an empty
        prompt the first one says how to leave and a second within :data:`LEAVE_WINDOW`
        seconds leaves."""
        if self.conversation.interrupt():
            self._ctrl_c_at = None
            return False
        # The buffer still holds what was on the line when Ctrl-C ended the prompt.
        if at_prompt and self.session.default_buffer.text.strip():
            self._ctrl_c_at = None
            return False
        now = time.monotonic()
        if self._ctrl_c_at is not None and now - self._ctrl_c_at <= LEAVE_WINDOW:
            return True
        self._ctrl_c_at = now
        console.print("[dim]Press Ctrl-C again or Ctrl-D to leave.[/dim]")
        return False

    def _say_left_during_turn(self) -> None:
        if not self.conversation.busy:
            return
        waiting = self.conversation.queued
        unsent = f"; {waiting} waiting message{'s' if waiting != 1 else ''} not sent" if waiting else ""
        console.print(f"[yellow]⏹ left during a turn: it is interrupted — the conversation is kept{unsent}[/yellow]")

    def _send(self, text: str) -> tuple[asyncio.Future[Outcome], asyncio.Task[None]]:
        """Hand the line to the conversation without waiting for it: a message sent while
        something runs waits behind it (shown with its number in ``/queue``), ``/steer``
        goes to the running turn; what becomes of the line is shown when it is known."""
        conversation = self.conversation
        steers = bool(steer_text(text)) and conversation.running_turn
        waits = conversation.busy
        future = conversation.submit(text)
        conversation.draft_cleared()  # after submit: the sent draft goes before the heartbeat
        if not future.done():
            if steers:
                console.print("[dim]↪ for the running turn: it reads this after its current step[/dim]")
            elif waits and not self._urgent(text):
                number = conversation.queued
                if not self.controller.is_command(text):
                    self._waiting[text] += 1
                console.print(
                    f"[dim]⏳ queued as #{number}, after the running turn (/queue drop {number} withdraws it)[/dim]"
                )
        task = asyncio.ensure_future(self._settle(text, future))
        self._settling.add(task)
        task.add_done_callback(self._settling.discard)
        self._redraw()
        return future, task

    def _urgent(self, text: str) -> bool:
        word = text.strip()[1:].split(maxsplit=1)[:1] if self.controller.is_command(text) else []
        command = self.controller.registry.find(word[0]) if word else None
        return command is not None and command.name in URGENT_COMMANDS

    async def _settle(self, text: str, future: asyncio.Future[Outcome]) -> None:
        """Show a command's reply once it is handled; leave on ``/quit``."""
        try:
            outcome = await future
        except asyncio.CancelledError:  # the conversation closed
            return
        if outcome.withdrawn and self._waiting[text]:
            self._waiting[text] -= 1  # the /queue reply names it
        reply = outcome.reply
        if reply is None:
            return
        style = "red" if reply.is_error else "cyan"
        if reply.text:
            console.print(f"[{style}]{escape(reply.text)}[/{style}]")
        if reply.action == "quit":
            self._leaving = True
            self._close_prompt()

    async def _approve(self, tool: str, description: str) -> bool:
        if self._turn_kind == HEARTBEAT:
            console.print(
                f"[yellow]⚠ {escape(tool)} needs approval, which a heartbeat turn cannot ask for: "
                f"denied.[/yellow] {escape(description)}"
            )
            return False
        if self._one_at_a_time and not self._prompt_open:  # the input is waited for: ask here
            try:
                return await ask_approval(tool, description)
            finally:
                self._catch_sigint()
        # The prompt closes (its draft kept) for the question and opens again after it.
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._asks.append((tool, description, future))
        self._close_prompt()
        return await future

    async def _ask_approvals(self) -> None:
        while self._asks:
            tool, description, future = self._asks.popleft()
            if future.done():  # the turn that asked has ended
                continue
            allowed = await ask_approval(tool, description)
            if not future.done():
                future.set_result(allowed)

    # -- showing what the conversation does -------------------------------------------------
    def _on_event(self, event: ConversationEvent) -> None:
        if isinstance(event, TurnBegan):
            self._begin(event)
        elif isinstance(event, TurnEnded):
            self._end(event)
        elif isinstance(event, TextDelta):
            if self._streaming:
                self._streamed_any = True
                lines = self._live.feed(event.text)
                if lines:
                    sys.stdout.write(lines)
                    sys.stdout.flush()
                self._redraw()  # the line being written, above the prompt
        elif isinstance(event, ToolStarted):
            self._end_stream()
            console.print(f"[dim]⚙ {escape(event.name)}({escape(shorten(event.arguments, 70))})[/dim]")
        elif isinstance(event, ToolFinished):
            mark = "[red]✗[/red]" if event.is_error else "[green]✓[/green]"
            console.print(f"[dim]  {mark} {escape(shorten(event.content, 90))}[/dim]")
        elif isinstance(event, PromptRebuilt) and event.reason != "new session":
            console.print(f"[dim]↻ system prompt rebuilt ({event.reason})[/dim]")
        elif isinstance(event, BackgroundNote):
            # Printed whole above whatever streams meanwhile (a turn's line being written stays).
            head, _, body = event.text.partition("\n")
            style = "bold blue" if event.status == "answered" else "yellow"
            console.print(f"\n[{style}]{escape(head)}[/{style}]")
            if body.strip():
                console.print(escape(body.strip()) + "\n")

    def _begin(self, event: TurnBegan) -> None:
        self._turn_kind = event.kind
        self._quiet_beat = event.kind == HEARTBEAT and asks_for_silence(event.text)
        # HEARTBEAT_OK is known only at the end: such a turn is not streamed, so that it can
        # be folded into one quiet line.
        self._streaming = self.stream and not self._quiet_beat
        self._streamed_any = False
        if event.kind == HEARTBEAT and event.header:
            console.print(f"\n[bold magenta]♥ {escape(event.header)}[/bold magenta]")
        elif event.kind == USER and self._waiting[event.text]:
            # A message that waited: its answer is marked with it, as other lines came between.
            self._waiting[event.text] -= 1
            console.print(f"[bold]you (queued):[/bold] {escape(shorten(event.text, max(20, console.width - 16)))}")
        self._redraw()

    def _end(self, event: TurnEnded) -> None:
        self._end_stream()
        self._turn_kind = None
        if event.cancelled:
            console.print("[yellow]⏹ interrupted — the conversation is kept[/yellow]")
        elif event.error is not None:
            console.print(f"[red]Error: {escape(str(event.error))}[/red]")
        elif event.result is not None:
            result = event.result
            if self._quiet_beat and is_silent_answer(result.answer):
                console.print("[dim]  nothing changed (HEARTBEAT_OK)[/dim]")
            elif result.answer and (not self._streamed_any or result.stop != "answered"):
                console.print(escape(result.answer) + "\n")
        self._redraw()

    def _end_stream(self) -> None:
        rest = self._live.finish()
        if rest:
            sys.stdout.write(rest)
            sys.stdout.flush()
            self._redraw()
