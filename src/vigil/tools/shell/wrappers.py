"""Look through commands that only run another command: ``sudo -u root rm ...`` is ``rm ...``.

Each wrapper is described by the options it knows and which of them take a value, so the
command it runs is found exactly. An option a wrapper does not know could take a value or not;
guessing could hide the real command, so it makes the line unparseable instead.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass

from vigil.tools.shell.words import UNKNOWN, Word


class Unsure(Exception):
    """What a wrapper runs cannot be told with confidence; the message says why."""


@dataclass(frozen=True, slots=True)
class WrapperSpec:
    """``takes_value``: options followed by a value (short letters or long names without ``--``);
    ``flags``: options without one; ``positionals``: words before the command (``timeout 10``);
    ``no_command``: options with which nothing is run (``command -v``)."""

    takes_value: frozenset[str] = frozenset()
    flags: frozenset[str] = frozenset()
    positionals: int = 0
    no_command: frozenset[str] = frozenset()
    assignments: bool = False
    """``NAME=value`` words may come before the command."""
    numeric_flags: bool = False
    """``-5`` style options (``nice -10``)."""
    default: tuple[str, ...] = ()
    """What runs when no command is given (xargs runs echo)."""


def _spec(takes: str = "", flags: str = "", **kw: object) -> WrapperSpec:
    return WrapperSpec(frozenset(takes.split()), frozenset(flags.split()), **kw)  # type: ignore[arg-type]


WRAPPERS: dict[str, WrapperSpec] = {
    "env": _spec(
        "u C S unset chdir split-string",
        "i 0 v - ignore-environment null debug",
        assignments=True,
    ),
    "sudo": _spec(
        "u g h p C D r t T U R user group host prompt close-from chdir role type command-timeout other-user chroot",
        "A b E H i K k n P S s B N askpass background preserve-env set-home login non-interactive "
        "preserve-groups stdin shell bell no-update",
        no_command=frozenset("l v V e K list validate version edit remove-timestamp".split()),
        assignments=True,
    ),
    "doas": _spec("u C", "n s L"),
    "nice": _spec("n adjustment", "", numeric_flags=True),
    "nohup": _spec(),
    "timeout": _spec("k s kill-after signal", "v preserve-status foreground verbose", positionals=1),
    "time": _spec("f o format output", "p a v q portability append verbose quiet"),
    "stdbuf": _spec("i o e input output error"),
    "ionice": _spec("c n class classdata", "t ignore", no_command=frozenset("p P u pid pgid uid".split())),
    "command": _spec("", "p", no_command=frozenset("v V".split())),
    "exec": _spec("a", "c l"),
    "builtin": _spec(),
    "coproc": _spec(),
    "setsid": _spec("", "c f w ctty fork wait"),
    "chroot": _spec("", "", positionals=1, default=("sh",)),
    "xargs": _spec(
        "a d E I L n P s arg-file delimiter eof replace max-lines max-args max-procs max-chars "
        "process-slot-var",
        "0 o p r t x null open-tty interactive no-run-if-empty verbose exit show-limits",
        default=("echo",),
    ),
    "busybox": _spec(),
    "unbuffer": _spec(),
    "caffeinate": _spec("t w", "d i m s u"),
}

# xargs' -i, -l and -e take their value in the same word, when there is one.
_ATTACHED_ONLY = {"xargs": frozenset("i l e".split())}


@dataclass(frozen=True, slots=True)
class Unwrapped:
    """The command a wrapper runs (``None`` when it runs none) and what changes on the way."""

    words: tuple[Word, ...] | None
    stdin_arguments: bool = False
    """xargs adds words read from standard input."""


def program_name(word: Word) -> str:
    """The program a command word names: its last path part (``/sbin/mkfs`` → ``mkfs``)."""
    return posixpath.basename(word.value.rstrip("/")) or word.value


def unwrap(name: str, words: tuple[Word, ...]) -> Unwrapped:
    """Strip the wrapper ``name`` (``words[0]``) and its options; raises :class:`Unsure`."""
    spec = WRAPPERS[name]
    attached_only = _ATTACHED_ONLY.get(name, frozenset())
    args = list(words[1:])
    replace_string: str | None = None
    index = 0
    positionals_left = spec.positionals
    while index < len(args):
        value = args[index].value
        if args[index].dynamic and value.startswith("-"):
            raise Unsure(f"an option of {name} is only known when it runs ({args[index].text})")
        if value == "--":
            index += 1
            break
        if value == "-" and name == "env":
            index += 1
            continue
        if value.startswith("--") and len(value) > 2:
            option, has_value, attached = value[2:].partition("=")
            if option in spec.no_command:
                return Unwrapped(None)
            if option == "split-string" and name == "env":
                split = attached if has_value else _value_at(args, index + 1, name, value)
                return _env_split(split, args[index + (1 if has_value else 2) :])
            if option in ("replace",) and name == "xargs":
                replace_string = attached if has_value else "{}"
                index += 1
                continue
            if has_value or option in spec.flags:
                index += 1
            elif option in spec.takes_value:
                index += 2
            else:
                raise Unsure(f"{name} is given the unfamiliar option {value}")
            continue
        if value.startswith("-") and len(value) > 1:
            if spec.numeric_flags and value[1:].lstrip("-").isdigit():
                index += 1
                continue
            step = 1
            for position, letter in enumerate(value[1:], start=1):
                rest = value[position + 1 :]
                if letter in spec.no_command:
                    return Unwrapped(None)
                if letter in attached_only:
                    if letter == "i" and name == "xargs":
                        replace_string = rest or "{}"
                    break
                if letter in spec.takes_value:
                    if name == "xargs" and letter == "I":
                        replace_string = rest or _value_at(args, index + 1, name, value)
                    if name == "env" and letter == "S":
                        split = rest or _value_at(args, index + 1, name, value)
                        return _env_split(split, args[index + (1 if rest else 2) :])
                    if not rest:
                        step = 2
                    break
                if letter not in spec.flags:
                    raise Unsure(f"{name} is given the unfamiliar option -{letter}")
            index += step
            continue
        if spec.assignments and re.fullmatch(r"[A-Za-z_]\w*=.*", value, flags=re.S):
            index += 1
            continue
        if positionals_left:
            positionals_left -= 1
            index += 1
            continue
        break
    rest = tuple(args[index:])
    if not rest:
        if not spec.default:
            return Unwrapped(None)
        rest = tuple(Word.literal(w) for w in spec.default)
    if replace_string:
        rest = tuple(_fill_in(w, replace_string) for w in rest)
    return Unwrapped(rest, stdin_arguments=name == "xargs")


def _value_at(args: list[Word], index: int, name: str, option: str) -> str:
    if index >= len(args):
        raise Unsure(f"{name} {option} is missing its value")
    if args[index].dynamic:
        raise Unsure(f"the value of {name} {option} is only known when it runs")
    return args[index].value


def _env_split(text: str, rest: list[Word]) -> Unwrapped:
    """``env -S 'rm -rf' /``: the string is split into words in front of the rest."""
    try:
        split = shlex.split(text)
    except ValueError as exc:
        raise Unsure(f"env -S {text!r}: {exc}") from None
    return unwrap("env", (Word.literal("env"), *(Word.literal(w) for w in split), *rest))


def _fill_in(word: Word, replace_string: str) -> Word:
    """xargs -I: where the replace string stands, an input line goes (unknown here)."""
    if replace_string not in word.value:
        return word
    return Word(
        word.text,
        tuple(v.replace(replace_string, "") for v in word.values),
        tuple(t.replace(replace_string, UNKNOWN) for t in word.templates),
        dynamic=True,
        glob=word.glob,
    )
