"""One local engine per profile, shared by every vigil process (``model.local.shared: true``).

The first process that needs it starts ``python -m vigil.models.shared_engine`` detached; that
process loads the model, records its address in ``local-engine.json`` in the profile home and
stops itself (removing the record) once no request has arrived for ``model.local.idle_stop``
seconds. Every later process reads the record, checks ``/health`` and the model it serves,
and talks to it: the prompt cache then survives a restart of vigil. A lock file makes sure
two processes starting at once start one engine; its log is ``logs/local-engine.log``.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from vigil.models.local_engine import EngineOptions, LocalModelError, get_json

STATE_FILE = "local-engine.json"
LOCK_FILE = "local-engine.lock"
LOG_FILE = "local-engine.log"
_POLL = 0.2
KEY_ENV = "VIGIL_ENGINE_KEY"
"""How the engine's API key reaches the engine process (an argument would show in ``ps``)."""


def _options_record(options: EngineOptions) -> dict[str, Any]:
    return {"path": str(options.path), "threads": options.threads, "context": options.context, "slots": options.slots}


def read_state(home: Path) -> dict[str, Any] | None:
    """The recorded engine of ``home``, if a file says there is one."""
    try:
        data = json.loads((home / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def healthy(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(base_url.removesuffix("/v1") + "/health", timeout=5) as response:
            return response.status == 200
    except (OSError, ValueError):
        return False


def _alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def connect(options: EngineOptions, home: Path, *, idle_stop: float, timeout: float) -> tuple[str, str]:
    """The base URL and API key of the profile's shared engine for ``options``, started if needed.

    Blocking. A running engine serving another model (the config changed) is stopped and
    replaced. Raises ``LocalModelError`` with the engine's own last log line if it fails.
    """
    wanted = _options_record(options)
    state = read_state(home)
    if state and state.get("options") == wanted and _alive(state.get("pid")) and healthy(str(state.get("base_url"))):
        return str(state["base_url"]), str(state.get("api_key"))
    home.mkdir(parents=True, exist_ok=True)
    with open(home / LOCK_FILE, "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the others wait here, then find the engine running
        state = read_state(home)
        if state and _alive(state.get("pid")):
            if state.get("options") == wanted and healthy(str(state.get("base_url"))):
                return str(state["base_url"]), str(state.get("api_key"))
            os.kill(int(state["pid"]), signal.SIGTERM)
        return _start(options, home, idle_stop=idle_stop, timeout=timeout)


def _start(options: EngineOptions, home: Path, *, idle_stop: float, timeout: float) -> tuple[str, str]:
    logs = home / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable, "-m", "vigil.models.shared_engine", "--home", str(home), "--path", str(options.path),
        "--threads", str(options.threads), "--context", str(options.context), "--slots", str(options.slots),
        "--idle-stop", str(idle_stop),
    ]
    key = secrets.token_urlsafe(24)
    with open(logs / LOG_FILE, "ab") as log:
        child = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, close_fds=True,
            env={**os.environ, KEY_ENV: key},
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = read_state(home)
        if state and state.get("pid") == child.pid and healthy(str(state.get("base_url"))):
            return str(state["base_url"]), key
        if child.poll() is not None:
            raise LocalModelError(_last_line(logs / LOG_FILE) or "the shared local engine exited at start")
        time.sleep(_POLL)
    child.terminate()
    raise LocalModelError(f"the shared local engine did not start within {timeout:.0f} s (see {logs / LOG_FILE})")


def stop(home: Path) -> bool:
    """Stop the profile's shared engine; ``False`` when none was running."""
    state = read_state(home)
    if not state or not _alive(state.get("pid")):
        return False
    os.kill(int(state["pid"]), signal.SIGTERM)
    return True


def _last_line(path: Path) -> str:
    try:
        lines = [line for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1].strip() if lines else ""


def _write_state(home: Path, data: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".local-engine-", dir=home)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(data, handle)
    os.chmod(tmp, 0o600)
    os.replace(tmp, home / STATE_FILE)


def _activity(base_url: str, api_key: str) -> Any:
    """What changes whenever the engine serves a request (task ids, or busy)."""
    slots = get_json(base_url.removesuffix("/v1") + "/slots", api_key)
    if not isinstance(slots, list):
        return None
    if any(s.get("is_processing") for s in slots):
        return object()  # busy: never equal to the previous poll
    return tuple(s.get("id_task") for s in slots)


def serve(options: EngineOptions, home: Path, idle_stop: float, api_key: str, poll: float = 2.0) -> None:
    """Run the engine until it has been idle for ``idle_stop`` seconds or is sent SIGTERM."""
    from vigil.models.local_engine import start_engine

    engine = start_engine(options, api_key)
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    record = {"pid": os.getpid(), "base_url": engine.base_url, "api_key": api_key, "options": _options_record(options)}
    _write_state(home, {**record, "started_at": time.time()})
    print(f"serving {options.path} at {engine.base_url}", flush=True)
    last, idle_since = _activity(engine.base_url, api_key), time.monotonic()
    try:
        while not stopping.wait(poll):
            now = _activity(engine.base_url, api_key)
            if now != last:
                last, idle_since = now, time.monotonic()
            elif time.monotonic() - idle_since >= idle_stop:
                print(f"idle for {idle_stop:.0f} s; stopping", flush=True)
                break
    finally:
        state = read_state(home)
        if state and state.get("pid") == os.getpid():
            (home / STATE_FILE).unlink(missing_ok=True)
        engine.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vigil.models.shared_engine", description=__doc__)
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--path", type=Path, required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--context", type=int, required=True)
    parser.add_argument("--slots", type=int, required=True)
    parser.add_argument("--idle-stop", type=float, required=True)
    args = parser.parse_args(argv)
    options = EngineOptions(path=args.path, threads=args.threads, context=args.context, slots=args.slots)
    api_key = os.environ.pop(KEY_ENV, "") or secrets.token_urlsafe(24)
    try:
        serve(options, args.home, args.idle_stop, api_key)
    except LocalModelError as exc:
        print(str(exc), flush=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
