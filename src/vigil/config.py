"""Typed settings of a profile, read from its ``config.yaml``.

Every section forbids unknown keys, so a typo is reported instead of silently ignored. Errors
name the file and the line of the offending key or value.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from vigil.config_errors import ConfigError

if TYPE_CHECKING:  # ruamel.yaml (round-trip editing) loads only in `set_value`: reading needs PyYAML
    from ruamel.yaml import YAML

SECRET_KEYS = frozenset({"api_key"})


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ModelSettings(_Section):
    """Which model to talk to and how."""

    provider: Literal["openai", "anthropic"] | None = Field(
        None, description="API style: openai (any OpenAI-compatible endpoint) or anthropic"
    )
    name: str | None = Field(None, description="model name sent to the provider")
    base_url: str | None = Field(None, description="endpoint URL (default: the provider's own)")
    api_key_env: str | None = Field(
        None, description="environment variable holding the API key (default per provider)"
    )
    api_key: str | None = Field(None, description="API key (prefer api_key_env)")
    context_window: int = Field(128_000, ge=1024, description="tokens the model accepts")
    max_output_tokens: int = Field(4096, ge=1, description="answer length limit")
    temperature: float | None = Field(None, ge=0, le=2)
    timeout: float = Field(120.0, gt=0, description="seconds per request")
    max_retries: int = Field(3, ge=0, le=10, description="retries on 429/5xx/connection errors")
    cache_ttl: Literal["5m", "1h"] = Field("5m", description="Anthropic prompt cache lifetime")


class AgentSettings(_Section):
    """The tool loop and compression."""

    max_iterations: int = Field(30, ge=1, le=500, description="model calls allowed per turn")
    compression_threshold: float = Field(
        0.75, gt=0.1, lt=1.0, description="share of the context window that triggers compression"
    )


class TerminalSettings(_Section):
    """The terminal tool: limits, and the sandbox for commands nobody is there to approve."""

    timeout: float = Field(120.0, gt=0, description="seconds before a command is killed")
    output_cap: int = Field(20_000, ge=256, description="characters of output kept")
    sandbox: Literal["unattended", "always", "never"] = Field(
        "unattended",
        description="run commands in a bubblewrap sandbox: in unattended runs (cron, heartbeats, "
        "-q without a terminal), always, or never",
    )
    network: bool = Field(True, description="whether sandboxed commands may use the network")


class ToolSettings(_Section):
    """Built-in tools."""

    enabled: list[str] | None = Field(None, description="tool names to offer (default: all)")
    terminal: TerminalSettings = Field(default_factory=TerminalSettings)

    @model_validator(mode="before")
    @classmethod
    def _legacy_terminal_keys(cls, data: Any) -> Any:
        """``terminal_timeout`` / ``terminal_output_cap`` predate the ``terminal`` section."""
        if isinstance(data, dict) and ("terminal_timeout" in data or "terminal_output_cap" in data):
            data = dict(data)
            terminal = data.get("terminal")
            terminal = dict(terminal) if isinstance(terminal, dict) else {}
            for legacy, key in (("terminal_timeout", "timeout"), ("terminal_output_cap", "output_cap")):
                if legacy in data:
                    terminal.setdefault(key, data.pop(legacy))
            data["terminal"] = terminal
        return data


class PromptSettings(_Section):
    """System prompt building."""

    max_file_chars: int = Field(20_000, ge=256, description="cap per source file")
    context_files: bool = Field(True, description="include AGENTS.md and friends")


class StoreSettings(_Section):
    """Where sessions are kept."""

    url: str | None = Field(
        None, description="postgresql://... to use PostgreSQL; empty = state.db in the profile"
    )


class Settings(_Section):
    """The whole validated config.yaml of a profile."""

    model: ModelSettings = Field(default_factory=ModelSettings)
    agent: AgentSettings = Field(default_factory=AgentSettings)
    tools: ToolSettings = Field(default_factory=ToolSettings)
    prompt: PromptSettings = Field(default_factory=PromptSettings)
    store: StoreSettings = Field(default_factory=StoreSettings)
    timezone: str | None = Field(None, description="IANA zone for schedules (default: system)")

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str | None) -> str | None:
        if value is not None:
            from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

            try:
                ZoneInfo(value)
            except (ZoneInfoNotFoundError, ValueError):
                raise ValueError(f"unknown time zone '{value}'") from None
        return value


def load_settings(path: Path) -> Settings:
    """Read and validate ``path``; a missing or empty file gives the defaults."""
    return validate_raw(read_raw(path), path)


def read_raw(path: Path) -> dict[str, Any]:
    """The parsed YAML mapping in ``path`` (``{}`` when the file is missing or empty)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{where}: invalid YAML: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:1: the top level must be a mapping of sections (model:, agent:, ...)")
    return data


def validate_raw(data: dict[str, Any], path: Path) -> Settings:
    """Validate parsed YAML, translating the first error into ``file:line: reason``."""
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        loc = tuple(error["loc"])
        dotted = ".".join(str(part) for part in loc)
        line = _line_of(path, loc)
        where = f"{path}:{line}" if line else str(path)
        if error["type"] == "extra_forbidden":
            reason = f"unknown setting '{dotted}'"
        else:
            reason = f"{dotted}: {error['msg']}"
        more = len(exc.errors()) - 1
        suffix = f" (and {more} more problem(s))" if more else ""
        raise ConfigError(f"{where}: {reason}{suffix}") from None


def _line_of(path: Path, loc: tuple[Any, ...]) -> int | None:
    """The 1-based line of the YAML node at ``loc`` (or of its nearest existing ancestor)."""
    try:
        node = yaml.compose(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None
    line = node.start_mark.line + 1 if node is not None else None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            match = next(((k, v) for k, v in node.value if k.value == str(part)), None)
            if match is None:
                return line
            line = match[0].start_mark.line + 1
            node = match[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            return line
    return line


def get_value(settings: Settings, dotted: str) -> Any:
    """The value at a dotted key such as ``model.name``; ``KeyError`` if there is none."""
    return lookup(settings.model_dump(mode="json"), dotted)


def lookup(data: dict[str, Any], dotted: str) -> Any:
    """The value at a dotted key in nested plain data; ``KeyError`` if there is none."""
    value: Any = data
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            raise KeyError(dotted)
        value = value[part]
    return value


def set_value(path: Path, dotted: str, raw_value: str) -> Settings:
    """Set ``dotted`` to ``raw_value`` (parsed as YAML) in ``path``.

    The new whole config is validated first; the file is replaced atomically only if it is
    valid, so a bad value or an already broken file changes nothing. Comments, key order and
    formatting of the rest of the file are kept.
    """
    from ruamel.yaml.comments import CommentedMap

    data = read_raw(path)
    validate_raw(data, path)
    try:
        value = yaml.safe_load(raw_value) if raw_value.strip() else None
    except yaml.YAMLError:
        value = raw_value
    parts = dotted.split(".")
    if not all(parts):
        raise ConfigError(f"invalid key '{dotted}': use dotted names such as model.name")
    _assign(data, parts, value, path)
    try:
        settings = Settings.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        if error["type"] == "extra_forbidden":
            raise ConfigError(f"unknown setting '{dotted}' (see `vigil config show`)") from None
        raise ConfigError(f"{dotted}: {error['msg']}") from None
    document = _round_trip().load(path.read_text(encoding="utf-8")) if path.exists() else None
    if not isinstance(document, dict):
        document = CommentedMap()
    _assign(document, parts, value, path)
    buffer = io.StringIO()
    _round_trip().dump(document, buffer)
    _write_atomically(path, buffer.getvalue())
    return settings


def _assign(node: dict[str, Any], parts: list[str], value: Any, path: Path) -> None:
    from ruamel.yaml.comments import CommentedMap

    for part in parts[:-1]:
        child = node.get(part)
        if child is None:
            child = node[part] = CommentedMap() if isinstance(node, CommentedMap) else {}
        if not isinstance(child, dict):
            raise ConfigError(f"{path}: '{part}' is not a section")
        node = child
    node[parts[-1]] = value


def _round_trip() -> YAML:
    from ruamel.yaml import YAML

    handler = YAML(typ="rt")
    handler.preserve_quotes = True
    return handler


def redacted(settings: Settings) -> dict[str, Any]:
    """The settings as plain data with secrets masked, for display."""
    data = settings.model_dump(mode="json")

    def mask(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: ("***" if k in SECRET_KEYS and v else mask(v)) for k, v in node.items()}
        return node

    return mask(data)


def to_json(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=False)


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".config-", suffix=".yaml", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
