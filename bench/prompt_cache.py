"""Prompt-cache efficiency over a scripted day: measured share of prompt tokens read from the
provider's prefix cache, against the ideal share for the same workload.

The workload replays one conversation through the real ``Agent`` (SQLite store in a temporary
``VIGIL_HOME``, real OpenAI and Anthropic clients over HTTP) against the fake model server,
whose simulated prefix cache has a TTL driven by a fake clock shared with the agent, so idle
gaps cost no wall time. One simulated day (from 08:00 UTC; 9.5 hours at the default 120 turns,
seed 7): bursts of turns separated by idle
gaps shorter and longer than the TTL, turns with tool calls (one and two tool rounds), a
process restart at midday (a new agent reading prompt and history back from the store), two
edits of SOUL.md each followed one turn later by a profile-wide refresh request, and exactly
one automatic compression (the context window is sized for it).

The ideal, per request, from what the workload did rather than from the bytes vigil sent
(a request must miss what the provider cannot have seen within the TTL):

* the first request of the day, and the summary call (a prompt never sent before): all of it;
* the first request after an idle gap >= TTL: all of it (every cached prefix has expired,
  the cache keeps an entry for TTL seconds after its last write or read);
* the first request after a refresh, when a file changed since the prompt was built: all of
  it (SOUL.md opens the system prompt, and the tools + system block is the first thing in
  every request). An edit without a refresh costs nothing: the stored prompt is replayed;
* the continuation's first request after the compression: the summary and the kept turns
  (they now follow a summary, so they sit at new positions). Its system prompt is rebuilt
  from the files; when no file changed since the parent's prompt was built, on the same UTC
  date, the tools + system block is byte-identical and may be read from cache (the strict
  reading "the whole fresh prompt misses" is printed alongside);
* every other request: only what it adds beyond the previous request of the conversation
  (the new user message, or the assistant's tool call and its results).

A call is attributed to the first cause that applies, in that order (a refresh turn after a
long idle gap counts as an expiry); the workload puts the edits, refreshes and the restart
inside bursts so that each cause shows on its own.

Anthropic caches only at ``cache_control`` breakpoints, so its ideal additionally needs a
breakpoint at the end of every request: then the previous request's whole prompt is a
written prefix and the ideal read equals OpenAI's, and everything else is a cache write (the
ideal write share is printed too). Sizes come from the fake's tokenizer (UTF-8 bytes / 4 per
canonical-JSON segment). The harness runs the same workload (same texts, same gaps) for both
API styles.

    .venv/bin/python bench/prompt_cache.py [--turns 120] [--seed 7]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from vigil.agent.compression import SUMMARY_REQUEST_MARKER
from vigil.agent.events import Compressed, PromptRebuilt, TurnEvent
from vigil.agent.turn import Agent
from vigil.clock import FakeClock
from vigil.config.settings import AgentSettings, ModelSettings, Settings, ToolSettings
from vigil.models.factory import build_client
from vigil.models.retry import RetryPolicy
from vigil.profiles import Profile
from vigil.prompt.epoch import EVENTS
from vigil.prompt.maintenance import request_refresh
from vigil.store import SQLiteStore
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.records import RecordedRequest
from vigil.testing.scripting import Reply, ToolCallSpec

TTL = 300.0
"""The simulated provider's cache lifetime (Anthropic's default 5 minutes)."""
DAY_START = 1_800_000_000.0
"""2027-01-15 08:00:00 UTC."""
TOOLS = ["read_file", "skills_list", "skill_view"]
WINDOW_PER_TURN = 16_000 / 120
"""The context window grows with the day's length (16 000 tokens for 120 turns) so that the
conversation is compressed once, about two thirds into the day, whatever ``--turns`` says."""
THRESHOLD = 0.75
EXPECTED_REBUILDS = {"new session": 2, "profile refresh": 2}
"""The root session's first build, the continuation's first build, and two refreshes."""

WORDS = (
    "garden cedar beds soil drip irrigation budget order supplier invoice schedule weekend "
    "compost tomatoes basil shade fence north south water pressure timer valve hose mulch "
    "deadline estimate receipt spreadsheet column total rain forecast frost seedlings tray"
).split()

SOULS = [
    "You are Juniper, a calm and practical assistant for home and garden projects.\n"
    "You keep answers short, cite the files you read, and ask before deleting anything.\n",
    "You are Juniper, a calm and practical assistant for home and garden projects.\n"
    "You keep answers short, cite the files you read, and ask before deleting anything.\n"
    "Always give quantities in metric units.\n",
    "You are Juniper, a cheerful and practical assistant for home and garden projects.\n"
    "You keep answers short, cite the files you read, and ask before deleting anything.\n"
    "Always give quantities in metric units, and costs in euros.\n",
]
SKILLS = {
    "garden-planner": (
        "Plan beds, plants and watering for a garden plot",
        "Steps: measure, sketch, list plants by sun.\n" * 6,
    ),
    "expense-log": (
        "Record household expenses into the monthly spreadsheet",
        "Steps: read receipt, add a row, total.\n" * 6,
    ),
}
NOTES = "\n".join(
    f"- {i:02d}: bed {i % 4 + 1}, {WORDS[i % len(WORDS)]} and {WORDS[(i * 7) % len(WORDS)]}"
    for i in range(40)
)


# -- the workload ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    index: int
    gap: float
    """Idle seconds before this turn."""
    text: str
    answer: str
    tool_rounds: tuple[tuple[ToolCallSpec, ...], ...] = ()
    edit_soul: int | None = None
    """Write SOULS[n] to SOUL.md before this turn."""
    refresh: bool = False
    """Record a profile-wide refresh request before this turn."""
    restart: bool = False
    """Replace the agent and its client before this turn (a process restart)."""


def sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def plan(turns: int, seed: int) -> list[Turn]:
    """The same day for every provider: texts, tools, gaps and maintenance events."""
    rng = random.Random(seed)
    bursts = _burst_sizes(turns, rng)
    long_gaps = [rng.uniform(12 * 60, 100 * 60) for _ in bursts[1:]]
    gaps: list[float] = []
    for b, size in enumerate(bursts):
        for k in range(size):
            if k == 0:
                gaps.append(0.0 if b == 0 else long_gaps[b - 1])
            else:
                gaps.append(rng.uniform(15, 240))
    # Two gaps just around the TTL inside bursts: 5 s under it (cache alive) and 10 s over it.
    gaps[17], gaps[53] = TTL - 5, TTL + 10
    # Maintenance lands inside a burst, so that its cost is not hidden by an expired cache.
    edit1, edit2 = _in_burst(gaps, round(turns * 0.25), 2), _in_burst(gaps, round(turns * 0.85), 2)
    restart = _in_burst(gaps, round(turns * 0.50), 1)
    tools = {
        5: ((ToolCallSpec("skills_list", {}),),),
        14: ((ToolCallSpec("read_file", {"path": "notes.md"}),),),
        23: ((ToolCallSpec("skill_view", {"name": "garden-planner"}),),),
        31: ((ToolCallSpec("read_file", {"path": "notes.md", "offset": 5, "limit": 10}),),),
        44: ((ToolCallSpec("skills_list", {}),), (ToolCallSpec("skill_view", {"name": "expense-log"}),)),
        58: ((ToolCallSpec("read_file", {"path": "notes.md"}), ToolCallSpec("skills_list", {})),),
        67: ((ToolCallSpec("read_file", {"path": "notes.md", "limit": 8}),),),
        79: ((ToolCallSpec("skill_view", {"name": "garden-planner"}),),),
        88: ((ToolCallSpec("read_file", {"path": "notes.md", "offset": 20}),),),
        97: ((ToolCallSpec("skills_list", {}),), (ToolCallSpec("read_file", {"path": "notes.md", "limit": 5}),)),
        104: ((ToolCallSpec("skill_view", {"name": "expense-log"}),),),
        113: ((ToolCallSpec("read_file", {"path": "notes.md", "offset": 30}),),),
    }
    out = []
    for i in range(turns):
        text = f"[t{i:03d}] " + " ".join(sentence(rng, rng.randint(6, 16)) for _ in range(rng.randint(1, 3)))
        answer = " ".join(sentence(rng, rng.randint(8, 20)) for _ in range(rng.randint(1, 4)))
        out.append(
            Turn(
                index=i,
                gap=gaps[i],
                text=text,
                answer=answer,
                tool_rounds=tools.get(i, ()),
                edit_soul=1 if i == edit1 else 2 if i == edit2 else None,
                refresh=i in (edit1 + 1, edit2 + 1),
                restart=i == restart,
            )
        )
    return out


def _in_burst(gaps: list[float], start: int, span: int) -> int:
    """The first turn from ``start`` such that it and the ``span - 1`` turns after it follow
    idle gaps shorter than the TTL."""
    index = start
    while any(g >= TTL for g in gaps[index : index + span]):
        index += 1
    return index


def _burst_sizes(turns: int, rng: random.Random) -> list[int]:
    sizes: list[int] = []
    while sum(sizes) < turns:
        sizes.append(min(rng.randint(8, 18), turns - sum(sizes)))
    return sizes


# -- one run ------------------------------------------------------------------------------------


@dataclass
class Sample:
    """One model call with its ideal."""

    turn: int
    at: float
    record: RecordedRequest
    cause: str
    """Why the ideal misses what it misses (``new suffix`` for an ordinary extension)."""
    ideal_read: int
    strict_read: int
    """The ideal under the strict reading: a continuation's whole first prompt misses."""


@dataclass
class Run:
    provider: str
    samples: list[Sample] = field(default_factory=list)
    rebuilds: Counter[str] = field(default_factory=Counter)
    rebuild_turns: list[tuple[int, str]] = field(default_factory=list)
    stored_events: list[tuple[str, list[str]]] = field(default_factory=list)
    compressions: list[tuple[int, str, str]] = field(default_factory=list)
    sessions: int = 0
    seconds: float = 0.0


def setup_home(root: Path, workdir: Path) -> Profile:
    profile = Profile("default", root).ensure()
    profile.soul_path.write_text(SOULS[0])
    profile.user_path.write_text("Name: Sam. Lives in Utrecht. Vegetable garden, 40 m2.\n")
    profile.memory_path.write_text("- Raised beds are 1.2 m wide.\n- Drip timer set to 06:30.\n")
    for name, (description, body) in SKILLS.items():
        folder = profile.skills_dir / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n\n{body}")
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "AGENTS.md").write_text("Project: the garden plan. Notes are in notes.md.\n")
    (workdir / "notes.md").write_text(NOTES + "\n")
    return profile


async def _no_sleep(_seconds: float) -> None:
    return None


def context_window(turns: int) -> int:
    return max(1024, round(WINDOW_PER_TURN * turns))


async def run_provider(provider: str, turns: list[Turn], root: Path) -> Run:
    clock = FakeClock(DAY_START)
    os.environ["VIGIL_HOME"] = str(root / "home")
    profile = setup_home(root / "home", root / "work")
    run = Run(provider)
    with FakeModelServer(cache_ttl=TTL, clock=clock.now) as server:
        base = server.base_url if provider == "openai" else server.anthropic_base_url
        settings = Settings(
            model=ModelSettings(
                provider=provider, name="fake-model", base_url=base, api_key=server.api_key,
                timeout=10, context_window=context_window(len(turns)),
            ),
            agent=AgentSettings(compression_threshold=THRESHOLD),
            tools=ToolSettings(enabled=TOOLS),
        )
        store = SQLiteStore(profile.state_db)

        async def new_agent() -> Agent:
            retry = RetryPolicy(max_retries=2, sleep=_no_sleep)
            client = await build_client(settings.model, {}, retry=retry)
            return Agent(
                store=store, client=client, profile=profile, settings=settings, cwd=root / "work", clock=clock
            )

        summary = (
            "## Goal\nPlan the garden beds and keep the expense log.\n## Decisions\nRaised beds, drip "
            "irrigation on a timer.\n## Progress\nNotes read, skills listed, layout drafted.\n"
            "## Open items\nOrder soil and the valve.\n## Relevant files\nnotes.md: bed notes."
        )
        server.rule(contains=SUMMARY_REQUEST_MARKER, reply=summary)
        agent = await new_agent()
        session_id = (await agent.new_session()).id
        # What the ideal knows, from the workload alone (never from what vigil sent):
        prev: RecordedRequest | None = None  # the conversation's previous model call
        prev_at = 0.0
        files_version = 0  # bumped by every SOUL.md edit
        built_version = 0  # the files version the conversation's current prompt was built from
        conversation_day = _day(clock.now())  # the date the prompt names: the conversation's start
        started = time.perf_counter()
        for turn in turns:
            clock.set_sync(clock.now() + turn.gap)
            if turn.restart:
                await agent.client.aclose()
                agent = await new_agent()
            if turn.edit_soul is not None:
                profile.soul_path.write_text(SOULS[turn.edit_soul])
                files_version += 1
            if turn.refresh:
                other = SQLiteStore(profile.state_db)  # as `vigil sessions refresh-prompts` would
                try:
                    request_refresh(other)
                finally:
                    other.close()
            for round_ in turn.tool_rounds:
                server.queue(Reply.tool_calls(*round_))
            server.set_default_reply(turn.answer)
            events: list[TurnEvent] = []
            before = len(server.requests)
            result = await agent.run_turn(session_id, turn.text, on_event=events.append)
            session_id = result.session_id
            compressed = [e for e in events if isinstance(e, Compressed)]
            for reason in (e.reason for e in events if isinstance(e, PromptRebuilt)):
                run.rebuilds[reason] += 1
                run.rebuild_turns.append((turn.index, reason))
            for event in compressed:
                run.compressions.append((turn.index, event.parent_id, event.child_id))

            now = clock.now()
            first = True
            for record in server.requests[before:]:
                if record.status != 200:
                    raise RuntimeError(f"turn {turn.index}: the fake model answered {record.status}")
                if SUMMARY_REQUEST_MARKER in record.last_user_text:
                    run.samples.append(Sample(turn.index, now, record, "summary call", 0, 0))
                    continue
                stale = built_version != files_version  # a rebuild now reads other files
                if prev is None:
                    cause, ideal, strict = "first request", 0, 0
                elif not first:
                    cause, ideal, strict = "new suffix", prev.prompt_tokens, prev.prompt_tokens
                elif now - prev_at >= TTL:
                    cause, ideal, strict = "TTL expired", 0, 0
                elif compressed:
                    # A fresh build; tools are pinned, so only the files and the date can differ.
                    same = not stale and conversation_day == _day(now)
                    cause, ideal, strict = "continuation", record.segment_tokens[0] if same else 0, 0
                elif turn.refresh and stale:
                    cause, ideal, strict = "refresh", 0, 0
                else:
                    cause, ideal, strict = "new suffix", prev.prompt_tokens, prev.prompt_tokens
                run.samples.append(Sample(turn.index, now, record, cause, ideal, strict))
                prev, prev_at, first = record, now, False
            if compressed:
                conversation_day = _day(now)
            if turn.refresh or compressed:
                built_version = files_version
        run.seconds = time.perf_counter() - started
        sessions = store.list_sessions()
        run.sessions = len(sessions)
        for session in sorted(sessions, key=lambda s: s.started_at):
            reasons_stored = [e["reason"] for e in session.model_config.get(EVENTS) or []]
            run.stored_events.append((session.id, reasons_stored))
        await agent.client.aclose()
        store.close()
    return run


def _day(at: float) -> str:
    return datetime.fromtimestamp(at, timezone.utc).strftime("%Y-%m-%d")


# -- report -------------------------------------------------------------------------------------


def pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:6.2f}%" if whole else "   n/a"


def first_difference(a: RecordedRequest, b: RecordedRequest) -> str:
    """Where ``b`` stops extending ``a``, the previous request of the conversation."""
    for k, (x, y) in enumerate(zip(a.segments, b.segments)):
        if x != y:
            where = "tools+system" if k == 0 else f"message {k}"
            at = next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
            lo = max(0, at - 30)
            return (f"vs the previous call, segment {k} ({where}) differs at byte {at}: "
                    f"{x[lo:at + 40]!r} -> {y[lo:at + 40]!r}")
    if len(b.segments) < len(a.segments):
        return "the call is shorter than the previous one"
    return "it extends the previous call byte for byte"


def report(run: Run) -> tuple[str, str]:
    s = run.samples
    prompt = sum(x.record.prompt_tokens for x in s)
    read = sum(x.record.cached_tokens for x in s)
    written = sum(x.record.cache_write_tokens for x in s)
    ideal = sum(x.ideal_read for x in s)
    strict = sum(x.strict_read for x in s)
    print(f"\n== {run.provider} ==  ({len(s)} model calls, {run.seconds:.1f} s wall)")
    print(f"  prompt tokens sent          {prompt:>10,}")
    print(f"  read from cache: measured   {read:>10,}  {pct(read, prompt)} of prompt tokens")
    print(f"  read from cache: ideal      {ideal:>10,}  {pct(ideal, prompt)}")
    print(f"  (strict ideal: continuation's whole first prompt misses: {pct(strict, prompt).strip()})")
    if run.provider == "anthropic":
        print(f"  written to cache: measured  {written:>10,}  {pct(written, prompt)}"
              f"   ideal {pct(prompt - ideal, prompt).strip()} (everything not read, at a breakpoint)")
        print(f"  uncached (neither)          {prompt - read - written:>10,}  {pct(prompt - read - written, prompt)}")
    misses: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    for x in s:
        misses[x.cause] += x.record.prompt_tokens - x.ideal_read
        counts[x.cause] += 1
    print("  tokens the ideal must miss, by cause:")
    for cause in ("first request", "TTL expired", "refresh", "continuation", "summary call", "new suffix"):
        print(f"    {cause:<14} {counts[cause]:>4} calls {misses[cause]:>9,} tokens  {pct(misses[cause], prompt)}")

    print(f"  prompt rebuilds (PromptRebuilt events): {dict(run.rebuilds)}  at turns {run.rebuild_turns}")
    for session_id, reasons in run.stored_events:
        print(f"    stored prompt_events of session {session_id[:8]}: {reasons}")
    stored = Counter(r for _, reasons in run.stored_events for r in reasons)
    rebuild_ok = run.rebuilds == Counter(EXPECTED_REBUILDS) and stored == Counter(EXPECTED_REBUILDS)
    print(f"  rebuilds expected {EXPECTED_REBUILDS} (1 new session + 2 refreshes + 1 continuation): "
          f"{'as expected' if rebuild_ok else 'MISMATCH'}")

    below = [x for x in s if x.record.cached_tokens < x.ideal_read]
    above = [x for x in s if x.record.cached_tokens > x.ideal_read]
    if not below and not above:
        verdict = f"equal to the ideal ({pct(read, prompt).strip()} of prompt tokens read from cache)"
    else:
        gap = read - ideal
        verdict = (f"differs from the ideal by {gap:+,} tokens net ({100 * gap / prompt:+.2f} points): "
                   f"{len(below)} call(s) read less than ideal, {len(above)} more")
        by_index = {x.record.index: x for x in s}
        for x in (below + above)[:8]:
            previous = next((by_index[i].record for i in range(x.record.index - 1, -1, -1)
                             if i in by_index and by_index[i].cause != "summary call"), None)
            why = first_difference(previous, x.record) if previous is not None else ""
            print(f"    turn {x.turn:>3} call {x.record.index:>3} ({x.cause}): read {x.record.cached_tokens:,},"
                  f" ideal {x.ideal_read:,}; {why}")
        if len(below) + len(above) > 8:
            print(f"    ... and {len(below) + len(above) - 8} more")
    print(f"  verdict: {verdict}")
    total = sum(run.rebuilds.values())
    rebuilds = f"as expected ({total})" if rebuild_ok else f"MISMATCH ({dict(run.rebuilds)})"
    return verdict, rebuilds


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=120, help="user turns in the day (>= 100)")
    parser.add_argument("--seed", type=int, default=7, help="seed of the texts and idle gaps")
    args = parser.parse_args()
    if args.turns < 100:
        parser.error("the workload's events are placed for at least 100 turns")
    turns = plan(args.turns, args.seed)
    day_seconds = sum(t.gap for t in turns)
    long_gaps = sum(1 for t in turns if t.gap >= TTL)
    short_gaps = sum(1 for t in turns[1:] if t.gap < TTL)
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"SQLite {sqlite3.sqlite_version}")
    print(f"workload: {len(turns)} turns over {day_seconds / 3600:.1f} simulated hours from 08:00 UTC "
          f"(fake clock); {short_gaps} idle gaps under the cache TTL of {TTL:.0f} s, {long_gaps} at or over it; "
          f"{sum(1 for t in turns if t.tool_rounds)} turns with tool calls "
          f"({sum(len(t.tool_rounds) for t in turns)} tool rounds); SOUL.md edited before turns "
          f"{[t.index for t in turns if t.edit_soul]}, refresh-prompts before turns "
          f"{[t.index for t in turns if t.refresh]}; a process restart before turn "
          f"{[t.index for t in turns if t.restart][0]}; compression at "
          f"{THRESHOLD:.0%} of a {context_window(len(turns)):,}-token window")
    print("ideal: a call must miss only what the provider cannot have seen within the TTL "
          "(see the module docstring); share = cached prompt tokens / all prompt tokens")
    verdicts: dict[str, tuple[str, str]] = {}
    for provider in ("openai", "anthropic"):
        with tempfile.TemporaryDirectory(prefix=f"vigil-bench-{provider}-") as tmp:
            run = await run_provider(provider, turns, Path(tmp))
        if len(run.compressions) != 1:
            print(f"workload broken: {len(run.compressions)} compressions with {provider} (expected exactly 1); "
                  f"adjust WINDOW_PER_TURN", file=sys.stderr)
            return 1
        turn, parent, child = run.compressions[0]
        print(f"\n{provider}: compressed once, before turn {turn} ({parent[:8]} -> {child[:8]}); "
              f"{run.sessions} sessions in the store")
        verdicts[provider] = report(run)
    print()
    for provider, (verdict, rebuilds) in verdicts.items():
        print(f"verdict {provider:<9}: {verdict}; prompt rebuilds {rebuilds}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
