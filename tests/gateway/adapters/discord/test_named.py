"""The registry's promise for Discord (issue 28): outside its own folders (the adapter, the fake
server, its declaration) the platform is named in at most two files — the registry's list and
config's section — so the word appears in at most three files outside the two folders."""

from __future__ import annotations

from pathlib import Path

import vigil

OWN = ("gateway/adapters/discord/", "testing/discord_api/")


def test_discord_is_named_in_at_most_three_files_outside_its_own_folders() -> None:
    package = Path(vigil.__file__).parent
    naming = sorted(
        str(path.relative_to(package)) for path in package.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
        and not any(part in str(path.relative_to(package)) for part in OWN)
        and "discord" in path.read_text(errors="replace").lower()
    )
    assert len(naming) <= 3, naming  # now: config/settings.py, platforms/__init__.py, platforms/discord.py
