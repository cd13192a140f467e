"""Input checks every backend runs before writing: bad input is refused, never stored."""

from __future__ import annotations

from typing import Any, Iterable

from vigil.store.base import UNSET, ConfigUpdate, ModelConfigChange
from vigil.store.ids import check_session_id
from vigil.store.records import NewMessage
from vigil.store.rows import canonical_json

ROLES = frozenset({"user", "assistant", "tool", "summary", "note"})
"""The message roles a session may hold (see ``NewMessage``). A ``note`` is shown to people
(e.g. "the heartbeat ended") and never sent to the model."""


def check_message(message: NewMessage) -> None:
    """Refuse an unknown role, negative or non-integer token counts, or a non-dict ``meta``."""
    if message.role not in ROLES:
        raise ValueError(f"unknown message role {message.role!r}; expected one of {sorted(ROLES)}")
    counts = message.usage.as_dict().values()
    if not all(isinstance(n, int) and n >= 0 for n in counts):
        raise ValueError(f"token counts must be non-negative integers, got {message.usage}")
    check_dict(message.meta, "meta")


def check_dict(value: Any, name: str) -> dict[str, Any]:
    """``value`` if it is a dict (a JSON object column); ``TypeError`` otherwise."""
    if not isinstance(value, dict):
        raise TypeError(f"{name} must be a dict, not {type(value).__name__}")
    return value


def check_names(names: Iterable[str]) -> list[str]:
    """Tool names as a list; a bare string (an iterable of letters) or an empty name is refused."""
    if isinstance(names, str):
        raise TypeError("tool_names must be an iterable of names, not a single string")
    listed = list(names)
    if not all(isinstance(n, str) and n for n in listed):
        raise ValueError(f"tool names must be non-empty strings: {listed!r}")
    return listed


def check_prompt(prompt: str | None) -> None:
    """A stored system prompt is a non-empty string (an empty one counts as damaged)."""
    if prompt is not None and (not isinstance(prompt, str) or not prompt):
        raise ValueError("a system prompt must be a non-empty string")


def check_key(key: str) -> str:
    """``key`` if it is a usable ``state_meta`` key (a non-empty string)."""
    if not isinstance(key, str) or not key:
        raise ValueError("a state_meta key must be a non-empty string")
    return key


def check_limit(limit: int) -> int:
    """``limit`` if it is not negative."""
    if limit < 0:
        raise ValueError(f"limit must not be negative, got {limit}")
    return limit


def optional_limit(limit: int | None) -> int | None:
    """``limit`` checked as by :func:`check_limit`; ``None`` (no limit) passes."""
    return None if limit is None else check_limit(limit)


# -- the checks of one store method each, written once for both backends ----------------------
def check_new_session(
    *,
    source: str,
    model_config: dict[str, Any] | None,
    tool_names: Iterable[str],
    session_id: str | None,
    system_prompt: str | None,
) -> tuple[str, str]:
    """Refuse what ``create_session`` must not store (no source, a model configuration that is
    not a dict, bad tool names, a malformed session id, an empty prompt); the model
    configuration and the tool names as the canonical JSON to store."""
    if not source:
        raise ValueError("a session needs a source")
    config_json = canonical_json(check_dict(model_config or {}, "model_config"))
    tools_json = canonical_json(check_names(tool_names))
    if session_id is not None:
        check_session_id(session_id)
    check_prompt(system_prompt)
    return config_json, tools_json


def session_changes(
    *, title: str | None, model: str | None, model_config: ModelConfigChange, tool_names: Iterable[str]
) -> dict[str, Any]:
    """The columns ``update_session`` sets (those not ``UNSET``), with the values to store,
    checked. A callable ``model_config`` is left to the backend, which applies it to the
    stored configuration inside its transaction (see :func:`updated_config`)."""
    changes: dict[str, Any] = {}
    if title is not UNSET:
        changes["title"] = title
    if model is not UNSET:
        changes["model"] = model
    if model_config is not UNSET and not callable(model_config):
        changes["model_config"] = canonical_json(check_dict(model_config, "model_config"))
    if tool_names is not UNSET:
        changes["tool_names"] = canonical_json(check_names(tool_names))
    return changes


def prompt_config(model_config: ModelConfigChange | None) -> str | None:
    """The model configuration ``set_session_prompt`` stores beside the new prompt, as
    canonical JSON, checked; ``None`` when the stored one stays or a callable computes it."""
    if model_config is None or callable(model_config):
        return None
    return canonical_json(check_dict(model_config, "model_config"))


def updated_config(current: dict[str, Any], update: ConfigUpdate) -> str:
    """``update`` applied to a copy of the stored configuration ``current``; the result,
    checked, as canonical JSON."""
    return canonical_json(check_dict(update(dict(current)), "model_config"))


def check_reason(reason: str) -> None:
    """Ending a session needs a reason."""
    if not reason:
        raise ValueError("ending a session needs a reason")


def encoded_swap(key: str, expected: Any, new: Any) -> tuple[str | None, str | None]:
    """``compare_and_set_meta``'s key checked, and the expected and new values as canonical
    JSON (``None``: absent)."""
    check_key(key)
    want = None if expected is None else canonical_json(expected)
    encoded = None if new is None else canonical_json(new)
    return want, encoded
