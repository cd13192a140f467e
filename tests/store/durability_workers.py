"""Bodies of the processes that test_durability kills (run as ``python -m``): each prints a
line for every write it has been told is durable (an append, a cron claim, a gateway inbox
entry), then goes on until it is killed."""

from __future__ import annotations

import sys
import threading

from vigil.clock import FakeClock
from vigil.schedule.cron.repo import CronRepo
from vigil.store import NewMessage
from vigil.store.gateway.gateway_tables import RouteKey
from vigil.store.sqlite import SQLiteStore

_print_lock = threading.Lock()


def acknowledge(line: str) -> None:
    with _print_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def append_forever(path: str, session_ids: list[str]) -> None:
    """One thread per session, each appending as fast as it can (the appends of the threads
    are group-committed); ``ack <session> <seq> <content>`` after each append returns."""
    store = SQLiteStore(path)

    def writer(session_id: str) -> None:
        n = 0
        while True:
            content = f"{session_id}-{n}"
            record = store.append_message(session_id, NewMessage(role="user", content=content))
            acknowledge(f"ack {session_id} {record.seq} {content}")
            n += 1

    threads = [threading.Thread(target=writer, args=(sid,), daemon=True) for sid in session_ids]
    acknowledge("ready")
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def claim_minutes(path: str, owner: str, start: float, minutes: int, jobs: list[str]) -> None:
    """Claim every job's occurrence minute after minute from ``start`` (``minutes`` of them,
    0: forever), each minute's burst in one transaction; ``claim <job> <stamp>`` for every
    claim once ``claim_due_many`` has returned. Then each run is finished at once, so that
    the next minute's occurrence can be claimed. Runs of any other owner count as abandoned
    (their process was killed)."""
    store = SQLiteStore(path)
    clock = FakeClock(start)
    repo = CronRepo(store, clock, owner=owner, alive=lambda other: other == owner)
    acknowledge("ready")
    minute = 0
    while not minutes or minute < minutes:
        minute += 1
        clock.set_sync(start + 60 * minute)
        claims = []
        for name, result in zip(jobs, repo.claim_due_many(jobs)):
            if result.claim is not None:
                claims.append(result.claim)
                acknowledge(f"claim {name} {result.claim.record.stamp}")
            elif result.error is not None:
                acknowledge(f"error {name} {result.error}")
        for claim in claims:
            repo.finish(claim, claim.record.finished("ok", clock.now()))
    acknowledge("done")


def accept_forever(path: str, threads: int) -> None:
    """``threads`` threads storing inbound messages in the gateway inbox as fast as they can
    (group-committed); ``ack <external_id> <entry id>`` once ``inbox_accept`` has returned,
    which is when the gateway would acknowledge the platform."""
    store = SQLiteStore(path)

    def receiver(n: int) -> None:
        count = 0
        while True:
            external_id = f"t{n}-{count}"
            entry, _ = store.gateway.inbox_accept(
                RouteKey("web", f"chat-{n}"), external_id, f"text of {external_id}", received_at=float(count)
            )
            acknowledge(f"ack {external_id} {entry.id}")
            count += 1

    workers = [threading.Thread(target=receiver, args=(n,), daemon=True) for n in range(threads)]
    acknowledge("ready")
    for t in workers:
        t.start()
    for t in workers:
        t.join()


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    if command == "append":
        append_forever(args[0], args[1:])
    elif command == "accept":
        accept_forever(args[0], int(args[1]))
    elif command == "claim":
        claim_minutes(args[0], args[1], float(args[2]), int(args[3]), args[4:])
    else:
        raise SystemExit(f"unknown command {command}")
