"""An encrypted direct room end to end: Alice is a real matrix-nio client with its encryption
(her own device keys, one-time keys and Megolm session), the homeserver only relays what it
cannot read, and the agent reads her message and answers encrypted."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gateway.adapters.matrix.conftest import ALICE, Factory
from vigil.platforms.matrix import encryption_available
from vigil.testing.waiting import eventually

pytestmark = pytest.mark.skipif(not encryption_available(), reason="matrix-nio[e2e] is not installed")


async def test_an_encrypted_direct_room_is_read_and_answered_encrypted(make_matrix: Factory, tmp_path: Path) -> None:
    from nio import AsyncClient, AsyncClientConfig, MegolmEvent, RoomMessageText

    h = await make_matrix()
    h.model.rule(contains="the secret question", reply="the secret answer")
    assert h.adapter.client.encrypts
    token = h.fake.state.register(ALICE, device_id="ALICEPHONE")
    (tmp_path / "alice").mkdir()
    alice = AsyncClient(h.fake.url, ALICE, store_path=str(tmp_path / "alice"),
                        config=AsyncClientConfig(encryption_enabled=True, store_sync_tokens=False))
    alice.restore_login(ALICE, "ALICEPHONE", token)
    try:
        await alice.keys_upload()
        room = await h.dm(encrypted=True)
        await alice.sync(timeout=0, full_state=True)
        sent = await alice.room_send(room, "m.room.message", {"msgtype": "m.text", "body": "the secret question"},
                                     ignore_unverified_devices=True)
        stored = h.fake.state.events(room, sender=ALICE)[-1]
        assert stored["event_id"] == sent.event_id and stored["type"] == "m.room.encrypted"
        assert "secret" not in str(stored["content"])  # the homeserver never sees the text

        async def answer() -> str | None:
            response = await alice.sync(timeout=0)
            for event in response.rooms.join.get(room, None).timeline.events if room in response.rooms.join else []:
                assert not isinstance(event, MegolmEvent), "Alice cannot decrypt the agent's answer"
                if isinstance(event, RoomMessageText) and event.sender == h.bot and not event.body.endswith(" …"):
                    return event.body
            return None

        assert await eventually(answer, what="the decrypted answer") == "the secret answer"
        assert all(e["type"] == "m.room.encrypted" for e in h.fake.state.events(room, sender=h.bot)
                   if e["type"] != "m.room.member")
        assert (h.profile.home / "matrix").stat().st_mode & 0o077 == 0  # the agent's keys are private
    finally:
        await alice.close()
