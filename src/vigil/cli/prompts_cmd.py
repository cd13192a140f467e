"""``vigil sessions refresh-prompts`` and ``vigil sessions repair-prompts``."""

from __future__ import annotations

import click
from rich.markup import escape

from vigil.agent.session_prompt import PromptKeeper
from vigil.cli.context import AppContext, pass_app
from vigil.cli.render import console, echo_json, shorten
from vigil.clock import SystemClock
from vigil.prompt.epoch import read_refresh_state
from vigil.prompt.maintenance import find_damaged, request_refresh


@click.command("refresh-prompts")
@click.option("--session", "session_ref", metavar="ID", help="Only this session (id or unique prefix).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (for upgrade scripts).")
@pass_app
def refresh_prompts(app: AppContext, session_ref: str | None, as_json: bool) -> None:
    """Rebuild system prompts on the next turn.

    Sessions rebuild their system prompt from the current files on their next turn.

    Use it after editing SOUL.md, skills, AGENTS.md or USER.md. It only records the request in
    state.db: no running gateway or restart is needed, and a process started later honours it.
    Each refreshed session pays one prompt-cache miss; its history is kept. A compressed
    session forwards the request to the session its conversation continues in.
    """
    outcome = request_refresh(app.store, session_ref)
    if as_json:
        echo_json(outcome.as_dict())
        return
    if outcome.scope == "profile":
        console.print(
            "Requested a system prompt refresh for every session in this profile "
            f"({outcome.sessions_with_prompt} session(s) with a stored prompt)."
        )
        console.print(
            "Each rebuilds its prompt from the current SOUL.md, skills and context files on its "
            "next turn (one prompt-cache miss per session); conversation history is kept."
        )
        return
    if outcome.redirected:
        console.print(
            f"Session {outcome.requested_session} was compressed; its conversation continues in "
            f"{outcome.target_session}, so the request was recorded there."
        )
    console.print(f"Requested a system prompt refresh for session {outcome.target_session}.")
    if outcome.sessions_with_prompt:
        console.print(
            "It rebuilds its prompt from the current SOUL.md, skills and context files on its next "
            "turn (one prompt-cache miss); conversation history is kept."
        )
    else:
        console.print("It has no stored prompt yet: its first turn builds one from the current files.")


@click.command("repair-prompts")
@click.option("--session", "session_ref", metavar="ID", help="Only check this session.")
@click.option("--dry-run", is_flag=True, help="Only list what is damaged; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_app
def repair_prompts(app: AppContext, session_ref: str | None, dry_run: bool, as_json: bool) -> None:
    """Rebuild the stored prompts that are damaged.

    Find sessions whose stored prompt is missing, empty or fails its hash, and rebuild
    exactly those from the current files. Healthy sessions are not touched.
    """
    store = app.store
    damaged = find_damaged(store, session_ref)
    repaired: list[str] = []
    if not dry_run and damaged:
        keeper = PromptKeeper(store, app.profile, app.settings, SystemClock())
        state = read_refresh_state(store)
        for damage in damaged:
            keeper.rebuild(damage.session.id, state, f"repair ({damage.problem})")
            repaired.append(damage.session.id)
    if as_json:
        echo_json(
            {
                "dry_run": dry_run,
                "damaged": [
                    {"session_id": d.session.id, "problem": d.problem, "title": d.session.title}
                    for d in damaged
                ],
                "repaired": repaired,
            }
        )
        return
    if not damaged:
        console.print("No damaged system prompts found.")
        return
    verb = "Would repair" if dry_run else "Repaired"
    for d in damaged:
        console.print(f"{verb} {d.session.id}: prompt {d.problem} — {escape(shorten(d.session.title, 50))}")
    if dry_run:
        console.print(f"{len(damaged)} session(s) need repair; run without --dry-run to rebuild them.")
    else:
        console.print(f"{len(repaired)} session(s) rebuilt from the current files.")


def register(group: click.Group) -> None:
    """Attach the prompt maintenance commands to ``vigil sessions``."""
    group.add_command(refresh_prompts)
    group.add_command(repair_prompts)
