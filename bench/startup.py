"""Start-up cost of the ``vigil`` command: wall time and CPU time of whole processes.

Each workload runs as a fresh process, the way a person runs it from a shell:

* ``vigil --help``
* ``vigil sessions list`` (a store with a few conversations)
* ``vigil chat -q hello`` against the fake model server (``vigil.testing``), started by this
  script, which answers at once (its own CPU is not counted: it runs in this process)

next to baselines measured in the same run, alternating run by run so that load from other
processes hits every variant alike:

* ``python -c pass`` and ``python -c 'import click'``: the interpreter and the CLI framework;
* the openai SDK alone, importing it and making one streamed completion against the same
  server: the floor for any one-shot chat that uses the SDK;
* with ``--baseline-rev REV`` (default: e9ba041, the commit before lazy start-up), the same
  vigil workloads from that revision's code, exported with ``git archive`` into a temporary
  directory and run with the same interpreter and packages.

Nothing is written to the checkout: the baseline is an export (``git archive`` only reads the
repository), and every process's bytecode caches go to the temporary directory
(``PYTHONPYCACHEPREFIX``), this script's own included.

CPU is user + system time of the child, from ``os.wait4``. Each figure is the median of
``--runs`` runs (default 9, minimum 7) after one warm-up run per variant, which also writes
the bytecode caches (so no variant pays for compiling its sources, as an installed vigil
would not). Every variant gets its own ``VIGIL_HOME`` with the same content.

    .venv/bin/python bench/startup.py [--runs 9] [--baseline-rev e9ba041 | --baseline-rev '']
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
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_BASELINE = "e9ba041"

SDK_ALONE = """
import asyncio, os, openai
async def main():
    client = openai.AsyncOpenAI(base_url=os.environ["OPENAI_BASE_URL"], api_key=os.environ["OPENAI_API_KEY"], max_retries=0)
    stream = await client.chat.completions.create(
        model=os.environ["VIGIL_MODEL"], messages=[{"role": "user", "content": "hello"}], stream=True
    )
    async for _chunk in stream:
        pass
    await client.close()
asyncio.run(main())
"""

WORKLOADS = {
    "--help": ("--help",),
    "sessions list": ("sessions", "list"),
    "chat -q hello": ("chat", "-q", "hello"),
}
TARGETS = {
    "--help": "target <= 0.12 s wall, <= 0.10 s CPU",
    "chat -q hello": "target <= 0.45 s CPU",
}


@dataclass
class Variant:
    """One command line to measure, with the environment it runs in."""

    label: str
    argv: list[str]
    env: dict[str, str]
    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)

    def run_once(self) -> None:
        start = time.perf_counter()
        proc = subprocess.Popen(self.argv, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        assert proc.stderr is not None
        stderr = proc.stderr.read()
        _pid, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise SystemExit(f"{self.label}: exit {proc.returncode}\n{stderr.decode(errors='replace')}")
        self.walls.append(wall)
        self.cpus.append(usage.ru_utime + usage.ru_stime)

    def summary(self) -> tuple[float, float]:
        return statistics.median(self.walls), statistics.median(self.cpus)


def export(rev: str, into: Path) -> Path:
    """The ``src`` directory of ``rev``, exported with ``git archive`` under ``into`` (read
    from the repository; the checkout is not touched)."""
    target = into / f"vigil-{rev}"
    target.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", rev, "src"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target / "src"


def vigil_command() -> list[str]:
    """The installed console script, as a person runs it (falls back to ``python -m``)."""
    script = Path(sys.executable).with_name("vigil")
    return [str(script)] if script.exists() else [sys.executable, "-m", "vigil.cli.main"]


def child_env(home: Path, model_env: dict[str, str], src: Path | None, pycache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIGIL_", "OPENAI_", "ANTHROPIC_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # let the warm-up write bytecode caches
    env.pop("PYTHONPATH", None)
    # The caches go to the bench's temporary directory, not next to the sources in the checkout.
    env.update(model_env, VIGIL_HOME=str(home), COLUMNS="80", PYTHONPYCACHEPREFIX=str(pycache))
    if src is not None:
        env["PYTHONPATH"] = str(src)  # ahead of the editable install's path entry
    return env


def seed(home: Path, env: dict[str, str], conversations: int = 5) -> None:
    for i in range(conversations):
        subprocess.run([*vigil_command(), "chat", "-q", f"seed {i}"], env=env, check=True, capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9, help="runs per variant (median; at least 7)")
    parser.add_argument(
        "--baseline-rev", default=DEFAULT_BASELINE, help="git revision to compare against ('' for none)"
    )
    args = parser.parse_args()
    if args.runs < 7:
        parser.error("--runs must be at least 7")

    work = Path(tempfile.mkdtemp(prefix="vigil-startup-bench-"))
    pycache = work / "pycache"
    sys.pycache_prefix = str(pycache)  # this process's imports too
    sys.path.insert(0, str(REPO / "src"))
    from vigil.testing.fake_model import FakeModelServer

    server = FakeModelServer(default_reply="ok").start()
    model_env = {
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": server.api_key,
        "VIGIL_MODEL": server.models[0],
    }
    baseline_src: Path | None = None
    try:
        if args.baseline_rev:
            baseline_src = export(args.baseline_rev, work)
        trees: list[tuple[str, Path | None]] = [("now", None)]
        if baseline_src is not None:
            trees.append((args.baseline_rev, baseline_src))

        plain_env = child_env(work / "plain-home", model_env, None, pycache)
        variants: dict[str, list[Variant]] = {
            "baselines": [
                Variant("python -c pass", [sys.executable, "-c", "pass"], plain_env),
                Variant("python -c 'import click'", [sys.executable, "-c", "import click"], plain_env),
                Variant("openai SDK alone: import + 1 streamed completion", [sys.executable, "-c", SDK_ALONE], plain_env),
            ]
        }
        for tree, src in trees:
            env = child_env(work / f"home-{tree}", model_env, src, pycache)
            seed(work / f"home-{tree}", env)
            for name, argv in WORKLOADS.items():
                variants.setdefault(name, []).append(Variant(f"vigil {name} ({tree})", [*vigil_command(), *argv], env))

        everything = [v for group in variants.values() for v in group]
        for variant in everything:  # warm-up: bytecode caches, page cache; not counted
            variant.run_once()
            variant.walls.clear()
            variant.cpus.clear()
        for _ in range(args.runs):
            for variant in everything:
                variant.run_once()
        report(variants, args.runs)
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


def report(variants: dict[str, list[Variant]], runs: int) -> None:
    load = os.getloadavg()
    print(f"vigil start-up, whole processes; median of {runs} runs each, alternating variants")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print("(a shared machine: absolute figures move with its load; the ratios are measured side by side)\n")
    print(f"{'workload':<52} {'wall s':>8} {'CPU s':>8}   {'wall range':>13}")
    for name, group in variants.items():
        if name != "baselines":
            print(f"\n{name}" + (f"   [{TARGETS[name]}]" if name in TARGETS else ""))
        for variant in group:
            wall, cpu = variant.summary()
            spread = f"{min(variant.walls):.3f}-{max(variant.walls):.3f}"
            print(f"  {variant.label:<50} {wall:8.3f} {cpu:8.3f}   {spread:>13}")
        if name != "baselines" and len(group) == 2:
            (now_wall, now_cpu), (base_wall, base_cpu) = group[0].summary(), group[1].summary()
            print(f"  {'ratio now / baseline':<50} {now_wall / base_wall:8.2f} {now_cpu / base_cpu:8.2f}")


if __name__ == "__main__":
    main()
