"""The systemd *user* unit that keeps a profile's gateway running (``vigil gateway install``).

One unit per profile: ``vigil-gateway.service`` for the default profile,
``vigil-gateway-<name>.service`` for a named one, in ``$XDG_CONFIG_HOME/systemd/user``
(default ``~/.config/systemd/user``). The unit runs this very vigil (the absolute path of the
running command, or this Python with ``-m vigil.cli.main``), so it keeps working from a
virtual environment that is not on the service manager's ``PATH``.
"""

from __future__ import annotations

import math
import os
import re
import sys
from pathlib import Path
from typing import Mapping, Sequence

from vigil.profiles import DEFAULT_PROFILE, Profile

STOP_MARGIN = 15
"""Seconds systemd waits beyond ``gateway.stop_timeout`` before it kills the gateway: the time
to write the last status and close the store after the turns are done."""
_PLAIN = re.compile(r"^[A-Za-z0-9/._:=@+,-]+$")


class InstallError(Exception):
    """The unit cannot be written; the message says why."""


class UnitConflict(InstallError):
    """A different unit file already exists where the new one would go."""


def unit_name(profile: Profile) -> str:
    """``vigil-gateway.service``, or ``vigil-gateway-<profile>.service`` for a named profile."""
    return "vigil-gateway.service" if profile.name == DEFAULT_PROFILE else f"vigil-gateway-{profile.name}.service"


def unit_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where systemd looks for the user's own units: ``$XDG_CONFIG_HOME/systemd/user``.

    A relative ``XDG_CONFIG_HOME`` is ignored, as the XDG base directory spec says."""
    environ = os.environ if environ is None else environ
    configured = environ.get("XDG_CONFIG_HOME", "")
    base = Path(configured) if configured and os.path.isabs(configured) else Path.home() / ".config"
    return base / "systemd" / "user"


def unit_path(profile: Profile, environ: Mapping[str, str] | None = None) -> Path:
    return unit_dir(environ) / unit_name(profile)


def vigil_command(argv0: str | None = None, executable: str | None = None) -> list[str]:
    """The command that runs this vigil: the absolute path of the running ``vigil`` script when
    that is what runs, else ``<this python> -m vigil.cli.main``."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    executable = sys.executable if executable is None else executable
    script = Path(argv0)
    if script.name == "vigil" and script.is_file() and os.access(script, os.X_OK):
        return [str(script.absolute())]
    if not executable:
        raise InstallError("cannot tell which Python runs vigil (sys.executable is empty)")
    return [str(Path(executable).absolute()), "-m", "vigil.cli.main"]


def gateway_arguments(profile: Profile) -> list[str]:
    """``[-p NAME] gateway run``: the arguments after the command."""
    named = [] if profile.name == DEFAULT_PROFILE else ["-p", profile.name]
    return [*named, "gateway", "run"]


def render_unit(
    profile: Profile, *, command: Sequence[str], stop_timeout: float, vigil_home: str | None,
    env_file: Path | None = None,
) -> str:
    """The unit file's text. ``command`` runs vigil (see :func:`vigil_command`); ``vigil_home``,
    when given, is passed as ``VIGIL_HOME``; ``env_file``, when given, is read for the secrets
    (:mod:`vigil.gateway.secrets_env`); systemd stops the gateway with SIGTERM and waits
    ``stop_timeout`` + :data:`STOP_MARGIN` seconds before it kills it."""
    exec_start = " ".join(_exec_word(word) for word in [*command, *gateway_arguments(profile)])
    environment = ["PYTHONUNBUFFERED=1"]  # the gateway's lines reach the journal as they are said
    if vigil_home:
        environment.insert(0, f"VIGIL_HOME={vigil_home}")
    lines = [
        f"# Written by `vigil gateway install` for the vigil profile '{profile.name}'.",
        "# Rewrite it with `vigil gateway install --force` after moving vigil or the profile.",
        "[Unit]",
        f"Description=vigil gateway (profile {_specifiers(profile.name)})",
        "",
        "[Service]",
        "Type=simple",
        f"ExecStart={exec_start}",
        f"Environment={' '.join(_env_word(pair) for pair in environment)}",
        *([f"EnvironmentFile={_specifiers(str(env_file))}"] if env_file is not None else []),
        "Restart=on-failure",
        "RestartSec=5",
        "KillSignal=SIGTERM",
        # SIGTERM to the gateway alone, so the commands of running turns may finish with them;
        # whatever is left when the time is up is killed.
        "KillMode=mixed",
        f"TimeoutStopSec={math.ceil(stop_timeout + STOP_MARGIN)}",
        "",
        "[Install]",
        "WantedBy=default.target",
        "",
    ]
    return "\n".join(lines)


def install_unit(path: Path, text: str, *, force: bool) -> str:
    """Write ``text`` to ``path``; returns ``"written"``, ``"replaced"`` or ``"unchanged"``.

    A different file already there raises :class:`UnitConflict` unless ``force``; the write is
    atomic (a temporary file renamed into place), so systemd never reads half a unit."""
    try:
        existing = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        existing = None
    except (OSError, UnicodeDecodeError) as exc:
        if not force:
            raise UnitConflict(f"{path} exists but cannot be read ({exc}); use --force to replace it") from None
        existing = ""
    if existing == text:
        return "unchanged"
    if existing is not None and not force:
        raise UnitConflict(
            f"{path} already exists and differs from the unit vigil would write; "
            "see the new one with `vigil gateway install --print`, replace it with --force"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, text.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)
    return "written" if existing is None else "replaced"


def next_steps(profile: Profile) -> list[str]:
    """The commands that load, start and keep the installed unit running."""
    name = unit_name(profile)
    return [
        "systemctl --user daemon-reload",
        f"systemctl --user enable --now {name}",
        "loginctl enable-linger $USER",
    ]


def _specifiers(text: str) -> str:
    """``%`` starts a systemd specifier (``%h``); a literal one is doubled."""
    return text.replace("%", "%%")


def _c_quoted(text: str) -> str:
    """``text`` in double quotes with C-style escapes, as systemd reads a quoted word."""
    body = []
    for char in text:
        if char in '"\\':
            body.append("\\" + char)
        elif ord(char) < 32 or ord(char) == 127:
            body.append(f"\\x{ord(char):02x}")
        else:
            body.append(char)
    return '"' + "".join(body) + '"'


def _exec_word(word: str) -> str:
    """One word of ``ExecStart=``: specifiers and ``$`` variables made literal, quoted if needed."""
    literal = _specifiers(word).replace("$", "$$")
    return literal if _PLAIN.match(word) else _c_quoted(literal)


def _env_word(assignment: str) -> str:
    """One ``NAME=value`` of ``Environment=`` (no ``$`` expansion there, specifiers yes)."""
    literal = _specifiers(assignment)
    return literal if _PLAIN.match(assignment) else _c_quoted(literal)
