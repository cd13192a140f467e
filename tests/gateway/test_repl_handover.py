"""A heartbeat set in `vigil chat` keeps firing in the running gateway once the REPL is closed,
and re-opening the conversation in a REPL takes it back: every slot fires once, in one process."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pexpect
import pytest

from tests.cli.helpers import expect_in_terminal
from tests.gateway.process import GatewayProcess, history, wait_for
from vigil.schedule.intervals import TEST_MINIMUM_ENV
from vigil.schedule.polling import TEST_POLL_ENV
from vigil.testing.fake_model import FakeModelServer

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal"),
]


_SCREENS: list[io.StringIO] = []


def _repl(gateway: GatewayProcess, *args: str) -> pexpect.spawn:
    env = {**gateway.environment(), "TERM": "xterm"}
    child = pexpect.spawn(
        sys.executable, ["-m", "vigil.cli.main", "chat", *args], env=env, encoding="utf-8", timeout=30,
        dimensions=(30, 120),
    )
    child.logfile_read = io.StringIO()
    _SCREENS.append(child.logfile_read)
    return child


def _diagnosis(gateway: GatewayProcess) -> str:
    """What the REPLs showed and the gateway logged, for a failure that only happens in the suite."""
    log = gateway.home / "logs" / "gateway.log"
    parts = [f"--- REPL {n} ---\n{screen.getvalue()[-3000:]}" for n, screen in enumerate(_SCREENS)]
    parts.append(f"--- gateway.log ---\n{log.read_text()[-4000:] if log.exists() else '(none)'}")
    return "\n".join(parts)


def _heartbeat_turns(client, session_id: str) -> int:
    return sum(1 for m in history(client, session_id)["messages"] if m["heartbeat"])


def _gateway_fires(gateway: GatewayProcess) -> int:
    log = gateway.home / "logs" / "gateway.log"
    return log.read_text().count("heartbeat fired") if log.exists() else 0


def test_a_repl_heartbeat_moves_to_the_gateway_and_back(fake_model: FakeModelServer, vigil_home: Path) -> None:
    fake_model.rule(contains="[Heartbeat — recurring instruction", reply="Nothing new.")
    gateway = GatewayProcess(vigil_home, fake_model, env={TEST_MINIMUM_ENV: "1", TEST_POLL_ENV: "1"})
    gateway.start()
    _SCREENS.clear()
    child = _repl(gateway)
    try:
        expect_in_terminal(child, "you ›")
        child.sendline("hello")
        expect_in_terminal(child, "you ›")
        child.sendline("/hb every 2s check the CI run")
        expect_in_terminal(child, r"♥ Heartbeat set \(every 2s\)")
        expect_in_terminal(child, "Nothing new.")  # the REPL has it open: the REPL fires it
        assert _gateway_fires(gateway) == 0
        child.sendline("/quit")
        child.expect(pexpect.EOF)
        with gateway.client() as client:
            session_id = client.get("/api/conversations").json()["conversations"][0]["id"]
            wait_for(lambda: _gateway_fires(gateway) >= 2, timeout=30, what="the gateway firing the heartbeat")
            assert history(client, session_id)["heartbeat"]["owner"] == "gateway"
        child = _repl(gateway, "--continue")
        expect_in_terminal(child, "you ›")  # the REPL takes the heartbeat back ...
        expect_in_terminal(child, "Nothing new.")  # ... and fires it
        fired_by_gateway = _gateway_fires(gateway)
        with gateway.client() as client:
            turns = _heartbeat_turns(client, session_id)
            # two more intervals with the REPL open, counted in the conversation: the REPL fired both
            wait_for(lambda: _heartbeat_turns(client, session_id) >= turns + 2, timeout=30, what="two more REPL fires")
        assert _gateway_fires(gateway) == fired_by_gateway
        child.sendline("/quit")
        child.expect(pexpect.EOF)
    except BaseException:
        print(_diagnosis(gateway))
        raise
    finally:
        child.close(force=True)
    with gateway.client() as client:
        view = history(client, session_id)
        turns = _heartbeat_turns(client, session_id)
    assert gateway.stop() == 0
    # each fire is one heartbeat turn in the conversation: no slot fired twice, none counted unrun
    assert view["heartbeat"]["fire_count"] == turns
    assert turns >= 4
