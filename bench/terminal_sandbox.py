"""What the sandbox costs a terminal command: the same commands through ``run_command``
unsandboxed, in the sandbox without a network, and in the sandbox with its user-mode network
(the default: the shared pasta namespace joined through ``nsenter``), interleaved in one run,
with the ratio per workload. The sandboxes are the ones the terminal tool makes
(``sandbox.for_run`` over a real boundary: a profile home to hide, the user's secrets).

Workloads: ``true`` (pure start-up cost), ``python3 -c pass`` (an interpreter start) and a
small build step (``seq 1 20000 | sort -n > out.txt``, writing into the workdir). Each is run
``--rounds`` times per mode, alternating the modes, after one warm-up run each; the probe of
bubblewrap (once per process) is timed separately.

    python bench/terminal_sandbox.py [--rounds 30]

The ratio and +ms columns compare the sandbox with network (what every command pays by default)
to the plain run; the target is under 25 ms added for ``true``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from vigil.config.settings import Settings
from vigil.profiles import Profile
from vigil.tools import sandbox, sandbox_network
from vigil.tools.boundary import boundary_for
from vigil.tools.terminal import command_environment, run_command

WORKLOADS = {
    "true": "true",
    "python3 -c pass": "python3 -c pass",
    "seq | sort > file": "seq 1 20000 | sort -n > out.txt",
}


async def _once(command: str, workdir: Path, box: sandbox.Sandbox | None) -> float:
    start = time.perf_counter()
    result = await run_command(command, workdir, 60, 20_000, env=command_environment(), sandbox=box)
    elapsed = time.perf_counter() - start
    if not result.content.startswith("exit code: 0"):
        raise SystemExit(f"{command!r} failed: {result.content}")
    return elapsed


async def main(rounds: int) -> None:
    start = time.perf_counter()
    found = sandbox.status()
    probe = time.perf_counter() - start
    if not found.available:
        raise SystemExit(found.line())
    print(f"bubblewrap: {found.bwrap}; probe (once per process): {probe * 1000:.1f} ms")
    start = time.perf_counter()
    network = sandbox_network.network_prefix(())
    print(f"{network.line()}; first start (once per process): {(time.perf_counter() - start) * 1000:.1f} ms")
    print(f"{rounds} rounds per mode, interleaved; median wall time per command in ms (p90 in brackets)")
    print(f"{'workload':<20} {'plain':>12} {'no network':>14} {'network':>14} {'ratio':>7} {'+ms':>7}")
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        workdir = Path(tmp) / "workspace"
        workdir.mkdir()
        profile = Profile("bench", Path(tmp) / "home").ensure()
        boundary = boundary_for(profile, Settings(), workdir)
        boxes: dict[str, sandbox.Sandbox | None] = {"plain": None}
        for name, on in (("no network", False), ("network", True)):
            settings = Settings().tools.terminal.copy_with(update={"network": on})
            box = sandbox.for_run(settings, unattended=True, boundary=boundary)
            assert isinstance(box, sandbox.Sandbox) and box.network is on, box
            boxes[name] = box
        for name, command in WORKLOADS.items():
            samples: dict[str, list[float]] = {mode: [] for mode in boxes}
            for box in boxes.values():
                await _once(command, workdir, box)  # warm-up: page cache, binaries
            for _ in range(rounds):
                for mode, box in boxes.items():
                    samples[mode].append(await _once(command, workdir, box))
            plain, dark, lit = (statistics.median(samples[mode]) for mode in boxes)
            cells = " ".join(f"{statistics.median(v) * 1000:>6.1f} ({_p90(v) * 1000:>4.1f})" for v in samples.values())
            print(f"{name:<20} {cells} {lit / plain:>7.2f} {(lit - plain) * 1000:>7.1f}")
    sandbox_network.shutdown()


def _p90(values: list[float]) -> float:
    return sorted(values)[int(len(values) * 0.9) - 1]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    asyncio.run(main(parser.parse_args().rounds))
    sys.exit(0)
