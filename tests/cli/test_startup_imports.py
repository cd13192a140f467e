"""Each command imports only what it uses: a fresh ``vigil`` process is inspected after it ran.

A command that pulls in the model SDKs, the REPL toolkit or the HTTP server stack pays for
them on every start; these tests pin which modules stay out (behaviour, not a timing: the
figures are in ``bench/startup.py``).
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

from tests.cli.helpers import run_cli
from vigil.cli.lazy import LazyCommand
from vigil.cli.main import COMMANDS
from vigil.testing.fake_model import FakeModelServer

# Runs `vigil ARGS` like the console script, then writes its exit code and sys.modules.
# PRELOAD_ALL_COMMANDS=1 imports every command first.
_RUNNER = """
import json, os, sys
out = sys.argv.pop(1)
sys.argv[0] = "vigil"
from vigil.cli.main import cli, main
if os.environ.get("PRELOAD_ALL_COMMANDS"):  # as the CLI was before commands loaded lazily
    for command in cli.commands.values():
        for _sub in getattr(command, "commands", {}).values():
            pass
try:
    main()
    code = 0
except SystemExit as exc:
    code = exc.code
with open(out, "w") as fh:
    json.dump({"code": code, "modules": sorted(sys.modules)}, fh)
"""

SDKS = ("openai", "anthropic")
HEAVY = (*SDKS, "prompt_toolkit", "starlette", "uvicorn", "psycopg", "psycopg_pool", "httpx", "httpx2")
"""Never needed by a command that neither calls a model, reads a line nor serves HTTP."""

CHAT_MACHINERY = ("vigil.agent", "vigil.models", "vigil.tools", "vigil.gateway", "vigil.testing")
"""vigil's own turn machinery: only chat, cron run/tick and the gateway need it."""


class Ran:
    def __init__(self, proc: subprocess.CompletedProcess[str], report: dict) -> None:
        self.stdout, self.stderr = proc.stdout, proc.stderr
        self.code = report["code"]
        self.modules: list[str] = report["modules"]

    def loaded(self, *packages: str) -> list[str]:
        """The loaded modules that are one of ``packages`` or inside one."""
        return [m for m in self.modules if any(m == p or m.startswith(p + ".") for p in packages)]


def run_fresh(*args: str, home: Path, tmp_path: Path, env: dict[str, str] | None = None) -> Ran:
    out = tmp_path / "modules.json"
    out.unlink(missing_ok=True)
    proc = subprocess.run(
        [sys.executable, "-c", _RUNNER, str(out), *args],
        env={**os.environ, "VIGIL_HOME": str(home), "COLUMNS": "80", **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.exists(), proc.stderr
    return Ran(proc, json.loads(out.read_text()))


def _chat_env(server: FakeModelServer, provider: str) -> dict[str, str]:
    if provider == "openai":
        return {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": server.api_key}
    return {
        "ANTHROPIC_BASE_URL": server.anthropic_base_url,
        "ANTHROPIC_API_KEY": server.api_key,
        "VIGIL_MODEL": server.models[0],
    }


def test_help_imports_neither_the_commands_nor_their_libraries(vigil_home: Path, tmp_path: Path) -> None:
    ran = run_fresh("--help", home=vigil_home, tmp_path=tmp_path)
    assert ran.code == 0, ran.stderr
    for name in COMMANDS:
        assert f"\n  {name} " in ran.stdout
    assert ran.loaded(*HEAVY, "pydantic", "yaml", "ruamel", "rich", "sqlite3") == []
    assert [m for m in ran.loaded("vigil.cli") if m.endswith("_cmd")] == []


def test_listing_commands_import_only_what_they_use(
    fake_model_env: FakeModelServer, vigil_home: Path, tmp_path: Path
) -> None:
    fake_model_env.queue("Noted.")
    assert run_cli("chat", "-q", "remember the milk").exit_code == 0
    assert run_cli("cron", "add", "digest", "-s", "every 2h", "--prompt", "Summarise the news").exit_code == 0
    session_id = json.loads(run_cli("sessions", "list", "--json").output)[0]["id"]
    assert run_cli("heartbeat", "set", "--session", session_id, "15m", "check on the milk").exit_code == 0

    listings = {
        ("sessions", "list"): session_id[:12],
        ("config", "show"): "model",
        ("heartbeat", "list"): "15m",
        ("cron", "list"): "digest",
        ("profile", "list"): "default",
    }
    for args, shows in listings.items():
        ran = run_fresh(*args, home=vigil_home, tmp_path=tmp_path)
        assert ran.code == 0, (args, ran.stderr)
        assert shows in ran.stdout, (args, ran.stdout)
        assert ran.loaded(*HEAVY) == [], args
        assert ran.loaded(*CHAT_MACHINERY) == [], args
        assert ran.loaded("pydantic") == [], args
    assert run_fresh("sessions", "list", home=vigil_home, tmp_path=tmp_path).loaded("vigil.prompt", "ruamel") == []


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_one_shot_chat_imports_only_what_its_provider_needs(
    provider: str, fake_model: FakeModelServer, vigil_home: Path, tmp_path: Path
) -> None:
    # OpenAI-compatible endpoints are spoken to over httpx alone (vigil.models.openai_wire):
    # the official SDK's import costs more than the rest of a one-shot chat.
    fake_model.queue("Hello there.")
    ran = run_fresh("chat", "-q", "hello", home=vigil_home, tmp_path=tmp_path, env=_chat_env(fake_model, provider))
    assert ran.code == 0, ran.stderr
    assert ran.stdout == "Hello there.\n"
    sdks = {"openai": (), "anthropic": ("anthropic",)}[provider]
    assert [m for m in ran.loaded(*SDKS) if m.split(".")[0] not in sdks] == []
    if sdks:
        assert ran.loaded(*sdks)
    assert ran.loaded("prompt_toolkit", "starlette", "uvicorn", "psycopg", "psycopg_pool") == []
    # Nor what a one-shot answer without a tool call never runs: the slash commands, the
    # command parser of the approval gate, httpx's own command-line client; nor, in a profile
    # without a config.yaml or skills, a YAML parser; nor the gateway's tables, the heartbeat
    # records, or pydantic (the config has its own schema; the Anthropic SDK uses pydantic).
    assert ran.loaded("vigil.runtime.commands", "vigil.tools.shell", "vigil.tools.danger", "pygments") == []
    assert ran.loaded("yaml", "vigil.store.gateway.gateway_tables", "vigil.store.gateway.pairing_tables",
                      "vigil.schedule.heartbeat") == []
    if provider == "openai":
        assert ran.loaded("pydantic", "pydantic_core") == []


def test_profile_option_works_on_commands_loaded_on_demand(vigil_home: Path, tmp_path: Path) -> None:
    assert run_cli("profile", "create", "work").exit_code == 0
    for args in (("sessions", "repair-prompts", "--dry-run"), ("cron", "list"), ("heartbeat", "list")):
        unknown = run_fresh(*args, "-p", "nosuch", home=vigil_home, tmp_path=tmp_path)
        assert unknown.code == 1 and "nosuch" in unknown.stderr, (args, unknown.stderr)
        assert "Traceback" not in unknown.stderr
        known = run_fresh(*args, "-p", "work", home=vigil_home, tmp_path=tmp_path)
        assert known.code == 0, (args, known.stderr)
    assert (vigil_home / "profiles" / "work" / "state.db").exists()


def test_help_lists_each_command_as_the_command_itself_describes_it(vigil_home: Path, tmp_path: Path) -> None:
    for args in (("--help",), ("sessions", "--help")):
        lazy = run_fresh(*args, home=vigil_home, tmp_path=tmp_path)
        eager = run_fresh(*args, home=vigil_home, tmp_path=tmp_path, env={"PRELOAD_ALL_COMMANDS": "1"})
        assert lazy.code == eager.code == 0
        assert lazy.stdout == eager.stdout
        assert eager.loaded("vigil.cli.chat_cmd", "vigil.cli.prompts_cmd") and not lazy.loaded("vigil.cli.chat_cmd")


def _table(commands: dict[str, LazyCommand]) -> list[tuple[str, LazyCommand]]:
    rows = list(commands.items())
    for spec in commands.values():
        rows += _table(dict(spec.subcommands))
    return rows


def test_the_command_table_names_every_command_of_every_module() -> None:
    for module_name in {spec.module for spec in COMMANDS.values()}:
        exported = getattr(importlib.import_module(module_name), "COMMANDS", None)
        if exported is not None:  # a module offering several top-level commands lists them
            listed = {name for name, spec in COMMANDS.items() if spec.module == module_name}
            missing = f"{module_name}.COMMANDS and COMMANDS in vigil/cli/main.py must name the same commands"
            assert {command.name for command in exported} == listed, missing
    for name, spec in _table(COMMANDS):
        command = spec.load()
        assert command.name == name
        for limit in (30, 45, 80, 1000):
            assert click.Command(name, help=spec.summary).get_short_help_str(limit) == command.get_short_help_str(limit)
