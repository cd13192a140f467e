"""The names of vigil's built-in tools, known to the config layer without importing the tools.

``tools.enabled`` in config.yaml is checked against this list when the config loads;
``vigil.tools.registry`` builds the tools themselves, and a test keeps the two in step.
"""

from __future__ import annotations

BUILTIN_TOOL_NAMES: tuple[str, ...] = (
    "terminal",
    "read_file",
    "write_file",
    "patch_file",
    "memory",
    "skills_list",
    "skill_view",
    "session_search",
    "cron",
    "send_file",
)
