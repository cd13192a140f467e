"""The gateway's one HTTP server (uvicorn, in the gateway's event loop).

The gateway owns the process's signals, so uvicorn is kept from installing its own handlers.
The listening socket is bound before anything starts, so a port in use is a clear error at
start-up rather than a failure in the background. Every request passes :class:`HostCheck`
first, whatever its route (the web chat, webhooks, ``/healthz``, ``/metrics``), and an error
no route answered becomes a JSON answer in :class:`JsonErrors`, never a traceback on the console.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import logging
import re
import socket
import traceback
from typing import Any, Callable, Iterable, Iterator, Sequence

from vigil.store.errors import StoreUnavailable

log = logging.getLogger(__name__)

Report = Callable[[str, str], None]
"""``report(summary, details)``: an error as one line, and its traceback for the log only."""


class PortUnavailable(Exception):
    """The address or port cannot be listened on; the message says what to do."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (``PortUnavailable`` with the reason)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named: asyncio sets TCP_NODELAY only on connections whose socket says so, and
    # without it a keep-alive response written in two parts waited 40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(512)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortUnavailable(
                f"port {port} on {host} is already in use (another gateway or program?); "
                "choose another with --web-port N or gateway.web.port"
            ) from None
        raise PortUnavailable(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.setblocking(False)
    return sock


HOSTS_SETTING = "gateway.web.allowed_hosts"

# A Host header: a name or an IPv4 address, or an IPv6 address in brackets; an optional port.
_HOST_HEADER = re.compile(r"^(?:\[(?P<ip6>[0-9a-fA-F:.]+)\]|(?P<name>[A-Za-z0-9._-]+))(?::[0-9]{1,5})?$")
IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def host_name(header: str) -> str | None:
    """The name or address a ``Host`` header names, lower-case, without port or brackets;
    ``None`` when the header is not a host."""
    match = _HOST_HEADER.match(header)
    if match is None:
        return None
    return _canonical(match.group("ip6") or match.group("name"))


def _canonical(name: str) -> str:
    """A host name or address as compared: lower-case, without the root's dot, an address in
    its shortest form."""
    address = _address(name)
    return str(address) if address is not None else name.lower().removesuffix(".")


def _address(text: str) -> IpAddress | None:
    try:
        address = ipaddress.ip_address(text[1:-1] if text.startswith("[") and text.endswith("]") else text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped  # an IPv4 client of a dual-stack socket
    return address


class HostCheck:
    """ASGI middleware: a request whose ``Host`` header names another server is answered 421
    and goes no further.

    This is the defence against DNS rebinding: a page under an attacker's name, made to
    resolve to this machine, reaches the server with the attacker's name in ``Host``. Allowed:
    ``localhost``, a loopback address, the address the request arrived at (the bound address;
    with a wildcard bind, whichever of the machine's addresses it came in on: an IP address in
    ``Host`` cannot be rebound), and the names in ``allowed``, with or without a port. A request
    without ``Host`` (HTTP/1.0) passes: every browser sends one."""

    def __init__(self, app: Any, allowed: Iterable[str] = ()) -> None:
        self.app = app
        self.names = frozenset(_canonical(name) for name in allowed)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            hosts = [value.decode("latin-1") for key, value in scope.get("headers", ()) if key == b"host"]
            if hosts and not (len(hosts) == 1 and self.allows(hosts[0], scope.get("server"))):
                await _refuse(scope, receive, send, host_name(hosts[0]) if len(hosts) == 1 else None)
                return
        await self.app(scope, receive, send)

    def allows(self, header: str, server: Sequence[Any] | None) -> bool:
        """Whether a request with this ``Host`` header, arriving at the local address
        ``server`` (``(host, port)``), is for this server."""
        name = host_name(header)
        if name is None:
            return False
        if name == "localhost" or name in self.names:
            return True
        address = _address(name)
        if address is None:
            return False
        return address.is_loopback or (bool(server) and _address(str(server[0])) == address)


async def _refuse(scope: dict[str, Any], receive: Any, send: Any, name: str | None) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
        return
    from starlette.responses import JSONResponse

    if name is None:
        message = "refused: the Host header does not name one host (a name or an address, and a port)"
    else:  # the name matched the header's pattern: it holds nothing but letters, digits and .-_:
        message = (
            f"refused: this server does not answer to the host name '{name}' (a defence against DNS "
            "rebinding). If it is your name for this server (behind a proxy or a load balancer, for "
            f"a platform's webhooks too), add it to the list {HOSTS_SETTING} (the first name: "
            f"vigil config set {HOSTS_SETTING} '[{name}]') and restart the gateway"
        )
    response = JSONResponse({"error": message}, status_code=421, headers={"Cache-Control": "no-store"})
    await response(scope, receive, send)


def _log_report(summary: str, details: str) -> None:
    log.error("%s\n%s", summary, details)


def error_response(exc: Exception) -> Any:
    """The JSON answer to an exception no route answered (``{"error": "..."}``, no caching):
    ``503`` with the reason and ``Retry-After`` for ``StoreUnavailable`` (a full disk, a
    read-only file, a database away: nothing of the request was stored), else ``500`` naming
    only the exception's type."""
    from starlette.responses import JSONResponse

    headers = {"Cache-Control": "no-store"}
    if isinstance(exc, StoreUnavailable):
        return JSONResponse({"error": str(exc)}, status_code=503, headers={**headers, "Retry-After": "10"})
    message = f"internal error ({type(exc).__name__}); the gateway's log has the details"
    return JSONResponse({"error": message}, status_code=500, headers=headers)


class JsonErrors:
    """ASGI middleware: an exception a route lets escape is answered by :func:`error_response`
    (unless the app answered it already: starlette sends its error handler's answer, then
    raises the exception again) and told to ``report`` as a line and its traceback, instead
    of reaching uvicorn, which would print the traceback on the console. A response already
    begun otherwise (a stream) cannot change its status: it is cut short."""

    def __init__(self, app: Any, report: Report = _log_report) -> None:
        self.app = app
        self.report = report

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def sending(message: dict[str, Any]) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception as exc:  # noqa: BLE001 - the point: no error leaves without an answer
            what = f"{scope.get('method', '?')} {scope.get('path', '?')}"
            if isinstance(exc, StoreUnavailable):
                self.report(f"HTTP 503 for {what}: {exc}", "")
            else:
                said = " ".join(str(exc).split())[:300]
                self.report(f"HTTP 500 for {what}: {type(exc).__name__}: {said}",
                            "".join(traceback.format_exception(exc)).rstrip())
            if not started:
                await error_response(exc)(scope, receive, send)


class HttpServer:
    """Serves a starlette app on an already bound socket until :meth:`stop`, to requests
    that pass :class:`HostCheck` with the host names ``allowed_hosts``; errors no route
    answered are answered by :class:`JsonErrors` and told to ``report``."""

    def __init__(
        self, app: Any, sock: socket.socket, *, allowed_hosts: Iterable[str] = (), report: Report = _log_report
    ) -> None:
        import uvicorn

        class _Server(uvicorn.Server):
            @contextlib.contextmanager
            def capture_signals(self) -> Iterator[None]:  # the gateway handles signals itself
                yield

        self.sock = sock
        host, port = sock.getsockname()[:2]
        self.host, self.port = host, port
        self._server = _Server(
            uvicorn.Config(
                HostCheck(JsonErrors(app, report), allowed_hosts), log_level="warning", lifespan="off",
                access_log=False,
                timeout_graceful_shutdown=3,
            )
        )
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        self._task = asyncio.create_task(self._server.serve(sockets=[self.sock]), name="http")
        while not self._server.started:
            if self._task.done():
                self._task.result()  # raises what stopped it
                raise PortUnavailable("the HTTP server stopped at start-up")
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        self._server.should_exit = True
        try:
            await asyncio.wait_for(task, 10)
        except (asyncio.TimeoutError, Exception) as exc:  # a stuck connection must not block shutdown
            log.warning("HTTP server did not stop cleanly: %r", exc)
            task.cancel()


def routes_app(routes: Sequence[Any]) -> Any:
    """A starlette app of ``routes`` whose unanswered errors get :func:`error_response`."""
    from starlette.applications import Starlette

    async def answer(request: Any, exc: Exception) -> Any:
        return error_response(exc)

    return Starlette(routes=list(routes), exception_handlers={Exception: answer})
