"""One gateway per profile: the lock held by one process refuses another, and dies with its holder."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from vigil.gateway.lock import GatewayRunning, LockUnavailable, acquire, holder, is_locked, lock_path
from vigil.profiles import create_profile, profile_path

HOLDER = r"""
import subprocess, sys
from vigil.gateway.lock import acquire
from vigil.profiles import profile_path
lock = acquire(profile_path(sys.argv[1] or None))
if len(sys.argv) > 2:  # leave a long-running command behind, sharing every descriptor it may
    child = subprocess.Popen(["sleep", "300"], close_fds=False)
    print(child.pid, flush=True)
print("locked", flush=True)
sys.stdin.read()  # hold the lock until the test closes stdin or kills this process
lock.release()
"""

SECOND = r"""
import sys
from vigil.gateway.lock import GatewayRunning, acquire
from vigil.profiles import profile_path
try:
    acquire(profile_path(sys.argv[1] or None))
except GatewayRunning as exc:
    print(exc)
    sys.exit(7)
print("acquired")
"""


def start_holder(profile: str | None = None, *, leave_child: bool = False) -> tuple[subprocess.Popen[str], int | None]:
    """A process holding the gateway lock of ``profile`` until its stdin closes; and the pid of
    the long-running command it left behind, when asked to."""
    args = [sys.executable, "-c", HOLDER, profile or ""] + (["child"] if leave_child else [])
    process = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    child = int(process.stdout.readline()) if leave_child else None
    assert process.stdout.readline() == "locked\n"
    return process, child


def second_gateway(profile: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SECOND, profile or ""], capture_output=True, text=True, timeout=60
    )


def _kill(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)


def test_a_second_gateway_is_refused_with_who_holds_the_lock_and_nothing_is_written(vigil_home: Path) -> None:
    first, _ = start_holder()
    try:
        path = lock_path(profile_path(None))
        before = path.read_bytes()
        second = second_gateway()
        assert second.returncode == 7, second.stderr
        message = second.stdout.strip()
        assert message.startswith("another gateway is already running for profile 'default'")
        assert f"(pid {first.pid}, since " in message
        assert f"stop it first (kill {first.pid} / systemctl --user stop vigil-gateway.service)" in message
        assert path.read_bytes() == before
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert is_locked(profile_path(None)) == first.pid
    finally:
        first.stdin.close()  # type: ignore[union-attr]
        first.wait(timeout=30)
    assert is_locked(profile_path(None)) is None
    assert second_gateway().stdout == "acquired\n"


def test_a_named_profile_names_its_own_unit_and_does_not_block_another_profile(vigil_home: Path) -> None:
    create_profile("work")
    first, _ = start_holder("work")
    try:
        refused = second_gateway("work")
        assert refused.returncode == 7
        assert "profile 'work'" in refused.stdout and "systemctl --user stop vigil-gateway-work.service" in refused.stdout
        assert second_gateway().stdout == "acquired\n"  # the default profile is another gateway
    finally:
        _kill(first)


def test_the_lock_file_of_a_killed_gateway_does_not_block_the_next_one(vigil_home: Path) -> None:
    first, _ = start_holder()
    _kill(first)
    profile = profile_path(None)
    assert str(first.pid) in lock_path(profile).read_text()  # the dead holder's file is still there
    assert is_locked(profile) is None
    with acquire(profile) as lock:
        assert lock.holder.pid == os.getpid()
        assert is_locked(profile) == os.getpid()
        found = holder(profile)
        assert found is not None and found.started_at is not None
        assert str(os.getpid()) in lock_path(profile).read_text()
    assert is_locked(profile) is None


def test_a_command_left_running_by_a_killed_gateway_does_not_keep_its_lock(vigil_home: Path) -> None:
    first, child = start_holder(leave_child=True)
    assert child is not None
    try:
        _kill(first)
        os.kill(child, 0)  # the command is still running
        assert second_gateway().stdout == "acquired\n"
    finally:
        os.kill(child, signal.SIGKILL)


def test_acquire_narrows_a_wider_lock_file_and_a_release_lets_the_next_one_in(vigil_home: Path) -> None:
    profile = profile_path(None)
    vigil_home.mkdir(parents=True)
    lock_path(profile).write_text("junk that is not a holder\n")
    os.chmod(lock_path(profile), 0o644)
    lock = acquire(profile)
    assert stat.S_IMODE(lock_path(profile).stat().st_mode) == 0o600
    with pytest.raises(GatewayRunning) as refused:
        acquire(profile)  # a second descriptor in the same process is a second gateway too
    assert refused.value.pid == os.getpid()
    lock.release()
    lock.release()
    assert not lock.held
    acquire(profile).release()


def test_asking_who_holds_the_lock_creates_nothing(vigil_home: Path) -> None:
    assert is_locked(profile_path(None)) is None
    assert not vigil_home.exists()


def test_a_lock_path_that_is_not_a_file_is_a_clear_error(vigil_home: Path) -> None:
    profile = profile_path(None)
    lock_path(profile).mkdir(parents=True)
    with pytest.raises(LockUnavailable, match="gateway.lock"):
        acquire(profile)
