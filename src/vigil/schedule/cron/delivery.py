"""Where a cron job's answer goes: delivery targets and the ``Delivery`` interface.

Targets: ``local`` (the answer is saved under the profile's ``cron/output/<job>/``), and each
gateway platform in the registry that declares a target form (:mod:`vigil.platforms`), such as
``NAME:<chat>[:<thread>]`` or ``NAME`` alone for the run's own conversation.
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

from vigil import platforms as registry
from vigil.schedule.cron.errors import InvalidJob

if TYPE_CHECKING:
    from vigil.config.settings import Settings

SILENT_MARKER = "[SILENT]"
LOCAL = "local"


def target_help() -> str:
    """``use local, NAME:<chat>[:<thread>], ... or web``: every form, from the registry."""
    forms = [LOCAL] + [platform.target.usage for platform in registry.delivery_targets()]  # type: ignore[union-attr]
    return "use " + ", ".join(forms[:-1]) + " or " + forms[-1]


@dataclass(frozen=True, slots=True)
class Target:
    """A parsed delivery target: ``platform`` is ``local`` or a registered platform's name."""

    platform: str
    chat: str | None = None
    thread: str | None = None

    def __str__(self) -> str:
        return ":".join(part for part in (self.platform, self.chat, self.thread) if part)


def parse_target(text: str) -> Target:
    """Check a target's shape against the platform's declared form; raises
    :class:`InvalidJob` naming the accepted forms."""
    raw = text.strip()
    name, _, rest = raw.partition(":")
    name = name.lower()
    if name == LOCAL and not rest:
        return Target(LOCAL)
    platform = registry.get(name)
    form = platform.target if platform is not None else None
    if form is None:
        raise InvalidJob(f"invalid delivery target '{raw}': {target_help()}")
    if form.chat is None:
        if rest:
            raise InvalidJob(f"invalid delivery target '{raw}': {name} takes nothing after it ({target_help()})")
        return Target(name)
    chat, thread = _split(rest, form.chat)
    if not form.chat.fullmatch(chat):
        raise InvalidJob(f"invalid delivery target '{raw}': {form.chat_needed} is needed ({target_help()})")
    if thread and (form.thread is None or not form.thread.fullmatch(thread)):
        shape = form.thread_shape or f"{name} targets have no thread part"
        raise InvalidJob(f"invalid delivery target '{raw}': {shape}")
    return Target(name, chat, thread or None)


def _split(rest: str, chat: "re.Pattern[str]") -> tuple[str, str]:
    """``<chat>[:<thread>]`` apart where the chat itself may hold colons (a room id such as
    ``!abc:example.org``): the longest head the chat form takes, else the first colon."""
    if chat.fullmatch(rest):
        return rest, ""
    cut = rest.rfind(":")
    while cut > 0:
        if chat.fullmatch(rest[:cut]):
            return rest[:cut], rest[cut + 1:]
        cut = rest.rfind(":", 0, cut)
    head, _, tail = rest.partition(":")
    return head, tail


def configured(platform: str, settings: "Settings") -> bool:
    """Whether the profile's config turns ``platform`` on (``local`` always is)."""
    if platform == LOCAL:
        return True
    declared = registry.get(platform)
    return declared is not None and declared.enabled(settings)


def unconfigured_warning(target: Target, job: str, settings: "Settings") -> str | None:
    """What ``cron add/edit --deliver`` should warn about: a platform target whose adapter the
    profile's config does not turn on. ``None`` when it is on (the gateway delivers while it
    runs) and for ``local``."""
    if configured(target.platform, settings):
        return None
    declared = registry.get(target.platform)
    how = declared.how_to_enable if declared is not None else f"{target.platform} is not a known platform"
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
        """Serve ``platform`` (a registered delivery target) with ``delivery``."""
        declared = registry.get(platform)
        if declared is None or declared.target is None:
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
