"""The web chat's stop and search routes (``conversation_api``) against the real gateway."""

from __future__ import annotations

from tests.gateway.process import new_conversation, send, wait_for
from tests.gateway.adapters.web.conftest import WebGateway, answers
from vigil.testing.fake_model import FakeModelServer


def test_search_finds_message_text_with_the_matches_marked_once_per_conversation(
    gateway: WebGateway, fake_model_env: FakeModelServer,
) -> None:
    fake_model_env.set_default_reply("Walruses live in the Arctic; walruses are large.")
    api = gateway.api()
    first, second = new_conversation(api), new_conversation(api)
    send(api, first, "tell me about walruses")
    send(api, second, "something else entirely")
    wait_for(lambda: answers(api, first) and answers(api, second), what="both answers")
    results = api.get("/api/search", params={"q": "walruses"}).json()["results"]
    assert [r["id"] for r in results].count(first) == 1
    hit = next(r for r in results if r["id"] == first)
    assert "«walruses»" in hit["snippet"].lower() or "«walrus" in hit["snippet"].lower()
    assert api.get("/api/search", params={"q": "   "}).json() == {"results": []}
    assert api.get("/api/search", params={"q": "zebras"}).json() == {"results": []}


def test_stop_with_no_turn_running_stops_nothing_and_an_unknown_conversation_is_404(gateway: WebGateway) -> None:
    api = gateway.api()
    conversation = new_conversation(api)
    assert api.post(f"/api/conversations/{conversation}/stop").json() == {"stopped": False}
    missing = api.post("/api/conversations/no-such-conversation/stop")
    assert missing.status_code == 404 and "error" in missing.json()
    anonymous = gateway.http()
    assert anonymous.post(f"/api/conversations/{conversation}/stop").status_code == 401
    assert anonymous.get("/api/search", params={"q": "x"}).status_code == 401
