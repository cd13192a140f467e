"""The fake's Socket Mode side: the WebSocket server ``apps.connections.open`` points apps at.

A plain ``ws://`` server on loopback (RFC 6455, text frames, ping/pong, close) that greets
each connection with Slack's ``hello`` and sends envelopes (``events_api``,
``slash_commands``, ``interactive``) with an ``envelope_id``; the app acknowledges one by
sending ``{"envelope_id": …}`` back, which :meth:`SocketModeServer.wait_ack` waits for.
"""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import struct
import threading
import uuid
from typing import Any

_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def _frame(opcode: int, payload: bytes) -> bytes:
    head = bytes([0x80 | opcode])
    size = len(payload)
    if size < 126:
        head += bytes([size])
    elif size < 1 << 16:
        head += bytes([126]) + struct.pack("!H", size)
    else:
        head += bytes([127]) + struct.pack("!Q", size)
    return head + payload


def _read_exact(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _read_frame(conn: socket.socket) -> tuple[int, bytes]:
    first, second = _read_exact(conn, 2)
    size = second & 0x7F
    if size == 126:
        size = struct.unpack("!H", _read_exact(conn, 2))[0]
    elif size == 127:
        size = struct.unpack("!Q", _read_exact(conn, 8))[0]
    mask = _read_exact(conn, 4) if second & 0x80 else b""
    data = _read_exact(conn, size)
    if mask:
        data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
    return first & 0x0F, data


class SocketModeServer:
    """Socket Mode connections of apps; thread-safe."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self._listener = socket.create_server((host, 0))
        self.host, self.port = host, self._listener.getsockname()[1]
        self._lock = threading.Condition()
        self._connections: list[tuple[socket.socket, threading.Lock]] = []
        self.acks: dict[str, dict[str, Any]] = {}
        self._closed = False
        threading.Thread(target=self._accept, name="fake-slack-socket", daemon=True).start()

    @property
    def url(self) -> str:
        return f"ws://{self.host}:{self.port}/link/?ticket={uuid.uuid4()}"

    @property
    def connected(self) -> int:
        with self._lock:
            return len(self._connections)

    def send(self, kind: str, payload: dict[str, Any]) -> str:
        """Send an envelope of ``kind`` to the newest connection; its ``envelope_id``."""
        envelope_id = str(uuid.uuid4())
        body = json.dumps({"envelope_id": envelope_id, "type": kind, "payload": payload,
                           "accepts_response_payload": kind != "events_api", "retry_attempt": 0,
                           "retry_reason": ""}).encode()
        with self._lock:
            if not self._connections:
                raise ConnectionError("no app is connected")
            conn, send_lock = self._connections[-1]
        with send_lock:
            conn.sendall(_frame(1, body))
        return envelope_id

    def wait_ack(self, envelope_id: str, timeout: float = 10.0) -> dict[str, Any]:
        with self._lock:
            if not self._lock.wait_for(lambda: envelope_id in self.acks, timeout):
                raise TimeoutError(f"envelope {envelope_id} was not acknowledged")
            return self.acks[envelope_id]

    def wait_connected(self, timeout: float = 10.0) -> None:
        with self._lock:
            if not self._lock.wait_for(lambda: self._connections, timeout):
                raise TimeoutError("no app connected")

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        with self._lock:
            for conn, _ in self._connections:
                conn.close()
            self._connections.clear()

    # -- serving ------------------------------------------------------------------------------
    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        send_lock = threading.Lock()
        try:
            request = b""
            while b"\r\n\r\n" not in request:
                chunk = conn.recv(1024)
                if not chunk:
                    return
                request += chunk
            headers = dict(
                line.split(":", 1) for line in request.decode().split("\r\n")[1:] if ":" in line
            )
            key = next((v.strip() for k, v in headers.items() if k.strip().lower() == "sec-websocket-key"), "")
            accept = base64.b64encode(hashlib.sha1((key + _GUID).encode()).digest()).decode()
            conn.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                          f"Sec-WebSocket-Accept: {accept}\r\n\r\n").encode())
            hello = {"type": "hello", "num_connections": 1,
                     "debug_info": {"host": "fake-slack", "approximate_connection_time": 3600},
                     "connection_info": {"app_id": "A0VIGIL"}}
            conn.sendall(_frame(1, json.dumps(hello).encode()))
            with self._lock:
                self._connections.append((conn, send_lock))
                self._lock.notify_all()
            while True:
                opcode, data = _read_frame(conn)
                if opcode == 8:
                    return
                if opcode == 9:
                    with send_lock:
                        conn.sendall(_frame(10, data))
                elif opcode == 1:
                    message = json.loads(data)
                    if isinstance(message, dict) and "envelope_id" in message:
                        with self._lock:
                            self.acks[message["envelope_id"]] = message
                            self._lock.notify_all()
        except (OSError, ConnectionError, ValueError):
            return
        finally:
            with self._lock:
                self._connections = [(c, l) for c, l in self._connections if c is not conn]
            conn.close()

