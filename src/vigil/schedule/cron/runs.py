"""The run log: one ``state_meta`` record per handled occurrence, ``cron:run:<job>:<stamp>``.

``stamp`` is the occurrence in UTC (``20260329T010000Z``), or the start time followed by
``-manual`` for ``vigil cron run``. Occurrences are unique per job, so a stamp never names two
runs, and keys sort by time within a job. Skipped and missed occurrences are recorded too,
so the log says what happened to every occurrence the scheduler saw.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timezone
from typing import Any

from vigil.masking import mask_secrets
from vigil.store import SessionStore

RUN_PREFIX = "cron:run:"
ANSWER_CAP = 4000
KEEP_PER_JOB = 100
"""Run records kept per job; older ones are pruned (sessions and output files stay)."""

# Statuses.
RUNNING = "running"
OK = "ok"
SILENT = "silent"
FAILED = "failed"
INTERRUPTED = "interrupted"
SKIPPED_OVERLAP = "skipped-overlap"
SKIPPED_MISSED = "skipped-missed"
SKIPPED_BACKOFF = "skipped-backoff"
MISSED = "missed"

SCHEDULED = "scheduled"
MANUAL = "manual"


def stamp_of(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def run_key(job: str, stamp: str) -> str:
    return f"{RUN_PREFIX}{job}:{stamp}"


def job_prefix(job: str) -> str:
    return f"{RUN_PREFIX}{job}:"


@dataclass(frozen=True, slots=True)
class RunRecord:
    """What happened to one occurrence (or one manual run).

    ``coalesced`` counts the earlier occurrences folded into this one by an outage; ``late``
    is how many seconds after its occurrence the run was claimed.
    """

    job: str
    stamp: str
    kind: str
    status: str
    occurrence: float | None
    claimed_at: float
    coalesced: int = 0
    late: float = 0.0
    detail: str = ""
    owner: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    session_id: str | None = None
    answer: str | None = None
    error: str | None = None
    delivery: dict[str, Any] | None = field(default=None)

    @property
    def key(self) -> str:
        return run_key(self.job, self.stamp)

    @property
    def when(self) -> float:
        """The time the record is about: its occurrence, else when it was claimed."""
        return self.occurrence if self.occurrence is not None else self.claimed_at

    def finished(self, status: str, now: float, **changes: Any) -> "RunRecord":
        answer = changes.pop("answer", self.answer)
        if changes.get("error"):
            # Error texts may quote a URL with credentials in it (model.base_url).
            changes["error"] = mask_secrets(changes["error"])
        if answer is not None and len(answer) > ANSWER_CAP:
            answer = answer[: ANSWER_CAP - 1] + "…"
        return replace(self, status=status, finished_at=now, answer=answer, **changes)

    def to_json(self) -> dict[str, Any]:
        # Not dataclasses.asdict, which deep-copies every value: bursts encode thousands.
        data = {name: getattr(self, name) for name in _RUN_FIELDS}
        if self.delivery is not None:
            data["delivery"] = copy.deepcopy(self.delivery)
        return data

    @classmethod
    def from_json(cls, data: Any) -> "RunRecord | None":
        if not isinstance(data, dict):
            return None
        try:
            return cls(**data)
        except TypeError:
            return None


_RUN_FIELDS = tuple(f.name for f in fields(RunRecord))


class RunLog:
    """Reads and writes run records in one store (synchronous, like the store)."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store

    def put(self, record: RunRecord) -> None:
        self.store.set_meta(record.key, record.to_json())

    def get(self, job: str, stamp: str) -> RunRecord | None:
        entry = self.store.get_meta(run_key(job, stamp))
        return None if entry is None else RunRecord.from_json(entry.value)

    def delete(self, job: str, stamp: str) -> None:
        self.store.delete_meta(run_key(job, stamp))

    def list(self, job: str | None = None, *, limit: int | None = None) -> list[RunRecord]:
        """Records of one job (or all jobs), newest first."""
        entries = self.store.list_meta(job_prefix(job) if job else RUN_PREFIX)
        records = [r for r in (RunRecord.from_json(e.value) for e in entries) if r is not None]
        if job is not None:
            records = [r for r in records if r.job == job]
        records.sort(key=lambda r: (r.when, r.claimed_at), reverse=True)
        return records[:limit] if limit else records

    def prune(self, job: str, keep: int = KEEP_PER_JOB) -> int:
        """Delete all but the newest ``keep`` records of ``job``; returns how many went."""
        entries = self.store.list_meta(job_prefix(job))
        if len(entries) <= keep:
            return 0
        doomed = entries[: len(entries) - keep]  # keys sort by time within a job
        for entry in doomed:
            self.store.delete_meta(entry.key)
        return len(doomed)

    def remove_all(self, job: str) -> int:
        entries = self.store.list_meta(job_prefix(job))
        for entry in entries:
            self.store.delete_meta(entry.key)
        return len(entries)
