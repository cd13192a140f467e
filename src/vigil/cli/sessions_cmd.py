"""``vigil sessions``: list, show, search, export, rename, archive and delete stored conversations."""

from __future__ import annotations

import time
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from vigil.cli.arguments import SESSION_REF, WholeNumber
from vigil.cli.confirm import confirm_or_refuse, yes_option
from vigil.cli.context import AppContext, pass_app
from vigil.cli.render import console, echo_json, shorten, visible
from vigil.cli.export import (
    export_jsonl,
    export_markdown,
    message_to_dict,
    session_to_dict,
    write_private,
)
from vigil.store.records import SessionRecord
from vigil.store.search_query import parse as parse_query


MAX_LISTED = 100_000
"""The most sessions ``sessions list -n`` shows (0 shows all)."""
MAX_HITS = 10_000
"""The most matches ``sessions search -n`` shows."""


def _when(app: AppContext, epoch: float | None) -> str:
    """A stored time as people read it, in the profile's zone and naming it (``-`` if none)."""
    if epoch is None:
        return "-"
    from vigil.schedule.heartbeat.text import format_time

    try:
        return format_time(epoch, app.settings.timezone, seconds=False)
    except (OverflowError, ValueError, OSError):
        return "(a time no date can show)"


@click.group()
def sessions() -> None:
    """Work with stored conversations.

    A SESSION argument is a full id or any unique prefix of one (like git hashes).
    """


@sessions.command("list")
@click.option(
    "-n", "--limit", default=30, show_default=True, type=WholeNumber(0, MAX_LISTED),
    help="How many to show (0 = all).",
)
@click.option("--source", help="Only sessions from this source (cli, cron, web, api, ...).")
@click.option("--archived", is_flag=True, help="List only the archived conversations.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_app
def list_cmd(app: AppContext, limit: int, source: str | None, archived: bool, as_json: bool) -> None:
    """List conversations, most recent first.

    A compressed conversation appears once, under its newest continuation session id.
    Archived conversations (`vigil sessions archive`, or Archive in the web chat) are left
    out; --archived lists only them.
    """
    from vigil.store import archive

    heads = app.store.list_conversations()
    put_away = archive.archived_roots(app.store)
    heads = archive.split(heads, put_away)[1 if archived else 0]
    if source:
        heads = [h for h in heads if h.head.source == source]
    heads = heads[: limit or None]
    if as_json:
        echo_json(
            [
                {**session_to_dict(h.head), "conversation_root": h.root_id, "segments": h.segments,
                 "archived": h.root_id in put_away}
                for h in heads
            ]
        )
        return
    if not heads:
        if archived:
            console.print("No archived conversations.")
        elif put_away:
            console.print(f"No sessions listed; {len(put_away)} archived (`vigil sessions list --archived`).")
        else:
            console.print("No sessions yet. Start one with `vigil chat`.")
        return
    table = Table("id", "last active", "source", "msgs", "title", box=None)
    for h in heads:
        s = h.head
        marks = f" (+{h.segments - 1} earlier)" if h.segments > 1 else ""
        ended = " [dim](ended)[/dim]" if s.end_reason else ""
        table.add_row(
            s.id,
            _when(app, s.updated_at),
            escape(s.source),
            str(s.message_count),
            escape(shorten(s.title, 50)) + marks + ended,
        )
    console.print(table)


@sessions.command("show")
@click.argument("session", type=SESSION_REF)
@click.option("--full", is_flag=True, help="Show whole messages instead of one line each.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (metadata and messages).")
@pass_app
def show_cmd(app: AppContext, session: str, full: bool, as_json: bool) -> None:
    """Show a session: its metadata, messages and side sessions."""
    store = app.store
    record = store.get_session(store.resolve_session(session))
    messages = store.get_messages(record.id)
    forks = store.forks(record.id)
    if as_json:
        echo_json({
            **session_to_dict(record), "messages": [message_to_dict(m) for m in messages],
            "forks": [session_to_dict(f) for f in forks],
        })
        return
    console.print(f"[bold]{escape(visible(record.title or 'untitled'))}[/bold]  {record.id}")
    console.print(
        f"source {record.source} · started {_when(app, record.started_at)} · "
        f"{record.message_count} messages · model {visible(record.model or '-')}",
        markup=False,
    )
    if record.parent_id:
        console.print(f"continues {record.parent_id}", markup=False)
    if record.forked_from:
        console.print(f"a /background task of {record.forked_from}", markup=False)
    if record.end_reason:
        console.print(f"ended {_when(app, record.ended_at)} ({record.end_reason})", markup=False)
    console.print()
    for m in messages:
        text = m.content or ""
        if m.tool_calls:
            text += " ".join(f"→ {c.name}({shorten(c.arguments, 60)})" for c in m.tool_calls)
        body = visible(text) if full else shorten(text, 100)
        console.print(f"[bold]{m.seq:>4} {m.role:<9}[/bold] {escape(body)}")
    if forks:
        console.print()
        console.print(f"{len(forks)} /background task(s), each in a session of its own:", markup=False)
        for f in forks:
            state = f"ended ({f.end_reason})" if f.end_reason else "running"
            console.print(f"  {f.id}  {_when(app, f.started_at)}  {state}  {visible(f.title or '')}", markup=False)


@sessions.command("search")
@click.argument("query", nargs=-1, required=True)
@click.option(
    "-n", "--limit", default=20, show_default=True, type=WholeNumber(1, MAX_HITS),
    help="How many matches to show.",
)
@click.option("--session", "session_ref", metavar="ID", type=SESSION_REF, help="Only search this session (id or prefix).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_app
def search_cmd(
    app: AppContext, query: tuple[str, ...], limit: int, session_ref: str | None, as_json: bool
) -> None:
    """Search every message of this profile.

    A full-text search.

    \b
      pine cone         messages holding both words
      '"pine cone"'     the phrase (quoted for the shell too)
      pine*             words starting with pine: pines, pineapple
      pine OR cedar     either word
      pine NOT cone     pine, but not cone
    OR and NOT are operators in capitals only; every other character is searched for as
    text, never as syntax. A message that compression carried into a continuation is listed
    once, under the newest session that holds it.
    """
    text = " ".join(query)
    parsed = parse_query(text)
    if not parsed.clauses:
        raise click.ClickException("nothing to search for: give a word with letters or digits")
    if not parsed.can_match:
        raise click.ClickException(
            "nothing to search for: NOT only leaves messages out; add a word to find, "
            "e.g. pine NOT cone"
        )
    store = app.store
    session_id = store.resolve_session(session_ref) if session_ref is not None else None
    hits = store.search(text, limit=limit, session_id=session_id)
    if as_json:
        echo_json(
            [
                {
                    "session_id": h.session_id,
                    "message_id": h.message_id,
                    "role": h.role,
                    "snippet": h.snippet,
                    "created_at": h.created_at,
                    "session_title": h.session_title,
                }
                for h in hits
            ]
        )
        return
    if not hits:
        console.print("No matches.")
        return
    for h in hits:
        console.print(
            f"[bold]{h.session_id}[/bold] {_when(app, h.created_at)} {h.role:<9} "
            f"{escape(shorten(h.snippet, 110))}"
        )


@sessions.command("export")
@click.argument("session", type=SESSION_REF)
@click.option(
    "--format", "fmt", type=click.Choice(["jsonl", "markdown"]), default="jsonl", show_default=True
)
@click.option("--conversation", is_flag=True, help="Include the earlier sessions it continues.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write here.")
@pass_app
def export_cmd(
    app: AppContext, session: str, fmt: str, conversation: bool, output: Path | None
) -> None:
    """Export a session's transcript.

    As JSON Lines or Markdown.
    """
    store = app.store
    session_id = store.resolve_session(session)
    ids = [s.id for s in store.parent_chain(session_id)] if conversation else [session_id]
    lines = (export_jsonl if fmt == "jsonl" else export_markdown)(store, ids)
    text = "\n".join(lines) + "\n"
    if output:
        try:
            write_private(output, text)
        except OSError as exc:
            raise click.ClickException(f"cannot write {output}: {exc.strerror or exc}") from None
        console.print(f"Exported {len(ids)} session(s) to {output}", style="dim", markup=False)
    else:
        click.echo(text, nl=False)


@sessions.command("rename")
@click.argument("session", type=SESSION_REF)
@click.argument("title")
@pass_app
def rename_cmd(app: AppContext, session: str, title: str) -> None:
    """Give a session a new title."""
    from vigil.store.titles import clean_title

    try:
        title = clean_title(title)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    store = app.store
    record = store.update_session(store.resolve_session(session), title=title)
    # Plain output: the title is the user's text, never rich markup.
    click.echo(f"Renamed {record.id} to '{record.title}'")


@sessions.command("archive")
@click.argument("session", type=SESSION_REF)
@click.option("--undo", is_flag=True, help="Bring an archived conversation back into the list.")
@pass_app
def archive_cmd(app: AppContext, session: str, undo: bool) -> None:
    """Take a conversation out of the list; nothing is deleted.

    It leaves `vigil sessions list` and the web chat's list. It stays searchable and can be resumed; `vigil sessions list --archived` lists it.
    """
    from vigil.store import archive

    store = app.store
    record = store.get_session(store.newest_continuation(store.resolve_session(session)))
    changed = archive.set_archived(store, record.id, not undo, now=time.time())
    title = visible(record.title or "untitled")
    if undo:
        said = f"Brought back {record.id} ('{title}')." if changed else f"{record.id} ('{title}') was not archived."
    else:
        said = f"Archived {record.id} ('{title}')." if changed else f"{record.id} ('{title}') was archived already."
    click.echo(said)


@sessions.command("delete")
@click.argument("session", type=SESSION_REF)
@click.option(
    "--conversation",
    is_flag=True,
    help="Delete every session of its conversation (compression continuations and what they continue).",
)
@yes_option
@pass_app
def delete_cmd(app: AppContext, session: str, conversation: bool, yes: bool) -> None:
    """Delete a session and its messages.

    This cannot be undone.

    A session that belongs to a compressed conversation (one that a continuation continues,
    or a continuation itself) is deleted only with the rest of its conversation, with
    --conversation: deleting one part alone would leave the conversation cut in two.
    """
    store = app.store
    record = store.get_session(store.resolve_session(session))
    chain = store.conversation_sessions(record.id)
    messages = sum(s.message_count for s in chain)
    if len(chain) > 1 and not conversation:
        raise click.ClickException(
            f"session {record.id} is one of the {len(chain)} sessions of a conversation "
            f"({_chain_text(chain)}); deleting it alone would cut the conversation: add "
            f"--conversation to delete all {len(chain)} sessions ({messages} messages)"
        )
    title = visible(record.title or "untitled")
    if len(chain) > 1:
        question = f"Delete the conversation '{title}': {len(chain)} sessions, {messages} messages?"
        action = f"delete the {len(chain)} sessions of this conversation"
    else:
        question = f"Delete session {record.id} ({record.message_count} messages, {title})?"
        action = f"delete session {record.id}"
    confirm_or_refuse(question, yes=yes, action=action)
    ids = [s.id for s in chain]
    _forget_conversation(app, ids)
    gone = store.delete_sessions(ids)
    store.gateway.forget_sessions(ids, now=time.time())  # its words in the gateway's inbox and outbox
    if gone.sessions == 1:
        console.print(f"Deleted session {record.id} ({gone.messages} messages).", markup=False)
    else:
        console.print(
            f"Deleted the conversation: {gone.sessions} sessions, {gone.messages} messages.", markup=False
        )


def _forget_conversation(app: AppContext, session_ids: list[str]) -> None:
    """Before sessions are deleted: their heartbeats are cleared and their conversation's
    archive entry removed (as the web chat's Delete does; the gateway's inbox and outbox forget
    their text right after)."""
    from vigil.schedule.heartbeat.repo import HeartbeatRepo
    from vigil.store import archive

    repo = HeartbeatRepo(app.store)
    for session_id in session_ids:
        repo.clear(session_id)
    archive.forget(app.store, [archive.root_of(app.store, session_ids[0])])


def _chain_text(chain: list[SessionRecord], most: int = 6) -> str:
    """The ids of a conversation's sessions, oldest first (the middle left out when long)."""
    ids = [s.id for s in chain]
    if len(ids) > most:
        ids = ids[: most - 2] + ["…"] + ids[-1:]
    return ", ".join(ids)
