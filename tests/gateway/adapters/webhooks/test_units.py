"""The pieces of the Webhooks platform on their own: signatures against the Standard Webhooks
test vector (so any of its libraries verifies vigil's deliveries), the config.yaml section's
checks, the registry's declaration (cron target, secrets, doctor's checks)."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.cli.helpers import run_cli

from vigil import platforms as registry
from vigil.config.settings import Settings
from vigil.gateway.adapters.webhooks.inbound import Refused, verify
from vigil.gateway.adapters.webhooks.signing import headers, key_of, matches, signature
from vigil.schedule.cron.delivery import Target, parse_target
from vigil.config.schema import SettingsInvalid

VECTOR_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
VECTOR = ("msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", b'{"test": 2432232314}')
VECTOR_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
"""The test vector the Standard Webhooks libraries publish."""


def test_signatures_match_the_standard_webhooks_test_vector() -> None:
    key = key_of(VECTOR_SECRET)
    assert signature(key, *VECTOR) == VECTOR_SIGNATURE
    assert matches(key, *VECTOR, f"v1,bm90IHRoaXM= {VECTOR_SIGNATURE}")  # one of several (a rotated secret)
    assert not matches(key, *VECTOR, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE")
    assert not matches(key, VECTOR[0], "1614265331", VECTOR[2], VECTOR_SIGNATURE)


def test_a_secret_that_is_not_whsec_is_its_own_key() -> None:
    assert key_of("plain secret") == b"plain secret"
    assert key_of("whsec_not base64!") == b"whsec_not base64!"
    made = headers(key_of("plain secret"), "d1", 1700000000, b"{}")
    assert made["webhook-id"] == "d1" and made["webhook-timestamp"] == "1700000000"


def test_verify_refuses_in_order_of_the_checks() -> None:
    key = key_of("k")
    good = headers(key, "d1", 1000, b"{}")
    assert verify(key, good, b"{}", now=1100, tolerance=300) == "d1"
    for changed, status, code in (({"webhook-signature": ""}, 401, "unsigned"),
                                  ({"webhook-id": "d 1"}, 400, "bad_id"),
                                  ({"webhook-timestamp": "10.5"}, 400, "bad_timestamp"),
                                  ({"webhook-timestamp": "1001"}, 401, "bad_signature")):
        with pytest.raises(Refused) as refused:
            verify(key, {**good, **changed}, b"{}", now=1100, tolerance=300)
        assert (refused.value.status, refused.value.code) == (status, code)
    with pytest.raises(Refused) as stale:
        verify(key, good, b"{}", now=1301, tolerance=300)
    assert stale.value.code == "stale"


def test_the_section_checks_hooks_and_keeps_secrets_out() -> None:
    settings = Settings.from_data({"webhooks": {"enabled": True, "hooks": {
        "ha": {"secret_env": "HA_HOOK_SECRET", "url": "https://ha.example/api/webhook/answer"},
        "ci": {"secret_env": "CI_HOOK_SECRET"},
    }}})
    assert settings.webhooks.allow == ["ha", "ci"]  # every configured hook, signed by its caller
    declared = registry.get("webhooks")
    assert declared is not None and declared.enabled(settings)
    assert declared.secrets(settings) == ["HA_HOOK_SECRET", "CI_HOOK_SECRET"]
    assert declared.checks(settings) == []
    with pytest.raises(SettingsInvalid) as bad:
        Settings.from_data({"webhooks": {"hooks": {
            "Bad Name": {"secret_env": "X"}, "nosecret": {"url": "https://x.example"},
            "creds": {"secret_env": "X", "url": "https://user:pw@x.example/"}, "typo": {"secret_env": "X", "ulr": "x"},
        }}})
    where = {".".join(map(str, p.loc)) for p in bad.value.problems}
    assert where == {"webhooks.hooks.Bad Name", "webhooks.hooks.nosecret.secret_env", "webhooks.hooks.creds.url",
                     "webhooks.hooks.typo.ulr"}


def test_doctor_checks_an_empty_table_and_plain_http_answers() -> None:
    declared = registry.get("webhooks")
    assert declared is not None
    empty = Settings.from_data({"webhooks": {"enabled": True}})
    assert [name for name, _what, _fix in declared.checks(empty)] == ["webhooks hooks"]
    plain = Settings.from_data({"webhooks": {"enabled": True, "hooks": {
        "far": {"secret_env": "A", "url": "http://ha.example/answer"},
        "near": {"secret_env": "A", "url": "http://127.0.0.1:8123/answer"},
    }}})
    assert [name for name, _what, _fix in declared.checks(plain)] == ["webhooks hook far"]


def test_the_cron_target_names_a_hook_and_a_conversation() -> None:
    assert parse_target("webhooks:ha") == Target("webhooks", "ha")
    assert parse_target("webhooks:ha:reports") == Target("webhooks", "ha", "reports")
    with pytest.raises(Exception, match="a hook's name"):
        parse_target("webhooks:Not A Hook")


def test_doctor_names_the_hooks_secret_variables(vigil_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    vigil_home.mkdir(parents=True, exist_ok=True)
    (vigil_home / "config.yaml").write_text(json.dumps({"webhooks": {"enabled": True, "hooks": {
        "ha": {"secret_env": "VIGIL_TEST_HA_SECRET"}}}}))
    monkeypatch.delenv("VIGIL_TEST_HA_SECRET", raising=False)

    def check() -> dict[str, Any]:
        report = json.loads(run_cli("doctor", "--json").output)
        return {c["name"]: c for c in report["checks"] if c["area"] == "platforms"}["webhooks secrets"]

    missing = check()
    assert missing["status"] == "problem" and "VIGIL_TEST_HA_SECRET is not set" in missing["detail"]
    monkeypatch.setenv("VIGIL_TEST_HA_SECRET", "s")
    assert check()["status"] == "ok"


def test_the_readme_s_openssl_recipe_signs_as_vigil_checks() -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed")
    body, secret = '{"text": "the build failed", "conversation": "ci"}', "3f9c0d1e2b"
    content = f"msg_1.1700000000.{body}".encode()
    made = subprocess.run([openssl, "dgst", "-sha256", "-hmac", secret, "-binary"], input=content,
                          capture_output=True, check=True).stdout
    given = "v1," + base64.b64encode(made).decode()
    assert verify(key_of(secret), {"webhook-id": "msg_1", "webhook-timestamp": "1700000000", "webhook-signature": given},
                  body.encode(), now=1700000000, tolerance=300) == "msg_1"
