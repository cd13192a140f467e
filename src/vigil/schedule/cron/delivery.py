"""Where a cron job's answer goes: delivery targets and the ``Delivery`` interface.

Targets: ``local`` (the answer is saved under the profile's ``cron/output/<job>/``), and the
gateway platforms ``slack:<channel>[:<thread>]``, ``telegram:<chat>[:<topic>]`` and ``web``.
A process without the gateway serves ``local`` only and reports platform targets as needing
the gateway; the gateway registers a :class:`Delivery` for each platform with
:meth:`DeliveryRouter.register` (:mod:`vigil.gateway.cron_delivery`), which queues the answer
in its durable outbox: the run records ``queued``, later ``delivered`` or ``failed``.

Every delivered answer is also archived in ``cron/output/<job>/`` (for ``local`` that file is
the delivery), so ``vigil cron runs`` can show it whatever the target. An answer starting with
``[SILENT]`` is neither delivered nor archived; the run record keeps it.
"""

from __future__ import annotations

import asyncio
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from vigil.schedule.cron.errors import InvalidJob

if TYPE_CHECKING:
    from vigil.config import Settings

SILENT_MARKER = "[SILENT]"
LOCAL = "local"
PLATFORMS = ("slack", "telegram", "web")

_SLACK_CHANNEL = re.compile(r"#?[A-Za-z0-9][A-Za-z0-9_.-]{0,79}")
_SLACK_THREAD = re.compile(r"\d{1,12}\.\d{1,9}")
_TELEGRAM_CHAT = re.compile(r"-?\d{1,20}|@[A-Za-z][A-Za-z0-9_]{4,31}")
_TELEGRAM_TOPIC = re.compile(r"[1-9]\d{0,9}")
_TARGET_HELP = (
    "use local, slack:<channel>[:<thread>], telegram:<chat id or @name>[:<topic id>] or web"
)


@dataclass(frozen=True, slots=True)
class Target:
    """A parsed delivery target: ``platform`` is ``local``, ``slack``, ``telegram`` or ``web``."""

    platform: str
    chat: str | None = None
    thread: str | None = None

    def __str__(self) -> str:
        return ":".join(part for part in (self.platform, self.chat, self.thread) if part)


def parse_target(text: str) -> Target:
    """Check a target's shape; raises :class:`InvalidJob` naming the accepted forms."""
    raw = text.strip()
    platform, _, rest = raw.partition(":")
    platform = platform.lower()
    if platform == LOCAL and not rest:
        return Target(LOCAL)
    if platform == "web" and not rest:
        return Target("web")
    if platform == "slack":
        channel, _, thread = rest.partition(":")
        if not _SLACK_CHANNEL.fullmatch(channel):
            raise InvalidJob(f"invalid delivery target '{raw}': a Slack channel id or name is needed ({_TARGET_HELP})")
        if thread and not _SLACK_THREAD.fullmatch(thread):
            raise InvalidJob(
                f"invalid delivery target '{raw}': a Slack thread is a message timestamp such as 1712345678.123456"
            )
        return Target("slack", channel, thread or None)
    if platform == "telegram":
        chat, _, topic = rest.partition(":")
        if not _TELEGRAM_CHAT.fullmatch(chat):
            raise InvalidJob(f"invalid delivery target '{raw}': a Telegram chat id or @name is needed ({_TARGET_HELP})")
        if topic and not _TELEGRAM_TOPIC.fullmatch(topic):
            raise InvalidJob(
                f"invalid delivery target '{raw}': a Telegram forum topic is its numeric id (message_thread_id) such as 42"
            )
        return Target("telegram", chat, topic or None)
    raise InvalidJob(f"invalid delivery target '{raw}': {_TARGET_HELP}")


def configured(platform: str, settings: "Settings") -> bool:
    """Whether the profile's config turns ``platform`` on (``local`` always is; ``web`` unless
    ``gateway.web.enabled`` is false; Slack and Telegram when their section is enabled)."""
    if platform == LOCAL:
        return True
    if platform == "web":
        return bool(settings.gateway.web.enabled)
    section = getattr(settings, platform, None)
    return bool(getattr(section, "enabled", False))


def unconfigured_warning(target: Target, job: str, settings: "Settings") -> str | None:
    """What ``cron add/edit --deliver`` should warn about: a platform target whose adapter the
    profile's config does not turn on. ``None`` when it is on (the gateway delivers while it
    runs) and for ``local``."""
    if configured(target.platform, settings):
        return None
    how = (
        "gateway.web.enabled is false" if target.platform == "web"
        else f"{target.platform}.enabled is not true in config.yaml"
    )
    return (
        f"warning: {target.platform} is not configured ({how}), so runs of {job} cannot be delivered "
        f"to {target}; each run's output is kept locally in cron/output/{job}/ until it is "
        f"(`vigil cron runs {job}` shows them as needs-gateway)"
    )


QUEUED = "queued"
"""Handed to the gateway's outbox; the run record says ``delivered`` or ``failed`` later."""
UNDELIVERED = ("needs-gateway", "failed")
"""Delivery statuses that mean the answer did not reach its target (it is still archived)."""


def is_silent(answer: str) -> bool:
    """Whether the agent chose not to deliver anything (the answer starts with ``[SILENT]``)."""
    return answer.lstrip().startswith(SILENT_MARKER)


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One answer to deliver. ``stamp`` names the run (``20260329T010000Z``)."""

    job: str
    target: Target
    answer: str
    stamp: str
    title: str
    session_id: str


@dataclass(frozen=True, slots=True)
class DeliveryResult:
    """``status``: ``delivered``, ``saved`` (local), ``silent``, ``queued`` (in the gateway's
    outbox), ``needs-gateway`` or ``failed``. ``extra``: what the delivery adds to the run
    record's ``delivery`` (the outbox entry id, ...)."""

    status: str
    detail: str = ""
    path: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {**self.extra, "status": self.status, "detail": self.detail, "path": self.path}


class Delivery(Protocol):
    """Sends answers to one platform. Raising is allowed: the router records the failure."""

    async def deliver(self, message: Outgoing) -> DeliveryResult:
        """Deliver ``message`` and describe what happened."""
        ...


class LocalDelivery:
    """Writes ``<output_dir>/<job>/<stamp>.md``, private to the user."""

    def __init__(self, output_dir: Path) -> None:
        self.output_dir = output_dir

    async def deliver(self, message: Outgoing) -> DeliveryResult:
        path = await asyncio.to_thread(self._write, message)
        return DeliveryResult("saved", f"saved to {path}", str(path))

    def _write(self, message: Outgoing) -> Path:
        folder = self.output_dir / message.job
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{message.stamp}.md"
        text = f"# {message.title}\n\nsession {message.session_id}\n\n{message.answer.rstrip()}\n"
        # Answers may hold anything the agent saw, so they are as private as the sessions.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        return path


class DeliveryRouter:
    """Picks the :class:`Delivery` for a target; platforms without one need the gateway."""

    def __init__(self, output_dir: Path) -> None:
        self.local = LocalDelivery(output_dir)
        self._platforms: dict[str, Delivery] = {}

    def register(self, platform: str, delivery: Delivery) -> None:
        """Serve ``platform`` (``slack``, ``telegram``, ``web``) with ``delivery``."""
        if platform not in PLATFORMS:
            raise ValueError(f"unknown platform {platform!r}")
        self._platforms[platform] = delivery

    async def deliver(self, message: Outgoing) -> DeliveryResult:
        """Archive locally, then deliver to the target; never raises for a delivery failure."""
        if is_silent(message.answer):
            return DeliveryResult("silent", "the answer started with [SILENT]; not delivered")
        saved = await self.local.deliver(message)
        if message.target.platform == LOCAL:
            return saved
        delivery = self._platforms.get(message.target.platform)
        if delivery is None:
            return DeliveryResult(
                "needs-gateway",
                f"{message.target} needs the gateway's {message.target.platform} adapter, which is "
                f"not available; the answer was saved to {saved.path}",
                saved.path,
            )
        try:
            result = await delivery.deliver(message)
        except Exception as exc:  # a platform outage must not lose the run's record
            reason = " ".join(str(exc).split()) or type(exc).__name__
            return DeliveryResult("failed", f"delivery to {message.target} failed: {reason}", saved.path)
        return DeliveryResult(result.status, result.detail, result.path or saved.path, result.extra)
