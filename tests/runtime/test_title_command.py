"""``/title`` follows the same rule as the web chat's Rename and ``vigil sessions rename``."""

from __future__ import annotations

from tests.runtime.conftest import Runtime


async def test_title_follows_the_same_rule_as_the_web_chats_rename(rt: Runtime) -> None:
    await rt.send("hello")
    before = rt.store.get_session(rt.session_id).title
    reply = await rt.conversation.send("/title evil\u202etxt")
    assert reply.reply.is_error and "U+202E" in reply.reply.text and "stays as it was" in reply.reply.text
    assert rt.store.get_session(rt.session_id).title == before
    assert (await rt.command("/title  Trip   to Lisbon ")) == "Title set: Trip to Lisbon"
