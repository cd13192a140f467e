"""The gateway: whether one runs for this profile (its lock and status record, as ``vigil
gateway status`` reads them), and the web chat's login token file is private."""

from __future__ import annotations

import os
import shlex
import stat
import time
from typing import Any, cast

from vigil.doctor.result import CheckResult, Subject, ok, problem, warning

AREA = "gateway"
START = "start it with `vigil gateway run`, or as a service: `vigil gateway install`"


def check_gateway(subject: Subject) -> list[CheckResult]:
    return [_running(subject), _token(subject)]


class _MetaReader:
    """The store methods ``read_status`` and ``read_workers`` call, answered without opening
    the store."""

    def __init__(self, subject: Subject) -> None:
        self.subject = subject

    def get_meta(self, key: str) -> Any:
        from vigil.doctor.store import read_meta

        return read_meta(self.subject, key)

    def list_meta(self, prefix: str) -> Any:
        from vigil.doctor.store import list_meta

        return list_meta(self.subject, prefix)


def _workers(subject: Subject) -> CheckResult | None:
    """With several gateways on a shared store: which of them run (``None``: none ever did)."""
    from vigil.gateway.cluster.workers import read_workers

    try:
        workers = read_workers(cast(Any, _MetaReader(subject)), now=time.time())
    except Exception:  # the store cannot be read (said above)
        return None
    if not workers:
        return None
    live = [w for w in workers if w.live]
    gone = [w for w in workers if not w.live and w.state == "gone"]
    named = "; ".join(f"{w.worker_id[:8]} {w.summary}" for w in live)
    if not live:
        return ok(AREA, "gateway", f"no worker runs on the shared store ({len(gone)} gone); {START}")
    text = f"{len(live)} worker(s) running on the shared store: {named}"
    if gone:
        return warning(
            AREA, "gateway", f"{text}; {len(gone)} gone without stopping (killed, or their machine was lost)",
            "vigil gateway status   (the others took their work over; a gone record is pruned after an hour)",
        )
    return ok(AREA, "gateway", text)


def _running(subject: Subject) -> CheckResult:
    shared = _workers(subject)
    if shared is not None:
        return shared
    from vigil.gateway.lock import LockUnavailable, holder
    from vigil.gateway.status import read_status

    try:
        locked = holder(subject.profile)
    except LockUnavailable as exc:
        return warning(
            AREA,
            "gateway",
            str(exc),
            f"move it aside: mv {shlex.quote(str(subject.profile.home / 'gateway.lock'))} /tmp/",
        )
    try:
        found = read_status(cast(Any, _MetaReader(subject)), subject.profile, now=time.time())
    except Exception as exc:  # the store cannot be read (said above): the lock alone says who runs
        if locked is None:
            return ok(AREA, "gateway", f"not running ({START})")
        return ok(
            AREA, "gateway", f"pid {locked.pid} holds the gateway lock (its status record cannot be read: {exc})"
        )
    if found.state == "unresponsive":
        return warning(
            AREA,
            "gateway",
            found.summary,
            f"vigil gateway status; if it stays so: kill {found.pid}" if found.pid else "vigil gateway status",
        )
    if not found.running:
        return ok(AREA, "gateway", f"{found.summary}; {START}")
    return ok(AREA, "gateway", found.summary)


def _token(subject: Subject) -> CheckResult:
    from vigil.gateway.token import token_path

    path = token_path(subject.profile)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return ok(AREA, "web token", "none yet (the gateway creates it, 0600, on its first start)")
    except OSError as exc:
        return problem(AREA, "web token", f"{path} cannot be checked: {exc.strerror or exc}")
    shown = shlex.quote(str(path))
    if not stat.S_ISREG(info.st_mode):
        return problem(
            AREA, "web token", f"{path} is not a regular file", f"rm {shown}   (the gateway makes a new one)"
        )
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        return problem(
            AREA,
            "web token",
            f"{path} is readable by other users (mode {mode:04o}): they could log into the web chat",
            f"chmod 600 {shown}   (or rm {shown} and restart the gateway for a new token, logging every browser out)",
        )
    if info.st_uid != os.getuid():
        return warning(
            AREA,
            "web token",
            f"{path} belongs to another user (uid {info.st_uid})",
            f"sudo chown {os.getuid()} {shown}",
        )
    return ok(AREA, "web token", f"private (mode {mode:04o})")
