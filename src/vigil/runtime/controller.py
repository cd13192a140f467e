"""A conversation as a front end drives it: the current session, turns and slash commands.

The REPL uses it today; the web chat and gateway platforms use the same class, so a command
behaves identically everywhere.
"""

from __future__ import annotations

import asyncio

from vigil.agent.events import EventCallback
from vigil.agent.turn import Agent, TurnResult
from vigil.runtime.commands import build_registry
from vigil.runtime.slash import CommandRegistry, CommandReply
from vigil.skills import discover_skills
from vigil.store import SessionStore
from vigil.tools.registry import default_tool_names


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
        self.registry = registry or build_registry()
        self._session_id = session_id

    # -- ConversationControl ----------------------------------------------------------------
    @property
    def session_id(self) -> str | None:
        return self._session_id

    async def new_conversation(self) -> str:
        old = self._session_id
        if old is not None:
            await asyncio.to_thread(self.store.end_session, old, "new")
            self.agent.forget(old)
        session = await self.agent.new_session()
        self._session_id = session.id
        return session.id

    async def resume(self, ref: str) -> str:
        session_id = await asyncio.to_thread(self.store.resolve_session, ref)
        session_id = await asyncio.to_thread(self.store.newest_continuation, session_id)
        record = await asyncio.to_thread(self.store.get_session, session_id)
        if record.is_ended:
            await asyncio.to_thread(self.store.reopen_session, session_id)
        self._session_id = session_id
        return session_id

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
        return self.registry.is_command(text)

    async def command(self, text: str) -> CommandReply:
        """Run a slash command typed in this conversation."""
        return await self.registry.dispatch(self, text)

    async def ensure_session(self) -> str:
        """The current session, created on first use."""
        if self._session_id is None:
            self._session_id = (await self.agent.new_session()).id
        return self._session_id

    async def turn(self, text: str, *, on_event: EventCallback | None = None) -> TurnResult:
        """Send a user message and run the turn."""
        session_id = await self.ensure_session()
        result = await self.agent.run_turn(session_id, text, on_event=on_event)
        # compression may have moved the conversation to a continuation session
        self._session_id = result.session_id
        return result
