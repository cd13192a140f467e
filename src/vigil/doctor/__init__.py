"""``vigil doctor``: checks of a profile's config, store, platforms, sandbox, model endpoint
and gateway, each a small function returning :class:`~vigil.doctor.result.CheckResult` lines.

Doctor only reads: it never creates, writes or migrates anything (a store is opened
read-only, a schema behind is reported, not upgraded), and every check is time-bound.
"""

from vigil.doctor.result import STATUSES, CheckResult, Status
from vigil.doctor.runner import find_profile, run_checks

__all__ = ["STATUSES", "CheckResult", "Status", "find_profile", "run_checks"]
