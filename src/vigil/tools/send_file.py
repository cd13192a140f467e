"""``send_file``: send a file to the person at the other end of a gateway conversation.

The file goes out through the gateway's durable outbox as an entry of kind ``file`` (``meta``:
``path``, ``name``; ``text``: the caption) to the conversation's current route: the platform
message being answered, else the route that leads to the conversation (a heartbeat turn). The
adapter uploads it (the web chat shows a download link). A session with no route — a terminal
chat, a cron run — is told the tool needs a conversation on a platform, and nothing is queued:
the tool is offered everywhere all the same, so the pinned tool list (part of the cached
prompt) does not change when a terminal conversation is handed to the gateway.

Safety: a file inside the conversation's working directory is sent as is. Any other file the
agent can read (the file tools' rule: the user's rights) needs the user's approval first,
because it leaves the machine; once approved it is copied into ``<workdir>/.sent/`` so the
outbox sends what was approved. Files bigger than ``gateway.upload_max_bytes`` are refused.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from vigil import platforms as registry
from vigil.tools.base import Tool, ToolContext, ToolFailure, ToolResult, request_approval

if TYPE_CHECKING:
    from vigil.store.gateway.gateway_tables import RouteKey

SENT_DIR = ".sent"
CAPTION_CAP = 1000
NO_ROUTE = (
    "send_file needs a conversation on a messaging platform or the web chat (served by `vigil "
    "gateway run`); this session has none (a terminal chat or a cron run), so nothing was sent"
)


def current_route(store: Any, session_id: str) -> RouteKey | None:
    """Where a file sent now from ``session_id`` goes (see the module docstring)."""
    from vigil.store.gateway.gateway_tables import RUNNING  # the gateway's tables load when the tool runs

    tables = store.gateway
    answering = [e for e in tables.inbox_unfinished() if e.status == RUNNING and e.session_id == session_id]
    if answering:
        return max(answering, key=lambda entry: entry.id).route
    routes = tables.routes_of(session_id)
    return routes[-1] if routes else None


def describe(route: RouteKey) -> str:
    if route.adapter == "web":
        return "the web chat"
    return f"{route.adapter} chat {route.chat}" + (f" (thread {route.thread})" if route.thread else "")


class SendFileTool(Tool):
    name = "send_file"
    description = (
        "Send a file to the person you are talking with, in this conversation's chat ("
        + registry.titles(where=lambda platform: platform.capabilities.files).replace("the web chat", "web chat")
        + "), with an optional caption. Only in a conversation served by the "
        "gateway. Files outside the working directory need the user's approval."
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "The file (relative to the working directory)."},
            "caption": {"type": "string", "description": "A short text sent with the file."},
            "name": {"type": "string", "description": "The file name the recipient sees (default: the file's own)."},
        },
        "required": ["path"],
        "additionalProperties": False,
    }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        if ctx.store is None or ctx.session_id is None:
            raise ToolFailure(NO_ROUTE)
        route = await asyncio.to_thread(current_route, ctx.store, ctx.session_id)
        if route is None:
            raise ToolFailure(NO_ROUTE)
        path, size = await asyncio.to_thread(self._check, ctx, args["path"])
        name = self._name(args.get("name"), path)
        caption = (args.get("caption") or "").strip()[:CAPTION_CAP]
        workdir = ctx.cwd.resolve()
        if not path.is_relative_to(workdir):
            refusal = await request_approval(
                ctx, self.name, f"send {path} ({size} bytes), which is outside the working directory, to {describe(route)}"
            )
            if refusal is not None:
                return refusal
            path = await asyncio.to_thread(self._copy_in, path, workdir, name)
        from vigil.store.gateway.gateway_tables import NewOutbound

        entry = await asyncio.to_thread(
            ctx.store.gateway.outbox_add,
            NewOutbound(route, caption, kind="file", session_id=ctx.session_id,
                        meta={"path": str(path), "name": name, "size": size}),
            now=time.time(),
        )
        return ToolResult(f"queued {name} ({size} bytes) for {describe(route)} (outbox entry {entry.id}); "
                          "it is sent when this turn ends, retried if the platform is down")

    def _check(self, ctx: ToolContext, raw: str) -> tuple[Path, int]:
        given = ctx.resolve(raw)
        try:
            path = given.resolve(strict=True)
        except (FileNotFoundError, RuntimeError):
            raise ToolFailure(f"{given} does not exist") from None
        if not path.is_file():
            raise ToolFailure(f"{given} is not a regular file")
        if not os.access(path, os.R_OK):
            raise ToolFailure(f"{given} cannot be read")
        size = path.stat().st_size
        cap = ctx.settings.gateway.upload_max_bytes
        if size == 0:
            raise ToolFailure(f"{given} is empty; nothing was sent")
        if size > cap:
            raise ToolFailure(
                f"{given} is {size} bytes; files up to {cap} bytes can be sent (gateway.upload_max_bytes); nothing was sent"
            )
        return path, size

    @staticmethod
    def _name(raw: Any, path: Path) -> str:
        name = Path(str(raw)).name if raw else path.name
        name = "".join(ch for ch in name if ch.isprintable() and ch not in "/\\").strip()
        return name[:200] or path.name

    @staticmethod
    def _copy_in(path: Path, workdir: Path, name: str) -> Path:
        folder = workdir / SENT_DIR
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        target = folder / f"{secrets.token_hex(4)}-{name}"
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out, path.open("rb") as source:
            shutil.copyfileobj(source, out)
        return target
