"""``vigil chat`` fed through standard input: ``-q -`` reads one message, a pipe reads many.

``echo "question" | vigil chat -q -`` sends the whole of standard input as one message.
``vigil chat < questions.txt`` (standard input not a terminal, no ``-q``) sends one turn per
non-blank line, as if each line were typed at the prompt and sent with Enter; a line starting
with ``/`` is a slash command, and ``/quit`` ends the run. Answers and command replies go to
stdout, everything else to stderr. No full-screen prompt is started, and no one can approve
anything: the run is unattended, like ``chat -q`` without a terminal.
"""

from __future__ import annotations

import asyncio
import threading
from typing import BinaryIO

import click


def read_message(stream: BinaryIO) -> str:
    """The whole of ``stream`` as one message (trailing blank space dropped); a clear
    ``UsageError`` if it is empty or not UTF-8."""
    try:
        text = stream.read().decode("utf-8")
    except UnicodeDecodeError:
        raise click.UsageError("standard input is not valid UTF-8 text") from None
    text = text.rstrip()
    if not text.strip():
        raise click.UsageError("standard input is empty: there is no question to send")
    return text


async def lines_of(stream: BinaryIO):  # type: ignore[no-untyped-def]
    """The lines of ``stream`` as they arrive (a slow pipe yields each as soon as it is
    complete). A daemon thread reads, so a stop signal never waits for input to end."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes | None] = asyncio.Queue()

    def read() -> None:
        try:
            for raw in iter(stream.readline, b""):
                loop.call_soon_threadsafe(queue.put_nowait, raw)
        except (OSError, ValueError):
            pass
        finally:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, None)
            except RuntimeError:  # the loop is already closed: nobody is waiting
                pass

    threading.Thread(target=read, name="stdin-reader", daemon=True).start()
    number = 0
    while (raw := await queue.get()) is not None:
        number += 1
        try:
            yield raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError:
            raise click.ClickException(f"line {number} of standard input is not valid UTF-8 text") from None
