"""The gateway's door against other sites' pages, over real HTTP: their login attempts never
lock the owner out, a name that is not the server's (DNS rebinding) reaches no route, and text
that is not Unicode is a 400, not a 500."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from tests.gateway.process import history, new_conversation
from tests.gateway.adapters.web.conftest import WebGateway, inbox_total, web_gateway
from vigil.testing.fake_model import FakeModelServer

EVIL = "http://evil.example"
IMAGE_FROM_ELSEWHERE = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image",
                        "Referer": f"{EVIL}/lure.html"}
LINK_TYPED_OR_FROM_A_TERMINAL = {"Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}


def _login_link(client: httpx.Client, token: str, headers: dict[str, str]) -> httpx.Response:
    client.cookies.clear()
    return client.get("/login", params={"token": token}, headers=headers, follow_redirects=False)


def test_other_sites_login_attempts_never_count_and_the_owners_link_still_logs_in(gateway: WebGateway) -> None:
    browser = gateway.http()
    for n in range(12):  # <img src="http://127.0.0.1:8787/login?token=wrongN"> on any page
        assert "set-cookie" not in _login_link(browser, f"wrong{n}", IMAGE_FROM_ELSEWHERE).headers
    posted_from_elsewhere = [
        {"Sec-Fetch-Site": "cross-site", "Origin": EVIL},
        {"Sec-Fetch-Site": "same-site", "Origin": f"http://127.0.0.1:{gateway.port + 1}"},  # another local port
        {"Origin": EVIL},  # a browser without Sec-Fetch-*
        {"Origin": "null"},  # a sandboxed frame
    ]
    for headers in posted_from_elsewhere:
        for n in range(3):
            response = browser.post("/login", data={"token": f"wrong{n}"}, headers=headers, follow_redirects=False)
            assert response.status_code == 403 and "another site" in response.text, headers
            assert "set-cookie" not in response.headers

    owner = _login_link(browser, gateway.token, LINK_TYPED_OR_FROM_A_TERMINAL)
    assert owner.status_code == 303 and owner.headers["location"] == "/", owner.text
    assert owner.cookies["vigil_session"]
    lure = _login_link(browser, "wrong", IMAGE_FROM_ELSEWHERE)  # never checked: the form, filled in
    assert lure.status_code == 200 and 'value="wrong"' in lure.text and "not right" not in lure.text

    # The link clicked in a webmail is cross-site too: the form comes filled in, one press logs in.
    from_mail = _login_link(browser, gateway.token, {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"})
    assert from_mail.status_code == 200 and "set-cookie" not in from_mail.headers
    filled = re.search(r'<input id="token" name="token" [^>]*value="([^"]*)"', from_mail.text)
    assert filled is not None and filled.group(1) == gateway.token
    pressed = browser.post("/login", data={"token": filled.group(1)}, follow_redirects=False,
                           headers={"Sec-Fetch-Site": "same-origin", "Origin": gateway.url})
    assert pressed.status_code == 303 and pressed.cookies["vigil_session"]
    lure = _login_link(browser, '"><script>alert(1)</script>', IMAGE_FROM_ELSEWHERE)
    assert "<script>" not in lure.text and "&quot;&gt;&lt;script&gt;" in lure.text


def test_a_request_for_another_host_name_reaches_no_route(gateway: WebGateway) -> None:
    conversation = new_conversation(gateway.api())
    requests = [
        ("GET", "/", {}), ("GET", "/login", {}), ("GET", "/login", {"params": {"token": gateway.token}}),
        ("POST", "/login", {"data": {"token": gateway.token}}), ("GET", "/static/app.js", {}),
        ("GET", "/healthz", {}), ("GET", "/metrics", {}), ("GET", "/api/conversations", {}),
        ("POST", f"/api/conversations/{conversation}/messages", {"json": {"text": "rebound", "client_id": "r1"}}),
        ("POST", "/slack/events", {"json": {}}), ("POST", "/telegram/webhook", {"json": {}}),
    ]
    client = gateway.http()
    for host in (f"evil.example:{gateway.port}", "evil.example", f"127.0.0.1.evil.example:{gateway.port}",
                 f"localhost.evil.example:{gateway.port}", "evil.example:80@127.0.0.1"):
        for method, path, kwargs in requests:
            headers = {"Host": host, **gateway.bearer}
            response = client.request(method, path, headers=headers, **kwargs)  # type: ignore[arg-type]
            assert response.status_code == 421, (host, method, path, response.text)
            assert response.json()["error"].startswith("refused: ") and "set-cookie" not in response.headers
    says = client.get("/healthz", headers={"Host": f"evil.example:{gateway.port}"}).json()["error"]
    assert "'evil.example'" in says and "add it to the list gateway.web.allowed_hosts" in says
    assert inbox_total(gateway.home) == 0 and history(gateway.api(), conversation)["messages"] == []

    for host in (f"localhost:{gateway.port}", f"LOCALHOST:{gateway.port}", f"127.0.0.1:{gateway.port}",
                 "127.0.0.1", f"[::1]:{gateway.port}", "localhost"):
        assert client.get("/healthz", headers={"Host": host}).status_code == 200, host
        assert client.get("/login", headers={"Host": host}).status_code == 200, host
    logged_in = client.get("/login", params={"token": gateway.token}, headers={"Host": f"localhost:{gateway.port}"})
    assert logged_in.status_code == 303 and logged_in.cookies["vigil_session"]


def test_a_name_in_allowed_hosts_is_served(fake_model_env: FakeModelServer, vigil_home: Path) -> None:
    allowed = {"gateway": {"web": {"allowed_hosts": ["chat.example.org"]}}}
    with web_gateway(vigil_home, fake_model_env, config=allowed) as running:
        client = running.http()
        assert client.get("/healthz", headers={"Host": "evil.example"}).status_code == 421
        assert client.get("/healthz", headers={"Host": "Chat.Example.org:443"}).status_code == 200


def test_text_that_is_not_unicode_is_refused_with_a_reason(
    gateway: WebGateway, fake_model_env: FakeModelServer,
) -> None:
    fake_model_env.set_default_reply("ok")
    api = gateway.api()
    conversation = new_conversation(api)
    json_headers = {"Content-Type": "application/json"}
    for body in (b'{"text": "\\ud800", "client_id": "a"}', b'{"text": "hi \\udfff there", "client_id": "b"}',
                 b'{"text": "hi", "client_id": "\\ud83d"}', b'{"text": "hi", "client_id": "c", "\\udc00": 1}',
                 b'{"text": "hi", "client_id": "d", "meta": [{"deep": ["\\ud800"]}]}'):
        response = api.post(f"/api/conversations/{conversation}/messages", content=body, headers=json_headers)
        assert response.status_code == 400, (body, response.text)
        assert "not valid Unicode" in response.json()["error"]
    approval = api.post("/api/approvals/some-approval", content=b'{"approve": true, "x": "\\udead"}',
                        headers=json_headers)
    assert approval.status_code == 400 and "not valid Unicode" in approval.json()["error"]
    deep = api.post(f"/api/conversations/{conversation}/messages", content=b"[" * 100_000, headers=json_headers)
    assert deep.status_code == 400 and "not valid JSON" in deep.json()["error"]
    paired = api.post(f"/api/conversations/{conversation}/messages", headers=json_headers,
                      content=b'{"text": "a pair is fine: \\ud83d\\ude00", "client_id": "ok"}')
    assert paired.status_code == 202
    assert inbox_total(gateway.home) == 1
