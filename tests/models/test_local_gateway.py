"""The gateway runs a local model in its own process: two web turns, the second from cache."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx

from tests.gateway.process import free_port, history, new_conversation, send, wait_for
from tests.models.local_model import needs_local_model, smollm2_path
from vigil.store import SQLiteStore

pytestmark = needs_local_model


def test_the_gateway_answers_with_the_in_process_engine_and_hits_its_cache(vigil_home: Path) -> None:
    vigil_home.mkdir(parents=True)
    (vigil_home / "SOUL.md").write_text("You are Pip, a terse assistant.\n")
    (vigil_home / "config.yaml").write_text(
        f"model:\n  provider: local\n  path: {smollm2_path()}\n  max_output_tokens: 4\n  temperature: 0.0\n"
        "  local: {context: 2048, threads: 2}\ntools:\n  enabled: []\n"
    )
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    gateway = subprocess.Popen(
        [sys.executable, "-m", "vigil.cli.main", "gateway", "run", "--web-port", str(port)],
        env={**env, "VIGIL_HOME": str(vigil_home)}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _up(url), timeout=60, what="the gateway")
        token = (vigil_home / "gateway.token").read_text().strip()
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as api:
            conversation = new_conversation(api)
            for answered, text in enumerate(("Hello.", "Again."), start=1):
                send(api, conversation, text)
                wait_for(lambda: _answers(api, conversation) >= answered, timeout=120, what="an answer")
    finally:
        gateway.terminate()
        output = gateway.communicate(timeout=60)[0]
    assert gateway.returncode == 0, output
    store = SQLiteStore(vigil_home / "state.db")
    try:
        session = store.get_session(store.resolve_session(conversation))
        assert session.model == "SmolLM2-135M-Instruct.Q4_1.gguf"
        answers = [m for m in store.get_messages(session.id) if m.role == "assistant"]
        assert answers[0].usage.cache_read_tokens == 0
        assert answers[1].usage.cache_read_tokens > answers[0].usage.input_tokens / 2
    finally:
        store.close()


def _up(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def _answers(api: httpx.Client, conversation: str) -> int:
    return sum(1 for m in history(api, conversation)["messages"] if m["role"] == "assistant")


