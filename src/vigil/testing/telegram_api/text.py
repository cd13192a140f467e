"""How the fake Bot API checks message text: length in UTF-16 code units (as Telegram counts)
and the ``parse_mode`` rules, so a bot that sends raw Markdown or broken HTML is refused with
the real API's ``Bad Request: can't parse entities`` answer."""

from __future__ import annotations

import html
import re

MAX_TEXT = 4096
MAX_CAPTION = 1024

_HTML_TAGS = {
    "b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "span", "tg-spoiler", "a",
    "code", "pre", "blockquote", "tg-emoji",
}
_HTML_ENTITIES = re.compile(r"&(lt|gt|amp|quot|#\d{1,7}|#x[0-9a-fA-F]{1,6});")
_TAG = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9-]*)((?:\s+[a-zA-Z-]+\s*=\s*(?:\"[^\"]*\"|'[^']*'))*)\s*>")
_V2_RESERVED = set("_*[]()~`>#+-=|{}.!")
_V2_PAIRED = {"*", "_", "~", "`", "|"}


class EntityError(ValueError):
    """The text does not parse in its ``parse_mode``: the API's description follows."""


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def plain_text(text: str, parse_mode: str | None) -> str:
    """The text as the user would see it (markup removed); raises :class:`EntityError`."""
    mode = (parse_mode or "").lower()
    if not mode:
        return text
    if mode == "html":
        return _html(text)
    if mode == "markdownv2":
        return _markdown_v2(text)
    if mode == "markdown":
        return _markdown(text)
    raise EntityError(f"Bad Request: unsupported parse_mode {parse_mode}")


def _html(text: str) -> str:
    out: list[str] = []
    stack: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "<":
            match = _TAG.match(text, i)
            if match is None:
                raise EntityError(f"Bad Request: can't parse entities: Unsupported start tag at byte offset {i}")
            closing, name = match.group(1) == "/", match.group(2).lower()
            if name not in _HTML_TAGS:
                raise EntityError(f'Bad Request: can\'t parse entities: Unsupported start tag "{name}" at byte offset {i}')
            if closing:
                if not stack or stack[-1] != name:
                    raise EntityError(f'Bad Request: can\'t parse entities: Unmatched end tag at byte offset {i}, expected "</{stack[-1] if stack else name}>"')
                stack.pop()
            else:
                stack.append(name)
            i = match.end()
        elif char == "&":
            match = _HTML_ENTITIES.match(text, i)
            if match is None:
                raise EntityError(f"Bad Request: can't parse entities: Unsupported entity at byte offset {i}")
            out.append(html.unescape(match.group(0)))
            i = match.end()
        elif char == ">":
            raise EntityError(f"Bad Request: can't parse entities: Unexpected '>' at byte offset {i}")
        else:
            out.append(char)
            i += 1
    if stack:
        raise EntityError(f'Bad Request: can\'t parse entities: Can\'t find end tag corresponding to start tag "{stack[-1]}"')
    return "".join(out)


def _markdown_v2(text: str) -> str:
    out: list[str] = []
    open_marks: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            out.append(text[i + 1])
            i += 2
            continue
        if char in _V2_PAIRED:
            if open_marks and open_marks[-1] == char:
                open_marks.pop()
            else:
                open_marks.append(char)
        elif char in _V2_RESERVED:
            raise EntityError(
                f"Bad Request: can't parse entities: Character '{char}' is reserved and must be escaped with the preceding '\\'"
            )
        else:
            out.append(char)
        i += 1
    if open_marks:
        raise EntityError(f"Bad Request: can't parse entities: Can't find end of {open_marks[-1]} entity")
    return "".join(out)


def _markdown(text: str) -> str:
    out: list[str] = []
    open_mark: tuple[str, int] | None = None
    for offset, char in enumerate(text):
        if char in "*_`[":
            closing = "]" if char == "[" else char
            if open_mark is None:
                open_mark = (closing, offset)
                continue
        if open_mark is not None and char == open_mark[0]:
            open_mark = None
            continue
        out.append(char)
    if open_mark is not None:
        raise EntityError(
            f"Bad Request: can't parse entities: Can't find end of the entity starting at byte offset {open_mark[1]}"
        )
    return "".join(out)


def check_text(text: str | None, parse_mode: str | None, *, limit: int = MAX_TEXT, caption: bool = False) -> str:
    """The visible text of a message or caption; raises :class:`EntityError` as the API refuses it."""
    if text is None or text == "":
        if caption:
            return ""
        raise EntityError("Bad Request: message text is empty")
    visible = plain_text(text, parse_mode)
    if not caption and not visible.strip():
        raise EntityError("Bad Request: message text is empty")
    if utf16_len(visible) > limit:
        raise EntityError("Bad Request: message caption is too long" if caption else "Bad Request: message is too long")
    return visible
