"""The gateway's HTTP server answers an error no route answered in JSON: 503 with the reason when
the store cannot be used, 500 otherwise, the traceback in gateway.log and never on the console."""

from __future__ import annotations

from pathlib import Path
from typing import AsyncIterator

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from vigil.clock import SystemClock
from vigil.gateway.activity import GatewayActivity
from vigil.gateway.http import HttpServer, listen, routes_app
from vigil.store.errors import StoreUnwritable


async def _broken(request: Request) -> Response:
    raise RuntimeError("a bug in a route")


async def _full(request: Request) -> Response:
    raise StoreUnwritable("disk full: no space left on the file system holding /srv/state.db")


async def _stream_then_break(request: Request) -> Response:
    async def body() -> AsyncIterator[bytes]:
        yield b"data: one\n\n"
        raise RuntimeError("broke mid-stream")

    return StreamingResponse(body(), media_type="text/event-stream")


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[str, list[str], Path]]:
    said: list[str] = []
    log = tmp_path / "logs" / "gateway.log"
    activity = GatewayActivity(said.append, log, clock=SystemClock(), zone="UTC")
    routes = [Route("/broken", _broken), Route("/full", _full, methods=["POST"]), Route("/stream", _stream_then_break)]
    server = HttpServer(routes_app(routes), listen("127.0.0.1", 0), report=activity.failure)
    await server.start()
    yield server.url, said, log
    await server.stop()
    activity.close()


async def test_an_error_in_a_route_is_a_json_500_and_its_traceback_goes_to_the_log(
    served: tuple[str, list[str], Path], capfd: pytest.CaptureFixture[str]
) -> None:
    url, said, log = served
    async with httpx.AsyncClient(base_url=url) as client:
        answered = await client.get("/broken")
    assert answered.status_code == 500
    assert answered.json() == {"error": "internal error (RuntimeError); the gateway's log has the details"}
    assert answered.headers["cache-control"] == "no-store"
    assert len(said) == 1 and said[0].endswith("HTTP 500 for GET /broken: RuntimeError: a bug in a route")
    written = log.read_text()
    assert "Traceback" in written and 'raise RuntimeError("a bug in a route")' in written
    printed = capfd.readouterr()
    assert "Traceback" not in printed.out + printed.err


async def test_a_store_that_cannot_be_written_is_a_503_with_the_reason(
    served: tuple[str, list[str], Path], capfd: pytest.CaptureFixture[str]
) -> None:
    url, said, _ = served
    async with httpx.AsyncClient(base_url=url) as client:
        answered = await client.post("/full")
    assert answered.status_code == 503 and answered.headers["retry-after"] == "10"
    assert answered.json() == {
        "error": "the session store cannot be written: disk full: no space left on the file system holding /srv/state.db"
    }
    assert len(said) == 1 and "HTTP 503 for POST /full: the session store cannot be written: disk full" in said[0]
    printed = capfd.readouterr()
    assert "Traceback" not in printed.out + printed.err


async def test_a_stream_that_breaks_is_cut_short_without_a_traceback(
    served: tuple[str, list[str], Path], capfd: pytest.CaptureFixture[str]
) -> None:
    url, said, log = served
    received: list[str] = []
    async with httpx.AsyncClient(base_url=url) as client:
        with pytest.raises(httpx.HTTPError):
            async with client.stream("GET", "/stream") as stream:
                assert stream.status_code == 200
                async for line in stream.aiter_lines():
                    received.append(line)
    assert received[0] == "data: one"  # the report came before the connection was closed
    assert any("HTTP 500 for GET /stream: RuntimeError: broke mid-stream" in line for line in said), said
    assert "broke mid-stream" in log.read_text()
    printed = capfd.readouterr()
    assert "Traceback" not in printed.out + printed.err
