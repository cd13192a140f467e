"""The gateway listens on loopback unless --bind says otherwise on the command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.helpers import run_cli, run_vigil, state_digest
from vigil.gateway.bind import check_bind, is_loopback


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost", "LOCALHOST",
                                  "app.localhost", "::ffff:127.0.0.1"])
def test_loopback_addresses_need_no_permission(host: str) -> None:
    assert is_loopback(host)
    check_bind(host, explicit=False)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "10.0.0.1", "fe80::1", "example.com",
                                  "localhost.example.com", "::ffff:192.168.1.20"])
def test_any_other_address_needs_bind_on_the_command_line(host: str) -> None:
    assert not is_loopback(host)
    with pytest.raises(ValueError) as refused:
        check_bind(host, explicit=False)
    message = str(refused.value)
    assert repr(host) in message and f"--bind {host}" in message and "127.0.0.1" in message
    assert "\n" not in message
    check_bind(host, explicit=True)


@pytest.mark.parametrize("host", ["", "two words", "tab\there", "nul\x00"])
def test_an_address_that_is_not_one_word_is_refused_even_explicitly(host: str) -> None:
    with pytest.raises(ValueError, match="not an address to listen on"):
        check_bind(host, explicit=True)


def _prepare_profile(host: str | None = None) -> None:
    assert run_cli("sessions", "list").exit_code == 0  # the profile and its store exist
    if host is not None:
        assert run_cli("config", "set", "gateway.web.host", host).exit_code == 0


def test_gateway_run_refuses_a_non_loopback_host_from_config_and_starts_nothing(vigil_home: Path) -> None:
    _prepare_profile("0.0.0.0")
    before = state_digest(vigil_home)
    # A gateway that started would run until signalled: run_vigil's timeout would fail the test.
    ran = run_vigil("gateway", "run", home=vigil_home)
    assert ran.returncode == 1
    assert ran.stdout == ""
    assert ran.stderr.splitlines() == [
        "Error: gateway.web.host is '0.0.0.0', which is not a loopback address: the web chat would be "
        "reachable from other machines. Pass --bind 0.0.0.0 to mean it, or set gateway.web.host to 127.0.0.1"
    ]
    assert state_digest(vigil_home) == before
    assert not (vigil_home / "logs" / "gateway.log").exists()
    assert not (vigil_home / "gateway.lock").exists()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--web-port", "0"), "'--web-port': 0 is not in the range 1<=x<=65535"),
        (("--web-port", "65536"), "'--web-port': 65536 is not in the range 1<=x<=65535"),
        (("--web-port", "http"), "'--web-port': 'http' is not a valid integer"),
        (("--bind", ""), "'' is not an address to listen on"),
        (("--bind", "0.0.0.0 8080"), "is not an address to listen on"),
    ],
)
def test_gateway_run_refuses_bad_options_and_starts_nothing(args: tuple[str, ...], says: str, vigil_home: Path) -> None:
    _prepare_profile()
    before = state_digest(vigil_home)
    ran = run_vigil("gateway", "run", *args, home=vigil_home)
    assert ran.returncode in (1, 2)
    assert says in ran.stderr and "Traceback" not in ran.stderr
    assert sum(line.startswith("Error:") for line in ran.stderr.splitlines()) == 1
    assert state_digest(vigil_home) == before
    assert not (vigil_home / "logs" / "gateway.log").exists()


def test_run_help_documents_the_options() -> None:
    text = run_cli("gateway", "run", "--help").output
    assert "--web-port N" in text and "--bind ADDR" in text and "loopback" in text
