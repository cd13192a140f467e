"""The secrets a gateway service reads from its environment, kept for systemd in a file.

A systemd user service does not inherit the shell's environment: a unit without the platforms'
tokens and the model's key starts with its messaging platforms misconfigured and no model.
``vigil gateway install --env-file`` therefore writes ``gateway.env`` in the profile (mode 0600)
with the values of the variables the profile's configuration reads — the model's key and
endpoint, each enabled platform's declared secrets (:mod:`vigil.platforms`) and the ``${NAME}``
references of the MCP servers — taken from the environment of the command, and the unit names it
as its ``EnvironmentFile=``. A value already in the file for a variable not set now is kept (it
may have been added by hand); the values are never printed.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from vigil import platforms as registry
from vigil.gateway.install import InstallError
from vigil.config.model_env import BASE_URL_ENV, KEY_ENV, LOCAL_MODEL_ENV, MODEL_ENV

FILE_NAME = "gateway.env"
_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_LINE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


class EnvFileError(InstallError):
    """The file cannot be written as asked; the message says why."""


@dataclass(frozen=True, slots=True)
class Needed:
    """A variable the gateway may read, what for (``the model's API key``), and whether the
    configuration can do without it (the endpoint and model name have defaults or config values)."""

    name: str
    why: str
    optional: bool = False


def needed_variables(settings: Any) -> list[Needed]:
    """The variables the profile's settings read their secrets and model from, in a stable order."""
    found: dict[str, str] = {}
    optional: set[str] = {MODEL_ENV, LOCAL_MODEL_ENV, *BASE_URL_ENV.values()}
    model = settings.model
    provider = model.provider
    if provider in KEY_ENV and not model.api_key:
        found[model.api_key_env or KEY_ENV[provider]] = "the model's API key"
    if provider in BASE_URL_ENV:
        found[BASE_URL_ENV[provider]] = "the model endpoint"
    if provider is None:  # the environment picks the provider: whichever of them is set
        for name in (*KEY_ENV.values(), *BASE_URL_ENV.values()):
            found[name] = "the model"
            optional.add(name)
    found.setdefault(MODEL_ENV, "the model's name")
    if provider == "local":
        found[LOCAL_MODEL_ENV] = "the local model's GGUF file"
    for platform in registry.platforms():
        if platform.enabled(settings):
            for name in platform.secrets(settings):
                found.setdefault(name, f"{platform.name}'s secret")
    for server_name, server in settings.mcp.servers.items():
        texts = [*server.env.values(), *server.headers.values(), server.url or ""]
        for text in texts:
            for name in _REFERENCE.findall(text):
                found.setdefault(name, f"the MCP server {server_name}")
    return [Needed(name, why, name in optional) for name, why in found.items()]


def update_env_file(settings: Any, path: Path, environ: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """Write ``path`` for ``settings`` from ``environ`` (see the module docstring): the names it
    holds now, and the needed ones it lacks (``NAME (what for)``; optional ones not counted)."""
    needed = needed_variables(settings)
    try:
        values = merged_values(needed, environ, read_env_file(path))
    except UnicodeDecodeError as exc:
        raise EnvFileError(f"{path} is not text ({exc.reason})") from None
    write_env_file(path, render_env_file(values))
    missing = [f"{v.name} ({v.why})" for v in needed if v.name not in values and not v.optional]
    return list(values), missing


def read_env_file(path: Path) -> dict[str, str]:
    """The ``NAME=value`` lines of an existing file (quoted values unquoted); ``{}`` if none."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    values: dict[str, str] = {}
    for line in text.splitlines():
        match = _LINE.match(line)
        if match and not line.lstrip().startswith("#"):
            values[match.group(1)] = _unquoted(match.group(2).strip())
    return values


def merged_values(needed: list[Needed], environ: Mapping[str, str], kept: Mapping[str, str]) -> dict[str, str]:
    """What the file will hold: each needed variable set now (the environment wins), else the
    value the file had; other variables the file had stay too."""
    values = dict(kept)
    for variable in needed:
        if environ.get(variable.name):
            values[variable.name] = environ[variable.name]
    return values


def render_env_file(values: Mapping[str, str]) -> str:
    """The file's text, as systemd's ``EnvironmentFile=`` reads it (every value double-quoted)."""
    lines = ["# Written by `vigil gateway install --env-file`: the gateway service's secrets (keep it 0600)."]
    for name, value in values.items():
        if "\n" in value or "\r" in value or "\0" in value:
            raise EnvFileError(f"the value of {name} spans several lines, which an environment file cannot hold")
        lines.append(f"{name}={_quoted(value)}")
    return "\n".join(lines) + "\n"


def write_env_file(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` with mode 0600, atomically (a temporary file renamed into place)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, text.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.chmod(temporary, 0o600)  # an existing temporary file kept its mode
    os.replace(temporary, path)


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$").replace("`", "\\`") + '"'


def _unquoted(raw: str) -> str:
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
        body = raw[1:-1]
        return re.sub(r"\\(.)", r"\1", body) if raw[0] == '"' else body
    return raw
