"""Profiles: independent vigil homes, each with its own config, files and ``state.db``.

``$VIGIL_HOME`` (default ``~/.vigil``) is the ``default`` profile; a named profile lives in
``$VIGIL_HOME/profiles/<name>/``.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from vigil.safe_files import describe_kind

DEFAULT_PROFILE = "default"
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


class ProfileError(Exception):
    """A profile name is invalid, missing, or already exists."""


def vigil_home() -> Path:
    """The root home: ``$VIGIL_HOME`` or ``~/.vigil``."""
    env = os.environ.get("VIGIL_HOME")
    return Path(env).expanduser() if env else Path.home() / ".vigil"


@dataclass(frozen=True, slots=True)
class Profile:
    """One profile's name and home directory, with the paths of everything it keeps."""

    name: str
    home: Path

    @property
    def config_path(self) -> Path:
        return self.home / "config.yaml"

    @property
    def state_db(self) -> Path:
        return self.home / "state.db"

    @property
    def soul_path(self) -> Path:
        return self.home / "SOUL.md"

    @property
    def user_path(self) -> Path:
        return self.home / "USER.md"

    @property
    def memory_path(self) -> Path:
        return self.home / "MEMORY.md"

    @property
    def skills_dir(self) -> Path:
        return self.home / "skills"

    @property
    def logs_dir(self) -> Path:
        return self.home / "logs"

    @property
    def cron_output_dir(self) -> Path:
        return self.home / "cron" / "output"

    @property
    def history_path(self) -> Path:
        """The REPL's input history (what the user typed, for arrow-up recall)."""
        return self.home / "repl_history"

    @property
    def workspaces_dir(self) -> Path:
        """The agent's working folders: one per web or platform conversation, per cron job, and
        per conversation whose own folder would lie inside a vigil home."""
        return self.home / "workspaces"

    def workspace(self, name: str) -> Path:
        """The workspace ``name`` (one path component), made private to the user when missing."""
        if not name or "/" in name or name in (".", ".."):
            raise ValueError(f"not a workspace name: {name!r}")
        path = self.workspaces_dir / name
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise ProfileError(f"cannot create the workspace {path}: {exc.strerror or exc}") from None
        return path

    def agent_workdir(self, wanted: Path, name: str) -> Path:
        """Where the agent works when ``wanted`` was asked for: ``wanted`` itself, unless it lies
        inside a vigil home (outside this profile's workspaces), where the agent's commands must
        never work; then the workspace ``name``."""
        if in_vigil_home(wanted, self):
            return self.workspace(name)
        return wanted

    @property
    def exists(self) -> bool:
        return self.home.is_dir()

    def ensure(self) -> "Profile":
        """Create the home and its standard folders (private to the user) if missing.

        ``ProfileError`` names the path when one of them exists as something other than a
        directory (a regular file called ``skills``, a symlink loop) or cannot be created.
        """
        for path in (self.home, self.skills_dir, self.logs_dir, self.cron_output_dir):
            try:
                path.mkdir(parents=True, exist_ok=True)
            except FileExistsError:
                raise ProfileError(
                    f"{path} is {_kind_of(path)}, but vigil keeps a folder there; move it aside"
                ) from None
            except OSError as exc:
                raise ProfileError(f"cannot create {path}: {exc.strerror or exc}") from None
        try:
            os.chmod(self.home, 0o700)
        except OSError as exc:
            raise ProfileError(f"cannot make {self.home} private: {exc.strerror or exc}") from None
        return self


def in_vigil_home(path: Path, profile: Profile) -> bool:
    """Whether ``path`` lies inside a vigil home (this profile's, or the root one holding every
    profile) and outside ``profile``'s workspaces: no place for the agent to work."""
    # Compared as strings: Path objects and their parents cost most of the 100 µs this took
    # every turn (bench/gateway_load.py --py-spy); the real paths are still resolved each time.
    real = os.path.realpath(path)
    homes = (os.path.realpath(vigil_home()), os.path.realpath(profile.home))
    if not any(_within(real, home) or real == home for home in homes):
        return False
    return not _within(real, os.path.realpath(profile.workspaces_dir))


def _within(path: str, folder: str) -> bool:
    """Whether the resolved ``path`` lies below the resolved ``folder`` (not ``folder`` itself)."""
    return path.startswith(folder if folder.endswith(os.sep) else folder + os.sep) and path != folder


def _kind_of(path: Path) -> str:
    """What is in the way at ``path``, in words."""
    try:
        mode = path.lstat().st_mode
    except OSError:
        return "not a directory"
    if stat.S_ISLNK(mode):
        try:
            path.stat()
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return "a symbolic link loop"
            return "a symbolic link to nothing"
        return "a symbolic link to something that is not a directory"
    return describe_kind(mode) if not stat.S_ISREG(mode) else "a regular file"


def validate_name(name: str) -> str:
    """Return ``name`` if it is a valid profile name, else raise ``ProfileError``."""
    if not _NAME_RE.match(name):
        raise ProfileError(
            f"invalid profile name '{name}': use lowercase letters, digits, '-' and '_' "
            "(at most 64, starting with a letter or digit)"
        )
    return name


def profile_path(name: str | None) -> Profile:
    """The profile called ``name`` (``None`` or ``default`` = the root home); may not exist yet."""
    root = vigil_home()
    if name is None or name == DEFAULT_PROFILE:
        return Profile(DEFAULT_PROFILE, root)
    return Profile(validate_name(name), root / "profiles" / name)


def get_profile(name: str | None) -> Profile:
    """The profile to use for a command: the default one is created on first use, a named one
    must have been created with ``vigil profile create``."""
    profile = profile_path(name)
    if profile.name == DEFAULT_PROFILE:
        return profile.ensure()
    if not profile.exists:
        raise ProfileError(
            f"profile '{profile.name}' does not exist (create it with `vigil profile create {profile.name}`)"
        )
    return profile


def list_profiles() -> list[Profile]:
    """The default profile followed by every named profile, sorted by name."""
    root = vigil_home()
    profiles = [Profile(DEFAULT_PROFILE, root)]
    named = root / "profiles"
    if named.is_dir():
        for child in sorted(named.iterdir()):
            if child.is_dir() and _NAME_RE.match(child.name) and child.name != DEFAULT_PROFILE:
                profiles.append(Profile(child.name, child))
    return profiles


def create_profile(name: str) -> Profile:
    """Create a named profile; raise ``ProfileError`` if it exists or the name is invalid."""
    if name == DEFAULT_PROFILE:
        raise ProfileError("'default' is the root profile; it always exists")
    profile = profile_path(name)
    if profile.exists:
        raise ProfileError(f"profile '{name}' already exists at {profile.home}")
    profile.home.parent.mkdir(parents=True, exist_ok=True)
    return profile.ensure()


def delete_profile(name: str) -> Profile:
    """Delete a named profile and everything in it (its sessions too)."""
    import shutil  # only here: every command imports this module, `vigil --help` included

    if name == DEFAULT_PROFILE:
        raise ProfileError("the default profile cannot be deleted")
    profile = profile_path(name)
    if not profile.exists:
        raise ProfileError(f"profile '{name}' does not exist")
    shutil.rmtree(profile.home)
    return profile
