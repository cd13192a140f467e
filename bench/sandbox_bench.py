"""What the sandbox's network costs each command: start-up of ``true`` and ``bash -c true``
unsandboxed, in bubblewrap without a network (``--unshare-net``), in bubblewrap joining the
shared user-mode namespace (:mod:`vigil.tools.sandbox_network`: ``nsenter`` in front), and,
for reference, with a fresh pasta per command.

The bubblewrap line is the one ``Sandbox.argv`` builds (a temporary workspace, nothing to
hide); ``bench/terminal_sandbox.py`` measures whole commands through the terminal tool's path. The fresh-pasta variant runs the command under pasta alone:
as root pasta's command runs unmapped in its user namespace and cannot start bubblewrap, so it
is a lower bound of pasta plus bubblewrap. The variants alternate run by run, so load from
other processes hits them alike; each figure is the median (and p90) wall time of starting the
command and waiting for it, in ms, with the ratio of the medians to the unsandboxed run. The
first start of the shared namespace (once per process) is timed separately. Nothing here
asserts; the target is a sandbox with network under 25 ms per command.

    .venv/bin/python bench/sandbox_bench.py [--runs 50]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from vigil.tools import sandbox_network
from vigil.tools.boundary import Boundary
from vigil.tools.sandbox import Sandbox

WORKLOADS = {"true": ["true"], "bash -c true": ["bash", "-c", "true"]}
TARGET_MS = 25.0


def sandboxed(bwrap: str, workdir: Path, entry: sandbox_network.NetworkEntry | None) -> Callable[[list[str]], list[str]]:
    """The command line ``Sandbox.argv`` builds: without a network, or joining ``entry``'s."""
    box = Sandbox(bwrap, Boundary(workdir, (), ()), network=entry is not None,
                  network_prefix=entry.prefix or () if entry else (), network_args=entry.bwrap_args if entry else ())
    return box.argv


def fresh_pasta(pasta: str) -> list[str]:
    argv = [pasta, "--foreground", "--quiet", "--config-net", "--no-map-gw", "--tcp-ports", "none",
            "--udp-ports", "none", "--tcp-ns", "none", "--udp-ns", "none"]
    if os.geteuid() == 0:
        argv += ["--runas", "0"]
    return argv + ["--"]


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{argv[0]} ... failed ({done.returncode}): {done.stderr.decode(errors='replace')[:300]}")
    return elapsed


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, int(len(ordered) * 0.9 + 0.5) - 1)]


def main(runs: int) -> None:
    bwrap, pasta = shutil.which("bwrap"), shutil.which("pasta")
    if bwrap is None or pasta is None:
        raise SystemExit("needs bubblewrap and pasta (apt-get install bubblewrap passt)")
    start = time.perf_counter()
    entry = sandbox_network.network_prefix(())
    first = time.perf_counter() - start
    if entry.prefix is None:
        raise SystemExit(entry.line())
    start = time.perf_counter()
    for _ in range(1000):
        sandbox_network.network_prefix(())
    cached = (time.perf_counter() - start) / 1000

    print(f"python {sys.version.split()[0]}, uid {os.geteuid()}, {os.cpu_count()} CPUs; {bwrap}, {pasta}")
    print(f"shared namespace: first start {first * 1000:.1f} ms (once per process), "
          f"each later look-up {cached * 1e6:.1f} us")
    print(f"{runs} runs per variant and workload, interleaved; wall ms per command (median / p90)")
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        workdir = Path(tmp)
        variants: dict[str, Callable[[list[str]], list[str]]] = {
            "unsandboxed": lambda cmd: cmd,
            "bwrap, no network": sandboxed(bwrap, workdir, None),
            "bwrap + shared pasta": sandboxed(bwrap, workdir, entry),
            "fresh pasta (no bwrap)": lambda cmd: [*fresh_pasta(pasta), *cmd],
        }
        print(f"{'workload':<14} {'variant':<24} {'median':>8} {'p90':>8} {'ratio':>7} {'+ms':>7}")
        for name, command in WORKLOADS.items():
            samples: dict[str, list[float]] = {variant: [] for variant in variants}
            for build in variants.values():
                timed(build(command))  # warm-up: page cache, binaries
            for _ in range(runs):
                for variant, build in variants.items():
                    samples[variant].append(timed(build(command)))
            base = statistics.median(samples["unsandboxed"])
            for variant, values in samples.items():
                median = statistics.median(values)
                print(f"{name:<14} {variant:<24} {median * 1000:>8.1f} {p90(values) * 1000:>8.1f} "
                      f"{median / base:>7.1f} {(median - base) * 1000:>7.1f}")
            networked = statistics.median(samples["bwrap + shared pasta"]) * 1000
            verdict = "met" if networked < TARGET_MS else "NOT met"
            print(f"{'':<14} target: sandbox with network under {TARGET_MS:g} ms: {verdict} ({networked:.1f} ms)")
    sandbox_network.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    main(max(5, parser.parse_args().runs))
