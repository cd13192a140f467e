"""Stopping a command on SIGINT, SIGTERM and SIGHUP the way Ctrl-C stops a turn.

``run_stoppable(main)`` is ``asyncio.run(main)`` with those signals turned into cancellation
of the main task, so every ``finally`` and ``except CancelledError`` runs: the terminal tool
kills its command's process group, the agent stores a placeholder result for each tool call
left open and keeps a half-streamed answer, a cron run is recorded as interrupted and its
session ended. Then :class:`Stopped` is raised and the command exits with the shell's
convention for death by a signal, 128 + its number: 130 for SIGINT, 129 for SIGHUP, 143 for
SIGTERM.

Commands that do one job (``chat -q``, ``chat``, ``cron run``, ``cron tick``) use this.
``gateway run`` is a service, for which a signal is the normal way to stop: it lets running
jobs finish for a grace period first and exits 0 (see ``vigil.gateway.run``).
A second signal while the first is being handled cancels again (cleanup is cut short).
"""

from __future__ import annotations

import asyncio
import signal
import sys
from typing import Any, Coroutine, Sequence, TypeVar

T = TypeVar("T")

STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopped(Exception):
    """The command was stopped by ``signum`` after its cleanup ran."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"stopped by {self.name}")

    @property
    def name(self) -> str:
        try:
            return signal.Signals(self.signum).name
        except ValueError:
            return f"signal {self.signum}"

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def say(text: str) -> None:
    """Print ``text`` to stderr unless the terminal is gone (after SIGHUP writes fail)."""
    try:
        print(text, file=sys.stderr, flush=True)
    except OSError:
        pass


def run_stoppable(main: Coroutine[Any, Any, T], *, signals: Sequence[signal.Signals] = STOP_SIGNALS) -> T:
    """Run ``main`` to completion; raise :class:`Stopped` if one of ``signals`` cancelled it.

    A coroutine that swallows the cancellation and returns finished its work: its result is
    returned as usual.
    """
    return asyncio.run(_guarded(main, tuple(signals)))


async def _guarded(main: Coroutine[Any, Any, T], signals: tuple[signal.Signals, ...]) -> T:
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(main)
    received: list[int] = []

    def on_signal(signum: int) -> None:
        received.append(signum)
        task.cancel()

    installed = []
    for sig in signals:
        try:
            loop.add_signal_handler(sig, on_signal, int(sig))
        except (NotImplementedError, RuntimeError, ValueError):  # pragma: no cover - non-POSIX
            continue
        installed.append(sig)
    try:
        return await task
    except asyncio.CancelledError:
        if received:
            raise Stopped(received[0]) from None
        raise
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
