"""The interactive terminal front end of ``vigil chat``."""

from __future__ import annotations

import asyncio
import signal
import sys

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings
from rich.console import Console
from rich.markup import escape

from vigil.agent.events import PromptRebuilt, TextDelta, ToolFinished, ToolStarted, TurnEvent
from vigil.cli.render import shorten
from vigil.models.base import ModelError
from vigil.profiles import Profile
from vigil.runtime.controller import ConversationController
from vigil.store import StoreError

console = Console(highlight=False)


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
    """Reads lines, runs turns and slash commands, and shows the answers."""

    def __init__(self, controller: ConversationController, profile: Profile, *, stream: bool = True):
        self.controller = controller
        self.profile = profile
        self.stream = stream
        self._streamed = False
        self._streamed_any = False
        self.session: PromptSession[str] = PromptSession(
            history=FileHistory(str(profile.history_path)),
            completer=SlashCompleter(controller.registry.names()),
            complete_while_typing=True,
            key_bindings=_key_bindings(),
            bottom_toolbar=self._toolbar,
        )

    def _toolbar(self) -> str:
        session = self.controller.session_id or "new conversation"
        return f" vigil · {self.profile.name} · {session} · {self.controller.model_name()}  (Esc Enter: newline, /help)"

    async def run(self) -> int:
        console.print(
            f"[bold]vigil[/bold] — profile {self.profile.name}, model {escape(self.controller.model_name())}. "
            "Type /help for commands, /quit to leave."
        )
        if self.controller.session_id:
            console.print(f"[dim]Resumed session {self.controller.session_id}[/dim]")
        while True:
            try:
                text = await self.session.prompt_async("you › ")
            except KeyboardInterrupt:
                continue
            except EOFError:
                break
            if not text.strip():
                continue
            if self.controller.is_command(text):
                reply = await self.controller.command(text)
                style = "red" if reply.is_error else "cyan"
                if reply.text:
                    console.print(f"[{style}]{escape(reply.text)}[/{style}]")
                if reply.action == "quit":
                    break
                continue
            await self._turn(text)
        if self.controller.session_id:
            console.print(f"[dim]Conversation kept: vigil chat --resume {self.controller.session_id}[/dim]")
        return 0

    async def _turn(self, text: str) -> None:
        self._streamed = False
        self._streamed_any = False
        task = asyncio.ensure_future(self.controller.turn(text, on_event=self._on_event))
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, task.cancel)
        try:
            result = await task
        except asyncio.CancelledError:
            self._end_stream()
            console.print("[yellow]⏹ interrupted — the conversation is kept[/yellow]")
            return
        except (ModelError, StoreError) as exc:
            self._end_stream()
            console.print(f"[red]Error: {escape(str(exc))}[/red]")
            return
        finally:
            loop.remove_signal_handler(signal.SIGINT)
        self._end_stream()
        if result.answer and (not self._streamed_any or result.stop != "answered"):
            console.print(escape(result.answer) + "\n")

    def _on_event(self, event: TurnEvent) -> None:
        if isinstance(event, TextDelta) and self.stream:
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

    def _end_stream(self) -> None:
        if self._streamed:
            sys.stdout.write("\n\n")
            sys.stdout.flush()
            self._streamed = False
