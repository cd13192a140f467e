"""``vigil chat``: the interactive REPL, or one-shot answers with ``-q``."""

from __future__ import annotations

import asyncio
import io
import signal
import sys
from typing import BinaryIO

import click
from rich.markup import escape

from vigil.agent.events import TextDelta, TurnEvent
from vigil.agent.turn import Agent
from vigil.cli.arguments import SESSION_REF
from vigil.cli.context import AppContext, pass_app
from vigil.cli.render import console, err_console
from vigil.cli.signals import STOP_SIGNALS, Stopped, run_stoppable
from vigil.models.base import ModelError
from vigil.models.factory import build_client
from vigil.runtime.controller import ConversationController


@click.command()
@click.option("-q", "--query", help="Ask one question, print the answer and exit ('-': read it from standard input).")
@click.option("-r", "--resume", "resume_ref", metavar="ID", type=SESSION_REF, help="Continue a stored conversation (id or prefix).")
@click.option("-c", "--continue", "continue_latest", is_flag=True, help="Continue the latest conversation.")
@click.option("--no-stream", is_flag=True, help="Print answers whole instead of streaming them.")
@pass_app
def chat(
    app: AppContext,
    query: str | None,
    resume_ref: str | None,
    continue_latest: bool,
    no_stream: bool,
) -> None:
    """Talk to the agent.

    Without -q this opens the interactive REPL (type /help there). The conversation is stored
    as it happens; leave with /quit or Ctrl-D and pick it up again with --continue.

    \b
    Standard input (no prompt is shown, answers go to stdout):
      echo "question" | vigil chat -q -   all of it is one message
      vigil chat < questions.txt          one turn per non-blank line, as if
                                          typed at the prompt (/quit stops)

    Commands the agent runs go into a sandbox (README, "What the agent may run on its own");
    leaving it takes your approval at the terminal. Without a terminal nobody can approve
    anything: such runs are unattended and nothing leaves the sandbox.
    """
    if resume_ref is not None and continue_latest:
        raise click.UsageError("use either --resume or --continue, not both")
    if query is not None and not query.strip():
        raise click.UsageError("the question given with -q is empty")
    stdin = _binary_stdin()
    piped = False
    if query == "-":
        from vigil.cli.chat_stdin import read_message

        query = read_message(stdin)
    elif query is None and not stdin.isatty():
        piped = True
    # The REPL handles Ctrl-C itself (it interrupts the running turn); SIGTERM and SIGHUP stop it.
    signals = STOP_SIGNALS if query is not None or piped else (signal.SIGTERM, signal.SIGHUP)
    try:
        exit_code = run_stoppable(
            _chat(app, query, resume_ref, continue_latest, not no_stream, piped=piped), signals=signals
        )
    except Stopped as stop:
        _say(f"[yellow]Stopped by {stop.name}.[/yellow]")
        sys.exit(stop.exit_code)
    if exit_code:
        sys.exit(exit_code)


def _say(markup: str) -> None:
    try:
        err_console.print(markup)
    except OSError:  # the terminal went away (SIGHUP)
        pass


async def _chat(
    app: AppContext,
    query: str | None,
    resume_ref: str | None,
    continue_latest: bool,
    stream: bool,
    *,
    piped: bool = False,
) -> int:
    store = app.store
    session_id: str | None = None
    if resume_ref is not None:
        session_id = store.newest_continuation(store.resolve_session(resume_ref))
    elif continue_latest:
        latest = [c for c in store.list_conversations() if c.head.source != "cron"][:1]
        if not latest:
            raise click.ClickException("there is no conversation to continue yet")
        session_id = latest[0].head.id
    try:
        client = await build_client(app.settings.model, home=app.profile.home)
    except ModelError as exc:
        raise click.ClickException(str(exc)) from None
    if notice := getattr(client, "notice", None):
        err_console.print(f"[yellow]{escape(notice)}[/yellow]")
    approve = None
    if query is None and not piped:
        from vigil.cli.repl import ask_approval

        approve = ask_approval
    elif sys.stdin.isatty() and sys.stderr.isatty():
        approve = _ask_on_stderr  # -q with a person at the terminal: ask them instead of refusing
    agent = Agent(store=store, client=client, profile=app.profile, settings=app.settings, approve=approve)
    controller = ConversationController(agent, session_id=session_id)
    if session_id is not None:
        await controller.resume(session_id)
    try:
        if query is not None:
            return await _one_shot(controller, query, stream)
        if piped:
            return await _piped(controller, stream)
        return await _interactive(app, controller, stream)
    finally:
        await client.aclose()


async def _ask_on_stderr(tool: str, description: str) -> bool:
    """Ask the person at the terminal (on stderr, so that stdout keeps only the answer)."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.output import create_output
    from rich.markup import escape

    err_console.print(f"[bold yellow]⚠ {escape(tool)} needs approval:[/bold yellow] {escape(description)}")
    try:
        answer = await PromptSession(output=create_output(stdout=sys.stderr)).prompt_async("Allow it? [y/N] ")
    except (EOFError, KeyboardInterrupt):
        return False
    return answer.strip().lower() in ("y", "yes")


async def _interactive(app: AppContext, controller: ConversationController, stream: bool) -> int:
    """The REPL, with the conversation runtime and the heartbeat scheduler running behind it:
    this process owns the open conversation's heartbeat while it runs. Opening a conversation
    takes its heartbeat lease over (from a gateway too); leaving it (/new, /resume, /suspend,
    the end of the REPL) releases it, and the gateway runs the heartbeat from then on."""
    from vigil.cli.repl import Repl
    from vigil.runtime.conversation import Conversation
    from vigil.schedule.heartbeat.lease import REPL, LeaseBook
    from vigil.schedule.heartbeat.scheduler import HeartbeatScheduler

    clock = controller.agent.clock
    leases = LeaseBook(app.store, clock, kind=REPL)
    scheduler = HeartbeatScheduler(
        app.store, clock=clock, leases=leases, daily_token_budget=app.settings.heartbeat.daily_token_budget
    )
    # A heartbeat vigil ended or paused by itself: its note is stored; show it here too.
    scheduler.on_note = lambda noted: console.print(f"\n[magenta]{escape(noted.text)}[/magenta]")
    conversation = Conversation(controller, scheduler=scheduler)
    await scheduler.start()
    await conversation.start()
    try:
        return await Repl(conversation, app.profile, stream=stream).run()
    finally:
        await conversation.close()
        await scheduler.stop()


async def _one_shot(controller: ConversationController, query: str, stream: bool) -> int:
    code = await _answer(controller, query, stream)
    if code != 1 and controller.session_id:
        err_console.print(f"[dim]session {controller.session_id}[/dim]")
    return code


async def _piped(controller: ConversationController, stream: bool) -> int:
    """One turn per non-blank line of standard input (see :mod:`vigil.cli.chat_stdin`).
    A failed turn stops the run (exit 1; later lines are not sent); the exit code is
    otherwise the worst one seen (2: a turn ended without an answer)."""
    from vigil.cli.chat_stdin import lines_of

    worst = 0
    async for line in lines_of(_binary_stdin()):
        if not line.strip():
            continue
        if controller.is_command(line):
            reply = await controller.command(line)
            if reply.is_error:
                err_console.print(f"[red]{escape(reply.text)}[/red]")
                worst = max(worst, 1)
            elif reply.text:
                click.echo(reply.text)
            if reply.action == "quit":
                break
            continue
        code = await _answer(controller, line, stream)
        if code == 1:
            err_console.print("[dim]the rest of standard input was not sent[/dim]")
            return 1
        worst = max(worst, code)
    if controller.session_id:
        err_console.print(f"[dim]session {controller.session_id}[/dim]")
    return worst


async def _answer(controller: ConversationController, query: str, stream: bool) -> int:
    """Run one turn and print its answer on stdout: 0 answered, 2 ended without an answer,
    1 failed (said on stderr)."""
    streamed = stream and sys.stdout.isatty()
    wrote: list[str] = []

    def on_event(event: TurnEvent) -> None:
        if streamed and isinstance(event, TextDelta):
            wrote.append(event.text)
            sys.stdout.write(event.text)
            sys.stdout.flush()

    try:
        result = await controller.turn(query, on_event=on_event)
    except asyncio.CancelledError:  # stopped by a signal: what was stored is kept
        if wrote:
            sys.stdout.write("\n")
        if controller.session_id:
            _say(f"[dim]session {controller.session_id} is kept[/dim]")
        raise
    except ModelError as exc:
        if wrote:
            sys.stdout.write("\n")
        err_console.print(f"[red]Error:[/red] {escape(str(exc))}")
        if controller.session_id:
            err_console.print(f"[dim]session {controller.session_id} is kept[/dim]")
        return 1
    if streamed and wrote:
        sys.stdout.write("\n")
    else:
        click.echo(result.answer)
    return 0 if result.stop == "answered" else 2


def _binary_stdin() -> BinaryIO:
    """Standard input as bytes (an empty stream when the process has none)."""
    stream = getattr(sys.stdin, "buffer", None)
    return stream if stream is not None else io.BytesIO()


COMMANDS = [chat]
