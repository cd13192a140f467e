"""What a command's operands name: the root, system and home directories, block devices.

Paths are normalised with ``posixpath.normpath`` (``/./``, ``/usr/..`` and ``//`` are ``/``);
relative paths are taken from the directory the command line starts in, which is not judged,
except that its parents (``..``) are never the thing to delete. Also here: a small GNU-style
option splitter the rules share.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
import stat
from dataclasses import replace

from vigil.tools.shell.words import HOME, SimpleCommand, Word

SYSTEM_DIRECTORIES = frozenset(
    "/bin /boot /dev /etc /home /lib /lib32 /lib64 /libx32 /media /mnt /opt /proc /root /run /sbin "
    "/snap /srv /sys /usr /var /usr/bin /usr/sbin /usr/lib /usr/lib32 /usr/lib64 /usr/libexec "
    "/usr/include /usr/local /usr/share /usr/src /var/lib /Applications /Library /System /Users".split()
)


# shred overwrites files one by one: anything under these is part of the installed system.
SYSTEM_TREES = tuple(
    "/bin /boot /dev /etc /lib /lib32 /lib64 /libx32 /opt /proc /root /sbin /srv /sys /usr /var".split()
)

_BLOCK_DEVICE = re.compile(
    r"/dev/(?:(?:sd|hd|vd|xvd)[a-zA-Z]+\d*|nvme\d+(?:n\d+(?:p\d+)?)?|mmcblk\d+(?:p\d+)?|md\d+|dm-\d+"
    r"|loop\d+|sr\d+|nbd\d+|zram\d+|rbd\d+|fd\d+|r?disk\d+(?:s\d+)?|bcache\d+|root|mem|kmem|port"
    r"|disk/.+|mapper/.+)"
)


def resolve_path(value: str, cwd: str | None) -> str | None:
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


def precious_target(word: Word, cwd: str | None) -> str | None:
    """What ``word`` names if it is ``/``, a system or home directory, or everything in one."""
    for value in word.values:
        path = resolve_path(value, cwd)
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


def block_device(word: Word, cwd: str | None = None) -> str | None:
    """The block device ``word`` names, if it names one."""
    for value in word.values:
        path = resolve_path(value, cwd)
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


def system_path(word: Word, cwd: str | None) -> str | None:
    for value in word.values:
        path = resolve_path(value, cwd)
        if path and any(path == tree or path.startswith(tree + "/") for tree in SYSTEM_TREES):
            return path
    return None


def redirect_reason(command: SimpleCommand) -> str | None:
    for redirect in command.redirects:
        if redirect.writes and redirect.target is not None:
            device = block_device(redirect.target, command.cwd)
            if device:
                return f"overwrites the disk device {device} through a redirect ({redirect.op} {device})"
    return None


def after_equals(word: Word) -> Word:
    """What follows the first ``=`` of ``word`` (``--command=…``, ``alias.x=…``), run-time parts kept."""
    return replace(
        word,
        text=word.text.partition("=")[2] or word.text,
        values=tuple(v.partition("=")[2] for v in word.values),
        templates=tuple(t.partition("=")[2] for t in word.templates),
    )


class Options:
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
                    self.values[name] = after_equals(word)
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
