"""One way for every destructive command to ask before it acts: ``-y/--yes`` or a person's answer.

With a terminal on stdin the command asks; ``--yes`` skips the question. Without a terminal
(a script, a pipe, cron) there is nobody to answer, so the command refuses unless ``--yes``
was given, rather than reading an answer out of whatever stdin happens to hold.
"""

from __future__ import annotations

import sys
from typing import Callable, TypeVar

import click

F = TypeVar("F", bound=Callable[..., object])


def yes_option(command: F) -> F:
    """The ``-y/--yes`` flag of a destructive command (passed as ``yes``)."""
    return click.option(
        "-y", "--yes", is_flag=True, help="Do not ask for confirmation (needed without a terminal)."
    )(command)


def confirm_or_refuse(question: str, *, yes: bool, action: str) -> None:
    """Return when the user agreed to ``question`` (or gave ``--yes``); otherwise stop the command.

    ``action`` names what would happen (``"delete session 3fa2..."``) for the refusal without a
    terminal. A "no" at the prompt aborts (exit 1) with nothing changed.
    """
    if yes:
        return
    if not sys.stdin.isatty():
        raise click.ClickException(
            f"not asking without a terminal: nothing was done; to {action}, add --yes"
        )
    click.confirm(question, abort=True, err=True)
