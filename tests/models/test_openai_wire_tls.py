"""TLS for OpenAI-compatible endpoints: an https endpoint is verified against the CA bundle;
a plain-http one (a local server) skips loading the bundle but never trusts a certificate,
should a TLS connection ever be made; a proxy in the environment keeps full verification."""

from __future__ import annotations

import ssl

import pytest

from vigil.models.openai_wire import PROXY_VARIABLES, tls_for


@pytest.fixture(autouse=True)
def no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("url", ["https://api.openai.com/v1", "HTTPS://example.com"])
def test_an_https_endpoint_is_verified_against_the_ca_bundle(url: str) -> None:
    assert tls_for(url) is True


def test_a_plain_http_endpoint_gets_a_context_that_trusts_no_certificate() -> None:
    context = tls_for("http://127.0.0.1:11434/v1")
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context.cert_store_stats()["x509_ca"] == 0


@pytest.mark.parametrize("variable", ["HTTPS_PROXY", "all_proxy", "HTTP_PROXY"])
def test_a_proxy_in_the_environment_keeps_full_verification(monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    monkeypatch.setenv(variable, "https://proxy.example:3128")
    assert tls_for("http://127.0.0.1:11434/v1") is True
