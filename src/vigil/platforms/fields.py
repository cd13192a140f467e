"""Checks shared by the platforms' config.yaml sections: variable names, user ids, URLs, and
:func:`check`, which makes one of them a section's check of its settings."""

from __future__ import annotations

import re
from typing import Any, Callable

from vigil.config.schema import validates

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_USER_ID = re.compile(r"^[A-Za-z0-9_.@:+-]{1,64}$")


def env_name(value: str) -> str:
    """``value`` if it can name an environment variable (secrets live there, never in the file)."""
    if not _ENV_NAME.match(value):
        raise ValueError("must be the name of an environment variable (letters, digits and _)")
    return value


def user_ids(values: list[str]) -> list[str]:
    """``values`` if each can be a platform's user id (an allow-list)."""
    for value in values:
        if not _USER_ID.match(value):
            raise ValueError(f"'{value[:70]}' is not a platform user id (letters, digits and _.@:+-, at most 64)")
    return values


def http_url(value: str | None) -> str | None:
    """``value`` without a trailing slash if it is an http(s) URL without spaces."""
    if value is None:
        return None
    if not re.match(r"^https?://[^\s/?#]+(/[^\s]*)?$", value):
        raise ValueError("must be an http:// or https:// URL without spaces")
    return value.rstrip("/")


def check(function: Callable[[Any], Any], *names: str) -> Any:
    """``function`` (the value in, the value to keep out, ``ValueError`` when it is wrong) as the
    check of the settings ``names`` of the section whose body assigns it::

        _env = check(env_name, "token_env")

    is ``@validates("token_env")`` over a classmethod returning ``env_name(value)``."""
    return validates(*names)(classmethod(lambda cls, value: function(value)))
