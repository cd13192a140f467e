"""Turning a person's search words into a full-text query that cannot be misread as syntax."""

from __future__ import annotations

import re

_WORDISH = re.compile(r"\w")


def to_match_query(text: str) -> str | None:
    """An FTS5 MATCH expression requiring every whitespace-separated word of ``text``.

    Each word becomes a quoted phrase (inner quotes doubled), so operators and punctuation
    such as ``OR``, ``NEAR(``, ``*`` or a stray ``"`` are searched for as plain words instead
    of being parsed. Chunks with no letter or digit are dropped: they can match nothing.
    Returns ``None`` when nothing searchable is left.
    """
    # FTS5 reads the query as a C string: a NUL would end it inside a quoted term.
    chunks = text.replace("\x00", " ").split()
    terms = ['"' + chunk.replace('"', '""') + '"' for chunk in chunks if _WORDISH.search(chunk)]
    return " ".join(terms) or None
