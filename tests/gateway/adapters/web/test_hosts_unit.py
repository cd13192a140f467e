"""The HTTP server's Host check on its own: a real server on loopback with a one-route app,
which Host headers it takes from a request arriving at which local address, and the setting
that names further hosts."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import AsyncIterator

import httpx
import pytest
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from tests.cli.helpers import run_cli
from vigil.config.settings import load_settings
from vigil.gateway.http import HostCheck, HttpServer, host_name, listen, routes_app


async def _hello(request: object) -> PlainTextResponse:
    return PlainTextResponse("hello")


@pytest.fixture
async def server() -> AsyncIterator[HttpServer]:
    running = HttpServer(routes_app([Route("/", _hello)]), listen("127.0.0.1", 0),
                         allowed_hosts=["Chat.Example.org", "[FD00::5]", "proxy.lan."])
    await running.start()
    try:
        yield running
    finally:
        await running.stop()


async def _raw(server: HttpServer, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection(server.host, server.port)
    writer.write(request)
    await writer.drain()
    answer = await reader.read()
    writer.close()
    return answer


async def test_own_and_allowed_names_are_served_and_any_other_is_421(server: HttpServer) -> None:
    async with httpx.AsyncClient(base_url=server.url) as client:
        for host in ("chat.example.org", "CHAT.example.ORG:443", "chat.example.org.", "[fd00::5]:8787",
                     "proxy.lan", "localhost", f"127.0.0.1:{server.port}", "127.9.9.9", "[::1]"):
            response = await client.get("/", headers={"Host": host})
            assert (response.status_code, response.text) == (200, "hello"), host
        for host in ("evil.example", "sub.chat.example.org", "chat.example.org.evil.example", "10.1.2.3",
                     "[fd00::6]", "localhost:80@evil.example", "a b", ""):
            response = await client.get("/", headers={"Host": host})
            assert response.status_code == 421, host
            error = response.json()["error"]
            assert "gateway.web.allowed_hosts" in error or "name one host" in error
    assert (await _raw(server, b"GET / HTTP/1.0\r\n\r\n")).endswith(b"hello")  # no Host: no browser
    twice = await _raw(server, b"GET / HTTP/1.1\r\nHost: localhost\r\nHost: evil.example\r\n"
                               b"Connection: close\r\n\r\n")
    assert twice.split(b" ")[1] in (b"400", b"421")  # h11 refuses it before the check does


def test_an_address_is_allowed_when_the_request_arrived_at_it() -> None:
    check = HostCheck(app=None)
    assert check.allows("192.168.1.5:8787", ("192.168.1.5", 8787))  # a wildcard bind, reached on the LAN
    assert check.allows("192.168.1.5", ("::ffff:192.168.1.5", 8787))  # IPv4 on a dual-stack socket
    assert check.allows("[fe80::1]:8787", ("fe80::1", 8787, 0, 0))
    assert not check.allows("192.168.1.6", ("192.168.1.5", 8787))
    assert not check.allows("myhost.lan", ("192.168.1.5", 8787))  # a name needs allowed_hosts
    assert not check.allows("192.168.1.5", None)
    assert host_name("[::FFFF:127.0.0.1]:1") == "127.0.0.1" and host_name("a/b") is None


def test_allowed_hosts_is_set_as_a_list_of_bare_names_from_the_command_line(vigil_home: Path) -> None:
    hosts = "[chat.example.org, 10.0.0.5, '[fd00::5]']"
    assert run_cli("config", "set", "gateway.web.allowed_hosts", hosts).exit_code == 0
    allowed = load_settings(vigil_home / "config.yaml").gateway.web.allowed_hosts
    assert allowed == ["chat.example.org", "10.0.0.5", "[fd00::5]"]
    for value, says in [
        ("chat.example.org", "gateway.web.allowed_hosts: Input should be a valid list, such as [a, b]"),
        ("[https://chat.example.org/]", "'https://chat.example.org/' is not a host name"),
        ("[ok.example, 'chat.example.org:443']", "allowed_hosts.1: 'chat.example.org:443' is not a host name"),
        ("['*']", "'*' is not a host name"),
    ]:
        refused = run_cli("config", "set", "gateway.web.allowed_hosts", value)
        assert refused.exit_code == 1 and says in refused.output, (value, refused.output)
    assert load_settings(vigil_home / "config.yaml").gateway.web.allowed_hosts[0] == "chat.example.org"
