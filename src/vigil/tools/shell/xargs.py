"""What ``xargs`` runs: the command it was given, with the words it reads from its input.

Input that can be read off the line gives the arguments exactly: a here-string, a here-document,
or a pipe from ``echo``/``printf`` of literal words (``printf '%s\\0' /dev/sda | xargs -0 shred``
is ``shred /dev/sda``). Any other input (a file, a pipe from another program, the terminal) is
unknown. For a program that writes to disks (:func:`~vigil.tools.shell.rules.writes_devices`)
unknown input is taken to name one, so ``find … | xargs shred`` needs approval; for any other
program it is a word only known at run time, so ``find … | xargs rm -f`` does not.
"""

from __future__ import annotations

import codecs
import re
import shlex
from dataclasses import replace

from vigil.tools.shell.rules import writes_devices
from vigil.tools.shell.words import MAX_VALUES, UNKNOWN, ParseFailure, SimpleCommand, Word, decode_ansi_c
from vigil.tools.shell.wrappers import Unwrapped, program_name

STAND_IN = "/dev/<what xargs reads>"
"""How unknown input reads for a program that writes to disks: a path that may be any device."""

_CONVERSION = re.compile(r"%(?:%|[-+ #0']*\d*(?:\.\d*)?([a-zA-Z]))")


def with_arguments(unwrapped: Unwrapped, command: SimpleCommand) -> tuple[Word, ...]:
    """The words of the command ``xargs`` runs (``unwrapped``) with its input in them."""
    run = unwrapped.words or ()
    options = unwrapped.options
    writer = any(writes_devices(program_name(w)) for w in run)
    from_file = "a" in options or "arg-file" in options
    text = None if from_file else _input_text(command)
    replace_string = _replace_string(options)
    items = None if text is None else _items(text, _delimiter(options), lines=replace_string is not None)
    if replace_string:
        return tuple(_fill_in(w, replace_string, items, writer) for w in run)
    if items is not None:
        return run + tuple(Word.literal(item) for item in items)
    if writer:
        # `dd` takes its output as `of=`: the stand-in may be either spelling.
        return run + (Word("(xargs input)", (STAND_IN, "of=" + STAND_IN), (UNKNOWN, UNKNOWN), dynamic=True, glob=True),)
    return run + (Word("(xargs input)", ("",), (UNKNOWN,), dynamic=True),)


def _replace_string(options: dict[str, str]) -> str | None:
    if "I" in options:
        return options["I"]
    for key in ("i", "replace"):
        if key in options:
            return options[key] or "{}"
    return None


def _delimiter(options: dict[str, str]) -> str | None:
    if "0" in options or "null" in options:
        return "\0"
    given = options.get("d", options.get("delimiter"))
    if given is None:
        return None
    try:  # a character or an escape (`\n`, `\x00`)
        return codecs.decode(given, "unicode_escape")[:1] or None
    except UnicodeDecodeError:
        return given[:1] or None


def _input_text(command: SimpleCommand) -> str | None:
    """What xargs reads, when the line shows it; ``None`` when it is unknown."""
    stdin = command.stdin
    if stdin is not None:
        target = stdin.target
        if stdin.op not in ("<<", "<<-", "<<<") or target is None or target.dynamic or target.from_output:
            return None
        newline = "\n" if stdin.op == "<<<" else ""
        return "\n".join(value + newline for value in target.values)
    if not command.piped or not command.upstream:
        return None
    pieces = [_printed(upstream) for upstream in command.upstream]
    return None if any(p is None for p in pieces) else "".join(p for p in pieces if p is not None)


def _printed(command: SimpleCommand) -> str | None:
    """What ``echo`` or ``printf`` of literal words prints; ``None`` for anything else."""
    name = program_name(command.words[0])
    args = list(command.words[1:])
    if name not in ("echo", "printf") or any(w.dynamic or w.from_output or len(w.values) > 1 for w in args):
        return None
    values = [w.value for w in args]
    try:
        if name == "printf":
            return _printf(values)
        escapes = newline = False
        while values and re.fullmatch(r"-[neE]+", values[0]):
            escapes = escapes or "e" in values[0]
            newline = newline or "n" in values[0]
            values.pop(0)
        text = " ".join(values)
        return (decode_ansi_c(text) if escapes else text) + ("" if newline else "\n")
    except ParseFailure:
        return None


def _printf(args: list[str]) -> str | None:
    if args and args[0] == "--":
        args = args[1:]
    if not args or args[0].startswith("-"):
        return None  # `printf -v name`: nothing printed
    template, rest = decode_ansi_c(args[0]), args[1:]
    out: list[str] = []
    while True:
        used = 0

        def convert(match: re.Match[str]) -> str:
            nonlocal used
            if match.group(0) == "%%":
                return "%"
            value = rest[used] if used < len(rest) else ""
            used += 1
            return decode_ansi_c(value) if match.group(1) == "b" else value

        out.append(_CONVERSION.sub(convert, template))
        rest = rest[used:]
        if not rest or not used:  # the format is used again while arguments are left
            return "".join(out)


def _items(text: str, delimiter: str | None, *, lines: bool) -> list[str] | None:
    """The arguments xargs makes of ``text``: split at ``delimiter`` (``-0``, ``-d``), at newlines
    for ``-I``, else at blanks with xargs' quotes; ``None`` when it cannot be told."""
    if delimiter is not None:
        parts = text.split(delimiter)
    elif lines:
        parts = text.split("\n")
    else:
        try:
            parts = shlex.split(text)
        except ValueError:
            return None
    return [p.strip() for p in parts if p.strip()]


def _fill_in(word: Word, replace_string: str, items: list[str] | None, writer: bool) -> Word:
    """xargs -I: each input line goes where the replace string stands (one command per line)."""
    if not any(replace_string in t for t in word.templates):
        return word
    if items is not None:
        pairs = dict.fromkeys(
            (v.replace(replace_string, item), t.replace(replace_string, item))
            for v, t in zip(word.values, word.templates)
            for item in items
        )
        if len(pairs) <= MAX_VALUES:
            return replace(word, values=tuple(v for v, _ in pairs), templates=tuple(t for _, t in pairs))
    stand_in = STAND_IN if writer else ""
    return replace(
        word,
        values=tuple(v.replace(replace_string, stand_in) for v in word.values),
        templates=tuple(t.replace(replace_string, UNKNOWN) for t in word.templates),
        dynamic=True,
        glob=word.glob or writer,
    )
