"""Running cron jobs inside a ``vigil cron`` command's own process (``cron run``, ``cron tick``).

The commands themselves (parsing, rendering) are in :mod:`vigil.cli.cron_cmd`; here is what a
run needs around it: the model client, the scheduler's tick, and handing platform answers to
the profile's running gateway.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import click

from vigil.cli.context import AppContext
from vigil.schedule import estop
from vigil.schedule.cron.repo import CronRepo

if TYPE_CHECKING:
    from vigil.runtime.cron_runner import CronRunner
    from vigil.schedule.cron.repo import Claim
    from vigil.schedule.cron.runs import RunRecord
    from vigil.schedule.cron.scheduler import TickReport


async def run_now(app: AppContext, repo: CronRepo, name: str) -> RunRecord | None:
    """Run the job ``name`` once now, outside its schedule; ``None`` when the emergency stop
    kept it from starting. The run is recorded in the job's run log like a scheduled one."""
    # Without a model the run still happens and fails with the configuration hint, recorded
    # in the run log like a scheduled run's failure (a manual run starts no back-off).
    async with JobRunner(app, repo, connect_lazily=True) as runner:
        claim = await asyncio.to_thread(repo.claim_manual, name)
        return await runner.execute(claim)


async def tick(app: AppContext, repo: CronRepo) -> TickReport:
    """Run whatever is due now, once (``vigil cron tick``): a model client is made only when
    something is due; abandoned runs are recovered either way."""
    from vigil.schedule.cron.scheduler import CronScheduler, TickReport, due_names

    if await asyncio.to_thread(estop.engaged, repo.store):
        return TickReport(stopped=True)
    if not await asyncio.to_thread(due_names, repo, include_running=False):
        # Nothing to run, so no model client is needed; abandoned runs are still recovered,
        # and anything that became due in the meantime is given back for the next tick.
        async def give_back(claim: Claim) -> None:
            await asyncio.to_thread(repo.refund, claim)

        return await CronScheduler(repo, give_back, clock=repo.clock, poll_interval=0).tick()
    async with JobRunner(app, repo) as runner:
        scheduler = CronScheduler(repo, runner.execute, clock=repo.clock, poll_interval=0)
        return await scheduler.tick()


class JobRunner:
    """``async with JobRunner(app, repo) as runner``: a CronRunner with its model client."""

    def __init__(self, app: AppContext, repo: CronRepo, *, connect_lazily: bool = False) -> None:
        self.app, self.repo, self.connect_lazily = app, repo, connect_lazily
        self.outcomes: Any = None

    async def __aenter__(self) -> CronRunner:
        from vigil.models.base import ModelClient, ModelError
        from vigil.models.factory import build_client
        from vigil.models.lazy import LazyModelClient
        from vigil.runtime.cron_runner import CronRunner

        self.client: ModelClient
        if self.connect_lazily:
            self.client = LazyModelClient(self.app.settings.model, home=self.app.profile.home)
        else:
            try:
                self.client = await build_client(self.app.settings.model, home=self.app.profile.home)
            except ModelError as exc:
                raise click.ClickException(str(exc)) from None
        runner = CronRunner(repo=self.repo, client=self.client, profile=self.app.profile,
                            settings=self.app.settings, clock=self.repo.clock)
        self.outcomes = await asyncio.to_thread(_beside_gateway, self.app, runner)
        return runner

    async def __aexit__(self, *exc: object) -> None:
        try:
            if self.outcomes is not None:  # the gateway may have sent an answer before its run was recorded
                await asyncio.to_thread(self.outcomes.reconcile)
        finally:
            await self.client.aclose()


def _beside_gateway(app: AppContext, runner: CronRunner) -> Any:
    """With the profile's gateway running, platform answers go into its outbox (it serves them
    within half a minute) instead of waiting as needs-gateway."""
    import time

    from vigil.gateway.cron_delivery import hand_to_running_gateway
    from vigil.gateway.status import read_status

    status = read_status(runner.store, app.profile, now=time.time())
    if not status.running:
        return None
    return hand_to_running_gateway(runner.store, runner.router, status.adapters, time.time)
