"""The stored system prompt of a session: built once, replayed verbatim, rebuilt on request.

A rebuild happens only for a session without a prompt (its first turn) or when the profile's
refresh epoch, or a request for this session, is newer than the epoch its prompt satisfies.
Each rebuild is recorded in the session's model configuration.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Awaitable, Callable

from vigil.agent.events import PromptRebuilt, TurnEvent
from vigil.clock import Clock
from vigil.config.settings import Settings
from vigil.profiles import Profile
from vigil.prompt.builder import build_system_prompt
from vigil.prompt.epoch import (
    EVENTS,
    REQUESTED,
    SATISFIED,
    PromptDamaged,
    RefreshState,
    needs_rebuild,
    read_refresh_state,
)
from vigil.store import SessionRecord, SessionStore, prompt_hash

_MAX_EVENTS = 20


class PromptKeeper:
    """Gives each turn its session's system prompt, building or rebuilding only when due."""

    def __init__(self, store: SessionStore, profile: Profile, settings: Settings, clock: Clock):
        self.store = store
        self.profile = profile
        self.settings = settings
        self.clock = clock
        self._texts: dict[str, str] = {}

    def current_epoch_marker(self) -> dict[str, Any]:
        """What a brand-new session records: it satisfies every request made so far."""
        return {SATISFIED: read_refresh_state(self.store).counter}

    async def prompt_for_turn(
        self, session: SessionRecord, emit: Callable[[TurnEvent], Awaitable[None]]
    ) -> str:
        """The exact system prompt text for this turn of ``session``."""
        state = await asyncio.to_thread(read_refresh_state, self.store)
        reason = needs_rebuild(session, state)
        if reason is None:
            return await self._stored_text(session)
        text = await asyncio.to_thread(self.rebuild, session.id, state, reason)
        await emit(PromptRebuilt(reason))
        return text

    def rebuild(self, session_id: str, state: RefreshState, reason: str) -> str:
        """Build from the files on disk and store prompt + satisfied epoch in one write.

        The epoch recorded is what was asked for *before* the files were read: a request that
        lands while building stays newer, so the next turn rebuilds again instead of losing it.
        """
        session = self.store.get_session(session_id)
        config = session.model_config
        reached = max(
            state.counter, int(config.get(REQUESTED, 0) or 0), int(config.get(SATISFIED, 0) or 0)
        )
        built = build_system_prompt(
            self.profile,
            cwd=Path(config.get("cwd") or Path.cwd()),
            started_at=session.started_at,
            max_file_chars=self.settings.prompt.max_file_chars,
            include_context_files=self.settings.prompt.context_files,
        )
        event = {"at": self.clock.now(), "reason": reason, "epoch": reached}

        def record(current: dict[str, Any]) -> dict[str, Any]:
            satisfied = max(reached, int(current.get(SATISFIED, 0) or 0))
            events = [*(current.get(EVENTS) or []), event][-_MAX_EVENTS:]
            return {**current, SATISFIED: satisfied, EVENTS: events}

        digest = self.store.set_session_prompt(session.id, built.text, model_config=record)
        self._texts[digest] = built.text
        return built.text

    async def _stored_text(self, session: SessionRecord) -> str:
        digest = session.system_prompt_hash
        assert digest is not None
        cached = self._texts.get(digest)
        if cached is not None:
            return cached
        text = await asyncio.to_thread(self.store.get_prompt, digest)
        if not text or prompt_hash(text) != digest:
            raise PromptDamaged(
                f"the stored system prompt of session {session.id} is "
                f"{'missing' if text is None else 'empty' if not text else 'damaged'}; "
                f"repair it with `vigil sessions repair-prompts --session {session.id}`"
            )
        self._texts[digest] = text
        return text
