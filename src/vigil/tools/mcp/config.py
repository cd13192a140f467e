"""The configured MCP servers: what ``mcp.servers`` in config.yaml says, the ``${NAME}`` expansion
done when a server starts, and adding or removing a server in the file (``vigil mcp add/remove``).

The file keeps templates, never secrets: ``${NAME}`` is replaced from the environment only on the
way to the server, and the values it produced are remembered so that error messages can be
scrubbed of them before they reach a log or the model.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from vigil.config.settings import Settings
from vigil.config.errors import ConfigError
from vigil.masking import mask_secrets, printable
from vigil.config.mcp import (
    ENV_NAME,
    HEADER_NAME,
    SERVER_NAME,
    SERVER_NAME_WORDS,
    VARIABLE,
    McpServerSettings,
    check_http_url,
    check_template,
    looks_secret,
    secret_hint,
)


class MissingVariable(Exception):
    """A ``${NAME}`` whose variable is not set in the environment."""


@dataclass(frozen=True, slots=True)
class ServerSpec:
    """One configured server, as vigil uses it (templates unexpanded)."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    unattended: bool = False
    trusted: bool = False
    sandbox: bool = True

    @property
    def transport(self) -> str:
        """``stdio`` (a program vigil starts) or ``http`` (streamable HTTP)."""
        return "stdio" if self.command is not None else "http"

    def fingerprint(self) -> str:
        """A hash of everything that decides how the server is reached (not the approval flags):
        a cached tool list is reused only while it is unchanged."""
        data = [self.transport, self.command, list(self.args), list(self.env), self.url, list(self.headers)]
        if self.transport == "stdio":
            data.append(self.sandbox)
        return hashlib.sha256(json.dumps(data).encode("utf-8", "surrogatepass")).hexdigest()[:16]

    def describe(self) -> str:
        """One line saying what the server is, credentials in the URL masked."""
        if self.command is not None:
            return printable(" ".join([self.command, *self.args]), 200)
        return printable(mask_secrets(self.url or ""), 200)

    def flags(self) -> list[str]:
        """What may call it and how it runs, in words (for listings)."""
        words = ["unattended runs may call it" if self.unattended else "attended runs only"]
        words.append("trusted: never asks" if self.trusted else "asks before each tool's first call")
        if self.transport == "stdio":
            words.append("sandboxed" if self.sandbox else "not sandboxed")
        return words


def configured(settings: Settings) -> dict[str, ServerSpec]:
    """Every server of ``mcp.servers``, by name, in the file's order."""
    return {name: _spec(name, entry) for name, entry in settings.mcp.servers.items()}


def _spec(name: str, entry: McpServerSettings) -> ServerSpec:
    return ServerSpec(
        name=name,
        command=entry.command,
        args=tuple(entry.args),
        env=tuple(entry.env.items()),
        url=entry.url,
        headers=tuple(entry.headers.items()),
        unattended=entry.unattended,
        trusted=entry.trusted,
        sandbox=entry.sandbox,
    )


@dataclass
class Expanded:
    """Templates with ``${NAME}`` replaced; ``secrets`` collects the values put in."""

    environ: Mapping[str, str]
    secrets: list[str] = field(default_factory=list)

    def __call__(self, template: str, where: str) -> str:
        def one(match: re.Match[str]) -> str:
            value = self.environ.get(match.group(1))
            if value is None:
                raise MissingVariable(f"the environment variable {match.group(1)} is not set (used in {where})")
            if value:
                self.secrets.append(value)
            return value

        return VARIABLE.sub(one, template)

    def scrub(self, text: str) -> str:
        """``text`` without any value that came from the environment, and URL secrets masked."""
        for secret in sorted(set(self.secrets), key=len, reverse=True):
            if len(secret) >= 4:
                text = text.replace(secret, "***")
        return mask_secrets(text)


# -- vigil mcp add / remove -----------------------------------------------------------------
def check_server_name(name: str) -> str:
    """``name`` if it is a valid server name; ``ConfigError`` otherwise."""
    if not SERVER_NAME.fullmatch(name):
        raise ConfigError(f"'{printable(name)}' is not {SERVER_NAME_WORDS}")
    return name


def env_entries(items: Sequence[str]) -> dict[str, str]:
    """``--env KEY=VALUE`` (or a bare ``KEY``: passed on from vigil's environment as ``${KEY}``)."""
    env: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not ENV_NAME.fullmatch(key):
            raise ConfigError(
                f"--env '{printable(item, 60)}': write KEY=VALUE, or KEY alone to pass on vigil's own "
                "variable (letters, digits and _, not starting with a digit)"
            )
        value = value if sep else f"${{{key}}}"
        _check_value(value, f"--env {key}")
        if looks_secret("env", key) and not VARIABLE.search(value):
            raise ConfigError(f"--env {key}: {secret_hint('env', key)} (or pass --env {key} alone)")
        env[key] = value
    return env


def header_entries(items: Sequence[str], server: str) -> dict[str, str]:
    """``--header 'Name: value'`` items as a mapping."""
    headers: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition(":")
        key, value = key.strip(), value.strip()
        if not sep or not HEADER_NAME.fullmatch(key):
            raise ConfigError(
                f"--header '{printable(mask_secrets(item), 60)}': write 'Name: value' with a header name "
                "of letters, digits and -"
            )
        _check_value(value, f"--header {key}")
        if looks_secret("header", key) and not VARIABLE.search(value):
            raise ConfigError(
                f"--header {key}: {secret_hint('header', key, server)}; quote it in single quotes so that "
                "the shell leaves ${...} alone"
            )
        headers[key] = value
    return headers


def _check_value(value: str, what: str) -> None:
    if re.search(r"[\x00-\x1f\x7f]", value):
        raise ConfigError(f"{what}: the value must be one line of text without control characters")
    try:
        check_template(value, what)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def stdio_entry(
    command: Sequence[str], env: dict[str, str], *, unattended: bool, trusted: bool, sandbox: bool
) -> dict[str, object]:
    """The config.yaml entry of a server vigil starts with ``command`` (program and arguments)."""
    if not command or not command[0].strip():
        raise ConfigError("give the command that starts the server after --, e.g. -- uvx mcp-server-time")
    for word in command:
        if re.search(r"[\x00-\x1f\x7f]", word):
            raise ConfigError(f"'{printable(word, 60)}': the command and its arguments must be one line of text each")
    entry: dict[str, object] = {"command": command[0]}
    if len(command) > 1:
        entry["args"] = list(command[1:])
    if env:
        entry["env"] = env
    return _flags(entry, unattended, trusted, sandbox)


def http_entry(url: str, headers: dict[str, str], *, unattended: bool, trusted: bool) -> dict[str, object]:
    """The config.yaml entry of a streamable HTTP server at ``url``."""
    try:
        check_http_url(url)
    except ValueError as exc:
        raise ConfigError(f"--url: {exc}") from None
    entry: dict[str, object] = {"url": url}
    if headers:
        entry["headers"] = headers
    return _flags(entry, unattended, trusted, True)


def _flags(entry: dict[str, object], unattended: bool, trusted: bool, sandbox: bool) -> dict[str, object]:
    if unattended:
        entry["unattended"] = True
    if trusted:
        entry["trusted"] = True
    if not sandbox:
        entry["sandbox"] = False
    return entry


def add_server(path: Path, settings: Settings, name: str, entry: dict[str, object]) -> Settings:
    """Write ``entry`` as ``mcp.servers.NAME`` into config.yaml (comments and layout kept)."""
    from vigil.config.editing import set_value

    check_server_name(name)
    if name in settings.mcp.servers:
        raise ConfigError(
            f"an MCP server named '{name}' is configured already; remove it first (vigil mcp remove {name})"
        )
    # JSON is YAML: set_value parses it, validates the whole file and writes it atomically.
    return set_value(path, f"mcp.servers.{name}", json.dumps(entry, ensure_ascii=False))


def remove_server(path: Path, settings: Settings, name: str) -> Settings:
    """Remove ``mcp.servers.NAME`` from config.yaml."""
    from vigil.config.editing import unset_value

    if name not in settings.mcp.servers:
        known = ", ".join(settings.mcp.servers) or "none"
        raise ConfigError(f"no MCP server named '{printable(name)}' is configured (configured: {known})")
    return unset_value(path, f"mcp.servers.{name}")
