"""``vigil config``: show, get and set settings in the profile's config.yaml."""

from __future__ import annotations

import json

import click
import yaml

from vigil.cli.context import AppContext, pass_app
from vigil.cli.render import console, echo_json
from vigil.config import lookup, printable, redacted, set_value


@click.group()
def config() -> None:
    """Read and change the profile's config.yaml (validated before anything is written)."""


@config.command("path")
@pass_app
def path_cmd(app: AppContext) -> None:
    """Print the path of the profile's config.yaml."""
    click.echo(str(app.profile.config_path))


@config.command("show")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_app
def show_cmd(app: AppContext, as_json: bool) -> None:
    """Show the effective settings (defaults filled in, secrets and URL credentials masked)."""
    data = redacted(app.settings)
    if as_json:
        echo_json(data)
        return
    console.print(f"# {app.profile.config_path}", style="dim", markup=False)
    click.echo(yaml.safe_dump(data, sort_keys=False, allow_unicode=True).rstrip())


@config.command("get")
@click.argument("key")
@pass_app
def get_cmd(app: AppContext, key: str) -> None:
    """Print one setting, e.g. `vigil config get model.name`."""
    try:
        value = lookup(redacted(app.settings), key)
    except KeyError:
        raise click.ClickException(f"unknown setting '{printable(key)}' (see `vigil config show`)") from None
    if isinstance(value, (dict, list)):
        click.echo(json.dumps(value, indent=2))
    elif value is None:
        click.echo("")
    else:
        click.echo(str(value).lower() if isinstance(value, bool) else str(value))


@config.command("set")
@click.argument("key")
@click.argument("value")
@pass_app
def set_cmd(app: AppContext, key: str, value: str) -> None:
    """Set one setting, e.g. `vigil config set model.name gpt-4o`.

    VALUE is read as YAML (numbers, true/false, null, [lists]). The whole file is validated
    first; an invalid value changes nothing.
    """
    path = app.profile.config_path
    settings = set_value(path, key, value)
    shown = lookup(redacted(settings), key)  # secrets masked, URLs without their credentials
    console.print(f"Set {key} = {shown!r} in {path}", markup=False)
    if key in _SANDBOX_KEYS:
        from vigil.tools import sandbox

        if warning := sandbox.status().warning(settings.tools.terminal.sandbox):
            click.echo(f"vigil config: {warning}", err=True)


_SANDBOX_KEYS = ("tools.terminal", "tools.terminal.sandbox", "tools.terminal.network")
"""Settings whose effect depends on bubblewrap being usable on this machine."""
