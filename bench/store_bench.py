"""Session store benchmark: appends per second (one writer, and 1, 8, 64 concurrent writers
sharing group commits), history loads, full-text search.

Run: ``.venv/bin/python bench/store_bench.py [--appends N] [--concurrent N] [--history N] [--corpus N]``;
add ``--backend postgres --url postgresql://...`` for the PostgreSQL store (store_bench_postgres.py).
Prints figures and, for each, a ratio against a baseline measured in the same run (plain
sqlite3 doing the bare minimum: a bare SELECT of the same rows for history loads, the single
writer and a commit per INSERT for concurrent appends), so the numbers mean something on a
noisy machine. History loads are also timed on the same rows in the column-per-field layout
of schema 3 with its decoding (before migration 4 packed them), in the issue's history shape
and in the shape the agent writes. ``--only history`` runs just that part.
Nothing here asserts.
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import random
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from contextlib import closing
from functools import partial
from pathlib import Path
from typing import Callable

from vigil.store import MessageRecord, NewMessage, ToolCall
from vigil.store.rows import (
    MESSAGE_COLUMNS,
    MESSAGE_SELECT,
    PACKED_MESSAGE_COLUMNS,
    canonical_json,
    messages_from_rows,
)
from vigil.store.sqlite import SQLiteStore
from vigil.store.sqlite.migrations import migrate
from vigil.usage import Usage

COMMON = (
    "the be to of and a in that have it for not on with he as you do at this but his by from they we say her "
    "she or an will my one all would there their what so up out if about who get which go me when make can like "
    "time no just him know take people into year your good some could them see other than then now look only come "
    "its over think also back after use two how our work first well way even new want because any these give day "
    "most us is was are were been has had did said file error test build deploy server config please thanks "
    "question answer change update run check fix install branch commit review script"
).split()


def vocabulary(rng: random.Random, size: int) -> list[str]:
    """Common English words first (the frequent ones), then made-up technical-looking words."""
    syllables = [
        "ka",
        "lo",
        "mi",
        "ne",
        "tor",
        "vex",
        "qui",
        "dra",
        "sel",
        "pon",
        "rix",
        "gal",
        "mur",
        "fen",
        "zo",
    ]
    made_up: set[str] = set()
    while len(made_up) < size:
        made_up.add("".join(rng.choices(syllables, k=rng.randint(2, 4))))
    return COMMON + sorted(made_up)


def sentence_maker(rng: random.Random, words: list[str]) -> Callable[[int, int], str]:
    weights = [1.0 / (rank + 1) for rank in range(len(words))]  # Zipf-like, as in real text
    cumulative = list(itertools.accumulate(weights))

    def make(low: int, high: int) -> str:
        text = " ".join(rng.choices(words, cum_weights=cumulative, k=rng.randint(low, high)))
        return text[0].upper() + text[1:] + "."

    return make


def median_seconds(fn: Callable[[], object], repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def bench_appends(workdir: Path, count: int, rounds: int, make: Callable[[int, int], str]) -> None:
    texts = [make(5, 60) for _ in range(count)]
    durable = SQLiteStore(workdir / "appends-durable.db")
    fast = SQLiteStore(workdir / "appends-fast.db", durable=False)
    targets = [(store, store.create_session(source="bench").id) for store in (durable, fast)]
    # Baseline: the same commits in plain sqlite3, one INSERT each, no index, counters or FTS.
    bare = sqlite3.connect(workdir / "appends-baseline.db", isolation_level=None)
    bare.execute("PRAGMA journal_mode = WAL")
    bare.execute("PRAGMA synchronous = FULL")
    bare.execute("CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, content TEXT)")

    def append(store: SQLiteStore, session_id: str, batch: list[str]) -> None:
        for text in batch:
            store.append_message(session_id, NewMessage(role="user", content=text, usage=Usage(10, 20, 0, 5)))

    def insert(batch: list[str]) -> None:
        for text in batch:
            bare.execute("BEGIN IMMEDIATE")
            bare.execute("INSERT INTO messages (session_id, content) VALUES ('s', ?)", (text,))
            bare.execute("COMMIT")

    # Interleaved rounds, so that a slow spell of the disk hits every contender alike.
    contenders: list[Callable[[list[str]], None]] = [
        partial(append, *targets[0]),
        partial(append, *targets[1]),
        insert,
    ]
    spent = [0.0] * len(contenders)
    for r in range(rounds):
        batch = texts[r * count // rounds : (r + 1) * count // rounds]
        for i, run in enumerate(contenders):
            started = time.perf_counter()
            run(batch)
            spent[i] += time.perf_counter() - started
    durable.close()
    fast.close()
    bare.close()
    rate_durable, rate_fast, rate_bare = (count / t for t in spent)
    print(f"\nappend, one message per transaction ({count:,} appends each, in {rounds} interleaved rounds)")
    print(f"  store, durable (synchronous=FULL)      {rate_durable:>9,.0f} msg/s")
    print(
        f"  store, durable=False (NORMAL)          {rate_fast:>9,.0f} msg/s   "
        f"x{rate_fast / rate_durable:.2f} the durable rate"
    )
    print(
        f"  baseline: bare sqlite3 INSERT, FULL    {rate_bare:>9,.0f} msg/s   "
        f"the durable store does x{rate_durable / rate_bare:.2f} of it"
    )


def concurrent_appends(
    append: Callable[[int, str], None], writers: int, total: int, texts: list[str]
) -> tuple[float, list[float]]:
    """``writers`` threads appending ``total`` messages between them (each to its own
    conversation); returns messages per second and every append's latency."""
    share = max(1, total // writers)
    latencies: list[float] = []
    lock = threading.Lock()
    barrier = threading.Barrier(writers + 1)

    def work(i: int) -> None:
        mine = []
        barrier.wait()
        for n in range(share):
            started = time.perf_counter()
            append(i, texts[(i * share + n) % len(texts)])
            mine.append(time.perf_counter() - started)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    barrier.wait()
    started = time.perf_counter()
    for t in threads:
        t.join()
    return share * writers / (time.perf_counter() - started), latencies


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def bench_concurrent_appends(workdir: Path, count: int, make: Callable[[int, int], str]) -> None:
    """1, 8, 64 threads of one process appending at once to a durable store, each to its own
    session (as the gateway's conversations do), against the single writer; and, as a
    baseline, bare sqlite3 threads with a connection each, one commit per INSERT."""
    texts = [make(5, 60) for _ in range(500)]
    store = SQLiteStore(workdir / "concurrent.db")
    bare_path = workdir / "concurrent-baseline.db"
    with closing(sqlite3.connect(bare_path, isolation_level=None)) as setup:
        setup.execute("PRAGMA journal_mode = WAL")
        setup.execute("CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, content TEXT)")
    print(f"\nconcurrent appends, durable (synchronous=FULL), ~{count:,} appends per row, each thread its own session")
    single = None
    for writers in (1, 8, 64):
        sessions = [store.create_session(source="bench").id for _ in range(writers)]
        commits, writes = store.group_commit.commits, store.group_commit.writes

        def append(i: int, text: str) -> None:
            store.append_message(sessions[i], NewMessage(role="user", content=text, usage=Usage(10, 20, 0, 5)))

        rate, latencies = concurrent_appends(append, writers, count, texts)
        batch = (store.group_commit.writes - writes) / max(1, store.group_commit.commits - commits)
        single = single or rate
        local = threading.local()

        def insert(i: int, text: str) -> None:
            conn = getattr(local, "conn", None)
            if conn is None:
                conn = local.conn = sqlite3.connect(bare_path, isolation_level=None, timeout=60)
                conn.execute("PRAGMA synchronous = FULL")
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO messages (session_id, content) VALUES ('s', ?)", (text,))
            conn.execute("COMMIT")

        bare_rate, _ = concurrent_appends(insert, writers, count, texts)
        print(
            f"  {writers:>2} writer{'s' if writers > 1 else ' '}  store {rate:>8,.0f} msg/s  "
            f"p50 {percentile(latencies, 0.5) * 1000:6.2f} ms  p99 {percentile(latencies, 0.99) * 1000:6.2f} ms  "
            f"x{rate / single:5.2f} the single writer  ({batch:4.1f} appends per commit)   "
            f"baseline, a commit per INSERT: {bare_rate:>7,.0f} msg/s"
        )
    store.close()


def bench_history_messages(size: int, shape: str, make: Callable[[int, int], str]) -> list[NewMessage]:
    """``size`` messages in one of two shapes. ``bench``: the issue's yardstick, a quarter each
    of user text, assistant text, assistant tool calls with usage, tool results. ``agent``: what
    the agent itself writes, where every assistant message carries usage and a stop reason and
    a failing tool result is flagged."""
    out = []
    for i in range(size):
        kind = i % 4
        usage = Usage(5, 900, 0, 30) if kind == 2 or (shape == "agent" and kind == 1) else Usage()
        meta: dict[str, object] = {}
        if shape == "agent" and kind in (1, 2):
            meta = {"stop_reason": "tool_calls" if kind == 2 else "end_turn"}
        if shape == "agent" and kind == 3 and i % 20 == 3:
            meta = {"is_error": True}
        if kind == 2:
            calls = (ToolCall(id=f"call_{i}", name="terminal", arguments='{"cmd": "ls -la /tmp"}'),)
            out.append(NewMessage(role="assistant", tool_calls=calls, usage=usage, meta=meta))
        elif kind == 3:
            out.append(
                NewMessage(
                    role="tool", content=make(20, 200), tool_call_id=f"call_{i - 1}", tool_name="terminal", meta=meta
                )
            )
        else:
            role = "user" if kind == 0 else "assistant"
            out.append(NewMessage(role=role, content=make(5, 120), usage=usage, meta=meta))
    return out


def old_layout_copy(path: Path, session_id: str, records: list[MessageRecord]) -> sqlite3.Connection:
    """The same history in the schema before messages were packed (version 3, a column per
    field), to time the previous load path against the current one in the same run."""
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, target=3)
    conn.execute(
        "INSERT INTO sessions (id, source, started_at, updated_at) VALUES (?, 'bench', 0, 0)", (session_id,)
    )
    conn.executemany(
        f"INSERT INTO messages ({MESSAGE_COLUMNS}) VALUES ({', '.join('?' * 14)})",
        [
            (
                *r[:5],
                canonical_json([c.as_dict() for c in r.tool_calls]),
                r.tool_call_id,
                r.tool_name,
                r.created_at,
                r.usage.input_tokens,
                r.usage.cache_read_tokens,
                r.usage.cache_write_tokens,
                r.usage.output_tokens,
                canonical_json(r.meta),
            )
            for r in records
        ],
    )
    return conn


def bench_history(workdir: Path, size: int, loads: int, shape: str, make: Callable[[int, int], str]) -> None:
    store = SQLiteStore(workdir / f"history-{shape}.db", durable=False)
    session = store.create_session(source="bench")
    for message in bench_history_messages(size, shape, make):
        store.append_message(session.id, message)
    records = store.get_messages(session.id)
    old = old_layout_copy(workdir / f"history-{shape}-v3.db", session.id, records)
    old_sql = f"SELECT {MESSAGE_SELECT}, NULL FROM messages WHERE session_id = ? AND seq > 0 ORDER BY seq LIMIT -1"
    assert messages_from_rows(session.id, old.execute(old_sql, (session.id,)).fetchall()) == records

    def timed(fn: Callable[[], object], into: list[float]) -> None:
        started = time.perf_counter()
        fn()
        into.append(time.perf_counter() - started)

    # Interleaved, so that a slow spell of the machine hits every contender alike.
    loads_s: list[float] = []
    raws_s: list[float] = []
    old_s: list[float] = []
    old_raws_s: list[float] = []
    with closing(sqlite3.connect(store.path)) as conn, closing(old):
        new_bare = f"SELECT {PACKED_MESSAGE_COLUMNS} FROM messages WHERE session_id = ? ORDER BY seq"
        old_bare = f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = ? ORDER BY seq"
        for _ in range(loads):
            timed(lambda: store.get_messages(session.id), loads_s)
            timed(lambda: conn.execute(new_bare, (session.id,)).fetchall(), raws_s)
            timed(lambda: messages_from_rows(session.id, old.execute(old_sql, (session.id,)).fetchall()), old_s)
            timed(lambda: old.execute(old_bare, (session.id,)).fetchall(), old_raws_s)
    store.close()
    load, raw, before, old_raw = (statistics.median(v) for v in (loads_s, raws_s, old_s, old_raws_s))
    pairs = statistics.median(a / b for a, b in zip(loads_s, raws_s))
    before_pairs = statistics.median(a / b for a, b in zip(loads_s, old_s))
    print(
        f"\nload a whole history ({size} messages, '{shape}' shape, median of {loads} loads, "
        "interleaved with the baselines)"
    )
    print(f"  store.get_messages (records)           {load * 1000:>9.2f} ms   target <= 1.0 ms")
    print(
        f"  baseline: bare SELECT, same rows       {raw * 1000:>9.2f} ms   store is x{load / raw:.2f} of it "
        f"(target <= x1.5; median of per-pair ratios x{pairs:.2f})"
    )
    print(
        f"  before: column per field (schema 3)    {before * 1000:>9.2f} ms   now x{load / before:.2f} of it "
        f"(per pair x{before_pairs:.2f}); its bare SELECT of 14 columns {old_raw * 1000:.2f} ms"
    )


def bench_search(
    workdir: Path,
    corpus: int,
    repeats: int,
    rng: random.Random,
    words: list[str],
    make: Callable[[int, int], str],
) -> None:
    store = SQLiteStore(workdir / "search.db", durable=False)
    sessions = [
        store.create_session(source="bench", title=make(2, 5)).id for _ in range(max(1, corpus // 200))
    ]
    started = time.perf_counter()
    # Fast path: one transaction of plain INSERTs into messages; the store's own triggers fill
    # the full-text index exactly as append_message would, then the counters are fixed up.
    with closing(sqlite3.connect(store.path, isolation_level=None)) as conn:
        conn.execute("BEGIN")
        rows = []
        for i in range(corpus):
            session_id = sessions[i % len(sessions)]
            rows.append(
                (session_id, i // len(sessions) + 1, "user" if i % 2 else "assistant", make(5, 80), 1.8e9 + i)
            )
        conn.executemany(
            "INSERT INTO messages (session_id, seq, role, content, created_at) VALUES (?, ?, ?, ?, ?)", rows
        )
        conn.execute(
            "UPDATE sessions SET message_count = (SELECT COUNT(*) FROM messages m WHERE m.session_id = id)"
        )
        conn.execute("COMMIT")
    built = time.perf_counter() - started

    rare = words[-1]
    queries = {
        "one common word": "error",
        "two words": "deploy server",
        "three words": "please check the",
        "one rare word": rare,
        "rare + common": f"{rare} the",
        "no match": "xylophone",
        "hostile syntax": 'build" OR NEAR( *',
    }
    print(
        f"\nfull-text search over {corpus:,} messages in {len(sessions):,} sessions "
        f"(corpus built in {built:.1f} s via bulk INSERT into messages; triggers index it)"
    )
    medians = []
    for label, query in queries.items():
        hits = len(store.search(query))
        median = median_seconds(partial(store.search, query), repeats)
        medians.append(median)
        print(f"  {label:<16} {query[:28]!r:<31} {median * 1000:>8.2f} ms   {hits:>2} hits (limit 20)")
    filtered = median_seconds(lambda: store.search("error", session_id=sessions[0]), repeats)
    print(f"  {'one session':<16} {'error, session_id=...':<31} {filtered * 1000:>8.2f} ms")
    with closing(sqlite3.connect(store.path)) as conn:
        like = median_seconds(
            lambda: conn.execute(
                "SELECT id FROM messages WHERE content LIKE ? AND content LIKE ? LIMIT 20",
                ("%deploy%", "%server%"),
            ).fetchall(),
            repeats,
        )
        like_rare = median_seconds(
            lambda: conn.execute(
                "SELECT id FROM messages WHERE content LIKE ? LIMIT 20", (f"%{rare}%",)
            ).fetchall(),
            repeats,
        )
    overall = statistics.median(medians)
    print(f"  median over the queries above          {overall * 1000:>8.2f} ms")
    print(
        f"  baseline: LIKE scan, 'deploy server'   {like * 1000:>8.2f} ms   "
        f"(stops at 20 rows, no ranking; FTS ranked x{like / medians[1]:.1f} as fast)"
    )
    print(
        f"  baseline: LIKE scan, rare word         {like_rare * 1000:>8.2f} ms   "
        f"(FTS ranked x{like_rare / medians[3]:.1f} as fast)"
    )
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=5000, help="messages appended, one per transaction")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds of the append test")
    parser.add_argument("--concurrent", type=int, default=2000, help="appends per row of the concurrent test")
    parser.add_argument(
        "--history", type=int, default=500, help="messages in the session whose history is loaded"
    )
    parser.add_argument("--loads", type=int, default=101, help="history loads (median reported)")
    parser.add_argument(
        "--history-shapes", default="bench,agent", help="which histories to load: bench, agent (comma-separated)"
    )
    parser.add_argument(
        "--only", choices=["appends", "concurrent", "history", "search"], default=None, help="run one part"
    )
    parser.add_argument(
        "--corpus", "--messages", type=int, default=100_000, help="messages in the search corpus"
    )
    parser.add_argument("--repeats", type=int, default=7, help="runs of each search query (median reported)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument(
        "--url", default="postgresql://postgres@127.0.0.1:5432/test", help="server for --backend postgres"
    )
    parser.add_argument(
        "--dir", type=Path, default=None, help="where to put the databases (default: a temp dir)"
    )
    args = parser.parse_args()

    rng = random.Random(args.seed)
    words = vocabulary(rng, 3000)
    make = sentence_maker(rng, words)
    print("vigil session store benchmark")
    print(
        f"  machine   {platform.platform()}, {os.cpu_count()} CPUs ({platform.processor() or platform.machine()})"
    )
    print(f"  python    {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}")
    print(
        f"  workload  {args.appends:,} appends; {args.history}-message history x{args.loads}; "
        f"{args.corpus:,}-message search corpus, {len(words):,}-word vocabulary (Zipf), queries x{args.repeats}"
    )
    if args.backend == "postgres":
        import store_bench_postgres  # a sibling of this script

        store_bench_postgres.run(args, words, make)
        return
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        workdir = Path(tmp)
        print(f"  databases {workdir}")
        if args.only in (None, "appends"):
            bench_appends(workdir, args.appends, args.rounds, make)
        if args.only in (None, "concurrent"):
            bench_concurrent_appends(workdir, args.concurrent, make)
        for shape in args.history_shapes.split(",") if args.only in (None, "history") else ():
            bench_history(workdir, args.history, args.loads, shape, make)
        if args.only in (None, "search"):
            bench_search(workdir, args.corpus, args.repeats, rng, words, make)


if __name__ == "__main__":
    main()
