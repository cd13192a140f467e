"""Conversation compression: older turns become a model-written summary and the conversation
continues in a continuation session.

* Split: only at a user message, so an assistant message with tool calls always stays with its
  results. The most recent user turns are kept verbatim while they fit in ``KEEP_SHARE`` of the
  compression budget (``compression_threshold`` x ``context_window``); the last user turn is
  always kept, however large, and at least one turn must be left to summarise.
* Summary: one model call without tools, with its own system prompt, over a plain-text
  transcript of the older messages (an earlier summary included).
* Continuation: the parent ends with reason ``compression``; the child (same source, model,
  pinned tools, title and settings, but no stored prompt) starts with one ``summary`` message
  followed by copies of the kept messages, and builds its system prompt afresh from the current
  files on its first turn.
* Failure: a failed or empty summary changes nothing but a marker in the session's
  ``model_config`` that holds off automatic retries for ``RETRY_AFTER_MESSAGES`` messages.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Sequence

from vigil.agent.context_size import CHARS_PER_TOKEN, estimate_message, estimate_text
from vigil.agent.history import to_chat_message
from vigil.agent.session_prompt import PromptKeeper
from vigil.clock import Clock
from vigil.config.settings import Settings
from vigil.models.base import ChatMessage, ModelClient, ModelError, ModelRequest
from vigil.prompt.epoch import EVENTS, REQUESTED, SATISFIED
from vigil.store import NewMessage, SessionRecord, SessionStore
from vigil.store.records import MessageRecord
from vigil.tools.base import truncate_middle
from vigil.usage import Usage

log = logging.getLogger(__name__)

KEEP_SHARE = 0.25
"""Share of the compression budget the verbatim recent turns may take, so that a compressed
conversation has room to grow before it is compressed again."""
RETRY_AFTER_MESSAGES = 10
"""After a failed summary, automatic compression waits until this many more messages exist."""
FAILED_AT = "compression_failed_at"
"""model_config: the session's message count when its last compression attempt failed."""
COMPRESSED_FROM = "compressed_from"
"""model_config of a continuation: the id of the session it continues."""
_NOT_INHERITED = frozenset({SATISFIED, REQUESTED, EVENTS, FAILED_AT, COMPRESSED_FROM})

SUMMARY_HEADER = "[Summary of the earlier conversation (session {parent_id})]"
SUMMARY_REQUEST_MARKER = "Summarize the earlier conversation"
"""The wording that starts the summary request's instruction (tests key their fake model on it)."""
_TOOL_RESULT_CHARS = 2_000
_ARGUMENT_CHARS = 500

SUMMARY_SYSTEM = """\
You write the working summary of a conversation between a user and an AI agent (the \
assistant), so that the agent can carry on from the summary alone once the earlier messages \
are gone.

Write it for the agent, in the language of the conversation, with exactly these Markdown \
sections:

## Goal
What the user is trying to achieve, and any standing instructions or preferences they gave.
## Decisions
What was decided or agreed, with the reasons where they matter.
## Progress
What has been done so far, including tool and command results that matter.
## Open items
What is unfinished, pending or promised; questions still awaiting an answer.
## Relevant files
Paths of files and directories that were read, written or discussed, each with a short note.

Be concrete and brief: keep exact names, paths, commands, numbers, identifiers and error \
messages; leave out small talk. Write "none" under a section with nothing to say. Never add \
anything that is not in the transcript. Output only the summary."""


@dataclass(frozen=True, slots=True)
class CompressionResult:
    """What a compression attempt did.

    On success ``child_id`` is the continuation session; ``summarised`` and ``kept`` count the
    parent's stored messages that went into the summary and that were copied verbatim. On
    failure ``child_id`` is ``None``, ``failure`` says why, and the session is unchanged.
    """

    parent_id: str
    reason: str
    """What asked for it: ``auto`` (the context budget) or ``manual`` (``/compress``)."""
    child_id: str | None = None
    summarised: int = 0
    kept: int = 0
    summary: str = ""
    failure: str | None = None
    usage: Usage = Usage()
    """Tokens spent on the summary call."""

    @property
    def ok(self) -> bool:
        return self.child_id is not None


def compression_limit(settings: Settings) -> int:
    """Estimated prompt tokens above which a turn compresses its conversation first."""
    return int(settings.agent.compression_threshold * settings.model.effective_context_window())


def retry_held_off(session: SessionRecord) -> bool:
    """Whether a recent failed attempt holds off automatic compression of ``session``."""
    failed_at = session.model_config.get(FAILED_AT)
    if not isinstance(failed_at, int):
        return False
    return session.message_count < failed_at + RETRY_AFTER_MESSAGES


def choose_split(records: Sequence[MessageRecord], keep_tokens: int) -> int | None:
    """Index of the first record to keep verbatim, or ``None`` when there is nothing to summarise.

    Candidates are user messages only. The earliest one from which the rest fits in
    ``keep_tokens`` wins, but never one after the last user message, and never one that would
    leave only an earlier summary (or nothing) to summarise.
    """
    starts = [i for i, record in enumerate(records) if record.role == "user"]
    if not starts:
        return None
    sizes = [_record_tokens(record) for record in records]
    suffix = [0] * (len(records) + 1)
    for i in range(len(records) - 1, -1, -1):
        suffix[i] = suffix[i + 1] + sizes[i]
    split = next((i for i in starts if suffix[i] <= keep_tokens), starts[-1])
    if not any(record.role != "summary" for record in records[:split]):
        later = [i for i in starts if i > split]
        if not later:
            return None
        split = later[0]
    return split


def render_transcript(records: Sequence[MessageRecord], char_budget: int) -> str:
    """The older messages as plain text for the summary call, within ``char_budget`` characters.

    Earlier summaries always stay; when the rest is too long, its oldest messages are dropped
    (long tool results and arguments are already cut in the middle).
    """
    summaries = [_render(r) for r in records if r.role == "summary"]
    blocks = [b for b in (_render(r) for r in records if r.role != "summary") if b]
    head = [truncate_middle(s, max(200, char_budget // 2)) for s in summaries]
    room = char_budget - sum(len(s) + 2 for s in head)
    total = sum(len(b) + 2 for b in blocks)
    dropped = 0
    while len(blocks) - dropped > 1 and total > room:
        total -= len(blocks[dropped]) + 2
        dropped += 1
    blocks = blocks[dropped:]
    if blocks and len(blocks[0]) > room:
        blocks[0] = truncate_middle(blocks[0], max(200, room))
    if dropped:
        blocks.insert(0, f"[... {dropped} earlier message(s) left out for length ...]")
    return "\n\n".join(head + blocks)


def summary_request(records: Sequence[MessageRecord], settings: Settings) -> ModelRequest:
    """The one model call that summarises ``records``."""
    max_tokens = min(settings.model.max_output_tokens, max(256, settings.model.effective_context_window() // 8))
    # Leave room for the instructions and the answer; real tokenizers may be denser than ours.
    room = settings.model.effective_context_window() - max_tokens - estimate_text(SUMMARY_SYSTEM) - 200
    budget = max(2_000, int(room * 0.8) * CHARS_PER_TOKEN)
    transcript = render_transcript(records, budget)
    text = (
        "Here is the transcript of the earlier part of a conversation between the user and you, "
        "the assistant, with tool calls and their results.\n\n"
        f"<transcript>\n{transcript}\n</transcript>\n\n"
        f"{SUMMARY_REQUEST_MARKER} above into the structured summary with the sections "
        "Goal, Decisions, Progress, Open items and Relevant files."
    )
    return ModelRequest(
        system=SUMMARY_SYSTEM,
        messages=(ChatMessage("user", text),),
        max_tokens=max_tokens,
        temperature=settings.model.temperature,
    )


def continuation_config(
    parent: dict[str, Any], epoch_marker: dict[str, Any], parent_id: str
) -> dict[str, Any]:
    """The child's model_config: the parent's settings (``cwd``, temperature ...) without its
    prompt bookkeeping, so the child builds its prompt afresh like any new session."""
    config = {key: value for key, value in parent.items() if key not in _NOT_INHERITED}
    config.update(epoch_marker)
    config[COMPRESSED_FROM] = parent_id
    return config


class Compressor:
    """Summarises a session and moves its conversation to a continuation session."""

    def __init__(
        self,
        store: SessionStore,
        client: ModelClient,
        settings: Settings,
        clock: Clock,
        prompts: PromptKeeper,
    ) -> None:
        self.store = store
        self.client = client
        self.settings = settings
        self.clock = clock
        self.prompts = prompts

    def due(self, session: SessionRecord, estimated_tokens: int) -> bool:
        """Whether a turn estimated at ``estimated_tokens`` must compress ``session`` first."""
        return estimated_tokens > compression_limit(self.settings) and not retry_held_off(session)

    async def compress(self, session: SessionRecord, *, reason: str) -> CompressionResult:
        """Summarise the older part of ``session`` and continue it in a new child session.

        Never raises for a model failure: that is a failed result, recorded in the session so
        that automatic compression holds off for a while. Store errors propagate.
        """
        if session.is_ended:
            return CompressionResult(
                session.id, reason, failure=f"session {session.id} has ended ({session.end_reason})"
            )
        if session.forked_from is not None:  # see agent.fork
            return CompressionResult(session.id, reason, failure="a fork (a /background session) is not compressed")
        records = await asyncio.to_thread(self.store.get_messages, session.id)
        keep_tokens = int(KEEP_SHARE * compression_limit(self.settings))
        split = choose_split(records, keep_tokens)
        if split is None:
            return CompressionResult(
                session.id, reason, failure="nothing to summarise yet: the last turn is always kept"
            )
        older, kept = records[:split], records[split:]
        try:
            response = await self.client.complete(summary_request(older, self.settings))
        except ModelError as exc:
            return await self._failed(session.id, reason, f"the summary call failed: {exc}")
        summary = (response.content or "").strip()
        if not summary:
            return await self._failed(
                session.id, reason, "the model returned an empty summary", response.usage
            )
        write = asyncio.ensure_future(
            asyncio.to_thread(self._continue, session.id, summary, records, split, response.usage)
        )
        try:
            child = await asyncio.shield(write)
        except asyncio.CancelledError:
            # The parent may already be ended: let the child finish so the conversation has a
            # complete continuation to follow; then stop as asked.
            await write
            raise
        except _Moved as exc:
            return CompressionResult(session.id, reason, failure=str(exc), usage=response.usage)
        log.info(
            "compressed session %s into %s (%d summarised, %d kept)",
            session.id, child.id, len(older), len(kept),
        )
        return CompressionResult(
            session.id,
            reason,
            child_id=child.id,
            summarised=len(older),
            kept=len(kept),
            summary=summary,
            usage=response.usage,
        )

    async def _failed(
        self, session_id: str, reason: str, failure: str, usage: Usage = Usage()
    ) -> CompressionResult:
        log.warning("compression of session %s failed: %s", session_id, failure)
        await asyncio.to_thread(self._record_failure, session_id)
        return CompressionResult(session_id, reason, failure=failure, usage=usage)

    def _record_failure(self, session_id: str) -> None:
        count = self.store.get_session(session_id).message_count
        self.store.update_session(session_id, model_config=lambda config: {**config, FAILED_AT: count})

    def _continue(
        self,
        parent_id: str,
        summary: str,
        records: Sequence[MessageRecord],
        split: int,
        usage: Usage,
    ) -> SessionRecord:
        """Create the child with its messages, then end the parent (in that order, so that a
        failure part way leaves the parent usable; a half-written child is removed)."""
        parent = self.store.get_session(parent_id)
        if parent.is_ended or parent.message_count != len(records):
            # Another turn or compression got there during the summary call.
            raise _Moved(f"session {parent_id} changed while it was being summarised; try again")
        summarised, kept = split, records[split:]
        now = self.clock.now()
        child = self.store.create_session(
            source=parent.source,
            model=parent.model,
            model_config=continuation_config(
                parent.model_config, self.prompts.current_epoch_marker(), parent.id
            ),
            title=parent.title,
            parent_id=parent.id,
            tool_names=parent.tool_names,
            started_at=now,
        )
        try:
            header = SUMMARY_HEADER.format(parent_id=parent.id)
            self.store.append_message(
                child.id,
                NewMessage(
                    "summary",
                    f"{header}\n\n{summary}\n\n[The most recent messages follow verbatim.]",
                    usage=usage,
                    meta={"parent_id": parent.id, "summarised": summarised, "kept": len(kept)},
                ),
                created_at=now,
            )
            for record in kept:
                self.store.append_message(child.id, _copy(record, parent.id), created_at=record.created_at)
        except Exception:
            try:
                self.store.delete_session(child.id)
            except Exception:  # the original error is the one worth reporting
                log.exception("could not remove the half-written continuation %s", child.id)
            raise
        self.store.end_session(parent.id, "compression", ended_at=now)
        return self.store.get_session(child.id)


class _Moved(Exception):
    """The parent changed between reading its messages and writing the continuation."""


def _copy(record: MessageRecord, parent_id: str) -> NewMessage:
    # Usage stays with the original: it was billed (and counted) in the parent.
    return NewMessage(
        record.role,
        record.content,
        tool_calls=record.tool_calls,
        tool_call_id=record.tool_call_id,
        tool_name=record.tool_name,
        meta={**record.meta, "copied_from": {"session": parent_id, "seq": record.seq}},
    )


def _record_tokens(record: MessageRecord) -> int:
    message = to_chat_message(record)
    return estimate_message(message) if message is not None else 0


def _render(record: MessageRecord) -> str:
    content = (record.content or "").strip()
    if record.role == "summary":
        return f"[summary of the conversation before this transcript]\n{content}"
    if record.role == "user":
        return f"[user]\n{content}"
    if record.role == "assistant":
        lines = ["[assistant]"] + ([content] if content else [])
        for call in record.tool_calls:
            arguments = truncate_middle(call.arguments, _ARGUMENT_CHARS)
            lines.append(f"[calls tool {call.name} with {arguments}]")
        return "\n".join(lines)
    if record.role == "tool":
        error = ", error" if record.meta.get("is_error") else ""
        content = truncate_middle(content, _TOOL_RESULT_CHARS)
        return f"[result of {record.tool_name}{error}]\n{content}"
    return ""
