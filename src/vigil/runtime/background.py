"""``/background PROMPT`` (alias ``/btw``): a side task that leaves the conversation free.

PROMPT runs as one turn in a side session forked from the conversation
(:func:`vigil.agent.fork.fork_session`): the conversation's stored system prompt, pinned tools
and history, so the first request reads from the provider's prompt cache. The command is
answered at once, even while a turn runs, and the conversation goes on meanwhile; at most
``agent.background_max`` tasks run at once in one conversation, and one more is refused.
The task runs unattended: nothing that needs a person's approval runs.

When a task ends, its note — the answer, or why there is none — is shown at once (a
:class:`~vigil.runtime.conversation_events.BackgroundNote` event, which every front end delivers
like an answer) and stored in the conversation as a message of role ``note`` with meta
``background`` {session, status}, at the first moment no turn runs there (right away, or as
the running turn ends): the model reads it from the next turn on, and the history only grows at
its end, so the cached prefix holds. The side session stays as the conversation's fork
(``vigil sessions show`` lists it), ended with reason ``background`` (or ``failed``,
``interrupted``) once its note is stored.

A task is not run again after its process ends. Closing the conversation (the REPL quits, the
gateway stops) interrupts it with a note saying so; after a crash, the next process that runs
the conversation, or a gateway starting on the same machine, finds the fork unended and its
runner gone (:func:`orphaned`) and posts that note then — or the answer, if it had come.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import socket
from typing import TYPE_CHECKING, Any

from vigil.agent.fork import fork_session
from vigil.masking import mask_secrets
from vigil.runtime.conversation_events import BackgroundNote, ConversationEvent, TurnEnded
from vigil.runtime.slash import CommandReply
from vigil.store import NewMessage, SessionNotFound, SessionRecord, SessionStore
from vigil.store.records import MessageRecord

if TYPE_CHECKING:
    from vigil.runtime.conversation import Conversation

log = logging.getLogger(__name__)

SOURCE = "background"
"""The source of a fork that runs a ``/background`` task."""
RUNNER = "background_runner"
"""In a fork's model configuration: the host and process id running its task."""
ANSWERED, FAILED, INTERRUPTED = "answered", "failed", "interrupted"
NOTE = "note"
USAGE = "Usage: /background PROMPT (or /btw PROMPT) — PROMPT runs beside the conversation; its answer is posted here"

_RUNNING: set[str] = set()
"""Forks whose task runs in this process."""
_SETTLING: set[str] = set()
"""Forks whose orphaned task this process is writing the note of."""


def background_prompt(text: str) -> str | None:
    """The prompt of a ``/background PROMPT`` or ``/btw PROMPT`` line (``""`` when it has none);
    ``None`` for any other line."""
    words = text.strip().split(None, 1)
    if not words or words[0].lower() not in ("/background", "/btw"):
        return None
    return words[1].strip() if len(words) > 1 else ""


def note_text(status: str, prompt: str, body: str, child_id: str | None) -> str:
    """The note a task leaves: ``↳ background: “PROMPT”`` and its answer, or what became of it."""
    head = f"↳ background: “{_short(prompt)}”"
    where = f" (session {child_id})" if child_id else ""
    if status == ANSWERED:
        return f"{head}\n\n{body}"
    if status == FAILED:
        return f"{head} failed{where}: {body}"
    return (f"{head} was interrupted before it answered{where}: {body}. It is not run again; "
            "send /background again to run it anew.")


class BackgroundTasks:
    """The ``/background`` tasks of one live conversation (see the module docstring). It hooks
    itself into ``conversation``: the immediate inputs hand it ``/background`` lines, every turn
    first stores the notes waiting, and so does the end of each turn."""

    def __init__(self, conversation: "Conversation") -> None:
        self.conversation = conversation
        self.controller = conversation.controller
        self._tasks: dict[asyncio.Task[None], str] = {}
        self._notes: list[tuple[BackgroundNote, str | None]] = []  # shown, waiting to be stored
        self._lock = asyncio.Lock()
        conversation.immediate.background = self
        conversation.listeners.insert(0, self._on_event)
        self.controller.before_turn = self.flush

    @property
    def running(self) -> int:
        """Tasks running now."""
        return len(self._tasks)

    @property
    def pending(self) -> bool:
        """A task runs, or a note waits to be stored: the conversation is not to be closed."""
        return bool(self._tasks or self._notes)

    # -- starting -------------------------------------------------------------------------
    def start(self, prompt: str, *, turn_running: bool) -> CommandReply:
        """``/background PROMPT``: start a task (or say why not), answered at once."""
        limit = self.controller.settings.agent.background_max
        if not prompt:
            return self._listing()
        session_id = self.controller.session_id
        if session_id is None:
            return CommandReply("There is no conversation yet to run it beside: send a message first.", is_error=True)
        if limit == 0:
            return CommandReply("Background tasks are turned off (agent.background_max is 0).", is_error=True)
        if len(self._tasks) >= limit:
            return CommandReply(
                f"Refused: {len(self._tasks)} background tasks are running, the most one conversation may run at "
                f"once (agent.background_max is {limit}). Send it again when one has posted its answer.",
                is_error=True,
            )
        task = asyncio.ensure_future(self._run(session_id, prompt, turn_running))
        self._tasks[task] = prompt
        task.add_done_callback(lambda done: self._tasks.pop(done, None))
        return CommandReply(
            f"↳ Working on “{_short(prompt)}” in the background ({len(self._tasks)} of {limit} running). "
            "Its answer is posted here when it is ready; the conversation goes on meanwhile."
        )

    def _listing(self) -> CommandReply:
        if not self._tasks:
            return CommandReply(USAGE, is_error=True)
        lines = [f"{n}. {_short(prompt)}" for n, prompt in enumerate(self._tasks.values(), 1)]
        return CommandReply("Running in the background:\n" + "\n".join(lines))

    # -- running --------------------------------------------------------------------------
    async def _run(self, session_id: str, prompt: str, turn_running: bool) -> None:
        agent = self.controller.agent
        child: SessionRecord | None = None
        try:
            child = await asyncio.to_thread(
                fork_session, agent.store, session_id, source=SOURCE, title=f"background: {_short(prompt, 50)}",
                turn_running=turn_running, config={RUNNER: _runner()},
            )
            _RUNNING.add(child.id)
            result = await agent.run_turn(child.id, prompt, stream=False, auto_title=False, unattended=True)
            status, body = ANSWERED, result.answer or "(an empty answer)"
        except asyncio.CancelledError:
            if child is not None:  # the conversation closes: say so now, there is no later
                note = await asyncio.shield(asyncio.to_thread(
                    _settle, agent.store, child, prompt, INTERRUPTED, "the conversation was closed while it ran",
                    agent.clock.now()))
                await asyncio.shield(self._show(note))
            raise
        except Exception as exc:  # a failed task must not touch the conversation beyond its note
            log.warning("background task failed: %s", _reason(exc))
            status, body = FAILED, _reason(exc)
        finally:
            if child is not None:
                _RUNNING.discard(child.id)
        target = child.forked_from if child is not None and child.forked_from else session_id
        note = BackgroundNote(target, child.id if child else "", prompt, status,
                              note_text(status, prompt, body, child.id if child else None))
        self._notes.append((note, child.id if child else None))
        await self._show(note)
        if not self.conversation.running_turn:
            await self.flush()

    async def flush(self) -> None:
        """Store the notes waiting (called when no turn runs: before each turn, at its end)."""
        async with self._lock:
            while self._notes:
                note, child_id = self._notes[0]
                store, now = self.controller.agent.store, self.controller.agent.clock.now()
                try:
                    await asyncio.to_thread(_store_note, store, note, child_id, now)
                except SessionNotFound:  # the conversation was deleted meanwhile: nowhere to keep it
                    log.warning("the conversation of background task %s is gone; its note is not kept", child_id)
                except Exception:  # kept for the next moment: the note was shown already
                    log.exception("cannot store the note of background task %s", child_id)
                    return
                self._notes.pop(0)

    async def _on_event(self, event: ConversationEvent) -> None:
        if isinstance(event, TurnEnded) and self._notes:
            await self.flush()

    async def _show(self, note: BackgroundNote) -> None:
        for listener in list(self.conversation.listeners):
            if listener == self._on_event:
                continue
            try:
                result = listener(note)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("a conversation listener failed on a background note")

    # -- the conversation's life ------------------------------------------------------------
    async def recover(self) -> None:
        """At the conversation's start: the notes of tasks a process that ended left behind."""
        session_id = self.controller.session_id
        if session_id is None:
            return
        store, now = self.controller.agent.store, self.controller.agent.clock.now()
        try:
            notes = await asyncio.to_thread(settle_orphans, store, now, session_id=session_id)
        except Exception:
            log.exception("cannot look for interrupted background tasks of %s", session_id)
            return
        for note in notes:
            await self._show(note)

    async def close(self) -> None:
        """The conversation closes: running tasks are interrupted (each says so in its note) and
        the notes waiting are stored."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.flush()


# -- stored notes and orphaned tasks ---------------------------------------------------------
def _store_note(store: SessionStore, note: BackgroundNote, child_id: str | None, now: float) -> None:
    """Append ``note`` to the conversation (its newest continuation) and end the fork."""
    target = store.newest_continuation(note.session_id)
    meta: dict[str, Any] = {"background": {"session": child_id, "status": note.status}}
    store.append_message(target, NewMessage(NOTE, note.text, meta=meta), created_at=now)
    if child_id is not None:
        store.end_session(child_id, "background" if note.status == ANSWERED else note.status, ended_at=now)


def _settle(store: SessionStore, child: SessionRecord, prompt: str, status: str, body: str, now: float) -> BackgroundNote:
    note = BackgroundNote(child.forked_from or child.id, child.id, prompt, status, note_text(status, prompt, body, child.id))
    if child.forked_from is None:  # its conversation was deleted: nowhere to post
        store.end_session(child.id, status, ended_at=now)
    else:
        _store_note(store, note, child.id, now)
    return note


def orphaned(child: SessionRecord, *, other_hosts: bool) -> bool:
    """Whether the task of an unended fork has no process running it any more: not this one, and
    its runner's process is gone (a runner on another machine counts only with ``other_hosts``)."""
    if child.is_ended or child.source != SOURCE or child.id in _RUNNING or child.id in _SETTLING:
        return False
    runner = child.model_config.get(RUNNER)
    if not isinstance(runner, dict) or runner.get("host") != socket.gethostname():
        return other_hosts
    pid = runner.get("pid")
    if not isinstance(pid, int) or pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # someone else's process: alive
        return False
    return False


def settle_orphans(store: SessionStore, now: float, *, session_id: str | None = None) -> list[BackgroundNote]:
    """Post the notes of orphaned tasks (:func:`orphaned`): of the forks of ``session_id`` (its
    conversation runs here now, so a runner elsewhere is gone too), or of every fork whose runner
    was a process of this machine. A task that had answered posts its answer; any other, that it
    was interrupted."""
    if session_id is not None:
        candidates, other_hosts = store.forks(session_id), True
    else:
        candidates, other_hosts = store.list_sessions(source=SOURCE), False
    notes = []
    for child in candidates:
        if not orphaned(child, other_hosts=other_hosts):
            continue
        _SETTLING.add(child.id)
        try:
            records = store.get_messages(child.id)
            prompt = next((r.content or "" for r in records if r.role == "user"), child.title or "")
            answer = _answer(records)
            status, body = (ANSWERED, answer) if answer else (INTERRUPTED, "the process running it ended")
            notes.append(_settle(store, child, prompt, status, body, now))
        except SessionNotFound:  # deleted meanwhile
            continue
        finally:
            _SETTLING.discard(child.id)
    return notes


def _answer(records: list[MessageRecord]) -> str | None:
    last = records[-1] if records else None
    if last is None or last.role != "assistant" or last.tool_calls or last.meta.get("stop_reason") == "interrupted":
        return None
    return last.content or None


def _runner() -> dict[str, Any]:
    return {"host": socket.gethostname(), "pid": os.getpid()}


def _reason(exc: BaseException) -> str:
    text = " ".join(mask_secrets(str(exc)).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _short(text: str, width: int = 60) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"
