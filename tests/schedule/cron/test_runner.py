"""Running jobs for real: a fresh cron session over the fake model server, delivery, failures."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from tests.cli.helpers import run_cli
from tests.schedule.cron.conftest import START, AddJob, MakeRunner
from vigil.agent.turn import Agent
from vigil.clock import FakeClock
from vigil.profiles import Profile
from vigil.schedule import estop
from vigil.schedule.cron.delivery import DeliveryResult, DeliveryRouter, Outgoing
from vigil.schedule.cron.format import job_lines
from vigil.schedule.cron.repo import CronRepo
from vigil.store import SQLiteStore
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply, ToolCallSpec


def system_of(body: dict[str, Any]) -> str:
    return next(m["content"] for m in body["messages"] if m["role"] == "system")


def users_of(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "user"]


def tools_of(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools", [])]


async def test_each_run_is_a_fresh_session_built_from_current_files(
    fake_model: FakeModelServer, repo: CronRepo, add_job: AddJob, make_runner: MakeRunner,
    profile: Profile, clock: FakeClock, store: SQLiteStore,
) -> None:
    profile.soul_path.write_text("You are the first persona.\n")
    add_job("digest", "every 1h", prompt="Write the digest.")
    runner = await make_runner()
    fake_model.queue("first answer", "second answer")

    clock.set_sync(START + 3600)
    first = await runner.execute(repo.claim_due("digest").claim)  # type: ignore[arg-type]
    profile.soul_path.write_text("You are the second persona.\n")
    clock.set_sync(START + 7200)
    second = await runner.execute(repo.claim_due("digest").claim)  # type: ignore[arg-type]

    assert first is not None and second is not None and first.session_id != second.session_id
    one, two = (r.body for r in fake_model.requests)
    assert "first persona" in system_of(one) and "second persona" in system_of(two)
    for body in (one, two):
        assert len(users_of(body)) == 1 and len(body["messages"]) == 2  # system + this prompt only
        assert users_of(body)[0].endswith("Write the digest.")
        assert '[Cron job "digest"' in users_of(body)[0]
    session = store.get_session(second.session_id or "")
    assert session.source == "cron" and session.title == "cron: digest"
    assert session.model_config["cron_job"] == "digest" and session.model_config["cron_run"] == second.stamp
    assert session.end_reason == "cron"
    assert [h.session_id for h in store.search("second answer")] == [second.session_id]


async def test_skills_are_loaded_into_the_message_and_the_system_prompt_stays_normal(
    fake_model: FakeModelServer, repo: CronRepo, add_job: AddJob, make_runner: MakeRunner, profile: Profile,
) -> None:
    folder = profile.skills_dir / "weekly-report"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: weekly-report\ndescription: how to report\n---\nUse three bullet points.\n")
    add_job("report", "every 1h", skills=("weekly-report",))
    runner = await make_runner()
    await runner.execute(repo.claim_manual("report"))
    body = fake_model.last_request.body  # type: ignore[union-attr]
    assert "Use three bullet points." in users_of(body)[0]
    assert '<skill name="weekly-report">' in users_of(body)[0]
    assert "Use three bullet points." not in system_of(body)
    assert "weekly-report: how to report" in system_of(body)  # the ordinary skills index


async def test_the_cron_tool_is_absent_inside_cron_runs(
    fake_model: FakeModelServer, repo: CronRepo, add_job: AddJob, make_runner: MakeRunner,
    store: SQLiteStore, profile: Profile,
) -> None:
    add_job("sneaky", "every 1h")
    runner = await make_runner()
    fake_model.queue(
        Reply.tool_calls(ToolCallSpec("cron", {"action": "add", "name": "x", "schedule": "every 1h", "prompt": "p"})),
        "done",
    )
    record = await runner.execute(repo.claim_manual("sneaky"))
    assert record is not None and record.status == "ok"
    first = fake_model.requests[0].body
    assert "cron" not in tools_of(first) and "terminal" in tools_of(first)
    assert "cron" not in store.get_session(record.session_id or "").tool_names
    tool_result = next(m for m in store.get_messages(record.session_id or "") if m.role == "tool")
    assert "not available in this session" in (tool_result.content or "")
    assert [job.name for job in repo.list()] == ["sneaky"]
    # An ordinary conversation does have it.
    chat = Agent(store=store, client=runner.client, profile=profile, settings=runner.settings.copy_with(
        update={"tools": runner.settings.tools.copy_with(update={"enabled": None})}))
    assert "cron" in (await chat.new_session()).tool_names


async def test_local_delivery_and_silent_answers(
    fake_model: FakeModelServer, repo: CronRepo, add_job: AddJob, make_runner: MakeRunner, profile: Profile,
    clock: FakeClock,
) -> None:
    add_job("news", "every 1h")
    runner = await make_runner()
    fake_model.queue("Three things happened.", "[SILENT] nothing new")
    clock.set_sync(START + 3600)
    loud = await runner.execute(repo.claim_due("news").claim)  # type: ignore[arg-type]
    clock.set_sync(START + 7200)
    quiet = await runner.execute(repo.claim_due("news").claim)  # type: ignore[arg-type]
    assert loud is not None and quiet is not None
    assert loud.status == "ok" and loud.delivery and loud.delivery["status"] == "saved"
    path = Path(loud.delivery["path"])
    assert path == profile.cron_output_dir / "news" / f"{loud.stamp}.md"
    assert "Three things happened." in path.read_text() and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert quiet.status == "silent" and quiet.answer == "[SILENT] nothing new"
    assert quiet.delivery and quiet.delivery["status"] == "silent"
    assert sorted(p.name for p in (profile.cron_output_dir / "news").iterdir()) == [path.name]
    assert repo.get("news").counts == {"ok": 1, "silent": 1}


async def test_gateway_targets_need_the_gateway(
    fake_model: FakeModelServer, repo: CronRepo, add_job: AddJob, make_runner: MakeRunner,
) -> None:
    add_job("ping", "every 1h", deliver="slack:C0123ABC:1712345678.123456")
    runner = await make_runner()
    record = await runner.execute(repo.claim_manual("ping"))
    assert record is not None and record.status == "ok"
    assert record.delivery and record.delivery["status"] == "needs-gateway"
    assert "needs the gateway" in record.delivery["detail"] and Path(record.delivery["path"]).exists()


class _DownPlatform:
    """A platform adapter whose service is down (no real adapter exists yet)."""

    async def deliver(self, message: Outgoing) -> DeliveryResult:
        raise ConnectionError("telegram answered 502 Bad Gateway")


async def test_a_failed_delivery_shows_in_the_cron_tables(
    fake_model: FakeModelServer, repo: CronRepo, add_job: AddJob, make_runner: MakeRunner, clock: FakeClock,
    profile: Profile, monkeypatch: pytest.MonkeyPatch,
) -> None:
    add_job("ping", "every 1h", deliver="telegram:@my_channel")
    router = DeliveryRouter(profile.cron_output_dir)
    router.register("telegram", _DownPlatform())
    runner = await make_runner(router=router)
    fake_model.queue("pong")
    record = await runner.execute(repo.claim_manual("ping"))
    assert record is not None and record.delivery and record.delivery["status"] == "failed"
    monkeypatch.setenv("VIGIL_CRON_NOW", str(clock.now()))
    runs = run_cli("cron", "runs").output
    assert "ok, delivery failed" in runs and "Bad Gateway" in runs
    listed = [line for line in run_cli("cron", "list").output.splitlines() if line.split()[:1] == ["ping"]]
    assert listed and "ok, delivery failed" in listed[0]


async def test_a_failing_model_is_recorded_and_backs_off(
    fake_model: FakeModelServer, repo: CronRepo, add_job: AddJob, make_runner: MakeRunner, clock: FakeClock,
) -> None:
    add_job("broken", "every 1m")
    runner = await make_runner()
    fake_model.set_default_reply(Reply.error(400, "bad request"))
    clock.set_sync(START + 60)
    record = await runner.execute(repo.claim_due("broken").claim)  # type: ignore[arg-type]
    assert record is not None and record.status == "failed" and "bad request" in (record.error or "")
    job = repo.get("broken")
    assert job.failures == 1 and job.backoff_until == START + 120 and job.last_status == "failed"
    shown = "\n".join(job_lines(job, clock.now()))
    assert "failing    1 failure(s) in a row; backing off until 2026-03-02 08:02 UTC" in shown
    assert "last run   failed at 2026-03-02 08:01 UTC — " in shown and "bad request" in shown


async def test_workdir_and_missing_skill(
    fake_model: FakeModelServer, repo: CronRepo, add_job: AddJob, make_runner: MakeRunner,
    profile: Profile, tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "AGENTS.md").write_text("Project rule: always be brief.\n")
    add_job("proj", "every 1h", workdir=str(project))
    skill = profile.skills_dir / "gone"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("temporary")
    add_job("needs-skill", "every 1h", skills=("gone",))
    (skill / "SKILL.md").unlink()
    runner = await make_runner()
    record = await runner.execute(repo.claim_manual("proj"))
    assert record is not None and "always be brief" in system_of(fake_model.last_request.body)  # type: ignore[union-attr]
    failed = await runner.execute(repo.claim_manual("needs-skill"))
    assert failed is not None and failed.status == "failed" and "no skill named 'gone'" in (failed.error or "")


async def test_the_emergency_stop_refunds_the_claim(
    fake_model: FakeModelServer, repo: CronRepo, add_job: AddJob, make_runner: MakeRunner,
    store: SQLiteStore, clock: FakeClock,
) -> None:
    add_job("j", "every 1h")
    runner = await make_runner()
    clock.set_sync(START + 3600)
    claim = repo.claim_due("j").claim
    estop.engage(store, clock.now(), reason="test")
    assert await runner.execute(claim) is None  # type: ignore[arg-type]
    job = repo.get("j")
    assert job.next_due == START + 3600 and job.running is None and fake_model.requests == []
