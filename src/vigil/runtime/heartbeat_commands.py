"""``/heartbeat`` (alias ``/hb``): parse, apply, and word the replies.

The same functions serve the slash command in every front end and ``vigil heartbeat ...`` in
the shell, so the rules and the messages are identical everywhere. Input is validated in full
before anything is written: a bad command leaves the existing heartbeat as it was.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Sequence

from vigil.runtime.slash import CommandReply, ConversationControl
from vigil.schedule import estop
from vigil.schedule.heartbeat.lease import GATEWAY, Lease, this_host
from vigil.schedule.heartbeat.cost import DAY, conversation_cost
from vigil.schedule.heartbeat.options import (
    HeartbeatOptions,
    OptionError,
    OptionWords,
    resolve,
    take_options,
)
from vigil.schedule.heartbeat.record import BUDGET, Heartbeat, HeartbeatError, NoHeartbeat, Route
from vigil.schedule.heartbeat.repo import HeartbeatRepo
from vigil.schedule.heartbeat.text import SILENT_ANSWER, format_time
from vigil.schedule.intervals import IntervalError, format_interval, parse_interval

SUBCOMMANDS = ("every", "status", "pause", "resume", "clear")
MISSING_INTERVAL = "missing interval: give a number and a unit, e.g. 15m"
MAX_PROMPT_CHARS = 8_000
HEART = "♥"
NOBODY = "nobody — start vigil gateway run"
"""The owner of an active heartbeat that no process runs."""


@dataclass(frozen=True, slots=True)
class Wording:
    """How replies refer to the commands of the front end they are shown in."""

    set_usage: str
    resume: str
    clear: str


SLASH = Wording(
    "/heartbeat every <interval> [--quiet HH:MM-HH:MM] [--for DURATION | --until DATE] [--loud] <prompt>"
    "  (e.g. /heartbeat every 15m --quiet 22:00-07:00 --for 3d check the CI run)",
    "/heartbeat resume",
    "/heartbeat clear",
)
SLASH_USAGE = SLASH.set_usage


class HeartbeatInputError(ValueError):
    """A heartbeat command that breaks a rule; the message names it."""


@dataclass(frozen=True, slots=True)
class HeartbeatCommand:
    """A parsed, validated command: ``action`` is one of :data:`SUBCOMMANDS`."""

    action: str
    interval: int | None = None
    prompt: str | None = None
    options: HeartbeatOptions = HeartbeatOptions()


def parse_command(args: str, zone: str | None = None, now: float | None = None) -> HeartbeatCommand:
    """Parse what follows ``/heartbeat``; raises :class:`HeartbeatInputError`. ``zone`` (the
    profile's) and ``now`` give ``--quiet`` and ``--until`` their meaning."""
    words = args.strip().split(maxsplit=1)
    if not words:
        return HeartbeatCommand("status")
    action = words[0].lower()
    rest = words[1] if len(words) > 1 else ""
    if action not in SUBCOMMANDS:
        raise HeartbeatInputError(
            f"unknown /heartbeat subcommand '{words[0]}': use every, status, pause, resume or clear"
        )
    if action != "every":
        if rest.strip():
            raise HeartbeatInputError(f"/heartbeat {action} takes no arguments")
        return HeartbeatCommand(action)
    try:
        words, interval_text, prompt = take_options(rest)
    except OptionError as exc:
        raise HeartbeatInputError(str(exc)) from None
    if interval_text is None:
        raise HeartbeatInputError(MISSING_INTERVAL)
    return validated_set(interval_text, prompt, words, zone, now)


def validated_words(
    words: Sequence[str], options: OptionWords = OptionWords(), zone: str | None = None, now: float | None = None
) -> HeartbeatCommand:
    """A validated ``every`` command from shell words (the interval, then the prompt) and the
    shell command's options."""
    if not words:
        raise HeartbeatInputError(MISSING_INTERVAL)
    return validated_set(words[0], " ".join(words[1:]), options, zone, now)


def validated_set(
    interval_text: str, prompt: str, options: OptionWords = OptionWords(), zone: str | None = None,
    now: float | None = None,
) -> HeartbeatCommand:
    """A validated ``every`` command from its parts (used by the shell command too)."""
    try:
        interval = parse_interval(interval_text)
    except IntervalError as exc:
        raise HeartbeatInputError(str(exc)) from None
    text = prompt.strip()
    if not text:
        raise HeartbeatInputError(
            "missing prompt: write the instruction after the interval; it cannot be only whitespace"
        )
    if len(text) > MAX_PROMPT_CHARS:
        raise HeartbeatInputError(f"the prompt is too long: at most {MAX_PROMPT_CHARS} characters")
    try:
        resolved = resolve(options, interval, zone, time.time() if now is None else now)
    except OptionError as exc:
        raise HeartbeatInputError(str(exc)) from None
    return HeartbeatCommand("every", interval, text, resolved)


def input_error_reply(error: HeartbeatInputError, wording: Wording = SLASH) -> CommandReply:
    """The reply to a command that breaks a rule: the rule, then how the command is written."""
    return CommandReply(f"{_capital(str(error))}.\nUsage: {wording.set_usage}", is_error=True)


def apply_command(
    repo: HeartbeatRepo, session_id: str | None, command: HeartbeatCommand, wording: Wording = SLASH,
    zone: str | None = None, owner_of: Callable[[Heartbeat], str] | None = None,
    route: Route | None = None, budget: int | None = None,
) -> CommandReply:
    """Carry out a validated command on ``session_id``'s heartbeat (synchronous: store calls).
    ``budget``: ``heartbeat.daily_token_budget``, for the status reply.
    Times in the reply are shown in ``zone`` (the profile's ``timezone``; ``None``: the machine's).
    ``owner_of`` words who runs a heartbeat, for the status reply (``None``: not shown).
    ``route``: where a gateway conversation's heartbeat turns are delivered (stored with it).

    A damaged record can be replaced (``every``) or removed (``clear``); the other commands
    answer with a one-line error that says how to remove it.
    """
    now = repo.clock.now()
    if command.action == "every":
        assert session_id is not None and command.interval is not None and command.prompt is not None
        new, replaced = repo.set(
            session_id, command.prompt, command.interval, route=route, options=command.options
        )
        return CommandReply(set_message(new, replaced, now, zone))
    try:
        existing = repo.get(session_id) if session_id is not None else None
    except HeartbeatError as exc:
        assert session_id is not None
        if command.action == "clear":
            repo.clear(session_id)
            return CommandReply(f"{HEART} Heartbeat cleared (its record was damaged).")
        return CommandReply(
            f"The heartbeat of this conversation cannot be read ({exc}); {wording.clear} removes it.",
            is_error=True,
        )
    if command.action == "status":
        stopped = estop.status(repo.store) is not None
        owner = None if existing is None or owner_of is None else owner_of(existing)
        spent = None
        if existing is not None and session_id is not None:
            spent = conversation_cost(repo.store, session_id, now - DAY)
        text = status_message(existing, now, stopped, wording, zone, owner)
        if spent is not None:
            limit = f" of the daily budget of {budget:,}" if budget else " (no daily budget)"
            turns = "1 heartbeat turn" if spent.turns == 1 else f"{spent.turns} heartbeat turns"
            text += f"\n  last 24 h: {turns}, {spent.tokens:,} tokens{limit}"
        return CommandReply(text)
    if existing is None or session_id is None:
        return CommandReply(_none_message(command.action, wording), is_error=command.action != "clear")
    try:
        if command.action == "pause":
            heartbeat, changed = repo.pause(session_id)
            if not changed:
                return CommandReply(f"{HEART} Heartbeat is already paused ({_every(heartbeat)}).")
            return CommandReply(
                f"{HEART} Heartbeat paused ({_every(heartbeat)}): {shorten(heartbeat.prompt)}\n"
                f"  Resume it with {wording.resume}; the timer then restarts from that moment."
            )
        if command.action == "resume":
            heartbeat, changed = repo.resume(session_id)
            when = describe_time(heartbeat.next_due, now, zone)
            if not changed:
                return CommandReply(f"{HEART} Heartbeat is already active; next fire {when}.")
            return CommandReply(f"{HEART} Heartbeat resumed ({_every(heartbeat)}): next fire {when}.")
    except NoHeartbeat:
        return CommandReply(_none_message(command.action, wording), is_error=True)
    except HeartbeatError as exc:
        return CommandReply(f"{_capital(str(exc))}.", is_error=True)
    removed = repo.clear(session_id)
    if removed is None:
        return CommandReply(_none_message("clear", wording))
    return CommandReply(
        f"{HEART} Heartbeat cleared ({_every(removed)}, fired {_times(removed.fire_count)})."
    )


# -- the slash command ----------------------------------------------------------------------------
async def heartbeat_slash(control: ConversationControl, args: str) -> CommandReply:
    """``/heartbeat ...`` typed in a conversation."""
    repo = _repo_of(control)
    settings = getattr(control, "settings", None)
    zone = getattr(settings, "timezone", None)
    budget = getattr(getattr(settings, "heartbeat", None), "daily_token_budget", None)
    try:
        command = parse_command(args, zone, repo.clock.now())
    except HeartbeatInputError as exc:
        return input_error_reply(exc)
    session_id = control.session_id
    if command.action == "every" and session_id is None:
        # Setting a heartbeat before the first message starts the conversation.
        ensure: Callable[[], Awaitable[str]] | None = getattr(control, "ensure_session", None)
        if ensure is None:
            return CommandReply("No conversation yet: send a message first.", is_error=True)
        session_id = await ensure()
    route: Route | None = getattr(control, "heartbeat_route", None)
    return await asyncio.to_thread(
        lambda: apply_command(repo, session_id, command, SLASH, zone, route=route, budget=budget)
    )


def _repo_of(control: Any) -> HeartbeatRepo:
    repo = getattr(control, "heartbeats", None)
    if isinstance(repo, HeartbeatRepo):
        return repo
    return HeartbeatRepo(control.store)


# -- wording -----------------------------------------------------------------------------------
def set_message(new: Heartbeat, replaced: Heartbeat | None, now: float, zone: str | None = None) -> str:
    """``♥ Heartbeat set (every 15m): <prompt, shortened>`` plus when it first fires."""
    lines = [f"{HEART} Heartbeat set ({_every(new)}): {shorten(new.prompt)}"]
    if replaced is not None:
        lines.append(f"  It replaces the previous heartbeat ({_every(replaced)}: {shorten(replaced.prompt, 40)}).")
    lines.append(f"  First fire {describe_time(new.fire_at(), now, zone)}, when the conversation is idle.")
    lines += option_lines(new, now, zone)
    return "\n".join(lines)


def option_lines(heartbeat: Heartbeat, now: float, zone: str | None = None) -> list[str]:
    """The options of a heartbeat as the set and status replies show them."""
    lines = []
    if heartbeat.quiet is not None:
        where = heartbeat.zone or "this machine's time zone"
        lines.append(f"  quiet:     {heartbeat.quiet} ({where}): no fire then; one due inside fires when it ends")
    if heartbeat.ends_at is not None:
        lines.append(f"  ends:      {describe_time(heartbeat.ends_at, now, zone)}, then it is cleared")
    if heartbeat.loud:
        lines.append("  answers:   every answer is delivered (--loud)")
    else:
        lines.append(f"  answers:   {SILENT_ANSWER} (nothing changed) is stored but not pushed to you")
    return lines


def status_message(
    heartbeat: Heartbeat | None, now: float, stopped: bool = False, wording: Wording = SLASH,
    zone: str | None = None, owner: str | None = None,
) -> str:
    """Interval, prompt, state, next fire (absolute and relative), fire count, last fire, and
    the owner when given (see :func:`owner_text`)."""
    if heartbeat is None:
        return "No heartbeat in this conversation. Set one with " + wording.set_usage
    state = "active" if heartbeat.active else "paused"
    if heartbeat.paused_by == BUDGET and not heartbeat.active:
        state = "paused (its turns went over heartbeat.daily_token_budget)"
    fire = heartbeat.fire_at()
    if heartbeat.ended(now):
        state = "ended"
        next_fire = "none: it has ended and is cleared when the gateway or a REPL next runs it"
    elif heartbeat.active and fire is None:
        next_fire = "none: it ends before the next one"
    elif heartbeat.active:
        overdue = fire is not None and fire <= now
        next_fire = describe_time(fire, now, zone) + (
            " — due now; it fires when the conversation is idle" if overdue else ""
        )
        if fire != heartbeat.next_due and not overdue:
            next_fire += " (after the quiet window)"
    else:
        next_fire = f"none while paused ({wording.resume} restarts the timer)"
    last = describe_time(heartbeat.last_fire, now, zone) if heartbeat.last_fire is not None else "never"
    lines = [
        f"{HEART} Heartbeat ({_every(heartbeat)}) — {state}",
        f"  prompt:    {shorten(heartbeat.prompt, 200)}",
        f"  next fire: {next_fire}",
        f"  fired:     {_times(heartbeat.fire_count)}; last fire: {last}",
        *option_lines(heartbeat, now, zone),
    ]
    if owner is not None:
        lines.append(f"  owner:     {owner}")
    if stopped:
        lines.append("  ⚠ the emergency stop is on (`vigil resume` releases it): heartbeats do not fire")
    return "\n".join(lines)


def owner_text(lease: Lease | None, heartbeat: Heartbeat) -> str:
    """Who runs ``heartbeat``: ``gateway``, ``REPL pid 4242`` (``on <host>`` when that is not
    this machine), or :data:`NOBODY` (``nobody (paused)`` for a paused one)."""
    if lease is None:
        return NOBODY if heartbeat.active else "nobody (paused)"
    who = "gateway" if lease.kind == GATEWAY else f"REPL pid {lease.pid}"
    return who if lease.host == this_host() else f"{who} on {lease.host}"


def owner_json(lease: Lease | None) -> dict[str, Any] | None:
    """The owner as ``vigil heartbeat list --json`` gives it (``None``: nobody)."""
    return None if lease is None else {"kind": lease.kind, "pid": lease.pid, "host": lease.host}


def describe_time(epoch: float | None, now: float, zone: str | None = None) -> str:
    """``at 2026-11-30 14:05:00 CET (in 14m)`` in ``zone`` (``None``: the machine's), or ``-``.
    A time no date can show (a damaged or absurd record) is described, not fatal."""
    if epoch is None:
        return "-"
    try:
        stamp = format_time(epoch, zone)
    except (OverflowError, ValueError, OSError):
        return f"at an impossible time ({epoch!r} s since 1970)"
    delta = epoch - now
    if abs(delta) < 1:
        rel = "now"
    elif delta > 0:
        rel = f"in {format_interval(round(delta))}"
    else:
        rel = f"{format_interval(round(-delta))} ago"
    return f"at {stamp} ({rel})"


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def shorten(text: str, width: int = 60) -> str:
    """One line of at most ``width`` characters, with an ellipsis when cut; control
    characters are shown as ``\\x1b`` ..., never sent to a terminal."""
    line = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", " ".join(text.split()))
    return line if len(line) <= width else line[: width - 1] + "…"


def _every(heartbeat: Heartbeat) -> str:
    return f"every {format_interval(heartbeat.interval)}"


def _times(count: int) -> str:
    return "once" if count == 1 else f"{count} times"


def _none_message(action: str, wording: Wording) -> str:
    if action == "clear":
        return "No heartbeat to clear in this conversation."
    return f"No heartbeat to {action} in this conversation. Set one with {wording.set_usage}"


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]
