"""Each configured MCP server: does it start and list its tools (as ``vigil mcp test`` does)?

Nothing is said when no server is configured. A server is started for the check and stopped
again; its error output goes to ``logs/mcp-NAME.log`` as always. The store is not touched.
"""

from __future__ import annotations

import asyncio

from vigil.doctor.result import CheckResult, Subject, ok, problem, warning

AREA = "mcp"
START_BOUND = 15.0
"""Seconds each server may take here at most (the runner gives the whole area 20 s)."""


def check_mcp(subject: Subject) -> list[CheckResult]:
    if subject.settings is None:
        return []  # config.yaml is broken: its own check says so
    from vigil.tools.mcp.config import configured
    from vigil.tools.mcp.probe import probe_all

    specs = list(configured(subject.settings).values())
    if not specs:
        return []
    bound = min(subject.settings.mcp.start_timeout, START_BOUND)
    probes = asyncio.run(probe_all(specs, subject.profile, subject.settings, timeout=bound))
    results: list[CheckResult] = []
    for found in probes:
        name = found.spec.name
        if not found.ok:
            results.append(problem(
                AREA, name, f"does not start: {found.error}",
                f"vigil mcp test {name}   (its own error output: logs/mcp-{name}.log in the profile)",
            ))
            continue
        detail = f"{len(found.tools)} tool(s), started in {found.seconds:.1f} s"
        if found.spec.transport == "stdio" and found.spec.sandbox and not found.sandboxed:
            results.append(warning(
                AREA, name, f"{detail}, but without the sandbox (bubblewrap cannot run here)",
                "see the sandbox checks above, or set sandbox: false for it to say so on purpose",
            ))
        else:
            results.append(ok(AREA, name, detail + (", sandboxed" if found.sandboxed else "")))
    return results
