"""Copy an SQLite session store into PostgreSQL and verify the copy (``vigil store migrate``).

Table by table in foreign-key order, in batches of :data:`BATCH_ROWS` source rows, each
batch committed together with how far its table got (see ``target.py``); then every table is
counted and hashed on both sides (see ``tables.py``). The source is only read, inside one
read transaction, so the copy and the verification see the same snapshot.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, Sequence

from vigil.store.transfer.source import SQLiteSource
from vigil.store.transfer.tables import TABLES
from vigil.store.transfer.target import PostgresTarget, check_url

BATCH_ROWS = 500
"""Source rows per committed batch: what an interruption can cost at most, per table."""

TEST_PAUSE_ENV = "VIGIL_TEST_MIGRATE_PAUSE_AFTER"
"""Test-only: once this many rows were copied (counted in whole committed batches), the
migrate says so on stderr and waits, doing nothing, until it is killed or interrupted, so a
test can SIGKILL or Ctrl-C it at a known point in the middle of a copy. Never set this in
real use."""


@dataclass(frozen=True, slots=True)
class TablePlan:
    """What there is to copy of one table: ``total`` source rows, ``already`` in the target."""

    name: str
    total: int
    already: int


@dataclass(frozen=True, slots=True)
class TableCheck:
    """One table after the copy: rows copied by this run, and both sides' count and hash."""

    name: str
    copied: int
    source_rows: int
    target_rows: int
    source_hash: str
    target_hash: str

    @property
    def matches(self) -> bool:
        return self.source_rows == self.target_rows and self.source_hash == self.target_hash


@dataclass(frozen=True, slots=True)
class Report:
    """The outcome of one migrate; ``ok`` when every table matches (the target is finished)."""

    source: str
    target: str
    schema: str
    resumed: bool
    emptied: bool
    tables: tuple[TableCheck, ...]

    @property
    def ok(self) -> bool:
        return all(check.matches for check in self.tables)

    @property
    def mismatched(self) -> list[str]:
        return [check.name for check in self.tables if not check.matches]


class Progress(Protocol):
    """What a migrate reports while it runs (a progress bar, plain lines, nothing)."""

    def opened(self, *, resumed: bool, emptied: bool, where: str) -> None:
        """The target was opened: a resumed earlier migrate, or emptied by ``--force``."""

    def planned(self, plans: Sequence[TablePlan]) -> None:
        """Every table's row counts, before the first row is copied."""

    def advanced(self, table: str, rows: int) -> None:
        """``rows`` more rows of ``table`` were committed."""

    def copied(self, table: str) -> None:
        """``table`` is copied."""

    def verifying(self, table: str) -> None:
        """``table`` is being counted and hashed on both sides."""


def migrate(source_path: Path, url: str, *, force: bool, progress: Progress) -> Report:
    """Copy the SQLite store at ``source_path`` into the PostgreSQL schema ``url`` names,
    or go on with an unfinished copy from it, and verify the result.

    Raises ``MigrateError`` (a ``StoreError``) for a bad source or target, ``TargetNotEmpty``
    for a target holding other vigil data without ``force``; both before anything is written.
    When the verification finds a difference, the report says where and the target keeps its
    progress record (a re-run verifies again; ``--force`` copies afresh).
    """
    check_url(url)
    source = SQLiteSource(source_path)
    try:
        target = PostgresTarget(url, source.identity, force=force, now=time.time())
        try:
            progress.opened(resumed=target.resumed, emptied=target.emptied, where=target.where)
            checks = _copy_and_verify(source, target, progress)
            report = Report(
                str(source_path), target.where, target.schema, target.resumed, target.emptied, checks
            )
            if report.ok:
                target.finish()
            return report
        finally:
            target.close()
    finally:
        source.close()


def _copy_and_verify(source: SQLiteSource, target: PostgresTarget, progress: Progress) -> tuple[TableCheck, ...]:
    pause = _pause_after()
    copied: dict[str, int] = {}
    with source.snapshot():
        plans = []
        for table in TABLES:
            position = target.positions.get(table.name, 0)
            already = source.count(table, upto=position) if position else 0
            plans.append(TablePlan(table.name, source.count(table), already))
        progress.planned(plans)
        total_now = 0
        for table in TABLES:
            after = target.positions.get(table.name, 0)
            copied[table.name] = 0
            while batch := source.rows_after(table, after, BATCH_ROWS):
                after = batch[-1][0]
                target.write_batch(table, [values for _, values in batch], after)
                copied[table.name] += len(batch)
                total_now += len(batch)
                progress.advanced(table.name, len(batch))
                if pause is not None and total_now >= pause:
                    _wait_to_be_killed(total_now)
            if table.name == "sessions":
                target.fix_parents(source.late_parents())
            if table.identity is not None:
                target.set_high_water(table, source.high_water(table))
            progress.copied(table.name)
        checks = []
        for table in TABLES:
            progress.verifying(table.name)
            mine, theirs = source.digest(table), target.digest(table)
            checks.append(
                TableCheck(table.name, copied[table.name], mine.rows, theirs.rows, mine.hexdigest, theirs.hexdigest)
            )
    return tuple(checks)


def _pause_after() -> int | None:
    raw = os.environ.get(TEST_PAUSE_ENV)
    try:
        return int(raw) if raw else None
    except ValueError:
        return None


def _wait_to_be_killed(rows: int) -> None:
    sys.stderr.write(f"vigil store migrate: paused after {rows} rows ({TEST_PAUSE_ENV}, a test-only setting)\n")
    sys.stderr.flush()
    while True:
        time.sleep(3600)
