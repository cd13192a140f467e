"""The interactive terminal front end of ``vigil chat``.

The prompt stays open while the conversation runtime works in the background, so a heartbeat
turn appears on screen by itself (``patch_stdout``, active while the prompt is open, prints
it above the prompt). A message the
person sends is waited for with the prompt hidden, as before; Ctrl-C interrupts the running
turn. At an empty prompt the first Ctrl-C says how to leave and a second within two seconds
leaves, as Ctrl-D does. Every keystroke is reported to the conversation, so that a due
heartbeat waits while a half-typed line is on the prompt (the toolbar says so).
"""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import sys
import time
from pathlib import Path

import click
from prompt_toolkit import PromptSession
from prompt_toolkit.completion import Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.patch_stdout import patch_stdout
from rich.console import Console
from rich.markup import escape

from vigil.agent.events import PromptRebuilt, TextDelta, ToolFinished, ToolStarted
from vigil.cli.render import local_time, relative, shorten
from vigil.profiles import Profile
from vigil.runtime.conversation import Conversation
from vigil.runtime.conversation_events import HEARTBEAT, ConversationEvent, Outcome, TurnBegan, TurnEnded
from vigil.schedule.heartbeat.text import asks_for_silence, is_silent_answer
from vigil.schedule.intervals import format_interval

console = Console(highlight=False)

LEAVE_WINDOW = 2.0
"""Seconds within which a second Ctrl-C at an empty prompt leaves the REPL."""


class SlashCompleter(Completer):
    """Completes slash command names at the start of the input."""

    def __init__(self, names: list[str]) -> None:
        self.names = names

    def get_completions(self, document: Document, complete_event: object):  # type: ignore[override]
        text = document.text_before_cursor
        if not text.startswith("/") or " " in text:
            return
        for name in self.names:
            if name.startswith(text):
                yield Completion(name, start_position=-len(text))


def private_history(path: Path) -> FileHistory:
    """The REPL's input history: a file only its owner may read (mode 0600), as it holds
    everything typed. A history file created before this rule keeps its lines and is made
    private on first use."""
    try:
        # O_NONBLOCK: a FIFO in its place must not hang the REPL before it starts.
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o600)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise click.ClickException(f"cannot use the REPL history {path}: it is not a regular file")
            os.fchmod(fd, 0o600)
        finally:
            os.close(fd)
    except OSError as exc:
        raise click.ClickException(f"cannot use the REPL history {path}: {exc.strerror or exc}") from None
    return FileHistory(str(path))


def _key_bindings() -> KeyBindings:
    bindings = KeyBindings()

    @bindings.add("escape", "enter")
    def _newline(event) -> None:  # type: ignore[no-untyped-def]
        event.current_buffer.insert_text("\n")

    return bindings


async def ask_approval(tool: str, description: str) -> bool:
    """Ask the person at the terminal whether a dangerous action may run."""
    console.print(f"[bold yellow]⚠ {escape(tool)} needs approval:[/bold yellow] {escape(description)}")
    try:
        answer = await PromptSession().prompt_async("Allow it? [y/N] ")
    except (EOFError, KeyboardInterrupt):
        return False
    return answer.strip().lower() in ("y", "yes")


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
        self._streamed = False  # a line of streamed text is open
        self._streamed_any = False
        self._quiet_beat = False  # a heartbeat turn that may answer HEARTBEAT_OK: shown at its end
        self._ctrl_c_at: float | None = None  # when Ctrl-C last hit an empty prompt
        self.session: PromptSession[str] = PromptSession(
            history=private_history(profile.history_path),
            completer=SlashCompleter(self.controller.registry.names()),
            complete_while_typing=True,
            key_bindings=_key_bindings(),
            bottom_toolbar=self._toolbar,
            refresh_interval=5.0,
        )
        buffer = self.session.default_buffer
        buffer.on_text_changed += self._on_keystroke
        buffer.on_cursor_position_changed += self._on_keystroke
        conversation.listeners.append(self._on_event)
        self.controller.agent.approve = self._approve

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
        session = self.controller.session_id or "new conversation"
        beat = self._heartbeat_status()
        return (
            f" vigil · {self.profile.name} · {session} · {self.controller.model_name()}{beat}"
            "  (Esc Enter: newline, /help)"
        )

    def _heartbeat_status(self) -> str:
        scheduler, session_id = self.conversation.scheduler, self.controller.session_id
        if scheduler is None or session_id is None:
            return ""
        heartbeat = scheduler.known(session_id)
        if heartbeat is None:
            return ""
        every = format_interval(heartbeat.interval)
        if self.conversation.heartbeat_waiting_for_draft:
            return " · ♥ due, waiting for your draft (send or clear it)"
        if scheduler.emergency_stopped:
            return f" · ♥ {every} on emergency stop"
        fire = heartbeat.fire_at()
        if not heartbeat.active:
            return f" · ♥ {every} paused"
        if fire is None:
            return f" · ♥ {every} ending"
        left = fire - scheduler.clock.now()
        when = local_time(fire)[-5:]
        return f" · ♥ next {when} (in {relative(left)})" if left > 0 else f" · ♥ due ({when})"

    async def run(self) -> int:
        console.print(
            f"[bold]vigil[/bold] — profile {self.profile.name}, model {escape(self.controller.model_name())}. "
            "Type /help for commands, /quit to leave."
        )
        if self.controller.session_id:
            console.print(f"[dim]Resumed session {self.controller.session_id}[/dim]")
            await asyncio.to_thread(self._show_recap, self.controller.session_id)
        await self._loop()
        if self.controller.session_id:
            await asyncio.to_thread(self._mark_closed, self.controller.session_id)
            console.print(f"[dim]Conversation kept: vigil chat --resume {self.controller.session_id}[/dim]")
        return 0

    def _show_recap(self, session_id: str) -> None:
        """The last exchange, and the heartbeat turns nobody saw (see :mod:`vigil.cli.recap`)."""
        from vigil.cli.recap import SHOWN_HEARTBEATS, build_recap
        from vigil.store import StoreError

        try:
            recap = build_recap(self.controller.store, session_id)
        except StoreError as exc:
            console.print(f"[yellow]No recap: {escape(str(exc))}[/yellow]")
            return
        width = max(40, console.width - 12)
        if recap.last is not None:
            console.print(f"[dim]Last exchange ({local_time(recap.last.at)}):[/dim]")
            console.print(f"  [bold]you:[/bold] {escape(shorten(recap.last.asked, width))}")
            console.print(f"  [cyan]vigil:[/cyan] {escape(shorten(recap.last.answer or '(no answer)', width))}")
        unseen = recap.unseen_heartbeats
        if unseen:
            turns = "turn" if len(unseen) == 1 else "turns"
            news = [beat for beat in unseen if not is_silent_answer(beat.answer)]
            quiet = len(unseen) - len(news)
            said = f" ({quiet} found nothing changed)" if quiet else ""
            console.print(
                f"[magenta]♥ {len(unseen)} heartbeat {turns} fired while the conversation was not open"
                f"{escape(said)}{':' if news else '.'}[/magenta]"
            )
            if len(news) > SHOWN_HEARTBEATS:
                console.print(f"  [dim]… {len(news) - SHOWN_HEARTBEATS} earlier not shown[/dim]")
            for beat in news[-SHOWN_HEARTBEATS:]:
                answer = shorten(beat.answer or "(no answer)", width - 18)
                console.print(f"  [magenta]♥[/magenta] [dim]{local_time(beat.at)}[/dim] {escape(answer)}")

    def _mark_closed(self, session_id: str) -> None:
        from vigil.cli.recap import mark_closed
        from vigil.store import StoreError

        try:
            mark_closed(self.controller.store, session_id, self.controller.agent.clock.now())
        except StoreError:  # only the next recap is less precise
            pass

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        # Between two prompts the terminal is not in raw mode, so Ctrl-C is a SIGINT rather
        # than a key: without this it would end the process with a traceback-like "Aborted!".
        loop.add_signal_handler(signal.SIGINT, self._interrupted_between_prompts)
        try:
            await self._prompts()
        finally:
            loop.remove_signal_handler(signal.SIGINT)

    def _interrupted_between_prompts(self) -> None:
        self._gap_interrupts += 1

    async def _prompts(self) -> None:
        while True:
            if self._gap_interrupts:
                self._gap_interrupts = 0
                if self._leaves_on_interrupt(at_prompt=False):
                    return
            self._prompt_open = True
            try:
                # Output is routed above the prompt only while the prompt is open (a heartbeat
                # turn); otherwise it goes straight to the terminal, unchanged by the proxy.
                with patch_stdout(raw=True):
                    text = await self.session.prompt_async("you › ")
            except KeyboardInterrupt:
                self.conversation.draft_cleared()
                if self._leaves_on_interrupt():
                    return
                continue
            except EOFError:
                self.conversation.draft_cleared()
                return
            finally:
                self._prompt_open = False
            self._ctrl_c_at = None
            if not text.strip():
                self.conversation.draft_cleared()
                continue
            outcome = await self._submit(text)
            if outcome.reply is not None:
                reply = outcome.reply
                style = "red" if reply.is_error else "cyan"
                if reply.text:
                    console.print(f"[{style}]{escape(reply.text)}[/{style}]")
                if reply.action == "quit":
                    return

    def _leaves_on_interrupt(self, *, at_prompt: bool = True) -> bool:
        """Ctrl-C at the prompt: it stops a heartbeat turn running under the prompt, or
        drops the draft; at an empty prompt the first one says how to leave and a second
        within :data:`LEAVE_WINDOW` seconds leaves."""
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

    async def _submit(self, text: str) -> Outcome:
        """Hand the line to the conversation and wait for it; Ctrl-C withdraws or interrupts it."""
        future = self.conversation.submit(text)
        self.conversation.draft_cleared()  # after submit: the sent draft goes before the heartbeat
        loop = asyncio.get_running_loop()

        def interrupt() -> None:
            self.conversation.interrupt()
            self.conversation.cancel(future)

        loop.add_signal_handler(signal.SIGINT, interrupt)
        try:
            return await future
        finally:
            loop.add_signal_handler(signal.SIGINT, self._interrupted_between_prompts)

    async def _approve(self, tool: str, description: str) -> bool:
        if self._prompt_open:
            # A heartbeat turn runs under the open prompt: a second prompt would fight it.
            console.print(
                f"[yellow]⚠ {escape(tool)} needs approval, which a heartbeat turn cannot ask for "
                f"while you are typing: denied.[/yellow] {escape(description)}"
            )
            return False
        return await ask_approval(tool, description)

    # -- showing what the conversation does -------------------------------------------------
    def _on_event(self, event: ConversationEvent) -> None:
        if isinstance(event, TurnBegan):
            self._begin(event)
        elif isinstance(event, TurnEnded):
            self._end(event)
        elif isinstance(event, TextDelta):
            if self._streaming:
                if not self._streamed:
                    sys.stdout.write("\n")
                self._streamed = self._streamed_any = True
                sys.stdout.write(event.text)
                sys.stdout.flush()
        elif isinstance(event, ToolStarted):
            self._end_stream()
            console.print(f"[dim]⚙ {escape(event.name)}({escape(shorten(event.arguments, 70))})[/dim]")
        elif isinstance(event, ToolFinished):
            mark = "[red]✗[/red]" if event.is_error else "[green]✓[/green]"
            console.print(f"[dim]  {mark} {escape(shorten(event.content, 90))}[/dim]")
        elif isinstance(event, PromptRebuilt) and event.reason != "new session":
            console.print(f"[dim]↻ system prompt rebuilt ({event.reason})[/dim]")

    def _begin(self, event: TurnBegan) -> None:
        # Partial lines cannot be printed above an open prompt, so a turn that starts while
        # the person is typing is shown whole when it ends.
        self._quiet_beat = event.kind == HEARTBEAT and asks_for_silence(event.text)
        # HEARTBEAT_OK is known only at the end: such a turn is not streamed, so that it can
        # be folded into one quiet line.
        self._streaming = self.stream and not self._prompt_open and not self._quiet_beat
        self._streamed = self._streamed_any = False
        if event.kind == HEARTBEAT and event.header:
            console.print(f"\n[bold magenta]♥ {escape(event.header)}[/bold magenta]")

    def _end(self, event: TurnEnded) -> None:
        self._end_stream()
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

    def _end_stream(self) -> None:
        if self._streamed:
            sys.stdout.write("\n\n")
            sys.stdout.flush()
            self._streamed = False
