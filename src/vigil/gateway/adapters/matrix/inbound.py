"""Which Matrix events are messages for the agent, and which conversation each belongs to.

Routes (``RouteKey("matrix", room, thread, user)``): a direct room (the agent and one person)
is one conversation, threads or not; in a group room the agent answers when it is mentioned,
and every thread is its own conversation, one per person (so only the person who asked can
approve what their agent wants to run). A top-level mention starts a thread on that message;
in a thread where the person already has a conversation, no mention is needed.

Text is the message's ``body`` without the quoted reply fallback and the mention; a leading
``!cmd`` is vigil's ``/cmd`` (Element keeps ``/`` commands for itself). ``m.notice`` messages
are what bots send: never answered, so two bots cannot talk each other into a loop.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from vigil.store.gateway.gateway_tables import RouteKey

NAME = "matrix"
TEXT_TYPES = ("m.text", "m.emote")
FILE_TYPES = ("m.file", "m.image", "m.audio", "m.video")
APPROVE_WORDS = frozenset({"approve", "approved", "yes", "y", "ok"})
DENY_WORDS = frozenset({"deny", "denied", "no", "n"})
_COMMAND = re.compile(r"^!([A-Za-z][A-Za-z0-9_-]{0,63})(?=\s|$)")


@dataclass(frozen=True, slots=True)
class Candidate:
    """An event that is a message for the agent."""

    route: RouteKey
    text: str
    sender: str
    event_id: str
    file: dict[str, Any] | None = None
    """``{"url", "name", "mimetype", "size"}`` of a shared file."""
    needs_route: bool = False
    """Only if ``route`` already leads to a conversation (a thread reply without a mention)."""


def relation(content: dict[str, Any]) -> dict[str, Any]:
    found = content.get("m.relates_to")
    return found if isinstance(found, dict) else {}


def thread_of(content: dict[str, Any]) -> str | None:
    """The root event id of the thread a message is in, if it is in one."""
    rel = relation(content)
    root = rel.get("event_id")
    return root if rel.get("rel_type") == "m.thread" and isinstance(root, str) and root else None


def replied_to(content: dict[str, Any]) -> str | None:
    """The event a message answers (a reply, in a thread or not)."""
    target = relation(content).get("m.in_reply_to")
    event_id = target.get("event_id") if isinstance(target, dict) else None
    return event_id if isinstance(event_id, str) and event_id else None


def mentioned(content: dict[str, Any], bot: str, names: tuple[str, ...]) -> bool:
    """Whether the message names the agent: in ``m.mentions``, as its id, or as its display
    name at the start (how clients without mention pills write it)."""
    mentions = content.get("m.mentions")
    if isinstance(mentions, dict) and bot in (mentions.get("user_ids") or []):
        return True
    body = str(content.get("body") or "")
    formatted = str(content.get("formatted_body") or "")
    if bot in body or bot in formatted:
        return True
    start = strip_fallback(body).lstrip().lower()
    return any(name and start.startswith(name.lower()) for name in names)


def strip_fallback(body: str) -> str:
    """``body`` without the ``> <@someone> quoted`` lines a reply begins with."""
    lines = body.split("\n")
    if not lines or not lines[0].startswith("> "):
        return body
    index = 0
    while index < len(lines) and lines[index].startswith(">"):
        index += 1
    return "\n".join(lines[index:]).lstrip("\n")


def strip_mention(text: str, bot: str, names: tuple[str, ...]) -> str:
    """``text`` without the agent's id or a leading ``name:`` addressing it."""
    text = text.replace(bot, "").strip()
    for name in names:
        if name and text.lower().startswith(name.lower()):
            rest = text[len(name):]
            if not rest or rest[0] in ":, \n":
                return rest.lstrip(":, \n")
    return text


def command_text(text: str) -> str:
    """``!heartbeat every 10m`` → ``/heartbeat every 10m``; anything else as it is."""
    match = _COMMAND.match(text)
    return "/" + text[1:] if match else text


def file_of(content: dict[str, Any]) -> dict[str, Any] | None:
    """The shared file of an unencrypted ``m.file``-like message."""
    if content.get("msgtype") not in FILE_TYPES or not isinstance(content.get("url"), str):
        return None
    info = content.get("info") if isinstance(content.get("info"), dict) else {}
    name = content.get("filename") or content.get("body") or "file"
    return {"url": content["url"], "name": str(name), "mimetype": str(info.get("mimetype") or ""),
            "size": info.get("size") if isinstance(info.get("size"), int) else None}


def candidate(source: dict[str, Any], room: str, *, bot: str, names: tuple[str, ...], direct: bool) -> Candidate | None:
    """The message ``source`` (an event as the client API shows it) carries for the agent,
    or ``None``: not a message, the agent's own, an edit, a notice, or not addressed to it."""
    if source.get("type") != "m.room.message":
        return None
    sender, event_id, content = source.get("sender"), source.get("event_id"), source.get("content")
    if not isinstance(sender, str) or not sender or sender == bot or not isinstance(event_id, str) or not event_id:
        return None
    if not isinstance(content, dict) or relation(content).get("rel_type") == "m.replace":
        return None
    msgtype = content.get("msgtype")
    shared = file_of(content)
    if msgtype not in TEXT_TYPES and shared is None:
        return None
    body = content.get("body") if isinstance(content.get("body"), str) else ""
    if shared is not None:  # a caption is a body beside the file's own name (Matrix 1.10)
        body = body if content.get("filename") and body != content.get("filename") else ""
    text = command_text(strip_mention(strip_fallback(body), bot, names))
    if direct:
        return Candidate(RouteKey(NAME, room, "", sender), text, sender, event_id, shared)
    root = thread_of(content)
    if mentioned(content, bot, names):
        return Candidate(RouteKey(NAME, room, root or event_id, sender), text, sender, event_id, shared)
    if root is None:
        return None
    return Candidate(RouteKey(NAME, room, root, sender), text, sender, event_id, shared, needs_route=True)


def reaction(source: dict[str, Any]) -> tuple[str, str, str] | None:
    """(reacting user, the event reacted to, the key without variation selectors) of an
    ``m.reaction``, or ``None``."""
    if source.get("type") != "m.reaction" or not isinstance(source.get("content"), dict):
        return None
    rel = relation(source["content"])
    target, key, sender = rel.get("event_id"), rel.get("key"), source.get("sender")
    if rel.get("rel_type") != "m.annotation" or not all(isinstance(x, str) and x for x in (target, key, sender)):
        return None
    return sender, target, key.replace("\ufe0f", "")


def decision(text: str) -> bool | None:
    """``True``/``False`` when a reply says approve/deny (a reaction-less client's way), else ``None``."""
    word = text.strip().strip(".!").lower()
    return True if word in APPROVE_WORDS else False if word in DENY_WORDS else None
