"""Small helpers for human output: times, durations, truncation, JSON."""

from __future__ import annotations

import json
import re
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


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """``text`` with control characters other than newline and tab shown as ``\\x1b`` ...:
    stored text (a title, a prompt a chat user sent) must never drive the terminal."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def shorten(text: str | None, width: int = 60) -> str:
    """One line, at most ``width`` characters, with an ellipsis when cut; control
    characters are shown, not sent (see :func:`visible`)."""
    if not text:
        return ""
    line = visible(" ".join(text.split()))
    return line if len(line) <= width else line[: width - 1] + "…"


def echo_json(data: Any) -> None:
    """Print ``data`` as indented JSON on stdout (for scripts)."""
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))
