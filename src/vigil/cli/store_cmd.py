"""``vigil store migrate``: copy the profile's SQLite session store into PostgreSQL."""

from __future__ import annotations

import shlex
from typing import Any, Sequence

import click
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from vigil.cli.context import AppContext, pass_app
from vigil.cli.render import console, echo_json, err_console
from vigil.masking import mask_secrets, printable


@click.group()
def store() -> None:
    """Move the profile's session store.

    `vigil store migrate --to postgresql://USER@HOST/DB?schema=NAME` copies the profile's SQLite
    store into PostgreSQL and verifies the copy.
    """


@store.command("migrate")
@click.option(
    "--to", "url", required=True, metavar="URL",
    help="The PostgreSQL database to copy into: postgresql://USER@HOST/DB, ?schema=NAME picks the "
    "schema (default vigil); it is created if missing.",
)
@click.option("--force", is_flag=True, help="If the target already holds vigil data, empty its vigil tables first.")
@click.option("--switch", is_flag=True, help="After a verified copy, set store.url in config.yaml to the target.")
@click.option("--json", "as_json", is_flag=True, help="Print the final report as JSON (progress still goes to stderr).")
@pass_app
def migrate_cmd(app: AppContext, url: str, force: bool, switch: bool, as_json: bool) -> None:
    """Copy the profile's SQLite session store into PostgreSQL.

    Everything the store holds is copied: sessions with their compression continuations,
    messages, system prompts, heartbeats, leases, cron jobs and runs and other state records,
    the gateway's routes, inbox and outbox, and pairing codes and users; PostgreSQL's search
    index is built as the messages arrive. Then every table is counted and hashed on both sides
    and the comparison printed; any difference exits 1 naming the table. The SQLite store is
    only read; stop the gateway first, so that nothing it writes is left behind.

    A target that already holds vigil data is refused unless --force, which empties its vigil
    tables first. An interrupted migrate (Ctrl-C, a crash, a lost connection) is finished by
    running the same command again: it copies only what is still missing.

    config.yaml is not changed unless --switch is given; otherwise the `vigil config set
    store.url ...` command that switches the profile is printed.
    """
    from vigil.store.transfer.errors import TargetNotEmpty
    from vigil.store.transfer.migrate import migrate
    from vigil.store.transfer.target import check_url

    check_url(url)
    source = _sqlite_store_of(app)
    _refuse_running_gateway(app)
    progress = _BarProgress() if err_console.is_terminal else _LineProgress()
    try:
        try:
            report = migrate(source, url, force=force, progress=progress)
        finally:
            progress.stop()
    except TargetNotEmpty as exc:
        refusal = click.ClickException(str(exc))
        refusal.vigil_kind = "refused"  # type: ignore[attr-defined]
        raise refusal from None
    except KeyboardInterrupt:
        err_console.print(
            "Interrupted: the rows copied so far are kept; run the same command again to finish.", markup=False
        )
        raise click.exceptions.Exit(130) from None
    switch_command = _switch_command(app, url)
    switched = False
    if report.ok and switch:
        from vigil.config.errors import ConfigError
        from vigil.config.editing import set_value

        try:
            set_value(app.profile.config_path, "store.url", url)
        except ConfigError as exc:
            raise click.ClickException(
                f"the copy is verified, but config.yaml was not changed ({exc}); switch with {switch_command}"
            ) from None
        switched = True
    if as_json:
        echo_json(_report_json(report, switched, switch_command))
        if not report.ok:
            raise click.exceptions.Exit(1)
        return
    console.print(_table(report))
    if not report.ok:
        raise click.ClickException(
            f"the copy in schema '{report.schema}' differs from the source in {', '.join(report.mismatched)} "
            "(did something write to either store meanwhile?); run the same command to verify again, or add "
            "--force to copy afresh"
        )
    console.print(f"Verified: all {len(report.tables)} tables match.", markup=False)
    if switched:
        console.print(f"Switched: store.url = {_shown_url(url)} in {app.profile.config_path}", markup=False)
    else:
        console.print(f"To use it: {switch_command}", markup=False)
        if "***" in switch_command and "***" not in url:
            console.print("(put the password back where *** is, or keep it in ~/.pgpass)", markup=False)


def _sqlite_store_of(app: AppContext) -> Any:
    """The path of the profile's SQLite store; a one-line error when it uses PostgreSQL."""
    from vigil.config.store_location import store_location

    configured = app.settings.store.url
    if not configured:
        return app.profile.state_db
    where = store_location(configured)
    if isinstance(where, str):
        raise click.ClickException(
            f"profile '{app.profile.name}' already keeps its sessions in PostgreSQL "
            f"({printable(mask_secrets(configured))}); `vigil store migrate` copies an SQLite store"
        )
    return where


def _refuse_running_gateway(app: AppContext) -> None:
    from vigil.gateway.install import unit_name
    from vigil.gateway.lock import LockUnavailable, is_locked

    try:
        pid = is_locked(app.profile)
    except LockUnavailable:
        return  # the gateway could not run with that lock file either
    if pid is not None:
        stop = f"systemctl --user stop {unit_name(app.profile)}"
        raise click.ClickException(
            f"a gateway is running for profile '{app.profile.name}'{f' (pid {pid})' if pid else ''}: stop it "
            f"first ({f'kill {pid} / ' if pid else ''}{stop}), so that nothing it writes during the copy is left behind"
        )


def _switch_command(app: AppContext, url: str) -> str:
    """The exact command that points the profile at the target (a password shown as ***)."""
    profile = [] if app.profile.name == "default" else ["-p", app.profile.name]
    return shlex.join(["vigil", *profile, "config", "set", "store.url", _shown_url(url)])


def _shown_url(url: str) -> str:
    """``url`` as typed, but for its password (if it holds one), which becomes ``***``."""
    from vigil.store.transfer.target import check_url

    shown = url
    for secret in check_url(url).secrets:
        shown = shown.replace(secret, "***")
    return shown


def _report_json(report: Any, switched: bool, switch_command: str) -> dict[str, Any]:
    return {
        "ok": report.ok,
        "source": report.source,
        "target": report.target,
        "schema": report.schema,
        "resumed": report.resumed,
        "emptied": report.emptied,
        "switched": switched,
        "switch_command": None if switched else switch_command,
        "mismatched": report.mismatched,
        "tables": [
            {
                "table": check.name,
                "source_count": check.source_rows,
                "target_count": check.target_rows,
                "copied": check.copied,
                "source_hash": check.source_hash,
                "target_hash": check.target_hash,
                "hash_match": check.source_hash == check.target_hash,
                "match": check.matches,
            }
            for check in report.tables
        ],
    }


def _table(report: Any) -> Table:
    table = Table(
        title=f"Rows and content hash per table: {report.source} -> schema '{report.schema}' at {report.target}",
        title_justify="left",
    )
    table.add_column("table", no_wrap=True)
    for heading in ("source", "target", "copied"):  # rows
        table.add_column(heading, justify="right", no_wrap=True)
    table.add_column("hash", no_wrap=True)
    table.add_column("", no_wrap=True)
    for check in report.tables:
        digest = check.source_hash[:10] if check.source_hash == check.target_hash else "differs"
        verdict = "[green]ok[/green]" if check.matches else "[bold red]MISMATCH[/bold red]"
        table.add_row(escape(check.name), f"{check.source_rows:,}", f"{check.target_rows:,}", f"{check.copied:,}",
                      digest, verdict)
    return table


def _opening_line(resumed: bool, emptied: bool, where: str) -> str | None:
    if emptied:
        return f"Emptied the vigil tables at {where} first (--force)."
    if resumed:
        return f"Resuming the unfinished migrate into {where}: copying only what is missing."
    return None


class _LineProgress:
    """Plain progress for a log or a pipe: one line per copied table, on stderr."""

    def __init__(self) -> None:
        self._plans: dict[str, Any] = {}
        self._copied: dict[str, int] = {}

    def opened(self, *, resumed: bool, emptied: bool, where: str) -> None:
        if line := _opening_line(resumed, emptied, where):
            err_console.print(line, markup=False)

    def planned(self, plans: Sequence[Any]) -> None:
        self._plans = {plan.name: plan for plan in plans}

    def advanced(self, table: str, rows: int) -> None:
        self._copied[table] = self._copied.get(table, 0) + rows

    def copied(self, table: str) -> None:
        plan = self._plans[table]
        already = f" ({plan.already:,} already there)" if plan.already else ""
        err_console.print(f"{table}: {self._copied.get(table, 0):,} of {plan.total:,} rows copied{already}",
                          markup=False)

    def verifying(self, table: str) -> None:
        pass

    def stop(self) -> None:
        pass


class _BarProgress:
    """A rich progress bar per table (rows copied of the total), then one for the verification."""

    def __init__(self) -> None:
        self._bars = Progress(
            TextColumn("{task.description}", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err_console,
        )
        self._tasks: dict[str, TaskID] = {}
        self._verify: TaskID | None = None
        self._verifying = False

    def opened(self, *, resumed: bool, emptied: bool, where: str) -> None:
        if line := _opening_line(resumed, emptied, where):
            err_console.print(line, markup=False)

    def planned(self, plans: Sequence[Any]) -> None:
        width = max(len(plan.name) for plan in plans)
        for plan in plans:
            self._tasks[plan.name] = self._bars.add_task(plan.name.ljust(width), total=plan.total,
                                                         completed=plan.already)
        self._verify = self._bars.add_task("verify".ljust(width), total=len(plans))
        self._bars.start()

    def advanced(self, table: str, rows: int) -> None:
        self._bars.advance(self._tasks[table], rows)

    def copied(self, table: str) -> None:
        task = self._tasks[table]
        self._bars.update(task, completed=self._bars.tasks[task].total)

    def verifying(self, table: str) -> None:
        if self._verify is not None:
            if self._verifying:
                self._bars.advance(self._verify, 1)
            self._verifying = True

    def stop(self) -> None:
        if self._verify is not None and self._verifying:
            self._bars.advance(self._verify, 1)
        self._bars.stop()
