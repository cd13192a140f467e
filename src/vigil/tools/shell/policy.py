"""Which simple commands are dangerous: the documented list, checked on parsed, unwrapped words.

:func:`check_line` parses a command line (:mod:`vigil.tools.shell.parse`; a function's body
is checked at each call with the call's arguments), looks through wrappers
(:mod:`vigil.tools.shell.wrappers`; what ``xargs`` reads: :mod:`vigil.tools.shell.xargs`), parses
the strings that ``sh -c``, ``eval``, ``su -c``, ``watch``, here-documents fed to a shell, and
programs running a command written in their arguments (``script -c``, git aliases, tar's
``--to-command``, sed's ``e``: :mod:`vigil.tools.shell.embedded`) run (at most
:data:`MAX_DEPTH` levels), and returns the first reason found. The forms (README, "What the
agent may run on its own"):

- recursive ``rm``/``chmod``/``chown``/``chgrp`` of ``/``, a system directory, a home directory
  or everything in one of them; any use of ``--no-preserve-root``
- ``find`` over those with ``-delete`` or ``-exec``/``-execdir``/``-ok`` of a deleting command
- ``mkfs*``, ``mke2fs``, ``mkswap``, ``wipefs``, ``blkdiscard``; ``fdisk``/``sfdisk``/``cfdisk``/
  ``parted``/``sgdisk``/``gdisk`` on a device (listing forms like ``fdisk -l`` excepted)
- writing to a block device: ``dd of=``, ``cp``/``mv``/``install``/``rsync``/``tee``/``truncate``/
  ``ddrescue`` onto one, any output redirect (``> /dev/sda``); ``shred`` of a device or of a file
  under a system directory
- ``mv`` of ``/``, a system or a home directory; ``rsync --delete`` onto one
- ``kill`` of pid ``-1``, ``killall5``, ``pkill``/``killall`` of every process or every process of
  a user
- ``shutdown``, ``reboot``, ``halt``, ``poweroff``, ``kexec``, ``systemctl reboot|poweroff|halt|
  kexec`` (and isolating those targets), ``init``/``telinit 0|6``
- fork bombs (a function that calls itself twice, in a pipe or in the background)
- a script a shell reads from a pipe, a file redirect or a process substitution (``… | sh``,
  ``sh < f``, ``bash <(…)``), since what it runs cannot be seen; a download piped into an
  interpreter (``curl … | python3``)
- any of these given to a program the gate does not know (``systemd-run shred /dev/sda``: an
  unknown wrapper), unless the program is known not to run its arguments (``echo``, ``grep``,
  ``man``, package managers: :data:`~vigil.tools.shell.wrappers.DOES_NOT_RUN_ITS_ARGUMENTS`)
- a disk-writing program (``shred``, ``dd``, ``mkfs*``, partitioning tools) run by ``xargs`` on
  input the line does not show
- a command name, ``sh -c`` string, ``eval`` text or sed ``e`` command built from command output
  or only known at run time, and anything else that cannot be parsed with confidence
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Iterable

from vigil.tools.shell import xargs
from vigil.tools.shell.embedded import EMBEDDED
from vigil.tools.shell.parse import parse
from vigil.tools.shell.rules import DESTRUCTIVE_RULES, Rule, formats
from vigil.tools.shell.targets import Options, precious_target, redirect_reason
from vigil.tools.shell.words import UNKNOWN, ParseFailure, SimpleCommand, Word
from vigil.tools.shell.wrappers import DOES_NOT_RUN_ITS_ARGUMENTS, WRAPPERS, Unsure, program_name, unwrap

MAX_DEPTH = 6
MAX_LENGTH = 100_000
"""Characters a command line may have; longer ones (a model pasting a file into a here-document
belongs in write_file) count as unsure rather than holding the turn while they are parsed."""
UNSURE = "cannot be parsed with confidence: "
SHELLS = frozenset("sh bash zsh dash ksh mksh ash yash fish csh tcsh busybox-sh".split())
INTERPRETERS = frozenset("python python2 python3 perl ruby node nodejs php lua tclsh".split())
DOWNLOADERS = frozenset("curl wget fetch aria2c http https httpie lynx links".split())
_PYTHON = re.compile(r"python\d*(?:\.\d+)?")


def check_line(source: str, depth: int = 0, positional: tuple[Word, ...] | None = None) -> str | None:
    """Why running ``source`` is dangerous (a short phrase), or ``None``. ``positional`` are its
    ``$1``, ``$2`` ... when known (``sh -c 'script' $0 $1 ...``)."""
    if depth > MAX_DEPTH:
        return UNSURE + f"commands are nested more than {MAX_DEPTH} levels deep"
    if len(source) > MAX_LENGTH:
        return UNSURE + f"the command is {len(source):,} characters long (at most {MAX_LENGTH:,} are checked)"
    try:
        commands = parse(source, nested=depth > 0, positional=positional)
        for command in commands:
            reason = judge(command, depth)
            if reason:
                return reason
    except ParseFailure as exc:
        return UNSURE + str(exc)
    except RecursionError:
        return UNSURE + "the command line is nested too deeply"
    return _fork_bomb(commands)


def judge(command: SimpleCommand, depth: int, *, guess: bool = True) -> str | None:
    """Why this one simple command is dangerous, or ``None``. ``guess``: an unknown program
    given what looks like a dangerous command counts as running it (:func:`_looks_like_a_command`)."""
    reason = redirect_reason(command)
    if reason:
        return reason
    words = command.words
    for _ in range(32):
        head = words[0]
        if head.dynamic or head.from_output:
            return UNSURE + f"the command to run is only known when it runs ({head.text})"
        if len(head.values) > 1:
            for value in head.values:
                single = (Word.literal(value), *words[1:])
                reason = judge(_with_words(command, single), depth, guess=guess)
                if reason:
                    return reason
            return None
        name = program_name(head)
        if name == "busybox" and len(words) > 1:
            words = words[1:]
            continue
        if name not in WRAPPERS:
            break
        try:
            unwrapped = unwrap(name, words)
        except Unsure as exc:
            return UNSURE + str(exc)
        if unwrapped.words is None:
            return None
        words = unwrapped.words
        if name == "xargs":
            words = xargs.with_arguments(unwrapped, command)
    else:
        return UNSURE + "too many wrappers around one command"
    rule = RULES.get(name)
    if rule is None and name.startswith("mkfs"):
        rule = formats
    if rule is None and (name in INTERPRETERS or _PYTHON.fullmatch(name)):
        rule = _interpreter
    if rule is None:
        return _looks_like_a_command(name, words, command, depth) if guess else None
    return rule(name, list(words[1:]), _with_words(command, words), depth)


def _with_words(command: SimpleCommand, words: Iterable[Word]) -> SimpleCommand:
    return replace(command, words=tuple(words), calls_function=False)


_MAX_GUESSES = 16


def _looks_like_a_command(name: str, words: tuple[Word, ...], command: SimpleCommand, depth: int) -> str | None:
    """A program the gate does not know, given the name of one it judges followed by what makes
    that one dangerous (``systemd-run shred /dev/sda``), may well run it: unknown wrappers are
    many. Programs known not to run their arguments (``echo``, ``grep``, ``man``, package
    managers: :data:`~vigil.tools.shell.wrappers.DOES_NOT_RUN_ITS_ARGUMENTS`) and the line's own
    functions (their bodies are checked at the call) are not suspected, nor is a name that ends
    the line alone (``last reboot``, ``pytest -k shutdown``: more often an argument than a command)."""
    if name in DOES_NOT_RUN_ITS_ARGUMENTS or command.calls_function:
        return None
    candidates = [i for i, w in enumerate(words[:-1]) if i and _judged_program(program_name(w))]
    if len(candidates) > _MAX_GUESSES:
        return UNSURE + f"{name} is given more than {_MAX_GUESSES} words that name commands"
    for index in candidates:
        reason = judge(_with_words(command, words[index:]), depth, guess=False)
        if reason and not reason.startswith(UNSURE):  # words that only might be a command: no guess on a guess
            return f"runs {name} with what looks like a dangerous command, which {reason}"
    return None


def _judged_program(name: str) -> bool:
    return name in RULES or name in WRAPPERS or name.startswith("mkfs")


_DELETING = frozenset("rm rmdir unlink shred truncate mv chmod chown chgrp dd".split())
_FIND_EXEC = ("-exec", "-execdir", "-ok", "-okdir")


def _find(name: str, args: list[Word], command: SimpleCommand, depth: int) -> str | None:
    index = 0
    while index < len(args) and args[index].value in ("-H", "-L", "-P", "-D") or (
        index < len(args) and args[index].value.startswith("-O")
    ):
        index += 2 if args[index].value == "-D" else 1
    starts: list[Word] = []
    while index < len(args) and not args[index].value.startswith("-") and args[index].value not in "()!,":
        starts.append(args[index])
        index += 1
    expression = args[index:]
    action = "-delete" if any(w.value == "-delete" for w in expression) else None
    position = 0
    while position < len(expression):
        flag = expression[position].value
        position += 1
        if flag not in _FIND_EXEC:
            continue
        end = position
        while end < len(expression) and expression[end].value not in (";", "+"):
            end += 1
        run = [
            Word(w.text, ("",), ("",), dynamic=True) if "{}" in w.value else w for w in expression[position:end]
        ]
        position = end + 1
        if not run:
            continue
        reason = judge(_with_words(command, run), depth)
        if reason:
            return reason
        if program_name(run[0]) in _DELETING:
            action = f"{flag} {program_name(run[0])}"
    if action is None:
        return None
    for start in starts or [Word.literal(".")]:
        where = precious_target(start, command.cwd)
        if where:
            return f"deletes or changes files throughout {where} (find {action})"
    return None


def _shell(name: str, args: list[Word], command: SimpleCommand, depth: int) -> str | None:
    runs_string = False
    script_on_stdin = False  # -s: the script comes from standard input, operands are $1...
    index = 0
    while index < len(args):
        value = args[index].value
        if args[index].dynamic and value.startswith(("-", "+")):
            return UNSURE + f"an option of {name} is only known when it runs ({args[index].text})"
        if value in ("--", "-"):
            index += 1
            break
        if value.startswith("--"):
            index += 2 if value in ("--rcfile", "--init-file") else 1
            continue
        if value[:1] in ("-", "+") and len(value) > 1:
            letters = value[1:]
            runs_string = runs_string or "c" in letters
            script_on_stdin = script_on_stdin or (value[0] == "-" and "s" in letters)
            index += 1 + letters.count("o") + letters.count("O")
            continue
        break
    operands = args[index:]
    if runs_string:  # operands after the string are $0, $1 ...
        return _nested(operands[0], depth, f"{name} -c", tuple(operands[2:])) if operands else None
    if operands and not script_on_stdin and operands[0].value not in ("/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"):
        if operands[0].process_substitution:
            return _unseen(name, operands[0].inner, "a process substitution")
        return None  # a script file: what it does cannot be seen by a parser (README)
    return _reads_stdin(name, command, depth)


def _reads_stdin(name: str, command: SimpleCommand, depth: int) -> str | None:
    """``name`` takes its script from standard input: judge what arrives there."""
    stdin = command.stdin
    if stdin is not None and stdin.op in ("<<", "<<-", "<<<") and stdin.target is not None:
        if stdin.target.from_output:
            return UNSURE + f"the script {name} reads is built from command output"
        return _nested(stdin.target, depth, name)
    if stdin is not None:
        return f"runs a script that cannot be seen ({name} {stdin.op} {stdin.target.text if stdin.target else ''})"
    if command.piped:
        return _unseen(name, command.upstream, "a pipe")
    return None


def _unseen(name: str, feeding: Iterable[SimpleCommand], how: str) -> str:
    if any(program_name(c.words[0]) in DOWNLOADERS for c in feeding):
        return f"pipes a downloaded script straight into a shell ({name})"
    return f"runs a script that cannot be seen: {name} reads it from {how}"


def _interpreter(name: str, args: list[Word], command: SimpleCommand, depth: int) -> str | None:
    if not command.piped or not any(program_name(c.words[0]) in DOWNLOADERS for c in command.upstream):
        return None
    program_given = any(
        not w.value.startswith("-") or w.value in ("-c", "-e", "-E", "-m", "-r") for w in args
    ) and not any(w.value == "-" for w in args)
    if program_given:
        return None
    return f"pipes a downloaded script straight into an interpreter ({name})"


def _eval(name: str, args: list[Word], command: SimpleCommand, depth: int) -> str | None:
    if not args:
        return None
    if any(w.from_output for w in args):
        return UNSURE + "eval runs text built from command output"
    joined = Word(" ".join(w.text for w in args), *_joined(args))
    return _nested(joined, depth, "eval")


def _joined(words: list[Word]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    values: list[str] = [""]
    templates: list[str] = [""]
    for index, word in enumerate(words):
        sep = " " if index else ""
        values = [v + sep + wv for v in values for wv in word.values][:64]
        templates = [t + sep + wt for t in templates for wt in word.templates][:64]
    return tuple(values), tuple(templates)


def _source(name: str, args: list[Word], command: SimpleCommand, depth: int) -> str | None:
    if not args:
        return None
    script = args[0]
    if script.process_substitution:
        return _unseen(name, script.inner, "a process substitution")
    if script.value in ("/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"):
        return _reads_stdin(name, command, depth)
    return None


def _su(name: str, args: list[Word], command: SimpleCommand, depth: int) -> str | None:
    parsed = Options(
        args, "c command session-command s shell g group G supp-group w whitelist-environment u user", stop_at_operand=name == "runuser"
    )
    for key in ("c", "command", "session-command"):
        if key in parsed.values:
            return _nested(parsed.values[key], depth, f"{name} -c")
    if name == "runuser" and parsed.operands:
        return judge(_with_words(command, parsed.operands if parsed.has("u", "user") else parsed.operands[1:]), depth)
    return None


def _watch(name: str, args: list[Word], command: SimpleCommand, depth: int) -> str | None:
    parsed = Options(args, "n interval d differences q equexit", stop_at_operand=True)
    if not parsed.operands:
        return None
    if parsed.has("x", "exec"):
        return judge(_with_words(command, parsed.operands), depth)
    return _eval("eval", parsed.operands, command, depth)


def _flock(name: str, args: list[Word], command: SimpleCommand, depth: int) -> str | None:
    parsed = Options(args, "w timeout wait E conflict-exit-code c command", stop_at_operand=True)
    if "c" in parsed.values or "command" in parsed.values:
        return _nested(parsed.values.get("c") or parsed.values["command"], depth, "flock -c")
    if len(parsed.operands) > 1:
        return judge(_with_words(command, parsed.operands[1:]), depth)
    return None


def _alias(name: str, args: list[Word], command: SimpleCommand, depth: int) -> str | None:
    for word in args:
        if "=" in word.value:
            _, _, body = word.value.partition("=")
            _, _, template = word.templates[0].partition("=")
            reason = _nested(Word(word.text, (body,), (template,), from_output=word.from_output), depth, "alias")
            if reason:
                return reason
    return None


def _trap(name: str, args: list[Word], command: SimpleCommand, depth: int) -> str | None:
    if not args or args[0].value.startswith("-"):
        return None
    return _nested(args[0], depth, "trap")


def _embedded(name: str, args: list[Word], command: SimpleCommand, depth: int) -> str | None:
    for found in EMBEDDED[name](args):
        if found.text is not None:
            reason = _nested(found.text, depth, found.what, found.positional)
        elif found.words:
            reason = judge(_with_words(command, found.words), depth)
        else:
            reason = _reads_stdin(name, command, depth)
        if reason:
            return reason
    return None


def _nested(word: Word, depth: int, what: str, positional: tuple[Word, ...] | None = None) -> str | None:
    """Parse and check the text another shell will run."""
    if word.from_output:
        return UNSURE + f"{what} runs text built from command output ({word.text})"
    for template in word.templates:
        if template.strip() == UNKNOWN:
            return UNSURE + f"{what} runs text that is only known when it runs ({word.text})"
        reason = check_line(template, depth + 1, positional)
        if reason:
            return reason
    return None


def _fork_bomb(commands: list[SimpleCommand]) -> str | None:
    calls: dict[str, list[SimpleCommand]] = {}
    for command in commands:
        if command.function and program_name(command.words[0]) == command.function:
            calls.setdefault(command.function, []).append(command)
    for name, own in calls.items():
        if len(own) >= 2 or any(c.piped or c.background for c in own):
            return f"is a fork bomb (the function {name} starts copies of itself)"
    return None


RULES: dict[str, Rule] = {
    **DESTRUCTIVE_RULES,
    "find": _find,
    **dict.fromkeys(SHELLS, _shell),
    "eval": _eval,
    **dict.fromkeys(("source", "."), _source),
    **dict.fromkeys(("su", "runuser"), _su),
    "watch": _watch,
    "flock": _flock,
    "alias": _alias,
    "trap": _trap,
    **dict.fromkeys(EMBEDDED, _embedded),
}
