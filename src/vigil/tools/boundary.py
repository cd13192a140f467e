"""What the agent's tools may see and change: the one boundary the sandbox and the file tools share.

The agent works in one folder, its workspace (the conversation's or the cron job's working
directory): that is all it may change. Everything else is read-only, and some of it is hidden:

* every vigil home (the profile's and the root ``$VIGIL_HOME`` with every profile in it): the
  login token, the session database, config.yaml with its keys, the persona (SOUL.md), MEMORY.md,
  USER.md and the skills. The persona, memory and skills change only through vigil's own
  tools, never through a shell command or a file tool. A workspace inside a home stays
  visible (and writable) on its own;
* the user's secrets: :data:`USER_SECRETS` under the home folder, and whatever
  ``tools.terminal.hide`` adds;
* the session database, when ``store.url`` keeps it outside the home.

The terminal's sandbox (:mod:`vigil.tools.sandbox`) enforces this for commands; the file tools
check it before they read or write. Leaving it takes a person's approval, and in unattended
runs nothing leaves it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from vigil.config.settings import Settings
from vigil.profiles import Profile, in_vigil_home, vigil_home
from vigil.tools.base import ToolContext

USER_SECRETS = (
    ".ssh", ".gnupg", ".aws", ".azure", ".config/gcloud", ".kube", ".docker", ".netrc",
    ".git-credentials", ".pgpass", ".pypirc", ".vault-token", ".config/gh", ".password-store",
    ".local/share/keyrings",
    # browser and mail profiles: cookies, saved passwords, session tokens
    ".mozilla", ".thunderbird", ".config/google-chrome", ".config/chromium",
    ".config/BraveSoftware", ".config/microsoft-edge", ".config/vivaldi", ".config/opera",
    "snap/firefox", "snap/chromium", ".var/app/org.mozilla.firefox", ".var/app/com.google.Chrome",
    ".var/app/org.chromium.Chromium",
)
"""Folders and files under the user's home that hold credentials, hidden from every tool."""


@dataclass(frozen=True, slots=True)
class Boundary:
    """One run's limits: the workspace it may change and the paths it may not see."""

    workspace: Path
    """The one folder the run may change (and ``/tmp`` inside the sandbox)."""
    homes: tuple[Path, ...]
    """vigil homes, hidden whole except the workspace where it lies inside one."""
    secrets: tuple[Path, ...]
    """Files and folders hidden wherever they are, the workspace included."""

    def hidden(self, path: Path) -> bool:
        """Whether ``path`` (resolved through symlinks) is out of the run's sight."""
        real = _real(path)
        if any(_within(real, secret) for secret in self.secrets):
            return True
        if self._in_workspace(real):
            return False
        return any(_within(real, home) for home in self.homes)

    def writable(self, path: Path) -> bool:
        """Whether the run may change ``path`` (resolved through symlinks) without approval."""
        real = _real(path)
        return self._in_workspace(real) and not self.hidden(real)

    def _in_workspace(self, real: Path) -> bool:
        # "/" as the workspace would open everything: the sandbox keeps it read-only instead.
        workspace = _real(self.workspace)
        return workspace != Path("/") and _within(real, workspace)

    def existing_secrets(self) -> list[Path]:
        """The secrets that exist (only those can be masked), outermost first, resolved."""
        return [path for path in _outermost(self.secrets) if path.exists()]


def boundary_for(profile: Profile, settings: Settings, workspace: Path,
                 extra_secrets: Sequence[Path] = ()) -> Boundary:
    """The boundary of a run of ``profile`` working in ``workspace``. ``extra_secrets``: files
    to hide besides the user's (the session database when it lies outside the home).

    ``ValueError`` when ``workspace`` lies inside a vigil home outside the profile's workspaces
    (:meth:`Profile.agent_workdir` never chooses such a folder)."""
    if in_vigil_home(workspace, profile):
        raise ValueError(f"{workspace} lies inside a vigil home, where the agent's commands never work")
    home = Path.home()
    secrets = [home / name for name in USER_SECRETS]
    secrets += [Path(os.path.expanduser(path)) for path in settings.tools.terminal.hide]
    secrets += list(extra_secrets)
    return Boundary(
        workspace=_real(workspace),
        homes=tuple(_outermost(_real(path) for path in (vigil_home(), profile.home))),
        secrets=tuple(dict.fromkeys(_real(path) for path in secrets)),
    )


def tool_boundary(ctx: ToolContext) -> Boundary:
    """The boundary of a tool's run; ``ValueError`` when its working directory lies inside a
    vigil home."""
    from vigil.store.sqlite import SQLiteStore

    # The session database is hidden also when store.url keeps it outside the home.
    store_files = database_files(ctx.store.path) if isinstance(ctx.store, SQLiteStore) else []
    return boundary_for(ctx.profile, ctx.settings, ctx.cwd, store_files)


def database_files(db: Path) -> list[Path]:
    """An SQLite database and the journal files beside it, which hold its recent pages."""
    return [db, *(Path(f"{db}{suffix}") for suffix in ("-wal", "-shm", "-journal"))]


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _outermost(paths: Iterable[Path]) -> list[Path]:
    """``paths`` without duplicates and without those nested in another one (``/`` never kept)."""
    unique = sorted(set(paths), key=lambda p: len(p.parts))
    kept: list[Path] = []
    for path in unique:
        if path != Path("/") and not any(_within(path, outer) for outer in kept):
            kept.append(path)
    return kept
