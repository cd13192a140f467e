"""Who may use the web chat: without the token or a valid cookie, or from another origin,
a request is refused and nothing is processed (the real gateway, over HTTP)."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from tests.gateway.process import new_conversation, wait_for
from tests.gateway.adapters.web.conftest import WebGateway, answers, inbox_total, post_message, user_texts
from vigil.gateway.adapters.web.auth import COOKIE_MAX_AGE, SessionSigner
from vigil.testing.fake_model import FakeModelServer

EVIL = "http://evil.example"


def _protected_requests(conversation: str) -> list[tuple[str, str, dict]]:
    return [
        ("GET", "/api/conversations", {}),
        ("POST", "/api/conversations", {}),
        ("GET", f"/api/conversations/{conversation}", {}),
        ("POST", f"/api/conversations/{conversation}/messages", {"json": {"text": "sneaky", "client_id": "x1"}}),
        ("GET", f"/api/conversations/{conversation}/events", {}),
        ("POST", f"/api/conversations/{conversation}/files", {"files": {"file": ("evil.sh", b"rm -rf ~")}}),
        ("POST", "/api/approvals/some-approval", {"json": {"approve": True}}),
    ]


def _assert_nothing_processed(gateway: WebGateway, fake_model: FakeModelServer, conversation: str) -> None:
    """The refused requests left no trace: a message sent now is the only one answered, the
    only one stored, and no conversation or upload appeared."""
    api = gateway.api()
    inbox_before = inbox_total(gateway.home)
    fake_model.queue("The one real answer.")
    assert post_message(api, conversation, "the real message", "real-1").status_code == 202
    wait_for(lambda: answers(api, conversation), what="the real answer")
    assert user_texts(api, conversation) == ["the real message"]
    assert answers(api, conversation) == ["The one real answer."]
    assert [r.last_user_text for r in fake_model.requests] == ["the real message"]
    assert inbox_total(gateway.home) == inbox_before + 1
    listed = api.get("/api/conversations").json()["conversations"]
    assert [c["id"] for c in listed] == [conversation]
    assert not [p for p in gateway.home.rglob("evil.sh")]


def test_no_token_is_refused_everywhere_but_login_health_and_static(
    gateway: WebGateway, fake_model_env: FakeModelServer,
) -> None:
    conversation = new_conversation(gateway.api())
    anonymous = gateway.http()
    page = anonymous.get("/", follow_redirects=False)
    assert page.status_code == 303 and page.headers["location"] == "/login"
    for method, path, kwargs in _protected_requests(conversation):
        response = anonymous.request(method, path, **kwargs)
        assert response.status_code == 401, (method, path, response.text)
        assert "not logged in" in response.json()["error"]
    assert anonymous.post("/logout", headers={"Origin": gateway.url}).status_code == 401
    assert anonymous.get("/login").status_code == 200
    assert anonymous.get("/healthz").status_code == 200
    assert anonymous.get("/metrics").status_code == 401
    assert anonymous.get("/static/app.js").status_code == 200
    assert inbox_total(gateway.home) == 0
    _assert_nothing_processed(gateway, fake_model_env, conversation)


def test_a_wrong_token_logs_nobody_in_and_processes_nothing(
    gateway: WebGateway, fake_model_env: FakeModelServer,
) -> None:
    conversation = new_conversation(gateway.api())
    anonymous = gateway.http()
    by_url = anonymous.get("/login", params={"token": gateway.token + "x"}, follow_redirects=False)
    by_form = anonymous.post("/login", data={"token": "not-the-token"}, follow_redirects=False)
    for response in (by_url, by_form):
        assert response.status_code == 401 and "set-cookie" not in response.headers
        assert "That token is not right." in response.text
    assert not anonymous.cookies
    wrong_bearer = gateway.http(headers={"Authorization": "Bearer " + gateway.token[:-1]})
    for method, path, kwargs in _protected_requests(conversation):
        assert wrong_bearer.request(method, path, **kwargs).status_code == 401, (method, path)
    _assert_nothing_processed(gateway, fake_model_env, conversation)


def test_a_forged_tampered_foreign_or_expired_cookie_is_refused(
    gateway: WebGateway, fake_model_env: FakeModelServer,
) -> None:
    conversation = new_conversation(gateway.api())
    good = gateway.login_cookie()
    version, issued, signature = good.split(".")
    bad_cookies = {
        "forged": f"v1.{int(time.time())}.{'ab' * 32}",
        "tampered issue time": f"{version}.{int(issued) + 3600}.{signature}",
        "tampered signature": f"{version}.{issued}.{signature[::-1]}",
        "signed under another token": SessionSigner("some-other-token").issue(),
        "expired": SessionSigner(gateway.token, now=lambda: time.time() - COOKIE_MAX_AGE - 60).issue(),
        "the token itself": gateway.token,
    }
    for label, cookie in bad_cookies.items():
        client = gateway.http(cookies={"vigil_session": cookie}, headers={"Origin": gateway.url})
        page = client.get("/", follow_redirects=False)
        assert page.status_code == 303 and page.headers["location"] == "/login", label
        for method, path, kwargs in _protected_requests(conversation):
            assert client.request(method, path, **kwargs).status_code == 401, (label, method, path)
    _assert_nothing_processed(gateway, fake_model_env, conversation)


def test_a_cross_origin_post_with_a_valid_cookie_is_refused_before_anything_happens(
    gateway: WebGateway, fake_model_env: FakeModelServer,
) -> None:
    conversation = new_conversation(gateway.api())
    cookie = {"vigil_session": gateway.login_cookie()}
    attempts = {
        "Origin evil.example": {"Origin": EVIL},
        "Origin on another port": {"Origin": f"http://127.0.0.1:{gateway.port + 1}"},
        "Origin null": {"Origin": "null"},
        "Referer evil.example, no Origin": {"Referer": f"{EVIL}/attack.html"},
        "neither Origin nor Referer": {},
    }
    for label, headers in attempts.items():
        client = gateway.http(cookies=cookie, headers=headers)
        assert client.get("/api/conversations").status_code == 200, label  # reading needs no Origin
        for method, path, kwargs in _protected_requests(conversation):
            if method != "POST":
                continue
            response = client.request(method, path, **kwargs)
            assert response.status_code == 403, (label, path, response.text)
            assert "cross-origin" in response.json()["error"]
        assert client.post("/logout").status_code == 403, label
    _assert_nothing_processed(gateway, fake_model_env, conversation)


def test_same_origin_posts_by_cookie_and_bearer_posts_without_origin_are_processed(
    gateway: WebGateway, fake_model_env: FakeModelServer,
) -> None:
    fake_model_env.set_default_reply("Noted.")
    cookie = {"vigil_session": gateway.login_cookie()}
    by_origin = gateway.http(cookies=cookie, headers={"Origin": gateway.url})
    by_referer = gateway.http(cookies=cookie, headers={"Referer": f"{gateway.url}/"})
    conversation = new_conversation(by_origin)
    assert post_message(by_origin, conversation, "from the page", "c-1").status_code == 202
    wait_for(lambda: len(answers(by_origin, conversation)) == 1, what="the first answer")
    assert post_message(by_referer, conversation, "from an old browser", "c-2").status_code == 202
    wait_for(lambda: len(answers(by_origin, conversation)) == 2, what="the second answer")
    bearer = gateway.http(headers=gateway.bearer)  # a script: no Origin, no cookie
    assert post_message(bearer, conversation, "from a script", "c-3").status_code == 202
    wait_for(lambda: len(answers(by_origin, conversation)) == 3, what="the third answer")
    assert user_texts(bearer, conversation) == ["from the page", "from an old browser", "from a script"]


def test_login_sets_a_strict_http_only_cookie_that_survives_a_restart_until_the_token_changes(
    gateway: WebGateway, vigil_home: Path,
) -> None:
    response = gateway.http().post("/login", data={"token": gateway.token}, follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"] == "/"
    set_cookie = response.headers["set-cookie"]
    attributes = {part.strip().split("=")[0].lower() for part in set_cookie.split(";")}
    assert {"httponly", "path", "max-age"} <= attributes and "samesite=strict" in set_cookie.lower()
    assert "path=/" in set_cookie.lower().replace(" ", "")
    cookie = {"vigil_session": response.cookies["vigil_session"]}
    page = gateway.http(cookies=cookie).get("/")
    assert page.status_code == 200 and '<script type="module" src="/static/app.js">' in page.text
    csp = page.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert "<script>" not in page.text  # no inline script for the policy to allow

    gateway.stop()
    gateway.start()
    assert gateway.http(cookies=cookie).get("/api/conversations").status_code == 200

    logged_out = gateway.http(cookies=cookie, headers={"Origin": gateway.url}).post("/logout", follow_redirects=False)
    assert logged_out.status_code == 303 and 'vigil_session=""' in logged_out.headers["set-cookie"]

    gateway.stop()
    (vigil_home / "gateway.token").unlink()  # a new token on the next start
    gateway.start()
    assert gateway.http(cookies=cookie).get("/api/conversations").status_code == 401
    assert gateway.http(headers=gateway.bearer).get("/api/conversations").status_code == 200
