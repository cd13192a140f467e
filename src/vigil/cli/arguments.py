"""What every command line is checked for before a command runs, and the parameter types
that bound what a single option accepts.

* Text that is not valid UTF-8. On POSIX, Python decodes ``argv`` and the environment with
  ``surrogateescape``: each byte that is not UTF-8 becomes a lone surrogate ``\\udc80`` ..
  ``\\udcff``. Such text cannot be stored (SQLite, JSON and YAML need real Unicode), so it is
  refused once, centrally, naming the argument (or the environment variable: those that
  become options, and vigil's own ``VIGIL_*`` and provider variables), before any command
  has written anything.
* Numbers: :class:`WholeNumber` accepts ASCII digits only (``int()`` would also take ``١٥``,
  ``１５``, ``1_000`` and 5,000-digit strings) and names its limits.
* Session references: :data:`SESSION_REF` refuses an empty or blank one instead of letting it
  mean "no session" (a new conversation, or all of them); :class:`NonEmptyText` does the
  same for other values that an empty string would quietly drop.
"""

from __future__ import annotations

import os
import re
from pathlib import PurePath
from typing import Any, Callable, Sequence

import click
from click.core import ParameterSource

_UNDECODABLE = re.compile("[\udc80-\udcff]")
_ASCII_INTEGER = re.compile(r"[+-]?[0-9]+")
_SHOWN_WIDTH = 24
ENV_PREFIXES = ("VIGIL_", "OPENAI_", "ANTHROPIC_")
"""Environment variables vigil reads (its home, profile, model and provider settings): each
must be valid UTF-8 too."""


class ArgumentRefused(click.ClickException):
    """A command line refused before anything ran: one line, exit code 2 (like a usage error)."""

    exit_code = 2


def shown(text: str, width: int = _SHOWN_WIDTH) -> str:
    """``text`` quoted for a message, cut to ``width`` characters so a huge value stays one
    short line; undecodable bytes show as ``\\xff``, control characters and line breaks escaped."""
    printable = _UNDECODABLE.sub(lambda m: f"\\x{ord(m.group()) - 0xDC00:02x}", text)
    if not printable.isprintable():
        printable = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in printable)
    cut = printable if len(printable) <= width else printable[: width - 1] + "…"
    return f"'{cut}'"


def undecodable_byte(text: str) -> int | None:
    """The first byte of ``text`` that was not valid UTF-8 (a surrogate escape), or ``None``."""
    found = _UNDECODABLE.search(text)
    return None if found is None else ord(found.group()) - 0xDC00


# -- the central check ---------------------------------------------------------------------
def refuse_undecodable(root: click.Command, ctx: click.Context, argv: Sequence[str]) -> None:
    """Raise :class:`ArgumentRefused` when a word of ``argv`` or an environment variable that
    became an option is not valid UTF-8, naming it. Cheap when everything is fine: only
    a command line that holds such text is parsed a second time, to name the culprit."""
    bad_words = [word for word in argv if undecodable_byte(word) is not None]
    located = _locate(root, ctx, list(argv))
    if located is not None:
        label, text = located
    elif bad_words:
        label, text = _label_by_position(list(argv), bad_words[0]), bad_words[0]
    else:
        variable = next(
            (name for name in sorted(os.environ) if name.startswith(ENV_PREFIXES)
             and undecodable_byte(os.environ[name]) is not None),
            None,
        )
        if variable is None:
            return
        label, text = f"${variable}", os.environ[variable]
    byte = undecodable_byte(text)
    assert byte is not None
    raise ArgumentRefused(
        f"{label} is not valid UTF-8 text (byte 0x{byte:02x} in {shown(text)}): "
        "vigil stores text as UTF-8, so give it in UTF-8"
    )


def _locate(root: click.Command, ctx: click.Context, argv: list[str]) -> tuple[str, str] | None:
    """(label, text) of the first parsed parameter holding undecodable text, or ``None``.

    The command line is parsed again in click's resilient mode (no help, no prompts, no
    errors, no command callbacks; parameter callbacks only touch the scratch contexts),
    level by level, as click itself would."""
    if not any(undecodable_byte(word) is not None for word in argv) and not _env_is_suspect():
        return None
    try:
        scratch = click.Context(root, info_name=ctx.info_name, resilient_parsing=True)
        args = argv
        command: click.Command | None = root
        current = scratch
        while command is not None:
            with current.scope(cleanup=False):
                if isinstance(command, click.Group):
                    rest = click.Command.parse_args(command, current, args)
                else:
                    rest = command.parse_args(current, args)
            found = _in_params(command, current)
            if found is not None:
                return found
            if not isinstance(command, click.Group) or not rest:
                return None
            name, command, args = command.resolve_command(current, rest)
            if command is None or name is None:
                return None
            current = click.Context(command, info_name=name, parent=current, resilient_parsing=True)
    except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
        return None
    return None


def _in_params(command: click.Command, ctx: click.Context) -> tuple[str, str] | None:
    for param in command.params:
        name = param.name or ""
        if ctx.get_parameter_source(name) is ParameterSource.ENVIRONMENT and isinstance(param, click.Option):
            for variable in _envvars(param):
                value = os.environ.get(variable)
                if value is not None and undecodable_byte(value) is not None:
                    return f"${variable} (used as {_label(param)})", value
        text = _first_undecodable(ctx.params.get(name))
        if text is not None:
            return _label(param), text
    return None


def _envvars(param: click.Option) -> list[str]:
    if param.envvar is None:
        return []
    return [param.envvar] if isinstance(param.envvar, str) else list(param.envvar)


def _env_is_suspect() -> bool:
    return any(undecodable_byte(value) is not None for value in os.environ.values())


def _first_undecodable(value: Any) -> str | None:
    if isinstance(value, (str, PurePath)):
        text = str(value)
        return text if undecodable_byte(text) is not None else None
    if isinstance(value, (tuple, list)):
        for item in value:
            found = _first_undecodable(item)
            if found is not None:
                return found
    return None


def _label(param: click.Parameter) -> str:
    if isinstance(param, click.Option):
        return "/".join(param.opts)
    return f"argument {(param.metavar or param.human_readable_name).upper()}"


def _label_by_position(argv: list[str], word: str) -> str:
    """A name for a bad word the parse could not place (an option's value it lost, or a word
    no command takes): the option before it, else its position."""
    index = argv.index(word)
    if word.startswith("--") and "=" in word:
        return word.partition("=")[0]
    before = argv[index - 1] if index else ""
    if before.startswith("-") and before != "--" and not word.startswith("-"):
        return f"the value of {before}"
    return f"argument {index + 1}"


# -- parameter types -----------------------------------------------------------------------
class WholeNumber(click.IntRange):
    """An integer between ``minimum`` and ``maximum`` written with ASCII digits only.

    ``int()`` alone would take Arabic-Indic or full-width digits, underscores and surrounding
    spaces, and a 5,000-digit string stops it with an interpreter limit; each is answered
    here with the rule and the limit."""

    def __init__(self, minimum: int, maximum: int) -> None:
        super().__init__(min=minimum, max=maximum)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str):
            if any(ch.isdigit() and not ch.isascii() for ch in value):
                self.fail(f"{shown(value)} is not a whole number: write it with the digits 0-9", param, ctx)
            if not _ASCII_INTEGER.fullmatch(value):
                self.fail(f"{shown(value)} is not a whole number (use the digits 0-9)", param, ctx)
            assert self.min is not None and self.max is not None
            limit = max(abs(int(self.min)), abs(int(self.max)))
            if len(value.lstrip("+-").lstrip("0")) > len(str(limit)):
                side = f"at least {self.min}" if value.startswith("-") else f"at most {self.max}"
                self.fail(f"{shown(value)} is out of range: use {side}", param, ctx)
        return super().convert(value, param, ctx)


class SessionRef(click.ParamType):
    """A session id or a unique prefix of one; an empty or blank reference is refused."""

    name = "session"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.strip():
            self.fail(
                "the session reference is empty: give a session id or a unique prefix of one "
                "(see `vigil sessions list`)",
                param,
                ctx,
            )
        return value


SESSION_REF = SessionRef()


class NonEmptyText(click.ParamType):
    """Text that must say something: an empty or blank value is refused instead of quietly
    meaning "not given" (``hint`` tells what to write instead)."""

    name = "text"

    def __init__(self, hint: str = "") -> None:
        self.hint = hint

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.strip():
            self.fail("the value is empty" + (f": {self.hint}" if self.hint else ""), param, ctx)
        return value


NON_EMPTY = NonEmptyText()


class LiveHelpOption(click.Option):
    """An option whose help text is computed when help is shown (``live_help()``), for texts
    that list what a registry holds at that moment, such as the platforms' cron targets."""

    def __init__(self, *args: Any, live_help: Callable[[], str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.live_help = live_help

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        self.help = self.live_help()
        return super().get_help_record(ctx)
