"""The bubblewrap sandbox with real commands: what a sandboxed command can and cannot do.

Paths that must be unreachable live outside ``/tmp`` (in ``/var/tmp``): the sandbox's ``/tmp``
is private, so a failing write under the host's ``/tmp`` would prove nothing about read-only-ness.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from tests.tools.sandbox_helpers import outside_tmp_dir, require_sandbox
from vigil.config.settings import Settings
from vigil.profiles import Profile
from vigil.store import SQLiteStore
from vigil.tools import sandbox
from vigil.tools.base import ToolContext, ToolResult

MakeCtx = Callable[..., ToolContext]


async def _approve(tool: str, what: str) -> bool:
    return True


@pytest.fixture
def bwrap() -> str:
    return require_sandbox()


@pytest.fixture
def outside() -> Iterator[Path]:
    """A directory the test process can write to, outside the sandboxed run's workdir and /tmp."""
    yield from outside_tmp_dir("vigil-sandbox-outside-")


@pytest.fixture
def run(make_ctx: MakeCtx, call_tool) -> Callable[..., Any]:
    """``await run(command, mode="unattended", attended=False, **ctx_fields)`` through the tool."""

    async def run_it(command: str, *, mode: str = "unattended", attended: bool = False, network: bool = True,
                     timeout: float | None = None, local_ports: list[int] | None = None,
                     approve: Any = None, **fields: Any) -> ToolResult:
        ctx = make_ctx(approve=approve or (_approve if attended else None), **fields)
        ctx.settings.tools.terminal.sandbox = mode  # type: ignore[assignment]
        ctx.settings.tools.terminal.network = network
        ctx.settings.tools.terminal.local_ports = local_ports or []
        args: dict[str, Any] = {"command": command}
        if timeout is not None:
            args["timeout"] = timeout
        return await call_tool(ctx, "terminal", **args)

    return run_it


def _write_command(target: Path) -> str:
    # Through an interpreter: exactly what the command parser cannot see through.
    return f"python3 -c \"open('{target}', 'w').write('escaped')\""


async def test_a_write_outside_the_workdir_fails_and_says_why(bwrap, run, outside: Path, ctx: ToolContext) -> None:
    target = outside / "escaped.txt"
    result = await run(_write_command(target))
    assert not target.exists()
    assert result.content.startswith("exit code: 1\n")
    assert "Read-only file system" in result.content
    assert result.content.endswith(
        f"[ran in the sandbox: files outside {ctx.cwd.resolve()} and /tmp are read-only, vigil's files and "
        "the user's keys are hidden, this machine's own services are out of reach]"
    )


async def test_the_models_workdir_argument_does_not_make_a_folder_writable(
    bwrap, make_ctx: MakeCtx, call_tool, outside: Path
) -> None:
    ctx = make_ctx()
    result = await call_tool(ctx, "terminal", command="pwd; touch planted", workdir=str(outside))
    assert result.content.startswith(f"exit code: 1\n{outside}\n")  # it started there ...
    assert "Read-only file system" in result.content
    assert not (outside / "planted").exists()  # ... but could not change it


async def test_the_workdir_is_writable_and_a_clean_run_carries_no_note(bwrap, run, ctx: ToolContext) -> None:
    result = await run("mkdir -p out && echo made > out/file.txt && cat out/file.txt")
    assert result.content == "exit code: 0\nmade"
    assert (ctx.cwd / "out" / "file.txt").read_text() == "made\n"


async def test_a_symlinked_workdir_is_writable_through_its_link(bwrap, run, make_ctx: MakeCtx, tmp_path: Path) -> None:
    real = tmp_path / "real-project"
    real.mkdir()
    link = tmp_path / "project-link"
    link.symlink_to(real)
    result = await run("echo x > note.txt && pwd", cwd=link)
    assert result.content.startswith("exit code: 0\n"), result.content
    assert (real / "note.txt").exists()


async def test_tmp_is_private(bwrap, run) -> None:
    name = f"vigil-sandbox-{uuid.uuid4().hex}"
    host_file = Path("/tmp") / f"{name}-host"
    host_file.write_text("host secret")
    try:
        result = await run(f"ls -A /tmp; echo inside > /tmp/{name} && cat /tmp/{name}; cat {host_file}")
        assert "inside" in result.content  # /tmp is writable in there ...
        assert "host secret" not in result.content and host_file.name not in result.content.split("\n")[1]
        assert not (Path("/tmp") / name).exists()  # ... and private: nothing reaches the real /tmp
    finally:
        host_file.unlink()


async def test_a_vigil_installed_under_tmp_keeps_its_own_environment_read_only_inside(
    bwrap, run, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A venv made under /tmp would otherwise vanish under the private /tmp (its python, its MCP servers).
    venv = Path(tempfile.mkdtemp(prefix="vigil-venv-", dir="/tmp"))
    try:
        (venv / "bin").mkdir()
        tool = venv / "bin" / "hello-tool"
        tool.write_text("#!/bin/sh\necho from the venv\n")
        tool.chmod(0o755)
        monkeypatch.setattr(sys, "prefix", str(venv))
        result = await run(f"{tool}; touch {venv}/bin/new && echo WROTE")
        assert "from the venv" in result.content
        assert "WROTE" not in result.content and not (venv / "bin" / "new").exists()  # read-only
    finally:
        shutil.rmtree(venv)


async def test_dev_is_minimal_without_block_devices(bwrap, run) -> None:
    outside_blocks = subprocess.run(["find", "/dev", "-type", "b"], capture_output=True, text=True).stdout.split()
    result = await run("find /dev -type b; echo ---; ls /dev")
    blocks, listing = result.content.split("\n", 1)[1].split("---\n")
    assert blocks.strip() == "", f"block devices visible in the sandbox: {blocks}"
    assert {"null", "zero", "random", "urandom", "tty"} <= set(listing.split())
    if outside_blocks:  # on this machine: /dev/vda, loop devices ...
        assert not set(outside_blocks) & {f"/dev/{name}" for name in listing.split()}


async def test_proc_shows_only_the_sandboxed_processes(bwrap, run) -> None:
    result = await run("ls /proc | grep -c '^[0-9]'")
    count = int(result.content.splitlines()[1])
    assert count <= 5, result.content  # bwrap's init, the shell, ls, grep: not the host's processes


async def test_no_capabilities_even_for_root(bwrap, run, outside: Path) -> None:
    # Root keeping its capabilities inside could simply remount / writable.
    target = outside / "after-remount"
    result = await run(f"grep CapEff /proc/self/status; mount -o remount,rw / 2>/dev/null; touch {target}")
    assert "CapEff:\t0000000000000000" in result.content
    assert not target.exists()


class _Listener:
    """A TCP listener on 127.0.0.1 that counts the connections it accepts."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, socket.timeout):
                continue
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[_Listener]:
    server = _Listener()
    yield server
    server.close()


@pytest.mark.parametrize(
    "network, open_port, reached",
    [(True, False, False), (True, True, True), (False, False, False), (False, True, False)],
    ids=["network-on", "network-on-port-named", "network-off", "network-off-port-named"],
)
async def test_the_hosts_loopback_services_are_out_of_reach_unless_a_port_is_named(
    bwrap, run, listener: _Listener, network: bool, open_port: bool, reached: bool
) -> None:
    """The gateway, the store's database and the model server listen on 127.0.0.1: a sandboxed
    command reaches one only through ``tools.terminal.local_ports`` (and only with a network)."""
    from vigil.tools import sandbox_network

    if network and sandbox_network.network_prefix(()).prefix is None:
        pytest.skip(f"no user-mode networking here: {sandbox_network.network_prefix(()).problem}")
    connect = f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {listener.port}), timeout=5); print('connected')\""
    result = await run(connect, network=network, local_ports=[listener.port] if open_port else [])
    if reached:
        assert result.content == "exit code: 0\nconnected"
    else:
        assert result.content.startswith("exit code: 1\n") and "connected\n" not in result.content
        assert "ConnectionRefusedError" in result.content  # its own loopback, not the host's
        assert result.content.endswith(", no network]") is (not network)
    # The listener's thread counts the accept when the scheduler lets it run: under load that
    # can take a while, so wait for it (when refused, the refusal above already shows the
    # connection never reached the host; the pause only gives a stray one time to show).
    deadline = time.monotonic() + (10 if reached else 0.3)
    while listener.accepted < 1 and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert listener.accepted == (1 if reached else 0)


@pytest.fixture
def outside_homes(outside: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Profile]:
    """A root VIGIL_HOME and a named profile in it, outside /tmp, each with secrets in it."""
    root = outside / "vigil-root"
    monkeypatch.setenv("VIGIL_HOME", str(root))
    Profile("default", root).ensure()
    (root / "config.yaml").write_text("model:\n  api_key: sk-root-secret\n")
    work = Profile("work", root / "profiles" / "work").ensure()
    work.config_path.write_text("model:\n  api_key: sk-work-secret\n")
    work.soul_path.write_text("I am the work agent.\n")
    (work.logs_dir / "gateway.log").write_text("log line with a conversation\n")
    store = SQLiteStore(work.state_db)
    store.close()
    return root, work


async def test_vigil_homes_are_invisible_from_another_workdir(bwrap, run, outside_homes) -> None:
    root, work = outside_homes
    listing = await run(f"ls -A {root}", profile=work)
    assert listing.content == "exit code: 0\n(no output)"  # an empty folder: no profiles, no files
    result = await run(f"cat {root}/config.yaml {work.config_path}; echo x > {work.home}/planted", profile=work)
    assert "secret" not in result.content
    assert "No such file or directory" in result.content
    assert not (work.home / "planted").exists()


async def test_a_working_directory_inside_a_vigil_home_is_refused(bwrap, run, outside_homes) -> None:
    """The profile home holds the login token, the persona and the skills: never a place to
    work (a turn moves such a conversation into a workspace of its own)."""
    root, work = outside_homes
    for place in (work.home, work.skills_dir, root):
        result = await run("echo planted > planted.txt", profile=work, cwd=place)
        assert result.is_error and "lies inside a vigil home" in result.content
        assert not (place / "planted.txt").exists()


async def test_a_workspace_in_the_profile_sees_nothing_else_of_it(bwrap, run, outside_homes) -> None:
    root, work = outside_homes
    (work.home / "gateway.token").write_text("login-token-secret\n")
    workspace = work.workspace("abc123")
    result = await run(
        f"echo ok > made.txt; ls -A {work.home}; ls -A {work.workspaces_dir}; cat {work.home}/gateway.token "
        f"{work.config_path} {work.soul_path}; echo evil > {work.soul_path}; mkdir -p {work.skills_dir}/evil",
        profile=work, cwd=workspace,
    )
    assert (workspace / "made.txt").read_text() == "ok\n"
    lines = result.content.split("\n")
    assert lines[1:3] == ["workspaces", "abc123"]  # only the path down to the workspace exists
    assert "secret" not in result.content and "I am the work agent" not in result.content
    assert work.soul_path.read_text() == "I am the work agent.\n"
    assert not (work.skills_dir / "evil").exists()


async def test_a_session_database_outside_the_homes_is_unreadable(bwrap, run, outside: Path) -> None:
    path = outside / "elsewhere" / "sessions.db"
    path.parent.mkdir()
    store = SQLiteStore(path)
    try:
        result = await run(f"head -c 16 {path} | od -c | head -1", store=store)
    finally:
        store.close()
    assert "S   Q   L   i   t   e" not in result.content
    assert "Permission denied" in result.content


async def test_root_as_workdir_stays_read_only(bwrap, run, outside: Path) -> None:
    target = outside / "from-root"
    result = await run(f"touch {target}", cwd=Path("/"))
    assert not target.exists()
    assert "[ran in the sandbox: files outside /tmp are read-only," in result.content


def _marker_alive(marker: str) -> bool:
    """Whether a process named ``marker`` (by ``exec -a``) runs; not one that merely mentions it."""
    found = subprocess.run(["pgrep", "-f", f"^{marker}"], capture_output=True, text=True)
    return found.returncode == 0


async def _wait_for(predicate: Callable[[], bool], what: str, limit: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while not predicate():
        assert loop.time() < deadline, f"gave up waiting: {what}"
        await asyncio.sleep(0.05)


async def test_a_timeout_kills_the_whole_sandboxed_process_tree(bwrap, run) -> None:
    marker = f"vigil-sandbox-marker-{uuid.uuid4().hex}"
    # `exec -a` names the background sleep after the marker, so pgrep finds exactly it.
    task = asyncio.ensure_future(run(f"(exec -a {marker} sleep 600) & echo started; sleep 60", timeout=1.5))
    await _wait_for(lambda: _marker_alive(marker) or task.done(), "the background process to start")
    assert _marker_alive(marker)
    result = await task
    assert result.is_error and "timed out after 1.5s" in result.content and "started" in result.content
    assert "[ran in the sandbox:" in result.content
    await _wait_for(lambda: not _marker_alive(marker), "the background process to die")


async def test_background_processes_end_with_the_command(bwrap, run) -> None:
    marker = f"vigil-sandbox-marker-{uuid.uuid4().hex}"
    result = await run(f"(exec -a {marker} sleep 600) & echo started")
    assert result.content == "exit code: 0\nstarted"
    await _wait_for(lambda: not _marker_alive(marker), "the background process to die")


@pytest.mark.parametrize(
    ("mode", "attended", "sandboxed"),
    [
        ("unattended", False, True),
        ("unattended", True, False),
        ("always", True, True),
        ("always", False, True),
        ("never", False, False),
        ("never", True, False),
    ],
)
async def test_the_mode_decides_who_runs_sandboxed(
    bwrap, run, outside: Path, mode: str, attended: bool, sandboxed: bool
) -> None:
    async def decline(tool: str, what: str) -> bool:
        return False

    target = outside / "written"
    result = await run(_write_command(target), mode=mode, approve=decline if attended else None)
    assert target.exists() is not sandboxed, result.content
    assert ("[ran in the sandbox:" in result.content) is sandboxed


def test_the_default_mode_sandboxes_every_run() -> None:
    assert Settings().tools.terminal.sandbox == "always"
    assert Settings().tools.terminal.network is True
    assert Settings().tools.terminal.local_ports == []


@pytest.fixture
def broken_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``bwrap`` first on PATH that fails like one without user namespaces."""
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    fake = bin_dir / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return fake


async def test_a_bwrap_that_cannot_run_stops_unattended_commands_and_says_why(
    broken_bwrap: Path, run, outside: Path
) -> None:
    found = sandbox.status()
    assert not found.available
    assert found.problem == "bwrap: setting up uid map: Permission denied"
    assert found.warning("always") == (
        f"warning: bubblewrap ({broken_bwrap}) does not work here: bwrap: setting up uid map: Permission "
        "denied, so there is no sandbox: attended channels ask before every terminal command and unattended runs (cron jobs, "
        "heartbeats, -q without a terminal) cannot run terminal commands"
    )
    target = outside / "written"
    result = await run(_write_command(target))
    assert result.is_error and result.content.startswith("refused: commands of unattended runs only run in the sandbox")
    assert not target.exists()


async def test_without_a_sandbox_an_attended_run_asks_before_every_command(broken_bwrap: Path, run, outside: Path) -> None:
    asked: list[str] = []

    async def answer(tool: str, what: str) -> bool:
        asked.append(what)
        return len(asked) == 1  # yes to the first, no to the second

    target = outside / "written"
    first = await run(_write_command(target), mode="always", approve=answer)
    assert first.content == "exit code: 0\n(no output)" and target.exists()
    second = await run("echo harmless", mode="always", approve=answer)
    assert second.is_error and second.content.startswith("the user declined")
    assert all(what.startswith("run outside the sandbox (it is not available: bubblewrap") for what in asked)
    assert len(asked) == 2


async def test_a_missing_bwrap_is_named_with_the_install_hint(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    found = sandbox.status()
    assert found.bwrap is None and not found.available
    assert "bubblewrap (bwrap) is not installed (apt-get install bubblewrap)" in found.line()
    assert found.warning("never") is None


def test_the_probe_runs_once_per_process(bwrap: str, tmp_path: Path) -> None:
    """A ``bwrap`` wrapper counts its calls: asking three times probes once."""
    bin_dir = tmp_path / "countingbin"
    bin_dir.mkdir()
    counter = tmp_path / "calls"
    wrapper = bin_dir / "bwrap"
    wrapper.write_text(f"#!/bin/sh\necho call >> {counter}\nexec {bwrap} \"$@\"\n")
    wrapper.chmod(0o755)
    code = "import vigil.tools.sandbox as s; print([s.status().available for _ in range(3)])"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.strip() == "[True, True, True]"
    assert counter.read_text().splitlines() == ["call"]


async def test_run_is_private_so_its_sockets_are_out_of_reach(bwrap, run) -> None:
    """D-Bus, systemd, docker and database sockets live in /run; a read-only mount would not stop
    a connect(), so the sandbox gets an empty /run of its own."""
    host = {entry.name for entry in Path("/run").iterdir()}
    result = await run("ls -A /run; echo ---; cat /etc/resolv.conf > /dev/null && echo resolv-ok")
    inside, rest = result.content.split("\n", 1)[1].split("---\n")
    resolv = Path(os.path.realpath("/etc/resolv.conf"))
    kept = {resolv.relative_to("/run").parts[0]} if resolv.is_relative_to("/run") else set()
    assert set(inside.split()) <= kept, f"host entries of /run visible: {set(inside.split()) & host}"
    if Path("/etc/resolv.conf").exists():
        assert "resolv-ok" in rest  # name resolution still configured


def test_killing_vigil_itself_takes_the_sandboxed_tree_with_it(bwrap: str, tmp_path: Path) -> None:
    """Even a SIGKILL of the vigil process (no chance to clean up) ends the sandboxed command
    and its children: bubblewrap dies with its parent and takes the sandbox with it."""
    marker = f"vigil-sandbox-marker-{uuid.uuid4().hex}"
    code = (
        "import asyncio, sys\n"
        "from pathlib import Path\n"
        "from vigil.tools.sandbox import Sandbox\n"
        "from vigil.tools.boundary import Boundary\n"
        "from vigil.tools.terminal import run_command\n"
        "work, marker = Path(sys.argv[1]), sys.argv[2]\n"
        "asyncio.run(run_command(f'(exec -a {marker} sleep 600) & sleep 600', work, 600, 1000,"
        f" sandbox=Sandbox({bwrap!r}, Boundary(work, (), ()), network=False)))\n"
    )
    vigil = subprocess.Popen([sys.executable, "-c", code, str(tmp_path), marker])
    try:
        asyncio.run(_wait_for(lambda: _marker_alive(marker), "the sandboxed command to start"))
        vigil.kill()
        vigil.wait(timeout=10)
        asyncio.run(_wait_for(lambda: not _marker_alive(marker), "the sandboxed command to die"))
    finally:
        if vigil.poll() is None:
            vigil.kill()


def test_the_status_line_for_a_later_status_command(bwrap: str) -> None:
    found = sandbox.status()
    assert found.line("unattended") == (
        f"sandbox: unattended terminal commands run in bubblewrap ({bwrap}); attended ones run unsandboxed "
        "(tools.terminal.sandbox is unattended)"
    )
    assert found.line("always") == f"sandbox: every terminal command runs in bubblewrap ({bwrap})"
    assert found.line("never").startswith("sandbox: off")
    assert found.warning("unattended") is None


async def test_an_attended_command_the_sandbox_blocked_runs_outside_once_approved(bwrap, run, outside: Path) -> None:
    """Approval is for leaving the sandbox: the write fails inside, the person is asked, and
    only their yes runs it again outside."""
    asked: list[str] = []

    async def approve(tool: str, what: str) -> bool:
        asked.append(what)
        return True

    target = outside / "approved.txt"
    command = f"echo hi > {target}"
    result = await run(command, mode="always", approve=approve)
    assert asked == [
        f"run outside the sandbox a command that failed inside it (it writes outside its workspace): {command}"
    ]
    assert target.read_text() == "hi\n"
    assert "Read-only file system" in result.content
    assert result.content.endswith("run again outside the sandbox, approved by the user:\nexit code: 0\n(no output)")


async def test_an_approved_dangerous_command_runs_outside_the_sandbox(bwrap, run, outside: Path) -> None:
    asked: list[str] = []

    async def approve(tool: str, what: str) -> bool:
        asked.append(what)
        return True

    victim = outside / "tree"
    (victim / "sub").mkdir(parents=True)
    victim.chmod(0o755)
    result = await run("chmod -R 700 ..", mode="always", approve=approve, cwd=victim / "sub")
    assert len(asked) == 1 and asked[0].startswith("run a command that ") and ", outside the sandbox: " in asked[0]
    assert result.content == "exit code: 0\n(no output)"  # outside: no read-only file system
    assert victim.stat().st_mode & 0o777 == 0o700


async def test_a_vigil_home_not_made_yet_is_no_obstacle(bwrap, run, outside: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh machine has no ~/.vigil until a command makes one: nothing to hide there, and no
    mount point to make on the read-only root."""
    monkeypatch.setenv("VIGIL_HOME", str(outside / "not-made-yet"))
    result = await run("echo fine")
    assert result.content == "exit code: 0\nfine"
