"""The rules for commands that destroy data or stop the machine (see :mod:`vigil.tools.shell.policy`
for the whole list). Each rule gets the program name, its arguments (wrappers already removed)
and the command, and returns why it is dangerous or ``None``."""

from __future__ import annotations

import re
from typing import Callable

from vigil.tools.shell.targets import Options, block_device, precious_target, system_path
from vigil.tools.shell.words import SimpleCommand, Word

Rule = Callable[[str, list[Word], SimpleCommand, int], "str | None"]

def _recursive(name: str, args: list[Word], command: SimpleCommand, depth: int) -> str | None:
    parsed = Options(args, "reference from" if name != "rm" else "")
    if parsed.has("no-preserve-root"):
        return f"disables {name}'s protection of the root directory (--no-preserve-root)"
    recursive = parsed.has("recursive") or ("r" in parsed.letters and name == "rm") or "R" in parsed.letters
    if not recursive:
        return None
    verb = "deletes" if name == "rm" else "changes the permissions or ownership of"
    for operand in parsed.operands:
        where = precious_target(operand, command.cwd)
        if where:
            return f"recursively {verb} {where}"
    return None


def formats(name: str, args: list[Word], command: SimpleCommand, depth: int) -> str | None:
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
    parsed = Options(args, "b sector-size u units")
    devices = [d for d in (block_device(w, command.cwd) for w in parsed.operands) if d]
    if not devices:
        return None
    options = parsed.letters | parsed.long
    read_only = _READ_ONLY_PARTITIONING.get(name, set())
    if name == "parted":
        words = [w.value for w in parsed.operands if not block_device(w, command.cwd)]
        if ("l" in options or "list" in options or words) and all(w in _PARTED_READ_COMMANDS for w in words):
            return None
    elif options and options <= read_only and (options - {"u", "units", "b", "sector-size", "color", "L"}):
        return None
    return f"rewrites the partition table of {devices[0]} ({name})"


def _dd(name: str, args: list[Word], command: SimpleCommand, depth: int) -> str | None:
    for word in args:
        outputs = tuple(v[3:] for v in word.values if v.startswith("of="))
        if outputs:
            device = block_device(Word(word.text, outputs, outputs, glob=word.glob), command.cwd)
            if device:
                return f"writes raw data onto the disk device {device} (dd of={device})"
    return None


def _copies(name: str, args: list[Word], command: SimpleCommand, depth: int) -> str | None:
    parsed = Options(args, "t target-directory S suffix")
    targets = [parsed.values[k] for k in ("t", "target-directory") if k in parsed.values]
    if name in ("tee", "truncate"):
        targets += parsed.operands
    elif name == "ddrescue":
        targets += parsed.operands[1:2]
    elif parsed.operands and not targets:
        targets.append(parsed.operands[-1])
    for target in targets:
        device = block_device(target, command.cwd)
        if device:
            return f"writes onto the disk device {device} ({name})"
    given_target = any(k in parsed.values for k in ("t", "target-directory"))
    sources = parsed.operands if given_target else parsed.operands[:-1]
    if name == "mv":
        for source in sources:
            where = precious_target(source, command.cwd)
            if where:
                return f"moves away {where} (mv)"
    if name == "rsync" and any(option.startswith("delete") for option in parsed.long) and targets:
        where = precious_target(targets[-1], command.cwd)
        if where:
            return f"deletes whatever the source lacks from {where} (rsync --delete)"
    return None


def _shred(name: str, args: list[Word], command: SimpleCommand, depth: int) -> str | None:
    parsed = Options(args, "n iterations s size random-source")
    for operand in parsed.operands:
        device = block_device(operand, command.cwd)
        if device:
            return f"overwrites the disk device {device} (shred)"
        system = system_path(operand, command.cwd)
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
    parsed = Options([w for w in args if not _SIGNAL_OPTION.fullmatch(w.value)], takes)
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
    operands = [w.value for w in Options(args, _SYSTEMCTL_VALUES).operands]
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


_PARTITIONERS = ("fdisk", "sfdisk", "cfdisk", "parted", "sgdisk", "gdisk")
_DEVICE_WRITERS = frozenset(
    ("shred", "dd", "ddrescue", "wipefs", "blkdiscard", "mke2fs", "mkswap", "mkdosfs", "mkntfs", *_PARTITIONERS)
)


def writes_devices(name: str) -> bool:
    """Whether the program ``name`` is made to write to disk devices (``shred``, ``dd``, ``mkfs*``,
    partitioning tools): an operand of it that is only known at run time may name one."""
    return name in _DEVICE_WRITERS or name.startswith("mkfs")


DESTRUCTIVE_RULES: dict[str, Rule] = {
    **dict.fromkeys(("rm", "chmod", "chown", "chgrp"), _recursive),
    **dict.fromkeys(("mke2fs", "mkswap", "mkdosfs", "mkntfs"), formats),
    **dict.fromkeys(("wipefs", "blkdiscard"), _wipes),
    **dict.fromkeys(_PARTITIONERS, _partitions),
    "dd": _dd,
    **dict.fromkeys(("cp", "mv", "install", "rsync", "tee", "truncate", "ddrescue"), _copies),
    "shred": _shred,
    "kill": _kill,
    **dict.fromkeys(("pkill", "killall", "killall5"), _pkill),
    **dict.fromkeys(("shutdown", "reboot", "halt", "poweroff", "kexec"), _power),
    **dict.fromkeys(("systemctl", "loginctl"), _systemctl),
    **dict.fromkeys(("init", "telinit"), _init),
}
