"""One outbox entry onto Slack.

Every kind goes to the route's channel and thread. ``reply`` (and a turn's error ``notice``)
replaces the turn's working placeholder when there is one; ``command`` and ``pairing``
answers are ephemeral in channels (only the person who asked sees them) and plain messages
in DMs; ``file`` uploads ``meta.path`` with the text as its comment. Text is converted to
mrkdwn and split; the parts already posted of an entry that failed half-way are not posted
again when it is retried.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from vigil.gateway.adapters.base import DeliveryError
from vigil.gateway.adapters.slack.inbound import is_dm
from vigil.gateway.adapters.slack.mrkdwn import to_mrkdwn
from vigil.gateway.adapters.slack.split import split_message
from vigil.store.gateway_tables import OutboxEntry

if TYPE_CHECKING:
    from vigil.gateway.adapters.slack.adapter import SlackAdapter
    from vigil.gateway.adapters.slack.web import SlackApi

EPHEMERAL_KINDS = ("command", "pairing")
TURN_KINDS = ("reply", "notice")


async def deliver(adapter: "SlackAdapter", api: "SlackApi", entry: OutboxEntry) -> None:
    """Send ``entry``; raises ``DeliveryError`` (retryable or not) when Slack refuses."""
    route = entry.route
    if not route.chat:
        raise DeliveryError("no Slack channel to send to", retryable=False)
    thread = route.thread or None
    if entry.kind == "file":
        await _upload(api, entry, thread)
        return
    parts = split_message(to_mrkdwn(entry.text or "")) or ["_(no text)_"]
    done, placeholder = adapter.sending.get(entry.id, (0, None))
    if entry.kind in EPHEMERAL_KINDS and route.user and not is_dm(route.chat):
        for index, part in enumerate(parts[done:], done):
            await api.call("chat.postEphemeral", channel=route.chat, user=route.user, text=part, thread_ts=thread)
            adapter.sending[entry.id] = (index + 1, None)
        adapter.sending.pop(entry.id, None)
        return
    if entry.kind in TURN_KINDS and entry.inbox_id is not None and entry.id not in adapter.sending:
        placeholder = await adapter.drafts.take(route)
        adapter.sending[entry.id] = (0, placeholder)
    for index, part in enumerate(parts[done:], done):
        if index == 0 and placeholder is not None:
            try:
                await api.call("chat.update", channel=route.chat, ts=placeholder, text=part)
            except DeliveryError as exc:
                if exc.retryable:
                    raise
                await api.call("chat.postMessage", channel=route.chat, thread_ts=thread, text=part)
        else:
            await api.call("chat.postMessage", channel=route.chat, thread_ts=thread, text=part)
        adapter.sending[entry.id] = (index + 1, placeholder)
    adapter.sending.pop(entry.id, None)


async def _upload(api: "SlackApi", entry: OutboxEntry, thread: str | None) -> None:
    raw = entry.meta.get("path")
    if not isinstance(raw, str) or not raw:
        raise DeliveryError("a file entry without a path", retryable=False)
    path = Path(raw)
    if not path.is_absolute() or not path.is_file():
        raise DeliveryError(f"the file {raw} is not there any more", retryable=False)
    name = str(entry.meta.get("name") or path.name)
    await api.upload(path, name=name, channel=entry.route.chat, thread_ts=thread,
                     comment=to_mrkdwn(entry.text) if entry.text else None)
