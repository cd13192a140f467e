"""The ``vigil`` command: a thin click front end over the library."""

from __future__ import annotations

import sys
from typing import Any

import click

from vigil import __version__
from vigil.cli.arguments import refuse_undecodable
from vigil.cli.context import AppContext, add_profile_option_everywhere, remember_profile
from vigil.config import ConfigError
from vigil.profiles import ProfileError
from vigil.store import StoreError

USER_ERRORS: tuple[type[Exception], ...] = (ConfigError, ProfileError, StoreError)


_ARGV = "vigil.argv"


class VigilGroup(click.Group):
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


def _register() -> None:
    from vigil.cli import config_cmd, profile_cmd, prompts_cmd, sessions_cmd

    cli.add_command(profile_cmd.profile)
    cli.add_command(config_cmd.config)
    cli.add_command(sessions_cmd.sessions)
    prompts_cmd.register(sessions_cmd.sessions)
    for optional in ("chat_cmd", "usage_cmd", "heartbeat_cmd", "cron_cmd", "gateway_cmd"):
        try:
            module = __import__(f"vigil.cli.{optional}", fromlist=["command"])
        except ModuleNotFoundError as exc:
            if exc.name != f"vigil.cli.{optional}":
                raise
            continue
        for command in getattr(module, "COMMANDS", ()):
            cli.add_command(command)
    for command in cli.commands.values():
        add_profile_option_everywhere(command)


_register()


def main() -> None:
    """Console-script entry point."""
    cli.main(prog_name="vigil")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
