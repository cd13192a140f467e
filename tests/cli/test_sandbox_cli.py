"""The sandbox through the real CLI: unattended runs (`cron run`, `chat -q`) sandbox their
commands end to end, and where bubblewrap cannot run, `cron add`, `gateway run` and
`config set` say so once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
from click.testing import CliRunner

from tests.cli.helpers import run_vigil
from tests.tools.sandbox_helpers import outside_tmp_dir, require_sandbox
from vigil.cli.main import cli
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply, ToolCallSpec

NOTE = "[ran in the sandbox: files outside"


@pytest.fixture
def outside() -> Iterator[Path]:
    yield from outside_tmp_dir("vigil-sandbox-cli-")


@pytest.fixture
def broken_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``bwrap`` first on PATH that fails as it does where user namespaces are disabled."""
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    fake = bin_dir / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return fake


@pytest.fixture
def no_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A PATH on which there is no bwrap (nor anything else vigil needs for these commands)."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def model_env(server: FakeModelServer) -> dict[str, str]:
    return {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": server.api_key}


def _tool_results(home: Path, session_id: str) -> list[str]:
    shown = run_vigil("sessions", "show", session_id, "--json", home=home)
    assert shown.returncode == 0, shown.stderr
    return [m["content"] for m in json.loads(shown.stdout)["messages"] if m["role"] == "tool"]


def _escape_call(target: Path) -> Reply:
    command = f"python3 -c \"open('{target}', 'w').write('escaped')\""
    return Reply.tool_calls(ToolCallSpec("terminal", {"command": command}))


def test_cron_run_sandboxes_the_jobs_commands(fake_model: FakeModelServer, vigil_home: Path, outside: Path) -> None:
    require_sandbox()
    target = outside / "written-by-cron"
    added = run_vigil("cron", "add", "escape", "-s", "every 1h", "--prompt", "write the file", home=vigil_home)
    assert added.returncode == 0, added.stderr
    assert "sandbox" not in added.stderr  # bubblewrap works here: nothing to warn about
    fake_model.queue(_escape_call(target), "The file could not be written.")
    ran = run_vigil("cron", "run", "escape", home=vigil_home, env=model_env(fake_model))
    assert ran.returncode == 0, ran.stderr
    assert not target.exists()
    [record] = json.loads(run_vigil("cron", "runs", "escape", "--json", home=vigil_home).stdout)
    [result] = _tool_results(vigil_home, record["session_id"])
    assert "Read-only file system" in result
    workspace = (vigil_home / "workspaces" / "cron-escape").resolve()
    assert NOTE in result and str(workspace) in result  # the job works in a workspace of its own


def test_chat_q_without_a_terminal_sandboxes_commands(
    fake_model: FakeModelServer, vigil_home: Path, outside: Path
) -> None:
    require_sandbox()
    target = outside / "written-by-chat"
    fake_model.queue(_escape_call(target), "Could not write it.")
    ran = run_vigil("chat", "-q", "write the file", home=vigil_home, env=model_env(fake_model))
    assert ran.returncode == 0, ran.stderr
    assert not target.exists()
    [session] = json.loads(run_vigil("sessions", "list", "--json", home=vigil_home).stdout)
    session_id = session["id"]
    [result] = _tool_results(vigil_home, session_id)
    assert "Read-only file system" in result and NOTE in result


def test_sandbox_never_lets_an_unattended_run_write_anywhere(
    fake_model: FakeModelServer, vigil_home: Path, outside: Path
) -> None:
    target = outside / "written-unsandboxed"
    assert run_vigil("config", "set", "tools.terminal.sandbox", "never", home=vigil_home).returncode == 0
    fake_model.queue(_escape_call(target), "Written.")
    ran = run_vigil("chat", "-q", "write the file", home=vigil_home, env=model_env(fake_model))
    assert ran.returncode == 0, ran.stderr
    assert target.read_text() == "escaped"


def test_cron_add_warns_once_where_bwrap_does_not_work(broken_bwrap: Path) -> None:
    result = invoke("cron", "add", "j", "-s", "every 1h", "--prompt", "p")
    assert result.exit_code == 0
    assert "Added cron job j" in result.stdout
    assert result.stderr.splitlines() == [
        f"vigil cron: warning: bubblewrap ({broken_bwrap}) does not work here: bwrap: No permissions to create "
        "new namespace, so there is no sandbox: attended channels ask before every terminal command and unattended runs (cron jobs, "
        "heartbeats, -q without a terminal) cannot run terminal commands"
    ]
    assert "j" in invoke("cron", "list").stdout  # the job was added all the same
    as_json = invoke("cron", "add", "k", "-s", "every 1h", "--prompt", "p", "--json")
    json.loads(as_json.stdout)  # the warning stays out of the JSON
    assert "does not work here" in as_json.stderr


def test_cron_add_names_the_missing_package(no_bwrap: None) -> None:
    result = invoke("cron", "add", "j", "-s", "every 1h", "--prompt", "p")
    assert result.exit_code == 0
    assert "bubblewrap (bwrap) is not installed (apt-get install bubblewrap)" in result.stderr


def test_no_warning_when_the_sandbox_is_off(broken_bwrap: Path) -> None:
    assert invoke("config", "set", "tools.terminal.sandbox", "never").exit_code == 0
    result = invoke("cron", "add", "j", "-s", "every 1h", "--prompt", "p")
    assert result.exit_code == 0 and result.stderr == ""


def test_no_warning_where_bwrap_works() -> None:
    require_sandbox()
    result = invoke("cron", "add", "j", "-s", "every 1h", "--prompt", "p")
    assert result.exit_code == 0 and result.stderr == ""


@pytest.mark.parametrize(
    ("key", "value", "warns"),
    [
        ("tools.terminal.sandbox", "always", True),
        ("tools.terminal.sandbox", "unattended", True),
        ("tools.terminal.sandbox", "never", False),
        ("tools.terminal.network", "false", True),
        ("tools.terminal.output_cap", "5000", False),
    ],
)
def test_config_set_says_when_the_sandbox_setting_cannot_take_effect(
    no_bwrap: None, vigil_home: Path, key: str, value: str, warns: bool
) -> None:
    result = invoke("config", "set", key, value)
    assert result.exit_code == 0
    assert f"Set {key}" in result.stdout  # stored all the same
    assert ("bubblewrap (bwrap) is not installed" in result.stderr) is warns
    assert invoke("config", "get", key).stdout.strip() == value


def test_gateway_run_announces_the_fallback_once(broken_bwrap: Path, vigil_home: Path) -> None:
    env = {**os.environ, "VIGIL_HOME": str(vigil_home)}
    from tests.gateway.process import free_port

    process = subprocess.Popen([sys.executable, "-m", "vigil.cli.main", "gateway", "run", "--web-port", str(free_port())],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()  # the gateway is up once it has announced itself
        assert "the cron scheduler" in banner
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=15)
    finally:
        if process.poll() is None:
            process.kill()
    warnings = [line for line in err.splitlines() if "sandbox" in line]
    assert warnings == [
        f"vigil gateway: warning: bubblewrap ({broken_bwrap}) does not work here: bwrap: No permissions to create "
        "new namespace, so there is no sandbox: attended channels ask before every terminal command and unattended runs (cron jobs, "
        "heartbeats, -q without a terminal) cannot run terminal commands"
    ]


def test_a_cron_job_cannot_reach_the_keys_to_the_house(fake_model: FakeModelServer, outside: Path) -> None:
    """What a prompt-injected cron job would try: read the web chat's login token, the memory
    and the user's SSH key, plant a persona or a skill, and use the gateway's API on 127.0.0.1.
    The gateway really runs; its home and the user's home lie outside /tmp (the sandbox's /tmp
    is private, which would hide them anyway and prove nothing)."""
    require_sandbox()
    from tests.gateway.process import free_port

    home, user = outside / "vigil", outside / "user"
    (user / ".ssh").mkdir(parents=True)
    (user / ".ssh" / "id_ed25519").write_text("PRIVATE-KEY-MATERIAL\n")
    env = {**model_env(fake_model), "HOME": str(user)}
    assert run_vigil("cron", "add", "probe", "-s", "every 1h", "--prompt", "probe", home=home, env=env).returncode == 0
    (home / "MEMORY.md").write_text("MEMORY-CONTENT\n")
    (home / "SOUL.md").write_text("I am the agent.\n")
    port = free_port()
    gateway = subprocess.Popen(
        [sys.executable, "-m", "vigil.cli.main", "gateway", "run", "--web-port", str(port)],
        env={**os.environ, **env, "VIGIL_HOME": str(home)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert gateway.stdout is not None
        assert "the cron scheduler" in gateway.stdout.readline()  # up, and its token written
        token = (home / "gateway.token").read_text().strip()
        command = (
            f"cat {home}/gateway.token {home}/MEMORY.md ~/.ssh/id_ed25519; echo planted >> {home}/SOUL.md; "
            f"mkdir -p {home}/skills/evil && echo planted > {home}/skills/evil/SKILL.md; "
            f"python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:{port}/healthz', timeout=5).read())\""
        )
        fake_model.queue(Reply.tool_calls(ToolCallSpec("terminal", {"command": command})), "Done.")
        ran = run_vigil("cron", "run", "probe", home=home, env=env)
        assert ran.returncode == 0, ran.stderr
    finally:
        gateway.send_signal(signal.SIGTERM)
        try:
            gateway.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            gateway.kill()
    [record] = json.loads(run_vigil("cron", "runs", "probe", "--json", home=home).stdout)
    [result] = _tool_results(home, record["session_id"])
    assert token not in result and "MEMORY-CONTENT" not in result and "PRIVATE-KEY-MATERIAL" not in result
    assert "Connection refused" in result  # the gateway's port is not reachable from inside
    assert (home / "SOUL.md").read_text() == "I am the agent.\n"
    assert not (home / "skills" / "evil").exists()
