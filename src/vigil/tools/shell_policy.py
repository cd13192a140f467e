"""Which simple commands are dangerous: the documented list, checked on parsed, unwrapped words.

:func:`check_line` parses a command line (:mod:`vigil.tools.shell_parse`), looks through
wrappers (:mod:`vigil.tools.shell_wrappers`), parses the strings that ``sh -c``, ``eval``,
``su -c``, ``watch`` and here-documents fed to a shell run (at most :data:`MAX_DEPTH` levels),
and returns the first reason found. The forms (README, "What the agent may run on its own"):

- recursive ``rm``/``chmod``/``chown``/``chgrp`` of ``/``, a system directory, a home directory
  or everything in one of them; any use of ``--no-preserve-root``
- ``find`` over those with ``-delete`` or ``-exec``/``-execdir``/``-ok`` of a deleting command
- ``mkfs*``, ``mke2fs``, ``mkswap``, ``wipefs``, ``blkdiscard``; ``fdisk``/``sfdisk``/``cfdisk``/
  ``parted``/``sgdisk``/``gdisk`` on a device (listing forms like ``fdisk -l`` excepted)
- writing to a block device: ``dd of=``, ``cp``/``mv``/``install``/``rsync``/``tee`` onto one, any
  output redirect (``> /dev/sda``); ``shred`` of a device or of a file under a system directory
- ``kill`` of pid ``-1``, ``killall5``, ``pkill``/``killall`` of every process or every process of
  a user
- ``shutdown``, ``reboot``, ``halt``, ``poweroff``, ``kexec``, ``systemctl reboot|poweroff|halt|
  kexec`` (and isolating those targets), ``init``/``telinit 0|6``
- fork bombs (a function that calls itself twice, in a pipe or in the background)
- a script a shell reads from a pipe, a file redirect or a process substitution (``… | sh``,
  ``sh < f``, ``bash <(…)``), since what it runs cannot be seen; a download piped into an
  interpreter (``curl … | python3``)
- a command name, ``sh -c`` string or ``eval`` text built from command output, and anything else
  that cannot be parsed with confidence
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
import stat
from typing import Callable, Iterable

from vigil.tools.shell_parse import HOME, UNKNOWN, ParseFailure, SimpleCommand, Word, parse
from vigil.tools.shell_wrappers import WRAPPERS, Unsure, program_name, unwrap

MAX_DEPTH = 6
UNSURE = "cannot be parsed with confidence: "

SYSTEM_DIRECTORIES = frozenset(
    "/bin /boot /dev /etc /home /lib /lib32 /lib64 /libx32 /media /mnt /opt /proc /root /run /sbin "
    "/snap /srv /sys /usr /var /usr/bin /usr/sbin /usr/lib /usr/lib32 /usr/lib64 /usr/libexec "
    "/usr/include /usr/local /usr/share /usr/src /var/lib /Applications /Library /System /Users".split()
)
# shred overwrites files one by one: anything under these is part of the installed system.
SYSTEM_TREES = tuple(
    "/bin /boot /dev /etc /lib /lib32 /lib64 /libx32 /opt /proc /root /sbin /srv /sys /usr /var".split()
)
SHELLS = frozenset("sh bash zsh dash ksh mksh ash yash fish csh tcsh busybox-sh".split())
INTERPRETERS = frozenset("python python2 python3 perl ruby node nodejs php lua tclsh".split())
DOWNLOADERS = frozenset("curl wget fetch aria2c http https httpie lynx links".split())
_BLOCK_DEVICE = re.compile(
    r"/dev/(?:(?:sd|hd|vd|xvd)[a-zA-Z]+\d*|nvme\d+(?:n\d+(?:p\d+)?)?|mmcblk\d+(?:p\d+)?|md\d+|dm-\d+"
    r"|loop\d+|sr\d+|nbd\d+|zram\d+|rbd\d+|fd\d+|r?disk\d+(?:s\d+)?|bcache\d+|root|mem|kmem|port"
    r"|disk/.+|mapper/.+)"
)
_PYTHON = re.compile(r"python\d*(?:\.\d+)?")


def check_line(source: str, depth: int = 0) -> str | None:
    """Why running ``source`` is dangerous (a short phrase), or ``None``."""
    if depth > MAX_DEPTH:
        return UNSURE + f"commands are nested more than {MAX_DEPTH} levels deep"
    try:
        commands = parse(source, nested=depth > 0)
    except ParseFailure as exc:
        return UNSURE + str(exc)
    for command in commands:
        reason = judge(command, depth)
        if reason:
            return reason
    return _fork_bomb(commands)


def judge(command: SimpleCommand, depth: int) -> str | None:
    """Why this one simple command is dangerous, or ``None``."""
    reason = _redirect_reason(command)
    if reason:
        return reason
    words = command.words
    stdin_arguments = False
    for _ in range(32):
        head = words[0]
        if head.dynamic or head.from_output:
            return UNSURE + f"the command to run is only known when it runs ({head.text})"
        if len(head.values) > 1:
            for value in head.values:
                single = (Word.literal(value), *words[1:])
                reason = judge(_with_words(command, single), depth)
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
        stdin_arguments = stdin_arguments or unwrapped.stdin_arguments
        if stdin_arguments and command.piped and command.upstream:
            words = words + _echoed(command.upstream[-1])
    else:
        return UNSURE + "too many wrappers around one command"
    rule = RULES.get(name)
    if rule is None and name.startswith("mkfs"):
        rule = _formats
    if rule is None and (name in INTERPRETERS or _PYTHON.fullmatch(name)):
        rule = _interpreter
    if rule is None:
        return None
    return rule(name, list(words[1:]), _with_words(command, words), depth)


def _with_words(command: SimpleCommand, words: Iterable[Word]) -> SimpleCommand:
    return SimpleCommand(
        words=tuple(words),
        redirects=command.redirects,
        piped=command.piped,
        upstream=command.upstream,
        cwd=command.cwd,
        background=command.background,
        function=command.function,
    )


def _echoed(upstream: SimpleCommand) -> tuple[Word, ...]:
    """``echo / | xargs rm -rf``: the words echo prints become xargs' arguments."""
    if program_name(upstream.words[0]) != "echo":
        return ()
    return tuple(
        Word.literal(part) for w in upstream.words[1:] if not w.value.startswith("-") for part in w.value.split()
    )


# ---------------------------------------------------------------- paths and devices


def _resolve(value: str, cwd: str | None) -> str | None:
    """``value`` as a normalised path: absolute, or relative to the starting working directory."""
    if not value:
        return None
    if not value.startswith("/") and cwd is not None:
        value = cwd.rstrip("/") + "/" + value
    path = posixpath.normpath(value)
    return re.sub(r"^/+", "/", path)


def _parent_of_workdir(path: str, glob: bool) -> bool:
    """``..``, ``../..`` or ``../*``: the directory vigil runs in is not known, its parents are
    never the thing to delete."""
    parts = path.split("/")
    if parts[-1] == "..":
        return all(p == ".." for p in parts)
    return glob and len(parts) > 1 and all(p == ".." for p in parts[:-1]) and set(parts[-1]) <= set("*?.")


def _named(path: str) -> str | None:
    homes = {HOME, _real_home()}
    if path == "/":
        return "the whole filesystem"
    if path in homes:
        return "the home directory"
    if path in SYSTEM_DIRECTORIES:
        return f"the system directory {path}"
    if posixpath.dirname(path) == "/home":
        return f"the home directory {path}"
    return None


def _real_home() -> str:
    home = os.path.expanduser("~")
    return home if home not in ("", "/") else HOME


def _precious(word: Word, cwd: str | None) -> str | None:
    """What ``word`` names if it is ``/``, a system or home directory, or everything in one."""
    for value in word.values:
        path = _resolve(value, cwd)
        if path is None:
            continue
        if not path.startswith("/"):
            if _parent_of_workdir(path, word.glob):
                return f"a parent of the working directory ({value})"
            continue  # inside the working directory: not judged
        named = _named(path)
        if named:
            return named
        if not word.glob:
            continue
        candidates = ["/", *SYSTEM_DIRECTORIES, HOME, _real_home()]
        for candidate in candidates:
            if fnmatch.fnmatchcase(candidate, path):
                return _named(candidate)
        parent, base = posixpath.split(path)
        if base and set(base) <= set("*?.") and set(base) & set("*?"):
            for candidate in candidates:
                if fnmatch.fnmatchcase(candidate, parent):
                    return f"everything in {_named(candidate)}"
    return None


def _device(word: Word, cwd: str | None = None) -> str | None:
    """The block device ``word`` names, if it names one."""
    for value in word.values:
        path = _resolve(value, cwd)
        if path is None or not path.startswith("/dev/"):
            continue
        if _BLOCK_DEVICE.fullmatch(path) or (word.glob and path.startswith("/dev/")):
            return path
        try:
            if stat.S_ISBLK(os.stat(path).st_mode):
                return path
        except OSError:
            pass
    return None


def _under_system(word: Word, cwd: str | None) -> str | None:
    for value in word.values:
        path = _resolve(value, cwd)
        if path and any(path == tree or path.startswith(tree + "/") for tree in SYSTEM_TREES):
            return path
    return None


def _redirect_reason(command: SimpleCommand) -> str | None:
    for redirect in command.redirects:
        if redirect.writes and redirect.target is not None:
            device = _device(redirect.target, command.cwd)
            if device:
                return f"overwrites the disk device {device} through a redirect ({redirect.op} {device})"
    return None


# ---------------------------------------------------------------- options


class _Args:
    """Options and operands of a command, split the GNU way (``--`` ends the options)."""

    def __init__(self, args: list[Word], takes_value: str = "", *, stop_at_operand: bool = False) -> None:
        self.letters: set[str] = set()
        self.long: set[str] = set()
        self.values: dict[str, Word] = {}
        self.operands: list[Word] = []
        wants = set(takes_value.split())
        index = 0
        while index < len(args):
            word = args[index]
            value = word.value
            index += 1
            if value == "--":
                self.operands.extend(args[index:])
                break
            if value.startswith("--") and len(value) > 2:
                name, has_value, attached = value[2:].partition("=")
                self.long.add(name)
                if has_value:
                    self.values[name] = Word.literal(attached)
                elif name in wants and index < len(args):
                    self.values[name] = args[index]
                    index += 1
            elif value.startswith("-") and len(value) > 1 and not word.dynamic:
                for position, letter in enumerate(value[1:], start=1):
                    self.letters.add(letter)
                    if letter in wants:
                        rest = value[position + 1 :]
                        if rest:
                            self.values[letter] = Word.literal(rest)
                        elif index < len(args):
                            self.values[letter] = args[index]
                            index += 1
                        break
            else:
                self.operands.append(word)
                if stop_at_operand:
                    self.operands.extend(args[index:])
                    break

    def has(self, *names: str) -> bool:
        return any(n in self.letters if len(n) == 1 else n in self.long for n in names)


# ---------------------------------------------------------------- the rules

Rule = Callable[[str, list[Word], SimpleCommand, int], "str | None"]


def _recursive(name: str, args: list[Word], command: SimpleCommand, depth: int) -> str | None:
    parsed = _Args(args, "reference from" if name != "rm" else "")
    if parsed.has("no-preserve-root"):
        return f"disables {name}'s protection of the root directory (--no-preserve-root)"
    recursive = parsed.has("recursive") or ("r" in parsed.letters and name == "rm") or "R" in parsed.letters
    if not recursive:
        return None
    verb = "deletes" if name == "rm" else "changes the permissions or ownership of"
    for operand in parsed.operands:
        where = _precious(operand, command.cwd)
        if where:
            return f"recursively {verb} {where}"
    return None


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
        where = _precious(start, command.cwd)
        if where:
            return f"deletes or changes files throughout {where} (find {action})"
    return None


def _formats(name: str, args: list[Word], command: SimpleCommand, depth: int) -> str | None:
    return f"formats a filesystem ({name})"


def _wipes(name: str, args: list[Word], command: SimpleCommand, depth: int) -> str | None:
    if name == "wipefs":
        return "erases filesystem signatures from a device (wipefs)"
    return "discards every block of a device (blkdiscard)"


_READ_ONLY_PARTITIONING = {
    "fdisk": {"l", "list", "u", "units", "b", "sector-size", "L", "color"},
    "sfdisk": {"l", "list", "d", "dump", "J", "json", "s", "show-size", "g", "show-geometry", "V", "verify", "F", "list-free", "r", "reorder-no"},
    "sgdisk": {"p", "print", "v", "verify", "O", "print-mbr", "D", "display-alignment", "E", "end-of-largest", "P", "pretend", "i", "info"},
    "gdisk": {"l", "list"},
    "parted": {"l", "list", "s", "script", "m", "machine"},
}  # fmt: skip
_PARTED_READ_COMMANDS = {"print", "unit", "help", "version", "p", "free", "s", "b", "kb", "mb", "gb", "tb", "B", "MB", "GB", "TB", "MiB", "GiB", "%", "cyl", "chs", "compact"}  # fmt: skip


def _partitions(name: str, args: list[Word], command: SimpleCommand, depth: int) -> str | None:
    parsed = _Args(args, "b sector-size u units")
    devices = [d for d in (_device(w, command.cwd) for w in parsed.operands) if d]
    if not devices:
        return None
    options = parsed.letters | parsed.long
    read_only = _READ_ONLY_PARTITIONING.get(name, set())
    if name == "parted":
        words = [w.value for w in parsed.operands if not _device(w, command.cwd)]
        if ("l" in options or "list" in options or words) and all(w in _PARTED_READ_COMMANDS for w in words):
            return None
    elif options and options <= read_only and (options - {"u", "units", "b", "sector-size", "color", "L"}):
        return None
    return f"rewrites the partition table of {devices[0]} ({name})"


def _dd(name: str, args: list[Word], command: SimpleCommand, depth: int) -> str | None:
    for word in args:
        if word.value.startswith("of="):
            device = _device(Word(word.text, tuple(v[3:] for v in word.values), word.templates, glob=word.glob), command.cwd)
            if device:
                return f"writes raw data onto the disk device {device} (dd of={device})"
    return None


def _copies(name: str, args: list[Word], command: SimpleCommand, depth: int) -> str | None:
    parsed = _Args(args, "t target-directory S suffix")
    targets = [parsed.values[k] for k in ("t", "target-directory") if k in parsed.values]
    if name == "tee":
        targets += parsed.operands
    elif parsed.operands:
        targets.append(parsed.operands[-1])
    for target in targets:
        device = _device(target, command.cwd)
        if device:
            return f"writes onto the disk device {device} ({name})"
    return None


def _shred(name: str, args: list[Word], command: SimpleCommand, depth: int) -> str | None:
    parsed = _Args(args, "n iterations s size random-source")
    for operand in parsed.operands:
        device = _device(operand, command.cwd)
        if device:
            return f"overwrites the disk device {device} (shred)"
        system = _under_system(operand, command.cwd)
        if system:
            return f"overwrites the system file {system} (shred)"
    return None


def _kill(name: str, args: list[Word], command: SimpleCommand, depth: int) -> str | None:
    signal_given = False
    pids: list[str] = []
    index = 0
    while index < len(args):
        value = args[index].value
        index += 1
        if value == "--":
            pids.extend(w.value for w in args[index:])
            break
        if value in ("-l", "-L", "--list", "--table"):
            return None
        if value in ("-s", "-n", "--signal"):
            index += 1
            signal_given = True
        elif value.startswith("-") and not signal_given and not pids:
            signal_given = True  # the first option is the signal: in `kill -9 -1`, -1 is the pid
        else:
            pids.append(value)
    # A lone `kill -1` is a usage error for bash but "every process" for some kill programs.
    if "-1" in pids or (not pids and [w.value for w in args] == ["-1"]):
        return "kills every process on the machine (kill -1)"
    return None


_MATCH_ALL = {"", ".", ".*", ".+", "^", "$", "^.*", ".*$", "^.*$", "^.+$"}
_SIGNAL_OPTION = re.compile(r"-(?:\d+|(?:SIG)?[A-Z]{2,}[A-Z0-9+]*)")


def _pkill(name: str, args: list[Word], command: SimpleCommand, depth: int) -> str | None:
    if name == "killall5":
        return "kills every process on the machine (killall5)"
    if name == "pkill":
        takes = "signal u U g G P s t F session terminal pidfile euid uid group pgroup parent ns nslist"
    else:
        takes = "s signal u user o y n older-than younger-than Z context"
    parsed = _Args([w for w in args if not _SIGNAL_OPTION.fullmatch(w.value)], takes)
    patterns = [w.value for w in parsed.operands]
    if name == "pkill" and parsed.has("v", "inverse"):
        return "kills every process except the ones matched (pkill -v)"
    regex = name == "pkill" or parsed.has("r", "regexp")
    if regex and any(p in _MATCH_ALL for p in patterns):
        return f"kills every process on the machine ({name} {patterns[0]!r})"
    if not patterns and parsed.has("u", "U", "euid", "uid", "user"):
        return f"kills every process of a user ({name} -u)"
    return None


def _power(name: str, args: list[Word], command: SimpleCommand, depth: int) -> str | None:
    return f"shuts down or restarts the machine ({name})"


_POWER_VERBS = {"reboot", "poweroff", "halt", "kexec", "soft-reboot"}
_POWER_TARGETS = {"reboot.target", "poweroff.target", "halt.target", "kexec.target", "rescue.target", "emergency.target"}
_SYSTEMCTL_VALUES = "t p s n o H M type property signal lines output host machine root state kill-whom job-mode what when reboot-argument boot-loader-entry"  # fmt: skip


def _systemctl(name: str, args: list[Word], command: SimpleCommand, depth: int) -> str | None:
    operands = [w.value for w in _Args(args, _SYSTEMCTL_VALUES).operands]
    if not operands:
        return None
    verb = operands[0]
    if verb in _POWER_VERBS or (name == "loginctl" and verb in ("reboot", "poweroff", "halt")):
        return f"shuts down or restarts the machine ({name} {verb})"
    if verb in ("isolate", "start") and set(operands[1:]) & _POWER_TARGETS:
        return f"shuts down or restarts the machine ({name} {verb})"
    return None


def _init(name: str, args: list[Word], command: SimpleCommand, depth: int) -> str | None:
    if any(w.value in ("0", "6") for w in args):
        return f"shuts down or restarts the machine ({name} {args[0].value})"
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
    if runs_string:
        return _nested(operands[0], depth, f"{name} -c") if operands else None
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
    parsed = _Args(
        args, "c command session-command s shell g group G supp-group w whitelist-environment u user", stop_at_operand=name == "runuser"
    )
    for key in ("c", "command", "session-command"):
        if key in parsed.values:
            return _nested(parsed.values[key], depth, f"{name} -c")
    if name == "runuser" and parsed.operands:
        return judge(_with_words(command, parsed.operands if parsed.has("u", "user") else parsed.operands[1:]), depth)
    return None


def _watch(name: str, args: list[Word], command: SimpleCommand, depth: int) -> str | None:
    parsed = _Args(args, "n interval d differences q equexit", stop_at_operand=True)
    if not parsed.operands:
        return None
    if parsed.has("x", "exec"):
        return judge(_with_words(command, parsed.operands), depth)
    return _eval("eval", parsed.operands, command, depth)


def _flock(name: str, args: list[Word], command: SimpleCommand, depth: int) -> str | None:
    parsed = _Args(args, "w timeout wait E conflict-exit-code c command", stop_at_operand=True)
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


def _nested(word: Word, depth: int, what: str) -> str | None:
    """Parse and check the text another shell will run."""
    if word.from_output:
        return UNSURE + f"{what} runs text built from command output ({word.text})"
    for template in word.templates:
        if template.strip() == UNKNOWN:
            return UNSURE + f"{what} runs text that is only known when it runs ({word.text})"
        reason = check_line(template, depth + 1)
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
    **dict.fromkeys(("rm", "chmod", "chown", "chgrp"), _recursive),
    "find": _find,
    **dict.fromkeys(("mke2fs", "mkswap", "mkdosfs", "mkntfs"), _formats),
    **dict.fromkeys(("wipefs", "blkdiscard"), _wipes),
    **dict.fromkeys(("fdisk", "sfdisk", "cfdisk", "parted", "sgdisk", "gdisk"), _partitions),
    "dd": _dd,
    **dict.fromkeys(("cp", "mv", "install", "rsync", "tee"), _copies),
    "shred": _shred,
    "kill": _kill,
    **dict.fromkeys(("pkill", "killall", "killall5"), _pkill),
    **dict.fromkeys(("shutdown", "reboot", "halt", "poweroff", "kexec"), _power),
    **dict.fromkeys(("systemctl", "loginctl"), _systemctl),
    **dict.fromkeys(("init", "telinit"), _init),
    **dict.fromkeys(SHELLS, _shell),
    "eval": _eval,
    **dict.fromkeys(("source", "."), _source),
    **dict.fromkeys(("su", "runuser"), _su),
    "watch": _watch,
    "flock": _flock,
    "alias": _alias,
    "trap": _trap,
}
