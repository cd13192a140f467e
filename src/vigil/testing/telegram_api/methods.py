"""The Bot API methods the fake serves, one function each (parameters and results as in
https://core.telegram.org/bots/api#available-methods)."""

from __future__ import annotations

import re
from typing import Callable

from starlette.datastructures import UploadFile

from vigil.testing.telegram_api.app import ApiError, Handler, Params, bot_message, checked, wait_for_updates
from vigil.testing.telegram_api.state import JSON, FakeBotState, SentMessage

_COMMAND = re.compile(r"^[a-z0-9_]{1,32}$")
_ACTIONS = {"typing", "upload_photo", "record_video", "upload_video", "record_voice", "upload_voice",
            "upload_document", "choose_sticker", "find_location", "record_video_note", "upload_video_note"}
MAX_DOWNLOAD = 20 * 1024 * 1024


async def get_updates(state: FakeBotState, params: Params, stopping: Callable[[], bool],
                      gone: Callable[[], bool] = lambda: False) -> list[JSON]:
    return await wait_for_updates(state, params, stopping, gone)


async def get_me(state: FakeBotState, params: Params) -> JSON:
    return state.bot


def _markup(params: Params) -> JSON | None:
    markup = params.json("reply_markup")
    if markup is None:
        return None
    if not isinstance(markup, dict):
        raise ApiError(400, "Bad Request: can't parse reply keyboard markup JSON object")
    for row in markup.get("inline_keyboard", []):
        for button in row:
            data = button.get("callback_data")
            if data is not None and not 1 <= len(str(data).encode()) <= 64:
                raise ApiError(400, "Bad Request: BUTTON_DATA_INVALID")
    return markup


async def send_message(state: FakeBotState, params: Params) -> JSON:
    chat_id, thread_id = params.int("chat_id", True), params.int("message_thread_id")
    text, mode = params.str("text"), params.str("parse_mode")
    visible = checked(text, mode)
    markup = _markup(params)
    assert chat_id is not None
    body, message_id = bot_message(state, chat_id, thread_id, text=visible, **({"reply_markup": markup} if markup else {}))
    state.add_sent(SentMessage(chat_id, message_id, visible, thread_id, mode, markup))
    return body


async def edit_message_text(state: FakeBotState, params: Params) -> JSON:
    chat_id, message_id = params.int("chat_id", True), params.int("message_id", True)
    assert chat_id is not None and message_id is not None
    mode = params.str("parse_mode")
    visible = checked(params.str("text"), mode)
    markup = _markup(params)
    with state.lock:
        message = state.find_sent(chat_id, message_id)
        if message is None or message.kind != "text":
            raise ApiError(400, "Bad Request: message to edit not found")
        if message.text == visible and message.reply_markup == markup:
            raise ApiError(400, "Bad Request: message is not modified: specified new message content and reply "
                                "markup are exactly the same as a current content and reply markup of the message")
        message.edits.append(message.text)
        message.text, message.parse_mode, message.reply_markup = visible, mode, markup
        chat = state.chats[chat_id]
    body: JSON = {"message_id": message_id, "from": state.bot, "chat": chat, "date": 0, "edit_date": 1, "text": visible}
    if message.thread_id is not None:
        body["message_thread_id"] = message.thread_id
    if markup:
        body["reply_markup"] = markup
    return body


async def delete_message(state: FakeBotState, params: Params) -> bool:
    chat_id, message_id = params.int("chat_id", True), params.int("message_id", True)
    with state.lock:
        message = state.find_sent(chat_id or 0, message_id or 0)
        if message is None:
            raise ApiError(400, "Bad Request: message to delete not found")
        state.sent.remove(message)
    return True


async def send_chat_action(state: FakeBotState, params: Params) -> bool:
    chat_id, action = params.int("chat_id", True), params.str("action", True)
    if action not in _ACTIONS:
        raise ApiError(400, "Bad Request: wrong parameter action in request")
    with state.lock:
        if chat_id not in state.chats:
            raise ApiError(400, "Bad Request: chat not found")
        state.actions.append((chat_id or 0, params.int("message_thread_id"), action or ""))
    return True


async def _send_file(state: FakeBotState, params: Params, field: str) -> JSON:
    chat_id, thread_id = params.int("chat_id", True), params.int("message_thread_id")
    mode = params.str("parse_mode")
    caption = checked(params.str("caption"), mode, caption=True)
    upload = params.file(field)
    if isinstance(upload, UploadFile):
        content, name = await upload.read(), upload.filename or field
    elif isinstance(upload, str) and upload in state.files:
        stored = state.files[upload]
        content, name = stored.content, stored.path.rsplit("/", 1)[-1]
    else:
        raise ApiError(400, f"Bad Request: there is no {field} in the request")
    assert chat_id is not None
    stored = state.add_file(content, field + "s", name)
    if field == "photo":
        media: JSON = {"photo": [{"file_id": stored.file_id, "file_unique_id": stored.unique_id,
                                  "width": 1, "height": 1, "file_size": len(content)}]}
    else:
        media = {"document": {"file_id": stored.file_id, "file_unique_id": stored.unique_id,
                              "file_name": name, "file_size": len(content)}}
    body, message_id = bot_message(state, chat_id, thread_id, **media, **({"caption": caption} if caption else {}))
    state.add_sent(SentMessage(chat_id, message_id, caption, thread_id, mode, None, kind=field,
                               file_name=name, content=content))
    return body


async def send_document(state: FakeBotState, params: Params) -> JSON:
    return await _send_file(state, params, "document")


async def send_photo(state: FakeBotState, params: Params) -> JSON:
    return await _send_file(state, params, "photo")


async def get_file(state: FakeBotState, params: Params) -> JSON:
    file_id = params.str("file_id", True)
    with state.lock:
        stored = state.files.get(file_id or "")
    if stored is None:
        raise ApiError(400, "Bad Request: invalid file_id")
    if len(stored.content) > MAX_DOWNLOAD:
        raise ApiError(400, "Bad Request: file is too big")
    return {"file_id": stored.file_id, "file_unique_id": stored.unique_id, "file_size": len(stored.content),
            "file_path": stored.path}


async def set_my_commands(state: FakeBotState, params: Params) -> bool:
    commands = params.json("commands")
    if not isinstance(commands, list) or len(commands) > 100:
        raise ApiError(400, "Bad Request: commands must be a list of at most 100 BotCommand")
    for command in commands:
        name, description = str(command.get("command", "")), str(command.get("description", ""))
        if not _COMMAND.match(name):
            raise ApiError(400, "Bad Request: BOT_COMMAND_INVALID")
        if not 1 <= len(description) <= 256:
            raise ApiError(400, "Bad Request: BOT_COMMAND_DESCRIPTION_INVALID")
    with state.lock:
        state.commands = [dict(c) for c in commands]
        state.command_calls += 1
    return True


async def answer_callback_query(state: FakeBotState, params: Params) -> bool:
    answer = {"callback_query_id": params.str("callback_query_id", True), "text": params.str("text"),
              "show_alert": params.str("show_alert") in ("true", "True", "1")}
    with state.lock:
        state.callback_answers.append(answer)
    return True


async def set_webhook(state: FakeBotState, params: Params) -> bool:
    url = params.str("url", True) or ""
    secret = params.str("secret_token")
    if secret is not None and not re.match(r"^[A-Za-z0-9_-]{1,256}$", secret):
        raise ApiError(400, "Bad Request: secret token contains unallowed characters")
    with state.lock:
        state.webhook = {"url": url, "secret_token": secret} if url else None
    return True


async def delete_webhook(state: FakeBotState, params: Params) -> bool:
    with state.lock:
        state.webhook = None
        if params.str("drop_pending_updates") in ("true", "True", "1"):
            state.updates.clear()
    return True


async def get_webhook_info(state: FakeBotState, params: Params) -> JSON:
    with state.lock:
        hook = state.webhook or {"url": ""}
        return {"url": hook["url"], "has_custom_certificate": False, "pending_update_count": len(state.updates)}


HANDLERS: dict[str, Handler] = {
    "getme": get_me, "getupdates": get_me, "sendmessage": send_message, "editmessagetext": edit_message_text,
    "deletemessage": delete_message, "sendchataction": send_chat_action, "senddocument": send_document,
    "sendphoto": send_photo, "getfile": get_file, "setmycommands": set_my_commands,
    "answercallbackquery": answer_callback_query, "setwebhook": set_webhook, "deletewebhook": delete_webhook,
    "getwebhookinfo": get_webhook_info,
}
"""By lower-case method name (the API's method names are case-insensitive); ``getupdates`` is
served by :func:`get_updates`, which also needs to know when the server stops."""
