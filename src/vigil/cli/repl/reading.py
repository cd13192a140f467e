"""What the REPL reads with: the slash command completer, the private input history and the
approval question (asked with a prompt of its own)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import click
from prompt_toolkit import PromptSession
from prompt_toolkit.completion import Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory
from rich.console import Console
from rich.markup import escape

console = Console(highlight=False)
"""Where the REPL prints (``sys.stdout`` at each print: above the prompt while one is open)."""


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


async def ask_approval(tool: str, description: str) -> bool:
    """Ask the person at the terminal whether a dangerous action may run."""
    console.print(f"[bold yellow]⚠ {escape(tool)} needs approval:[/bold yellow] {escape(description)}")
    try:
        answer = await PromptSession().prompt_async("Allow it? [y/N] ")
    except (EOFError, KeyboardInterrupt):
        return False
    return answer.strip().lower() in ("y", "yes")
