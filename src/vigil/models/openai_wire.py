"""OpenAI-compatible chat completions over plain HTTP: the request, the JSON answer, the event stream.

vigil sends a body that is plain JSON already and reads answers as plain data, so it needs
none of the official SDK's typed models; importing them costs more CPU than a whole one-shot
``vigil chat -q`` is allowed (``bench/startup.py``). This module is the part of the SDK vigil
used: bearer auth, one POST, the parsed answer or Server-Sent Events, and errors that say
what went wrong (status and body, a connection that failed, an error event inside a stream).
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

# httpx's package imports its command-line client (rich.syntax, pygments: ~40 ms of CPU)
# whenever click and rich are installed, as they are with vigil, which never runs it. A None
# module entry makes that optional import fail the way httpx expects when they are missing.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
import httpx  # noqa: E402

from vigil.models.lanes import Lanes  # noqa: E402

TransportError = httpx.HTTPError
"""What a connection that breaks while a stream is read raises."""

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


def tls_for(base_url: str) -> ssl.SSLContext | bool:
    """How the client verifies TLS for ``base_url``: ``True`` (the CA bundle) for an https
    endpoint or when a proxy may be used; for a plain-http endpoint (a local server) a context
    that trusts no certificate at all. No request to such an endpoint makes a TLS connection
    (redirects are not followed), and loading the CA bundle costs 20-40 ms of CPU a process;
    should one ever be made, it fails closed."""
    if not base_url.lower().startswith("http://") or any(os.environ.get(name) for name in PROXY_VARIABLES):
        return True
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies hostnames and certificates, trusts none


class WireError(Exception):
    """Something the endpoint answered (or failed to) that is not a usable answer."""

    def __init__(self, message: str, *, body: object = None) -> None:
        super().__init__(message)
        self.message = message
        self.body = body


class WireStatusError(WireError):
    """The endpoint answered with an HTTP error status."""

    def __init__(self, status_code: int, body: object, headers: Mapping[str, str]) -> None:
        super().__init__(f"Error code: {status_code} - {body}", body=body)
        self.status_code = status_code
        self.headers = headers


class WireConnectionError(WireError):
    """No answer: the connection was refused, broke, or timed out (``timed_out``)."""

    def __init__(self, *, timed_out: bool) -> None:
        super().__init__("Connection error." if not timed_out else "Request timed out.")
        self.timed_out = timed_out


class WireStreamError(WireError):
    """An ``error`` event inside a stream: the provider failed the answer after it began."""


def _parsed_body(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return text


class EventStream:
    """One streamed answer: ``headers``, then the JSON of each event until ``[DONE]``.

    A ``data:`` line that is not JSON raises ``json.JSONDecodeError``; an event carrying an
    ``error`` raises ``WireStreamError``; a broken connection raises ``httpx.HTTPError``.
    """

    def __init__(self, response: httpx.Response, on_close: Callable[[], None] = lambda: None) -> None:
        self.response = response
        self.headers = response.headers
        self._on_close = on_close

    async def read_text(self) -> str:
        """The rest of the body as text (a web page answered instead of a stream)."""
        return (await self.response.aread()).decode("utf-8", errors="replace")

    async def events(self) -> AsyncIterator[Any]:
        event: str | None = None
        data: list[str] = []
        lines = self.response.aiter_lines()
        async for line in lines:
            if line:
                field, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if field == "data":
                    data.append(value)
                elif field == "event":
                    event = value
                continue
            if not data:
                event = None
                continue
            payload = "\n".join(data)
            data, kind, event = [], event, None
            if payload.startswith("[DONE]"):
                await _finish(lines)
                return
            parsed = json.loads(payload)
            if isinstance(parsed, Mapping) and parsed.get("error") is not None:
                error = parsed["error"]
                message = error.get("message") if isinstance(error, Mapping) else None
                raise WireStreamError(str(message or error), body=error)
            if kind not in (None, "message", "error"):
                continue  # an event kind chat completions do not define (a keep-alive, say)
            yield parsed

    async def aclose(self) -> None:
        try:
            await self.response.aclose()
        finally:
            self._on_close()


DRAIN_SECONDS = 0.05
DRAIN_LINES = 16


async def _finish(lines: AsyncIterator[str]) -> None:
    """Read what follows ``[DONE]`` (the end of the chunked body, at most a few lines) so that
    the connection goes back to the pool for the next call: one closed unread costs every turn
    a new connection (and, to an https endpoint, a TLS handshake). A server that keeps sending
    or lingers is left to close with the response."""
    try:
        async with asyncio.timeout(DRAIN_SECONDS):
            for _ in range(DRAIN_LINES):
                await anext(lines)
    except (StopAsyncIteration, TimeoutError, httpx.HTTPError):
        pass


class ChatWire:
    """An HTTP client for one OpenAI-compatible ``base_url`` with a bearer ``api_key``."""

    def __init__(self, *, base_url: str, api_key: str, timeout: float) -> None:
        self._base_url = base_url
        self._api_key = api_key
        self._timeout = timeout
        self._tls: ssl.SSLContext | None = None
        self.lanes: Lanes[httpx.AsyncClient] = Lanes(self._client)
        """The clients requests go out on (see :mod:`vigil.models.lanes`)."""

    def _client(self) -> httpx.AsyncClient:
        """One lane's client: one connection, kept alive."""
        if self._tls is None:  # made once for every lane: loading the CA bundle is what costs
            verify = tls_for(self._base_url)
            self._tls = verify if isinstance(verify, ssl.SSLContext) else httpx.create_ssl_context(verify=verify)
        return httpx.AsyncClient(
            base_url=self._base_url.rstrip("/") + "/",
            headers={"Authorization": f"Bearer {self._api_key}", "Accept": "application/json"},
            timeout=httpx.Timeout(self._timeout, connect=min(self._timeout, 10.0)),
            verify=self._tls,
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
        )

    async def post_json(self, path: str, body: Mapping[str, Any]) -> object:
        """POST ``body``; the parsed JSON answer, or its text when it is not JSON."""
        response, _ = await self._send("POST", path, body, stream=False)
        text = response.text
        if "json" in response.headers.get("content-type", ""):
            return json.loads(text)  # a JSON answer that does not parse is malformed, said so
        return _parsed_body(text)

    async def get_json(self, path: str) -> object:
        """GET ``path``; the parsed JSON answer (or its text)."""
        response, _ = await self._send("GET", path, None, stream=False)
        return _parsed_body(response.text)

    async def post_stream(self, path: str, body: Mapping[str, Any]) -> EventStream:
        """POST ``body`` asking for a stream; the caller closes the ``EventStream``."""
        return EventStream(*await self._send("POST", path, body, stream=True))

    async def aclose(self) -> None:
        await self.lanes.aclose()

    async def _send(
        self, method: str, path: str, body: Mapping[str, Any] | None, *, stream: bool
    ) -> tuple[httpx.Response, Callable[[], None]]:
        """The response (read and closed unless ``stream``) and what gives its connection's
        lane back once the caller closed it (done already unless ``stream``)."""
        content = None if body is None else json.dumps(body, ensure_ascii=False).encode("utf-8")
        headers = {"Content-Type": "application/json"} if content is not None else None
        if stream:
            headers = {**(headers or {}), "Accept": "text/event-stream"}
        http, give_back = self.lanes.take()
        request = http.build_request(method, path.lstrip("/"), content=content, headers=headers)
        response: httpx.Response | None = None
        try:
            response = await http.send(request, stream=True)
            if response.status_code >= 400:
                text = (await response.aread()).decode("utf-8", errors="replace")
                raise WireStatusError(response.status_code, _parsed_body(text), response.headers)
            if not stream:
                await response.aread()
        except BaseException as exc:
            try:
                if response is not None:
                    await response.aclose()
            finally:
                give_back()
            if isinstance(exc, httpx.HTTPError):
                raise WireConnectionError(timed_out=isinstance(exc, httpx.TimeoutException)) from exc
            raise
        if not stream:
            try:
                await response.aclose()
            finally:
                give_back()
        return response, give_back
