"""The cron layer's errors. Every message is meant for the person who typed the command."""

from __future__ import annotations


class CronError(Exception):
    """Base class: a cron operation cannot be done; the message says why."""


class ScheduleError(CronError, ValueError):
    """A schedule, time zone or duration that cannot be used."""


class InvalidJob(CronError, ValueError):
    """A job definition breaks a rule (name, prompt, target, skill, directory ...)."""


class JobNotFound(CronError):
    """No job has this name."""

    def __init__(self, name: str) -> None:
        super().__init__(f"no cron job named '{name}' (see `vigil cron list`)")
        self.name = name


class JobExists(CronError):
    """A job with this name exists already."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"a cron job named '{name}' exists already (change it with `vigil cron edit {name}` "
            "or pick another name)"
        )
        self.name = name


class JobBusy(CronError):
    """The job is running; it cannot be started again until that run ends."""


class DamagedJob(CronError):
    """A stored job record cannot be decoded."""
