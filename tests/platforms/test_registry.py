"""The platform registry: a platform declared by a test alone — no line of vigil changed —
appears wherever a person looks: ``vigil doctor``, ``cron add --deliver`` (its form in the help,
its targets checked), a running gateway (its adapter made from the declaration, shown by
``vigil gateway status``) and pairing (an unknown sender gets a code, ``vigil pairing list``
shows it, and once approved the sender is answered)."""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Iterator

import pytest

from tests.cli.helpers import run_cli
from tests.gateway.adapters.harness import Gateways, settings_for
from tests.gateway.conftest import RecordingAdapter
import vigil
from vigil import platforms as registry
from vigil.gateway.adapters.base import Inbound
from vigil.gateway.lock import acquire
from vigil.gateway.run import GatewayConfig, GatewayRun
from vigil.platforms import Capabilities, Platform, TargetForm
from vigil.profiles import Profile
from vigil.store import SQLiteStore
from vigil.store.gateway.gateway_tables import RouteKey
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.waiting import eventually

PIGEON = Platform(
    name="pigeon",
    title="Pigeon post",
    adapter="tests.platforms.test_registry:make_pigeon",
    enabled=lambda settings: True,
    how_to_enable="the pigeon is always on",
    section="pigeon",
    secrets=lambda settings: ["PIGEON_TOKEN"],
    target=TargetForm(usage="pigeon:<loft>", chat=re.compile(r"[a-z]{3,12}"), chat_needed="a pigeon loft name"),
    capabilities=Capabilities(pairing=True),
)


@dataclass
class PigeonAdapter(RecordingAdapter):
    name: str = "pigeon"


def make_pigeon(settings: Any) -> PigeonAdapter:
    """The factory the declaration names."""
    return PigeonAdapter()


@pytest.fixture
def pigeon(monkeypatch: pytest.MonkeyPatch) -> Iterator[Platform]:
    monkeypatch.delenv("PIGEON_TOKEN", raising=False)
    registry.register(PIGEON)
    try:
        yield PIGEON
    finally:
        registry.unregister(PIGEON.name)


def test_doctor_checks_the_declared_platform(pigeon: Platform, vigil_home: Any) -> None:
    report = json.loads(run_cli("doctor", "--json").output)
    checks = {check["name"]: check for check in report["checks"] if check["area"] == "platforms"}
    assert "PIGEON_TOKEN is not set" in checks["pigeon secrets"]["detail"]


def test_cron_offers_and_checks_the_declared_target(pigeon: Platform, vigil_home: Any) -> None:
    assert "pigeon:<loft>" in run_cli("cron", "add", "--help").output
    added = run_cli("cron", "add", "news", "-s", "every 1h", "--prompt", "what is new?", "--deliver", "pigeon:north")
    assert added.exit_code == 0, added.output
    assert json.loads(run_cli("cron", "list", "--json").output)[0]["deliver"] == "pigeon:north"
    refused = run_cli("cron", "add", "bad", "-s", "every 1h", "--prompt", "x", "--deliver", "pigeon:No Loft")
    assert refused.exit_code != 0 and "a pigeon loft name is needed" in refused.output
    assert [job["name"] for job in json.loads(run_cli("cron", "list", "--json").output)] == ["news"]


@pytest.fixture
async def gateway(
    pigeon: Platform, fake_model: FakeModelServer, vigil_home: Any, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[GatewayRun]:
    """A gateway serving what the profile's config turns on, the registry's pigeon among it."""
    monkeypatch.setenv("PIGEON_TOKEN", "seed")  # its declared secret: without it, it is misconfigured
    profile = Profile("default", vigil_home).ensure()
    store = SQLiteStore(profile.state_db)
    lock = acquire(profile)
    gateways = Gateways()
    try:
        serving = await gateways.serve(profile, settings_for(fake_model), store=store, config=GatewayConfig(
            poll_interval=0, stop_grace=2, serve_http=False, adapter_watch=0.02))
        yield serving.run
    finally:
        await gateways.close()
        lock.release()
        store.close()


async def test_a_running_gateway_serves_the_declared_platform_and_pairs_its_people(
    gateway: GatewayRun, fake_model: FakeModelServer
) -> None:
    adapter = gateway.gateway.adapters["pigeon"].inner  # type: ignore[attr-defined]
    assert type(adapter).__name__ == "PigeonAdapter"  # made by the factory the declaration names
    await eventually(lambda: adapter.gateway is not None, what="the pigeon adapter started")
    status = await asyncio.to_thread(lambda: json.loads(run_cli("gateway", "status", "--json").output))
    assert {entry["name"]: entry["state"] for entry in status["adapters"]}["pigeon"] == "connected"

    loft = RouteKey("pigeon", "north")
    denied = await adapter.gateway.receive(Inbound(loft, "m1", "coo?", sender="u7"))
    assert denied.denied
    notice = await eventually(lambda: [e for e in adapter.sent if e.kind == "pairing"], what="a pairing code")
    code = re.search(r"\b[A-Z0-9]{8}\b", notice[0].text).group(0)  # type: ignore[union-attr]
    pending = json.loads((await asyncio.to_thread(run_cli, "pairing", "list", "--json")).output)["pending"]
    assert [(p["platform"], p["user"]) for p in pending] == [("pigeon", "u7")]
    approved = await asyncio.to_thread(run_cli, "pairing", "approve", code)
    assert approved.exit_code == 0, approved.output

    fake_model.set_default_reply("coo coo")
    await adapter.gateway.receive(Inbound(loft, "m2", "coo!", sender="u7"))
    await eventually(lambda: [e for e in adapter.sent if e.text == "coo coo"], what="the answer after pairing")


@pytest.mark.parametrize("name", ["telegram", "slack"])
def test_a_platform_is_named_in_at_most_three_files_outside_its_own_folders(name: str) -> None:
    package = Path(vigil.__file__).parent
    own = (f"gateway/adapters/{name}/", f"testing/{name}_api/")
    naming = sorted(
        str(path.relative_to(package)) for path in package.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
        and not any(part in str(path.relative_to(package)) for part in own)
        and name in path.read_text(errors="replace").lower()
    )
    # its declaration, the registry's list, and config's section
    assert len(naming) <= 3, naming
