"""``FakeTelegramServer``: a local Telegram Bot API for tests and benchmarks.

A real HTTP server on loopback (uvicorn in a background thread, like the fake model) serving
``/bot<token>/<method>`` and ``/file/bot<token>/<path>`` in the Bot API's shapes, with long
polling (``getUpdates`` holds the request until an update comes or its ``timeout`` passes) or
webhook delivery (``setWebhook``: updates are POSTed to the URL with the secret token header,
retried until answered 2xx). The test plays the users — private chats, groups, forum topics,
documents, photos, button presses — reads what the bot sent and edited, and injects faults
(the next calls answer 502, or 429 with ``retry_after``). Thread-safe.

Point python-telegram-bot at it with ``Bot(token, base_url=fake.api_url + "/bot",
base_file_url=fake.api_url + "/file/bot")``; vigil takes ``telegram.api_url: fake.api_url``.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Iterable

import httpx
import uvicorn

from vigil.testing.telegram_api import methods
from vigil.testing.telegram_api.app import build_app
from vigil.testing.telegram_api.control import control_routes
from vigil.testing.telegram_api.state import JSON, Call, FakeBotState, Fault, SentMessage

DEFAULT_TOKEN = "123456789:AAFakeTelegramTokenForVigilTests_000"
WEBHOOK_RETRY = 0.1


class FakeTelegramServer:
    """See the module docstring. ``start()`` binds a free port; ``stop()`` ends it."""

    def __init__(self, *, token: str = DEFAULT_TOKEN, username: str = "vigil_test_bot", host: str = "127.0.0.1",
                 port: int = 0) -> None:
        self.state = FakeBotState(token, username)
        self._host = host
        self._port = port
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._stopping = False

    # -- life cycle -------------------------------------------------------------------------
    def start(self) -> "FakeTelegramServer":
        if self._thread is not None and self._thread.is_alive():
            return self
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self._host, self._port))
        sock.listen(128)
        self._port = sock.getsockname()[1]
        self._stopping = False

        app = build_app(self.state, lambda: self._stopping, methods.HANDLERS, methods.get_updates, control_routes(self))
        config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="off", http="h11",
                                ws="none", loop="asyncio", timeout_graceful_shutdown=1)
        server = uvicorn.Server(config)
        self._server = server
        self._thread = threading.Thread(target=asyncio.run, args=(self._serve(server, sock),),
                                        name="fake-telegram", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the fake Telegram server did not start")
            time.sleep(0.001)
        return self

    async def _serve(self, server: uvicorn.Server, sock: socket.socket) -> None:
        hooks = asyncio.create_task(self._deliver_webhooks(server))
        try:
            await server.serve(sockets=[sock])
        finally:
            hooks.cancel()

    def stop(self) -> None:
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        self._stopping = True
        server.should_exit = True
        thread.join(10)
        self._server = self._thread = None

    def __enter__(self) -> "FakeTelegramServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def api_url(self) -> str:
        """The base URL (``telegram.api_url``): methods are under ``/bot<token>/``."""
        return f"http://{self._host}:{self._port}"

    @property
    def token(self) -> str:
        return self.state.token

    @property
    def bot(self) -> JSON:
        return dict(self.state.bot)

    # -- the users' side --------------------------------------------------------------------
    @staticmethod
    def user(user_id: int, first_name: str | None = None, username: str | None = None) -> JSON:
        body: JSON = {"id": user_id, "is_bot": False, "first_name": first_name or f"User{user_id}"}
        if username:
            body["username"] = username
        return body

    def message(
        self, chat_id: int, user_id: int, text: str | None = None, *, chat_type: str = "private",
        thread_id: int | None = None, document: tuple[str, bytes] | None = None, photo: bytes | None = None,
        caption: str | None = None, message_id: int | None = None, title: str | None = None,
    ) -> JSON:
        """``user_id`` writes in ``chat_id`` (a private chat when ``chat_type`` is ``private``;
        ``group``/``supergroup`` otherwise, a forum topic with ``thread_id``); returns the update.
        ``message_id`` repeats an earlier message (a redelivery)."""
        sender = self.user(user_id)
        forum = thread_id is not None
        chat = self.state.chat(chat_id, chat_type, title, forum, sender)
        if forum:
            with self.state.lock:
                self.state.topics.setdefault(chat_id, set()).add(thread_id)  # type: ignore[arg-type]
        body: JSON = {"message_id": message_id or self.state.next_message_id(chat_id), "from": sender,
                      "chat": chat, "date": int(time.time())}
        if thread_id is not None:
            body["message_thread_id"] = thread_id
            body["is_topic_message"] = True
        if text is not None:
            body["text"] = text
            if text.startswith("/"):
                body["entities"] = [{"type": "bot_command", "offset": 0, "length": len(text.split()[0])}]
        if document is not None:
            name, content = document
            stored = self.state.add_file(content, "documents", name)
            body["document"] = {"file_id": stored.file_id, "file_unique_id": stored.unique_id,
                                "file_name": name, "file_size": len(content)}
        if photo is not None:
            stored = self.state.add_file(photo, "photos", "photo.jpg")
            body["photo"] = [
                {"file_id": stored.file_id + "s", "file_unique_id": stored.unique_id + "s", "width": 90, "height": 90, "file_size": 10},
                {"file_id": stored.file_id, "file_unique_id": stored.unique_id, "width": 800, "height": 600, "file_size": len(photo)},
            ]
            self.state.files[stored.file_id + "s"] = self.state.files[stored.file_id]
        if caption is not None:
            body["caption"] = caption
        return self.state.add_update({"message": body})

    def press(self, chat_id: int, user_id: int, message_id: int, data: str) -> JSON:
        """``user_id`` presses the inline button carrying ``data`` under the bot's message."""
        sent = self.state.find_sent(chat_id, message_id)
        if sent is None:
            raise KeyError(f"the bot sent no message {message_id} in chat {chat_id}")
        message: JSON = {"message_id": message_id, "from": self.state.bot, "chat": self.state.chats[chat_id],
                         "date": int(time.time()), "text": sent.text}
        if sent.thread_id is not None:
            message["message_thread_id"] = sent.thread_id
        if sent.reply_markup:
            message["reply_markup"] = sent.reply_markup
        return self.state.add_update({"callback_query": {
            "id": self.state.new_callback_id(), "from": self.user(user_id), "message": message,
            "chat_instance": f"ci{chat_id}", "data": data,
        }})

    # -- faults -----------------------------------------------------------------------------
    def fail(self, times: int, status: int = 502, methods: Iterable[str] | None = None,
             params: dict[str, object] | None = None) -> None:
        """The next ``times`` calls (of ``methods``, or any; with these ``params`` values, or
        any) answer ``status`` (502: an HTML page from the front proxy, as Telegram's; others:
        the API's JSON error)."""
        self._fault(Fault(times, status, None, _methods(methods), _params(params)))

    def rate_limit(self, times: int, retry_after: int = 1, methods: Iterable[str] | None = None) -> None:
        """The next ``times`` calls answer 429 with ``parameters.retry_after``."""
        self._fault(Fault(times, 429, retry_after, _methods(methods)))

    def clear_faults(self) -> None:
        with self.state.lock:
            self.state.faults.clear()

    def _fault(self, fault: Fault) -> None:
        with self.state.lock:
            self.state.faults.append(fault)

    def faults_left(self) -> int:
        with self.state.lock:
            return sum(f.times for f in self.state.faults)

    # -- what the bot did -------------------------------------------------------------------
    def sent(self, chat_id: int | None = None, thread_id: int | None | str = "any") -> list[SentMessage]:
        """The bot's messages (current text; ``edits`` holds the earlier ones), oldest first."""
        with self.state.lock:
            return [m for m in self.state.sent
                    if (chat_id is None or m.chat_id == chat_id) and (thread_id == "any" or m.thread_id == thread_id)]

    def texts(self, chat_id: int | None = None, thread_id: int | None | str = "any") -> list[str]:
        return [m.text for m in self.sent(chat_id, thread_id) if m.kind == "text"]

    def actions(self, chat_id: int | None = None) -> list[tuple[int, int | None, str]]:
        with self.state.lock:
            return [a for a in self.state.actions if chat_id is None or a[0] == chat_id]

    def callback_answers(self) -> list[JSON]:
        with self.state.lock:
            return list(self.state.callback_answers)

    def commands(self) -> list[JSON]:
        with self.state.lock:
            return list(self.state.commands)

    def calls(self, method: str | None = None) -> list[Call]:
        with self.state.lock:
            return [c for c in self.state.calls if method is None or c.method.lower() == method.lower()]

    def polling(self) -> list[str]:
        """The client connections holding a long poll now."""
        with self.state.lock:
            return sorted(self.state.polls)

    @property
    def max_polls(self) -> int:
        """The most long polls held at one moment since the start: more than 1 means two
        clients polled the bot at once."""
        with self.state.lock:
            return self.state.max_polls

    def delivered(self, update_id: int) -> int:
        """How many times the update was handed to the bot."""
        with self.state.lock:
            return self.state.delivered.get(update_id, 0)

    def pending(self) -> int:
        """Updates not yet confirmed by the bot."""
        with self.state.lock:
            return len(self.state.updates)

    def webhook(self) -> JSON | None:
        with self.state.lock:
            return dict(self.state.webhook) if self.state.webhook else None

    # -- webhook delivery -------------------------------------------------------------------
    async def _deliver_webhooks(self, server: uvicorn.Server) -> None:
        async with httpx.AsyncClient(timeout=30, trust_env=False) as client:
            while not server.should_exit:
                with self.state.lock:
                    hook = dict(self.state.webhook) if self.state.webhook else None
                    update = self.state.updates[0] if self.state.updates and hook else None
                if hook is None or update is None:
                    await asyncio.sleep(0.01)
                    continue
                headers = {"X-Telegram-Bot-Api-Secret-Token": hook["secret_token"]} if hook.get("secret_token") else {}
                self.state.hand_out([update])
                try:
                    response = await client.post(hook["url"], json=update, headers=headers)
                    ok = 200 <= response.status_code < 300
                except httpx.HTTPError:
                    ok = False
                if ok:
                    self.state.confirm(update["update_id"])
                else:
                    await asyncio.sleep(WEBHOOK_RETRY)


def _params(params: dict[str, object] | None) -> dict[str, str] | None:
    return None if params is None else {k: str(v) for k, v in params.items()}


def _methods(methods: Iterable[str] | None) -> frozenset[str] | None:
    return None if methods is None else frozenset(m.lower() for m in methods)


__all__ = ["DEFAULT_TOKEN", "FakeTelegramServer", "SentMessage"]
