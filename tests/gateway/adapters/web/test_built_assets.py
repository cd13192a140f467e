"""The web chat's built page (``ui/``, committed so that installing vigil needs no Node) is the
build of the sources in ``frontend/`` as they are: a change there without ``npm run build``, or
a built file edited by hand, fails here. The hash is the one ``frontend/scripts/stamp.mjs``
records."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from vigil.gateway.adapters.web.pages import STATIC_DIR

REPO = Path(__file__).resolve().parents[4]
FRONTEND = REPO / "frontend"
SOURCES = ("src", "public", "package.json", "package-lock.json", "vite.config.js")
REBUILD = "the built web chat is stale: run `npm ci && npm run build` in frontend/ and commit ui/"


def source_hash() -> str:
    files: list[tuple[str, Path]] = []
    for name in SOURCES:
        path = FRONTEND / name
        found = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        files += [(p.relative_to(FRONTEND).as_posix(), p) for p in found]
    digest = hashlib.sha256()
    for name, path in sorted(files):
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


@pytest.fixture
def build_info() -> dict:
    if not FRONTEND.is_dir():
        pytest.skip("no frontend/ sources here (an installed package)")
    return json.loads((STATIC_DIR / "build-info.json").read_text())


def test_the_built_page_is_the_build_of_the_sources(build_info: dict) -> None:
    assert build_info["sources"] == source_hash(), REBUILD


def test_the_built_files_are_as_built(build_info: dict) -> None:
    built = {p.relative_to(STATIC_DIR).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
             for p in STATIC_DIR.rglob("*") if p.is_file() and p.name != "build-info.json"}
    assert built == build_info["files"], REBUILD
    assert {"index.html", "app.js", "style.css"} <= set(built)
