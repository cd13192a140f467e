"""The session cookie, the bearer token and the Origin check, on their own."""

from __future__ import annotations

from vigil.gateway.adapters.web.auth import COOKIE_MAX_AGE, LoginThrottle, SessionSigner, cross_origin, same_origin


def test_a_cookie_is_valid_under_its_token_for_thirty_days_only() -> None:
    now = [1_800_000_000.0]
    signer = SessionSigner("the-token", now=lambda: now[0])
    cookie = signer.issue()
    assert signer.valid(cookie)
    assert SessionSigner("the-token", now=lambda: now[0]).valid(cookie)  # survives a restart
    assert not SessionSigner("another-token", now=lambda: now[0]).valid(cookie)  # a new token logs out
    now[0] += COOKIE_MAX_AGE - 1
    assert signer.valid(cookie)
    now[0] += 2
    assert not signer.valid(cookie)


def test_a_tampered_or_forged_cookie_is_refused() -> None:
    signer = SessionSigner("the-token", now=lambda: 1_800_000_000.0)
    version, issued, signature = signer.issue().split(".")
    assert not signer.valid(f"{version}.{int(issued) + 1}.{signature}")  # a later issue time
    assert not signer.valid(f"{version}.{issued}.{signature[:-1]}{'0' if signature[-1] != '0' else '1'}")
    assert not signer.valid(f"{version}.{issued}.{'0' * 64}")
    for junk in ("", "v1", "v1..", "v2.1.abc", "v1.x.abc", "v1.1.abc.def", "the-token", "v1.1.é"):
        assert not signer.valid(junk), junk


def test_the_bearer_token_must_be_the_login_token() -> None:
    signer = SessionSigner("the-token")
    assert signer.bearer_valid("Bearer the-token") and signer.bearer_valid("bearer the-token")
    for header in ("Bearer the-toke", "Bearer ", "Basic the-token", "the-token", "Bearer the-token2"):
        assert not signer.bearer_valid(header), header


def test_same_origin_compares_scheme_host_and_port() -> None:
    own = {"scheme": "http", "host": "127.0.0.1:8787"}
    assert same_origin("http://127.0.0.1:8787", None, **own)
    assert same_origin(None, "http://127.0.0.1:8787/some/page?x=1", **own)
    assert same_origin("http://localhost", None, scheme="http", host="LOCALHOST:80")
    for origin in ("http://evil.example", "http://127.0.0.1:8788", "https://127.0.0.1:8787", "null",
                   "http://127.0.0.1:8787.evil.example", "javascript:alert(1)", "http://[::1"):
        assert not same_origin(origin, "http://127.0.0.1:8787/", **own), origin  # Origin wins over Referer
    assert not same_origin(None, None, **own)
    assert not same_origin("http://127.0.0.1:8787", None, scheme="http", host="")


def test_the_login_throttle_blocks_after_too_many_failures_in_its_window() -> None:
    now = [0.0]
    throttle = LoginThrottle(limit=3, window=60, delay=0, now=lambda: now[0])
    for _ in range(3):
        assert not throttle.blocked()
        throttle.failed()
    assert throttle.blocked()
    now[0] += 61
    assert not throttle.blocked()


def test_a_request_is_from_another_site_when_the_browser_says_so() -> None:
    own = {"scheme": "http", "host": "127.0.0.1:8787"}
    for site in ("cross-site", "same-site", "Cross-Site"):
        assert cross_origin(site, None, None, **own), site
        assert cross_origin(site, "http://127.0.0.1:8787", None, **own), site  # the browser's word wins
    for site in ("none", "same-origin"):  # typed, a bookmark, a terminal's link; this server's page
        assert not cross_origin(site, None, None, **own), site
        assert not cross_origin(site, "http://evil.example", "http://evil.example/", **own), site
    # a browser without Sec-Fetch-*: the Origin, else the Referer
    assert cross_origin(None, "http://evil.example", None, **own)
    assert cross_origin(None, "null", None, **own)
    assert cross_origin(None, None, "http://evil.example/lure.html", **own)
    assert not cross_origin(None, "http://127.0.0.1:8787", None, **own)
    assert not cross_origin(None, None, "http://127.0.0.1:8787/login", **own)
    assert not cross_origin(None, None, None, **own)  # curl: counted as the owner's tries
