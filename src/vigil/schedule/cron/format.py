"""Plain-text and JSON views of jobs and runs, shared by the CLI, the ``cron`` tool and ``/cron``."""

from __future__ import annotations

from typing import Any

from vigil.schedule.cron.jobs import CronJob
from vigil.schedule.cron.plan import next_attempt
from vigil.schedule.cron.runs import RunRecord
from vigil.schedule.cron.schedule import format_instant, iso_utc


def relative(seconds: float) -> str:
    """``in 1h30m`` / ``5m ago`` style."""
    future = seconds >= 0
    left = abs(int(seconds))
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if left >= size and len(parts) < 2:
            parts.append(f"{left // size}{unit}")
            left %= size
    text = "".join(parts) or f"{left}s"
    return f"in {text}" if future else f"{text} ago"


def next_text(job: CronJob, now: float) -> str:
    """When the job runs next, in its zone, with a relative hint; or why it does not."""
    if job.retired is not None:
        return f"never ({job.retired})"
    if job.paused:
        return "paused"
    when = next_attempt(job)
    if when is None:
        return "-"
    why = "; backing off" if when != job.next_due else ""
    return f"{format_instant(when, job.schedule.tz)} ({relative(when - now)}{why})"


def last_text(job: CronJob) -> str:
    if job.last_run_at is None:
        return "never"
    return f"{job.last_status} at {format_instant(job.last_run_at, job.schedule.tz)}"


def backoff_text(job: CronJob, now: float) -> str | None:
    """``3 failures in a row; backing off until ...`` or ``None``."""
    if not job.failures:
        return None
    text = f"{job.failures} failure(s) in a row"
    if job.backoff_until is not None and job.backoff_until > now:
        text += f"; backing off until {format_instant(job.backoff_until, job.schedule.tz)}"
    return text


def error_lines(error: str | None) -> list[str]:
    """A run's error as lines to show (it may carry a multi-line hint, such as how to
    configure a model)."""
    return [line.strip() for line in (error or "").splitlines() if line.strip()]


def job_line(job: CronJob, now: float) -> str:
    """One line: name, schedule, next run, last run, state."""
    parts = [job.name, job.schedule.describe(), f"next {next_text(job, now)}", f"last {last_text(job)}"]
    trouble = backoff_text(job, now)
    if trouble:
        parts.append(trouble)
    return " — ".join(parts) + f" [{job.state}]"


def job_lines(job: CronJob, now: float) -> list[str]:
    """The full description for ``vigil cron show``."""
    tz = job.schedule.tz
    lines = [
        f"{job.name} [{job.state}]",
        f"schedule   {job.schedule.describe()}  (typed: {job.schedule.text}; zone {tz})",
        f"next run   {next_text(job, now)}",
        f"last run   {last_text(job)}" + (f" — {error_lines(job.last_error)[0]}" if job.last_error else ""),
        *(f"{'':11}{line}" for line in error_lines(job.last_error)[1:]),
        f"deliver    {job.deliver}",
        f"catch-up   {job.catch_up}; grace {_grace_text(job)}",
        f"runs       {job.runs}" + (f" of {job.repeat}" if job.repeat else "") + _counts_text(job),
    ]
    if job.skills:
        lines.append(f"skills     {', '.join(job.skills)}")
    if job.workdir:
        lines.append(f"workdir    {job.workdir}")
    trouble = backoff_text(job, now)
    if trouble:
        lines.append(f"failing    {trouble}")
    if job.running is not None:
        lines.append(
            f"running    since {format_instant(job.running.claimed_at, tz)} "
            f"({job.running.kind}, {job.running.owner})"
        )
    if job.last_session:
        lines.append(f"session    {job.last_session} (last run)")
    lines.append(f"prompt     {job.prompt}")
    return lines


def job_to_json(job: CronJob, now: float) -> dict[str, Any]:
    """The stored record plus derived fields (state, ISO times, back-off) for scripts."""
    data = job.to_json()
    data.pop("format", None)
    data.update(
        state=job.state,
        description=job.schedule.describe(),
        next_due_iso=iso_utc(job.next_due) if job.next_due is not None else None,
        next_attempt_iso=iso_utc(attempt) if (attempt := next_attempt(job)) is not None else None,
        last_run_iso=iso_utc(job.last_run_at) if job.last_run_at is not None else None,
        backoff=backoff_text(job, now),
        grace_seconds=None if job.next_due is None else job.grace_for(job.next_due),
    )
    return data


def delivery_problem(record: RunRecord) -> str | None:
    """``needs-gateway`` or ``delivery failed`` when the run's answer did not reach its target."""
    status = (record.delivery or {}).get("status")
    if status == "needs-gateway":
        return "needs-gateway"
    if status == "failed":
        return "delivery failed"
    return None


_PLATFORM_STATES = {"queued": "queued", "delivered": "delivered"}


def delivery_state(record: RunRecord) -> str | None:
    """What the status column adds about a platform delivery: a problem, or ``queued`` (in
    the gateway's outbox, being tried) or ``delivered``; ``None`` for local and silent runs."""
    return delivery_problem(record) or _PLATFORM_STATES.get(str((record.delivery or {}).get("status")))


def run_status(record: RunRecord) -> str:
    """The status column of ``vigil cron runs``: ``ok``, ``ok, queued``, ``ok, delivered``,
    ``ok, delivery failed``, ``ok, needs-gateway``, ``failed`` ..."""
    state = delivery_state(record)
    return record.status if state is None else f"{record.status}, {state}"


def run_output(record: RunRecord) -> str:
    """What a run produced or why not: the delivery's outcome for a platform target, else the
    saved file, the error or the detail."""
    delivery = record.delivery or {}
    if delivery_state(record) is not None and delivery.get("detail"):
        return str(delivery["detail"])
    return str(delivery.get("path") or record.error or record.detail or "")


def run_line(record: RunRecord, tz: str) -> str:
    """One line of ``vigil cron runs``."""
    when = format_instant(record.when, tz)
    parts = [when, record.job, run_status(record)]
    if record.coalesced:
        parts.append(f"+{record.coalesced} coalesced")
    if record.session_id:
        parts.append(f"session {record.session_id}")
    if delivery_state(record) is not None:
        parts.append(run_output(record))
    elif record.delivery and record.delivery.get("path"):
        parts.append(str(record.delivery["path"]))
    if record.error:
        parts.append(" ".join(record.error.split()))
    elif record.detail:
        parts.append(record.detail)
    return "  ".join(parts)


def run_to_json(record: RunRecord) -> dict[str, Any]:
    data = record.to_json()
    data["when_iso"] = iso_utc(record.when)
    return data


def _grace_text(job: CronJob) -> str:
    if job.grace is not None:
        return f"{int(job.grace)}s"
    return "half the period (2m .. 2h)"


def _counts_text(job: CronJob) -> str:
    if not job.counts:
        return ""
    return " (" + ", ".join(f"{k} {v}" for k, v in sorted(job.counts.items())) + ")"
