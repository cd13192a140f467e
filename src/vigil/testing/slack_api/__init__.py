"""A local Slack for vigil's tests and benchmarks: the Web API (:class:`FakeSlackServer`,
real HTTP on loopback, with fault injection), the workspace it keeps (:mod:`.state`), its
Socket Mode WebSocket (:mod:`.websocket`), and what users send — signed Events API
callbacks, slash commands and button presses (:class:`EventsSender`)."""

from vigil.testing.slack_api.events import EventsSender, Sent, sign
from vigil.testing.slack_api.server import FakeSlackServer
from vigil.testing.slack_api.state import SlackState

__all__ = ["EventsSender", "FakeSlackServer", "Sent", "SlackState", "sign"]
