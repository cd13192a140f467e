"""What every command shares: the selected profile, its settings and its store, opened lazily."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable, TypeVar

import click

if TYPE_CHECKING:
    from vigil.config.settings import Settings
    from vigil.profiles import Profile
    from vigil.store import SessionStore

F = TypeVar("F", bound=Callable[..., Any])


class AppContext:
    """Per-invocation state: resolves the profile, config and store on first use."""

    def __init__(self) -> None:
        self.profile_name: str | None = None
        self._profile: Profile | None = None
        self._settings: Settings | None = None
        self._store: SessionStore | None = None

    @property
    def profile(self) -> Profile:
        if self._profile is None:
            from vigil.profiles import get_profile

            self._profile = get_profile(self.profile_name)
        return self._profile

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            from vigil.config.settings import load_settings

            self._settings = load_settings(self.profile.config_path)
        return self._settings

    @property
    def store(self) -> SessionStore:
        if self._store is None:
            from vigil.store import open_store

            self._store = open_store(self.settings.store.url or self.profile.state_db)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


def remember_profile(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.ensure_object(AppContext).profile_name = value


def _profile_param(envvar: str | None = None) -> click.Option:
    return click.Option(
        ["-p", "--profile"],
        metavar="NAME",
        envvar=envvar,
        expose_value=False,
        is_eager=True,
        callback=remember_profile,
        help="Profile to use (default: the root profile in $VIGIL_HOME"
        + (", or $VIGIL_PROFILE)." if envvar else ")."),
    )


def profile_option(func: F) -> F:
    """Add ``-p/--profile`` to a command, so the option works after any subcommand too.

    Only the top-level ``vigil`` reads ``$VIGIL_PROFILE``: an explicit ``-p`` anywhere on the
    command line must win over the environment.
    """
    params = getattr(func, "__click_params__", [])
    if not any(p.name == "profile" for p in params):
        func.__click_params__ = [*params, _profile_param()]  # type: ignore[attr-defined]
    return func


def add_profile_option_everywhere(command: click.Command) -> None:
    """Give every group and command under ``command`` a ``-p/--profile`` option."""
    if not any(param.name == "profile" for param in command.params):
        command.params.append(_profile_param())
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            add_profile_option_everywhere(sub)


def pass_app(func: F) -> F:
    """Give the command the shared :class:`AppContext` as its first argument."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        return func(ctx.ensure_object(AppContext), *args, **kwargs)

    return profile_option(wrapper)  # type: ignore[return-value]
