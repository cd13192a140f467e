"""The other side of a hook, written from the Standard Webhooks description rather than vigil's
code: :func:`signed` makes a request's headers (what ``openssl dgst -sha256 -hmac`` gives),
and :class:`Receiver` is a small HTTP server on a loopback port standing for a hook's ``url``
(Home Assistant, n8n ...): it checks each delivery's signature with the same secret, records
it, and can be told to refuse the next ones."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def signed(secret: str, body: bytes, *, delivery: str | None = None, timestamp: int | None = None) -> dict[str, str]:
    """The headers of a request signed with ``secret`` (its UTF-8 bytes as the HMAC key)."""
    delivery = delivery or f"msg_{uuid.uuid4().hex}"
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    digest = hmac.new(secret.encode(), f"{delivery}.{stamp}.".encode() + body, hashlib.sha256).digest()
    return {"webhook-id": delivery, "webhook-timestamp": stamp,
            "webhook-signature": "v1," + base64.b64encode(digest).decode(), "content-type": "application/json"}


def request(secret: str, payload: Any, **kwargs: Any) -> tuple[bytes, dict[str, str]]:
    """A JSON body and the headers signing it."""
    body = json.dumps(payload).encode()
    return body, signed(secret, body, **kwargs)


@dataclass
class Delivery:
    """One POST the receiver took."""

    headers: dict[str, str]
    body: dict[str, Any]
    genuine: bool
    """Whether its signature matched the secret."""


@dataclass
class Receiver:
    secret: str
    deliveries: list[Delivery] = field(default_factory=list)
    refusals: list[int] = field(default_factory=list)
    """Statuses to answer the next deliveries with (first first), before taking any."""
    refused: int = 0
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/answer"

    def start(self) -> "Receiver":
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                headers = {name.lower(): value for name, value in self.headers.items()}
                if receiver.refusals:
                    status = receiver.refusals.pop(0)
                    receiver.refused += 1
                    self.send_response(status)
                    if status in (429, 503):
                        self.send_header("retry-after", "1")
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                expected = signed(receiver.secret, body, delivery=headers.get("webhook-id", ""),
                                  timestamp=int(headers.get("webhook-timestamp") or 0))["webhook-signature"]
                genuine = hmac.compare_digest(expected, headers.get("webhook-signature", ""))
                receiver.deliveries.append(Delivery(headers, json.loads(body), genuine))
                self.send_response(200 if genuine else 401)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def texts(self, conversation: str | None = None, kind: str | None = None) -> list[str]:
        """The texts delivered (to one conversation, of one kind)."""
        return [d.body["text"] for d in self.deliveries
                if (conversation is None or d.body.get("conversation") == conversation)
                and (kind is None or d.body.get("kind") == kind)]

    def replies_to(self, delivery: str) -> list[Delivery]:
        return [d for d in self.deliveries if d.body.get("in_reply_to") == delivery]
