"""Long answers as several messages, for every platform with a message length limit.

:func:`split_text` cuts a text into pieces that each fit the platform's limit (as the platform
counts it: characters, or UTF-16 code units, :func:`utf16_units`). A piece ends at a
paragraph break if there is one in the second half of the piece, else at a line break, else
after a sentence, else at a space, else hard — never inside a run of backticks, a code fence
line, or a span the platform names as unbreakable (``keep``: HTML-like ``&amp;`` entities and
``<url|links>``). With ``code_blocks`` a piece that ends inside a fenced code block closes it
and the next piece opens it again with the same fence line (```` ```python ````), so every
message renders its code as code.

:func:`pieces` gives the same cut as :class:`Piece` values whose ``body`` slices joined back
are exactly the text; :func:`clip` cuts a streamed text to one message with an ellipsis.
Each character is assumed to measure at least one unit.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Callable, Sequence

Measure = Callable[[str], int]
"""How a platform counts a text's length."""

BREAKS = ("\n\n", "\n", ". ", " ")
"""Where a piece may end, best first."""

_FENCE_LINE = re.compile(r"^ {0,3}(`{3,}|~{3,})([^\n]*)$", re.M)
_BACKTICKS = re.compile(r"`{2,}")
_MIN_LIMIT = 2
_MIN_CODE_LIMIT = 24


def utf16_units(text: str) -> int:
    """``text``'s length in UTF-16 code units (as some platforms count a message)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


@dataclass(frozen=True, slots=True)
class Piece:
    """One message of a split text: ``body`` is a slice of the text (the bodies joined back
    are the text); ``opens`` and ``closes`` are what the split added around it to reopen
    and close a code block cut in two."""

    body: str
    opens: str = ""
    closes: str = ""

    @property
    def text(self) -> str:
        """The message: the body, with the code block reopened and closed where it was cut."""
        closes = self.closes[1:] if self.closes and self.body.endswith("\n") else self.closes
        return self.opens + self.body + closes


@dataclass(frozen=True, slots=True)
class _Block:
    """A fenced code block: its opening line and where its closing line is."""

    opened: int
    """Index just past the opening fence line (before its line break)."""
    fence: str
    """The opening line as written, indentation dropped (```` ```python ````)."""
    run: str
    """Its backticks or tildes: what closes it."""
    close_start: int
    """Index of its closing line (the text's length when it is never closed)."""
    close_end: int


def split_text(text: str, limit: int, *, measure: Measure = len, code_blocks: bool = False,
               keep: re.Pattern[str] | None = None, trim: bool = False, fence: str | None = None) -> list[str]:
    """``text`` in messages of at most ``limit`` units (see the module docstring); an empty
    text is no message at all. ``trim``: leave out the whitespace at each cut and pieces
    with nothing but whitespace (for platforms that would trim or refuse them anyway);
    otherwise, without ``code_blocks``, the messages joined back are ``text``. ``fence``: what
    closes and reopens a cut code block (```` ``` ```` where the platform knows no languages);
    ``None``: the block's own fence line."""
    result = []
    for piece in pieces(text, limit, measure=measure, code_blocks=code_blocks, keep=keep, fence=fence):
        if trim:
            body = piece.body.rstrip()
            piece = Piece(body, piece.opens, piece.closes)
            if not body.strip():
                continue
        result.append(piece.text)
    return result


def pieces(text: str, limit: int, *, measure: Measure = len, code_blocks: bool = False,
           keep: re.Pattern[str] | None = None, fence: str | None = None) -> list[Piece]:
    """The cut of :func:`split_text` as :class:`Piece` values (every body non-empty; each
    piece's ``text`` at most ``limit`` units). ``ValueError`` for a limit too small to
    split at (2 units; 24 with ``code_blocks``)."""
    if limit < (_MIN_CODE_LIMIT if code_blocks else _MIN_LIMIT):
        raise ValueError(f"a message limit of {limit} is too small to split at")
    blocks = _blocks(text) if code_blocks else []
    starts = [block.opened for block in blocks]
    atoms = _atoms(text, keep, blocks)
    reserve = max((measure(_closes(block, fence)) for block in blocks if _reopen(block, limit, measure, fence)),
                  default=0)
    result: list[Piece] = []
    pos = 0
    while pos < len(text):
        opens = _reopen(_inside(blocks, starts, pos), limit, measure, fence) if pos else ""
        room = limit - measure(opens)
        if measure(text[pos:pos + room + 1]) <= room:  # the rest fits (a character is at least a unit)
            result.append(Piece(text[pos:], opens))
            break
        cut = _cut(text, pos, _fit(text, pos, room - reserve, measure), atoms)
        block = _inside(blocks, starts, cut)
        closes = _closes(block, fence) if block is not None and _reopen(block, limit, measure, fence) else ""
        if closes and text[cut:block.close_start] in ("", "\n") and block.close_start < len(text) \
                and measure(text[cut:block.close_end]) <= measure(closes):
            cut, closes = block.close_end, ""  # the block's own closing line fits: nothing to reopen
        result.append(Piece(text[pos:cut], opens, closes))
        pos = cut
    return result


def clip(text: str, limit: int, *, measure: Measure = len, ellipsis: str = "…") -> str:
    """``text`` cut to fit one message of ``limit`` units, its end replaced by ``ellipsis``
    when it had to be cut (a streamed answer that outgrew one message)."""
    if measure(text) <= limit:
        return text
    return text[: _fit(text, 0, limit - measure(ellipsis), measure)] + ellipsis


# -- internals ---------------------------------------------------------------------------------
def _fit(text: str, pos: int, room: int, measure: Measure) -> int:
    """The length of the longest slice of ``text`` from ``pos`` within ``room`` units (at
    least one character where one fits; every character measures at least one unit)."""
    high = min(len(text) - pos, max(room, 0))
    if measure is len or measure(text[pos:pos + high]) <= room:
        return high
    low = 0  # measure(text[pos:pos+low]) <= room < measure(text[pos:pos+high])
    while high - low > 1:
        middle = (low + high) // 2
        if measure(text[pos:pos + middle]) <= room:
            low = middle
        else:
            high = middle
    return max(low, 1)


def _cut(text: str, pos: int, size: int, atoms: Sequence[tuple[int, int]]) -> int:
    """Where the piece from ``pos`` of at most ``size`` characters ends (an index of ``text``)."""
    end = pos + size
    for mark in BREAKS:
        at = text.rfind(mark, pos, end)
        while at >= pos + size // 2:
            cut = at + len(mark)
            if _atom_at(atoms, cut) is None:
                return cut
            at = text.rfind(mark, pos, at)
    atom = _atom_at(atoms, end)
    if atom is not None and atom[0] > pos:
        return atom[0]
    return end


def _atom_at(atoms: Sequence[tuple[int, int]], index: int) -> tuple[int, int] | None:
    """The unbreakable span ``index`` would cut through, if any (``atoms``: sorted, disjoint)."""
    at = bisect.bisect_left(atoms, (index, index)) - 1
    if at >= 0 and atoms[at][0] < index < atoms[at][1]:
        return atoms[at]
    return None


def _atoms(text: str, keep: re.Pattern[str] | None, blocks: Sequence[_Block]) -> list[tuple[int, int]]:
    """The spans no cut goes through, merged where they overlap."""
    spans = [match.span() for match in _BACKTICKS.finditer(text)]
    if keep is not None:
        spans.extend(match.span() for match in keep.finditer(text))
    for block in blocks:
        spans.append((text.rfind("\n", 0, block.opened) + 1, block.opened))
        spans.append((block.close_start, block.close_end))
    merged: list[tuple[int, int]] = []
    for start, end in sorted(span for span in spans if span[1] - span[0] > 1):
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _blocks(text: str) -> list[_Block]:
    """The fenced code blocks of ``text`` (CommonMark's rule: a fence line opens one, a line
    of at least as many of the same character closes it; no closing line: to the end)."""
    blocks: list[_Block] = []
    matches = list(_FENCE_LINE.finditer(text))
    index = 0
    while index < len(matches):
        opening = matches[index]
        run, info = opening.group(1), opening.group(2)
        index += 1
        if run[0] == "`" and "`" in info:
            continue  # not a fence (CommonMark): inline code
        close_start = close_end = len(text)
        while index < len(matches):
            candidate = matches[index]
            index += 1
            other = candidate.group(1)
            if other[0] == run[0] and len(other) >= len(run) and not candidate.group(2).strip():
                close_start, close_end = candidate.start(), candidate.end()
                break
        blocks.append(_Block(opening.end(), (run + info).strip(), run, close_start, close_end))
    return blocks


def _inside(blocks: Sequence[_Block], starts: Sequence[int], index: int) -> _Block | None:
    """The code block a cut at ``index`` falls inside (after its opening line, up to its
    closing line), if any."""
    at = bisect.bisect_right(starts, index) - 1
    if at >= 0 and blocks[at].opened <= index <= blocks[at].close_start:
        return blocks[at]
    return None


def _closes(block: _Block, fence: str | None) -> str:
    return "\n" + (fence or block.run)


def _reopen(block: _Block | None, limit: int, measure: Measure, fence: str | None = None) -> str:
    """What opens ``block`` again at the start of a piece: its fence line, or its bare run
    when the line is long; nothing when even that would leave too little room."""
    if block is None:
        return ""
    for line in (fence,) if fence else (block.fence, block.run):
        opens = line + "\n"
        if measure(opens) + measure(_closes(block, fence)) <= limit // 4:
            return opens
    return ""
