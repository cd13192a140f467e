"""``EventsSender``: what Slack posts to an app's Request URL, signed as Slack signs it.

Events API payloads (``event_callback`` with ``message`` and ``app_mention`` events, in DMs,
channels and threads, with files), ``url_verification``, slash commands (a form post) and
interactive payloads (``block_actions`` button presses, ``payload=<json>`` form). Each request
carries ``X-Slack-Request-Timestamp`` and ``X-Slack-Signature`` (``v0=`` + HMAC-SHA256 of
``v0:{timestamp}:{body}`` with the signing secret); ``forge``, ``unsigned`` and ``age`` break
them on purpose and ``retry`` adds ``X-Slack-Retry-Num`` as Slack's redeliveries do.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import secrets
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx

from vigil.testing.slack_api.state import SlackState


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """Slack's request signature of ``body`` sent at ``timestamp``."""
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


@dataclass(frozen=True, slots=True)
class Sent:
    """One request sent: the response, and the ids it carried."""

    response: httpx.Response
    event_id: str = ""
    ts: str = ""
    body: bytes = b""
    content_type: str = ""


class EventsSender:
    """Posts signed Slack requests to ``url`` (the app's ``/slack/events``)."""

    def __init__(self, url: str, signing_secret: str, state: SlackState, *, app_id: str = "A0VIGIL") -> None:
        self.url = url
        self.signing_secret = signing_secret
        self.state = state
        self.app_id = app_id
        self._ids = itertools.count(1)

    async def post(self, body: bytes, content_type: str, *, forge: bool = False, unsigned: bool = False,
                   age: float = 0.0, retry: int | None = None, timeout: float = 10.0) -> httpx.Response:
        """POST ``body`` signed (or not), sent ``age`` seconds ago by its timestamp."""
        timestamp = str(int(time.time() - age))
        headers = {"Content-Type": content_type}
        if not unsigned:
            secret = secrets.token_hex(16) if forge else self.signing_secret
            headers["X-Slack-Request-Timestamp"] = timestamp
            headers["X-Slack-Signature"] = sign(secret, timestamp, body)
        if retry is not None:
            headers["X-Slack-Retry-Num"] = str(retry)
            headers["X-Slack-Retry-Reason"] = "http_timeout"
        async with httpx.AsyncClient(timeout=timeout) as client:
            return await client.post(self.url, content=body, headers=headers)

    async def resend(self, sent: Sent, retry: int = 1) -> httpx.Response:
        """Slack's redelivery of ``sent``: the same body, freshly signed, with X-Slack-Retry-Num."""
        return await self.post(sent.body, sent.content_type, retry=retry)

    # -- Events API ---------------------------------------------------------------------------
    def callback(self, event: dict[str, Any], *, event_id: str | None = None) -> dict[str, Any]:
        """An ``event_callback`` envelope around ``event``."""
        return {
            "token": "verification-token-unused", "team_id": self.state.team_id, "api_app_id": self.app_id,
            "event": event, "type": "event_callback", "event_id": event_id or f"Ev{next(self._ids):010d}",
            "event_time": int(time.time()), "authorizations": [{
                "team_id": self.state.team_id, "user_id": self.state.bot_user, "is_bot": True,
            }],
            "event_context": "4-" + secrets.token_hex(8),
        }

    async def event(self, event: dict[str, Any], *, event_id: str | None = None, **options: Any) -> Sent:
        payload = self.callback(event, event_id=event_id)
        body = json.dumps(payload).encode()
        response = await self.post(body, "application/json", **options)
        return Sent(response, payload["event_id"], event.get("ts", ""), body, "application/json")

    def message_event(self, channel: str, user: str, text: str, *, thread_ts: str | None = None,
                      channel_type: str | None = None, files: list[dict[str, Any]] | None = None,
                      ts: str | None = None, kind: str = "message") -> dict[str, Any]:
        """A ``message`` (or ``app_mention``) event; the channel is made known to the fake."""
        channel_type = channel_type or ("im" if channel.startswith("D") else "channel")
        self.state.channel(channel, "im" if channel_type == "im" else "channel")
        event: dict[str, Any] = {
            "type": kind, "user": user, "text": text, "ts": ts or self.state.new_ts(), "channel": channel,
            "team": self.state.team_id, "event_ts": "", "client_msg_id": secrets.token_hex(8),
        }
        event["event_ts"] = event["ts"]
        if kind == "message":
            event["channel_type"] = channel_type
        if thread_ts:
            event["thread_ts"] = thread_ts
        if files:
            event["files"] = files
            event["subtype"] = "file_share"
            event["upload"] = False
        return event

    async def message(self, channel: str, user: str, text: str, *, event_id: str | None = None,
                      forge: bool = False, unsigned: bool = False, age: float = 0.0, **fields: Any) -> Sent:
        """A user's message in ``channel`` (``D…``: a DM with the app)."""
        return await self.event(self.message_event(channel, user, text, **fields), event_id=event_id,
                                forge=forge, unsigned=unsigned, age=age)

    async def mention(self, channel: str, user: str, text: str, *, event_id: str | None = None, **fields: Any) -> Sent:
        """An ``app_mention``: ``text`` with the bot's ``<@U…>`` in front."""
        event = self.message_event(channel, user, f"<@{self.state.bot_user}> {text}", kind="app_mention", **fields)
        return await self.event(event, event_id=event_id)

    async def url_verification(self, challenge: str, **options: Any) -> httpx.Response:
        body = json.dumps({"token": "unused", "challenge": challenge, "type": "url_verification"}).encode()
        return await self.post(body, "application/json", **options)

    # -- slash commands and interactivity --------------------------------------------------------
    async def command(self, text: str, *, user: str, channel: str, command: str = "/vigil",
                      member: bool = True, **options: Any) -> Sent:
        """The slash command ``command text`` typed by ``user`` in ``channel`` (``member``:
        the app is in that channel; a command works in any channel, its response_url too)."""
        if member:
            self.state.channel(channel, "im" if channel.startswith("D") else "channel")
        form = {
            "token": "unused", "team_id": self.state.team_id, "team_domain": "vigil-test",
            "channel_id": channel, "channel_name": "directmessage" if channel.startswith("D") else "general",
            "user_id": user, "user_name": user.lower(), "command": command, "text": text,
            "api_app_id": self.app_id, "is_enterprise_install": "false",
            "response_url": f"{self.state.base_url or 'http://127.0.0.1:9'}/commands/{secrets.token_hex(6)}",
            "trigger_id": f"{next(self._ids)}.{secrets.token_hex(6)}",
        }
        body = urlencode(form).encode()
        kind = "application/x-www-form-urlencoded"
        return Sent(await self.post(body, kind, **options), form["trigger_id"], "", body, kind)

    async def press(self, action_id: str, value: str, *, user: str, channel: str, message_ts: str,
                    thread_ts: str | None = None, **options: Any) -> Sent:
        """``user`` presses the button ``action_id`` (carrying ``value``) of a bot message."""
        payload = {
            "type": "block_actions", "user": {"id": user, "username": user.lower(), "team_id": self.state.team_id},
            "api_app_id": self.app_id, "token": "unused", "team": {"id": self.state.team_id},
            "container": {"type": "message", "message_ts": message_ts, "channel_id": channel, "is_ephemeral": False},
            "trigger_id": f"{next(self._ids)}.{secrets.token_hex(6)}", "channel": {"id": channel},
            "message": {"type": "message", "ts": message_ts, **({"thread_ts": thread_ts} if thread_ts else {})},
            "response_url": f"http://127.0.0.1:9/actions/{secrets.token_hex(6)}",
            "actions": [{"action_id": action_id, "block_id": "vigil_approval", "value": value,
                         "type": "button", "action_ts": str(time.time())}],
        }
        body = urlencode({"payload": json.dumps(payload)}).encode()
        kind = "application/x-www-form-urlencoded"
        return Sent(await self.post(body, kind, **options), payload["trigger_id"], message_ts, body, kind)
