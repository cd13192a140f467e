"""A local Discord for vigil's tests and benchmarks (:class:`FakeDiscordServer`): the REST API,
the Gateway WebSocket and the attachment CDN discord.py talks to, with what people do (DMs,
channel messages, ``/vigil …``, button presses) and faults (reconnects, expired sessions, cut
connections, refused calls) driven from the test."""

from vigil.testing.discord_api.server import FakeDiscordServer
from vigil.testing.discord_api.state import DiscordState

__all__ = ["DiscordState", "FakeDiscordServer"]
