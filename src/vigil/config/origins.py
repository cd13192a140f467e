"""Where each setting in force comes from: a default, a line of config.yaml, or the environment.

``vigil config show --origin`` prints this, like ``git config --show-origin``. The model
settings the config leaves empty may be filled from the environment the way
:func:`vigil.models.factory.resolve_model_settings` fills them (``OPENAI_BASE_URL``,
``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ``VIGIL_MODEL``, ...), so they are shown with the
value in force and the variable it came from. Secrets stay masked.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from vigil.config import strict_yaml
from vigil.config.settings import CONFIG_FILE_CAP, RENAMED_KEYS, Settings, lookup, read_raw, redacted
from vigil.masking import MASK, mask_secrets
from vigil.config.model_env import BASE_URL_ENV, KEY_ENV, LOCAL_MODEL_ENV, MODEL_ENV
from vigil.safe_files import read_text


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting in force: dotted key, value (secrets masked) and where it comes from."""

    key: str
    value: Any
    origin: str
    """``default``, ``PATH:LINE`` or ``env:NAME``."""


def settings_in_force(settings: Settings, path: Path, env: Mapping[str, str]) -> list[Setting]:
    """Every leaf setting of ``settings`` (read from ``path``) with the value in force and its origin."""
    text = read_text(path, CONFIG_FILE_CAP, what="a config file") or ""
    raw = read_raw(path)
    shown = redacted(settings)
    result: dict[str, Setting] = {}
    for key in _leaves(shown):
        result[key] = Setting(key, lookup(shown, key), _file_origin(raw, text, path, key))

    def from_env(key: str, variable: str, value: Any) -> None:
        if result[key].origin == "default":
            result[key] = Setting(key, value, f"env:{variable}")

    model = settings.model
    if model.provider is None and env.get("ANTHROPIC_API_KEY") and not env.get("OPENAI_API_KEY"):
        from_env("model.provider", "ANTHROPIC_API_KEY", "anthropic")
    if model.provider == "local":
        if env.get(LOCAL_MODEL_ENV):
            from_env("model.path", LOCAL_MODEL_ENV, env[LOCAL_MODEL_ENV])
        return list(result.values())
    provider = model.provider or ("anthropic" if result["model.provider"].value == "anthropic" else "openai")
    if env.get(BASE_URL_ENV[provider]):
        from_env("model.base_url", BASE_URL_ENV[provider], mask_secrets(env[BASE_URL_ENV[provider]]))
    if env.get(MODEL_ENV):
        from_env("model.name", MODEL_ENV, env[MODEL_ENV])
    for variable in (model.api_key_env, KEY_ENV[provider]):
        if variable and env.get(variable):
            from_env("model.api_key", variable, MASK)
            break
    return list(result.values())


def _file_origin(raw: dict[str, Any], text: str, path: Path, key: str) -> str:
    """``PATH:LINE`` of ``key`` (or of the old name it replaced) when the file sets it."""
    old_names = [old for old, new in RENAMED_KEYS.items() if new == key]
    for name in [key, *old_names]:
        try:
            lookup(raw, name)
        except KeyError:
            continue
        return f"{path}:{strict_yaml.line_of(text, tuple(name.split('.')))}"
    return "default"


def _leaves(data: dict[str, Any], prefix: str = "") -> list[str]:
    keys: list[str] = []
    for key, value in data.items():
        if isinstance(value, dict):
            keys += _leaves(value, f"{prefix}{key}.")
        else:
            keys.append(f"{prefix}{key}")
    return keys


def nested(entries: list[Setting]) -> dict[str, Any]:
    """The values of ``entries`` as nested sections again, as config.yaml writes them."""
    data: dict[str, Any] = {}
    for entry in entries:
        *sections, last = entry.key.split(".")
        node = data
        for section in sections:
            node = node.setdefault(section, {})
        node[last] = entry.value
    return data
