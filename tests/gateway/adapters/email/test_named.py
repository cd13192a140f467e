"""The registry's promise for Email (issue 28): outside its adapter folder the platform is named
in at most three files — its declaration, the registry's list and config's section. "email" is
also a word and Python's mail package (``email.utils``), so what counts here is naming the
platform: its modules, its settings class and section, its registry entry and its route name."""

from __future__ import annotations

import re
from pathlib import Path

import vigil

NAMING = re.compile(
    r"platforms\.email|adapters\.email|EmailSettings|\bEMAIL\b|[\"']email[\"']|"
    r"\bemail\.(?:enabled|address|smtp_url|imap_url|allow|password_env|mailbox|poll_seconds|username)\b"
    r"|\bemail:<"
)


def test_email_is_named_in_at_most_three_files_outside_its_own_folder() -> None:
    package = Path(vigil.__file__).parent
    naming = sorted(
        str(path.relative_to(package)) for path in package.rglob("*.py")
        if "__pycache__" not in path.parts and not str(path.relative_to(package)).startswith("gateway/adapters/email/")
        and NAMING.search(path.read_text(errors="replace"))
    )
    assert len(naming) <= 3, naming  # now: config.py, platforms/__init__.py, platforms/email.py
