"""Event contents the adapter sends: text as Markdown in ``body`` with its HTML rendering in
``formatted_body`` (markdown-it-py, which vigil has through rich; raw HTML in an answer stays
text), the thread relation of a route, and edits (``m.replace``).
"""

from __future__ import annotations

from typing import Any


def render(text: str) -> str:
    """Markdown as the HTML subset Matrix clients show."""
    from markdown_it import MarkdownIt

    renderer = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(["table", "strikethrough"])
    return renderer.render(text).strip()


def message(text: str, *, msgtype: str = "m.text", formatted: bool = True) -> dict[str, Any]:
    """A message's content (no relation)."""
    content: dict[str, Any] = {"msgtype": msgtype, "body": text}
    if formatted:
        html = render(text)
        if html != f"<p>{_escape(text)}</p>":  # plain text needs no HTML twin
            content.update(format="org.matrix.custom.html", formatted_body=html)
    return content


def in_thread(content: dict[str, Any], thread: str) -> dict[str, Any]:
    """``content`` placed in the thread rooted at ``thread`` (nothing for ``""``), with the
    reply fallback clients without threads show."""
    if thread:
        content["m.relates_to"] = {"rel_type": "m.thread", "event_id": thread, "is_falling_back": True,
                                   "m.in_reply_to": {"event_id": thread}}
    return content


def edit(event_id: str, new: dict[str, Any]) -> dict[str, Any]:
    """An edit making ``event_id`` show ``new`` (the ``*``-prefixed body is what clients
    without edits show)."""
    return {"msgtype": new.get("msgtype", "m.text"), "body": "* " + str(new.get("body", "")),
            "m.new_content": new, "m.relates_to": {"rel_type": "m.replace", "event_id": event_id}}


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
