"""Renaming, archiving and deleting conversations, and the messages waiting behind a running
answer (listed, withdrawn one by one), through the web chat's API, against one real gateway for
the module (``vigil gateway run``) and the fake model; the routes' input fuzzed through real
HTTP: a refusal is a clear 4xx in JSON and writes nothing."""

from __future__ import annotations

import json
from urllib.parse import quote
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.gateway.process import history, new_conversation, send, wait_for
from tests.gateway.adapters.web.conftest import EventReader, WebGateway, answers, module_gateway, post_message
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def shared(fake_model_session: FakeModelServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebGateway]:
    """One gateway for the module: these tests only add conversations of their own."""
    with module_gateway(fake_model_session, tmp_path_factory, "manage") as running:
        yield running


@pytest.fixture
def gw(shared: WebGateway, fake_model: FakeModelServer) -> WebGateway:
    return shared


def _store(home: Path) -> Any:
    from vigil.store import open_store

    return open_store(home / "state.db")


def _listed(api: httpx.Client, *, archived: bool = False) -> dict[str, dict[str, Any]]:
    response = api.get("/api/conversations", params={"limit": 500, "archived": int(archived)})
    assert response.status_code == 200, response.text
    return {c["id"]: c for c in response.json()["conversations"]}


def _answered(api: httpx.Client, text: str = "hello") -> str:
    conversation = new_conversation(api)
    send(api, conversation, text)
    wait_for(lambda: answers(api, conversation), what="an answer")
    return conversation


def test_rename_archive_and_bring_back_are_stored_and_listed(gw: WebGateway, fake_model: FakeModelServer) -> None:
    fake_model.set_default_reply("Hi.")
    api = gw.api()
    conversation = _answered(api)
    renamed = api.patch(f"/api/conversations/{conversation}", json={"title": "  Trip   to\tLisbon "})
    assert renamed.status_code == 200 and renamed.json()["title"] == "Trip to Lisbon"
    assert history(api, conversation)["title"] == "Trip to Lisbon"

    archived = api.patch(f"/api/conversations/{conversation}", json={"archived": True}).json()
    assert archived["archived"] is True
    assert conversation not in _listed(api) and _listed(api, archived=True)[conversation]["title"] == "Trip to Lisbon"
    assert history(api, conversation)["archived"] is True  # still there, still opens
    found = api.get("/api/conversations", params={"q": "Lisbon"}).json()["conversations"]
    assert [(c["id"], c["archived"]) for c in found] == [(conversation, True)]  # a search finds it
    store = _store(gw.home)
    try:
        from vigil.store import archive

        assert archive.is_archived(store, conversation)
    finally:
        store.close()

    back = api.patch(f"/api/conversations/{conversation}", json={"archived": False}).json()
    assert back["archived"] is False and conversation in _listed(api)
    assert conversation not in _listed(api, archived=True)


def test_delete_removes_every_message_and_the_heartbeat_for_good(gw: WebGateway, fake_model: FakeModelServer) -> None:
    fake_model.set_default_reply("Noted.")
    api = gw.api()
    conversation = _answered(api, "remember the milk")
    send(api, conversation, "/heartbeat every 1h say tick")
    wait_for(lambda: history(api, conversation)["heartbeat"], what="the heartbeat")
    gone = api.delete(f"/api/conversations/{conversation}")
    assert gone.status_code == 200, gone.text
    assert gone.json()["id"] == conversation and gone.json()["sessions"] == 1 and gone.json()["messages"] >= 2
    assert api.get(f"/api/conversations/{conversation}").status_code == 404
    assert conversation not in _listed(api)
    assert api.get("/api/search", params={"q": "milk"}).json() == {"results": []}
    # A message to it is refused, not the start of a new conversation.
    late = post_message(api, conversation, "are you there?", "late-1")
    assert late.status_code == 404 and "error" in late.json()
    store = _store(gw.home)
    try:
        from vigil.schedule.heartbeat.repo import HeartbeatRepo

        assert all(s.id != conversation for s in store.list_sessions())
        assert all(h.session_id != conversation for h in HeartbeatRepo(store).list())
        # its words left the gateway's inbox and outbox too
        inbox = [e for e in store.gateway.inbox_list(limit=1000) if e.session_id == conversation]
        outbox = [e for e in store.gateway.outbox_list(limit=1000) if e.session_id == conversation]
        assert inbox and outbox and all(e.text == "" for e in inbox + outbox)
        assert all("milk" not in e.text for e in store.gateway.inbox_list(limit=1000))
    finally:
        store.close()
    again = api.delete(f"/api/conversations/{conversation}")
    assert again.status_code == 404 and "error" in again.json()


def test_delete_stops_a_running_answer_first(gw: WebGateway, fake_model: FakeModelServer) -> None:
    fake_model.rule(contains="count slowly", reply=Reply.text(["one "] * 400, chunk_delay=0.05))
    api = gw.api()
    conversation = new_conversation(api)
    send(api, conversation, "count slowly")
    wait_for(lambda: history(api, conversation)["busy"], what="the answer running")
    gone = api.delete(f"/api/conversations/{conversation}")
    assert gone.status_code == 200, gone.text
    assert api.get(f"/api/conversations/{conversation}").status_code == 404


def test_messages_waiting_behind_an_answer_are_listed_live_and_withdrawn_as_queue_drop_does(
    gw: WebGateway, fake_model: FakeModelServer,
) -> None:
    fake_model.rule(contains="build slowly", reply=Reply.text(["brick "] * 400, chunk_delay=0.05))
    fake_model.rule(contains="run the tests", reply="All green.")
    api = gw.api()
    conversation = new_conversation(api)
    page = EventReader(gw, conversation)
    first = send(api, conversation, "build slowly")["inbox_id"]
    wait_for(lambda: history(api, conversation)["busy"], what="the answer running")
    ids = {text: send(api, conversation, text)["inbox_id"] for text in ("run the tests", "deploy", "tidy up")}
    listed = [{"position": n, "text": text, "inbox_id": ids[text]} for n, text in enumerate(ids, 1)]
    page.wait_for("queue", lambda e: len(e["waiting"]) == 3)
    assert api.get(f"/api/conversations/{conversation}/queue").json() == {"waiting": listed}
    assert history(api, conversation)["waiting"] == listed

    # Remove (the page's button): like /queue drop 2, and every page hears of it.
    gone = api.delete(f"/api/conversations/{conversation}/queue/{ids['deploy']}")
    assert gone.status_code == 200, gone.text
    assert gone.json() == {"position": 2, "text": "deploy", "inbox_id": ids["deploy"],
                           "reply": "Withdrew 1 waiting message: “deploy”"}
    assert page.wait_for("withdrawn")["inbox_id"] == ids["deploy"]
    renumbered = page.wait_for("queue", lambda e: [w["text"] for w in e["waiting"]] == ["run the tests", "tidy up"])
    assert [w["position"] for w in renumbered["waiting"]] == [1, 2]
    again = api.delete(f"/api/conversations/{conversation}/queue/{ids['deploy']}")
    assert again.status_code == 404 and "does not wait" in again.json()["error"]
    assert api.delete(f"/api/conversations/{conversation}/queue/deploy").status_code == 400
    assert api.delete(f"/api/conversations/no-such-conversation/queue/{ids['tidy up']}").status_code == 404
    assert gw.http().delete(f"/api/conversations/{conversation}/queue/{ids['tidy up']}").status_code == 401
    other_site = gw.http(cookies={"vigil_session": gw.login_cookie()}, headers={"Origin": "https://evil.example"})
    assert other_site.delete(f"/api/conversations/{conversation}/queue/{ids['tidy up']}").status_code == 403

    # The typed command is heard the same way; what is left is answered, in order.
    send(api, conversation, "/queue drop 2")
    page.wait_for("withdrawn", lambda e: e["inbox_id"] == ids["tidy up"])
    assert api.post(f"/api/conversations/{conversation}/stop").json() == {"stopped": True}
    wait_for(lambda: answers(api, conversation)[-1:] == ["All green."], what="the message left answered")
    page.wait_for("queue", lambda e: e["waiting"] == [])
    assert api.get(f"/api/conversations/{conversation}/queue").json() == {"waiting": []}
    users = [m["content"] for m in history(api, conversation)["messages"] if m["role"] == "user"]
    assert users == ["build slowly", "run the tests"]
    # a message handed to an idle conversation starts at once: it is never listed as waiting
    assert not any(w["inbox_id"] == first for e in page.events if e["type"] == "queue" for w in e["waiting"])
    page.close()
    store = _store(gw.home)
    try:
        for text in ("deploy", "tidy up"):
            entry = store.gateway.inbox_get(ids[text])
            assert entry is not None and entry.error == "withdrawn with /queue before it was handled", text
    finally:
        store.close()


def test_the_routes_need_a_login_and_the_pages_own_origin(gw: WebGateway) -> None:
    api = gw.api()
    conversation = new_conversation(api)
    anonymous = gw.http()
    assert anonymous.patch(f"/api/conversations/{conversation}", json={"title": "x"}).status_code == 401
    assert anonymous.delete(f"/api/conversations/{conversation}").status_code == 401
    cookie = gw.login_cookie()
    other_site = gw.http(cookies={"vigil_session": cookie}, headers={"Origin": "https://evil.example"})
    refused = other_site.delete(f"/api/conversations/{conversation}")
    assert refused.status_code == 403 and "error" in refused.json()
    assert other_site.patch(f"/api/conversations/{conversation}", json={"archived": True}).status_code == 403
    assert history(api, conversation)["archived"] is False


# -- fuzzing -----------------------------------------------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
_titles = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]) | st.sampled_from(["\n", "\t", "\u202e", "\x00", " "]),
    max_size=260,
)
_bodies = st.one_of(
    st.fixed_dictionaries({"title": _titles}),
    st.fixed_dictionaries({"archived": _json}),
    st.fixed_dictionaries({"title": _json}),
    st.dictionaries(st.sampled_from(["title", "archived", "Title", "deleted", ""]), _json, max_size=3),
    _json,
)


def _state(api: httpx.Client, conversation: str) -> tuple[Any, Any, int]:
    shown = history(api, conversation)
    return shown["title"], shown["archived"], len(shown["messages"])


@pytest.fixture
def target(gw: WebGateway) -> str:
    return new_conversation(gw.api())


@FUZZ
@given(body=_bodies)
def test_fuzzed_changes_are_applied_whole_or_refused_with_nothing_written(gw: WebGateway, target: str, body: Any) -> None:
    api = gw.api()
    before = _state(api, target)
    response = api.patch(f"/api/conversations/{target}", content=json.dumps(body),
                         headers={"Content-Type": "application/json"})
    assert response.status_code in (200, 400), response.text
    assert isinstance(response.json(), dict)
    after = _state(api, target)
    if response.status_code == 400:
        assert after == before and response.json()["error"]
        return
    assert isinstance(body, dict) and body and set(body) <= {"title", "archived"}
    if "title" in body:
        assert after[0] == " ".join(body["title"].split())
    if "archived" in body:
        assert after[1] is body["archived"]
        api.patch(f"/api/conversations/{target}", json={"archived": False})


@FUZZ
@given(raw=st.binary(max_size=200))
def test_a_body_that_is_not_json_is_refused(gw: WebGateway, target: str, raw: bytes) -> None:
    api = gw.api()
    before = _state(api, target)
    response = api.patch(f"/api/conversations/{target}", content=raw, headers={"Content-Type": "application/json"})
    if response.status_code == 200:
        assert isinstance(json.loads(raw), dict)
        api.patch(f"/api/conversations/{target}", json={"archived": False})
        return
    assert response.status_code == 400 and response.json()["error"]
    assert _state(api, target) == before


@FUZZ
@given(ref=st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=40))
def test_fuzzed_ids_delete_nothing(gw: WebGateway, target: str, ref: str) -> None:
    api = gw.api()
    if ref == target:
        return
    listed = len(_listed(api))
    response = api.delete(f"/api/conversations/{quote(ref, safe='')}")
    assert response.status_code in (307, 400, 404, 405), response.text  # 307: "//" is redirected, never routed
    if response.headers.get("content-type", "").startswith("application/json"):
        assert response.json().get("error")
    assert len(_listed(api)) == listed and history(api, target)["id"] == target
