"""Changing a profile's config.yaml (``vigil config set`` / ``unset``) without losing its
comments, key order or layout.

The whole file is validated before and after the change and replaced atomically only when the
new one is valid and reads back the same, so a bad value or an already broken file changes
nothing. Edits go through ruamel.yaml's round-trip mode; reading stays with PyYAML
(:mod:`vigil.config.settings`), which is why every written file is read back before it replaces the old.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from vigil.config import strict_yaml
from vigil.safe_files import write_atomic
from vigil.config.settings import RENAMED_KEYS, Settings, is_known_key, lookup, read_checked, validate_data, validate_text
from vigil.config.errors import ConfigError
from vigil.masking import is_text, printable

if TYPE_CHECKING:  # ruamel.yaml loads only when a value is set
    from ruamel.yaml import YAML


def set_value(path: Path, dotted: str, raw_value: str) -> Settings:
    """Set ``dotted`` to ``raw_value`` (parsed as YAML) in ``path``.

    The new whole config is validated first; the file is replaced atomically only if it is
    valid, so a bad value or an already broken file changes nothing. Comments, key order and
    formatting of the rest of the file are kept.
    """
    text, data = read_checked(path)
    shown_key = printable(dotted)
    parts = dotted.split(".")
    if not all(parts) or not is_text(dotted):
        raise ConfigError(f"invalid key '{shown_key}': use dotted names such as model.name")
    if dotted in RENAMED_KEYS:
        raise ConfigError(f"'{dotted}' is the old name of {RENAMED_KEYS[dotted]}; set that instead")
    if not is_text(raw_value):
        raise ConfigError(
            f"{shown_key}: the value is not valid UTF-8 text (an undecodable byte); nothing was changed"
        )
    value = _parse_value(raw_value, shown_key)
    if value is None:
        raise ConfigError(
            f"{shown_key}: a setting cannot be set to nothing; "
            f"use `vigil config unset {shown_key}` to go back to the default"
        )
    _assign(data, parts, value, path)
    settings = validate_data(data)
    # ruamel writes YAML 1.2, PyYAML reads YAML 1.1: a string such as "yes" or "1:30" would
    # come back as a bool or a number. Only a file that reads back the same is written.
    for written_value in (value, _quoted(value)):
        new_text = _updated_text(path, text, parts, written_value)
        try:
            reread = validate_text(new_text, path)
        except ConfigError:
            continue
        if reread == settings:
            write_atomic(path, new_text)
            return settings
    raise ConfigError(
        f"{shown_key}: this value would not read back the same from config.yaml; "
        "write numbers in plain decimal form (e.g. 0.00001) and quote text"
    )


def unset_value(path: Path, dotted: str) -> Settings:
    """Remove ``dotted`` from ``path`` so that its default applies again.

    Like :func:`set_value`, the file is validated before and after, and replaced atomically
    with comments and layout kept; sections left empty are removed with the key. An unknown
    key, or one the file does not set, is refused and changes nothing.
    """
    text, data = read_checked(path)
    shown_key = printable(dotted)
    parts = dotted.split(".")
    if not all(parts) or not is_text(dotted):
        raise ConfigError(f"invalid key '{shown_key}': use dotted names such as model.name")
    try:
        lookup(data, dotted)
    except KeyError:
        if not is_known_key(dotted):
            raise ConfigError(f"unknown setting '{shown_key}' (see `vigil config show`)") from None
        raise ConfigError(f"{shown_key} is not set in {path}; nothing to unset") from None
    _remove(data, parts)
    settings = validate_data(data)
    new_text = _removed_text(path, text, parts)
    if validate_text(new_text, path) != settings:
        raise ConfigError(f"{path}: cannot remove {shown_key} while keeping the file's layout")
    write_atomic(path, new_text)
    return settings


def _remove(node: Any, parts: list[str]) -> None:
    """Delete ``parts`` from nested mappings, and every mapping that becomes empty with it."""
    if len(parts) > 1:
        _remove(node[parts[0]], parts[1:])
        if isinstance(node[parts[0]], dict) and not node[parts[0]]:
            del node[parts[0]]
    else:
        del node[parts[0]]


def _removed_text(path: Path, text: str, parts: list[str]) -> str:
    """``text`` without the key at ``parts``, comments and layout of the rest kept."""
    buffer = io.StringIO()
    try:
        document = _round_trip().load(text)
        _remove(document, parts)
        if document:
            _round_trip().dump(document, buffer)
        else:  # no key is left to hold them: keep the file's whole-line comments
            buffer.write(_comment_lines(text))
    except Exception as exc:  # ruamel's YAML 1.2 reading of a file PyYAML accepted
        reason = " ".join(str(exc).split())[:300]
        raise ConfigError(f"{path}: cannot update the file while keeping its layout: {reason}") from None
    return buffer.getvalue()


def _updated_text(path: Path, text: str, parts: list[str], value: Any) -> str:
    """``text`` with ``parts`` set to ``value``, comments and layout of the rest kept."""
    from ruamel.yaml.comments import CommentedMap

    buffer = io.StringIO()
    try:
        document = _round_trip().load(text) if text.strip() else None
        if not isinstance(document, dict):  # an empty or comment-only file: keep its comments
            document = CommentedMap()
            buffer.write(_comment_lines(text))
        _assign(document, parts, value, path)
        _round_trip().dump(document, buffer)
    except ConfigError:
        raise
    except Exception as exc:  # ruamel's YAML 1.2 reading of a file PyYAML accepted
        reason = " ".join(str(exc).split())[:300]
        raise ConfigError(f"{path}: cannot update the file while keeping its layout: {reason}") from None
    return buffer.getvalue()


def _comment_lines(text: str) -> str:
    """The whole-line comments of ``text``, each ending with a newline."""
    return "".join(line.rstrip("\r\n") + "\n" for line in text.splitlines() if line.lstrip().startswith("#"))


def _quoted(value: Any) -> Any:
    """``value`` with every string forced into double quotes when written."""
    from ruamel.yaml.scalarstring import DoubleQuotedScalarString

    if isinstance(value, str):
        return DoubleQuotedScalarString(value)
    if isinstance(value, list):
        return [_quoted(item) for item in value]
    if isinstance(value, dict):
        return {key: _quoted(item) for key, item in value.items()}
    return value


def _parse_value(raw_value: str, shown_key: str) -> Any:
    """``raw_value`` read as YAML; text that is not YAML is taken as the plain string."""
    if not raw_value.strip():
        return None
    try:
        return strict_yaml.load(raw_value)
    except strict_yaml.NumberTooLong as exc:
        raise ConfigError(f"{shown_key}: {exc.problem}") from None
    except yaml.YAMLError:
        return raw_value


def _assign(node: dict[str, Any], parts: list[str], value: Any, path: Path) -> None:
    from ruamel.yaml.comments import CommentedMap

    for part in parts[:-1]:
        child = node.get(part)
        if child is None:
            child = node[part] = CommentedMap() if isinstance(node, CommentedMap) else {}
        if not isinstance(child, dict):
            raise ConfigError(f"{path}: '{printable(part)}' is not a section")
        node = child
    node[parts[-1]] = value


def _round_trip() -> YAML:
    from ruamel.yaml import YAML

    handler = YAML(typ="rt")
    handler.preserve_quotes = True
    handler.representer.add_representer(float, _represent_float)
    return handler


def _represent_float(representer: Any, value: float) -> Any:
    """Floats as YAML 1.1 reads them too: ``1.0e-05``, not ``1e-05`` (a string to PyYAML)."""
    text = repr(value)
    if "e" in text:
        mantissa, exponent = text.split("e")
        mantissa += "" if "." in mantissa else ".0"
        exponent = exponent if exponent[0] in "+-" else "+" + exponent
        text = f"{mantissa}e{exponent}"
    return representer.represent_scalar("tag:yaml.org,2002:float", text)
