"""The rule a conversation's title follows, wherever it is given: the web chat's Rename,
``vigil sessions rename`` and ``/title``. One line, whitespace collapsed, at most
:data:`MAX_TITLE` characters, no control character and none that reorders the text around it
(a title could read backwards); joiners and other format characters stay allowed (emoji
sequences need them)."""

from __future__ import annotations

import unicodedata

MAX_TITLE = 200
"""Characters in a conversation's title."""
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def clean_title(title: str) -> str:
    """``title`` on one line with its whitespace collapsed; ``ValueError`` (saying why) when it
    is empty, too long or holds a control or bidirectional-control character."""
    text = " ".join(title.split())
    if not text:
        raise ValueError("the title must not be empty")
    if len(text) > MAX_TITLE:
        raise ValueError(f"the title is longer than {MAX_TITLE} characters")
    bad = next((ch for ch in text if unicodedata.category(ch) in ("Cc", "Cs") or ch in BIDI_CONTROLS), None)
    if bad is not None:
        raise ValueError(f"the title contains the control character U+{ord(bad):04X}: use printable text")
    return text
