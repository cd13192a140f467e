"""Programs that run a command written inside their own arguments: ``script -c``, git aliases
starting with ``!`` and git settings that name a command, tar's ``--to-command``, compress
program, volume scripts and ``--checkpoint-action=exec=``, and sed's ``e`` command and ``s///e``.

Each reader returns what the program would run, for the policy to judge; it decides nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Callable

from vigil.tools.shell.targets import Options, after_equals
from vigil.tools.shell.words import UNKNOWN, Word


@dataclass(frozen=True, slots=True)
class Embedded:
    """One command a program runs: ``text`` is a command line a shell parses; ``words`` a command
    run as it is; ``stdin`` that it reads commands from its standard input."""

    what: str
    """Where the command was found, for the reason (``tar --to-command``)."""
    text: Word | None = None
    words: tuple[Word, ...] | None = None
    stdin: bool = False
    positional: tuple[Word, ...] | None = None
    """The ``$1``, ``$2`` ... ``text`` is run with, when known."""


def _script(args: list[Word]) -> list[Embedded]:
    parsed = Options(args, "c command E echo I log-in O log-out B log-io T log-timing m logging-format o output-limit")
    for key in ("c", "command"):
        if key in parsed.values:
            return [Embedded("script -c", text=parsed.values[key])]
    return [Embedded("script", stdin=True)]  # without -c it runs an interactive shell


# git settings whose value is a command line git hands to a shell.
_GIT_COMMAND_SETTING = re.compile(
    r"alias\..+|core\.(?:sshcommand|pager|editor|askpass|fsmonitor)|sequence\.editor|diff\.external"
    r"|gpg(?:\.\w+)?\.program|pager\..+|filter\..+\.(?:clean|smudge|process)|diff\..+\.(?:textconv|command)"
    r"|merge\..+\.driver|(?:merge|diff)tool\..+\.cmd|uploadpack\.packobjectshook|interactive\.difffilter"
    r"|credential(?:\..+)?\.helper",
    re.IGNORECASE,
)
_GIT_TAKES_VALUE = frozenset("-C --git-dir --work-tree --namespace --super-prefix".split())


def _git(args: list[Word]) -> list[Embedded]:
    found: list[Embedded] = []  # every command-valued -c setting, whichever is used
    index = 0
    while index < len(args) and args[index].value.startswith("-"):
        value = args[index].value
        index += 1
        if value == "-c" and index < len(args):
            found += _git_setting(args[index])
            index += 1
        elif value.startswith("-c"):
            found += _git_setting(_drop_prefix(args[index - 1], 2))
        elif value.startswith("--config-env="):  # the value is in an environment variable
            name = value.partition("=")[2].partition("=")[0]
            if _GIT_COMMAND_SETTING.fullmatch(name):
                found.append(Embedded(f"git {name}", text=Word(value, ("",), (UNKNOWN,), dynamic=True)))
        elif value in _GIT_TAKES_VALUE:
            index += 1
    if index >= len(args):
        return found
    subcommand, rest = args[index].value, args[index + 1 :]
    for position, embedded in enumerate(found):
        if embedded.what == f"git alias.{subcommand}" and embedded.text is not None:
            # git runs a shell alias as `sh -c '<alias> "$@"' <alias> <arguments>`
            called = _append(embedded.text, ' "$@"')
            found[position] = Embedded(embedded.what, text=called, positional=tuple(rest))
    if subcommand == "config":
        operands = [w for w in rest if not w.value.startswith("-") and w.value not in ("set", "--add")]
        if len(operands) >= 2 and _GIT_COMMAND_SETTING.fullmatch(operands[0].value):
            found += _git_value(operands[0].value, operands[1])
    elif subcommand == "rebase":
        parsed = Options(rest, "x exec s strategy X strategy-option onto C")
        found += [Embedded("git rebase --exec", text=parsed.values[k]) for k in ("x", "exec") if k in parsed.values]
    elif subcommand == "bisect" and rest and rest[0].value == "run" and len(rest) > 1:
        found.append(Embedded("git bisect run", words=tuple(rest[1:])))
    elif subcommand == "submodule":
        operands = [w for w in rest if not w.value.startswith("-")]
        if operands and operands[0].value == "foreach":
            run = [w for w in rest[rest.index(operands[0]) + 1 :] if w.value not in ("--recursive", "-q", "--quiet")]
            if len(run) == 1:
                found.append(Embedded("git submodule foreach", text=run[0]))
            elif run:
                found.append(Embedded("git submodule foreach", words=tuple(run)))
    return found


def _git_setting(setting: Word) -> list[Embedded]:
    """``-c name=value``: the value, when the setting names a command."""
    name = setting.value.partition("=")[0]
    if "=" not in setting.value or not _GIT_COMMAND_SETTING.fullmatch(name):
        return []
    return _git_value(name, after_equals(setting))


def _git_value(name: str, value: Word) -> list[Embedded]:
    shell = value.value.startswith("!")
    if name.lower().startswith(("alias.", "credential")) and not shell:
        return []  # another git command, or a credential helper program by name
    return [Embedded(f"git {name}", text=_drop_prefix(value, 1) if shell else value)]


def _append(word: Word, text: str) -> Word:
    return replace(
        word,
        text=word.text + text,
        values=tuple(v + text for v in word.values),
        templates=tuple(t + text for t in word.templates),
    )


def _drop_prefix(word: Word, count: int) -> Word:
    """``word`` without its first ``count`` characters (a literal prefix such as ``!`` or ``-c``)."""
    return replace(
        word,
        text=word.text[count:],
        values=tuple(v[count:] for v in word.values),
        templates=tuple(t[count:] for t in word.templates),
    )


# tar's options whose value is a command (run by a shell), and the short letters that take a value.
_TAR_COMMANDS = (
    "to-command", "use-compress-program", "info-script", "new-volume-script", "rsh-command", "checkpoint-action",
)  # fmt: skip
_TAR_SHORT_COMMANDS = {"I": "use-compress-program", "F": "info-script"}
_TAR_SHORT_VALUES = frozenset("f C T X b g H K L N V I F".split())
_TAR_LONG_VALUES = frozenset(
    "file directory files-from exclude-from blocking-factor listed-incremental format starting-file "
    "tape-length newer label exclude owner group mode mtime record-size suffix volno-file transform "
    "xform backup warning occurrence strip-components sort".split()
) | frozenset(_TAR_COMMANDS)


def _tar(args: list[Word]) -> list[Embedded]:
    found: list[tuple[str, Word]] = []
    index = 0
    while index < len(args):
        word = args[index]
        value = word.value
        index += 1
        if value == "--":
            break
        if value.startswith("--") and len(value) > 2:
            option, has_value, _ = value[2:].partition("=")
            option = _tar_long_name(option)
            if has_value:
                found.append((option, after_equals(word)))
            elif option in _TAR_LONG_VALUES and index < len(args):
                found.append((option, args[index]))
                index += 1
        elif (value.startswith("-") and len(value) > 1) or index == 1:  # tar's first word is options
            letters = value.lstrip("-")
            for position, letter in enumerate(letters):
                if letter not in _TAR_SHORT_VALUES:
                    continue
                rest = letters[position + 1 :]
                if rest and value.startswith("-"):
                    found.append((_TAR_SHORT_COMMANDS.get(letter, letter), Word.literal(rest)))
                    break
                if index < len(args):  # `-I prog`, or old style `tar cIf prog out.tar`
                    found.append((_TAR_SHORT_COMMANDS.get(letter, letter), args[index]))
                    index += 1
    embedded = []
    for option, given in found:
        if option == "checkpoint-action":
            if given.value.startswith("exec="):
                embedded.append(Embedded("tar --checkpoint-action=exec", text=after_equals(given)))
        elif option in _TAR_COMMANDS:
            embedded.append(Embedded(f"tar --{option}", text=given))
    return embedded


def _tar_long_name(option: str) -> str:
    """tar takes any unambiguous beginning of a long option (``--to-com``)."""
    if len(option) >= 4:
        for name in _TAR_COMMANDS:
            if name.startswith(option):
                return name
    return option


def _sed(args: list[Word]) -> list[Embedded]:
    scripts: list[Word] = []
    operands: list[Word] = []
    script_file = sandbox = False
    index = 0
    while index < len(args):
        word = args[index]
        value = word.value
        index += 1
        if value == "--":
            operands += args[index:]
            break
        if value.startswith("--") and len(value) > 2:
            option, has_value, _ = value[2:].partition("=")
            option = _sed_long_name(option)
            sandbox = sandbox or option == "sandbox"
            if option in ("expression", "file", "line-length") and not has_value and index < len(args):
                given, index = args[index], index + 1
            else:
                given = after_equals(word)
            if option == "expression":
                scripts.append(given)
            script_file = script_file or option == "file"
        elif value.startswith("-") and len(value) > 1 and not word.dynamic:
            for position, letter in enumerate(value[1:], start=1):
                if letter == "i":  # -i[SUFFIX]: the rest of the word is the suffix
                    break
                if letter in "efl":
                    rest = value[position + 1 :]
                    given = Word.literal(rest) if rest else (args[index] if index < len(args) else Word.literal(""))
                    index += 0 if rest else 1
                    if letter == "e":
                        scripts.append(given)
                    script_file = script_file or letter == "f"
                    break
        else:
            operands.append(word)
    if not scripts and not script_file and operands:
        scripts.append(operands[0])
    if sandbox:  # --sandbox refuses e, r and w
        return []
    return [
        Embedded(what, text=Word(script.text, (text.replace(UNKNOWN, ""),), (text,), dynamic=UNKNOWN in text))
        for script in scripts
        for template in script.templates
        for what, text in _sed_commands(template)
    ]


_SED_LONG = (
    "expression", "file", "in-place", "line-length", "null-data", "zero-terminated", "quiet", "silent", "posix",
    "regexp-extended", "separate", "sandbox", "debug", "unbuffered", "follow-symlinks", "help", "version", "binary",
)  # fmt: skip


def _sed_long_name(option: str) -> str:
    """sed takes any unambiguous beginning of a long option (``--expr``)."""
    matches = [name for name in _SED_LONG if name.startswith(option)]
    return matches[0] if len(matches) == 1 and option not in _SED_LONG else option


def _sed_commands(script: str) -> list[tuple[str, str]]:
    """The shell commands a sed script runs: ``("sed e", text)`` for each ``e`` command and
    ``s///e``; :data:`UNKNOWN` as the text where it runs what is only known at run time (the
    pattern space, or a part of the script that is unknown or not understood)."""
    found: list[tuple[str, str]] = []
    reader = _SedReader(script)
    while reader.more():
        command = reader.command()
        if command is not None:
            found.append(command)
    return found


class _SedReader:
    """Reads a GNU sed script one command at a time (addresses, ``!``, the command and its
    arguments), only as far as needed to find what it runs."""

    def __init__(self, script: str) -> None:
        self.text = script
        self.pos = 0

    def more(self) -> bool:
        while self.pos < len(self.text) and self.text[self.pos] in " \t\n;{}":
            self.pos += 1
        return self.pos < len(self.text)

    def command(self) -> tuple[str, str] | None:
        text = self.text
        if text[self.pos] == "#":
            self._to_line_end()
            return None
        self._address()
        if self._at(","):
            self.pos += 1
            if self._at("+") or self._at("~"):
                self.pos += 1
            self._address()
        while self.pos < len(text) and text[self.pos] in " \t!":
            self.pos += 1
        if self.pos >= len(text) or text.startswith(UNKNOWN, self.pos):
            self.pos = len(text)
            return ("sed", UNKNOWN)  # a command that is only known at run time
        letter = text[self.pos]
        self.pos += 1
        if letter == "e":
            run = self._to_line_end().strip()
            return ("sed e", run or UNKNOWN)  # a bare `e` runs the pattern space
        if letter == "s":
            self._delimited(2)
            return self._s_flags()
        if letter == "y":
            self._delimited(2)
        elif letter in "aicrRwW:btTv":
            self._to_line_end(stop_at_semicolon=letter in ":btTv")
        elif letter in "qQlL":
            while self.pos < len(text) and (text[self.pos].isdigit() or text[self.pos] in " \t"):
                self.pos += 1
        elif letter not in "=dDgGhHnNpPxzF{}":
            self.pos = len(text)
            return ("sed", UNKNOWN)  # not understood: it could be anything
        return None

    def _at(self, char: str) -> bool:
        return self.text.startswith(char, self.pos)

    def _address(self) -> None:
        text = self.text
        if self._at(UNKNOWN):
            self.pos += len(UNKNOWN)
        elif self._at("/"):
            self.pos += 1
            self._delimited(1, "/")
        elif self._at("\\") and self.pos + 1 < len(text):
            delimiter = text[self.pos + 1]
            self.pos += 2
            self._delimited(1, delimiter)
        else:
            while self.pos < len(text) and (text[self.pos].isdigit() or text[self.pos] in "$~"):
                self.pos += 1
            return
        while self.pos < len(text) and text[self.pos] in "IM":
            self.pos += 1

    def _delimited(self, parts: int, delimiter: str | None = None) -> None:
        """Skip ``parts`` parts ended by the delimiter (the next character unless given)."""
        text = self.text
        if delimiter is None:
            if self.pos >= len(text):
                return
            delimiter = text[self.pos]
            self.pos += 1
        for _ in range(parts):
            while self.pos < len(text) and text[self.pos] != delimiter:
                self.pos += 2 if text[self.pos] == "\\" else 1
            self.pos += 1

    def _s_flags(self) -> tuple[str, str] | None:
        text = self.text
        runs = None
        while self.pos < len(text) and text[self.pos] not in " \t\n;}#":
            if text.startswith(UNKNOWN, self.pos):
                self.pos += len(UNKNOWN)
                runs = ("sed s///", UNKNOWN)  # flags only known at run time could hold `e`
                continue
            flag = text[self.pos]
            self.pos += 1
            if flag == "e":
                runs = ("sed s///e", UNKNOWN)  # runs the pattern space, which comes from the input
            elif flag == "w":
                self._to_line_end()
            elif flag not in "gpiImM0123456789":
                self.pos = len(text)
                return ("sed", UNKNOWN)
        return runs

    def _to_line_end(self, *, stop_at_semicolon: bool = False) -> str:
        text = self.text
        start = self.pos
        while self.pos < len(text) and text[self.pos] != "\n" and not (stop_at_semicolon and text[self.pos] == ";"):
            # `a\`, `i\` and `c\` text goes on past a backslash-newline
            self.pos += 2 if text[self.pos] == "\\" else 1
        end = min(self.pos, len(text))
        self.pos = end + 1
        return text[start:end]


EMBEDDED: dict[str, Callable[[list[Word]], list[Embedded]]] = {
    "script": _script,
    "git": _git,
    "tar": _tar,
    **dict.fromkeys(("sed", "gsed"), _sed),
}
"""The reader for each program, given its arguments (wrappers already removed)."""
