"""``FakeModelServer``: the model every vigil test and benchmark talks to.

A real HTTP server on loopback (uvicorn in a background thread) speaking the OpenAI chat
completions API and the Anthropic Messages API, streaming and not, with tool calls; replies
are scripted by the test (``scripting``) and prompt-cache usage is simulated
(``prefix_cache``). Run ``python -m vigil.testing --port 8765`` to serve one by hand
(``--help`` says how to script its replies).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from typing import Callable, Sequence

from vigil.testing.app import FakeModelApp, install_log_filter
from vigil.testing.engine import FakeModelEngine
from vigil.testing.records import RecordedRequest
from vigil.testing.scripting import Reply, Rule
from vigil.testing.serving import ThreadedServer


class FakeModelServer(ThreadedServer):
    """A scriptable fake OpenAI/Anthropic endpoint with prefix-cache accounting.

    Thread-safe: script and inspect it from the test thread while it serves from its own.
    ``stop()`` makes it disappear abruptly (open connections are reset); ``start()`` again
    brings it back on the same port (:class:`~vigil.testing.serving.ThreadedServer`).
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str = "test-key",
        models: Sequence[str] = ("fake-model",),
        default_reply: Reply | str = "ok",
        cache_ttl: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        strict_models: bool = False,
    ) -> None:
        """``port=0`` picks a free port. ``clock`` drives the cache TTL (seconds).
        ``strict_models`` answers 404 for model names not in ``models``."""
        self._engine = FakeModelEngine(
            api_key=api_key,
            models=models,
            default_reply=default_reply,
            cache_ttl=cache_ttl,
            clock=clock,
            strict_models=strict_models,
        )
        super().__init__(FakeModelApp(self._engine), name="fake model server", host=host, port=port)

    def bound(self) -> None:
        install_log_filter()

    # -- addresses and configuration ----------------------------------------------------------

    @property
    def base_url(self) -> str:
        """For OpenAI clients: ``http://127.0.0.1:PORT/v1``."""
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """For Anthropic clients (the SDK appends ``/v1/messages``): ``http://127.0.0.1:PORT``."""
        return self.url

    @property
    def api_key(self) -> str:
        return self._engine.api_key

    @property
    def models(self) -> list[str]:
        return list(self._engine.models)

    # -- scripting ----------------------------------------------------------------------------

    def queue(self, *replies: Reply | str) -> None:
        """Queue replies for the next model calls, used in order before any rule."""
        self._engine.script.queue(*replies)

    def rule(
        self,
        *,
        reply: Reply | str,
        contains: str | None = None,
        match: Callable[[str], bool] | None = None,
        times: int | None = None,
    ) -> Rule:
        """Answer ``reply`` when the last user message's text contains ``contains`` and/or
        satisfies ``match``; at most ``times`` times (``None``: always). Consulted in the
        order added, only when the queue is empty."""
        return self._engine.script.rule(reply=reply, contains=contains, match=match, times=times)

    def set_default_reply(self, reply: Reply | str) -> None:
        """The reply when the queue is empty and no rule applies (until ``reset()``)."""
        self._engine.script.set_default(reply)

    @property
    def pending(self) -> int:
        """Queued replies not yet used."""
        return self._engine.script.pending

    # -- inspection ---------------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every model call since the last reset, oldest first."""
        return self._engine.recorder.snapshot()

    @property
    def last_request(self) -> RecordedRequest | None:
        return self._engine.recorder.last()

    @property
    def hits(self) -> int:
        """Served calls that read at least one token from the cache."""
        return self._engine.recorder.hits

    @property
    def misses(self) -> int:
        """Served calls that read nothing from the cache."""
        return self._engine.recorder.misses

    def wait_for_requests(self, count: int, timeout: float = 5.0) -> list[RecordedRequest]:
        """Block until ``count`` model calls were recorded (from a thread that is not running
        the client under test); raises ``TimeoutError``."""
        return self._engine.recorder.wait_for(count, timeout)

    async def wait_for_requests_async(self, count: int, timeout: float = 5.0) -> list[RecordedRequest]:
        """``wait_for_requests`` for async tests: yields to the event loop while waiting."""
        return await self._engine.recorder.wait_for_async(count, timeout)

    # -- state --------------------------------------------------------------------------------

    def reset(self) -> None:
        """Clear the queue, rules, default reply override, recorded requests, counters and cache."""
        self._engine.reset()

    def clear_cache(self) -> None:
        self._engine.cache.clear()

    def advance_clock(self, seconds: float) -> None:
        """Move the cache clock forward, e.g. past the TTL to expire everything."""
        self._engine.advance_clock(seconds)

    @property
    def cache_ttl(self) -> float:
        return self._engine.cache.ttl


_DESCRIPTION = """\
Serve a fake model on loopback: the OpenAI chat completions API (POST /v1/chat/completions)
and the Anthropic Messages API (POST /v1/messages), streaming and not, plus GET /v1/models in
either dialect, with simulated prompt-cache usage. It needs no key of any provider: point vigil
(or any OpenAI/Anthropic SDK) at the base URL it prints, with the key it prints."""

_EPILOG = """\
Replies are scripted with --rule (first match wins, in the order given) and --reply (every
other answer). Try vigil against it, without any provider key:
  export OPENAI_BASE_URL=<the printed OpenAI base URL>  OPENAI_API_KEY=<the printed key>
  vigil chat -q "hello"
"""


def _rule(text: str) -> tuple[str, str]:
    """``TEXT=REPLY`` of ``--rule``."""
    contains, sep, reply = text.partition("=")
    if not sep or not contains:
        raise argparse.ArgumentTypeError(f"expected TEXT=REPLY, got {text!r}")
    return contains, reply


def main(argv: Sequence[str] | None = None, prog: str = "python -m vigil.testing.fake_model") -> int:
    """Serve a fake model until interrupted (SIGINT or SIGTERM)."""
    parser = argparse.ArgumentParser(
        prog=prog, description=_DESCRIPTION, epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="the port; 0 picks a free one (default)")
    parser.add_argument("--api-key", default="test-key", help="the key clients must send (default test-key)")
    parser.add_argument("--model", action="append", help="a model name to offer (repeatable; default fake-model)")
    parser.add_argument("--reply", default="ok", help="the text of every answer no rule matches (default ok)")
    parser.add_argument(
        "--rule", action="append", type=_rule, default=[], metavar="TEXT=REPLY",
        help="answer REPLY when the last user message contains TEXT (repeatable)",
    )
    args = parser.parse_args(argv)

    server = FakeModelServer(
        host=args.host,
        port=args.port,
        api_key=args.api_key,
        models=args.model or ["fake-model"],
        default_reply=args.reply,
    )
    for contains, reply in args.rule:
        server.rule(contains=contains, reply=reply)
    try:
        server.start()
    except (OSError, RuntimeError) as exc:
        print(f"fake model: cannot serve on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    print(f"OpenAI base URL:    {server.base_url}")
    print(f"Anthropic base URL: {server.anthropic_base_url}")
    print(f"API key: {server.api_key}   models: {', '.join(server.models)}")
    print(f"Try vigil with: OPENAI_BASE_URL={server.base_url} OPENAI_API_KEY={server.api_key} vigil chat -q hello")
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
