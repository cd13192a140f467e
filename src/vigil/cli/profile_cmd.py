"""``vigil profile``: list, create, show and delete profiles."""

from __future__ import annotations

import click
from rich.markup import escape
from rich.table import Table

from vigil.cli.confirm import confirm_or_refuse, yes_option
from vigil.cli.context import AppContext, pass_app
from vigil.cli.render import console, echo_json
from vigil.profiles import (
    DEFAULT_PROFILE,
    Profile,
    create_profile,
    delete_profile,
    list_profiles,
    profile_path,
)


def _describe(profile: Profile) -> dict[str, object]:
    return {
        "name": profile.name,
        "home": str(profile.home),
        "exists": profile.exists,
        "config": str(profile.config_path),
        "has_config": profile.config_path.is_file(),
        "state_db": str(profile.state_db),
        "has_state_db": profile.state_db.is_file(),
        "soul": profile.soul_path.is_file(),
        "skills": sorted(p.name for p in profile.skills_dir.iterdir() if p.is_dir())
        if profile.skills_dir.is_dir()
        else [],
    }


@click.group()
def profile() -> None:
    """Manage profiles, each a separate home.

    Each profile has its own config, files and sessions.

    The default profile is $VIGIL_HOME (~/.vigil); named profiles live in
    $VIGIL_HOME/profiles/NAME. Select one with -p NAME on any command.
    """


@profile.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_app
def list_cmd(app: AppContext, as_json: bool) -> None:
    """List the profiles."""
    profiles = list_profiles()
    if as_json:
        echo_json([_describe(p) for p in profiles])
        return
    table = Table("profile", "home", "sessions db", box=None)
    for p in profiles:
        table.add_row(p.name, escape(str(p.home)), "yes" if p.state_db.is_file() else "-")
    console.print(table)


@profile.command("create")
@click.argument("name")
@pass_app
def create_cmd(app: AppContext, name: str) -> None:
    """Create a named profile."""
    created = create_profile(name)
    console.print(f"Created profile '{created.name}' at {created.home}", markup=False)
    console.print(f"Use it with: vigil -p {created.name} chat")


@profile.command("show")
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_app
def show_cmd(app: AppContext, name: str | None, as_json: bool) -> None:
    """Show a profile's paths and contents.

    Without NAME, the selected profile.
    """
    target = profile_path(name if name is not None else app.profile_name or DEFAULT_PROFILE)
    if not target.exists and target.name != DEFAULT_PROFILE:
        raise click.ClickException(f"profile '{target.name}' does not exist")
    info = _describe(target)
    if as_json:
        echo_json(info)
        return
    for key, value in info.items():
        if isinstance(value, list):
            value = ", ".join(value) or "-"
        console.print(f"[bold]{key:>12}[/bold]  {escape(str(value))}")


@profile.command("delete")
@click.argument("name")
@yes_option
@pass_app
def delete_cmd(app: AppContext, name: str, yes: bool) -> None:
    """Delete a profile with its sessions and files."""
    target = profile_path(name)
    if target.name == DEFAULT_PROFILE:
        raise click.ClickException("the default profile cannot be deleted")
    if not target.exists:
        raise click.ClickException(f"profile '{name}' does not exist")
    confirm_or_refuse(
        f"Delete profile '{name}' and everything in {target.home}?",
        yes=yes,
        action=f"delete profile '{name}'",
    )
    delete_profile(name)
    console.print(f"Deleted profile '{name}'.")
