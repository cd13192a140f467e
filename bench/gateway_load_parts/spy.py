"""``gateway_load.py --py-spy FILE``: py-spy samples the gateway during the last level's run
(only the thread holding the GIL, so the shares are of the gateway's Python time; C code that
released the GIL, such as SQLite's commits and socket calls, is not in them), the collapsed
stacks go to FILE, and a summary by part of the gateway is printed."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

PARTS = (
    ("model client (vigil/models: request, httpx send, reading the stream)", r"vigil/models/"),
    ("  httpx send", r"AsyncClient\.send \(httpx"),
    ("  httpcore's pool: assigning requests, has_expired scans", r"_assign_requests_to_connections|has_expired"),
    ("  reading the model's event stream", r"EventStream\.events"),
    ("HTTP server: uvicorn + starlette, routes included", r"uvicorn/"),
    ("  event-stream writes to pages", r"StreamingResponse"),
    ("thread hops (to_thread, the executor)", r"concurrent/futures|asyncio/threads\.py"),
    ("store (vigil/store)", r"vigil/store/"),
    ("gateway/core.py", r"vigil/gateway/core\.py"),
    ("gateway/fanout.py", r"vigil/gateway/fanout\.py"),
    ("json", r"\(json/"),
    ("Profile.agent_workdir", r"agent_workdir"),
    ("logging", r"\(logging/"),
)


def sampler(pid: int, out: Path) -> subprocess.Popen[bytes]:
    """py-spy recording ``pid`` into ``out`` as collapsed stacks, until sent SIGINT."""
    spy = shutil.which("py-spy")
    if spy is None:
        raise SystemExit("--py-spy: no py-spy on PATH (pip install py-spy, into any environment)")
    return subprocess.Popen([spy, "record", "--gil", "--format", "raw", "-r", "250", "-p", str(pid), "-o", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def summary(path: Path) -> None:
    """The share of samples with a frame of each part on the stack, and those ending in asyncio."""
    rows: list[tuple[list[str], int]] = []
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if count.isdigit():
            rows.append((stack.split(";"), int(count)))
    total = sum(n for _, n in rows)
    if not total:
        print(f"py-spy: no samples in {path}")
        return
    print(f"\npy-spy, the gateway at the last level ({total:,} samples of the thread holding the GIL; a part's "
          f"share counts every sample with it on the stack):")
    for label, pattern in PARTS:
        share = sum(n for frames, n in rows if any(re.search(pattern, f) for f in frames)) / total
        print(f"  {share:6.1%}  {label}")
    loop = sum(n for frames, n in rows if "(asyncio/" in frames[-1]) / total
    print(f"  {loop:6.1%}  asyncio itself at the top of the stack (the loop, tasks, futures, transports)")
