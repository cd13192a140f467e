"""``vigil usage``: tokens by kind and the prompt-cache hit ratio."""

from __future__ import annotations

import click
from rich.markup import escape
from rich.table import Table

from vigil.cli.arguments import SESSION_REF, WholeNumber
from vigil.cli.context import AppContext, pass_app
from vigil.cli.render import console, echo_json, shorten
from vigil.store.deletions import DELETED_KEY, Deleted
from vigil.usage import Usage


MAX_LISTED = 100_000
"""The most sessions ``usage -n`` lists (0 lists all)."""


def _row(usage: Usage) -> dict[str, float | int]:
    return {**usage.as_dict(), "cache_hit_ratio": round(usage.cache_hit_ratio, 4)}


@click.command()
@click.option("--session", "session_ref", metavar="ID", type=SESSION_REF, help="Only this session (id or prefix).")
@click.option(
    "-n", "--limit", default=20, show_default=True, type=WholeNumber(0, MAX_LISTED),
    help="Sessions to list (0 = all).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option(
    "--heartbeats", is_flag=True,
    help="Per conversation: heartbeat turns and their tokens (uncached, cached, output) of the last 24 hours and 7 days.",
)
@pass_app
def usage(app: AppContext, session_ref: str | None, limit: int, as_json: bool, heartbeats: bool) -> None:
    """Show tokens used and the cache hit ratio.

    Uncached input, cache read, cache write and output tokens, and the cache hit
    ratio, per session and in total. With --heartbeats: what heartbeat turns cost per
    conversation, beside heartbeat.daily_token_budget.

    The total counts the sessions that exist; when sessions were deleted, a line below it
    (and "excluded_deleted" in --json) says how much they took with them.
    """
    store = app.store
    if heartbeats:
        from vigil.cli.heartbeat_usage import heartbeat_usage

        only = None if session_ref is None else store.resolve_session(session_ref)
        heartbeat_usage(store, app.settings.heartbeat.daily_token_budget, as_json, only)
        return
    if session_ref is not None:
        sessions = [store.get_session(store.resolve_session(session_ref))]
    else:
        sessions = store.list_sessions()
    total = sum((s.usage for s in sessions), Usage())
    deleted = _deleted(app) if session_ref is None else Deleted()
    shown = sessions if session_ref is not None or not limit else sessions[:limit]
    if as_json:
        echo_json(
            {
                "sessions": [
                    {"id": s.id, "title": s.title, "model": s.model, **_row(s.usage)} for s in shown
                ],
                "total": {**_row(total), "sessions": len(sessions)},
                "excluded_deleted": deleted.to_json(),
            }
        )
        return
    table = Table("session", "title", "input", "cache read", "cache write", "output", "hit", box=None)
    for s in shown:
        u = s.usage
        table.add_row(
            s.id,
            escape(shorten(s.title, 30)),
            f"{u.input_tokens:,}",
            f"{u.cache_read_tokens:,}",
            f"{u.cache_write_tokens:,}",
            f"{u.output_tokens:,}",
            f"{u.cache_hit_ratio:.0%}",
        )
    table.add_row(
        f"total ({len(sessions)})",
        "",
        f"{total.input_tokens:,}",
        f"{total.cache_read_tokens:,}",
        f"{total.cache_write_tokens:,}",
        f"{total.output_tokens:,}",
        f"{total.cache_hit_ratio:.0%}",
        style="bold",
    )
    console.print(table)
    if deleted.sessions:
        u = deleted.usage
        console.print(
            f"The total leaves out {deleted.sessions} deleted session(s): {deleted.messages:,} messages, "
            f"{u.prompt_tokens:,} prompt and {u.output_tokens:,} output tokens.",
            style="dim",
            markup=False,
        )


def _deleted(app: AppContext) -> Deleted:
    """What sessions deleted so far took with them (counted by the store as they went)."""
    entry = app.store.get_meta(DELETED_KEY)
    return Deleted.from_json(None if entry is None else entry.value)


COMMANDS = [usage]
