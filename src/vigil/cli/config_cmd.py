"""``vigil config``: show, get, set and unset settings in the profile's config.yaml."""

from __future__ import annotations

import json
import os

import click
import yaml

from vigil.cli.context import AppContext, pass_app
from vigil.cli.render import console, echo_json
from vigil.config.settings import lookup, printable, redacted
from vigil.config.editing import set_value, unset_value


@click.group()
def config() -> None:
    """Read and change the profile's config.yaml.

    Every change is validated before anything is written.
    """


@config.command("path")
@pass_app
def path_cmd(app: AppContext) -> None:
    """Print the path of the profile's config.yaml."""
    click.echo(str(app.profile.config_path))


@config.command("show")
@click.option("--origin", is_flag=True, help="Say where each value comes from: default, file:line or env:VAR.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_app
def show_cmd(app: AppContext, origin: bool, as_json: bool) -> None:
    """Show the settings in force.

    Each value comes from a default, config.yaml or the environment; secrets are masked.

    Model settings the file leaves empty show what the environment supplies (OPENAI_BASE_URL,
    OPENAI_API_KEY, ANTHROPIC_API_KEY, VIGIL_MODEL, ...). With --origin each line says where
    its value comes from, like `git config --show-origin`; with --json too, each key maps to
    {"value": ..., "origin": ...}.
    """
    from vigil.config.origins import nested, settings_in_force

    entries = settings_in_force(app.settings, app.profile.config_path, os.environ)
    if as_json:
        if origin:
            echo_json({e.key: {"value": e.value, "origin": e.origin} for e in entries})
        else:
            echo_json(nested(entries))
        return
    console.print(f"# {app.profile.config_path}", style="dim", markup=False)
    if not origin:
        click.echo(yaml.safe_dump(nested(entries), sort_keys=False, allow_unicode=True).rstrip())
        return
    width = max(len(e.origin) for e in entries)
    for entry in entries:
        click.echo(f"{entry.origin:<{width}}  {entry.key} = {_one_line(entry.value)}")


def _one_line(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


@config.command("get")
@click.argument("key")
@pass_app
def get_cmd(app: AppContext, key: str) -> None:
    """Print one setting.

    For example `vigil config get model.name`; secrets are masked.
    """
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


@config.command("set", context_settings={"ignore_unknown_options": True})
@click.argument("key")
@click.argument("value")
@pass_app
def set_cmd(app: AppContext, key: str, value: str) -> None:
    """Set one setting in config.yaml.

    For example `vigil config set model.name gpt-4o`.

    VALUE is read as YAML (numbers, true/false, [lists]); a negative number needs no `--`.
    The whole file is validated first; an invalid value changes nothing. To go back to the
    default, use `vigil config unset KEY`.
    """
    path = app.profile.config_path
    settings = set_value(path, key, value)
    shown = lookup(redacted(settings), key)  # secrets masked, URLs without their credentials
    console.print(f"Set {key} = {shown!r} in {path}", markup=False)
    if key in _SANDBOX_KEYS:
        from vigil.tools import sandbox

        if warning := sandbox.status().warning(settings.tools.terminal.sandbox):
            click.echo(f"vigil config: {warning}", err=True)


@config.command("unset")
@click.argument("key")
@pass_app
def unset_cmd(app: AppContext, key: str) -> None:
    """Remove a setting: its default applies again.

    Comments and layout of the rest of the file are kept; the result is validated before it
    is written, and an unknown key or one the file does not set changes nothing.
    """
    path = app.profile.config_path
    unset_value(path, key)
    console.print(f"Unset {key} in {path}", markup=False)


_SANDBOX_KEYS = ("tools.terminal", "tools.terminal.sandbox", "tools.terminal.network")
"""Settings whose effect depends on bubblewrap being usable on this machine."""
