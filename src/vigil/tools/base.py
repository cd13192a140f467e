"""What every built-in tool is: a name, a description, a JSON schema and an async ``run``.

A tool reports expected failures (a missing file, a declined approval) as a ``ToolResult`` with
``is_error=True`` or by raising ``ToolFailure``; the registry turns any other exception into an
error result too, so a tool never breaks the agent's turn.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, ClassVar

from vigil.config.settings import Settings
from vigil.models.base import ToolSpec
from vigil.profiles import Profile
from vigil.store.base import SessionStore

ApprovalCallback = Callable[[str, str], Awaitable[bool]]
"""Asks the user to allow an action: ``(tool name, human description) -> allowed?``."""


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What the model sees after a tool ran. ``is_error`` marks a failure or a refusal."""

    content: str
    is_error: bool = False


class ToolFailure(Exception):
    """Raised by a tool for an expected failure; the message becomes the error result as is."""


@dataclass(slots=True)
class ToolContext:
    """Everything a tool may use besides its arguments.

    ``approve`` is ``None`` when no one can be asked (a heartbeat, a cron job, a non-interactive
    run): actions that need approval are then refused, never silently allowed.
    """

    profile: Profile
    settings: Settings
    store: SessionStore | None = None
    session_id: str | None = None
    cwd: Path = field(default_factory=Path.cwd)
    approve: ApprovalCallback | None = None

    @property
    def unattended(self) -> bool:
        """No person can approve anything in this run (cron, a heartbeat, ``-q`` without a
        terminal): dangerous actions are refused and commands may run sandboxed."""
        return self.approve is None

    def resolve(self, path: str) -> Path:
        """``path`` with ``~`` expanded and, when relative, taken relative to ``cwd``."""
        candidate = Path(path).expanduser()
        return candidate if candidate.is_absolute() else self.cwd / candidate


class Tool(ABC):
    """A built-in tool. Subclasses set the three class attributes and implement ``run``.

    Tools are stateless: one instance serves every session, and all per-call state comes in
    through ``args`` (already checked against ``parameters`` by the registry) and ``ctx``.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    parameters: ClassVar[dict[str, Any]]
    """A JSON schema of type ``object`` describing the arguments."""

    @abstractmethod
    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Do the work and describe the outcome for the model."""

    def spec(self) -> ToolSpec:
        """The tool as the model sees it."""
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)


async def request_approval(ctx: ToolContext, tool: str, what: str) -> ToolResult | None:
    """Ask the user to allow ``what``; ``None`` means go ahead, otherwise the refusal to return.

    ``what`` describes the action in words the user can judge ("run a command that ...").
    """
    if ctx.approve is None:
        return ToolResult(
            "refused: no one can approve anything in this unattended run (vigil chat -q without "
            f"a terminal, a cron job or a heartbeat), and this needs approval: {what}; nothing was done",
            is_error=True,
        )
    if await ctx.approve(tool, what):
        return None
    return ToolResult(f"the user declined: {what}; nothing was done", is_error=True)


def truncate_middle(text: str, cap: int) -> str:
    """``text`` if it fits in ``cap`` characters, else its head and tail around a marker."""
    if len(text) <= cap:
        return text
    head = cap // 2
    tail = cap - head
    omitted = len(text) - head - tail
    return f"{text[:head]}\n[... {omitted} characters omitted ...]\n{text[len(text) - tail:]}"
