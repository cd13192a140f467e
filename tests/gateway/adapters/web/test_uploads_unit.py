"""Uploads: names made safe, collisions suffixed, the size cap enforced while streaming."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import AsyncIterator

import pytest

from vigil.gateway.adapters.saved_files import safe_name
from vigil.gateway.adapters.web.uploads import UploadError, save_upload

BOUNDARY = "xyzBOUNDARYxyz"
CONTENT_TYPE = f"multipart/form-data; boundary={BOUNDARY}"


def _body(filename: str, data: bytes, field: str = "file") -> bytes:
    return (
        f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{field}\"; filename=\"{filename}\"\r\n"
        f"Content-Type: application/octet-stream\r\n\r\n"
    ).encode() + data + f"\r\n--{BOUNDARY}--\r\n".encode()


async def _chunks(body: bytes, size: int = 7) -> AsyncIterator[bytes]:
    for start in range(0, len(body), size):
        yield body[start:start + size]


@pytest.mark.parametrize(("raw", "safe"), [
    ("notes.txt", "notes.txt"),
    ("../../etc/passwd", "passwd"),
    ("C:\\Users\\me\\report.pdf", "report.pdf"),
    ("..hidden", "hidden"),
    (".bashrc", "bashrc"),
    ("a\x00b\nc.txt", "a_b_c.txt"),
    ("...", "upload"),
    ("", "upload"),
    ("dir/", "upload"),
])
def test_names_lose_directories_separators_and_leading_dots(raw: str, safe: str) -> None:
    assert safe_name(raw) == safe


def test_a_very_long_name_keeps_its_extension() -> None:
    name = safe_name("x" * 500 + ".tar")
    assert len(name) <= 200 and name.endswith(".tar")


async def test_a_file_is_streamed_into_the_directory_and_a_collision_gets_a_suffix(tmp_path: Path) -> None:
    first = await save_upload(CONTENT_TYPE, _chunks(_body("../data.csv", b"a,b\n1,2\n")), tmp_path, max_bytes=100)
    second = await save_upload(CONTENT_TYPE, _chunks(_body("data.csv", b"second")), tmp_path, max_bytes=100)
    assert (first.name, first.size, first.path.read_bytes()) == ("data.csv", 8, b"a,b\n1,2\n")
    assert (second.name, second.path.read_bytes()) == ("data (2).csv", b"second")
    assert first.path.parent == tmp_path and stat.S_IMODE(first.path.stat().st_mode) == 0o600


async def test_a_file_over_the_cap_is_refused_and_nothing_is_left(tmp_path: Path) -> None:
    with pytest.raises(UploadError) as refused:
        await save_upload(CONTENT_TYPE, _chunks(_body("big.bin", b"x" * 101)), tmp_path, max_bytes=100)
    assert refused.value.status == 413
    assert list(tmp_path.iterdir()) == []
    exact = await save_upload(CONTENT_TYPE, _chunks(_body("big.bin", b"x" * 100)), tmp_path, max_bytes=100)
    assert exact.size == 100


@pytest.mark.parametrize("content_type", ["application/json", "multipart/form-data", "text/plain; boundary=x"])
async def test_a_body_that_is_not_multipart_is_refused(tmp_path: Path, content_type: str) -> None:
    with pytest.raises(UploadError) as refused:
        await save_upload(content_type, _chunks(b"{}"), tmp_path, max_bytes=100)
    assert refused.value.status == 400


async def test_a_body_without_a_file_field_or_cut_short_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(UploadError):
        await save_upload(CONTENT_TYPE, _chunks(_body("a.txt", b"data", field="other")), tmp_path, max_bytes=100)
    cut = _body("a.txt", b"data that never ends")[:-20]
    with pytest.raises(UploadError):
        await save_upload(CONTENT_TYPE, _chunks(cut), tmp_path, max_bytes=100)
    assert list(tmp_path.iterdir()) == []
