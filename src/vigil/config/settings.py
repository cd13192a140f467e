"""Typed settings of a profile, read from its ``config.yaml``.

Every section forbids unknown keys, so a typo is reported instead of silently ignored; every
value is type-checked strictly (``true`` is not a number, ``"5"`` is not an integer) and every
number is bounded. Errors name the file and the line of the offending key or value, and the
limit a number broke.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Literal

from vigil.config.errors import ConfigError
from vigil.config.gateway import GatewaySettings
from vigil.platforms.discord import DiscordSettings
from vigil.platforms.email import EmailSettings
from vigil.platforms.matrix import MatrixSettings
from vigil.platforms.slack import SlackSettings
from vigil.platforms.telegram import TelegramSettings
from vigil.platforms.webhooks import WebhooksSettings
from vigil.masking import mask_secrets, printable
from vigil.config.mcp import McpSettings
from vigil.safe_files import UnsafeFile, read_text
from vigil.config.schema import Problem, Section, SettingsInvalid, Spec, ValueProblem, setting, validates
from vigil.config.store_location import store_location
from vigil.config.tool_names import BUILTIN_TOOL_NAMES


SECRET_KEYS = frozenset({"api_key"})
URL_KEYS = frozenset({"base_url", "url"})
"""Settings holding URLs, shown with any credentials inside them masked."""

RENAMED_KEYS = {
    "tools.terminal_timeout": "tools.terminal.timeout",
    "tools.terminal_output_cap": "tools.terminal.output_cap",
}
"""Old keys that still load from a file but are not written any more."""
CONFIG_FILE_CAP = 1 << 20
"""Bytes a config.yaml may have; a real one has a few hundred."""

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _text(value: str | None, what: str) -> str | None:
    """Refuse control characters (a pasted newline or NUL) in a one-line setting."""
    if value is not None and _CONTROL.search(value):
        raise ValueError(f"{what} must be one line of text without control characters")
    return value


class LocalModelSettings(Section):
    """The in-process llama.cpp engine of ``model.provider: local`` (``pip install 'vigil[local]'``)."""

    threads: int = setting(0, ge=0, le=1024, description="CPU threads for the engine (0: every core)")
    context: int = setting(
        8192, ge=512, le=1_048_576, description="tokens of context per slot (model.context_window follows it)"
    )
    slots: int = setting(1, ge=1, le=64, description="conversations the engine serves at the same time")
    shared: bool = setting(
        False,
        description="one engine per profile in its own process, reused by every vigil process "
        "(the prompt cache survives a restart of vigil)",
    )
    idle_stop: float = setting(
        900.0, gt=0, le=604_800, allow_inf_nan=False, description="seconds a shared engine waits idle before it stops"
    )


class ModelSettings(Section):
    """Which model to talk to and how."""

    provider: Literal["openai", "anthropic", "local"] | None = setting(
        None,
        description="API style: openai (any OpenAI-compatible endpoint), anthropic, or local "
        "(a GGUF file run inside vigil)",
    )
    name: str | None = setting(None, max_length=256, description="model name sent to the provider")
    base_url: str | None = setting(
        None, max_length=2048, description="endpoint URL (default: the provider's own)"
    )
    api_key_env: str | None = setting(
        None, description="environment variable holding the API key (default per provider)"
    )
    api_key: str | None = setting(None, max_length=4096, description="API key (prefer api_key_env)")
    context_window: int = setting(
        128_000, ge=1024, le=100_000_000, description="tokens the model accepts"
    )
    max_output_tokens: int = setting(4096, ge=1, le=10_000_000, description="answer length limit")
    temperature: float | None = setting(None, ge=0, le=2, allow_inf_nan=False)
    timeout: float = setting(
        120.0, gt=0, le=86_400, allow_inf_nan=False, description="seconds per request"
    )
    max_retries: int = setting(3, ge=0, le=10, description="retries on 429/5xx/connection errors")
    cache_ttl: Literal["5m", "1h"] = setting("5m", description="Anthropic prompt cache lifetime")
    path: str | None = setting(
        None, max_length=4096, description="GGUF model file for provider local (or VIGIL_LOCAL_MODEL)"
    )
    local: LocalModelSettings = setting(default_factory=LocalModelSettings)
    text_tool_calls: Literal["auto", "on", "off"] = setting(
        "auto",
        description="turn tool calls the model writes as text into real ones: auto (a local model "
        "whose chat template has no native tool calls), on (any endpoint), off",
    )

    @validates("name", "api_key")
    @classmethod
    def _one_line(cls, value: str | None) -> str | None:
        return _text(value, "the value")

    @validates("path")
    @classmethod
    def _model_file(cls, value: str | None) -> str | None:
        if not value:
            return None
        _text(value, "the path")
        if not os.path.isabs(os.path.expanduser(value)):
            raise ValueError(f"'{printable(value)}' is not an absolute path (e.g. /home/me/models/model.gguf)")
        return value

    def effective_context_window(self) -> int:
        """Tokens the model accepts: the local engine's context unless ``context_window`` is set."""
        if self.provider == "local" and "context_window" not in self.fields_given:
            return self.local.context
        return self.context_window

    @validates("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if not value:
            return None
        _text(value, "the URL")
        scheme, sep, rest = value.partition("://")
        host = rest.split("/", 1)[0].rpartition("@")[2]
        if not sep or scheme.lower() not in ("http", "https") or not host or " " in value:
            raise ValueError(
                f"'{printable(mask_secrets(value))}' is not an http:// or https:// URL with a host "
                "(e.g. http://localhost:11434/v1)"
            )
        return value

    @validates("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME.match(value):
            raise ValueError(
                "must be the name of an environment variable (letters, digits and _, "
                "not starting with a digit, at most 128)"
            )
        return value


class AgentSettings(Section):
    """The tool loop and compression."""

    max_iterations: int = setting(30, ge=1, le=500, description="model calls allowed per turn")
    compression_threshold: float = setting(
        0.75,
        gt=0.1,
        lt=1.0,
        allow_inf_nan=False,
        description="share of the context window that triggers compression",
    )
    background_max: int = setting(
        2, ge=0, le=20, description="/background tasks one conversation may run at once (0: none)"
    )


class TerminalSettings(Section):
    """The terminal tool: limits, and the sandbox every command runs in (README, "What the
    agent may run on its own")."""

    timeout: float = setting(
        120.0, gt=0, le=86_400, allow_inf_nan=False, description="seconds before a command is killed"
    )
    output_cap: int = setting(20_000, ge=256, le=10_000_000, description="characters of output kept")
    sandbox: Literal["always", "unattended", "never"] = setting(
        "always",
        description="run commands in a bubblewrap sandbox: always (leaving it takes a person's approval), "
        "only in unattended runs (cron, heartbeats, -q without a terminal), or never",
    )
    network: bool = setting(
        True, description="whether sandboxed commands reach the network (never the host's own loopback services)"
    )
    local_ports: list[int] = setting(
        default_factory=list, ge=1, le=65_535, max_length=100,
        description="ports of services on this machine's loopback that sandboxed commands may reach",
    )
    hide: list[str] = setting(
        default_factory=list, max_length=200,
        description="further files or folders sandboxed commands and the file tools cannot see (~ allowed)",
    )

    @validates("hide")
    @classmethod
    def _hidden_paths(cls, value: list[str]) -> list[str]:
        for index, path in enumerate(value):
            if not path.strip() or _CONTROL.search(path):
                raise ValueProblem("a path to hide must be one line of text", at=(index,))
            if not (path.startswith("/") or path.startswith("~")):
                raise ValueProblem(
                    f"'{printable(path)}' is not an absolute path (start it with / or ~)", at=(index,)
                )
        return value


def _known_tools(names: list[str]) -> list[str]:
    for index, name in enumerate(names):
        if name not in BUILTIN_TOOL_NAMES:
            raise ValueProblem(
                f"unknown tool '{printable(name)}' (known tools: {', '.join(BUILTIN_TOOL_NAMES)})", at=(index,)
            )
    return names


class ToolSettings(Section):
    """Built-in tools."""

    enabled: list[str] | None = setting(
        None, max_length=100, description="tool names to offer (default: all)"
    )
    terminal: TerminalSettings = setting(default_factory=TerminalSettings)

    @validates("enabled")
    @classmethod
    def _known(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else _known_tools(value)

    @classmethod
    def prepare(cls, data: Any) -> Any:
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


class PromptSettings(Section):
    """System prompt building."""

    max_file_chars: int = setting(20_000, ge=256, le=1_000_000, description="cap per source file")
    context_files: bool = setting(True, description="include AGENTS.md and friends")


class HeartbeatSettings(Section):
    """Limits for every heartbeat of the profile."""

    daily_token_budget: int | None = setting(
        None,
        ge=1,
        le=10**12,
        description="tokens a heartbeat's turns may use in 24 hours before it is paused "
        "(empty = no limit)",
    )


class StoreSettings(Section):
    """Where sessions are kept."""

    url: str | None = setting(
        None,
        max_length=4096,
        description="postgresql://... to use PostgreSQL, or an absolute path / sqlite:///path "
        "for an SQLite file; empty = state.db in the profile",
    )

    @validates("url")
    @classmethod
    def _known_store(cls, value: str | None) -> str | None:
        if not value:
            return None
        store_location(value)
        return value


class Settings(Section):
    """The whole validated config.yaml of a profile."""

    model: ModelSettings = setting(default_factory=ModelSettings)
    agent: AgentSettings = setting(default_factory=AgentSettings)
    tools: ToolSettings = setting(default_factory=ToolSettings)
    prompt: PromptSettings = setting(default_factory=PromptSettings)
    store: StoreSettings = setting(default_factory=StoreSettings)
    heartbeat: HeartbeatSettings = setting(default_factory=HeartbeatSettings)
    gateway: GatewaySettings = setting(default_factory=GatewaySettings)
    slack: SlackSettings = setting(default_factory=SlackSettings)
    telegram: TelegramSettings = setting(default_factory=TelegramSettings)
    webhooks: WebhooksSettings = setting(default_factory=WebhooksSettings)
    email: EmailSettings = setting(default_factory=EmailSettings)
    discord: DiscordSettings = setting(default_factory=DiscordSettings)
    matrix: MatrixSettings = setting(default_factory=MatrixSettings)
    mcp: McpSettings = setting(default_factory=McpSettings)
    timezone: str | None = setting(
        None, max_length=128, description="IANA zone for schedules (default: system)"
    )

    @validates("timezone")
    @classmethod
    def _known_zone(cls, value: str | None) -> str | None:
        if value is not None:
            from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

            try:
                ZoneInfo(value)
            except (ZoneInfoNotFoundError, ValueError, OSError):
                raise ValueError(f"unknown time zone '{printable(value)}'") from None
        return value


def load_settings(path: Path) -> Settings:
    """Read and validate ``path``; a missing or empty file gives the defaults."""
    text = _read_file(path)
    return _validate(_parse(text, path), path, text)


def read_raw(path: Path) -> dict[str, Any]:
    """The parsed YAML mapping in ``path`` (``{}`` when the file is missing or empty)."""
    return _parse(_read_file(path), path)


def validate_raw(data: dict[str, Any], path: Path) -> Settings:
    """Validate parsed YAML, translating the first error into ``file:line: reason``."""
    return _validate(data, path, _read_file(path))


def read_checked(path: Path) -> tuple[str, dict[str, Any]]:
    """The text of ``path`` and its parsed mapping, once the whole file is known to be valid
    (an editor must not build on a broken file)."""
    text = _read_file(path)
    data = _parse(text, path)
    _validate(data, path, text)
    return text, data


def validate_text(text: str, path: Path) -> Settings:
    """Validate ``text`` as the new content of ``path`` (errors name its lines)."""
    return _validate(_parse(text, path), path, text)


def validate_data(data: dict[str, Any]) -> Settings:
    """Validate a mapping that has no file yet (an edit about to be written)."""
    try:
        return Settings.from_data(data)
    except SettingsInvalid as exc:
        raise ConfigError(_describe(exc.problems[0])) from None


def is_known_key(dotted: str) -> bool:
    """Whether ``dotted`` names a setting of config.yaml."""
    return _field(tuple(dotted.split("."))) is not None


def _read_file(path: Path) -> str:
    """The text of ``path`` (``""`` if missing), refusing what is not a small regular UTF-8 file."""
    try:
        text = read_text(path, CONFIG_FILE_CAP, what="a config file")
    except UnsafeFile as exc:
        raise ConfigError(f"cannot read the config: {exc}") from None
    return text or ""


def _parse(text: str, path: Path) -> dict[str, Any]:
    if not text.strip(" \r\n"):
        return {}  # no file (or a blank one): the YAML parser is not even loaded
    import yaml

    from vigil.config import strict_yaml

    try:
        data = strict_yaml.load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{strict_yaml.error_location(exc, text, path)}: invalid YAML: {strict_yaml.error_problem(exc)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:1: the top level must be a mapping of sections (model:, agent:, ...)")
    return data


def _validate(data: dict[str, Any], path: Path, text: str) -> Settings:
    try:
        return Settings.from_data(data)
    except SettingsInvalid as exc:
        from vigil.config import strict_yaml

        error = exc.problems[0]
        line = strict_yaml.line_of(text, error.loc)
        where = f"{path}:{line}" if line else str(path)
        more = len(exc.problems) - 1
        suffix = f" (and {more} more problem(s))" if more else ""
        raise ConfigError(f"{where}: {_describe(error)}{suffix}") from None


def _describe(error: Problem) -> str:
    """One problem as ``dotted.key: reason (allowed: ...)``."""
    loc = error.loc
    dotted = ".".join(printable(str(part)) for part in loc)
    if error.type == "extra_forbidden":
        return f"unknown setting '{dotted}' (see `vigil config show`)"
    if error.type == "invalid_key":
        return f"{dotted}: setting names must be text"
    message = error.msg.removeprefix("Value error, ")
    if error.type in ("int_type", "float_type") and isinstance(error.input, bool):
        message = "true/false is not a number"
    allowed = _allowed(loc)
    return f"{dotted}: {message}" + (f" (allowed: {allowed})" if allowed else "")


def _field(loc: tuple[Any, ...]) -> Spec | None:
    section: type[Section] | None = Settings
    spec: Spec | None = None
    for part in loc:
        specs = section.specs() if section is not None else None
        if not isinstance(part, str) or specs is None or part not in specs:
            return None
        spec = specs[part]
        section = spec.section
    return spec


def _allowed(loc: tuple[Any, ...]) -> str:
    """The range a numeric setting accepts, in words (``""`` for other settings)."""
    spec = _field(loc)
    if spec is None or spec.base not in (int, float):
        return ""
    kind = "a whole number" if spec.base is int else "a number"
    low = high = ""
    for rule, bound in (("ge", spec.ge), ("gt", spec.gt), ("le", spec.le), ("lt", spec.lt)):
        if bound is None:
            continue
        if rule == "ge":
            low = f"from {bound:,}"
        elif rule == "gt":
            low = f"above {bound:,}"
        elif rule == "le":
            high = f"to {bound:,}" if low.startswith("from") else f"at most {bound:,}"
        else:
            high = f"below {bound:,}"
    bounds = " ".join(part for part in (low, high) if part)
    if low and high and not low.startswith("from"):
        bounds = f"{low} and {high}"
    return f"{kind} {bounds}".strip()


def get_value(settings: Settings, dotted: str) -> Any:
    """The value at a dotted key such as ``model.name``; ``KeyError`` if there is none."""
    return lookup(settings.as_dict(), dotted)


def lookup(data: dict[str, Any], dotted: str) -> Any:
    """The value at a dotted key in nested plain data; ``KeyError`` if there is none."""
    value: Any = data
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            raise KeyError(dotted)
        value = value[part]
    return value


def redacted(settings: Settings) -> dict[str, Any]:
    """The settings as plain data with secrets masked, for display: keys, and credentials
    inside URLs."""
    data = settings.as_dict()

    def mask(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: _masked(k, v) for k, v in node.items()}
        return node

    def _masked(key: str, value: Any) -> Any:
        if key in SECRET_KEYS and value:
            return "***"
        if key in URL_KEYS and isinstance(value, str):
            return mask_secrets(value)
        return mask(value)

    return mask(data)


def to_json(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=False)
