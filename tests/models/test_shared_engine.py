"""One shared local engine per profile: started on first use, reused by the next vigil process
(whose first turn then hits the prompt cache), stopped once idle."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from tests.cli.helpers import run_vigil
from tests.models.local_model import needs_local_model, smollm2_path
from vigil.models.shared_engine import STATE_FILE, healthy, read_state

pytestmark = needs_local_model


def _configure(home: Path, idle_stop: float) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "SOUL.md").write_text("You are Pip, a terse assistant.\n")
    (home / "config.yaml").write_text(
        "model:\n"
        "  provider: local\n"
        f"  path: {smollm2_path()}\n"
        "  max_output_tokens: 8\n"
        "  temperature: 0.0\n"
        "  local: {context: 2048, threads: 2, shared: true, idle_stop: %s}\n"
        "tools:\n  enabled: []\n" % idle_stop
    )


def _usage(home: Path) -> dict:
    result = run_vigil("usage", "--json", home=home)
    return json.loads(result.stdout)["sessions"][0]


def test_a_second_vigil_process_reuses_the_engine_and_its_cache(vigil_home: Path) -> None:
    _configure(vigil_home, idle_stop=4)
    first = run_vigil("chat", "-q", "Say hi.", home=vigil_home, timeout=180)
    assert first.returncode in (0, 2), first.stderr  # 2: the answer was cut at max_output_tokens
    state = read_state(vigil_home)
    assert state is not None and healthy(state["base_url"])
    assert (vigil_home / STATE_FILE).stat().st_mode & 0o077 == 0  # it holds the engine's key
    try:
        second = run_vigil("chat", "-c", "-q", "Again.", home=vigil_home, timeout=180)
        assert second.returncode in (0, 2), second.stderr
        assert read_state(vigil_home)["pid"] == state["pid"]  # the same engine served both
        usage = _usage(vigil_home)
        # the second process's one request read the first one's prompt from the engine's cache
        assert usage["cache_read_tokens"] > usage["input_tokens"] / 3

        deadline = time.monotonic() + 60
        while (vigil_home / STATE_FILE).exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not (vigil_home / STATE_FILE).exists(), "the idle engine did not stop"
        assert not healthy(state["base_url"])
        assert "No shared local engine is running" in run_vigil("models", "engine", home=vigil_home).stdout
    finally:
        try:
            os.kill(state["pid"], signal.SIGTERM)
        except ProcessLookupError:
            pass
