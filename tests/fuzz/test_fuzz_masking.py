"""Credentials inside URLs never survive ``mask_secrets``, wherever the URL sits in a text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vigil.masking import mask_secrets

# Secrets as people have them: letters, digits and the punctuation URLs carry unencoded.
secrets = st.text(
    st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$'()*+,%"),
    min_size=10,
    max_size=40,
).map(lambda s: "S3cr" + s)
hosts = st.sampled_from(["localhost:8080", "127.0.0.1", "api.example.com", "[::1]:11434", "h"])
params = st.sampled_from(
    ["api-key", "api_key", "apikey", "key", "token", "access_token", "secret", "password", "sig", "X-Auth"]
)
around = st.sampled_from(["{}", "cannot reach {}: refused", "error at '{}'", "({})", "url={}\nnext line"])


@settings(max_examples=300, deadline=None)
@given(
    scheme=st.sampled_from(["http", "https", "postgresql", "postgres"]),
    user=st.sampled_from(["bob", "svc_vigil", "a"]),
    password=secrets,
    host=hosts,
    param=params,
    key=secrets,
    template=around,
    form=st.sampled_from(["userinfo", "token-as-user", "query", "both", "fragment"]),
)
def test_no_credential_survives(
    scheme: str, user: str, password: str, host: str, param: str, key: str, template: str, form: str
) -> None:
    if form == "userinfo":
        url, hidden = f"{scheme}://{user}:{password}@{host}/v1", [password]
    elif form == "token-as-user":
        url, hidden = f"{scheme}://{password}@{host}/v1", [password]
    elif form == "query":
        url, hidden = f"{scheme}://{host}/v1?model=x&{param}={key}&stream=1", [key]
    elif form == "both":
        url, hidden = f"{scheme}://{user}:{password}@{host}/v1?{param}={key}", [password, key]
    else:
        url, hidden = f"{scheme}://{host}/cb#{param}={key}", [key]
    masked = mask_secrets(template.format(url))
    for secret in hidden:
        assert secret not in masked and secret[len(secret) // 2 :] not in masked
    assert host in masked  # the endpoint stays recognisable
    if form in ("userinfo", "both"):
        assert f"{user}:***@" in masked


@pytest.mark.parametrize(
    "text",
    [
        "http://localhost:11434/v1",
        "the model endpoint https://api.openai.com/v1 answered HTTP 404: not found",
        "no URL here, just a = sign and a ? mark",
        "postgresql:///vigil?schema=vigil",
    ],
)
def test_text_without_credentials_is_unchanged(text: str) -> None:
    assert mask_secrets(text) == text
