"""One agent turn: stored prompt + history + new message → model → tools → answer.

Every message is stored the moment it exists, so a crash or a broken connection mid-turn loses
nothing already received. A turn whose request would outgrow the compression budget compresses
the conversation first and runs in the continuation session (see ``compression``).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable

from vigil.agent.compression import CompressionResult, Compressor
from vigil.agent.context_size import SizeTracker
from vigil.agent.fork import history_records, is_fork
from vigil.agent.events import (
    AssistantStep,
    Compressed,
    EventCallback,
    Steered,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnEvent,
)
from vigil.agent.history import (
    INTERRUPTED_TOOL_RESULT,
    build_history,
    cut_off_answer,
    to_chat_message,
    unique_call_ids,
)
from vigil.agent.session_prompt import PromptKeeper
from vigil.clock import Clock, SystemClock
from vigil.config.settings import Settings
from vigil.models.base import ChatMessage, ModelClient, ModelRequest, ModelResponse, ModelStreamInterrupted
from vigil.profiles import Profile
from vigil.prompt.builder import check_profile_sources
from vigil.store import NewMessage, SessionRecord, SessionStore
from vigil.store.records import ToolCall
from vigil.tools.base import ApprovalCallback, ToolContext
from vigil.tools.mcp.pins import MCP_TOOLS, pin_new_session, pinned_tools
from vigil.tools.registry import default_tool_names, run_tool_call, tool_specs
from vigil.usage import Usage

SessionHook = Callable[[SessionRecord], Any]
CompressionHook = Callable[[str, str], Any]
"""Called with (parent id, continuation id) after a successful compression; sync or async."""

log = logging.getLogger(__name__)


class EmptyMessage(ValueError):
    """A turn was asked for with no text to send."""


class TurnDeclined(Exception):
    """``before_execution`` said no: the turn stopped before anything was stored."""


BeforeExecution = Callable[[str], Awaitable[bool]]
"""Called with the session id once the turn is prepared (prompt, history, compression) and
just before the message is stored; returning ``False`` declines the turn."""


@dataclass(frozen=True, slots=True)
class TurnResult:
    """How a turn ended.

    ``stop`` is ``answered``, ``iteration_budget`` (the model kept calling tools) or
    ``max_tokens`` (the answer was cut off). ``session_id`` is the session the turn ran in,
    which front ends follow: the continuation when this turn compressed the conversation first
    (``compressed_from`` then names the session it replaced) or when the turn was addressed to
    a session compressed earlier. ``usage`` includes the summary call.
    """

    session_id: str
    answer: str
    stop: str
    usage: Usage
    model_calls: int
    tool_calls: int
    compressed_from: str | None = None


@dataclass
class _History:
    count: int
    messages: list[ChatMessage] = field(default_factory=list)
    size: SizeTracker = field(default_factory=SizeTracker)


@dataclass
class _Start:
    """Where a turn runs, once any due compression has happened."""

    session: SessionRecord
    system: str
    history: _History
    usage: Usage
    compressed_from: str | None


class Agent:
    """Runs turns for sessions of one profile against one model client."""

    def __init__(
        self,
        *,
        store: SessionStore,
        client: ModelClient,
        profile: Profile,
        settings: Settings,
        cwd: Path | None = None,
        clock: Clock | None = None,
        approve: ApprovalCallback | None = None,
        source: str = "cli",
    ) -> None:
        self.store = store
        self.client = client
        self.profile = profile
        self.settings = settings
        self.cwd = (cwd or Path.cwd()).resolve()
        self.clock = clock or SystemClock()
        self.approve = approve
        self.source = source
        self.prompts = PromptKeeper(store, profile, settings, self.clock)
        self.session_start_hooks: list[SessionHook] = []
        self.compression_hooks: list[CompressionHook] = []
        self._histories: dict[str, _History] = {}

    # -- sessions -------------------------------------------------------------------------
    async def new_session(
        self, *, source: str | None = None, title: str | None = None, parent_id: str | None = None
    ) -> SessionRecord:
        """Create a session with the current tool list pinned; fires the session-start hooks."""
        await asyncio.to_thread(check_profile_sources, self.profile)
        model_config: dict[str, Any] = {"cwd": str(self.cwd)}
        if self.settings.model.temperature is not None:
            model_config["temperature"] = self.settings.model.temperature
        model_config.update(await asyncio.to_thread(self.prompts.current_epoch_marker))
        # A model that cannot call tools gets none pinned, so the session says what it can do.
        tool_names: list[str] = []
        if getattr(self.client, "tools_supported", True):
            mcp_names, mcp_specs = await pin_new_session(self.store, self.profile, self.settings)
            tool_names = default_tool_names(self.settings) + mcp_names
            if mcp_specs is not None:
                model_config[MCP_TOOLS] = mcp_specs
        session = await asyncio.to_thread(
            self.store.create_session,
            source=source or self.source,
            model=self.client.model,
            model_config=model_config,
            title=title,
            parent_id=parent_id,
            tool_names=tool_names,
            started_at=self.clock.now(),
        )
        for hook in self.session_start_hooks:
            result = hook(session)
            if inspect.isawaitable(result):
                await result
        return session

    # -- turns ----------------------------------------------------------------------------
    async def run_turn(
        self,
        session_id: str,
        user_text: str,
        *,
        on_event: EventCallback | None = None,
        stream: bool = True,
        auto_title: bool = True,
        before_execution: BeforeExecution | None = None,
        unattended: bool = False,
        user_meta: dict[str, Any] | None = None,
        resume: bool = False,
        steering: Callable[[], list[tuple[str, dict[str, Any]]]] | None = None,
    ) -> TurnResult:
        """Run one turn of ``session_id`` for ``user_text`` and return the final answer.

        ``steering`` is asked after each round of tool calls for guidance sent meanwhile
        (``/steer``): each text is stored as a user message marked ``steer`` with its meta (appended, so the
        cached prefix stays as it was) and read by the next model call (:class:`Steered`).

        ``unattended`` turns (heartbeats) never ask for approval, even when the front end
        could: nobody is waiting at the prompt for a turn the user did not start.

        Cancelling the task (Ctrl-C, a signal) stops the turn; what was stored stays, tool
        calls left without a result get a placeholder result so the history stays valid, and
        ``user_meta`` is stored with the user message (the gateway marks which inbound
        message it answers). An answer cut off while streaming (cancelled, or the connection broke) is kept with a
        marker saying so. Tool calls that share an id in one answer get distinct ids.

        ``resume``: the turn may have begun before (a restart cut it off): when the session's
        last user message already carries ``user_meta``, the turn continues after what was
        stored instead of storing the question a second time.
        """
        if not user_text.strip():
            raise EmptyMessage("the message is empty: there is nothing to send")
        emit = _emitter(on_event)
        start = await self._start(session_id, user_text, emit)
        session, system, history = start.session, start.system, start.history
        session_id = session.id
        if before_execution is not None and not await before_execution(session_id):
            raise TurnDeclined(f"the turn for session {session_id} was declined before it began")
        resumed = bool(resume and user_meta) and await asyncio.to_thread(_asked_last, self.store, session_id, user_meta or {})
        if auto_title and session.title is None:
            await asyncio.to_thread(
                self.store.update_session, session_id, title=_title_from(user_text)
            )
        if not resumed:
            await self._append(session_id, history, NewMessage("user", user_text, meta=dict(user_meta or {})))

        specs = tool_specs(session.tool_names, await pinned_tools(self.store, session))
        context = ToolContext(
            profile=self.profile,
            settings=self.settings,
            store=self.store,
            session_id=session_id,
            cwd=self.profile.agent_workdir(Path(session.model_config.get("cwd") or self.cwd), f"session-{session_id}"),
            approve=None if unattended else self.approve,
        )
        total = start.usage
        calls_run = 0
        streaming = stream and on_event is not None
        try:
            for iteration in range(1, self.settings.agent.max_iterations + 1):
                request = ModelRequest(
                    system=system,
                    messages=tuple(history.messages),
                    tools=specs,
                    max_tokens=self.settings.model.max_output_tokens,
                    temperature=self.settings.model.temperature,
                )
                response = await self._ask(session_id, history, request, emit, streaming)
                total = total + response.usage
                calls = unique_call_ids(response.tool_calls)
                await self._append(
                    session_id,
                    history,
                    NewMessage(
                        "assistant",
                        response.content,
                        tool_calls=calls,
                        usage=response.usage,
                        meta={"stop_reason": response.stop_reason},
                    ),
                )
                done: set[str] = set()
                try:
                    await emit(AssistantStep(response.content, len(calls), response.usage))
                    if not calls:
                        stop = "max_tokens" if response.stop_reason == "max_tokens" else "answered"
                        return TurnResult(
                            session_id, response.content or "", stop, total, iteration, calls_run,
                            start.compressed_from,
                        )
                    await self._run_tools(session_id, history, calls, context, session, emit, done)
                    for text, meta in steering() if steering is not None else ():
                        await self._append(session_id, history, NewMessage("user", text, meta={**meta, "steer": True}))
                        await emit(Steered(text))
                except BaseException:
                    # however the turn stops, every stored tool call gets a result
                    missing = [c for c in calls if c.id not in done]
                    if missing:
                        await asyncio.shield(self._close_calls(session_id, history, missing))
                    raise
                calls_run += len(calls)
        except BaseException:
            # the in-memory history may no longer match the store; re-read it next turn
            self.forget(session_id)
            raise
        budget = self.settings.agent.max_iterations
        return TurnResult(
            session_id,
            f"[stopped: the iteration budget of {budget} model calls for one turn was used up; "
            "send another message to let the agent continue]",
            "iteration_budget",
            total,
            budget,
            calls_run,
            start.compressed_from,
        )

    async def _ask(
        self,
        session_id: str,
        history: _History,
        request: ModelRequest,
        emit: Callable[[TurnEvent], Any],
        streaming: bool,
    ) -> ModelResponse:
        """One model call. Text that streamed before the answer broke off (a dropped
        connection, or the turn cancelled) is stored as a cut-off assistant message."""
        streamed: list[str] = []

        def on_text(text: str) -> Any:
            streamed.append(text)
            return emit(TextDelta(text))

        try:
            return await self.client.complete(request, on_text=on_text if streaming else None)
        except ModelStreamInterrupted as exc:
            await self._keep_partial(session_id, history, exc.partial_text or "".join(streamed), "connection")
            raise
        except asyncio.CancelledError:
            await asyncio.shield(self._keep_partial(session_id, history, "".join(streamed), "interrupted"))
            raise

    async def _keep_partial(self, session_id: str, history: _History, text: str, why: str) -> None:
        message = cut_off_answer(text, why)
        if message is None:
            return
        try:
            await self._append(session_id, history, message)
        except Exception:
            # The failure that cut the answer off is the one to report.
            log.exception("could not keep the partial answer of session %s", session_id)

    async def _start(
        self, session_id: str, user_text: str, emit: Callable[[TurnEvent], Any]
    ) -> _Start:
        """The session, prompt and history this turn runs with; compresses first when the
        request would pass the compression budget."""
        session = await self._following(session_id)
        system = await self.prompts.prompt_for_turn(session, emit)
        history = await self._load_history(session)
        estimate = history.size.estimate(
            system=system,
            tools=tool_specs(session.tool_names, await pinned_tools(self.store, session)),
            history=history.messages,
            adding=[ChatMessage("user", user_text)],
        )
        compressor = self._compressor()
        if is_fork(session) or not compressor.due(session, estimate):
            return _Start(session, system, history, Usage(), None)
        outcome = await self._compress(compressor, session, "auto", emit)
        if not outcome.ok:
            return _Start(session, system, history, outcome.usage, None)
        assert outcome.child_id is not None
        child = await asyncio.to_thread(self.store.get_session, outcome.child_id)
        system = await self.prompts.prompt_for_turn(child, emit)
        return _Start(child, system, await self._load_history(child), outcome.usage, session.id)

    # -- compression ----------------------------------------------------------------------
    async def compress(
        self, session_id: str, *, reason: str = "manual", on_event: EventCallback | None = None
    ) -> CompressionResult:
        """Compress a conversation now, whatever its size (``/compress``).

        On success the conversation continues in ``result.child_id``; on failure nothing
        changed and ``result.failure`` says why. Model errors never raise.
        """
        session = await self._following(session_id)
        return await self._compress(self._compressor(), session, reason, _emitter(on_event))

    async def _compress(
        self,
        compressor: Compressor,
        session: SessionRecord,
        reason: str,
        emit: Callable[[TurnEvent], Any],
    ) -> CompressionResult:
        outcome = await compressor.compress(session, reason=reason)
        if not outcome.ok:
            return outcome
        assert outcome.child_id is not None
        self.forget(session.id)
        await emit(Compressed(session.id, outcome.child_id, reason))
        for hook in self.compression_hooks:
            try:
                result = hook(session.id, outcome.child_id)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                # The compression is done and the turn must go on in the continuation.
                log.exception("a compression hook failed for %s -> %s", session.id, outcome.child_id)
        return outcome

    def _compressor(self) -> Compressor:
        # Built per use: the client and settings of an agent may be swapped at run time.
        return Compressor(self.store, self.client, self.settings, self.clock, self.prompts)

    async def _following(self, session_id: str) -> SessionRecord:
        """The session, or the newest continuation of one that was compressed."""
        session = await asyncio.to_thread(self.store.get_session, session_id)
        if session.end_reason != "compression":
            return session
        newest = await asyncio.to_thread(self.store.newest_continuation, session_id)
        return await asyncio.to_thread(self.store.get_session, newest)

    async def _run_tools(
        self,
        session_id: str,
        history: _History,
        calls: tuple[ToolCall, ...],
        context: ToolContext,
        session: SessionRecord,
        emit: Callable[[TurnEvent], Any],
        done: set[str],
    ) -> None:
        """Run the calls in order, storing each result; ``done`` collects the ids stored."""
        for call in calls:
            await emit(ToolStarted(call.name, call.arguments))
            result = await run_tool_call(
                call, context, session.tool_names, pinned=await pinned_tools(self.store, session)
            )
            await self._append(
                session_id,
                history,
                NewMessage(
                    "tool",
                    result.content,
                    tool_call_id=call.id,
                    tool_name=call.name,
                    meta={"is_error": True} if result.is_error else {},
                ),
            )
            done.add(call.id)
            await emit(ToolFinished(call.name, result.content, result.is_error))

    async def _close_calls(self, session_id: str, history: _History, calls: list[ToolCall]) -> None:
        """Store placeholder results for calls that never ran; best effort, since the
        history builder also closes them when the session is read back."""
        for call in calls:
            try:
                await self._append(
                    session_id,
                    history,
                    NewMessage(
                        "tool",
                        INTERRUPTED_TOOL_RESULT,
                        tool_call_id=call.id,
                        tool_name=call.name,
                        meta={"is_error": True, "interrupted": True},
                    ),
                )
            except Exception:
                return

    # -- history --------------------------------------------------------------------------
    async def _load_history(self, session: SessionRecord) -> _History:
        cached = self._histories.get(session.id)
        if cached is not None and cached.count == session.message_count:
            return cached
        records, inherited = await asyncio.to_thread(history_records, self.store, session)  # a fork's: see fork
        history = _History(len(records) - inherited, build_history(records), SizeTracker.from_records(records))
        self._histories[session.id] = history
        return history

    async def _append(self, session_id: str, history: _History, message: NewMessage) -> None:
        await asyncio.to_thread(
            self.store.append_message, session_id, message, created_at=self.clock.now()
        )
        history.count += 1
        rebuilt = to_chat_message(message)
        if rebuilt is not None:
            history.messages.append(rebuilt)
            history.size.add(rebuilt, message.usage)

    def forget(self, session_id: str) -> None:
        """Drop the in-memory history of a session (it is re-read on its next turn)."""
        self._histories.pop(session_id, None)


def _asked_last(store: SessionStore, session_id: str, meta: dict[str, Any]) -> bool:
    """Whether the last user message of ``session_id`` carries every item of ``meta``."""
    for record in reversed(store.get_messages(session_id)):
        if record.role == "user":
            return all(record.meta.get(key) == value for key, value in meta.items())
    return False


def _title_from(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= 60 else line[:59] + "…"


def _emitter(callback: EventCallback | None) -> Callable[[TurnEvent], Any]:
    async def emit(event: TurnEvent) -> None:
        if callback is None:
            return
        result = callback(event)
        if inspect.isawaitable(result):
            await result

    return emit
