"""Recognise shell commands that can wreck the machine, so the terminal tool asks first.

The command line is parsed, not pattern-matched: every simple command it would run (in lists,
pipelines, subshells, loops, functions and their calls, command and process substitutions,
here-documents, and inside ``sh -c``/``eval`` strings and the commands other programs take as
text, such as ``script -c`` or a git alias) is evaluated and looked through its wrappers
(``sudo``, ``env``, ``xargs`` with what it reads ...), then checked against the list of dangerous
forms in :mod:`vigil.tools.shell.policy`. A line that cannot be parsed with confidence counts as
dangerous, and so does a program the gate does not know given what looks like a dangerous command.

This is a seat belt against a model's slip, not a sandbox: a parser cannot see what an
interpreter (``python3 -c``, ``perl -e``, a script file) does, which is why unattended runs also
execute commands in a sandbox (README, "What the agent may run on its own").
"""

from __future__ import annotations

from vigil.tools.shell.policy import check_line


def check(command: str) -> str | None:
    """Why ``command`` needs the user's approval (a short phrase that completes "a command
    that ..."), or ``None`` if it looks ordinary."""
    return check_line(command)
