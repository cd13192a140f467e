"""Small helpers for human output: times, durations, truncation, JSON."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import click
from rich.console import Console

console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def local_time(epoch: float | None) -> str:
    """``2026-11-30 14:05`` in the machine's local zone, or ``-``."""
    if epoch is None:
        return "-"
    return datetime.fromtimestamp(epoch).strftime("%Y-%m-%d %H:%M")


def relative(seconds: float) -> str:
    """A compact human duration: ``in 14m``/``3h ago`` style magnitude without the direction."""
    seconds = abs(int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            major, rest = divmod(seconds, size)
            minor_unit = {"d": ("h", 3600), "h": ("m", 60), "m": ("s", 1)}[unit]
            minor = rest // minor_unit[1]
            return f"{major}{unit}{minor}{minor_unit[0]}" if minor else f"{major}{unit}"
    return f"{seconds}s"


def shorten(text: str | None, width: int = 60) -> str:
    """One line, at most ``width`` characters, with an ellipsis when cut."""
    if not text:
        return ""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def echo_json(data: Any) -> None:
    """Print ``data`` as indented JSON on stdout (for scripts)."""
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))
