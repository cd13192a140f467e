"""``vigil mcp ...``: the MCP servers whose tools the agent may call (``mcp.servers`` in config.yaml)."""

from __future__ import annotations

import os
import shutil
from typing import Any

import click
from rich.markup import escape

from vigil.cli.context import AppContext, pass_app
from vigil.cli.render import console, echo_json, shorten, visible
from vigil.cli.signals import run_stoppable
from vigil.config.errors import ConfigError

_NEW_ONLY = (
    "New conversations get its tools (a running gateway's after `kill -HUP` or a restart); "
    "conversations already running keep the tools they started with."
)


class McpRefused(click.ClickException):
    """A refused ``vigil mcp`` command: one ``Error:`` line (or JSON error), exit 1."""

    def __init__(self, message: str, kind: str = "refused") -> None:
        super().__init__(message)
        self.vigil_kind = kind


def _usage(exc: ConfigError) -> click.UsageError:
    error = click.UsageError(str(exc))
    error.vigil_kind = "usage"  # type: ignore[attr-defined]
    return error


@click.group("mcp")
def mcp() -> None:
    """Tools from MCP servers.

    An MCP server offers tools (GitHub, a calendar, notes, a browser ...); once added, the
    agent sees each as mcp__SERVER__TOOL in new conversations. A server is a program vigil
    starts (stdio) or a streamable HTTP endpoint, kept in config.yaml under mcp.servers.

    \b
      vigil mcp add time -- uvx mcp-server-time --local-timezone UTC
      vigil mcp add github --url https://api.githubcopilot.com/mcp/ \\
          --header 'Authorization: Bearer ${GITHUB_TOKEN}'
      vigil mcp list                 every server, whether it starts, and its tools
      vigil mcp test time            start one, list its tools, stop it
      vigil mcp remove time

    In the terminal, the web chat and on platforms the first call of each tool asks you first
    (unless the server was added with --trusted); cron jobs, heartbeats and -q without a
    terminal may call only servers added with --unattended.
    """


@mcp.command("add")
@click.argument("name")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="[-- COMMAND [ARGS]...]")
@click.option("--url", metavar="URL", help="A streamable HTTP server's endpoint (instead of a command).")
@click.option("--env", "env", multiple=True, metavar="KEY=VALUE",
              help="An environment variable for the command (repeatable); KEY alone passes on vigil's own.")
@click.option("--header", "headers", multiple=True, metavar="'NAME: VALUE'",
              help="An HTTP header for --url (repeatable); write secrets as ${VARIABLE}.")
@click.option("--unattended", is_flag=True,
              help="Cron jobs, heartbeats and -q without a terminal may call its tools too.")
@click.option("--trusted", is_flag=True, help="Never ask before calling its tools.")
@click.option("--no-sandbox", is_flag=True,
              help="Run the command outside the sandbox (it can then change files anywhere you can).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (for scripts).")
@pass_app
def add(
    app: AppContext,
    name: str,
    command: tuple[str, ...],
    url: str | None,
    env: tuple[str, ...],
    headers: tuple[str, ...],
    unattended: bool,
    trusted: bool,
    no_sandbox: bool,
    as_json: bool,
) -> None:
    """Add the MCP server NAME: a COMMAND vigil starts, or a --url.

    \b
      vigil mcp add time --unattended -- /usr/local/bin/mcp-server-time --local-timezone UTC
      vigil mcp add notes --env NOTES_DIR=/home/me/notes -- npx -y @acme/notes-mcp
      vigil mcp add github --url https://api.githubcopilot.com/mcp/ \\
          --header 'Authorization: Bearer ${GITHUB_TOKEN}'

    Put -- before the command, so that its own options are not read as vigil's. Secrets are
    never written to config.yaml: ${NAME} in an --env value, a --header or the URL is read from
    the environment each time the server starts (quote it in single quotes), and --env KEY
    alone passes on vigil's own KEY. A command runs in the terminal's sandbox (vigil's files
    and your keys hidden, only workspaces/mcp-NAME writable); --no-sandbox for a server that
    must change files elsewhere. Nothing is started: `vigil mcp test NAME` tries it.
    """
    from vigil.tools.mcp import config

    try:
        config.check_server_name(name)
        if url is not None:
            if command:
                raise ConfigError("give either --url or a command after --, not both")
            if env or no_sandbox:
                raise ConfigError("--env and --no-sandbox are for a server vigil starts; an HTTP server takes --header")
            entry = config.http_entry(url, config.header_entries(headers, name), unattended=unattended, trusted=trusted)
        else:
            if headers:
                raise ConfigError("--header is for an HTTP server (--url); a server vigil starts takes --env")
            entry = config.stdio_entry(
                command, config.env_entries(env), unattended=unattended, trusted=trusted, sandbox=not no_sandbox
            )
    except ConfigError as exc:
        raise _usage(exc) from None
    path = app.profile.config_path
    if name in app.settings.mcp.servers:
        raise McpRefused(f"an MCP server named '{name}' is configured already; remove it first (vigil mcp remove {name})")
    settings = config.add_server(path, app.settings, name, entry)
    spec = config.configured(settings)[name]
    warnings = _warnings(spec)
    if as_json:
        echo_json({"added": name, "config": str(path), "entry": entry, "warnings": warnings})
        return
    console.print(
        f"✓ Added the MCP server [bold]{escape(name)}[/bold] to {escape(str(path))}: {escape(spec.describe())} "
        f"({escape('; '.join(spec.flags()))}).", soft_wrap=True,
    )
    click.echo(f"{_NEW_ONLY} Try it now: vigil mcp test {name}")
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)


def _warnings(spec: Any) -> list[str]:
    found: list[str] = []
    if spec.transport == "stdio":
        program = spec.command
        if os.sep in program:
            if not (os.path.isfile(program) and os.access(program, os.X_OK)):
                found.append(f"{program} is not an executable file (yet)")
        elif shutil.which(program) is None:
            found.append(f"{program} was not found on PATH (the gateway's PATH may differ; an absolute path is safer)")
        if spec.sandbox:
            from vigil.tools import sandbox

            if not sandbox.status().available:
                found.append("bubblewrap cannot run here, so the server will run without a sandbox")
    return found


@mcp.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (for scripts).")
@pass_app
def list_cmd(app: AppContext, as_json: bool) -> None:
    """List the MCP servers, whether each starts, and its tools.

    Every server is started (all at once, each within mcp.start_timeout seconds), asked for
    its tools and stopped again.
    """
    from vigil.tools.mcp.config import configured
    from vigil.tools.mcp.probe import probe_all

    specs = list(configured(app.settings).values())
    if not specs:
        if as_json:
            echo_json({"servers": []})
            return
        click.echo("No MCP servers are configured. Add one with `vigil mcp add NAME -- COMMAND [ARGS...]` "
                   "or `vigil mcp add NAME --url URL`.")
        return
    probes = run_stoppable(probe_all(specs, app.profile, app.settings, _store(app)))
    if as_json:
        echo_json({"servers": [probe.as_json() for probe in probes]})
        return
    for index, probe in enumerate(probes):
        if index:
            click.echo()
        _print_probe(probe)


@mcp.command("test")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (for scripts).")
@pass_app
def test_cmd(app: AppContext, name: str, as_json: bool) -> None:
    """Start the MCP server NAME, list its tools and stop it.

    Exits 1, saying why, when it does not start; its own error output is in
    logs/mcp-NAME.log of the profile.
    """
    from vigil.tools.mcp.config import configured
    from vigil.tools.mcp.probe import probe

    spec = configured(app.settings).get(name)
    if spec is None:
        raise McpRefused(_unknown(app, name), kind="not_found")
    found = run_stoppable(probe(spec, app.profile, app.settings, _store(app)))
    if not found.ok:
        raise McpRefused(f"the MCP server '{name}' did not start: {found.error}", kind="error")
    if as_json:
        echo_json(found.as_json())
        return
    _print_probe(found)


@mcp.command("remove")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (for scripts).")
@pass_app
def remove(app: AppContext, name: str, as_json: bool) -> None:
    """Remove the MCP server NAME from config.yaml.

    New conversations no longer get its tools. Conversations that started with them keep
    them listed (their prompt cache stays valid), and calls to them fail with a clear message.
    """
    from vigil.tools.mcp import pool
    from vigil.tools.mcp.config import remove_server

    if name not in app.settings.mcp.servers:
        raise McpRefused(_unknown(app, name), kind="not_found")
    path = app.profile.config_path
    remove_server(path, app.settings, name)
    store = _store(app)
    if store is not None:
        try:
            pool.forget_tools(store, name)
        except Exception:  # only a cached list: a stale one is never used for another config
            pass
    if as_json:
        echo_json({"removed": name, "config": str(path)})
        return
    click.echo(f"✓ Removed the MCP server {name} from {path}. New conversations no longer get its tools; "
               "conversations that started with them keep them listed, and calls to them fail.")


def _unknown(app: AppContext, name: str) -> str:
    known = ", ".join(app.settings.mcp.servers) or "none"
    return f"no MCP server named {_quoted(name)} is configured (configured: {known})"


def _quoted(name: str) -> str:
    from vigil.masking import printable

    return f"'{printable(name, 60)}'"


def _store(app: AppContext) -> Any:
    """The profile's store, to keep tool lists in; ``None`` when it cannot be opened (the
    servers can be tried all the same)."""
    from vigil.store.errors import StoreError

    try:
        return app.store
    except StoreError:
        return None


def _print_probe(probe: Any) -> None:
    from vigil.tools.mcp.naming import tool_name
    from vigil.tools.mcp.probe import first_line

    spec = probe.spec
    if probe.ok:
        where = ", sandboxed" if probe.sandboxed else ""
        state = f"[green]ok[/green], {len(probe.tools)} tool(s) (started in {probe.seconds:.1f} s{where})"
    else:
        state = f"[red]failed[/red]: {escape(visible(probe.error or ''))}"
    console.print(f"[bold]{escape(spec.name)}[/bold] — {state}", soft_wrap=True)
    console.print(f"  {spec.transport}: {escape(spec.describe())}", soft_wrap=True)
    console.print(f"  {escape(' · '.join(spec.flags()))}", soft_wrap=True)
    width = max((len(tool.name) for tool in probe.tools), default=0)
    for tool in probe.tools:
        name = shorten(tool.name, 60)
        line = f"  {escape(name.ljust(min(width, 60)))}  {escape(shorten(first_line(tool.description), 100))}"
        model_name = tool_name(spec.name, tool.name)
        if model_name != f"mcp__{spec.name}__{tool.name}":
            line += f" [dim](the model calls it {escape(model_name)})[/dim]"
        console.print(line, soft_wrap=True)
