"""A conversation as a front end drives it: the current session, turns and slash commands.

The REPL uses it today; the web chat and gateway platforms use the same class, so a command
behaves identically everywhere.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from vigil.agent.compression import CompressionResult
from vigil.agent.events import EventCallback
from vigil.agent.turn import Agent, BeforeExecution, TurnResult
from vigil.config.settings import Settings
from vigil.profiles import Profile
from vigil.runtime.slash import CommandRegistry, CommandReply
from vigil.prompt.skills import discover_skills
from vigil.store import SessionStore
from vigil.tools.registry import default_tool_names

if TYPE_CHECKING:
    from vigil.schedule.heartbeat.record import Heartbeat
    from vigil.schedule.heartbeat.repo import HeartbeatRepo


class ConversationController:
    """Owns which session a front end is talking in, and routes its input."""

    def __init__(
        self,
        agent: Agent,
        *,
        session_id: str | None = None,
        registry: CommandRegistry | None = None,
    ) -> None:
        self.agent = agent
        self.store: SessionStore = agent.store
        self._registry = registry
        self._heartbeats: HeartbeatRepo | None = None
        self.cleared_heartbeat: Heartbeat | None = None
        """The heartbeat the last conversation boundary (/new, /resume other, /suspend) cleared."""
        self.stopped_turn = False
        """Whether the urgent command now running (``/stop``, ``/suspend``) interrupted a turn
        when it arrived (set by :class:`~vigil.runtime.conversation.Conversation`)."""
        self.before_turn: Callable[[], Awaitable[None]] | None = None
        """Awaited before each turn reads the history (``/background`` stores its notes then)."""
        self._session_id = session_id
        install_heartbeat_mover(agent, lambda: self.heartbeats)

    @property
    def heartbeats(self) -> HeartbeatRepo:
        """This conversation's heartbeat records, opened on first use (a one-shot turn that
        is not compressed never reads them)."""
        if self._heartbeats is None:
            from vigil.schedule.heartbeat.repo import HeartbeatRepo

            self._heartbeats = HeartbeatRepo(self.agent.store, self.agent.clock)
        return self._heartbeats

    @property
    def registry(self) -> CommandRegistry:
        """The slash commands, built on first use: a one-shot turn never needs them."""
        if self._registry is None:
            from vigil.runtime.commands import build_registry

            self._registry = build_registry()
        return self._registry

    # -- ConversationControl ----------------------------------------------------------------
    @property
    def session_id(self) -> str | None:
        return self._session_id

    @property
    def profile(self) -> Profile:
        return self.agent.profile

    @property
    def settings(self) -> Settings:
        return self.agent.settings

    async def new_conversation(self) -> str:
        old = self._session_id
        self.cleared_heartbeat = None
        if old is not None:
            await self._clear_heartbeat(old)
            await asyncio.to_thread(self.store.end_session, old, "new")
            self.agent.forget(old)
        session = await self.agent.new_session()
        self._session_id = session.id
        return session.id

    async def resume(self, ref: str) -> str:
        session_id = await asyncio.to_thread(self.store.resolve_session, ref)
        session_id = await asyncio.to_thread(self.store.newest_continuation, session_id)
        record = await asyncio.to_thread(self.store.get_session, session_id)
        old = self._session_id
        self.cleared_heartbeat = None
        if old is not None and old != session_id:
            # Switching away ends the old conversation's heartbeat for good.
            await self._clear_heartbeat(old)
        if record.is_ended:
            await asyncio.to_thread(self.store.reopen_session, session_id)
        self._session_id = session_id
        return session_id

    async def suspend_conversation(self) -> str | None:
        """Suspend the current conversation (``/suspend``): clear its heartbeat and end it with
        reason ``suspend``; the next message starts a new conversation. Returns the id suspended."""
        old = self._session_id
        self.cleared_heartbeat = None
        if old is None:
            return None
        await self._clear_heartbeat(old)
        await asyncio.to_thread(self.store.end_session, old, "suspend")
        self.agent.forget(old)
        self._session_id = None
        return old

    async def _clear_heartbeat(self, session_id: str) -> None:
        self.cleared_heartbeat = await asyncio.to_thread(self.heartbeats.clear, session_id)

    async def compress(self) -> CompressionResult:
        if self._session_id is None:
            raise ValueError("no conversation to compress")
        result = await self.agent.compress(self._session_id)
        if result.ok and result.child_id:
            self._session_id = result.child_id
        return result

    def model_name(self) -> str:
        return self.agent.client.model

    def set_model(self, name: str) -> None:
        self.agent.client.model = name
        if self._session_id is not None:
            self.store.update_session(self._session_id, model=name)

    def tool_names(self) -> list[str]:
        if self._session_id is None:
            return default_tool_names(self.agent.settings)
        return list(self.store.get_session(self._session_id).tool_names)

    def skills(self) -> list[tuple[str, str]]:
        return [(s.name, s.description) for s in discover_skills(self.agent.profile.skills_dir)]

    # -- input ------------------------------------------------------------------------------
    def is_command(self, text: str) -> bool:
        return (self._registry or CommandRegistry).is_command(text)

    async def command(self, text: str) -> CommandReply:
        """Run a slash command typed in this conversation."""
        return await self.registry.dispatch(self, text)

    async def ensure_session(self) -> str:
        """The current session, created on first use."""
        if self._session_id is None:
            self._session_id = (await self.agent.new_session()).id
        return self._session_id

    async def turn(
        self,
        text: str,
        *,
        on_event: EventCallback | None = None,
        auto_title: bool = True,
        before_execution: BeforeExecution | None = None,
        unattended: bool = False,
        user_meta: dict[str, Any] | None = None,
        resume: bool = False,
        steering: Callable[[], list[tuple[str, dict[str, Any]]]] | None = None,
    ) -> TurnResult:
        """Send a user message and run the turn (``auto_title``: an untitled session is named
        after this message; off for injected messages such as heartbeats; ``resume``: see
        :meth:`vigil.agent.turn.Agent.run_turn`).
        ``before_execution`` may decline the turn once it is prepared (``TurnDeclined``)."""
        session_id = await self.ensure_session()
        if self.before_turn is not None:
            await self.before_turn()
        result = await self.agent.run_turn(
            session_id,
            text,
            on_event=on_event,
            auto_title=auto_title,
            before_execution=before_execution,
            unattended=unattended,
            user_meta=user_meta,
            resume=resume,
            steering=steering,
        )
        # compression may have moved the conversation to a continuation session
        self._session_id = result.session_id
        return result


class _HeartbeatMover:
    """Compression hook: the heartbeat follows the conversation into its continuation."""

    def __init__(self, repo: Callable[[], HeartbeatRepo]) -> None:
        self.repo = repo

    async def __call__(self, parent_id: str, child_id: str) -> None:
        await asyncio.to_thread(self.repo().move, parent_id, child_id)


def install_heartbeat_mover(agent: Agent, repo: Callable[[], HeartbeatRepo]) -> None:
    """Register the heartbeat mover on ``agent.compression_hooks`` once per agent."""
    hooks = getattr(agent, "compression_hooks", None)
    if hooks is None:
        return
    if not any(isinstance(hook, _HeartbeatMover) for hook in hooks):
        hooks.append(_HeartbeatMover(repo))
