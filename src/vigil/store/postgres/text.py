"""Text that PostgreSQL cannot hold as it is: a reversible escape for NUL characters.

PostgreSQL ``text`` refuses the NUL character, which SQLite (and Python) store happily; a
tool's output or a pasted file can contain one, and a store must give back exactly what it
was given. So every string crossing into PostgreSQL is escaped and every string coming back
is unescaped, with ``ESCAPE`` (U+FDD0, a noncharacter Unicode reserves for a program's
internal use) as the escape character:

    NUL -> ESCAPE "0"        ESCAPE -> ESCAPE ESCAPE

A string with neither character (all of them, in practice) is stored unchanged, so the
database stays readable by people and other tools, and prefixes and equality carry over:
``escape(a + b) == escape(a) + escape(b)``.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

ESCAPE = "\ufdd0"

_TO_ESCAPE = re.compile("[\x00\ufdd0]")
_ESCAPED = re.compile("\ufdd0(.?)", re.DOTALL)


def escape(text: str) -> str:
    """``text`` in the form PostgreSQL can store (see the module docstring)."""
    if "\x00" not in text and ESCAPE not in text:
        return text
    return _TO_ESCAPE.sub(lambda m: ESCAPE + ("0" if m[0] == "\x00" else ESCAPE), text)


def unescape(stored: str) -> str:
    """The original of an escaped string.

    Tolerant of a cut-off escape (a search snippet may end between the two characters): a
    stray ``ESCAPE`` is dropped rather than raising.
    """
    if ESCAPE not in stored:
        return stored
    return _ESCAPED.sub(lambda m: "\x00" if m[1] == "0" else m[1], stored)


def escape_params(params: Sequence[Any]) -> tuple[Any, ...]:
    """Query parameters with every string (also inside a list) escaped."""
    return tuple(_escape_value(p) for p in params)


def _escape_value(value: Any) -> Any:
    if isinstance(value, str):
        return escape(value)
    if isinstance(value, list):
        return [escape(v) if isinstance(v, str) else v for v in value]
    return value
