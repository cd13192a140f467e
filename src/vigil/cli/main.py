"""The ``vigil`` command: a thin click front end over the library."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from vigil import __version__
from vigil.cli.arguments import refuse_undecodable
from vigil.cli.context import AppContext, add_profile_option_everywhere, remember_profile
from vigil.cli.lazy import LazyCommand, LazyCommands, LazyGroup
from vigil.config_errors import ConfigError
from vigil.profiles import ProfileError
from vigil.store.errors import StoreError

USER_ERRORS: tuple[type[Exception], ...] = (ConfigError, ProfileError, StoreError)


_ARGV = "vigil.argv"


class VigilGroup(LazyGroup):
    """Turns vigil's own errors into a one-line message and exit code 1, and closes the store.

    Before any command runs, the whole command line and the environment variables vigil reads
    are checked for text that is not valid UTF-8 (see :mod:`vigil.cli.arguments`).
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta[_ARGV] = tuple(args)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            if ctx.parent is None and not ctx.resilient_parsing:
                refuse_undecodable(self, ctx, ctx.meta.get(_ARGV, ()))
            return super().invoke(ctx)
        except USER_ERRORS as exc:
            raise click.ClickException(str(exc)) from None
        finally:
            app = ctx.find_object(AppContext)
            if app is not None and ctx.parent is None:
                app.close()


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
      vigil gateway run           the long-running process that runs them
      vigil config show           the active settings
    In a chat, /heartbeat every 15m PROMPT sets a recurring instruction.
    """
    ctx.ensure_object(AppContext)


# Every command, imported only when it runs or shows its own help: `vigil --help` lists them
# from these summaries (the first paragraph of each command's help; a test keeps them equal).
COMMANDS: dict[str, LazyCommand] = {
    "chat": LazyCommand("vigil.cli.chat_cmd", "chat", "Talk to the agent."),
    "config": LazyCommand(
        "vigil.cli.config_cmd",
        "config",
        "Read and change the profile's config.yaml (validated before anything is written).",
    ),
    "cron": LazyCommand(
        "vigil.cli.cron_cmd", "cron", "Scheduled jobs: each run is a fresh session that delivers its answer."
    ),
    "gateway": LazyCommand(
        "vigil.cli.gateway_cmd",
        "gateway",
        "The long-running process: scheduled jobs now, messaging platforms later.",
    ),
    "heartbeat": LazyCommand(
        "vigil.cli.heartbeat_cmd",
        "heartbeat",
        "Recurring instructions attached to conversations (one per conversation).",
    ),
    "pause": LazyCommand(
        "vigil.cli.heartbeat_cmd",
        "pause",
        "Emergency stop: heartbeats and cron start no new turns until `vigil resume`.",
    ),
    "profile": LazyCommand(
        "vigil.cli.profile_cmd",
        "profile",
        "Manage profiles: separate homes with their own config, files and sessions.",
    ),
    "resume": LazyCommand(
        "vigil.cli.heartbeat_cmd",
        "resume",
        "Release the emergency stop: schedules run again (an overdue heartbeat fires once).",
    ),
    "sessions": LazyCommand(
        "vigil.cli.sessions_cmd",
        "sessions",
        "Work with stored conversations.",
        subcommands={
            "refresh-prompts": LazyCommand(
                "vigil.cli.prompts_cmd",
                "refresh_prompts",
                "Make sessions rebuild their system prompt from the current files on their next turn.",
            ),
            "repair-prompts": LazyCommand(
                "vigil.cli.prompts_cmd",
                "repair_prompts",
                "Find sessions whose stored prompt is missing, empty or fails its hash, and rebuild "
                "exactly those from the current files. Healthy sessions are not touched.",
            ),
        },
    ),
    "usage": LazyCommand(
        "vigil.cli.usage_cmd",
        "usage",
        "Show tokens used (uncached input, cache read, cache write, output) and the cache hit "
        "ratio, per session and in total.",
    ),
}


def _prepare(command: click.Command, spec: LazyCommand) -> None:
    """Make a freshly imported command ready: ``-p/--profile`` everywhere, its lazy subcommands."""
    add_profile_option_everywhere(command)
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
