"""``python -m vigil.testing.telegram_api``: serve a fake Telegram Bot API on loopback until
interrupted, with its control routes (:mod:`vigil.testing.telegram_api.control`), for trying
vigil's Telegram adapter by hand or driving it from another process."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Sequence

from vigil.testing.telegram_api.server import DEFAULT_TOKEN, FakeTelegramServer


def main(argv: Sequence[str] | None = None) -> int:
    """Serve a fake Bot API until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m vigil.testing.telegram_api",
                                     description="Serve a fake Telegram Bot API on loopback (see the module docstring).")
    parser.add_argument("--port", type=int, default=0, help="the port; 0 picks a free one (default)")
    parser.add_argument("--token", default=DEFAULT_TOKEN, help="the bot token it accepts (default: a test token)")
    args = parser.parse_args(argv)
    if ":" not in args.token:
        parser.error("--token must look like a bot token: <digits>:<letters>")
    server = FakeTelegramServer(token=args.token, port=args.port)
    try:
        server.start()
    except OSError as exc:
        print(f"fake Telegram: cannot serve on port {args.port}: {exc}", file=sys.stderr)
        return 1
    print(f"Bot API URL (telegram.api_url): {server.api_url}")
    print(f"Bot token: {server.token}")
    print(f"Say something as user 1: curl -d '{{\"chat_id\": 1, \"user_id\": 1, \"text\": \"hi\"}}' {server.api_url}/_fake/messages")
    print("Serving; press Ctrl-C to stop.", flush=True)
    stopping = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopping.set())
    while not stopping.wait(0.5):
        pass
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
