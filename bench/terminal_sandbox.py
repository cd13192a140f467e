"""What the sandbox costs a terminal command: the same commands through ``run_command``
unsandboxed and in bubblewrap, interleaved in one run, with the ratio per workload.

Workloads: ``true`` (pure start-up cost), ``python3 -c pass`` (an interpreter start) and a
small build step (``seq 1 20000 | sort -n > out.txt``, writing into the workdir). Each is run
``--rounds`` times per mode, alternating the modes, after one warm-up run each; the probe of
bubblewrap (once per process) is timed separately.

    python bench/terminal_sandbox.py [--rounds 30]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from vigil.tools import sandbox
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
    print(f"{rounds} rounds per mode, interleaved; median and p90 wall time per command")
    print(f"{'workload':<20} {'plain ms':>10} {'sandbox ms':>11} {'ratio':>7} {'+ms':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        box = sandbox.Sandbox(found.bwrap, workdir, homes=(workdir / "no-home",))
        for name, command in WORKLOADS.items():
            await _once(command, workdir, None)
            await _once(command, workdir, box)
            plain: list[float] = []
            boxed: list[float] = []
            for _ in range(rounds):
                plain.append(await _once(command, workdir, None))
                boxed.append(await _once(command, workdir, box))
            p, b = statistics.median(plain), statistics.median(boxed)
            print(f"{name:<20} {p * 1000:>10.1f} {b * 1000:>11.1f} {b / p:>7.2f} {(b - p) * 1000:>7.1f}"
                  f"   (p90 {_p90(plain) * 1000:.1f} / {_p90(boxed) * 1000:.1f})")


def _p90(values: list[float]) -> float:
    return sorted(values)[int(len(values) * 0.9) - 1]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    asyncio.run(main(parser.parse_args().rounds))
    sys.exit(0)
