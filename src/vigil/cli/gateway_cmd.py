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
    """Run in the foreground: the web chat, heartbeats and cron jobs.

    It runs until Ctrl-C or SIGTERM: it stops taking messages, lets running turns finish
    within gateway.stop_timeout (30 s), then exits 0. SIGHUP re-reads config.yaml for the
    adapters. One gateway runs per profile; a second one refuses to start.

    At start it prints a login link for the web chat (http://127.0.0.1:8787/login?token=…;
    `vigil gateway status` shows it again), except into the systemd journal, which is kept.
    It serves every conversation of the profile, fires the heartbeats of the conversations no
    `vigil chat` has open, and runs due cron jobs.

    Prints one line per turn, heartbeat fire, delivery, cron run and error; the same lines go
    to logs/gateway.log in the profile (rotated at 5 MB, three old files kept). /healthz and
    /metrics (Prometheus; send the token as a bearer token) are served on the same port.

    Works even before a model is configured (turns and jobs fail with a hint until one is).

    The web chat listens on gateway.web.host (127.0.0.1); a non-loopback address there is
    refused unless --bind gives it on the command line."""
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
                f"vigil gateway: warning: no model is configured yet; scheduled runs will fail until one is. {exc}",
                err=True,
            )
        from vigil.tools import sandbox

        if warning := sandbox.status().warning(app.settings.tools.terminal.sandbox):
            click.echo(f"vigil gateway: {warning}", err=True)

    client = LazyModelClient(app.settings.model, home=app.profile.home)
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

    \b
    Exit status:
      0  the gateway runs
      3  it does not (or a process holds the gateway lock but stopped updating its status)
      1  an error (the store cannot be read, ...)
    """
    import time

    from vigil.gateway.status import read_status
    from vigil.gateway.token import read_token

    status = read_status(app.store, app.profile, now=time.time())
    token = read_token(app.profile)
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
    started = record.get("started_at")
    since = ""
    if isinstance(started, (int, float)):
        since = f", since {local_time(started)}, up {relative(now - started)}"
    host = record.get("host")
    where = f" on {visible(str(host))}" if host else ""
    click.echo(f"vigil gateway: {status.state} (pid {status.pid}{where}{since}), vigil {visible(str(record.get('version')))}")
    rows = [("web chat", url or "not served")]
    if login_url:
        rows.append(("login URL", login_url))
    if token:
        rows.append(("login token", token))
    from vigil.gateway.status import adapter_line

    adapters = [visible(adapter_line(a, now)) for a in status.adapters]
    rows.append(("adapters", "; ".join(adapters) or "none"))
    rows.append(("live conversations", str(record.get("live_conversations", 0))))
    rows.append(("armed heartbeats", str(record.get("armed_heartbeats", 0))))
    next_run = record.get("next_cron_run")
    if isinstance(next_run, (int, float)):
        when = "due now" if next_run <= now else f"in {relative(next_run - now)}"
        rows.append(("next cron run", f"{local_time(next_run)} ({when})"))
    else:
        rows.append(("next cron run", "none scheduled"))
    width = max(len(name) for name, _ in rows) + 2
    for name, value in rows:
        click.echo(f"  {name + ':':<{width}}{value}")


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


@gateway.command("install")
@click.option("--print", "print_only", is_flag=True, help="Only print the unit; write nothing.")
@click.option("--force", is_flag=True, help="Replace an existing unit file that differs.")
@pass_app
def install_cmd(app: AppContext, print_only: bool, force: bool) -> None:
    """Install the gateway as a systemd user service.

    Writes ~/.config/systemd/user/vigil-gateway.service ($XDG_CONFIG_HOME is honoured;
    vigil-gateway-NAME.service for the profile NAME), which runs this vigil with this
    profile's VIGIL_HOME, restarts it when it fails and gives running turns
    gateway.stop_timeout seconds to finish when it is stopped. Prints the commands that start
    it. An existing unit that differs is left alone unless --force is given.
    """
    from vigil.gateway.install import InstallError, install_unit, next_steps, render_unit, unit_path, vigil_command
    from vigil.profiles import vigil_home

    profile = app.profile
    try:
        text = render_unit(
            profile,
            command=vigil_command(),
            stop_timeout=app.settings.gateway.stop_timeout,
            vigil_home=str(vigil_home().absolute()) if os.environ.get("VIGIL_HOME") else None,
        )
        if print_only:
            click.echo(text, nl=False)
            return
        path = unit_path(profile)
        outcome = install_unit(path, text, force=force)
    except InstallError as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(f"cannot write the unit: {exc.strerror or exc}") from None
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
