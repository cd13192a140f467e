"""The ``vigil`` command: a thin click front end over the library."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from vigil import __version__
from vigil.cli.arguments import ArgumentRefused, refuse_undecodable
from vigil.cli.context import AppContext, add_profile_option_everywhere, remember_profile
from vigil.cli.lazy import LazyCommand, LazyCommands, LazyGroup
from vigil.config.errors import ConfigError
from vigil.profiles import ProfileError
from vigil.store.errors import AmbiguousSession, SessionNotFound, StoreError

USER_ERRORS: tuple[type[Exception], ...] = (ConfigError, ProfileError, StoreError)


_ARGV = "vigil.argv"


class VigilGroup(LazyGroup):
    """Turns vigil's own errors into a one-line message and exit code 1, and closes the store.

    When the command was given ``--json``, any error (a usage error too) is printed instead as
    ``{"error": {"kind": ..., "message": ...}}`` on stdout, with the same exit code.

    Before any command runs, the whole command line and the environment variables vigil reads
    are checked for text that is not valid UTF-8 (see :mod:`vigil.cli.arguments`).
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta[_ARGV] = tuple(args)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            try:
                if ctx.parent is None and not ctx.resilient_parsing:
                    refuse_undecodable(self, ctx, ctx.meta.get(_ARGV, ()))
                return super().invoke(ctx)
            except USER_ERRORS as exc:
                error = click.ClickException(str(exc))
                error.vigil_kind = _kind_of(exc)  # type: ignore[attr-defined]
                raise error from None
        except click.ClickException as exc:
            if ctx.parent is None and _wants_json(ctx, exc):
                _echo_json_error(exc)
                raise click.exceptions.Exit(exc.exit_code) from None
            raise
        finally:
            app = ctx.find_object(AppContext)
            if app is not None and ctx.parent is None:
                app.close()


_JSON_WANTED = "vigil.json"

ERROR_KINDS = ("usage", "config", "profile", "store", "not_found", "ambiguous", "refused", "error")
"""The ``kind`` of a ``--json`` error (documented in the README): what a script can branch on."""


def _kind_of(exc: Exception) -> str:
    """The error kind of ``exc``, one of :data:`ERROR_KINDS`."""
    if isinstance(exc, SessionNotFound):
        return "not_found"
    if isinstance(exc, AmbiguousSession):
        return "ambiguous"
    if isinstance(exc, ArgumentRefused):
        return "refused"
    if isinstance(exc, click.UsageError):
        return "usage"
    if isinstance(exc, ConfigError):
        return "config"
    if isinstance(exc, ProfileError):
        return "profile"
    if isinstance(exc, StoreError):
        return "store"
    return getattr(exc, "vigil_kind", "error")


def _wants_json(ctx: click.Context, exc: click.ClickException) -> bool:
    """Whether the failing command was asked for ``--json``: its parsed flag, or, when the
    command line itself was refused or could not be parsed, a ``--json`` word before any ``--``."""
    if ctx.meta.get(_JSON_WANTED):
        return True
    if not isinstance(exc, (click.UsageError, ArgumentRefused)):
        return False
    argv = list(ctx.meta.get(_ARGV, ()))
    return "--json" in argv[: argv.index("--")] if "--" in argv else "--json" in argv


def _echo_json_error(exc: click.ClickException) -> None:
    """``{"error": {"kind": ..., "message": ...}}`` on stdout, for scripts."""
    import json

    click.echo(json.dumps({"error": {"kind": _kind_of(exc), "message": exc.format_message()}}))


def _note_json_flag(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    if value:
        ctx.meta[_JSON_WANTED] = True
    return value


def _watch_json_flags(command: click.Command) -> None:
    """Make every ``--json`` flag under ``command`` tell :class:`VigilGroup` it was given."""
    for param in command.params:
        if isinstance(param, click.Option) and "--json" in param.opts and param.callback is None:
            param.callback = _note_json_flag
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _watch_json_flags(sub)


@click.group(cls=VigilGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="vigil")
@click.option(
    "-p",
    "--profile",
    metavar="NAME",
    envvar="VIGIL_PROFILE",
    expose_value=False,
    is_eager=True,
    callback=remember_profile,
    help="Profile to use (default: the root profile in $VIGIL_HOME, or $VIGIL_PROFILE).",
)
@click.pass_context
def cli(ctx: click.Context) -> None:
    """vigil — a persistent personal AI agent that lives on this machine.

    Every conversation is kept in the profile's session store; each keeps its system prompt
    byte for byte so the provider's prompt cache keeps hitting.

    \b
    Start here:
      vigil chat                  talk to the agent (interactive)
      vigil chat -q "question"    one-shot answer
      vigil sessions list         past conversations
      vigil cron add ...          scheduled jobs, each in a fresh session
      vigil gateway run           the always-on process: web chat, OpenAI-compatible
                                  API, messaging platforms, heartbeats and cron
      vigil config show           the active settings
    In a chat, /heartbeat every 15m PROMPT sets a recurring instruction.
    """
    ctx.ensure_object(AppContext)


# Every command, imported only when it runs or shows its own help: `vigil --help` lists them
# from these summaries (the first paragraph of each command's help; a test keeps them equal).
COMMANDS: dict[str, LazyCommand] = {
    "chat": LazyCommand("vigil.cli.chat_cmd", "chat", "Talk to the agent."),
    "config": LazyCommand("vigil.cli.config_cmd", "config", "Read and change the profile's config.yaml."),
    "cron": LazyCommand("vigil.cli.cron_cmd", "cron", "Scheduled jobs, each in a fresh session."),
    "doctor": LazyCommand("vigil.cli.doctor_cmd", "doctor", "Check the setup and say what to fix."),
    "gateway": LazyCommand(
        "vigil.cli.gateway_cmd", "gateway", "The long-running process and its service."
    ),
    "heartbeat": LazyCommand(
        "vigil.cli.heartbeat_cmd", "heartbeat", "Recurring instructions in conversations."
    ),
    "mcp": LazyCommand("vigil.cli.mcp_cmd", "mcp", "Tools from MCP servers."),
    "models": LazyCommand("vigil.cli.models_cmd", "models", "Local GGUF models for model.provider local."),
    "pairing": LazyCommand(
        "vigil.cli.pairing_cmd", "pairing_group", "Who may talk to the agent on a platform."
    ),
    "pause": LazyCommand("vigil.cli.heartbeat_cmd", "pause", "Emergency stop for heartbeats and cron."),
    "profile": LazyCommand("vigil.cli.profile_cmd", "profile", "Manage profiles, each a separate home."),
    "resume": LazyCommand("vigil.cli.heartbeat_cmd", "resume", "Release the emergency stop."),
    "sessions": LazyCommand(
        "vigil.cli.sessions_cmd",
        "sessions",
        "Work with stored conversations.",
        subcommands={
            "refresh-prompts": LazyCommand(
                "vigil.cli.prompts_cmd", "refresh_prompts", "Rebuild system prompts on the next turn."
            ),
            "repair-prompts": LazyCommand(
                "vigil.cli.prompts_cmd", "repair_prompts", "Rebuild the stored prompts that are damaged."
            ),
        },
    ),
    "store": LazyCommand("vigil.cli.store_cmd", "store", "Move the profile's session store."),
    "usage": LazyCommand("vigil.cli.usage_cmd", "usage", "Show tokens used and the cache hit ratio."),
}


def _prepare(command: click.Command, spec: LazyCommand) -> None:
    """Make a freshly imported command ready: ``-p/--profile`` everywhere, its lazy subcommands."""
    add_profile_option_everywhere(command)
    _watch_json_flags(command)
    if spec.subcommands:
        if not isinstance(command, click.Group):
            raise TypeError(f"{spec.module}.{spec.attribute} has subcommands but is not a group")
        command.commands = LazyCommands(spec.subcommands, _prepare, loaded=command.commands)


cli.commands = LazyCommands(COMMANDS, _prepare)


def main() -> None:
    """Console-script entry point.

    Output cut short because its reader left (``vigil sessions list | head -3``) ends quietly
    with exit code 0, as in ``git log | head``: the reader has what it wanted. click and rich
    each catch the broken pipe themselves and exit 1, so the pipe is also checked afterwards.
    """
    stdout_pipe = _pipe_probe(sys.stdout)
    try:
        try:
            cli.main(prog_name="vigil")
        finally:
            sys.stdout.flush()  # here, not at interpreter exit, where a failure cannot be caught
    except BrokenPipeError:
        _end_quietly()
    except SystemExit as exc:
        if exc.code not in (0, None) and _reader_left(stdout_pipe):
            _end_quietly()
        raise


def _pipe_probe(stream: Any) -> int | None:
    """A duplicate of ``stream``'s descriptor when it is a pipe or socket (it keeps pointing at
    the pipe after rich moves the descriptor itself to /dev/null), else ``None``."""
    import stat

    try:
        mode = os.fstat(stream.fileno()).st_mode
    except (AttributeError, OSError, ValueError):
        return None
    return os.dup(stream.fileno()) if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) else None


def _reader_left(probe: int | None) -> bool:
    """Whether nobody reads the pipe ``probe`` writes to any more (poll reports an error)."""
    import select

    if probe is None or not hasattr(select, "poll"):
        return False
    poller = select.poll()
    poller.register(probe, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


def _end_quietly() -> None:
    # Whatever is still buffered goes nowhere, so that the final flush at exit cannot fail.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    raise SystemExit(0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
