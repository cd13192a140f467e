"""The ``mcp`` section of a profile's config.yaml: the MCP servers whose tools the agent may call.

::

    mcp:
      call_timeout: 120
      servers:
        time:                            # a program vigil starts (stdio)
          command: /usr/local/bin/mcp-server-time
          args: [--local-timezone, UTC]
          env: {TZ: UTC}
          unattended: true               # cron jobs and heartbeats may call it too
        github:                          # a streamable HTTP server
          url: https://api.githubcopilot.com/mcp/
          headers:
            Authorization: Bearer ${GITHUB_TOKEN}

Secrets are never written here: ``${NAME}`` in an ``env`` value, a header or the URL is read
from the environment when the server starts, and a value that looks like a credential (a
header such as ``Authorization``, a variable such as ``GITHUB_TOKEN``) must come that way.

Server names, variable names and header names are chosen by the user, which the schema's
sections (fixed keys) cannot express: :class:`_Table` is a section whose keys are checked
against a pattern and whose values are checked one by one, kept apart from the section's own
attributes so that no key (``items``, ``as_dict``) can shadow a method.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Iterator, Mapping

from vigil.masking import mask_secrets, printable
from vigil.config.schema import Problem, Section, ValueProblem, setting, validates

SERVER_NAME_MAX = 32
SERVER_NAME = re.compile(rf"^(?=.{{1,{SERVER_NAME_MAX}}}$)[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*$")
"""Letters and digits, single ``-`` or ``_`` between them: ``mcp__<server>__<tool>`` then reads
back unambiguously (no ``__`` inside, no ``_`` at either end)."""
SERVER_NAME_WORDS = (
    f"a server name: letters and digits, with single - or _ between them, at most {SERVER_NAME_MAX} "
    "characters (e.g. github, my-notes)"
)
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
HEADER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,127}$")
VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]{0,127})\}")
"""``${NAME}``: replaced by the environment variable ``NAME`` when the server starts."""
_LOOSE_VARIABLE = re.compile(r"\$\{[^}]*\}?")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SECRET_ENV = re.compile(r"TOKEN|SECRET|PASSW|API_?KEY|_KEY$|^KEY$|CREDENTIAL|AUTH|COOKIE|SESSION", re.I)
_SECRET_HEADER = re.compile(r"^(authorization|proxy-authorization|cookie)$|token|secret|key|auth|passw|session", re.I)
MAX_SERVERS = 100
MAX_ENTRIES = 100
VALUE_MAX = 4096


def looks_secret(kind: str, name: str) -> bool:
    """Whether an ``env`` variable or a header (``kind``) called ``name`` holds a credential."""
    return bool((_SECRET_ENV if kind == "env" else _SECRET_HEADER).search(name))


def check_template(value: str, what: str) -> str:
    """``value`` if its ``${...}`` references are well formed; ``ValueError`` otherwise."""
    for match in _LOOSE_VARIABLE.finditer(value):
        if not VARIABLE.fullmatch(match.group(0)):
            raise ValueError(
                f"{what}: '{printable(match.group(0), 40)}' is not a variable reference; "
                "write ${NAME} with letters, digits and _ (read from the environment when the server starts)"
            )
    return value


def secret_hint(kind: str, name: str, server: str | None = None) -> str:
    """Why a literal value of a credential is refused, and how to write it instead."""
    variable = re.sub(r"[^A-Za-z0-9_]", "_", name).upper()
    example = f"${{{variable}}}"
    if name.lower() in ("authorization", "proxy-authorization"):
        variable = re.sub(r"[^A-Za-z0-9_]", "_", f"{server or 'MCP'}_TOKEN").upper()
        example = f"Bearer ${{{variable}}}"
    return (
        f"{name} looks like a secret, which config.yaml must not hold: write it as {example} "
        f"(read from the environment when the server starts) and export {variable}"
    )


def _one_line(value: str, what: str) -> str:
    if _CONTROL.search(value):
        raise ValueError(f"{what} must be one line of text without control characters")
    return value


class _Table(Section):
    """A mapping whose keys the user chooses (see the module docstring). Subclasses set the
    key pattern and words, the entry limit, and :meth:`_entry`, which checks one value."""

    __slots__ = ("_entries",)
    key_pattern: ClassVar[re.Pattern[str]]
    key_words: ClassVar[str]
    max_entries: ClassVar[int] = MAX_ENTRIES

    @classmethod
    def _entry(cls, key: str, value: Any, loc: tuple[Any, ...], out: list[Problem]) -> Any:
        """``value`` checked (problems appended to ``out``)."""
        raise NotImplementedError

    @classmethod
    def _fill(cls, data: Mapping[Any, Any], loc: tuple[Any, ...], out: list[Problem]) -> dict[str, Any]:
        values: dict[str, Any] = {}
        if len(data) > cls.max_entries:
            out.append(Problem(loc, "too_long", f"at most {cls.max_entries} entries, not {len(data)}", data))
            return values
        for key, value in data.items():
            where = (*loc, key)
            if not isinstance(key, str):
                out.append(Problem(where, "invalid_key", "Keys should be strings", key))
            elif not cls.key_pattern.fullmatch(key):
                out.append(Problem(where, "value_error", f"Value error, '{printable(key)}' is not {cls.key_words}", key))
            else:
                values[key] = cls._entry(key, value, where, out)
        return values

    def _hold(self, given: Mapping[Any, Any], values: dict[str, Any]) -> None:
        object.__setattr__(self, "_fields_set", set())
        object.__setattr__(self, "_entries", dict(values))

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "_entries":  # copy and pickle restore it
            object.__setattr__(self, name, value)
            return
        super().__setattr__(name, value)

    def __getitem__(self, key: str) -> Any:
        return self._entries[key]

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def items(self) -> list[tuple[str, Any]]:
        """The entries in the file's order."""
        return list(self._entries.items())

    def as_dict(self) -> dict[str, Any]:
        return {
            key: value.as_dict() if isinstance(value, Section) else value
            for key, value in self._entries.items()
        }

    def copy_with(self, *, update: Mapping[str, Any] | None = None) -> Any:
        made = object.__new__(type(self))
        made._hold({}, {**self._entries, **(update or {})})
        return made

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._entries == other._entries

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._entries!r})"


class _Strings(_Table):
    """A mapping of names to one-line texts that may use ``${NAME}``."""

    kind: ClassVar[str]

    @classmethod
    def _entry(cls, key: str, value: Any, loc: tuple[Any, ...], out: list[Problem]) -> Any:
        reason = None
        if type(value) is not str:
            reason = "Input should be a valid string"
        elif len(value) > VALUE_MAX:
            reason = f"String should have at most {VALUE_MAX:,} characters"
        else:
            try:
                value.encode("utf-8")
                _one_line(value, "the value")
                check_template(value, "the value")
                if looks_secret(cls.kind, key) and not VARIABLE.search(value):
                    server = loc[-3] if len(loc) >= 3 and isinstance(loc[-3], str) else None
                    reason = secret_hint(cls.kind, key, server)
            except UnicodeEncodeError:
                reason = "Input should be a valid string, unable to parse raw data as a unicode string"
            except ValueError as exc:
                reason = str(exc)
        if reason is not None:
            out.append(Problem(loc, "value_error", f"Value error, {reason}", value))
        return value


class McpEnv(_Strings):
    """Environment variables of a stdio server (name: value, ``${NAME}`` read from vigil's)."""

    key_pattern = ENV_NAME
    key_words = "an environment variable name (letters, digits and _, not starting with a digit)"
    kind = "env"


class McpHeaders(_Strings):
    """HTTP headers sent to a streamable HTTP server (name: value, ``${NAME}`` from the environment)."""

    key_pattern = HEADER_NAME
    key_words = "an HTTP header name (letters, digits and -)"
    kind = "header"


class McpServerSettings(Section):
    """One MCP server: a program vigil starts and talks to over its stdin/stdout (``command``),
    or a streamable HTTP endpoint (``url``)."""

    command: str | None = setting(None, max_length=4096, description="the program that runs a stdio server")
    args: list[str] = setting(default_factory=list, max_length=256, description="its arguments")
    env: McpEnv = setting(
        default_factory=McpEnv,
        description="environment variables for it (besides HOME, PATH, USER, SHELL, TERM, LOGNAME); "
        "${NAME} is read from vigil's environment",
    )
    url: str | None = setting(None, max_length=4096, description="the endpoint of a streamable HTTP server")
    headers: McpHeaders = setting(
        default_factory=McpHeaders, description="HTTP headers sent to it; ${NAME} is read from the environment"
    )
    unattended: bool = setting(
        False, description="unattended runs (cron jobs, heartbeats, -q without a terminal) may call its tools"
    )
    trusted: bool = setting(False, description="attended channels call its tools without asking first")
    sandbox: bool = setting(
        True,
        description="run a stdio server in the terminal's bubblewrap sandbox (vigil's homes and the user's "
        "secrets hidden, only workspaces/mcp-NAME writable)",
    )

    @validates("command")
    @classmethod
    def _program(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("the command must name a program")
        return None if value is None else _one_line(value, "the command")

    @validates("args")
    @classmethod
    def _arguments(cls, value: list[str]) -> list[str]:
        for index, arg in enumerate(value):
            if _CONTROL.search(arg):
                raise ValueProblem("an argument must be one line of text without control characters", at=(index,))
        return value

    @validates("url")
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        if value is None:
            return None
        check_http_url(value)
        return value

    @classmethod
    def _fill(cls, data: Mapping[Any, Any], loc: tuple[Any, ...], out: list[Problem]) -> dict[str, Any]:
        before = len(out)
        values = super()._fill(data, loc, out)
        if len(out) > before:
            return values
        command, url = values["command"], values["url"]
        reason = None
        if command is None and url is None:
            reason = "give the server either a command (a program vigil starts) or a url (a streamable HTTP server)"
        elif command is not None and url is not None:
            reason = "give the server a command or a url, not both"
        elif url is not None and (values["env"] or values["args"]):
            reason = "env and args are for a server vigil starts (command); an HTTP server takes headers"
        elif command is not None and values["headers"]:
            reason = "headers are for an HTTP server (url); a server vigil starts takes env"
        if reason is not None:
            out.append(Problem(loc, "value_error", f"Value error, {reason}", dict(data)))
        return values

    @property
    def transport(self) -> str:
        """``stdio`` or ``http``."""
        return "stdio" if self.command is not None else "http"


def check_http_url(value: str) -> str:
    """``value`` if it is an http(s) URL with a host, without a literal password; ``ValueError``."""
    _one_line(value, "the URL")
    check_template(value, "the URL")
    scheme, sep, rest = value.partition("://")
    authority = rest.split("/", 1)[0].split("?", 1)[0]
    userinfo, at, host = authority.rpartition("@")
    if not sep or scheme.lower() not in ("http", "https") or not host or " " in value:
        raise ValueError(
            f"'{printable(mask_secrets(value))}' is not an http:// or https:// URL with a host "
            "(e.g. https://mcp.example.com/mcp)"
        )
    if at and ":" in userinfo and not VARIABLE.search(userinfo):
        raise ValueError(
            "the URL holds a password, which config.yaml must not hold: write it as ${NAME} "
            "(read from the environment when the server starts)"
        )
    return value


class McpServers(_Table):
    """The MCP servers by name."""

    key_pattern = SERVER_NAME
    key_words = SERVER_NAME_WORDS
    max_entries = MAX_SERVERS

    @classmethod
    def _entry(cls, key: str, value: Any, loc: tuple[Any, ...], out: list[Problem]) -> Any:
        return McpServerSettings._checked(value, loc, out)


class McpSettings(Section):
    """MCP servers whose tools the agent may call (``vigil mcp add``; README, "MCP servers")."""

    servers: McpServers = setting(
        default_factory=McpServers, description="the servers by name (see `vigil mcp add --help`)"
    )
    start_timeout: float = setting(
        60.0, gt=0, le=3600, allow_inf_nan=False,
        description="seconds a server may take to start and list its tools",
    )
    call_timeout: float = setting(
        120.0, gt=0, le=86_400, allow_inf_nan=False,
        description="seconds one tool call may take; a server that takes longer counts as hung and is restarted",
    )
