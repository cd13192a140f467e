"""``vigil gateway``: run the long-running process, ask whether it runs, install it as a service."""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import click

from vigil.cli.context import AppContext, pass_app
from vigil.cli.render import echo_json, local_time, relative, visible

if TYPE_CHECKING:
    from vigil.gateway.status import GatewayStatus
    from vigil.profiles import Profile

NOT_RUNNING = 3
"""Exit status of ``vigil gateway status`` when no gateway runs (as ``systemctl status``)."""


@click.group()
def gateway() -> None:
    """The long-running process and its service.

    \b
      vigil gateway run        run it in the foreground
      vigil gateway status     whether it runs, its web chat URL and login token
      vigil gateway retry ID   send a message that was set aside again
      vigil gateway install    a systemd user service that keeps it running
    """


@gateway.command("run")
@click.option(
    "--web-port", type=click.IntRange(1, 65_535), metavar="N",
    help="Port of the web chat (default: gateway.web.port, 8787).",
)
@click.option(
    "--bind", metavar="ADDR",
    help="Listen on ADDR. Needed for any address other than loopback, which other machines can reach.",
)
@pass_app
def run_cmd(app: AppContext, web_port: int | None, bind: str | None) -> None:
    """Run in the foreground: web chat, OpenAI API, heartbeats, cron jobs.

    It runs until Ctrl-C or SIGTERM: it stops taking messages, lets running turns finish
    within gateway.stop_timeout (30 s), then exits 0. SIGHUP re-reads config.yaml for the
    adapters.

    At start it prints a login link for the web chat (http://127.0.0.1:8787/login?token=…;
    `vigil gateway status` shows it again), except into the systemd journal, which is kept.
    It serves every conversation of the profile, fires the heartbeats of the conversations no
    `vigil chat` has open, and runs due cron jobs.

    Prints one line per turn, heartbeat fire, delivery, cron run and error; the same lines go
    to logs/gateway.log in the profile (rotated at 5 MB, three old files kept). /healthz and
    /metrics (Prometheus; send the token as a bearer token) are served on the same port, and
    the OpenAI-compatible API at /v1 (chat completions, responses, models; the token is the
    API key) unless gateway.api.enabled is false.

    Works even before a model is configured: a message gets the set-up hint and waits until
    one is (config.yaml is read again when it changes); scheduled jobs fail with the hint.

    The web chat listens on gateway.web.host (127.0.0.1); a non-loopback address there is
    refused unless --bind gives it on the command line.

    With an SQLite store one gateway runs per profile; a second one refuses to start. With
    store.url: postgresql://… any number run, on this machine and others, as workers sharing
    the conversations, heartbeats, cron jobs and the outbox; a platform's receiving loop that
    must run once (a long poll) runs in one of them at a time and moves to another when it
    stops or dies (gateway.lease_seconds)."""
    from vigil.gateway.bind import check_bind

    host = bind if bind is not None else app.settings.gateway.web.host
    try:
        check_bind(host, explicit=bind is not None)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    # Only what was given: the process's own defaults come from config.
    options = {name: value for name, value in (("web_port", web_port), ("bind", bind)) if value is not None}
    from vigil.gateway.http import PortUnavailable
    from vigil.gateway.lock import GatewayRunning, LockUnavailable

    try:
        asyncio.run(_run(app, options))
    except (GatewayRunning, LockUnavailable, PortUnavailable) as exc:  # raised at start, before serving
        raise click.ClickException(str(exc)) from None


async def _run(app: AppContext, options: dict[str, Any]) -> None:
    from vigil.gateway.run import GatewayConfig, run_until_signalled
    from vigil.models.base import ModelError
    from vigil.models.factory import resolve_model_settings
    from vigil.models.lazy import LazyModelClient

    def warn() -> None:  # once the lock is ours: a gateway that refuses to start says only why
        try:
            resolve_model_settings(app.settings.model, os.environ)
        except ModelError as exc:
            click.echo(
                "vigil gateway: warning: no model is configured yet; messages wait (and say so) and "
                f"scheduled runs fail until one is. {exc}",
                err=True,
            )
        from vigil.tools import sandbox

        if warning := sandbox.status().warning(app.settings.tools.terminal.sandbox):
            click.echo(f"vigil gateway: {warning}", err=True)

    client = LazyModelClient(app.settings.model, home=app.profile.home, config_path=app.profile.config_path)
    try:
        await run_until_signalled(
            store=app.store,
            profile=app.profile,
            settings=app.settings,
            client=client,
            announce=lambda line: click.echo(line, err=False),
            private=lambda line: click.echo(line, err=False),
            # systemd sets JOURNAL_STREAM when stdout goes to the journal, a log kept on disk.
            config=GatewayConfig(login_link=not os.environ.get("JOURNAL_STREAM")),
            on_locked=warn,
            **options,
        )
    finally:
        await client.aclose()


@gateway.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@pass_app
def status_cmd(app: AppContext, as_json: bool) -> None:
    """Say whether the gateway runs, and how to reach it.

    Shows its pid, since when it runs, the web chat URL and the login URL (with the login
    token), the adapters, live conversations, armed heartbeats and the next cron run, from the
    status record the gateway keeps fresh in the store.

    With several gateways on a shared (PostgreSQL) store it lists every worker: the live ones,
    and for a while those that stopped or are gone (killed, or their machine lost: no update
    within gateway.lease_seconds).

    \b
    Exit status:
      0  the gateway runs (some worker does)
      3  it does not (or a process holds the gateway lock but stopped updating its status)
      1  an error (the store cannot be read, ...)
    """
    import time

    from vigil.gateway.status import read_status
    from vigil.gateway.token import read_token
    from vigil.gateway.cluster.workers import read_workers

    now = time.time()
    token = read_token(app.profile)
    workers = read_workers(app.store, now=now)
    if workers:
        if as_json:
            echo_json(_workers_json(workers, token))
        else:
            _echo_workers(app.profile, workers, token, now)
        if not any(worker.live for worker in workers):
            raise click.exceptions.Exit(NOT_RUNNING)
        return
    status = read_status(app.store, app.profile, now=now)
    url = status.value("url") if status.running and isinstance(status.value("url"), str) else None
    login_url = f"{url.rstrip('/')}/login?token={quote(token, safe='')}" if url and token else None
    if as_json:
        echo_json(_as_json(status, token, login_url, url))
    else:
        _echo_status(app.profile, status, token, login_url, url)
    if not status.running:
        raise click.exceptions.Exit(NOT_RUNNING)


def _as_json(status: GatewayStatus, token: str | None, login_url: str | None, url: str | None) -> dict[str, Any]:
    record = status.record or {}
    return {
        "running": status.running,
        "state": status.state,
        "summary": status.summary,
        "pid": status.pid,
        "host": record.get("host"),
        "started_at": record.get("started_at"),
        "updated_at": record.get("updated_at"),
        "url": url,
        "login_url": login_url,
        "token": token,
        "adapters": status.adapters,
        "live_conversations": record.get("live_conversations") if status.running else None,
        "armed_heartbeats": record.get("armed_heartbeats") if status.running else None,
        "next_cron_run": record.get("next_cron_run") if status.running else None,
        "waiting": record.get("waiting", []) if status.running else None,
        "waiting_count": record.get("waiting_count", 0) if status.running else None,
        "version": record.get("version"),
    }


def _echo_status(
    profile: Profile, status: GatewayStatus, token: str | None, login_url: str | None, url: str | None
) -> None:
    import time

    record = status.record or {}
    if not status.running:
        click.echo(f"vigil gateway: {visible(status.summary)}.")
        if status.state == "unresponsive" and status.pid:
            click.echo(f"If it does not recover, stop it with `kill {status.pid}` and start it again.")
        else:
            click.echo(_how_to_start(profile))
        if token:
            click.echo(f"Web chat login token (for when it runs): {token}")
        return
    now = time.time()
    click.echo(f"vigil gateway: {status.state} ({_where(record, status.pid, now)}), vigil {visible(str(record.get('version')))}")
    rows = [("web chat", url or "not served")]
    if url and any(adapter.get("name") == "api" for adapter in status.adapters):
        rows.append(("OpenAI API", f"{url}/v1 (the API key is the login token)"))
    if login_url:
        rows.append(("login URL", login_url))
    if token:
        rows.append(("login token", token))
    _echo_rows(rows + _record_rows(record, status.adapters, now), "  ")


def _where(record: dict[str, Any], pid: Any, now: float) -> str:
    """``pid 123 on host, since 2026-12-01 12:03, up 5m``."""
    started = record.get("started_at")
    since = ""
    if isinstance(started, (int, float)):
        since = f", since {local_time(started)}, up {relative(now - started)}"
    host = record.get("host")
    where = f" on {visible(str(host))}" if host else ""
    return f"pid {pid}{where}{since}"


def _record_rows(record: dict[str, Any], adapters: list[dict[str, Any]], now: float) -> list[tuple[str, str]]:
    from vigil.gateway.status import adapter_line, waiting_line

    lines = [visible(adapter_line(a, now)) for a in adapters]
    rows = [("adapters", "; ".join(lines) or "none")]
    rows.append(("live conversations", str(record.get("live_conversations", 0))))
    rows.append(("armed heartbeats", str(record.get("armed_heartbeats", 0))))
    next_run = record.get("next_cron_run")
    if isinstance(next_run, (int, float)):
        when = "due now" if next_run <= now else f"in {relative(next_run - now)}"
        rows.append(("next cron run", f"{local_time(next_run)} ({when})"))
    else:
        rows.append(("next cron run", "none scheduled"))
    waiting = waiting_line(record, now)
    if waiting is not None:
        rows.append(("waiting", visible(waiting)))
    return rows


def _echo_rows(rows: list[tuple[str, str]], indent: str) -> None:
    width = max(len(name) for name, _ in rows) + 2
    for name, value in rows:
        click.echo(f"{indent}{name + ':':<{width}}{value}")


def _worker_urls(worker: Any, token: str | None) -> tuple[str | None, str | None]:
    """A live worker's web chat URL, and its login URL when it runs on this machine (the
    login token read here is this machine's profile's)."""
    import socket

    url = worker.value("url") if worker.live and isinstance(worker.value("url"), str) else None
    here = worker.value("host") == socket.gethostname()
    login = f"{url.rstrip('/')}/login?token={quote(token, safe='')}" if url and token and here else None
    return url, login


def _workers_summary(workers: list[Any]) -> str:
    live = sum(1 for w in workers if w.live)
    others = {state: sum(1 for w in workers if w.state == state) for state in ("gone", "stopped")}
    rest = "".join(f", {count} {state}" for state, count in others.items() if count)
    if not live:
        return f"not running (no live worker on the shared store{rest})"
    return f"{live} worker{'s' if live != 1 else ''} running on a shared store{rest}"


def _workers_json(workers: list[Any], token: str | None) -> dict[str, Any]:
    listed = []
    for worker in workers:
        record = worker.record
        url, login_url = _worker_urls(worker, token)
        listed.append({
            "id": worker.worker_id, "live": worker.live, "state": worker.state, "summary": worker.summary,
            "pid": record.get("pid"), "host": record.get("host"), "started_at": record.get("started_at"),
            "updated_at": record.get("updated_at"), "lease": record.get("lease"),
            "gone_since": worker.since if worker.state == "gone" else None,
            "url": url, "login_url": login_url, "adapters": worker.adapters,
            "live_conversations": record.get("live_conversations") if worker.live else None,
            "armed_heartbeats": record.get("armed_heartbeats") if worker.live else None,
            "next_cron_run": record.get("next_cron_run") if worker.live else None,
            "waiting": record.get("waiting", []) if worker.live else None,
            "waiting_count": record.get("waiting_count", 0) if worker.live else None,
            "version": record.get("version"),
        })
    first = next((entry for entry in listed if entry["live"]), None) or {}
    running = bool(first)
    return {
        "running": running,
        "state": "running" if running else "not running",
        "summary": _workers_summary(workers),
        "shared": True,
        "pid": first.get("pid"),
        "host": first.get("host"),
        "url": first.get("url"),
        "login_url": first.get("login_url"),
        "token": token,
        "adapters": first.get("adapters", []),
        "workers": listed,
    }


def _echo_workers(profile: Profile, workers: list[Any], token: str | None, now: float) -> None:
    click.echo(f"vigil gateway: {visible(_workers_summary(workers))}.")
    for worker in workers:
        record = worker.record
        if not worker.live:
            click.echo(f"  worker {visible(worker.worker_id)}: {visible(worker.summary)}")
            continue
        version = visible(str(record.get("version")))
        click.echo(f"  worker {visible(worker.worker_id)}: {worker.state} ({_where(record, record.get('pid'), now)}), vigil {version}")
        url, login_url = _worker_urls(worker, token)
        rows = [("web chat", url or "not served")]
        if login_url:
            rows.append(("login URL", login_url))
        _echo_rows(rows + _record_rows(record, worker.adapters, now), "    ")
    if not any(worker.live for worker in workers):
        click.echo(_how_to_start(profile))
    if token:
        click.echo(f"Web chat login token (this machine): {token}")


def _how_to_start(profile: Profile) -> str:
    from vigil.gateway.install import unit_name, unit_path

    named = "" if profile.name == "default" else f" -p {profile.name}"
    if unit_path(profile).exists():
        return (
            f"Start it with `systemctl --user start {unit_name(profile)}` (installed), "
            f"or in a terminal with `vigil{named} gateway run`."
        )
    return (
        f"Start it with `vigil{named} gateway run` (in the foreground), or install it as a "
        f"systemd user service with `vigil{named} gateway install`."
    )


@gateway.command("retry")
@click.argument("entry_id", metavar="[ID]", type=click.IntRange(min=1), required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_app
def retry_cmd(app: AppContext, entry_id: int | None, as_json: bool) -> None:
    """Send a message that was set aside again (without ID: list them).

    The gateway sets a message aside, instead of answering it, when its turn was running at
    several deaths of the process in a row with nothing else answered in between, or failed
    again and again with the same internal error: it may be what brings the gateway down.
    The person was told, with this ID. Sent again, it is answered (at once when the gateway
    runs, else when it starts); if it brings the process down again it is set aside again.
    `/retry ID` in its conversation does the same.
    """
    from vigil.store.gateway.gateway_tables import SET_ASIDE

    tables = app.store.gateway
    if entry_id is None:
        entries = tables.inbox_list(statuses=[SET_ASIDE], limit=100)
        if as_json:
            echo_json({"set_aside": [_entry_json(entry) for entry in entries]})
        elif not entries:
            click.echo("No message is set aside.")
        for entry in [] if as_json else entries:
            click.echo(f"{entry.id}  {local_time(entry.finished_at or entry.received_at)}  "
                       f"{visible(_route_text(entry.route))}  “{visible(_first_line(entry.text))}” — {visible(entry.error or '')}")
        return
    entry = tables.inbox_get(entry_id)
    if entry is None:
        raise _refusal(f"there is no message {entry_id} in the gateway's inbox "
                       "(`vigil gateway retry` lists the messages set aside)", "not_found")
    if entry.status != SET_ASIDE:
        raise _refusal(f"message {entry_id} was not set aside: it is {entry.status.replace('_', ' ')}", "refused")
    entry = tables.inbox_requeue(entry_id)
    _announce(app, entry_id)
    if as_json:
        echo_json(_entry_json(entry))
        return
    click.echo(f"Message {entry_id} (“{visible(_first_line(entry.text))}”) is sent again: the gateway answers it "
               "now if it runs, else when it starts.")


def _refusal(message: str, kind: str) -> click.ClickException:
    error = click.ClickException(message)
    error.vigil_kind = kind  # type: ignore[attr-defined]
    return error


def _announce(app: AppContext, entry_id: int) -> None:
    """Wake the workers sharing the store (an SQLite gateway looks by itself within seconds)."""
    from vigil.gateway.cluster.handover import CHANNEL

    notifications = app.store.notifications()
    if notifications is None:
        return
    try:
        notifications.publish(CHANNEL, str(entry_id))
        notifications.flush()
    except Exception:  # a hint only: the workers' sweeps find the entry
        pass


def _entry_json(entry: Any) -> dict[str, Any]:
    route = entry.route
    return {
        "id": entry.id, "status": entry.status, "text": entry.text, "error": entry.error,
        "received_at": entry.received_at, "finished_at": entry.finished_at, "session_id": entry.session_id,
        "route": {"adapter": route.adapter, "chat": route.chat, "thread": route.thread, "user": route.user},
    }


def _route_text(route: Any) -> str:
    return " ".join(part for part in (route.adapter, route.chat, route.thread, route.user) if part)


def _first_line(text: str, limit: int = 60) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


@gateway.command("install")
@click.option("--print", "print_only", is_flag=True, help="Only print the unit; write nothing.")
@click.option("--force", is_flag=True, help="Replace an existing unit file that differs.")
@click.option(
    "--env-file", "env_file", is_flag=True,
    help="Also write the secrets the gateway reads (the model's key, enabled platforms' tokens, MCP "
    "servers' ${VARIABLES}) from this shell's environment into gateway.env in the profile (0600), "
    "which the unit reads.",
)
@pass_app
def install_cmd(app: AppContext, print_only: bool, force: bool, env_file: bool) -> None:
    """Install the gateway as a systemd user service.

    Writes ~/.config/systemd/user/vigil-gateway.service ($XDG_CONFIG_HOME is honoured;
    vigil-gateway-NAME.service for the profile NAME), which runs this vigil with this
    profile's VIGIL_HOME, restarts it when it fails and gives running turns
    gateway.stop_timeout seconds to finish when it is stopped. Prints the commands that start
    it. An existing unit that differs is left alone unless --force is given.

    A service does not see your shell's variables: with --env-file the model's key and the
    platforms' tokens reach it through gateway.env (run it again after changing them; a value
    already in the file for a variable not set now is kept). Values are never printed.
    """
    from vigil.gateway.install import InstallError, install_unit, next_steps, render_unit, unit_path, vigil_command
    from vigil.gateway.secrets_env import FILE_NAME, update_env_file
    from vigil.profiles import vigil_home

    profile = app.profile
    env_path = profile.home / FILE_NAME if env_file else None
    try:
        text = render_unit(
            profile,
            command=vigil_command(),
            stop_timeout=app.settings.gateway.stop_timeout,
            vigil_home=str(vigil_home().absolute()) if os.environ.get("VIGIL_HOME") else None,
            env_file=env_path.absolute() if env_path is not None else None,
        )
        if print_only:
            click.echo(text, nl=False)
            return
        if env_path is not None:
            held, missing = update_env_file(app.settings, env_path, os.environ)
            click.echo(f"Wrote {env_path} (0600) with {', '.join(held) or 'no variable'}")
            if missing:
                click.echo(f"Not set in this shell, so not in the file: {', '.join(missing)}; export them and "
                           f"run this again, or add NAME=value lines to {env_path}")
        path = unit_path(profile)
        outcome = install_unit(path, text, force=force)
    except InstallError as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(f"cannot write {exc.filename or 'the unit'}: {exc.strerror or exc}") from None
    said = {"written": "Wrote", "replaced": "Replaced", "unchanged": "Already installed, unchanged:"}[outcome]
    click.echo(f"{said} {path}")
    steps = next_steps(profile)
    click.echo("Start it now and at every login:")
    for line in steps[:2]:
        click.echo(f"  {line}")
    click.echo("Keep it running after you log out:")
    for line in steps[2:]:
        click.echo(f"  {line}")
    named = "" if profile.name == "default" else f" -p {profile.name}"
    click.echo(f"Then check it with `vigil{named} gateway status`.")


COMMANDS = [gateway]
