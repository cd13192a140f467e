"""Tool calls that a model writes as text, and the filter that keeps them off the screen.

Small models whose chat template has no native tool-call format answer a tool request with
text: a bare JSON object ``{"name": "terminal", "arguments": {...}}`` (or a list of them, or the
same inside a ```json fence), or one or more ``<tool_call>{...}</tool_call>`` blocks after some
prose. :func:`parse_text_tool_calls` turns such an answer into real calls; :class:`TextCallFilter`
sits between a streamed answer and the screen and holds back whatever may turn out to be a call.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Collection

OPEN_TAG = "<tool_call>"
CLOSE_TAG = "</tool_call>"
_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n?(.*?)\n?\s*```$", re.DOTALL)


@dataclass(frozen=True, slots=True)
class TextCall:
    """One call found in text: the tool's name and its arguments as compact JSON."""

    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class ParsedAnswer:
    """``content``: the prose around the calls (``None`` when there is none)."""

    content: str | None
    calls: tuple[TextCall, ...]


def parse_text_tool_calls(text: str, tool_names: Collection[str]) -> ParsedAnswer | None:
    """The tool calls ``text`` consists of, or ``None`` when it is an ordinary answer.

    A bare JSON answer counts only when every call names one of ``tool_names`` (a model may
    well answer with JSON meant for the user); ``<tool_call>`` tags are explicit, so any name
    counts there and an unknown one reaches the agent, which reports it back to the model.
    """
    if OPEN_TAG in text:
        return _tagged(text)
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group(1).strip()
    if not stripped or stripped[0] not in "{[":
        return None
    try:
        value = json.loads(stripped)
    except ValueError:
        return None
    items = value if isinstance(value, list) else [value]
    calls = [_call(item) for item in items]
    if not calls or any(c is None or c.name not in tool_names for c in calls):
        return None
    return ParsedAnswer(content=None, calls=tuple(c for c in calls if c is not None))


def _tagged(text: str) -> ParsedAnswer | None:
    prose: list[str] = []
    calls: list[TextCall] = []
    rest = text
    while OPEN_TAG in rest:
        before, _, after = rest.partition(OPEN_TAG)
        prose.append(before)
        body, closed, rest = after.partition(CLOSE_TAG)
        if not closed:
            rest = ""
        found = _calls_from_text(body)
        if not found:
            return None
        calls.extend(found)
    prose.append(rest)
    content = "".join(prose).strip()
    return ParsedAnswer(content=content or None, calls=tuple(calls))


def _calls_from_text(body: str) -> list[TextCall]:
    """The calls in one tag: an object, or a list of them (SmolLM2's own format)."""
    body = body.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        value = json.loads(body)
    except ValueError:
        return []
    calls = [_call(item) for item in (value if isinstance(value, list) else [value])]
    return [] if not calls or None in calls else [c for c in calls if c is not None]


def _call(item: Any) -> TextCall | None:
    """``{"name": ..., "arguments"|"parameters": {...} or "<json>"}``, optionally wrapped in
    ``{"function": ...}`` or ``{"tool_call": ...}``."""
    if not isinstance(item, dict):
        return None
    for wrapper in ("function", "tool_call"):
        if set(item) == {wrapper} or (wrapper in item and "name" not in item and isinstance(item[wrapper], dict)):
            item = item[wrapper]
            if not isinstance(item, dict):
                return None
    name = item.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        return None
    extra = set(item) - {"name", "arguments", "parameters", "id", "type"}
    if extra:
        return None
    arguments = item.get("arguments", item.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return None
    if not isinstance(arguments, dict):
        return None
    return TextCall(name=name.strip(), arguments=json.dumps(arguments, ensure_ascii=False, separators=(",", ":")))


@dataclass
class TextCallFilter:
    """Passes streamed text through, holding back what may be a tool call written as text.

    ``feed`` returns the text that is safe to show now; ``finish`` decides about the rest:
    either the answer holds calls (nothing more is shown) or the held text is released.
    """

    tool_names: Collection[str]
    _text: list[str] = field(default_factory=list)
    _shown: int = 0
    _holding_call: bool = False

    def feed(self, delta: str) -> str:
        self._text.append(delta)
        if self._holding_call:
            return ""
        whole = "".join(self._text)
        if OPEN_TAG in whole[self._shown :]:
            self._holding_call = True
            return self._release(whole.index(OPEN_TAG, self._shown), whole)
        if self._shown == 0 and _may_open_json(whole):
            return ""
        # Hold back a tail that could be the start of an opening tag.
        keep = _partial_tag_suffix(whole)
        return self._release(len(whole) - keep, whole)

    def finish(self) -> tuple[str, ParsedAnswer | None]:
        """The text still to show, and the calls when the whole answer is tool calls."""
        whole = "".join(self._text)
        parsed = parse_text_tool_calls(whole, self.tool_names)
        if parsed is not None:
            return "", parsed
        rest = whole[self._shown :]
        self._shown = len(whole)
        return rest, None

    def _release(self, upto: int, whole: str) -> str:
        upto = max(upto, self._shown)
        out = whole[self._shown : upto]
        self._shown = upto
        return out


def _may_open_json(text: str) -> bool:
    """Whether an answer beginning like ``text`` may still turn out to be a bare JSON call."""
    head = text.lstrip()
    if not head:
        return True
    if head[0] in "{[":
        return True
    return "```".startswith(head[:3]) and (len(head) < 3 or head.startswith("```"))


def _partial_tag_suffix(text: str) -> int:
    for size in range(min(len(OPEN_TAG) - 1, len(text)), 0, -1):
        if OPEN_TAG.startswith(text[-size:]):
            return size
    return 0
