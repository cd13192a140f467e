"""``vigil cron``: scheduled jobs, each run in a fresh session.

Jobs run inside ``vigil gateway run`` (the long-running process), or once per call of
``vigil cron tick`` (for a system crontab: ``* * * * * vigil cron tick``); how those two run
jobs in this process is :mod:`vigil.cli.cron_run`.

Test-only: ``VIGIL_CRON_NOW`` (epoch seconds or an ISO 8601 time with offset) freezes the
clock these commands use, so tests can add jobs and tick at chosen instants. Never set it in
real use.
"""

from __future__ import annotations

import functools
import os
import sys
from datetime import datetime
from typing import Any, Callable, TypeVar

import click
from rich.markup import escape as _escape_markup
from rich.table import Table

from vigil import platforms as registry
from vigil.cli.arguments import NON_EMPTY, LiveHelpOption, NonEmptyText, WholeNumber
from vigil.cli.confirm import confirm_or_refuse, yes_option
from vigil.cli.context import AppContext, pass_app
from vigil.cli.cron_run import run_now, tick
from vigil.cli.render import console, echo_json, shorten, visible
from vigil.cli.signals import Stopped, run_stoppable, say
from vigil.clock import Clock, FakeClock, SystemClock
from vigil.schedule import estop
from vigil.schedule.cron.errors import CronError, JobNotFound
from vigil.schedule.cron.delivery import parse_target, unconfigured_warning
from vigil.schedule.cron.format import (
    delivery_problem, error_lines, job_line, job_lines, job_to_json, next_text, run_line, run_output, run_status,
    run_to_json,
)
from vigil.schedule.cron.jobs import MAX_REPEAT, CronJob, JobSpec, job_key, new_job
from vigil.schedule.cron.repo import CronRepo
from vigil.schedule.cron.schedule import default_zone, format_instant

F = TypeVar("F", bound=Callable[..., Any])
NOW_ENV = "VIGIL_CRON_NOW"
MAX_LISTED = 100_000
"""The most run records ``cron runs -n`` shows (0 shows all)."""


def _shown(text: str) -> str:
    """Stored text (names, prompts, errors) for rich: markup escaped, control characters visible."""
    return _escape_markup(visible(text))


def fixed_now() -> float | None:
    """The frozen time from ``VIGIL_CRON_NOW`` (test-only), or ``None``."""
    raw = os.environ.get(NOW_ENV, "").strip()
    if not raw:
        return None
    try:
        return float(raw)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(raw)
    except ValueError:
        raise click.ClickException(f"{NOW_ENV}={raw!r} is neither epoch seconds nor an ISO 8601 time") from None
    if when.tzinfo is None:
        raise click.ClickException(f"{NOW_ENV} needs an offset (e.g. 2026-03-29T03:00:00+02:00)")
    return when.timestamp()


def cli_clock() -> Clock:
    now = fixed_now()
    return SystemClock() if now is None else FakeClock(now)


def _repo(app: AppContext) -> CronRepo:
    return CronRepo(app.store, cli_clock())


def _friendly(func: F) -> F:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except CronError as exc:
            raise click.ClickException(str(exc)) from None

    return wrapper  # type: ignore[return-value]


def _definition_options(func: F) -> F:
    options = [
        click.option("--tz", "tz", metavar="ZONE", type=NON_EMPTY, help="IANA time zone (default: config timezone, else the system's)."),
        click.option("--deliver", metavar="TARGET", cls=LiveHelpOption, live_help=lambda: f"{registry.deliver_help()}."),
        click.option("--skill", "skills", multiple=True, metavar="NAME", help="Load this skill in each run (repeatable)."),
        click.option("--workdir", metavar="DIR", type=NonEmptyText("`vigil cron edit --no-workdir` runs in the job's own workspace again"), help="Working directory of the runs (default: a workspace of the job's own, under the profile's workspaces/)."),
        click.option("--catch-up", "catch_up", type=click.Choice(["run", "skip"]), help="After an outage longer than the grace: run once (default) or skip."),
        click.option("--grace", metavar="DURATION", type=NonEmptyText("give a duration such as 10m, or 'default'"), help="How late a run may start, e.g. 10m (default: half the period, 2m..2h; `default` restores it)."),
        click.option("--repeat", type=WholeNumber(0, MAX_REPEAT), metavar="N",
                     help="Stop after N scheduled runs (0: no limit)."),
        click.option("--json", "as_json", is_flag=True, help="Print the job as JSON."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


@click.group()
def cron() -> None:
    """Scheduled jobs, each in a fresh session.

    Each run is a fresh session that delivers its answer.

    \b
    Schedules:  every 2h | "0 9 * * 1-5" | 30m (once) | 2026-05-01T09:00 (once)
    Jobs run in `vigil gateway run`, or once per `vigil cron tick` (for a system crontab).
    """


@cron.command("add")
@click.argument("name")
@click.option("--schedule", "-s", required=True, type=NON_EMPTY, help="When to run (see `vigil cron --help`).")
@click.option("--prompt", required=True, help="What each run should do (a run remembers nothing else).")
@_definition_options
@pass_app
@_friendly
def add_cmd(app: AppContext, name: str, schedule: str, prompt: str, tz: str | None, deliver: str | None,
            skills: tuple[str, ...], workdir: str | None, catch_up: str | None, grace: str | None,
            repeat: int | None, as_json: bool) -> None:
    """Add a job called NAME."""
    repo = _repo(app)
    spec = JobSpec(schedule, prompt, tz, deliver, skills or None, workdir, catch_up, grace, repeat or None)
    job = new_job(name, spec, now=repo.clock.now(), default_tz=default_zone(app.settings.timezone),
                  skills_dir=app.profile.skills_dir)
    repo.add(job)
    warning = unconfigured_warning(parse_target(job.deliver), job.name, app.settings)
    if as_json:
        echo_json(_with_warning(job_to_json(job, repo.clock.now()), warning))
    else:
        console.print(f"Added cron job [bold]{_shown(job.name)}[/bold]: {_shown(job.schedule.describe())} — "
                      f"next run {_shown(next_text(job, repo.clock.now()))}")
        _say_warning(warning)
    from vigil.tools import sandbox

    if warning := sandbox.status().warning(app.settings.tools.terminal.sandbox):
        click.echo(f"vigil cron: {warning}", err=True)


# A platform target cannot be served yet: add and edit say so at once, not at the first run.
def _say_warning(warning: str | None) -> None:
    if warning:
        click.echo(f"vigil cron: {visible(warning)}", err=True)


def _with_warning(data: dict[str, Any], warning: str | None) -> dict[str, Any]:
    """``--json`` output carries the warning as ``warnings`` (stdout stays one JSON document)."""
    return {**data, "warnings": [warning]} if warning else data


@cron.command("edit")
@click.argument("name")
@click.option("--schedule", "-s", type=NON_EMPTY, help="A new schedule (restarts the timing from now).")
@click.option("--prompt", help="A new prompt.")
@_definition_options
@click.option("--clear-skills", is_flag=True, help="Load no skills.")
@click.option("--no-workdir", is_flag=True, help="Work in the job's own workspace again.")
@pass_app
@_friendly
def edit_cmd(app: AppContext, name: str, schedule: str | None, prompt: str | None, tz: str | None,
             deliver: str | None, skills: tuple[str, ...], workdir: str | None, catch_up: str | None,
             grace: str | None, repeat: int | None, as_json: bool, clear_skills: bool, no_workdir: bool) -> None:
    """Change a job; only the options given change. Nothing is stored if any is invalid."""
    if clear_skills and skills:
        raise click.UsageError("use either --skill or --clear-skills")
    if no_workdir and workdir:
        raise click.UsageError("use either --workdir or --no-workdir")
    spec = JobSpec(schedule, prompt, tz, deliver, () if clear_skills else (skills or None),
                   "" if no_workdir else workdir, catch_up, grace, repeat)
    if spec == JobSpec():
        raise click.UsageError("nothing to change: give at least one option (see --help)")
    repo = _repo(app)
    job = repo.edit(name, spec, skills_dir=app.profile.skills_dir)
    warning = None if deliver is None else unconfigured_warning(parse_target(job.deliver), job.name, app.settings)
    if as_json:
        echo_json(_with_warning(job_to_json(job, repo.clock.now()), warning))
        return
    _say_warning(warning)
    console.print(f"Changed: {_shown(job_line(job, repo.clock.now()))}")


@cron.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_app
@_friendly
def list_cmd(app: AppContext, as_json: bool) -> None:
    """List every job with its next and last run."""
    repo = _repo(app)
    now = repo.clock.now()
    jobs = repo.list()
    if as_json:
        echo_json([job_to_json(job, now) for job in jobs])
        return
    if not jobs:
        console.print('No cron jobs. Add one with `vigil cron add NAME --schedule "every 1h" --prompt "..."`.')
        return
    table = Table("name", "schedule", "next run", "last run", "state", box=None)
    for job in jobs:
        last = "-" if job.last_run_at is None else f"{_last_status(repo, job)} {format_instant(job.last_run_at, job.schedule.tz)}"
        table.add_row(_shown(job.name), _shown(job.schedule.describe()), _shown(next_text(job, now)),
                      _shown(last), job.state + (f" ({job.failures} failures)" if job.failures else ""))
    console.print(table)


def _last_status(repo: CronRepo, job: CronJob) -> str | None:
    """The last run's status, with ``needs-gateway`` or ``delivery failed`` when its answer did
    not reach a platform target (only those jobs' run logs are read: local delivery cannot)."""
    if job.last_status not in ("ok", "silent") or parse_target(job.deliver).platform == "local":
        return job.last_status
    latest = repo.runs.list(job.name, limit=1)
    return run_status(latest[0]) if latest else job.last_status


@cron.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_app
@_friendly
def show_cmd(app: AppContext, name: str, as_json: bool) -> None:
    """Show one job and its next and last run.

    Its definition, next run, last run, failures and back-off.
    """
    repo = _repo(app)
    job = repo.get(name)
    delivery = _last_delivery(repo, job)
    if as_json:
        echo_json({**job_to_json(job, repo.clock.now()), "last_delivery": delivery})
        return
    for line in job_lines(job, repo.clock.now()):
        console.print(_shown(line))
    if delivery is not None:
        console.print(_shown(f"delivery   {delivery.get('status')}: {delivery.get('detail') or '-'}"))


def _last_delivery(repo: CronRepo, job: CronJob) -> dict[str, Any] | None:
    """What happened to the last answer sent to a platform target (local ones: ``None``)."""
    if parse_target(job.deliver).platform == "local":
        return None
    latest = [r for r in repo.runs.list(job.name, limit=5) if r.delivery]
    return latest[0].delivery if latest else None


@cron.command("pause")
@click.argument("name")
@pass_app
@_friendly
def pause_cmd(app: AppContext, name: str) -> None:
    """Stop scheduling runs of a job.

    Its definition and history stay.
    """
    job, changed = _repo(app).pause(name)
    console.print(f"Paused {_shown(job.name)}." if changed else f"{_shown(job.name)} was already paused.")


@cron.command("resume")
@click.argument("name")
@pass_app
@_friendly
def resume_cmd(app: AppContext, name: str) -> None:
    """Schedule a paused job again, from now on.

    Missed runs are not made up.
    """
    repo = _repo(app)
    job, changed = repo.resume(name)
    what = f"Resumed {job.name}" if changed else f"{job.name} was not paused"
    console.print(f"{_shown(what)}; next run {_shown(next_text(job, repo.clock.now()))}.")


@cron.command("remove")
@click.argument("name")
@yes_option
@pass_app
@_friendly
def remove_cmd(app: AppContext, name: str, yes: bool) -> None:
    """Delete a job and its run log.

    The sessions of past runs and saved answers stay.
    """
    repo = _repo(app)
    if repo.store.get_meta(job_key(name)) is None:  # a damaged record can be removed too
        raise JobNotFound(name)
    confirm_or_refuse(
        f"Remove cron job '{visible(name)}' and its run log?",
        yes=yes,
        action=f"remove cron job '{visible(name)}'",
    )
    _, removed = repo.remove(name)
    console.print(f"Removed cron job {_shown(name)} ({removed} run record(s) deleted).")


@cron.command("runs")
@click.argument("name", required=False)
@click.option("-n", "--limit", default=30, show_default=True, type=WholeNumber(0, MAX_LISTED),
              help="How many to show (0 = all).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_app
@_friendly
def runs_cmd(app: AppContext, name: str | None, limit: int, as_json: bool) -> None:
    """What happened to each occurrence of jobs.

    Runs, skips and misses, newest first.
    """
    repo = _repo(app)
    if name is not None:
        repo.get(name)
    records = repo.runs.list(name, limit=limit or None)
    if as_json:
        echo_json([run_to_json(r) for r in records])
        return
    if not records:
        console.print("No runs yet.")
        return
    zones = {job.name: job.schedule.tz for job in repo.list()}
    fallback = default_zone(app.settings.timezone)
    statuses = [run_status(r) + (f" (+{r.coalesced} coalesced)" if r.coalesced else "") for r in records]
    table = Table(box=None)
    table.add_column("when", no_wrap=True)
    table.add_column("job")
    # A cut status would hide a delivery problem: it keeps its width; a long session id folds.
    table.add_column("status", no_wrap=True, min_width=max(len(status) for status in statuses))
    table.add_column("session", overflow="fold")
    table.add_column("output / detail", overflow="fold")  # long paths fold instead of squeezing the rest
    for r, status in zip(records, statuses):
        tz = zones.get(r.job, fallback)
        table.add_row(format_instant(r.when, tz), _shown(r.job), status, r.session_id or "-",
                      _shown(shorten(run_output(r), 90)))
    console.print(table)


@cron.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_app
@_friendly
def status_cmd(app: AppContext, as_json: bool) -> None:
    """The scheduler at a glance.

    Jobs by state, what is next, what is running and what is failing.
    """
    repo = _repo(app)
    now = repo.clock.now()
    jobs = repo.list()
    stop = estop.status(app.store)
    by_state: dict[str, int] = {}
    for job in jobs:
        by_state[job.state] = by_state.get(job.state, 0) + 1
    upcoming = sorted((j for j in jobs if j.active and j.next_due is not None), key=lambda j: j.next_due or 0)
    failing = [j for j in jobs if j.failures]
    running = [j for j in jobs if j.running is not None]
    if as_json:
        echo_json({
            "jobs": len(jobs),
            "by_state": by_state,
            "emergency_stop": None if stop is None else {"since": stop.since, "reason": stop.reason},
            "next": [job_to_json(j, now) for j in upcoming[:5]],
            "running": [job_to_json(j, now) for j in running],
            "failing": [job_to_json(j, now) for j in failing],
            "damaged": repo.damaged(),
        })
        return
    states = ", ".join(f"{n} {s}" for s, n in sorted(by_state.items())) or "none"
    console.print(f"{len(jobs)} cron job(s): {states}")
    if stop is not None:
        console.print(f"[red]Emergency stop engaged[/red] since {format_instant(stop.since, default_zone(app.settings.timezone))}"
                      " — no job starts until `vigil resume`.")
    for label, group in (("next", upcoming[:5]), ("running", running), ("failing", failing)):
        for job in group:
            console.print(f"{label:<8} {_shown(job_line(job, now))}")
            if label == "failing":
                for line in error_lines(job.last_error):
                    console.print(f"{'':9}{_shown(line)}")
    for key in repo.damaged():
        console.print(f"[red]damaged[/red] {_shown(key)} (remove it with `vigil cron remove`)")


@cron.command("run")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the run record as JSON.")
@pass_app
@_friendly
def run_cmd(app: AppContext, name: str, as_json: bool) -> None:
    """Run a job now, in this process.

    Its schedule is not disturbed.

    Ctrl-C, SIGTERM or SIGHUP stop the run (recorded as interrupted; exit 128 + signal)."""
    repo = _repo(app)
    repo.get(name)
    try:
        record = run_stoppable(run_now(app, repo, name))
    except Stopped as stop:
        say(f"Stopped by {stop.name}: a run that had begun is recorded as interrupted (see `vigil cron runs {name}`).")
        sys.exit(stop.exit_code)
    if record is None:
        raise click.ClickException("the emergency stop is engaged: nothing was run (`vigil resume` releases it)")
    if as_json:
        echo_json(run_to_json(record))
    elif record.status == "failed":
        console.print(f"[red]failed[/red]: {_shown(record.error or '')}")
    else:
        click.echo(record.answer or "")
        path = (record.delivery or {}).get("path")
        click.echo(f"{run_status(record)}; session {record.session_id}" + (f"; saved to {path}" if path else ""),
                   err=True)
        if delivery_problem(record) is not None:
            click.echo(f"vigil cron: {visible(run_output(record))}", err=True)
    if record.status == "failed":
        sys.exit(1)


@cron.command("tick")
@click.option("--json", "as_json", is_flag=True, help="Print what happened as JSON.")
@pass_app
@_friendly
def tick_cmd(app: AppContext, as_json: bool) -> None:
    """Run whatever is due now, once, and exit.

    Meant for a system crontab.

    Ctrl-C, SIGTERM or SIGHUP stop the runs (recorded as interrupted; exit 128 + signal)."""
    repo = _repo(app)
    try:
        report = run_stoppable(tick(app, repo))
    except Stopped as stop:
        say(f"Stopped by {stop.name}: runs that had begun are recorded as interrupted.")
        sys.exit(stop.exit_code)
    if as_json:
        echo_json({
            "stopped": report.stopped,
            "runs": [run_to_json(r) for r in report.runs],
            "skipped": [run_to_json(r) for r in report.skipped],
        })
        return
    if report.stopped:
        console.print("Emergency stop engaged: nothing was run.")
        return
    zones = {job.name: job.schedule.tz for job in repo.list()}
    for record in (*report.runs, *report.skipped):
        console.print(_shown(run_line(record, zones.get(record.job, "UTC"))))
    if not report.runs and not report.skipped:
        console.print("Nothing due.")


COMMANDS = [cron]
