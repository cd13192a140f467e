"""config.yaml against hostile or mistaken input: credentials in URLs, store locations, tool
names, YAML that PyYAML lets through, and numbers that are not numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.helpers import run_cli, run_vigil
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply
from vigil.config.tool_names import BUILTIN_TOOL_NAMES
from vigil.tools.registry import ALL_TOOL_NAMES

SECRETS = ("hunter2", "SECRETKEY", "T0KEN")


def _no_secret(*texts: str) -> None:
    for text in texts:
        for secret in SECRETS:
            assert secret not in text, f"{secret!r} leaked in: {text[:500]}"


def _configure(*pairs: tuple[str, str]) -> None:
    for key, value in pairs:
        result = run_cli("config", "set", key, value)
        assert result.exit_code == 0, result.output


# -- item 2: credentials in model.base_url -------------------------------------------------


def test_config_show_and_get_mask_url_credentials(vigil_home: Path) -> None:
    url = "http://bob:hunter2@models.example:8080/v1?api-key=SECRETKEY&x=1"
    set_result = run_cli("config", "set", "model.base_url", url)
    assert set_result.exit_code == 0
    shown = run_cli("config", "show").output
    as_json = json.loads(run_cli("config", "show", "--json").output)
    got = run_cli("config", "get", "model.base_url").output
    _no_secret(set_result.output, shown, json.dumps(as_json), got)
    # What is not secret stays readable, so the user can tell which endpoint is configured.
    assert got.strip() == "http://bob:***@models.example:8080/v1?api-key=***&x=1"
    assert as_json["model"]["base_url"] == got.strip()
    # The file itself keeps the real value: masking is for display only.
    assert url in (vigil_home / "config.yaml").read_text()


def test_store_url_password_is_masked_too(vigil_home: Path) -> None:
    _configure(("store.url", "postgresql://vigil:hunter2@db.example/vigil"))
    assert run_cli("config", "get", "store.url").output.strip() == "postgresql://vigil:***@db.example/vigil"
    _no_secret(run_cli("config", "show").output)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_errors_from_an_unreachable_endpoint_do_not_print_the_credentials(
    vigil_home: Path, provider: str
) -> None:
    _configure(
        ("model.provider", provider),
        ("model.base_url", "http://bob:hunter2@127.0.0.1:1/v1?api-key=SECRETKEY&token=T0KEN"),
        ("model.name", "m"),
        ("model.api_key", "k"),
        ("model.max_retries", "0"),
    )
    result = run_vigil("chat", "-q", "hi", home=vigil_home)
    assert result.returncode == 1
    assert "cannot reach the model endpoint http://bob:***@127.0.0.1:1/v1" in result.stderr
    _no_secret(result.stdout, result.stderr)


def test_errors_from_a_failing_endpoint_do_not_print_the_credentials(
    fake_model: FakeModelServer, vigil_home: Path
) -> None:
    env = {"OPENAI_API_KEY": fake_model.api_key}
    _configure(("model.name", "m"), ("model.max_retries", "0"))
    # The user name and password in the URL reach the server as basic auth: it refuses them.
    _configure(("model.base_url", fake_model.base_url.replace("http://", "http://bob:hunter2@")))
    denied = run_vigil("chat", "-q", "hi", home=vigil_home, env=env)
    assert denied.returncode == 1 and "rejected the API key" in denied.stderr
    assert "http://bob:***@127.0.0.1" in denied.stderr
    # A key in the query string spoils the SDK's paths: the server answers 404.
    _configure(("model.base_url", fake_model.base_url + "?api-key=SECRETKEY"))
    refused = run_vigil("chat", "-q", "hi", home=vigil_home, env=env)
    assert refused.returncode == 1 and "HTTP 404" in refused.stderr and "api-key=***" in refused.stderr
    # A provider message that quotes a URL with credentials is masked as well.
    _configure(("model.base_url", fake_model.base_url))
    fake_model.queue(Reply.error(500, "upstream http://bob:hunter2@internal/v1?token=T0KEN broke"))
    failed = run_vigil("chat", "-q", "hi", home=vigil_home, env=env)
    assert failed.returncode == 1 and "failed (HTTP 500)" in failed.stderr
    assert "upstream http://bob:***@internal/v1?token=*** broke" in failed.stderr
    _no_secret(denied.stdout, denied.stderr, refused.stdout, refused.stderr, failed.stdout, failed.stderr)


def test_a_failed_cron_run_record_holds_no_credentials(vigil_home: Path) -> None:
    _configure(
        ("model.base_url", "http://bob:hunter2@127.0.0.1:1/v1?api-key=SECRETKEY"),
        ("model.name", "m"),
        ("model.api_key", "k"),
        ("model.max_retries", "0"),
    )
    assert run_cli("cron", "add", "j", "-s", "every 1h", "--prompt", "p").exit_code == 0
    ran = run_vigil("cron", "run", "j", home=vigil_home)
    _no_secret(ran.stdout, ran.stderr)
    runs = json.loads(run_cli("cron", "runs", "j", "--json").output)
    assert [r["status"] for r in runs] == ["failed"]
    assert "cannot reach the model endpoint http://bob:***@127.0.0.1:1" in runs[0]["error"]
    jobs = run_cli("cron", "list", "--json").output
    _no_secret(json.dumps(runs), jobs)
    for stored in vigil_home.glob("state.db*"):
        raw = stored.read_bytes()
        assert b"hunter2" not in raw and b"SECRETKEY" not in raw, stored.name


# -- item 8: store.url ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "value", ["mysql://x/y", "relative/state.db", "state.db", "sqlite://relative.db", "sqlite:///", "http://x/y"]
)
def test_store_url_refuses_what_is_not_postgres_or_an_absolute_path(
    vigil_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.chdir(tmp_path)
    refused = run_cli("config", "set", "store.url", value)
    assert refused.exit_code == 1
    assert "postgresql://" in refused.output and "sqlite:///" in refused.output
    assert not (vigil_home / "config.yaml").exists()
    # The same value written by hand is refused at load, before anything is created.
    (vigil_home / "config.yaml").write_text(f"store:\n  url: '{value}'\n")
    listed = run_cli("sessions", "list")
    assert listed.exit_code == 1 and "config.yaml:2: store.url" in listed.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vigil-home"]  # no ./mysql:/x/y
    (vigil_home / "config.yaml").unlink()


def test_store_url_accepts_absolute_tilde_and_sqlite_urls(
    vigil_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    for value, expected in (
        (f"sqlite://{tmp_path}/a.db", tmp_path / "a.db"),
        (str(tmp_path / "b.db"), tmp_path / "b.db"),
        ("~/c.db", tmp_path / "c.db"),
    ):
        _configure(("store.url", value))
        assert run_cli("sessions", "list").exit_code == 0
        assert expected.is_file(), value


# -- item 9: tools.enabled -----------------------------------------------------------------


def test_unknown_tool_names_are_refused_at_set_and_at_load(vigil_home: Path) -> None:
    refused = run_cli("config", "set", "tools.enabled", "[terminal, teleport]")
    assert refused.exit_code == 1
    assert "unknown tool 'teleport'" in refused.output and "known tools: terminal, read_file" in refused.output
    assert not (vigil_home / "config.yaml").exists()
    (vigil_home / "config.yaml").write_text("tools:\n  enabled:\n    - memory\n    - teleport\n")
    loaded = run_cli("chat", "-q", "hi")
    assert loaded.exit_code == 1
    assert "config.yaml:4: tools.enabled.1: unknown tool 'teleport'" in loaded.output
    assert "teleport" in loaded.output and "known tools" in loaded.output


def test_the_config_layer_knows_the_same_tools_as_the_registry() -> None:
    assert set(BUILTIN_TOOL_NAMES) == set(ALL_TOOL_NAMES)


# -- item 12: YAML -------------------------------------------------------------------------


def test_a_duplicate_key_is_refused_at_load_with_its_line(vigil_home: Path) -> None:
    path = vigil_home / "config.yaml"
    vigil_home.mkdir(parents=True, exist_ok=True)
    path.write_text("model:\n  name: a\nagent:\n  max_iterations: 3\nmodel:\n  name: b\n")
    before = path.read_bytes()
    for args in (("config", "show"), ("config", "set", "model.name", "c"), ("sessions", "list")):
        result = run_cli(*args)
        assert result.exit_code == 1, args
        assert f"{path}:5: invalid YAML: duplicate key 'model' (first on line 1)" in result.output
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    "text",
    [
        "a: " + "[" * 50_000 + "]" * 50_000 + "\n",
        "a: " + "{b: " * 50_000 + "1" + "}" * 50_000 + "\n",
        "".join("- " for _ in range(50_000)) + "x\n",
    ],
    ids=["flow-sequences", "flow-mappings", "block-sequences"],
)
def test_deep_nesting_is_refused_at_load(vigil_home: Path, text: str) -> None:
    vigil_home.mkdir(parents=True, exist_ok=True)
    (vigil_home / "config.yaml").write_text(text)
    result = run_vigil("config", "show", home=vigil_home)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "config.yaml:1: invalid YAML: nested deeper than 64 levels" in result.stderr


def test_an_alias_bomb_is_refused(vigil_home: Path) -> None:
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for name, prev in zip("bcdefghi", "abcdefgh"):
        lines.append(f"{name}: &{name} [{', '.join(['*' + prev] * 9)}]")
    vigil_home.mkdir(parents=True, exist_ok=True)
    (vigil_home / "config.yaml").write_text("\n".join(lines) + "\n")
    result = run_vigil("config", "show", home=vigil_home, timeout=30)
    assert result.returncode == 1 and "expands to more than 10,000 values" in result.stderr


# -- item 13: numbers ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "limit"),
    [
        ("model.timeout", ".inf", "at most 86,400"),
        ("model.timeout", ".nan", "at most 86,400"),
        ("model.timeout", "9" * 5000, "at most 100"),
        ("model.temperature", "true", "from 0 to 2"),
        ("model.max_retries", "false", "from 0 to 10"),
        ("model.max_retries", "2.0", "from 0 to 10"),
        ("model.context_window", "9" * 30, "to 100,000,000"),
        ("model.max_output_tokens", "0", "from 1 to 10,000,000"),
        ("agent.max_iterations", "1000000", "from 1 to 500"),
        ("agent.compression_threshold", "1", "below 1.0"),
        ("tools.terminal.timeout", "0", "above 0 and at most 86,400"),
        ("tools.terminal.output_cap", "10000000000", "to 10,000,000"),
        ("prompt.max_file_chars", "99999999", "to 1,000,000"),
        ("tools.terminal.network", "1", "valid boolean"),
        ("model.max_retries", "'3'", "from 0 to 10"),
        ("model.max_retries", "١٥", "from 0 to 10"),
    ],
)
def test_numbers_are_typed_and_bounded_with_the_limit_named(
    vigil_home: Path, key: str, value: str, limit: str
) -> None:
    result = run_cli("config", "set", key, value)
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: {key}: ") and limit in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (vigil_home / "config.yaml").exists()


def test_a_huge_number_written_by_hand_is_refused_at_load(vigil_home: Path) -> None:
    vigil_home.mkdir(parents=True, exist_ok=True)
    (vigil_home / "config.yaml").write_text("model:\n  timeout: " + "9" * 5000 + "\n")
    result = run_vigil("config", "show", home=vigil_home)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "config.yaml:2: invalid YAML: a number written with 5,000 characters" in result.stderr


@pytest.mark.parametrize(("key", "value"), [
    ("model.name", '"\\ud800"'), ("tools.enabled", '[terminal, "\\udfff"]'), ("slack.allow", '["U1\\ud800"]'),
])
def test_a_lone_surrogate_is_not_text_and_is_refused(vigil_home: Path, key: str, value: str) -> None:
    """YAML can write one (``"\\ud800"``), but no file, request or terminal can take it."""
    result = run_cli("config", "set", key, value)
    assert result.exit_code == 1 and "unable to parse raw data as a unicode string" in result.output
    assert not (vigil_home / "config.yaml").exists()
    vigil_home.mkdir(parents=True, exist_ok=True)
    section, name = key.split(".")
    (vigil_home / "config.yaml").write_text(f"{section}:\n  {name}: {value}\n")
    shown = run_vigil("config", "show", home=vigil_home)
    assert shown.returncode == 1 and "Traceback" not in shown.stderr
    assert f"config.yaml:2: {key}" in shown.stderr and "unicode string" in shown.stderr


def test_sensible_numbers_are_still_accepted(vigil_home: Path) -> None:
    _configure(
        ("model.timeout", "600"),
        ("model.temperature", "0"),
        ("model.context_window", "200000"),
        ("agent.compression_threshold", "0.5"),
        ("tools.terminal.timeout", "30.5"),
    )
    shown = json.loads(run_cli("config", "show", "--json").output)
    assert shown["model"]["timeout"] == 600 and shown["model"]["temperature"] == 0
    assert shown["tools"]["terminal"]["timeout"] == 30.5


@pytest.mark.parametrize(
    ("key", "value", "shown"),
    [
        ("model.temperature", "1.0e-05", "1e-05"),  # ruamel would write 1e-05: text to PyYAML
        ("model.name", "'yes'", "yes"),  # unquoted, YAML 1.1 reads yes as true
        ("model.name", "'1:30'", "1:30"),  # unquoted, YAML 1.1 reads 1:30 as 90
        ("timezone", "'UTC'", "UTC"),
    ],
)
def test_what_config_set_writes_reads_back_the_same(vigil_home: Path, key: str, value: str, shown: str) -> None:
    _configure((key, value))
    assert run_cli("config", "show").exit_code == 0
    assert run_cli("config", "get", key).output.strip() == shown


def test_setting_an_old_key_name_points_at_the_new_one(vigil_home: Path) -> None:
    result = run_cli("config", "set", "tools.terminal_timeout", "5")
    assert result.exit_code == 1 and "old name of tools.terminal.timeout" in result.output
    assert "Traceback" not in result.output and not (vigil_home / "config.yaml").exists()
