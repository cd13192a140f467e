"""This process and the others on this host, as claims in the store name them.

A heartbeat reservation or a cron run is owned by ``host:pid:token`` (:data:`PROCESS_OWNER`
for this process); a lease is held by a host and a pid. Here is what one host can tell about
them without the store: whether a pid on this host still runs. Processes on other hosts are
presumed alive here; :mod:`vigil.schedule.liveness` asks the store's records about them.
"""

from __future__ import annotations

import os
import secrets
import socket

_HOST = socket.gethostname()

PROCESS_OWNER = f"{_HOST}:{os.getpid()}:{secrets.token_hex(4)}"
"""This process as the owner of reservations and runs: ``host:pid:token``."""


def this_host() -> str:
    """The host name this process's claims and leases carry."""
    return _HOST


def pid_running(host: str, pid: int) -> bool:
    """Whether ``pid`` may still run: checked on this host, presumed elsewhere."""
    if host != _HOST or pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def owner_alive(owner: str) -> bool:
    """Whether the process named ``host:pid:token`` may still be running.

    On this host the pid is checked (a pid equal to ours with another token is a dead
    predecessor); owners on other hosts are presumed alive until their reservation is stale
    (:class:`vigil.schedule.liveness.Liveness` asks the store about them instead).
    """
    host, _, rest = owner.partition(":")
    pid_text, _, _token = rest.partition(":")
    if host != _HOST:
        return True
    try:
        pid = int(pid_text)
    except ValueError:
        return False
    if pid == os.getpid():
        return owner == PROCESS_OWNER
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True
