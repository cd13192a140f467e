"""``vigil doctor``: what is wrong with this profile's setup, and what to do about it."""

from __future__ import annotations

from collections import Counter

import click
from rich.markup import escape
from rich.table import Table

from vigil.cli.context import AppContext, pass_app
from vigil.cli.render import console, echo_json, visible
from vigil.doctor import STATUSES, CheckResult, find_profile, run_checks

_STYLE = {"ok": "green", "warning": "yellow", "problem": "red", "skipped": "dim"}


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (for scripts).")
@pass_app
def doctor(app: AppContext, as_json: bool) -> None:
    """Check the setup and say what to fix.

    \b
    Checks, each with a short time bound:
      config    config.yaml is readable and valid
      store     reachable; schema version and pending migrations; SQLite: WAL mode,
                file permissions, free disk space; PostgreSQL: server version,
                a pooled connection and its round trip; damaged stored prompts
      platforms the secrets of enabled messaging platforms are set (names only,
                never values) and their SDK imports
      sandbox   bubblewrap is installed and can run
      model     an endpoint is configured and answers GET /models (provider local:
                the GGUF file exists and xllamacpp imports; the model is not loaded)
      gateway   whether one runs; the web login token file is private

    Doctor only reads: it never writes, creates or migrates anything. Each line is ok,
    warning or problem (or skipped, when config.yaml is broken), with a fix for the
    others. Exit code 1 when there is a problem, 0 otherwise (warnings allowed).
    """
    results = run_checks(find_profile(app.profile_name))
    failed = any(r.status == "problem" for r in results)
    counts = Counter(r.status for r in results)
    if as_json:
        echo_json(
            {
                "ok": not failed,
                "counts": {s: counts.get(s, 0) for s in STATUSES},
                "checks": [r.as_dict() for r in results],
            }
        )
    elif console.is_terminal:
        _table(results)
    else:
        for result in results:
            click.echo(_plain(result))
    if not as_json:
        click.echo(_summary(counts))
    if failed:
        raise click.exceptions.Exit(1)


def _plain(result: CheckResult) -> str:
    line = f"{result.status:<8} {result.area}: {result.name}: {visible(result.detail)}"
    return line + (f"\n         fix: {visible(result.fix)}" if result.fix else "")


def _table(results: list[CheckResult]) -> None:
    table = Table("status", "check", "found", box=None, show_edge=False)
    for result in results:
        style = _STYLE[result.status]
        found = escape(visible(result.detail))
        if result.fix:
            found += f"\n[bold]fix:[/bold] {escape(visible(result.fix))}"
        table.add_row(f"[{style}]{result.status}[/{style}]", escape(f"{result.area}: {result.name}"), found)
    console.print(table)


def _summary(counts: Counter[str]) -> str:
    """``12 ok, 1 warning, 0 problems`` (skipped only when there are some)."""
    parts = []
    for status in STATUSES:
        n = counts.get(status, 0)
        if n or status in ("ok", "problem"):
            parts.append(f"{n} {status}" if status in ("ok", "skipped") or n == 1 else f"{n} {status}s")
    return ", ".join(parts)
