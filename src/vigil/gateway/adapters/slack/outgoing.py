"""One outbox entry onto Slack.

Every kind goes to the route's channel and thread. ``reply`` (and a turn's error ``notice``)
replaces the turn's working placeholder when there is one (after a restart, the one the store
recorded for it: the answer is never shown twice); ``command`` and ``pairing``
answers are ephemeral in channels (only the person who asked sees them; through the
command's ``response_url`` where the app is not a member) and plain messages in DMs; ``file`` uploads ``meta.path`` with the text as its comment. Text is converted to
mrkdwn and split; the parts already posted of an entry that failed half-way are not posted
again when it is retried.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from vigil.gateway.adapters.base import DeliveryError
from vigil.gateway.adapters.slack.files import trusted_host
from vigil.gateway.adapters.slack.inbound import is_dm
from vigil.gateway.adapters.slack.mrkdwn import split_message, to_mrkdwn
from vigil.store.gateway.gateway_tables import OutboxEntry

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
    done, placeholder, durable = adapter.sending.get(entry.id, (0, None, None))
    if entry.kind in EPHEMERAL_KINDS and route.user and not is_dm(route.chat):
        try:
            for index, part in enumerate(parts[done:], done):
                await api.call("chat.postEphemeral", channel=route.chat, user=route.user, text=part, thread_ts=thread)
                adapter.sending[entry.id] = (index + 1, None, None)
        except DeliveryError as exc:
            done = adapter.sending.get(entry.id, (0, None, None))[0]
            if exc.retryable or not await _respond(adapter, entry, parts[done:]):
                raise
        adapter.sending.pop(entry.id, None)
        return
    if entry.kind in TURN_KINDS and entry.inbox_id is not None and entry.id not in adapter.sending:
        taken = await adapter.streamer.claim(route)
        if taken is not None and taken.message is not None:
            placeholder, durable = str(taken.message), taken.durable
        else:
            found = await adapter.streamer.previews.find(entry)  # posted before a restart
            if found is not None:
                placeholder, durable = str(found.message), found
        adapter.sending[entry.id] = (0, placeholder, durable)
    try:
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
            adapter.sending[entry.id] = (index + 1, placeholder, durable)
    except DeliveryError as exc:
        if not exc.retryable:  # failed for good: nothing more of it will come
            adapter.sending.pop(entry.id, None)
            adapter.streamer.previews.done(durable)
        raise
    adapter.sending.pop(entry.id, None)
    adapter.streamer.previews.done(durable)


async def _respond(adapter: "SlackAdapter", entry: OutboxEntry, parts: list[str]) -> bool:
    """Answer a slash command through its ``response_url`` (the way that works in channels
    the app is not a member of); ``False`` when there is none."""
    gateway = adapter.gateway
    if gateway is None or entry.inbox_id is None:
        return False
    inbound = await asyncio.to_thread(gateway.store.gateway.inbox_get, entry.inbox_id)
    url = adapter.response_urls.get(inbound.external_id) if inbound is not None else None
    if url is None or not trusted_host(url, adapter.settings.api_url):
        return False
    try:
        async with httpx.AsyncClient(timeout=15) as client:
            for part in parts:
                answer = await client.post(url, json={"response_type": "ephemeral", "text": part})
                if answer.status_code != 200:
                    raise DeliveryError(f"Slack response_url: HTTP {answer.status_code}",
                                        retryable=answer.status_code >= 500)
    except httpx.HTTPError as exc:
        raise DeliveryError(f"Slack response_url: {type(exc).__name__}") from None
    return True


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
