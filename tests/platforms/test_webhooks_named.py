"""The registry check of ``test_registry`` for the Webhooks platform: it is named in at most
three files outside its own folders (its declaration, the registry's list, config's section).

"webhooks" is also a plain word, and the gateway's docstrings and help texts use it for any
platform's HTTP callbacks (Slack's events, Telegram's webhook mode) — so a file counts when it
names the *platform* in code: an identifier ``webhooks``/``WEBHOOKS``/``Webhooks…``, or a string
that is the platform's name, a key of its section (``webhooks.enabled``), a cron target
(``webhooks:ha``) or its module's path; prose does not count."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import vigil

NAME = "webhooks"
OWN = ("gateway/adapters/webhooks/", "testing/webhooks_api/")
_CODE_STRING = re.compile(r"^webhooks(?:[.:][A-Za-z_<]\S*)?$|(?:platforms|adapters)\.webhooks\b")
_TEXT = re.compile(r"(?<![\w-])webhooks[.:][A-Za-z_]|[\"']webhooks[\"']|(?:platforms|adapters)\.webhooks\b")


def names_the_platform(path: Path) -> bool:
    """Whether the file names the platform in code (see the module docstring)."""
    text = path.read_text(errors="replace")
    if NAME not in text.lower():
        return False
    if path.suffix != ".py":
        return bool(_TEXT.search(text))
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.NAME and (token.string in (NAME, NAME.upper()) or token.string.startswith("Webhooks")):
            return True
        if token.type == tokenize.STRING:
            literal = re.sub(r"^[A-Za-z]*('''|\"\"\"|'|\")|('''|\"\"\"|'|\")$", "", token.string)
            if _CODE_STRING.search(literal.strip()) and len(literal) < 200:
                return True
    return False


def test_the_check_tells_prose_from_code(tmp_path: Path) -> None:
    prose = tmp_path / "prose.py"
    prose.write_text('"""The web chat, webhooks, /healthz."""\nX = "port of the API and webhooks"\n'
                     "async def _deliver_webhooks(): ...\n")
    assert not names_the_platform(prose)
    for code in ("from vigil.platforms.webhooks import WEBHOOKS\n", "x = settings.webhooks\n",
                 'TARGET = "webhooks:ha"\n', 'KEY = "webhooks.enabled"\n', "class WebhooksSettings: ...\n"):
        (tmp_path / "code.py").write_text(code)
        assert names_the_platform(tmp_path / "code.py"), code


def test_webhooks_is_named_in_at_most_three_files_outside_its_own_folders() -> None:
    package = Path(vigil.__file__).parent
    naming = sorted(
        str(path.relative_to(package)) for path in package.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
        and not any(part in str(path.relative_to(package)) for part in OWN)
        and names_the_platform(path)
    )
    # its declaration, the registry's list, and config's section
    assert len(naming) <= 3, naming
    assert set(naming) <= {"platforms/webhooks.py", "platforms/__init__.py", "config/settings.py"}, naming
