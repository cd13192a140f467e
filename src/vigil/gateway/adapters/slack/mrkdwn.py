"""Markdown (what the model writes) to Slack's mrkdwn, and mrkdwn split into messages.

``**bold**``/``__bold__`` → ``*bold*``, ``*it*``/``_it_`` → ``_it_``, ``~~s~~`` → ``~s~``,
``[text](url)`` → ``<url|text>``, headings → a bold line, list bullets → ``•``; fenced code
blocks (their language dropped) and inline code are kept as they are. ``&``, ``<`` and ``>``
are escaped everywhere, as Slack requires, so model text can never form a mention or a link
of its own.
"""

from __future__ import annotations

import re

from vigil.gateway.adapters.splitting import split_text
from vigil.platforms.slack import SLACK

_FENCE = re.compile(r"^[ \t]*```")
_HEADING = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+(.*?)[ \t#]*$")
_BULLET = re.compile(r"^([ \t]*)[-*+][ \t]+")
_INLINE_CODE = re.compile(r"(`+)(.+?)\1", re.S)
_LINK = re.compile(r"\[([^\[\]\n]+)\]\(([^()\s]+)\)")
_BOLD = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_ITALIC_STAR = re.compile(r"(?<![*\w])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![*\w])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_BOLD_MARK = "\x00"


def escape(text: str) -> str:
    """Slack's three control characters as entities."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _url(url: str) -> str:
    return url.replace("|", "%7C").replace("<", "%3C").replace(">", "%3E").replace("&", "&amp;")


def _emphasis(text: str) -> str:
    text = text.replace(_BOLD_MARK, "")
    text = _BOLD.sub(lambda m: _BOLD_MARK + m.group(2) + _BOLD_MARK, text)
    text = _ITALIC_STAR.sub(lambda m: "_" + m.group(1) + "_", text)
    text = _STRIKE.sub(lambda m: "~" + m.group(1) + "~", text)
    return text.replace(_BOLD_MARK, "*")


def _plain(text: str) -> str:
    """Text outside code: links, emphasis, escaping."""
    out, last = [], 0
    for match in _LINK.finditer(text):
        out.append(escape(_emphasis(text[last:match.start()])))
        label = escape(_emphasis(match.group(1))).replace("|", "¦")
        out.append(f"<{_url(match.group(2))}|{label}>")
        last = match.end()
    out.append(escape(_emphasis(text[last:])))
    return "".join(out)


def _inline(text: str) -> str:
    """One line (or paragraph) outside a code block: inline code kept, the rest converted."""
    out, last = [], 0
    for match in _INLINE_CODE.finditer(text):
        out.append(_plain(text[last:match.start()]))
        out.append(match.group(1)[0] + escape(match.group(2)) + match.group(1)[0])
        last = match.end()
    out.append(_plain(text[last:]))
    return "".join(out)


def _line(line: str) -> str:
    heading = _HEADING.match(line)
    if heading:
        inner = _inline(heading.group(1)).replace("*", "")
        return f"*{inner}*" if inner.strip() else ""
    bullet = _BULLET.match(line)
    if bullet and line[bullet.end():].strip():
        return bullet.group(1) + "• " + _inline(line[bullet.end():])
    return _inline(line)


def to_mrkdwn(markdown: str) -> str:
    """``markdown`` as Slack mrkdwn (see the module docstring)."""
    lines = markdown.replace("\r\n", "\n").split("\n")
    out: list[str] = []
    in_code = False
    for line in lines:
        if _FENCE.match(line):
            out.append("```")  # Slack shows no language: ```python becomes ```
            in_code = not in_code
        elif in_code:
            out.append(escape(line))
        else:
            out.append(_line(line))
    if in_code:
        out.append("```")
    return "\n".join(out)


def from_slack(text: str) -> str:
    """A user's message as Slack delivers it, as plain text for the agent: entities
    unescaped, ``<url|label>`` as ``label (url)``, ``<url>`` as ``url``; mentions kept."""
    def link(match: re.Match[str]) -> str:
        target, _, label = match.group(1).partition("|")
        if target.startswith(("@", "#", "!")):
            return match.group(0)
        return f"{label} ({target})" if label and label != target else target

    text = re.sub(r"<([^<>\s][^<>]*)>", link, text)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


LIMIT = SLACK.capabilities.max_message_chars or 3_500
"""Slack shows at most about 4,000 characters of a message's text well (it truncates at 40,000)."""
FENCE = "```"
UNBROKEN = re.compile(r"&#?\w{1,10};|<[^<>\n]{1,1000}>")
"""An ``&…;`` entity or a ``<…>`` link or mention: no message ends inside one."""


def split_message(text: str, limit: int = LIMIT) -> list[str]:
    """mrkdwn ``text`` in messages of at most ``limit`` characters (:func:`~vigil.gateway.adapters.splitting.split_text`),
    never cut inside an entity or a link; a code block cut in two is closed and opened again
    with a bare fence (mrkdwn has no languages). An empty text is no message at all."""
    return split_text(text, limit, code_blocks=True, keep=UNBROKEN, trim=True, fence=FENCE)
