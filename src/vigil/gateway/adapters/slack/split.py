"""Long answers as several Slack messages.

Slack shows at most about 4,000 characters of a message's text well (it truncates at 40,000),
so an answer is cut into parts of at most ``limit`` characters: at a paragraph break if
there is one in the second half of the part, else at a line break, else at a space, else
hard — never inside an ``&…;`` entity or a ``<…>`` link. A part that ends inside a code block
closes it and the next part opens it again.
"""

from __future__ import annotations

LIMIT = 3_500
FENCE = "```"
_CLOSE = "\n" + FENCE
_OPEN = FENCE + "\n"


def _cut(text: str, limit: int) -> int:
    """Where to end the first part of ``text`` (1 … limit)."""
    window = text[:limit]
    for separator in ("\n\n", "\n", " "):
        at = window.rfind(separator)
        if at >= limit // 2:
            return at + len(separator)
    at = limit
    amp, semi = window.rfind("&"), window.rfind(";")
    if amp > semi and limit - amp < 10:
        at = amp
    lt, gt = window.rfind("<"), window.rfind(">")
    if lt > gt and lt > 0:
        at = min(at, lt)
    return max(1, at)


def split_message(text: str, limit: int = LIMIT) -> list[str]:
    """``text`` in parts of at most ``limit`` characters (see the module docstring); an
    empty text is no part at all."""
    if limit < 2 * len(_CLOSE) + 16:
        raise ValueError("limit too small")
    parts: list[str] = []
    rest = text
    reopen = False
    while rest:
        prefix = _OPEN if reopen else ""
        room = limit - len(prefix)
        if len(rest) <= room:
            parts.append(prefix + rest)
            break
        at = _cut(rest, room - len(_CLOSE))
        head, rest = rest[:at], rest[at:]
        opened = reopen ^ (head.count(FENCE) % 2 == 1)
        part = prefix + head.rstrip("\n")
        if opened:
            part += _CLOSE
        parts.append(part)
        reopen = opened
        if reopen and rest.startswith(FENCE):  # the block ends right here: nothing to reopen
            rest, reopen = rest[len(FENCE):].lstrip("\n"), False
    return [part for part in parts if part.strip()]
