"""How a configured MCP server is reached: the command line, environment and folder of a stdio
server (inside the terminal's sandbox), or the URL and headers of a streamable HTTP server.

A stdio server runs, by default, in the same bubblewrap sandbox as the terminal tool's commands
(:mod:`vigil.tools.sandbox`): the filesystem read-only, vigil's homes and the user's secrets
(``~/.ssh``, ``~/.aws``, browser profiles, ``tools.terminal.hide`` ...) hidden, its own folder
``workspaces/mcp-NAME`` the one writable place (also its working directory, and where caches go:
``XDG_CACHE_HOME``, ``XDG_DATA_HOME``, ``npm_config_cache`` point into it, so ``uvx`` and ``npx``
work), the network on but the host's loopback services closed (except
``tools.terminal.local_ports``). The trade-off: a server that must change files elsewhere (a git
server working on a repository, a filesystem server) or reach a local service cannot work so;
it is added with ``--no-sandbox`` (``sandbox: false``) and then runs as vigil itself does, still
with only the variables its entry names besides HOME, PATH, USER, SHELL, TERM and LOGNAME.
Where bubblewrap cannot run, servers run unsandboxed and the log and ``vigil doctor`` say so.

Its standard error goes to ``logs/mcp-NAME.log`` in the profile (never to the terminal).
"""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Mapping

from vigil.config.settings import Settings, TerminalSettings
from vigil.profiles import Profile
from vigil.config.store_location import store_location
from vigil.tools import sandbox as sandboxing
from vigil.tools.boundary import boundary_for, database_files
from vigil.tools.mcp.config import Expanded, ServerSpec

log = logging.getLogger(__name__)

class MissingProgram(Exception):
    """A stdio server's command names no program that can be run."""


LOG_CAP = 1 << 20
"""Bytes a server's log may reach before it is moved aside (one old copy is kept)."""


@dataclass
class Launch:
    """Everything needed to reach one server, secrets expanded (never stored or logged)."""

    spec: ServerSpec
    expanded: Expanded
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    log_path: Path | None = None
    sandboxed: bool = False
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def open_log(self) -> IO[str] | None:
        """The server's standard error log, opened for appending (private to the user)."""
        if self.log_path is None:
            return None
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            if self.log_path.stat().st_size > LOG_CAP:
                self.log_path.replace(self.log_path.with_suffix(".log.1"))
        except FileNotFoundError:
            pass
        descriptor = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        return os.fdopen(descriptor, "a", encoding="utf-8", errors="replace")

    def log_tail(self, since: int, limit: int = 300) -> str:
        """The last non-blank line the server wrote to its log after byte ``since``."""
        if self.log_path is None:
            return ""
        try:
            with open(self.log_path, "rb") as handle:
                handle.seek(since)
                text = handle.read()[-8192:].decode("utf-8", "replace")
        except OSError:
            return ""
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return self.expanded.scrub(lines[-1])[:limit] if lines else ""

    def log_size(self) -> int:
        try:
            return self.log_path.stat().st_size if self.log_path is not None else 0
        except OSError:
            return 0


def prepare(spec: ServerSpec, profile: Profile, settings: Settings, environ: Mapping[str, str]) -> Launch:
    """The launch of ``spec``; ``MissingVariable`` when a ``${NAME}`` is not set,
    ``MissingProgram`` when the command cannot be found. Blocking (the
    sandbox's first use checks that bubblewrap runs), so call it in a thread."""
    expanded = Expanded(environ)
    if spec.transport == "http":
        assert spec.url is not None
        return Launch(
            spec, expanded,
            url=expanded(spec.url, f"mcp.servers.{spec.name}.url"),
            headers={key: expanded(value, f"mcp.servers.{spec.name}.headers.{key}") for key, value in spec.headers},
        )
    assert spec.command is not None
    env = {key: expanded(value, f"mcp.servers.{spec.name}.env.{key}") for key, value in spec.env}
    workspace = profile.workspace(f"mcp-{spec.name}")
    launch = Launch(spec, expanded, env=env, cwd=workspace, log_path=profile.logs_dir / f"mcp-{spec.name}.log")
    program = shutil.which(spec.command, path=env.get("PATH", environ.get("PATH", os.defpath)))
    if program is None:
        raise MissingProgram(f"the program {spec.command} was not found" + ("" if os.sep in spec.command else " on PATH"))
    command = [program, *spec.args]
    sandbox = _sandbox(spec, profile, settings, workspace) if spec.sandbox else None
    if sandbox is None:
        launch.argv = command
        return launch
    launch.argv = sandbox.argv(command)
    launch.sandboxed = True
    for variable, folder in (("XDG_CACHE_HOME", ".cache"), ("XDG_DATA_HOME", ".local/share"),
                             ("XDG_STATE_HOME", ".local/state"), ("npm_config_cache", ".npm")):
        launch.env.setdefault(variable, str(workspace / folder))
    return launch


def _sandbox(spec: ServerSpec, profile: Profile, settings: Settings, workspace: Path) -> sandboxing.Sandbox | None:
    extra: list[Path] = []
    if settings.store.url:
        where = store_location(settings.store.url)
        if isinstance(where, Path):
            extra = database_files(Path(os.path.expanduser(where)))
    boundary = boundary_for(profile, settings, workspace, extra)
    terminal = settings.tools.terminal
    # The server's own network policy: on, with the terminal's local ports; never "never".
    wanted = TerminalSettings(sandbox="always", network=True, local_ports=list(terminal.local_ports))
    found = sandboxing.for_run(wanted, unattended=True, boundary=boundary)
    if isinstance(found, sandboxing.Unavailable):
        log.warning("MCP server %s runs without a sandbox: %s", spec.name, found.why)
        return None
    return found
