"""Recognise shell commands that can wreck the machine, so the terminal tool asks first.

This is a seat belt against a model's slip, not a sandbox: it looks for a short list of
well-known destructive forms and lets everything else through. A false alarm costs the user one
question, so the patterns lean towards asking when a command could plausibly be catastrophic.
"""

from __future__ import annotations

import re

# Where a command word can start: the beginning, after a separator or a subshell opener,
# optionally behind sudo (with its options) and with a directory in front (/sbin/mkfs).
_CMD = (
    r"(?:^|[;&|(`{]|\$\(|\bthen\b|\bdo\b|\belse\b)\s*"
    r"(?:sudo\s+(?:-\S+\s+)*)?(?:command\s+|exec\s+)?(?:[^\s;&|]*/)?"
)
_DISK = r"/dev/(?:sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|disk\d|md\d|dm-\d)"
_SH = r"(?:sudo\s+(?:-\S+\s+)*)?(?:[^\s;&|]*/)?(?:ba|z|k|da)?sh\b"

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(_CMD + r"mkfs(?:\.\w+)?\b"), "formats a filesystem (mkfs)"),
    (re.compile(r"\bdd\b[^;&|\n]*\bof=" + _DISK), "writes raw data onto a disk device (dd of=/dev/...)"),
    (re.compile(r">\s*" + _DISK), "overwrites a disk device through a redirect"),
    (re.compile(r"([\w:]+)\s*\(\)\s*\{\s*\1\s*\|\s*\1\s*&\s*\}\s*;\s*\1"), "is a fork bomb"),
    (
        re.compile(r"\b(?:curl|wget)\b[^;\n]*\|\s*" + _SH),
        "pipes a downloaded script straight into a shell",
    ),
    (
        re.compile(r"\b(?:ba|z|k|da)?sh\b[^;\n]*(?:<\(|\$\(|`)\s*(?:curl|wget)\b"),
        "runs a downloaded script in a shell",
    ),
    (re.compile(_CMD + r"(?:shutdown|reboot|halt|poweroff)\b"), "shuts down or restarts the machine"),
    (
        re.compile(_CMD + r"(?:systemctl\s+(?:reboot|poweroff|halt|kexec)|init\s+[06])\b"),
        "shuts down or restarts the machine",
    ),
)

# A command handed to a nested shell as one quoted string: checked like a command line.
_NESTED = re.compile(r"\b(?:ba|z|k|da)?sh\s+(?:-\w+\s+)*-\w*c\s+(['\"])(.*?)\1", re.S)

# rm/chmod/chown invocations; their arguments are inspected token by token below.
_RECURSIVE_CMD = re.compile(_CMD + r"(rm|chmod|chown|chgrp)\s+([^;&|\n)]*)")

_SYSTEM_DIRS = frozenset(
    "/bin /boot /dev /etc /home /lib /lib32 /lib64 /opt /proc /root /sbin /srv /sys /usr /var".split()
)
_HOME_FORMS = frozenset({"~", "$HOME", "${HOME}"})


def check(command: str) -> str | None:
    """Why ``command`` needs the user's approval (a short phrase), or ``None`` if it looks ordinary."""
    for pattern, reason in _PATTERNS:
        if pattern.search(command):
            return reason
    for match in _RECURSIVE_CMD.finditer(command):
        reason = _check_recursive(match.group(1), match.group(2).split())
        if reason:
            return reason
    for match in _NESTED.finditer(command):
        reason = check(match.group(2))
        if reason:
            return reason
    return None


def _check_recursive(program: str, args: list[str]) -> str | None:
    """A recursive rm/chmod/chown aimed at the root, a system directory or the home directory."""
    if "--no-preserve-root" in args:
        return f"disables {program}'s protection of the root directory (--no-preserve-root)"
    # For chmod, "-r" is a mode (remove read permission); only rm spells recursion both ways.
    flags = "rR" if program == "rm" else "R"
    recursive = False
    targets: list[str] = []
    for arg in args:
        if arg == "--recursive":
            recursive = True
        elif arg.startswith("--"):
            continue
        elif arg.startswith("-") and len(arg) > 1:
            recursive = recursive or any(flag in arg[1:] for flag in flags)
        else:
            targets.append(arg.strip("'\""))
    if not recursive:
        return None
    for target in targets:
        where = _catastrophic_target(target)
        if where:
            verb = "deletes" if program == "rm" else "changes permissions or ownership of"
            return f"recursively {verb} {where}"
    return None


def _catastrophic_target(target: str) -> str | None:
    """What ``target`` is if it is the root, a system directory or the home directory itself."""
    base = target
    for suffix in ("/*", "/."):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
            break
    if target.startswith("/") or base.startswith("/"):
        base = "/" + base.strip("/")
    else:
        base = base.rstrip("/")
    if base in ("/", "/.."):
        return "the whole filesystem"
    if base in _HOME_FORMS:
        return "the home directory"
    if base in _SYSTEM_DIRS:
        return f"the system directory {base}"
    return None
