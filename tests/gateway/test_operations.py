"""Operating the real gateway process: stopping it with turns running and messages queued, a
second gateway, ``vigil gateway status``, ``/metrics``, SIGHUP, the listening address, and
``logs/gateway.log``. Every test runs ``vigil gateway run`` as a child process against the fake
model over HTTP."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.gateway.operations import (
    answers, configure, gateway, interrupted_then_restarted, log_text, output, users, vigil,
)
from tests.gateway.process import GatewayProcess, free_port, history, new_conversation, send, wait_for
from tests.tools.mcp_helpers import TIME_SERVER
from vigil.store import SQLiteStore
from vigil.store.gateway.gateway_tables import NewOutbound, RouteKey
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply

pytestmark = pytest.mark.slow

__all__ = ["gateway"]  # the fixture, imported for pytest


# -- 1. SIGTERM ------------------------------------------------------------------------------

def test_sigterm_lets_the_running_turn_finish_and_leaves_queued_messages_for_the_next_start(
    gateway: GatewayProcess, fake_model: FakeModelServer
) -> None:
    configure(gateway, "gateway.stop_timeout", "20")
    slow = ["still ", "thinking ", "about ", "it, ", "and ", "done."]
    fake_model.queue(Reply.text(slow, chunk_delay=0.4), "answer two", "answer three")
    gateway.start()
    with gateway.client() as client:
        session_id = new_conversation(client)
        send(client, session_id, "one")
        fake_model.wait_for_requests(1, timeout=20)
        send(client, session_id, "two")
        send(client, session_id, "three")
        assert gateway.stop(signal.SIGTERM) == 0
    assert len(fake_model.requests) == 1  # the queued ones were not started
    said = output(gateway)
    assert "waiting up to 20 s for 1 running turn(s)" in said
    assert "user turn in" in said and "answered" in said

    gateway.start()
    with gateway.client() as client:
        wait_for(lambda: len(answers(client, session_id)) == 3, what="the queued messages answered")
        assert answers(client, session_id) == ["".join(slow), "answer two", "answer three"]
        assert users(client, session_id) == ["one", "two", "three"]
        wait_for(gateway.settled, what="nothing left to answer")  # so no further answer can come
        assert answers(client, session_id) == ["".join(slow), "answer two", "answer three"]
    assert len(fake_model.requests) == 3
    assert gateway.stop() == 0


def test_sigterm_with_a_bound_shorter_than_the_turn_interrupts_it_and_it_is_answered_once_after_restart(
    gateway: GatewayProcess, fake_model: FakeModelServer
) -> None:
    _, messages = interrupted_then_restarted(gateway, fake_model)
    final = [m["content"] for m in messages if m["role"] == "assistant" and m["content"] == "the one answer"]
    assert final == ["the one answer"]
    assert len(fake_model.requests) == 2


# -- 2. a second gateway ---------------------------------------------------------------------

def test_a_second_gateway_on_the_same_profile_refuses_in_one_line_and_writes_nothing(
    gateway: GatewayProcess, fake_model: FakeModelServer
) -> None:
    fake_model.queue("first answer", "second answer")
    gateway.start()
    with gateway.client() as client:
        session_id = new_conversation(client)
        send(client, session_id, "hello")
        wait_for(lambda: answers(client, session_id) == ["first answer"], what="the first answer")
    home = gateway.home
    before = {path: path.read_bytes() for path in (home / "gateway.lock", home / "logs" / "gateway.log", home / "gateway.token")}
    status_before = json.loads(vigil(gateway, "gateway", "status", "--json").stdout)

    other_port = free_port()
    # Started without a model in its environment: it would warn about that if it ran, but it refuses first.
    unconfigured = {**gateway.environment(), "OPENAI_API_KEY": "", "OPENAI_BASE_URL": "", "VIGIL_MODEL": ""}
    second = subprocess.run(
        [sys.executable, "-m", "vigil.cli.main", "gateway", "run", "--web-port", str(other_port)],
        env=unconfigured, capture_output=True, text=True, timeout=60,
    )

    assert second.returncode == 1
    said = (second.stdout + second.stderr).strip()
    assert said.count("\n") == 0, said
    assert f"another gateway is already running for profile 'default' (pid {gateway.process.pid}" in said
    assert f"kill {gateway.process.pid}" in said
    assert {path: path.read_bytes() for path in before} == before
    status_after = json.loads(vigil(gateway, "gateway", "status", "--json").stdout)
    assert status_after["pid"] == status_before["pid"] == gateway.process.pid
    assert status_after["url"] == gateway.url
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{other_port}/healthz", timeout=2)

    with gateway.client() as client:  # the first one keeps answering
        send(client, session_id, "still there?")
        wait_for(lambda: answers(client, session_id) == ["first answer", "second answer"], what="the second answer")
    assert gateway.stop() == 0


# -- 3. status -------------------------------------------------------------------------------

def test_gateway_status_while_it_runs_and_after_sigterm(gateway: GatewayProcess, fake_model: FakeModelServer) -> None:
    added = vigil(gateway, "cron", "add", "report", "-s", "every 2h", "--prompt", "write the report")
    assert added.returncode == 0, added.stderr
    fake_model.set_default_reply("ok")
    gateway.start()
    with gateway.client() as client:
        session_id = new_conversation(client)
        send(client, session_id, "/heartbeat every 1h check the build")
        wait_for(lambda: history(client, session_id)["heartbeat"] is not None, what="the heartbeat set")

    def fresh() -> dict[str, Any] | None:
        done = vigil(gateway, "gateway", "status", "--json")
        status = json.loads(done.stdout)
        return status if done.returncode == 0 and status["armed_heartbeats"] == 1 else None

    status = wait_for(fresh, timeout=30, what="a status record with the heartbeat")
    assert status["running"] is True and status["state"] == "running"
    assert status["pid"] == gateway.process.pid
    assert status["url"] == gateway.url
    assert status["login_url"] == f"{gateway.url}/login?token={gateway.token}"
    assert [(a["name"], a["ok"]) for a in status["adapters"]] == [("web", True), ("api", True)]
    assert status["live_conversations"] >= 1
    assert status["next_cron_run"] > time.time() + 3600

    text = vigil(gateway, "gateway", "status")
    assert text.returncode == 0
    assert f"running (pid {gateway.process.pid}" in text.stdout
    assert "web chat:" in text.stdout and gateway.url in text.stdout
    assert "web connected" in text.stdout
    rows = {name.strip(): value.strip() for name, _, value in
            (line.partition(":") for line in text.stdout.splitlines()[1:])}
    assert rows["adapters"].startswith("web connected")
    assert rows["armed heartbeats"] == "1"
    assert int(rows["live conversations"]) >= 1
    assert rows["next cron run"].endswith("(in 1h59m)") or rows["next cron run"].endswith("(in 2h)")
    assert rows["login URL"] == f"{gateway.url}/login?token={gateway.token}"

    assert gateway.stop(signal.SIGTERM) == 0
    after = vigil(gateway, "gateway", "status", "--json")
    assert after.returncode == 3
    stopped = json.loads(after.stdout)
    assert stopped["running"] is False and stopped["url"] is None and stopped["live_conversations"] is None
    plain = vigil(gateway, "gateway", "status")
    assert plain.returncode == 3
    assert plain.stdout.startswith("vigil gateway: not running (stopped at ")


# -- 4. metrics ------------------------------------------------------------------------------

def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
def test_metrics_count_turns_tokens_fires_and_deliveries_behind_the_token(
    fake_model: FakeModelServer, vigil_home: Path, dialect: str
) -> None:
    env = {"VIGIL_TEST_HEARTBEAT_MIN_SECONDS": "1"}
    if dialect == "anthropic":  # explicit breakpoints: cache writes are reported, nothing after the last one
        env |= {"OPENAI_API_KEY": "", "OPENAI_BASE_URL": "", "ANTHROPIC_API_KEY": fake_model.api_key,
                "ANTHROPIC_BASE_URL": fake_model.anthropic_base_url}
    gateway = GatewayProcess(vigil_home, fake_model, env=env)
    fake_model.set_default_reply("fine")
    try:
        gateway.start()
        assert httpx.get(f"{gateway.url}/healthz", timeout=5).status_code == 200
        refused = httpx.get(f"{gateway.url}/metrics", timeout=5)
        assert refused.status_code == 401 and "vigil_gateway" not in refused.text
        wrong = httpx.get(f"{gateway.url}/metrics", headers={"Authorization": "Bearer nope"}, timeout=5)
        assert wrong.status_code == 401
        with gateway.client() as client:
            session_id = new_conversation(client)
            send(client, session_id, "first")
            wait_for(lambda: len(answers(client, session_id)) == 1, what="the first answer")
            send(client, session_id, "second")
            wait_for(lambda: len(answers(client, session_id)) == 2, what="the second answer")
            send(client, session_id, "/heartbeat every 2s look around")
            wait_for(lambda: any(m["heartbeat"] for m in history(client, session_id)["messages"]), what="a fire")

            def scraped() -> dict[Any, float] | None:
                found = _samples(client.get("/metrics").text)
                done = found.get(("vigil_gateway_turns_total", (("kind", "heartbeat"), ("outcome", "answered"))), 0)
                return found if done >= 1 else None

            samples = wait_for(scraped, what="the heartbeat turn counted")
            page = client.get("/metrics")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/plain")
    finally:
        if gateway.process is not None and gateway.process.poll() is None:
            gateway.stop()

    def value(name: str, **labels: str) -> float:
        return samples.get((name, tuple(sorted(labels.items()))), 0.0)

    assert value("vigil_gateway_turns_total", kind="user", outcome="answered") == 2
    assert value("vigil_gateway_turns_total", kind="user", outcome="failed") == 0
    assert value("vigil_gateway_heartbeat_fires_total") >= 1
    # The fake server's prefix cache: the second turn reads the prefix the first one left.
    assert value("vigil_gateway_prompt_tokens_total", kind="cache_read") > 0
    if dialect == "openai":  # automatic caching: the new part is uncached, writes are not reported
        assert value("vigil_gateway_prompt_tokens_total", kind="uncached") > 0
        assert value("vigil_gateway_prompt_tokens_total", kind="cache_write") == 0
    else:  # a breakpoint on the last message: the new part is written to the cache
        assert value("vigil_gateway_prompt_tokens_total", kind="cache_write") > 0
    assert ("vigil_gateway_prompt_tokens_total", (("kind", "uncached"),)) in samples  # every kind is exposed
    assert value("vigil_gateway_outbox_sent_total", adapter="web") >= 3  # two replies and the /heartbeat reply
    assert value("vigil_gateway_inbound_messages_total", adapter="web", duplicate="false") == 3


# -- 5. SIGHUP -------------------------------------------------------------------------------

def test_sighup_reloads_and_a_broken_config_keeps_the_running_one(
    gateway: GatewayProcess, fake_model: FakeModelServer
) -> None:
    fake_model.queue("before", "after reload", "after broken reload")
    gateway.start()
    with gateway.client() as client:
        session_id = new_conversation(client)
        send(client, session_id, "one")
        wait_for(lambda: answers(client, session_id) == ["before"], what="the first answer")

        gateway.process.send_signal(signal.SIGHUP)
        wait_for(lambda: "SIGHUP: adapter configuration reloaded" in log_text(gateway), what="the reload logged")
        assert gateway.process.poll() is None
        send(client, session_id, "two")
        wait_for(lambda: answers(client, session_id)[-1:] == ["after reload"], what="an answer after the reload")

        config = gateway.home / "config.yaml"
        config.write_text("gateway: [this is not\n  valid: yaml\n")
        gateway.process.send_signal(signal.SIGHUP)
        wait_for(lambda: "config.yaml not reloaded, keeping the running configuration" in log_text(gateway),
                 what="the broken config reported")
        assert gateway.process.poll() is None
        send(client, session_id, "three")
        wait_for(lambda: answers(client, session_id)[-1:] == ["after broken reload"], what="an answer after it")
    lines = [line for line in log_text(gateway).splitlines() if "SIGHUP" in line]
    assert len(lines) == 2, lines
    assert gateway.stop() == 0


def test_sighup_gives_new_conversations_an_mcp_server_added_meanwhile_and_old_ones_keep_their_tools(
    gateway: GatewayProcess, fake_model: FakeModelServer
) -> None:
    fake_model.set_default_reply("noted")
    gateway.start()

    def tools_of_last_request() -> set[str]:
        return {tool["function"]["name"] for tool in fake_model.requests[-1].body.get("tools", [])}

    with gateway.client() as client:
        old = new_conversation(client)
        send(client, old, "before")
        wait_for(lambda: answers(client, old) == ["noted"], what="the first answer")
        added = vigil(gateway, "mcp", "add", "time", "--unattended", "--", TIME_SERVER, "--local-timezone", "UTC")
        assert added.returncode == 0, added.stdout + added.stderr

        gateway.process.send_signal(signal.SIGHUP)
        wait_for(lambda: "SIGHUP: MCP servers for new sessions: time" in log_text(gateway), what="the reload logged")
        fresh = new_conversation(client)
        send(client, fresh, "after")
        wait_for(lambda: answers(client, fresh) == ["noted"], what="the new conversation's answer")
        assert "mcp__time__get_current_time" in tools_of_last_request()
        send(client, old, "again")
        wait_for(lambda: answers(client, old) == ["noted", "noted"], what="the old conversation's answer")
        assert not any(name.startswith("mcp__") for name in tools_of_last_request())  # its pin holds
    assert gateway.stop() == 0


# -- 6. the listening address ----------------------------------------------------------------

def _run_gateway(gateway: GatewayProcess, *args: str) -> subprocess.Popen[str]:
    from tests.gateway.process import _STARTED

    process = subprocess.Popen(
        [sys.executable, "-m", "vigil.cli.main", "gateway", "run", *args], env=gateway.environment(),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    _STARTED.append(process)  # killed after the test whatever happens
    return process


def test_a_port_in_use_is_a_one_line_error_and_nothing_keeps_running(gateway: GatewayProcess) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        process = _run_gateway(gateway, "--web-port", str(port))
        out, err = process.communicate(timeout=60)
    assert process.returncode == 1
    assert "Traceback" not in out + err
    errors = [line for line in err.splitlines() if line.startswith("Error:")]
    assert errors == [
        f"Error: port {port} on 127.0.0.1 is already in use (another gateway or program?); "
        "choose another with --web-port N or gateway.web.port"
    ]
    assert "login?token=" not in out  # never announced as serving
    assert not (gateway.home / "logs" / "gateway.log").exists()  # nothing was written
    assert not (gateway.home / "gateway.token").exists()
    status = vigil(gateway, "gateway", "status", "--json")
    assert status.returncode == 3 and json.loads(status.stdout)["running"] is False
    gateway.start()  # the lock was released: a gateway on a free port starts
    assert gateway.stop() == 0


def _non_loopback_address() -> str | None:
    """An address of this machine other than loopback (``None`` if it has none)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outgoing interface
        except OSError:
            return None
        address = probe.getsockname()[0]
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def test_an_explicit_non_loopback_bind_is_served_and_a_configured_one_is_refused(
    gateway: GatewayProcess, fake_model: FakeModelServer
) -> None:
    address = _non_loopback_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address to bind")
    configure(gateway, "gateway.web.host", address)
    refused = _run_gateway(gateway, "--web-port", str(gateway.port))
    out, err = refused.communicate(timeout=60)
    assert refused.returncode == 1
    assert [line for line in err.splitlines() if line.startswith("Error:")] == [
        f"Error: gateway.web.host is '{address}', which is not a loopback address: the web chat would be "
        f"reachable from other machines. Pass --bind {address} to mean it, or set gateway.web.host to 127.0.0.1"
    ]
    assert not (gateway.home / "gateway.lock").exists() or vigil(gateway, "gateway", "status").returncode == 3

    process = _run_gateway(gateway, "--web-port", str(gateway.port), "--bind", address)
    try:
        url = f"http://{address}:{gateway.port}"
        wait_for(lambda: _healthy(url), timeout=60, what="the gateway on the explicit address")
        status = json.loads(vigil(gateway, "gateway", "status", "--json").stdout)
        assert status["url"] == url
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"http://127.0.0.1:{gateway.port}/healthz", timeout=2)  # only where it was told
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert f"{url}/login?token=" in out


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


# -- 7. the log ------------------------------------------------------------------------------

def test_the_log_has_a_line_per_turn_fire_failed_delivery_and_cron_run_and_never_the_token(
    gateway: GatewayProcess, fake_model: FakeModelServer
) -> None:
    configure(gateway, "gateway.outbox_attempts", "1")
    # a one-shot job whose time passed 30 s ago, added on a clock set a minute back: due at
    # start-up, well inside its grace, with no minute to wait
    now = time.time()
    at = datetime.fromtimestamp(now - 30, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S+00:00")
    gateway.env["VIGIL_CRON_NOW"] = str(now - 60)
    added = vigil(gateway, "cron", "add", "soon", "-s", at, "--prompt", "say hi")
    del gateway.env["VIGIL_CRON_NOW"]
    assert added.returncode == 0, added.stderr
    profile_db = gateway.home / "state.db"
    store = SQLiteStore(profile_db)
    try:  # a reply left for a platform this gateway does not run: its delivery fails
        store.gateway.outbox_add(NewOutbound(RouteKey("telegram", "4242"), "left over", kind="notice"), now=time.time())
    finally:
        store.close()
    fake_model.set_default_reply("fine")
    gateway.start()
    with gateway.client() as client:
        session_id = new_conversation(client)
        send(client, session_id, "one")
        send(client, session_id, "two")
        wait_for(lambda: len(answers(client, session_id)) == 2, what="two answers")
        send(client, session_id, "/heartbeat every 2s look around")
        wait_for(lambda: log_text(gateway).count("heartbeat turn in") >= 2, what="two heartbeat turns")
        send(client, session_id, "/heartbeat off")
        wait_for(lambda: "cron run ended: soon" in log_text(gateway), timeout=100, what="the cron run")
    assert gateway.stop() == 0
    log = log_text(gateway)
    lines = log.splitlines()
    assert sum("vigil gateway: user turn in" in line for line in lines) == 2
    fires = sum("vigil gateway: heartbeat fired in" in line for line in lines)
    heartbeat_turns = sum("vigil gateway: heartbeat turn in" in line for line in lines)
    assert fires == heartbeat_turns >= 2
    failures = [line for line in lines if "could not be delivered and is marked failed" in line]
    assert len(failures) == 1 and "telegram 4242" in failures[0] and "no 'telegram' adapter is running" in failures[0]
    assert sum("cron run started: soon" in line for line in lines) == 1
    assert sum("cron run ended: soon" in line for line in lines) == 1
    assert gateway.token not in log
    assert gateway.token in output(gateway)  # printed on stdout, for the person who started it


def test_under_the_systemd_journal_the_login_token_is_not_printed(fake_model: FakeModelServer, vigil_home: Path) -> None:
    """systemd sets JOURNAL_STREAM when stdout is the journal: a log, which must not keep the token."""
    gateway = GatewayProcess(vigil_home, fake_model, env={"JOURNAL_STREAM": "8:123456"})
    gateway.start()
    assert gateway.stop() == 0
    said = output(gateway)
    assert gateway.token not in said and "login?token=" not in said
    assert "Open the web chat with the login URL `vigil gateway status` prints" in said
    shown = vigil(gateway, "gateway", "status")  # where the person finds it instead
    assert shown.returncode == 3 and gateway.token in shown.stdout
