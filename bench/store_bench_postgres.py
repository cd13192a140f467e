"""The PostgreSQL half of ``store_bench.py``: the same workloads against ``PostgresStore``.

Run: ``.venv/bin/python bench/store_bench.py --backend postgres --url postgresql://...``.
Everything happens in a fresh schema that is dropped at the end. Each figure comes with a
baseline measured in the same run (bare psycopg doing the minimum on the same server).
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
import uuid
from functools import partial
from typing import Callable

import psycopg

from vigil.store import NewMessage, ToolCall
from vigil.store.postgres import PostgresStore
from vigil.store.rows import MESSAGE_COLUMNS
from vigil.usage import Usage


def run(args: argparse.Namespace, words: list[str], make: Callable[[int, int], str]) -> None:
    schema = f"vigil_bench_{uuid.uuid4().hex[:8]}"
    url = f"{args.url}{'&' if '?' in args.url else '?'}schema={schema}"
    with psycopg.connect(args.url, autocommit=True) as admin:
        version = admin.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
    print(f"  server    PostgreSQL {version}, schema {schema} (dropped afterwards)")
    store = PostgresStore(url)
    try:
        bench_appends(store, args.url, schema, args.appends, args.rounds, make)
        bench_threads(store, args.appends, make)
        bench_history(store, args.url, args.history, args.loads, make)
        bench_search(store, args.url, schema, args.corpus, args.repeats, words, make)
    finally:
        store.close()
        with psycopg.connect(args.url, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def median_seconds(fn: Callable[[], object], repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def bench_appends(
    store: PostgresStore, server: str, schema: str, count: int, rounds: int, make: Callable[[int, int], str]
) -> None:
    texts = [make(5, 60) for _ in range(count)]
    session_id = store.create_session(source="bench").id
    # Baseline: one INSERT per transaction into a table with no index, counters or search.
    bare = psycopg.connect(server)
    bare.execute(f'CREATE TABLE "{schema}".bare (id bigserial, session_id text, content text)')
    bare.commit()

    def append(batch: list[str]) -> None:
        for text in batch:
            store.append_message(session_id, NewMessage(role="user", content=text, usage=Usage(10, 20, 0, 5)))

    def insert(batch: list[str]) -> None:
        for text in batch:
            bare.execute(f'INSERT INTO "{schema}".bare (session_id, content) VALUES (%s, %s)', ("s", text))
            bare.commit()

    spent = [0.0, 0.0]
    for r in range(rounds):  # interleaved, so that a slow spell hits both alike
        batch = texts[r * count // rounds : (r + 1) * count // rounds]
        for i, body in enumerate((append, insert)):
            started = time.perf_counter()
            body(batch)
            spent[i] += time.perf_counter() - started
    bare.close()
    rate_store, rate_bare = (count / t for t in spent)
    print(f"\nappend, one message per transaction ({count:,} appends each, in {rounds} interleaved rounds)")
    print(f"  store.append_message                   {rate_store:>9,.0f} msg/s")
    print(
        f"  baseline: bare INSERT + COMMIT         {rate_bare:>9,.0f} msg/s   "
        f"the store does x{rate_store / rate_bare:.2f} of it"
    )


def bench_threads(store: PostgresStore, count: int, make: Callable[[int, int], str]) -> None:
    """1, 8 and 64 threads appending at once through one store's pool (8 connections), each
    to its own session, against the single thread. PostgreSQL itself commits concurrent
    transactions together (one WAL flush covers every commit record written before it), so
    the store adds no group commit of its own here; the pool bounds how many run at once."""
    texts = [make(5, 60) for _ in range(500)]
    print(f"\nappend from threads through one store's pool (~{count:,} appends per row, one session per thread)")
    single = None
    for threads in (1, 8, 64):
        sessions = [store.create_session(source="bench").id for _ in range(threads)]
        share = max(1, count // threads)
        latencies: list[float] = []
        lock = threading.Lock()

        def work(i: int) -> None:
            mine = []
            for n in range(share):
                started = time.perf_counter()
                store.append_message(sessions[i], NewMessage(role="user", content=texts[(i * share + n) % 500]))
                mine.append(time.perf_counter() - started)
            with lock:
                latencies.extend(mine)

        workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
        started = time.perf_counter()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        rate = share * threads / (time.perf_counter() - started)
        single = single or rate
        latencies.sort()
        p50, p99 = latencies[len(latencies) // 2], latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]
        print(
            f"  {threads:>2} thread{'s' if threads > 1 else ' '}  {rate:>9,.0f} msg/s  p50 {p50 * 1000:6.2f} ms  "
            f"p99 {p99 * 1000:6.2f} ms  x{rate / single:.2f} the 1-thread rate"
        )


def bench_history(
    store: PostgresStore, server: str, size: int, loads: int, make: Callable[[int, int], str]
) -> None:
    session = store.create_session(source="bench")
    for i in range(size):
        if i % 4 == 2:
            calls = (ToolCall(id=f"call_{i}", name="terminal", arguments='{"cmd": "ls -la /tmp"}'),)
            message = NewMessage(role="assistant", tool_calls=calls, usage=Usage(5, 900, 0, 30))
        elif i % 4 == 3:
            message = NewMessage(
                role="tool", content=make(20, 200), tool_call_id=f"call_{i - 1}", tool_name="terminal"
            )
        else:
            message = NewMessage(role="user" if i % 4 == 0 else "assistant", content=make(5, 120))
        store.append_message(session.id, message)
    loads_s, raws_s = [], []
    with psycopg.connect(server, autocommit=True) as conn:
        sql = f'SELECT {MESSAGE_COLUMNS} FROM "{store.schema}".messages WHERE session_id = %s ORDER BY seq'
        for _ in range(loads):  # interleaved, so that a slow spell hits both alike
            started = time.perf_counter()
            store.get_messages(session.id)
            loads_s.append(time.perf_counter() - started)
            started = time.perf_counter()
            conn.execute(sql, (session.id,)).fetchall()
            raws_s.append(time.perf_counter() - started)
    load, raw = statistics.median(loads_s), statistics.median(raws_s)
    print(f"\nload a whole history ({size} messages, median of {loads} loads, interleaved with the baseline)")
    print(f"  store.get_messages (records)           {load * 1000:>9.2f} ms")
    print(
        f"  baseline: bare SELECT, same columns    {raw * 1000:>9.2f} ms   store is x{load / raw:.2f} of it "
        f"(target <= x1.5; median of per-pair ratios x{statistics.median(a / b for a, b in zip(loads_s, raws_s)):.2f})"
    )


def bench_search(
    store: PostgresStore,
    server: str,
    schema: str,
    corpus: int,
    repeats: int,
    words: list[str],
    make: Callable[[int, int], str],
) -> None:
    count = max(1, corpus // 200)
    sessions = [store.create_session(source="bench", title=make(2, 5)).id for _ in range(count)]
    started = time.perf_counter()
    # Fast path: COPY straight into messages; the generated column indexes each row exactly
    # as append_message would. Then the counters are fixed up.
    with psycopg.connect(server) as conn:
        columns = "(session_id, seq, role, content, created_at)"
        with conn.cursor().copy(f'COPY "{schema}".messages {columns} FROM STDIN') as copy:
            for i in range(corpus):
                session_id = sessions[i % len(sessions)]
                role = "user" if i % 2 else "assistant"
                copy.write_row((session_id, i // len(sessions) + 1, role, make(5, 80), 1.8e9 + i))
        conn.execute(
            f'UPDATE "{schema}".sessions s SET message_count ='
            f' (SELECT COUNT(*) FROM "{schema}".messages m WHERE m.session_id = s.id)'
        )
        conn.commit()
        conn.autocommit = True
        conn.execute(f'VACUUM ANALYZE "{schema}".messages')
    built = time.perf_counter() - started

    rare = words[-1]
    queries = {
        "one common word": "error",
        "two words": "deploy server",
        "three words": "please check the",
        "one rare word": rare,
        "rare + common": f"{rare} the",
        "no match": "xylophone",
        "hostile syntax": 'build" OR NEAR( * & !x',
    }
    print(
        f"\nfull-text search over {corpus:,} messages in {len(sessions):,} sessions "
        f"(corpus built in {built:.1f} s via COPY; the generated tsvector column indexes it)"
    )
    medians = []
    for label, query in queries.items():
        hits = len(store.search(query))
        median = median_seconds(partial(store.search, query), repeats)
        medians.append(median)
        print(f"  {label:<16} {query[:28]!r:<31} {median * 1000:>8.2f} ms   {hits:>2} hits (limit 20)")
    filtered = median_seconds(lambda: store.search("error", session_id=sessions[0]), repeats)
    print(f"  {'one session':<16} {'error, session_id=...':<31} {filtered * 1000:>8.2f} ms")
    with psycopg.connect(server, autocommit=True) as conn:
        table = f'"{schema}".messages'
        like = median_seconds(
            lambda: conn.execute(
                f"SELECT id FROM {table} WHERE content ILIKE %s AND content ILIKE %s LIMIT 20",
                ("%deploy%", "%server%"),
            ).fetchall(),
            repeats,
        )
        like_rare = median_seconds(
            lambda: conn.execute(
                f"SELECT id FROM {table} WHERE content ILIKE %s LIMIT 20", (f"%{rare}%",)
            ).fetchall(),
            repeats,
        )
    print(f"  median over the queries above          {statistics.median(medians) * 1000:>8.2f} ms")
    print(
        f"  baseline: ILIKE scan, 'deploy server'  {like * 1000:>8.2f} ms   "
        f"(stops at 20 rows, no ranking; FTS ranked x{like / medians[1]:.1f} as fast)"
    )
    print(
        f"  baseline: ILIKE scan, rare word        {like_rare * 1000:>8.2f} ms   "
        f"(FTS ranked x{like_rare / medians[3]:.1f} as fast)"
    )
