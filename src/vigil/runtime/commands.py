"""The built-in slash commands."""

from __future__ import annotations

import asyncio
import difflib
from datetime import datetime

from vigil.runtime.heartbeat_commands import heartbeat_slash
from vigil.runtime.slash import CommandRegistry, CommandReply, ConversationControl, SlashCommand
from vigil.runtime.steering import USAGE
from vigil.runtime import cron_commands
from vigil.store import StoreError
from vigil.store.titles import clean_title
from vigil.usage import Usage


def _short(text: str | None, width: int = 50) -> str:
    line = " ".join((text or "").split())
    return line if len(line) <= width else line[: width - 1] + "…"


def _cleared_note(control: ConversationControl) -> str:
    cleared = getattr(control, "cleared_heartbeat", None)
    return " The previous conversation's heartbeat was cleared." if cleared is not None else ""


async def _new(control: ConversationControl, _args: str) -> CommandReply:
    session_id = await control.new_conversation()
    return CommandReply(
        f"Started a new conversation ({session_id}). Files are read afresh.{_cleared_note(control)}"
    )


async def _steer(_control: ConversationControl, args: str) -> CommandReply:
    """``/steer`` reaches here only without its text: the conversation takes guidance itself
    (:mod:`vigil.runtime.steering`)."""
    return CommandReply(USAGE if not args.strip() else "Nothing is running: send it as a message.", is_error=True)


async def _queue(_control: ConversationControl, _args: str) -> CommandReply:
    """``/queue`` is answered by the conversation itself (:mod:`vigil.runtime.immediate`);
    this is what a front end without a queue says."""
    return CommandReply("Nothing waits.")


async def _background(_control: ConversationControl, _args: str) -> CommandReply:
    """``/background`` is taken by the live conversation itself (:mod:`vigil.runtime.background`);
    this is what a front end without one says."""
    return CommandReply("/background runs beside a live conversation (the REPL, the web chat, a chat platform); "
                        "there is none here.", is_error=True)


async def _stop(control: ConversationControl, _args: str) -> CommandReply:
    """``/stop``: end the turn running now; the conversation, its queue and its heartbeat go on
    (the conversation interrupted the turn when the command arrived, see ``URGENT_COMMANDS``)."""
    if getattr(control, "stopped_turn", False):
        return CommandReply("Stopped the answer. The conversation and its heartbeat go on.")
    return CommandReply("Nothing is running: nothing to stop. (/suspend puts the whole conversation aside.)")


async def _suspend(control: ConversationControl, _args: str) -> CommandReply:
    """``/suspend``: end a running turn, clear the heartbeat and end the conversation; the next
    message starts a new one and ``/resume ID`` picks this one up again."""
    suspend = getattr(control, "suspend_conversation", None)
    if suspend is None or control.session_id is None:
        return CommandReply("No conversation to suspend.")
    suspended = await suspend()
    return CommandReply(
        f"Conversation {suspended} suspended.{_cleared_note(control)} "
        f"/resume {suspended} picks it up again; the next message starts a new conversation."
    )


async def _resume(control: ConversationControl, args: str) -> CommandReply:
    if not args:
        return await _sessions(control, "")
    try:
        session_id = await control.resume(args.split()[0])
    except StoreError as exc:
        return CommandReply(str(exc), is_error=True)
    record = await asyncio.to_thread(control.store.get_session, session_id)
    return CommandReply(
        f"Resumed {session_id} — {_short(record.title) or 'untitled'} ({record.message_count} messages)."
        + _cleared_note(control)
    )


async def _sessions(control: ConversationControl, args: str) -> CommandReply:
    heads = await asyncio.to_thread(control.store.list_conversations, limit=10)
    if not heads:
        return CommandReply("No stored conversations yet.")
    lines = ["Recent conversations (resume with /resume ID):"]
    for head in heads:
        s = head.head
        when = datetime.fromtimestamp(s.updated_at).strftime("%Y-%m-%d %H:%M")
        mark = " *" if s.id == control.session_id else ""
        lines.append(f"  {s.id}  {when}  {s.message_count:>4} msgs  {_short(s.title)}{mark}")
    return CommandReply("\n".join(lines))


async def _title(control: ConversationControl, args: str) -> CommandReply:
    if control.session_id is None:
        return CommandReply("No conversation yet: send a message first.", is_error=True)
    if not args:
        record = await asyncio.to_thread(control.store.get_session, control.session_id)
        return CommandReply(f"Title: {record.title or '(untitled)'}")
    try:
        title = clean_title(args)
    except ValueError as exc:
        return CommandReply(f"{str(exc)[:1].upper()}{str(exc)[1:]}; the title stays as it was.", is_error=True)
    await asyncio.to_thread(control.store.update_session, control.session_id, title=title)
    return CommandReply(f"Title set: {title}")


async def _usage(control: ConversationControl, _args: str) -> CommandReply:
    if control.session_id is None:
        return CommandReply("No conversation yet: nothing used.")
    chain = await asyncio.to_thread(control.store.parent_chain, control.session_id)
    total = sum((s.usage for s in chain), Usage())
    return CommandReply(
        "Tokens this conversation: "
        f"{total.input_tokens:,} input, {total.cache_read_tokens:,} cache read, "
        f"{total.cache_write_tokens:,} cache write, {total.output_tokens:,} output "
        f"— cache hit ratio {total.cache_hit_ratio:.0%}"
    )


def _tools(control: ConversationControl, _args: str) -> CommandReply:
    names = control.tool_names()
    return CommandReply("Tools pinned for this session: " + (", ".join(names) or "none"))


def _skills(control: ConversationControl, _args: str) -> CommandReply:
    skills = control.skills()
    if not skills:
        return CommandReply("No skills. Add one as skills/<name>/SKILL.md in the profile.")
    return CommandReply("\n".join(["Skills:"] + [f"  {n} — {d}" for n, d in skills]))


MODEL_LIST_TIMEOUT = 10.0
"""Seconds /model waits for the endpoint's model list before switching unchecked."""


async def _model(control: ConversationControl, args: str) -> CommandReply:
    if not args:
        return CommandReply(f"Model: {control.model_name()}")
    name = args.split()[0]
    offered, why_unchecked = await _offered_models(control)
    if offered is not None and name not in offered:
        close = difflib.get_close_matches(name, offered, n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        shown = ", ".join(offered[:10]) + (f" and {len(offered) - 10} more" if len(offered) > 10 else "")
        return CommandReply(
            f"The endpoint has no model named {name!r}: the model stays {control.model_name()}.{hint} "
            f"It offers: {shown}.",
            is_error=True,
        )
    control.set_model(name)
    checked = (
        "the endpoint lists it"
        if offered is not None
        else f"the name could not be checked: {why_unchecked}"
    )
    return CommandReply(
        f"Model switched to {control.model_name()} ({checked}; the stored system prompt stays, "
        "no refresh needed)."
    )


async def _offered_models(control: ConversationControl) -> tuple[list[str] | None, str]:
    """The endpoint's model list, or ``None`` and why it could not be had."""
    from vigil.models.base import ModelError

    agent = getattr(control, "agent", None)
    list_models = getattr(getattr(agent, "client", None), "list_models", None)
    if list_models is None:
        return None, "this client has no model list"
    try:
        offered = await asyncio.wait_for(list_models(), MODEL_LIST_TIMEOUT)
    except asyncio.TimeoutError:
        return None, f"the endpoint did not list its models within {MODEL_LIST_TIMEOUT:g} s"
    except ModelError as exc:
        return None, f"the endpoint offers no model list ({_short(str(exc), 120)})"
    if not offered:
        return None, "the endpoint's model list is empty"
    return list(offered), ""


def _quit(_control: ConversationControl, _args: str) -> CommandReply:
    return CommandReply("Bye.", action="quit")


async def _compress(control: ConversationControl, _args: str) -> CommandReply:
    if control.session_id is None:
        return CommandReply("No conversation yet: nothing to compress.", is_error=True)
    result = await control.compress()
    if not result.ok:
        return CommandReply(f"Not compressed: {result.failure}", is_error=True)
    return CommandReply(
        f"Compressed {result.summarised} earlier message(s) into a summary; the conversation "
        f"continues in {result.child_id} with {result.kept} recent message(s) and a freshly "
        "built system prompt."
    )


def build_registry() -> CommandRegistry:
    """The registry with every built-in command; front ends may register more."""
    registry = CommandRegistry()
    registry.register(SlashCommand("help", "list the commands", lambda c, a: CommandReply(registry.help_text()), aliases=("?",)))
    registry.register(SlashCommand("new", "start a new conversation (files are read afresh)", _new, aliases=("reset",)))
    registry.register(SlashCommand("resume", "switch to a stored conversation", _resume, usage="[ID]"))
    registry.register(SlashCommand("stop", "end the running answer (the conversation and its heartbeat go on)", _stop))
    registry.register(SlashCommand("steer", "guidance the running answer reads after its current step", _steer, usage="TEXT"))
    registry.register(SlashCommand("queue", "what waits behind the running answer; drop N or clear withdraws", _queue,
                                   usage="[drop N|clear]"))
    registry.register(SlashCommand("background", "run PROMPT beside the conversation; its answer is posted here",
                                   _background, usage="PROMPT", aliases=("btw",)))
    registry.register(
        SlashCommand("suspend", "put this conversation aside: end it and clear its heartbeat (/resume ID returns)", _suspend)
    )
    registry.register(
        SlashCommand(
            "heartbeat",
            "recurring instruction: every 15m [--quiet 22:00-07:00] [--for 3d | --until DATE] [--loud] PROMPT"
            " | status | pause | resume | clear",
            heartbeat_slash,
            usage="[...]",
            aliases=("hb",),
        )
    )
    registry.register(SlashCommand("compress", "summarise older turns into a continuation session now", _compress))
    registry.register(cron_commands.COMMAND)
    registry.register(SlashCommand("sessions", "list recent conversations", _sessions))
    registry.register(SlashCommand("title", "show or set this conversation's title", _title, usage="[TEXT]"))
    registry.register(SlashCommand("usage", "tokens used and prompt-cache hit ratio", _usage))
    registry.register(SlashCommand("tools", "tools available in this session", _tools))
    registry.register(SlashCommand("skills", "skills of this profile", _skills))
    registry.register(SlashCommand("model", "show or switch the model", _model, usage="[NAME]"))
    registry.register(SlashCommand("quit", "leave (the conversation is kept)", _quit, aliases=("exit", "q")))
    return registry
