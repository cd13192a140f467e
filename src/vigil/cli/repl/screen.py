"""What the REPL shows besides the turns: its bottom toolbar, and the recap of a conversation
picked up again (:mod:`vigil.cli.recap`)."""

from __future__ import annotations

from rich.markup import escape

from vigil.cli.recap import SHOWN_HEARTBEATS, build_recap
from vigil.cli.recap import mark_closed as mark_recap_closed
from vigil.cli.render import local_time, relative, shorten
from vigil.cli.repl.reading import console
from vigil.runtime.conversation import Conversation
from vigil.schedule.heartbeat.text import is_silent_answer
from vigil.schedule.intervals import format_interval
from vigil.store import SessionStore, StoreError


def toolbar(conversation: Conversation, profile: str) -> str:
    """The bottom line: profile, session, model, what runs and waits, the heartbeat."""
    controller = conversation.controller
    session = controller.session_id or "new conversation"
    waiting = conversation.queued
    work = " · answering" if conversation.running_turn else ""
    work += f" · {waiting} queued" if waiting else ""
    return (
        f" vigil · {profile} · {session} · {controller.model_name()}{work}{_heartbeat_status(conversation)}"
        "  (Esc Enter: newline, /help)"
    )


def _heartbeat_status(conversation: Conversation) -> str:
    scheduler, session_id = conversation.scheduler, conversation.controller.session_id
    if scheduler is None or session_id is None:
        return ""
    heartbeat = scheduler.known(session_id)
    if heartbeat is None:
        return ""
    every = format_interval(heartbeat.interval)
    if conversation.heartbeat_waiting_for_draft:
        return " · ♥ due, waiting for your draft (send or clear it)"
    if scheduler.emergency_stopped:
        return f" · ♥ {every} on emergency stop"
    fire = heartbeat.fire_at()
    if not heartbeat.active:
        return f" · ♥ {every} paused"
    if fire is None:
        return f" · ♥ {every} ending"
    left = fire - scheduler.clock.now()
    when = local_time(fire)[-5:]
    return f" · ♥ next {when} (in {relative(left)})" if left > 0 else f" · ♥ due ({when})"


def show_recap(store: SessionStore, session_id: str) -> None:
    """Print the last exchange, and the heartbeat turns nobody saw (see :mod:`vigil.cli.recap`)."""
    try:
        recap = build_recap(store, session_id)
    except StoreError as exc:
        console.print(f"[yellow]No recap: {escape(str(exc))}[/yellow]")
        return
    width = max(40, console.width - 12)
    if recap.last is not None:
        console.print(f"[dim]Last exchange ({local_time(recap.last.at)}):[/dim]")
        console.print(f"  [bold]you:[/bold] {escape(shorten(recap.last.asked, width))}")
        console.print(f"  [cyan]vigil:[/cyan] {escape(shorten(recap.last.answer or '(no answer)', width))}")
    unseen = recap.unseen_heartbeats
    if unseen:
        turns = "turn" if len(unseen) == 1 else "turns"
        news = [beat for beat in unseen if not is_silent_answer(beat.answer)]
        quiet = len(unseen) - len(news)
        said = f" ({quiet} found nothing changed)" if quiet else ""
        console.print(
            f"[magenta]♥ {len(unseen)} heartbeat {turns} fired while the conversation was not open"
            f"{escape(said)}{':' if news else '.'}[/magenta]"
        )
        if len(news) > SHOWN_HEARTBEATS:
            console.print(f"  [dim]… {len(news) - SHOWN_HEARTBEATS} earlier not shown[/dim]")
        for beat in news[-SHOWN_HEARTBEATS:]:
            answer = shorten(beat.answer or "(no answer)", width - 18)
            console.print(f"  [magenta]♥[/magenta] [dim]{local_time(beat.at)}[/dim] {escape(answer)}")


def mark_closed(store: SessionStore, session_id: str, now: float) -> None:
    """Note when the conversation was left, for the next recap (a store error only makes it
    less precise)."""
    try:
        mark_recap_closed(store, session_id, now)
    except StoreError:
        pass
