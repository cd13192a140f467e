"""What comes in from Slack — Events API callbacks, slash commands, button presses — however
it arrives (HTTP at ``/slack/events`` or Socket Mode), handed to the gateway.

A message for the agent (:mod:`.inbound` decides which) is stored by
:meth:`GatewayPort.receive` before these return, with the event id as its external id, so a
redelivery is answered once; files shared with it are saved first (:mod:`.files`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from vigil.gateway.adapters.base import DeliveryError, Inbound
from vigil.gateway.adapters.saved_files import conversation_directory
from vigil.gateway.adapters.slack import inbound as routing
from vigil.gateway.adapters.slack.approvals import pressed
from vigil.store.gateway.gateway_tables import RouteKey

if TYPE_CHECKING:
    from vigil.gateway.adapters.slack.adapter import SlackAdapter

log = logging.getLogger(__name__)

RESPONSE_URLS = 1_000
"""Slash commands whose ``response_url`` is remembered (Slack honours one for 30 minutes)."""


class Refused(Exception):
    """A request answered with HTTP ``status`` and nothing done."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


async def on_event(adapter: "SlackAdapter", envelope: dict[str, Any]) -> None:
    """One Events API callback: stored before this returns when it is a message for the agent."""
    event, event_id = envelope.get("event"), str(envelope.get("event_id") or "")
    gateway = adapter.gateway
    if not isinstance(event, dict) or not event_id or gateway is None:
        return
    found = routing.candidate(event, adapter.bot_user)
    if found is None or event_id in adapter.seen or event_id in adapter.in_flight:
        return  # not for the agent, or handled (or being handled) already
    if found.needs_route and await asyncio.to_thread(gateway.store.gateway.route_get, found.route) is None:
        return
    adapter.in_flight.add(event_id)
    try:
        text = found.text
        if found.files:
            text = await _with_files(adapter, found.route, found.files, text)
        if not text:
            return
        await gateway.receive(Inbound(found.route, event_id, text, sender=found.user,
                                      meta={"slack": {"ts": found.ts, "channel": found.route.chat}}))
    finally:
        adapter.in_flight.discard(event_id)
    adapter.remember(event_id)
    adapter.last_route[(found.route.chat, found.user)] = found.route


async def _with_files(adapter: "SlackAdapter", route: RouteKey, files: list[dict[str, Any]], text: str) -> str:
    from vigil.gateway.adapters.slack.files import attach

    gateway = adapter.gateway
    assert gateway is not None
    directory = await conversation_directory(gateway, route)
    return await attach(files, directory, text, token=adapter.bot_token,
                        max_bytes=gateway.settings.gateway.upload_max_bytes, api_url=adapter.settings.api_url)


async def on_command(adapter: "SlackAdapter", form: dict[str, str]) -> str | None:
    """The app's slash command: vigil's command it carries goes to the conversation the
    person last had in that channel (else their own in the channel). Returns a note to
    show at once, if any."""
    gateway = adapter.gateway
    if gateway is None:
        return "vigil is not running."
    command, user, channel = form.get("command", ""), form.get("user_id", ""), form.get("channel_id", "")
    if command != adapter.settings.command:
        return f"vigil answers {adapter.settings.command}, not {command}."
    if not user or not channel:
        raise Refused(400, "the command has no user or channel")
    route = adapter.last_route.get((channel, user)) or RouteKey(routing.NAME, channel, "", user)
    key = "command:" + (form.get("trigger_id") or f"{channel}:{user}:{time.time()}")
    if form.get("response_url"):  # kept in memory only: it lets anyone holding it post there
        adapter.response_urls[key] = form["response_url"]
        while len(adapter.response_urls) > RESPONSE_URLS:
            adapter.response_urls.pop(next(iter(adapter.response_urls)))
    await gateway.receive(Inbound(route, key, routing.command_text(form.get("text", "")), sender=user,
                                  meta={"slack": {"command": command, "channel": channel}}))
    return None


def on_interaction(adapter: "SlackAdapter", payload: dict[str, Any]) -> None:
    """A button press (acknowledged at once; the notes go out in the background)."""
    user = str((payload.get("user") or {}).get("id") or "")
    channel = str((payload.get("channel") or {}).get("id") or (payload.get("container") or {}).get("channel_id") or "")
    thread = (payload.get("message") or {}).get("thread_ts")
    for approval_id, approved in pressed(payload):
        note = adapter.approvals.press(approval_id, approved, user)
        if note and adapter.api is not None and channel:
            adapter.spawn(_note(adapter, channel, user, note, thread))


async def _note(adapter: "SlackAdapter", channel: str, user: str, text: str, thread: str | None) -> None:
    assert adapter.api is not None
    try:
        await adapter.api.call("chat.postEphemeral", channel=channel, user=user, text=text, thread_ts=thread)
    except DeliveryError as exc:
        log.warning("Slack: cannot show a note: %s", exc)
