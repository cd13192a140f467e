"""ARCHITECTURE.md stays true to the tree: every path it names exists (a new platform's
folders, which it describes as examples to create, excepted)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ("discord",)
"""Names the "where a change goes" section uses for things to be made."""


def named_paths() -> list[str]:
    text = (ROOT / "ARCHITECTURE.md").read_text()
    found = re.findall(r"`((?:\.\./)?[\w./-]+/[\w./<>-]*|[\w-]+\.(?:py|md))`", text)
    return sorted({path for path in found if "<" not in path and not any(name in path for name in EXAMPLES)})


def test_every_path_architecture_md_names_exists() -> None:
    paths = named_paths()
    assert len(paths) > 40  # the parser still finds them
    missing = [path for path in paths if not (ROOT / path).exists()]
    assert missing == []


def test_it_says_where_a_discord_adapter_goes() -> None:
    text = (ROOT / "ARCHITECTURE.md").read_text()
    assert "src/vigil/gateway/adapters/discord/" in text and "src/vigil/platforms/discord.py" in text
