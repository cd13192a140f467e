"""``vigil gateway``: the long-running process (a pure cron scheduler until platforms arrive)."""

from __future__ import annotations

import asyncio

import click

from vigil.cli.context import AppContext, pass_app
from vigil.models.base import ModelError
from vigil.models.factory import build_client


@click.group()
def gateway() -> None:
    """The long-running process: scheduled jobs now, messaging platforms later."""


@gateway.command("run")
@pass_app
def run_cmd(app: AppContext) -> None:
    """Run in the foreground until Ctrl-C or SIGTERM, running due cron jobs."""
    asyncio.run(_run(app))


async def _run(app: AppContext) -> None:
    from vigil.gateway.run import run_until_signalled

    try:
        client = await build_client(app.settings.model)
    except ModelError as exc:
        raise click.ClickException(f"the gateway needs a model for cron runs: {exc}") from None
    try:
        await run_until_signalled(
            store=app.store,
            profile=app.profile,
            settings=app.settings,
            client=client,
            announce=lambda line: click.echo(line, err=False),
        )
    finally:
        await client.aclose()


COMMANDS = [gateway]
