"""``vigil gateway``: the long-running process (a pure cron scheduler until platforms arrive)."""

from __future__ import annotations

import asyncio
import os

import click

from vigil.cli.context import AppContext, pass_app
from vigil.models.base import ModelError
from vigil.models.factory import resolve_model_settings
from vigil.models.lazy import LazyModelClient


@click.group()
def gateway() -> None:
    """The long-running process for schedules.

    Scheduled jobs now, messaging platforms later.
    """


@gateway.command("run")
@pass_app
def run_cmd(app: AppContext) -> None:
    """Run in the foreground, running due cron jobs.

    It runs until Ctrl-C or SIGTERM.

    Prints a line as each run starts and ends (status, duration); the same lines go to
    logs/gateway.log in the profile (rotated at 5 MB, three old files kept).

    Works with no messaging platform and even before a model is configured (a job that fires
    without one fails with a hint, and is retried with back-off)."""
    asyncio.run(_run(app))


async def _run(app: AppContext) -> None:
    from vigil.gateway.run import run_until_signalled

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
    client = LazyModelClient(app.settings.model)
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
