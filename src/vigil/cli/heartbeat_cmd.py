"""``vigil heartbeat ...`` and the emergency stop, ``vigil pause`` / ``vigil resume``.

The heartbeat subcommands apply the same rules and print the same messages as the
``/heartbeat`` slash command (both use :mod:`vigil.runtime.heartbeat_commands`).
"""

from __future__ import annotations

import re
import socket
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from vigil.cli.arguments import SESSION_REF
from vigil.cli.context import AppContext, pass_app
from vigil.cli.render import console, echo_json, err_console, relative, shorten
from vigil.clock import SystemClock
from vigil.runtime.heartbeat_commands import (
    HeartbeatCommand,
    NOBODY,
    HeartbeatInputError,
    Wording,
    apply_command,
    input_error_reply,
    owner_json,
    owner_text,
    validated_words,
)
from vigil.runtime.slash import CommandReply
from vigil.schedule import estop
from vigil.schedule.heartbeat.lease import Lease, live_leases
from vigil.schedule.heartbeat.options import OptionWords
from vigil.schedule.heartbeat.record import Heartbeat, HeartbeatError
from vigil.schedule.heartbeat.repo import HeartbeatRepo, Listed
from vigil.schedule.heartbeat.text import format_time
from vigil.schedule.intervals import format_interval

WHERE_IT_FIRES = (
    "A heartbeat fires in the REPL that has its conversation open (`vigil chat --resume {id}`), "
    "otherwise in the running gateway (`vigil gateway run`)."
)

_session_option = click.option(
    "-s", "--session", "session_ref", required=True, metavar="ID|PREFIX", type=SESSION_REF,
    help="The conversation (a session id or a unique prefix; its newest continuation is used).",
)


def _wording(session_id: str) -> Wording:
    return Wording(
        f"vigil heartbeat set --session {session_id} [--quiet HH:MM-HH:MM] [--for DURATION | --until DATE] "
        "[--loud] <interval> <prompt>",
        f"vigil heartbeat resume --session {session_id}",
        f"vigil heartbeat clear --session {session_id}",
    )


def _resolve(app: AppContext, ref: str) -> str:
    store = app.store
    return store.newest_continuation(store.resolve_session(ref))


def _run(app: AppContext, ref: str, command: HeartbeatCommand) -> tuple[str, CommandReply]:
    session_id = _resolve(app, ref)
    clock = SystemClock()
    repo = HeartbeatRepo(app.store, clock)

    def owner_of(h: Heartbeat) -> str:
        return owner_text(live_leases(app.store, [h.session_id], clock.now()).get(h.session_id), h)

    budget = app.settings.heartbeat.daily_token_budget
    reply = apply_command(
        repo, session_id, command, _wording(session_id), app.settings.timezone, owner_of, budget=budget
    )
    return session_id, reply


def _show(reply: CommandReply) -> None:
    if reply.is_error:
        err_console.print(f"[red]Error:[/red] {escape(reply.text)}")
        click.get_current_context().exit(1)
    click.echo(reply.text)


@click.group()
def heartbeat() -> None:
    """Recurring instructions in conversations.

    A conversation has at most one heartbeat.

    \b
    In a chat, type /heartbeat every 15m <prompt> (or /hb ...). From the shell:
      vigil heartbeat list
      vigil heartbeat set --session ID 15m "check the CI run"
      vigil heartbeat set --session ID --quiet 22:00-07:00 --for 3d 15m "check the CI run"
      vigil heartbeat status|pause|resume|clear --session ID

    A heartbeat fires in the REPL that has its conversation open, otherwise in the running
    gateway (`vigil gateway run`); `vigil heartbeat list` shows which. Intervals: 90s, 10m,
    2h, 1d, 1h30m; at least 60 seconds. When nothing changed the agent answers HEARTBEAT_OK,
    which is stored but not pushed to a platform (--loud delivers every answer).
    """


@heartbeat.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (for scripts).")
@pass_app
def list_heartbeats(app: AppContext, as_json: bool) -> None:
    """List every heartbeat of the profile.

    Session, interval, status, next fire, fire count and owner: the process that runs it
    ("gateway", "REPL pid 4242"), or nobody.

    A record that cannot be read is listed with status ``damaged``; `vigil heartbeat clear`
    removes it.
    """
    listed = HeartbeatRepo(app.store).scan()
    stopped = estop.status(app.store)
    now = SystemClock().now()
    owners = live_leases(app.store, [item.session_id for item in listed], now)
    if as_json:
        echo_json([_as_json(item, owners.get(item.session_id)) for item in listed])
        return
    if stopped is not None:
        err_console.print("[yellow]⏸ The emergency stop is on (`vigil resume` releases it): nothing fires.[/yellow]")
    if not listed:
        click.echo("No heartbeats. Set one in a chat with /heartbeat every 15m <prompt>.")
        return
    table = Table(box=None, pad_edge=False)
    for column in ("session", "interval", "status", "next fire", "count"):
        table.add_column(column, no_wrap=True)
    ending = any(item.heartbeat is not None and item.heartbeat.ends_at is not None for item in listed)
    if ending:  # only then: the table is wide already
        table.add_column("ends", no_wrap=True)
    table.add_column("prompt", min_width=8)
    table.add_column("owner", min_width=7)  # "REPL pid 4242" may wrap in a narrow terminal
    unowned = False
    for item in listed:
        h = item.heartbeat
        if h is None:
            table.add_row(
                escape(item.session_id), "?", "damaged", "-", "-", *(["-"] if ending else []),
                escape(shorten(item.error, 40)), "-",
            )
            continue
        owner = owner_text(owners.get(h.session_id), h)
        unowned = unowned or owner == NOBODY
        table.add_row(
            h.session_id, format_interval(h.interval), _status(h, now), _next_fire(h, now, app.settings.timezone),
            str(h.fire_count), *([_ends(h, app.settings.timezone)] if ending else []), escape(shorten(h.prompt, 40)),
            escape(owner.split(" — ")[0]),
        )
    console.print(table)
    if unowned:
        # The full wording does not fit a column: the rows say "nobody", this line says more.
        click.echo(f"{NOBODY} (or open the conversation: vigil chat --resume ID)")


class _WordsCommand(click.Command):
    """A command whose positional words may start with ``-``: ``-5m`` then gets the interval
    rule, as in the slash command, instead of "no such option" — and ``-30s`` is never read
    as ``-s`` (the session) with ``0`` unknown. The command's own options are recognised
    anywhere, as click would; every other word, and everything after ``--``, is a word."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, _options_first(ctx, self.get_params(ctx), args))


_LONG_OPTION = re.compile(r"--[A-Za-z][A-Za-z0-9-]*(=.*)?", re.S)
"""An option's shape: a word shaped so is an option (a typo gets "no such option"); durations
such as -5m stay words."""


def _options_first(ctx: click.Context, params: list[click.Parameter], args: list[str]) -> list[str]:
    takes_value: dict[str, bool] = {}
    for param in params:
        if isinstance(param, click.Option):
            for name in (*param.opts, *param.secondary_opts):
                takes_value[name] = not (param.is_flag or param.count)
    options: list[str] = []
    words: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            words.extend(args[i + 1 :])
            break
        if arg in takes_value:
            options.append(arg)
            if takes_value[arg]:
                if i + 1 >= len(args):
                    raise click.UsageError(f"Option '{arg}' requires an argument.", ctx)
                options.append(args[i + 1])
                i += 1
        elif arg.startswith("--") and arg.partition("=")[0] in takes_value:
            options.append(arg)  # --session=ID
        elif not arg.startswith("--") and takes_value.get(arg[:2]):
            options.append(arg)  # -sID
        elif _LONG_OPTION.fullmatch(arg):
            options.append(arg)  # --quite: click says there is no such option (did you mean --quiet?)
        else:
            words.append(arg)
        i += 1
    return [*options, "--", *words]


@heartbeat.command("set", cls=_WordsCommand)
@_session_option
@click.option(
    "--quiet", "quiet", metavar="HH:MM-HH:MM",
    help="A daily window (profile's time zone; may cross midnight) with no fire; a slot due "
    "inside it fires once when it ends.",
)
@click.option("--for", "for_", metavar="DURATION", help="End the heartbeat after this long (3d, 12h, 1d12h).")
@click.option(
    "--until", "until", metavar="DATE",
    help="End the heartbeat then: 2026-12-24 (the end of that day), '2026-12-24 18:00' or with an offset.",
)
@click.option("--loud", is_flag=True, help="Deliver every answer, HEARTBEAT_OK (nothing changed) included.")
@click.option("--json", "as_json", is_flag=True, help="Print the heartbeat set as JSON.")
@click.argument("words", nargs=-1, metavar="INTERVAL PROMPT...")
@pass_app
def set_heartbeat(
    app: AppContext, session_ref: str, quiet: str | None, for_: str | None, until: str | None, loud: bool,
    as_json: bool, words: tuple[str, ...],
) -> None:
    """Set or replace a conversation's heartbeat.

    INTERVAL is a duration such as 15m or 1h30m; PROMPT is the instruction. An ended heartbeat
    (--for, --until) is cleared with a note in the conversation. Unless --loud, the agent is
    asked to answer HEARTBEAT_OK when nothing changed: that answer is stored but not sent to
    a messaging platform. A refused value changes nothing.
    """
    options = OptionWords(quiet, for_, until, loud)
    try:
        command = validated_words(words, options, app.settings.timezone, SystemClock().now())
    except HeartbeatInputError as exc:
        _show(input_error_reply(exc, _wording(session_ref)))
        return
    session_id, reply = _run(app, session_ref, command)
    if as_json and not reply.is_error:
        heartbeat = HeartbeatRepo(app.store).get(session_id)
        if heartbeat is not None:
            listed = Listed(session_id, heartbeat)
            owner = live_leases(app.store, [session_id], SystemClock().now()).get(session_id)
            echo_json(_as_json(listed, owner))
            return
    _show(reply)
    click.echo(WHERE_IT_FIRES.format(id=session_id))


def _simple(action: str, summary: str) -> click.Command:
    @heartbeat.command(action, help=summary)
    @_session_option
    @pass_app
    def command(app: AppContext, session_ref: str) -> None:
        _show(_run(app, session_ref, HeartbeatCommand(action))[1])

    return command


@heartbeat.command("status")
@_session_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON (as one entry of `heartbeat list --json`, with last_24h).")
@pass_app
def status(app: AppContext, session_ref: str, as_json: bool) -> None:
    """Show the interval, prompt, state, fires and options.

    Also the quiet window, the end, whether every answer is delivered, and the heartbeat
    turns and tokens of the last 24 hours beside heartbeat.daily_token_budget.
    """
    if not as_json:
        _show(_run(app, session_ref, HeartbeatCommand("status"))[1])
        return
    from vigil.schedule.heartbeat.cost import DAY, conversation_cost

    session_id = _resolve(app, session_ref)
    now = SystemClock().now()
    try:
        heartbeat = HeartbeatRepo(app.store).get(session_id)
    except HeartbeatError as exc:
        echo_json({"session": session_id, "status": "damaged", "error": str(exc)})
        return
    if heartbeat is None:
        echo_json(None)
        return
    owner = live_leases(app.store, [session_id], now).get(session_id)
    spent = conversation_cost(app.store, session_id, now - DAY)
    echo_json({
        **_as_json(Listed(session_id, heartbeat), owner),
        "last_24h": {"turns": spent.turns, "tokens": spent.tokens, **spent.usage.as_dict()},
        "daily_token_budget": app.settings.heartbeat.daily_token_budget,
    })


_simple("pause", "Stop firing; interval and prompt are kept.")
_simple("resume", "Start again; the timer restarts from now.")
_simple("clear", "Delete the heartbeat.")


def _next_fire(h: Heartbeat, now: float, zone: str | None) -> str:
    fire = h.fire_at()
    if fire is None or h.ended(now):
        return "-"
    try:
        when = format_time(fire, zone, seconds=False)
    except (OverflowError, ValueError, OSError):
        return "out of range"
    if fire <= now:
        return f"{when} (due)"
    return f"{when} (in {relative(fire - now)})"


def _status(h: Heartbeat, now: float) -> str:
    if h.ended(now):
        return "ended"
    return "paused (budget)" if h.paused_by and not h.active else h.status


def _ends(h: Heartbeat, zone: str | None) -> str:
    if h.ends_at is None:
        return "-"
    try:
        return format_time(h.ends_at, zone, seconds=False)
    except (OverflowError, ValueError, OSError):
        return "out of range"


def _as_json(item: Listed, owner: Lease | None) -> dict[str, Any]:
    h = item.heartbeat
    if h is None:
        return {"session": item.session_id, "status": "damaged", "error": item.error, "owner": owner_json(owner)}
    return {
        "session": h.session_id,
        "interval": format_interval(h.interval),
        "interval_seconds": h.interval,
        "status": h.status,
        "prompt": h.prompt,
        "next_fire": h.next_due,
        "last_fire": h.last_fire,
        "count": h.fire_count,
        "version": h.version,
        "route": None if h.route is None else {"platform": h.route.platform, "chat": h.route.chat, "thread": h.route.thread},
        "owner": owner_json(owner),
        "fire_at": h.fire_at(),
        "quiet": h.quiet,
        "zone": h.zone,
        "ends_at": h.ends_at,
        "ended": h.ended(SystemClock().now()),
        "loud": h.loud,
        "paused_by": h.paused_by,
    }


# -- the emergency stop -------------------------------------------------------------------------
@click.command("pause")
@click.option("--reason", default="", help="Why (shown by `vigil heartbeat list`).")
@pass_app
def pause(app: AppContext, reason: str) -> None:
    """Emergency stop for heartbeats and cron.

    They start no new turns until `vigil resume`.

    Work that is already running is not killed. Every process of the profile sees the flag.
    """
    already = estop.status(app.store)
    estop.engage(app.store, SystemClock().now(), reason=reason, by=socket.gethostname())
    if already is not None:
        click.echo("The emergency stop was already on; `vigil resume` releases it.")
        return
    click.echo(
        "⏸ Emergency stop engaged: heartbeats and cron start no new turns (running work continues). "
        "`vigil resume` releases it."
    )


@click.command("resume")
@pass_app
def resume(app: AppContext) -> None:
    """Release the emergency stop.

    Schedules run again; an overdue heartbeat fires once.
    """
    if estop.release(app.store):
        click.echo("▶ Emergency stop released: heartbeats and cron run again.")
    else:
        click.echo("The emergency stop was not on.")


COMMANDS = [heartbeat, pause, resume]
