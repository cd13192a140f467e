"""The ``SessionStore`` contract: every backend must pass these, through the protocol only."""

from __future__ import annotations

import hashlib
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vigil.clock import FakeClock
from vigil.store import (
    UNSET,
    AmbiguousSession,
    MetaEntry,
    NewMessage,
    SessionNotFound,
    SessionStore,
    StoreError,
    ToolCall,
)
from vigil.store.deletions import DELETED_KEY, Deleted
from vigil.store.records import MetaSwap
from vigil.usage import Usage

from .conftest import StoreFactory


def tick(clock: FakeClock, seconds: float = 1.0) -> float:
    clock.set_sync(clock.now() + seconds)
    return clock.now()


def say(store: SessionStore, session_id: str, text: str, role: str = "user") -> int:
    return store.append_message(session_id, NewMessage(role=role, content=text)).seq


# -- sessions -----------------------------------------------------------------------------
def test_store_satisfies_the_protocol(store: SessionStore) -> None:
    assert isinstance(store, SessionStore)
    assert store.schema_version() >= 1


def test_create_and_get_session(store: SessionStore, clock: FakeClock) -> None:
    created = store.create_session(
        source="cli",
        model="gpt-x",
        model_config={"temperature": 0.2, "epoch": 3},
        title="Planning",
        tool_names=["terminal", "files"],
    )
    assert len(created.id) == 12 and all(c in "0123456789abcdef" for c in created.id)
    assert created.source == "cli" and created.title == "Planning" and created.model == "gpt-x"
    assert created.model_config == {"temperature": 0.2, "epoch": 3}
    assert created.tool_names == ("terminal", "files")
    assert created.started_at == created.updated_at == clock.now()
    assert created.parent_id is None and created.ended_at is None and not created.is_ended
    assert created.message_count == 0 and created.usage == Usage()
    assert created.system_prompt_hash is None
    assert store.get_session(created.id) == created


def test_session_ids_are_unique(store: SessionStore) -> None:
    ids = {store.create_session(source="cli").id for _ in range(200)}
    assert len(ids) == 200


def test_create_with_explicit_id_and_start(store: SessionStore) -> None:
    session = store.create_session(source="import", session_id="00ff00ff00ff", started_at=1_700_000_000.0)
    assert session.id == "00ff00ff00ff" and session.started_at == 1_700_000_000.0
    with pytest.raises(StoreError):
        store.create_session(source="import", session_id="00ff00ff00ff")


@pytest.mark.parametrize("bad_id", ["", "ABCDEF", "not-hex", "a" * 65])
def test_create_refuses_an_unresolvable_id(store: SessionStore, bad_id: str) -> None:
    with pytest.raises(ValueError):
        store.create_session(source="cli", session_id=bad_id)
    assert store.list_sessions() == []


def test_create_refuses_bad_input_without_writing(store: SessionStore) -> None:
    with pytest.raises(SessionNotFound):
        store.create_session(source="cli", parent_id="abcabcabcabc")
    with pytest.raises(TypeError):
        store.create_session(source="cli", tool_names="terminal")
    with pytest.raises(ValueError):
        store.create_session(source="cli", model_config={"x": float("nan")})
    assert store.list_sessions() == []


def test_get_unknown_session(store: SessionStore) -> None:
    with pytest.raises(SessionNotFound):
        store.get_session("abcabcabcabc")


def test_update_session_changes_only_given_fields(store: SessionStore) -> None:
    session = store.create_session(
        source="cli", model="a", title="t", model_config={"k": 1}, tool_names=["x"]
    )
    updated = store.update_session(session.id, title="new title")
    assert updated.title == "new title"
    assert (updated.model, updated.model_config, updated.tool_names) == ("a", {"k": 1}, ("x",))
    updated = store.update_session(session.id, model="b", model_config={"k": 2}, tool_names=["y", "z"])
    assert (updated.title, updated.model, updated.model_config, updated.tool_names) == (
        "new title",
        "b",
        {"k": 2},
        ("y", "z"),
    )
    assert store.update_session(session.id, title=None).title is None
    assert store.update_session(session.id, title=UNSET) == store.get_session(session.id)
    assert store.get_session(session.id).model == "b"
    with pytest.raises(SessionNotFound):
        store.update_session("abcabcabcabc", title="x")


def test_end_and_reopen_session(store: SessionStore, clock: FakeClock) -> None:
    session = store.create_session(source="cli")
    ended_at = tick(clock)
    store.end_session(session.id, "compression")
    ended = store.get_session(session.id)
    assert ended.is_ended and ended.ended_at == ended_at and ended.end_reason == "compression"
    tick(clock)
    store.end_session(session.id, "user")  # idempotent: the first end stands
    assert store.get_session(session.id).end_reason == "compression"
    assert store.get_session(session.id).ended_at == ended_at
    store.reopen_session(session.id)
    reopened = store.get_session(session.id)
    assert not reopened.is_ended and reopened.end_reason is None
    store.end_session(session.id, "new", ended_at=5.0)
    assert store.get_session(session.id).ended_at == 5.0
    with pytest.raises(SessionNotFound):
        store.end_session("abcabcabcabc", "user")
    with pytest.raises(SessionNotFound):
        store.reopen_session("abcabcabcabc")


def test_delete_session(store: SessionStore) -> None:
    parent = store.create_session(source="cli")
    child = store.create_session(source="cli", parent_id=parent.id)
    other = store.create_session(source="cli")
    say(store, parent.id, "the zeppelin departs at noon")
    say(store, other.id, "a zeppelin of our own")
    store.delete_session(parent.id)
    with pytest.raises(SessionNotFound):
        store.get_session(parent.id)
    with pytest.raises(SessionNotFound):
        store.get_messages(parent.id)
    assert store.get_session(child.id).parent_id is None
    assert [hit.session_id for hit in store.search("zeppelin")] == [other.id]
    assert len(store.get_messages(other.id)) == 1
    with pytest.raises(SessionNotFound):
        store.delete_session(parent.id)


def test_delete_sessions_goes_all_or_nothing_and_keeps_count(store: SessionStore) -> None:
    root = store.create_session(source="cli")
    child = store.create_session(source="cli", parent_id=root.id)
    grandchild = store.create_session(source="cli", parent_id=child.id)
    store.append_message(root.id, NewMessage("assistant", "one", usage=Usage(10, 20, 30, 40)))
    say(store, child.id, "two")
    say(store, child.id, "three")
    assert store.get_meta(DELETED_KEY) is None
    with pytest.raises(SessionNotFound):
        store.delete_sessions([root.id, "abcabcabcabc"])
    assert len(store.get_messages(root.id)) == 1 and store.get_meta(DELETED_KEY) is None
    gone = store.delete_sessions([root.id, child.id, root.id])
    assert gone == Deleted(sessions=2, messages=3, usage=Usage(10, 20, 30, 40))
    assert store.get_session(grandchild.id).parent_id is None
    store.delete_session(grandchild.id)
    totals = Deleted.from_json(store.get_meta(DELETED_KEY).value)
    assert totals == Deleted(sessions=3, messages=3, usage=Usage(10, 20, 30, 40))


def test_concurrent_deletions_all_count(store_factory: StoreFactory) -> None:
    first = store_factory()
    ids = [first.create_session(source="cli").id for _ in range(8)]
    stores = [store_factory() for _ in range(4)]
    threads = [
        threading.Thread(target=lambda s=s, mine=ids[i::4]: [s.delete_session(x) for x in mine])
        for i, s in enumerate(stores)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert Deleted.from_json(first.get_meta(DELETED_KEY).value).sessions == 8


def test_conversation_sessions_follow_parent_links_both_ways(store: SessionStore, clock: FakeClock) -> None:
    root = store.create_session(source="cli")
    tick(clock)
    middle = store.create_session(source="cli", parent_id=root.id)
    tick(clock)
    branch = store.create_session(source="cli", parent_id=middle.id)
    tick(clock)
    head = store.create_session(source="cli", parent_id=middle.id)
    alone = store.create_session(source="cli")
    everyone = [root.id, middle.id, branch.id, head.id]
    for member in everyone:
        assert [s.id for s in store.conversation_sessions(member)] == everyone
    assert [s.id for s in store.conversation_sessions(alone.id)] == [alone.id]
    with pytest.raises(SessionNotFound):
        store.conversation_sessions("abcabcabcabc")


def test_list_sessions_most_recently_active_first(store: SessionStore, clock: FakeClock) -> None:
    first = store.create_session(source="cli")
    tick(clock)
    second = store.create_session(source="telegram")
    tick(clock)
    third = store.create_session(source="cli")
    assert [s.id for s in store.list_sessions()] == [third.id, second.id, first.id]
    tick(clock)
    say(store, first.id, "back again")
    assert [s.id for s in store.list_sessions()] == [first.id, third.id, second.id]
    assert [s.id for s in store.list_sessions(limit=2)] == [first.id, third.id]
    assert [s.id for s in store.list_sessions(source="cli")] == [first.id, third.id]
    assert store.latest_session().id == first.id  # type: ignore[union-attr]
    assert store.latest_session(source="telegram").id == second.id  # type: ignore[union-attr]
    assert store.latest_session(source="slack") is None


def test_sessions_created_in_the_same_instant_keep_creation_order(store: SessionStore) -> None:
    ids = [store.create_session(source="cli").id for _ in range(5)]
    assert [s.id for s in store.list_sessions()] == ids[::-1]


# -- messages -----------------------------------------------------------------------------
def test_messages_keep_order_and_number_from_one(store: SessionStore) -> None:
    session = store.create_session(source="cli")
    other = store.create_session(source="cli")
    for i in range(10):
        say(store, session.id, f"message {i}")
        say(store, other.id, f"other {i}")
    messages = store.get_messages(session.id)
    assert [m.seq for m in messages] == list(range(1, 11))
    assert [m.content for m in messages] == [f"message {i}" for i in range(10)]
    assert [m.seq for m in store.get_messages(session.id, after_seq=7)] == [8, 9, 10]
    assert [m.seq for m in store.get_messages(session.id, after_seq=2, limit=3)] == [3, 4, 5]
    assert store.get_messages(store.create_session(source="cli").id) == []


def test_append_updates_counters_and_activity(store: SessionStore, clock: FakeClock) -> None:
    session = store.create_session(source="cli")
    when = tick(clock)
    first = store.append_message(session.id, NewMessage(role="user", content="hi"))
    assert first.created_at == when and first.usage == Usage()
    store.append_message(
        session.id, NewMessage(role="assistant", content="hello", usage=Usage(100, 2000, 30, 40))
    )
    store.append_message(session.id, NewMessage(role="assistant", content="again", usage=Usage(1, 2, 3, 4)))
    stored = store.get_session(session.id)
    assert stored.message_count == 3
    assert stored.usage == Usage(101, 2002, 33, 44)
    assert stored.updated_at == when
    assert [m.usage for m in store.get_messages(session.id)] == [
        Usage(),
        Usage(100, 2000, 30, 40),
        Usage(1, 2, 3, 4),
    ]
    old = store.append_message(session.id, NewMessage(role="user", content="late"), created_at=10.0)
    assert old.created_at == 10.0 and store.get_session(session.id).updated_at == when  # never backwards


def test_tool_calls_and_meta_round_trip(store: SessionStore) -> None:
    session = store.create_session(source="cli")
    calls = (
        ToolCall(id="call_1", name="terminal", arguments='{"cmd": "ls -la"}'),
        ToolCall(id="call_2", name="files", arguments='{"path":"ä/ü.txt"}'),
    )
    asked = store.append_message(
        session.id,
        NewMessage(role="assistant", content=None, tool_calls=calls, meta={"finish": "tool_calls"}),
    )
    answered = store.append_message(
        session.id, NewMessage(role="tool", content="total 0", tool_call_id="call_1", tool_name="terminal")
    )
    summary = store.append_message(
        session.id, NewMessage(role="summary", content="so far", meta={"n": [1, 2]})
    )
    assert store.get_messages(session.id) == [asked, answered, summary]
    stored = store.get_messages(session.id)
    assert stored[0].tool_calls == calls and stored[0].content is None
    assert stored[0].meta == {"finish": "tool_calls"}
    assert (stored[1].tool_call_id, stored[1].tool_name, stored[1].role) == ("call_1", "terminal", "tool")
    assert stored[2].meta == {"n": [1, 2]}
    assert [m.id for m in stored] == sorted(m.id for m in stored)


def test_a_note_is_stored_and_searchable_like_any_message(store: SessionStore) -> None:
    """A ``note`` (e.g. "the heartbeat ended") is kept in order with its meta; the model never
    sees it, which is the agent's business, not the store's."""
    session = store.create_session(source="cli")
    say(store, session.id, "watch the deploy")
    note = store.append_message(
        session.id, NewMessage(role="note", content="Heartbeat ended, cleared", meta={"heartbeat": "ended"})
    )
    assert store.get_messages(session.id)[-1] == note and note.seq == 2 and note.role == "note"
    assert note.meta == {"heartbeat": "ended"} and store.get_session(session.id).message_count == 2
    assert [h.role for h in store.search("cleared", session_id=session.id)] == ["note"]


def test_append_refuses_bad_input_without_writing(store: SessionStore) -> None:
    session = store.create_session(source="cli")
    with pytest.raises(SessionNotFound):
        store.append_message("abcabcabcabc", NewMessage(role="user", content="x"))
    with pytest.raises(ValueError):
        store.append_message(session.id, NewMessage(role="wizard", content="x"))
    with pytest.raises(ValueError):
        store.append_message(session.id, NewMessage(role="user", content="x", usage=Usage(-1, 0, 0, 0)))
    with pytest.raises(TypeError):
        store.append_message(session.id, NewMessage(role="user", content="x", meta={"obj": object()}))
    assert store.get_messages(session.id) == []
    assert store.get_session(session.id).message_count == 0


# -- system prompts -----------------------------------------------------------------------
def test_prompts_are_content_addressed(store: SessionStore) -> None:
    text = "You are vigil.\n\nSOUL: be kind — ✓\n"
    digest = store.put_prompt(text)
    assert digest == hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert store.put_prompt(text) == digest
    assert store.get_prompt(digest) == text
    assert store.put_prompt(text + " ") != digest
    assert store.get_prompt("0" * 64) is None
    with pytest.raises(ValueError):
        store.put_prompt("")


def test_session_prompt(store: SessionStore) -> None:
    session = store.create_session(source="cli", system_prompt="first prompt", model_config={"epoch": 1})
    assert store.get_prompt(session.system_prompt_hash or "") == "first prompt"
    digest = store.set_session_prompt(session.id, "second prompt", model_config={"epoch": 2})
    updated = store.get_session(session.id)
    assert updated.system_prompt_hash == digest and store.get_prompt(digest) == "second prompt"
    assert updated.model_config == {"epoch": 2}
    store.set_session_prompt(session.id, "first prompt")
    again = store.get_session(session.id)
    assert again.system_prompt_hash == session.system_prompt_hash and again.model_config == {"epoch": 2}
    with pytest.raises(SessionNotFound):
        store.set_session_prompt("abcabcabcabc", "x")


# -- state_meta ---------------------------------------------------------------------------
def test_meta_get_set_delete(store: SessionStore, clock: FakeClock) -> None:
    assert store.get_meta("refresh_epoch") is None
    store.set_meta("refresh_epoch", 1)
    entry = store.get_meta("refresh_epoch")
    assert entry is not None and entry.value == 1 and entry.updated_at == clock.now()
    when = tick(clock)
    store.set_meta("refresh_epoch", {"epoch": 2, "by": ["cli"]})
    assert store.get_meta("refresh_epoch") == MetaEntry("refresh_epoch", {"epoch": 2, "by": ["cli"]}, when)
    assert store.delete_meta("refresh_epoch") is True
    assert store.delete_meta("refresh_epoch") is False
    store.set_meta("gone", "soon")
    store.set_meta("gone", None)
    assert store.get_meta("gone") is None


def test_compare_and_set(store: SessionStore) -> None:
    assert store.compare_and_set_meta("claim", None, {"owner": "a", "slot": 1}) is True
    assert store.compare_and_set_meta("claim", None, {"owner": "b"}) is False
    assert store.compare_and_set_meta("claim", {"owner": "b"}, {"owner": "c"}) is False
    # Key order does not matter: values are compared as canonical JSON.
    assert store.compare_and_set_meta("claim", {"slot": 1, "owner": "a"}, {"owner": "c"}) is True
    assert store.get_meta("claim").value == {"owner": "c"}  # type: ignore[union-attr]
    assert store.compare_and_set_meta("claim", {"owner": "c"}, None) is True
    assert store.get_meta("claim") is None
    assert store.compare_and_set_meta("claim", {"owner": "c"}, 1) is False
    assert store.get_meta("claim") is None


def test_concurrent_compare_and_set_has_one_winner(store_factory: StoreFactory) -> None:
    contenders = 8
    stores = [store_factory() for _ in range(2)]  # two stores, as two processes would have
    barrier = threading.Barrier(contenders)
    results: dict[int, bool] = {}

    def claim(i: int) -> None:
        barrier.wait()
        results[i] = stores[i % 2].compare_and_set_meta("cron:nightly:2030-01-01", None, {"owner": i})

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(contenders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [i for i, won in results.items() if won]
    assert len(results) == contenders and len(winners) == 1
    assert stores[0].get_meta("cron:nightly:2030-01-01").value == {"owner": winners[0]}  # type: ignore[union-attr]


def test_compare_and_set_many(store: SessionStore, clock: FakeClock) -> None:
    store.set_meta("job:a", {"due": 1})
    store.set_meta("job:b", {"due": 1})
    store.set_meta("job:gone", {"due": 1})
    store.set_meta("old:run", "stale")
    when = tick(clock)
    swaps = [
        MetaSwap("job:a", {"due": 1}, {"due": 2}, (("run:a:1", {"status": "running"}), ("old:run", None))),
        MetaSwap("job:b", {"due": 0}, {"due": 2}, (("run:b:1", {"status": "running"}),)),  # stale: loses
        MetaSwap("job:new", None, {"due": 5}),  # absent: claimed
        MetaSwap("job:a2", {"due": 1}, {"due": 2}),  # expected a value, the key is absent: loses
        MetaSwap("job:gone", {"due": 1}, None),  # a delete
    ]
    assert store.compare_and_set_many(swaps) == [True, False, True, False, True]
    values = {e.key: e.value for e in store.list_meta("")}
    assert values == {"job:a": {"due": 2}, "job:b": {"due": 1}, "job:new": {"due": 5}, "run:a:1": {"status": "running"}}
    assert store.get_meta("run:a:1") == MetaEntry("run:a:1", {"status": "running"}, when)
    found = store.get_meta_many(["job:a", "job:nope", "job:new", "job:a"])
    assert {k: e.value for k, e in found.items()} == {"job:a": {"due": 2}, "job:new": {"due": 5}}
    assert store.compare_and_set_many([]) == [] and store.get_meta_many([]) == {}


def test_compare_and_set_many_refuses_bad_batches_without_writing(store: SessionStore) -> None:
    store.set_meta("job:a", 1)
    for bad in (
        [MetaSwap("job:a", 1, 2), MetaSwap("job:a", 2, 3)],  # a key twice
        [MetaSwap("job:a", 1, 2, (("job:a", 5),))],  # swapped and written along
        [MetaSwap("job:a", 1, 2), MetaSwap("", None, 1)],  # an empty key
        [MetaSwap("job:a", 1, 2), MetaSwap("job:b", None, float("nan"))],  # not JSON
    ):
        with pytest.raises(ValueError):
            store.compare_and_set_many(bad)
    assert [(e.key, e.value) for e in store.list_meta("")] == [("job:a", 1)]


def test_concurrent_batches_claim_each_key_once(store_factory: StoreFactory) -> None:
    """Two stores (as two processes would have) claim overlapping batches of due jobs at the
    same moment, with the run record of each claim written along: every job is claimed by
    exactly one of them, and only the winner's run record exists."""
    jobs = [f"job:{n:03d}" for n in range(60)]
    stores = [store_factory() for _ in range(2)]
    for key in jobs:
        stores[0].set_meta(key, {"due": 1})
    barrier = threading.Barrier(4)
    results: dict[int, list[str]] = {}

    def claim(i: int) -> None:
        mine = jobs[i * 10 :] + jobs[: i * 10]  # each contender in another order
        swaps = [MetaSwap(k, {"due": 1}, {"due": 2, "by": i}, ((f"run:{k}:{i}", {"by": i}),)) for k in mine]
        barrier.wait()
        results[i] = [k for k, won in zip(mine, stores[i % 2].compare_and_set_many(swaps)) if won]

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    claimed = [key for won in results.values() for key in won]
    assert sorted(claimed) == jobs  # each once, none lost
    runs = {e.key: e.value for e in stores[1].list_meta("run:")}
    expected = {f"run:{key}:{i}": {"by": i} for i, won in results.items() for key in won}
    assert runs == expected
    for i, won in results.items():
        assert all(stores[0].get_meta(key).value == {"due": 2, "by": i} for key in won)  # type: ignore[union-attr]


def test_list_meta_by_prefix(store: SessionStore) -> None:
    for key in [
        "heartbeat:b",
        "heartbeat",
        "heartbeat:a",
        "heartbeat;",
        "heartbeau",
        "cron:x",
        "heartbeat:\U0010ffff",
    ]:
        store.set_meta(key, key)
    assert [e.key for e in store.list_meta("heartbeat:")] == [
        "heartbeat:a",
        "heartbeat:b",
        "heartbeat:\U0010ffff",
    ]
    assert [e.value for e in store.list_meta("cron:")] == ["cron:x"]
    assert len(store.list_meta("")) == 7
    assert store.list_meta("nothing") == []


# -- search -------------------------------------------------------------------------------
def test_search_finds_words_best_first(store: SessionStore) -> None:
    session = store.create_session(source="cli", title="Garden")
    say(store, session.id, "I planted tomatoes and basil in the garden today.")
    say(store, session.id, "Tomatoes, tomatoes, tomatoes!", role="assistant")
    say(store, session.id, "The weather is nice.")
    hits = store.search("tomatoes")
    assert len(hits) == 2 and hits[0].role == "assistant"
    assert hits[0].snippet.count("«") == hits[0].snippet.count("»") == 3
    assert hits[0].session_id == session.id and hits[0].session_title == "Garden"
    assert "«tomatoes»" in hits[1].snippet.lower()
    assert [h.message_id for h in store.search("basil garden")] == [store.get_messages(session.id)[0].id]
    assert store.search("basil weather") == []  # every word must match
    assert len(store.search("tomatoes", limit=1)) == 1


@pytest.mark.parametrize(
    "hostile",
    [
        'tomato" OR',
        "NEAR(",
        '"',
        '""',
        "*",
        "AND",
        "OR NOT",
        "a:b",
        "(tomato",
        "tomato)",
        "col:tomato",
        "tomato -x",
        "^tomato",
        "tomato*",
        "{tomato}",
        "'; DROP TABLE messages; --",
        "\x00",
        "NEAR(a b, 2)",
    ],
)
def test_search_treats_syntax_as_words(store: SessionStore, hostile: str) -> None:
    session = store.create_session(source="cli")
    say(store, session.id, "a tomato grows")
    store.search(hostile)  # must not raise
    assert len(store.search("tomato")) == 1


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text())
def test_search_never_fails_on_any_text(store: SessionStore, text: str) -> None:
    assert isinstance(store.search(text), list)


def test_search_quotes_terms(store: SessionStore) -> None:
    session = store.create_session(source="cli")
    say(store, session.id, "near the tomato or the potato")
    assert len(store.search('tomato"')) == 1
    assert len(store.search("NEAR( tomato OR")) == 1
    assert store.search("tomato NOT potato") == []  # the text holds potato
    assert store.search("tomato NOT") == []  # NOT with nothing to leave out is the word "not"
    assert len(store.search("potato OR")) == 1  # and OR the word "or", which the text holds


def _texts(store: SessionStore, query: str) -> set[str]:
    by_id = {m.id: m.content for s in store.list_sessions() for m in store.get_messages(s.id)}
    return {by_id[h.message_id] for h in store.search(query, limit=100)}


FOREST = [
    "a pine cone fell",
    "the cone of a pine",
    "pineapple on pizza",
    "three pines and a cedar",
    "my spine aches",
    "a birch or two",
    "Pine needles everywhere",
]


def test_search_prefix_or_not_and_phrases(store: SessionStore) -> None:
    session = store.create_session(source="cli")
    for text in FOREST:
        say(store, session.id, text)
    assert _texts(store, "pine*") == set(FOREST) - {"my spine aches", "a birch or two"}
    assert _texts(store, "pinea*") == {"pineapple on pizza"}
    assert _texts(store, '"pine co"*') == {"a pine cone fell"}
    assert _texts(store, '"pine cone"') == {"a pine cone fell"}
    assert _texts(store, "pine cone") == {"a pine cone fell", "the cone of a pine"}
    assert _texts(store, "cedar OR birch") == {"three pines and a cedar", "a birch or two"}
    assert _texts(store, "pizza OR cedar OR birch") == {
        "pineapple on pizza", "three pines and a cedar", "a birch or two"
    }
    assert _texts(store, "pine NOT cone") == {"three pines and a cedar", "Pine needles everywhere"}
    assert _texts(store, 'pine* NOT "pine cone" NOT pizza OR needles') == {
        "the cone of a pine", "three pines and a cedar"
    }
    assert _texts(store, "NOT cone pine") == {"three pines and a cedar", "Pine needles everywhere"}
    assert _texts(store, "pine* cedar OR pizza") == {"three pines and a cedar", "pineapple on pizza"}
    # only in capitals and only with something to work on are OR and NOT operators
    assert _texts(store, "birch or") == {"a birch or two"}
    assert _texts(store, "cedar or birch") == set()
    assert _texts(store, "birch OR") == {"a birch or two"}
    assert store.search("NOT cone") == []  # nothing to look for


def test_search_lists_a_carried_message_once_under_the_newest_session(
    store: SessionStore, clock: FakeClock
) -> None:
    """Compression copies the recent messages into the continuation (keeping their time and
    noting where they came from); a search shows each such message once."""
    root = store.create_session(source="cli")
    say(store, root.id, "the walrus question")
    carried = store.get_messages(root.id)[0]
    say(store, root.id, "an older walrus aside")
    store.end_session(root.id, "compression")
    chain = [root.id]
    for _ in range(2):
        tick(clock)
        child = store.create_session(source="cli", parent_id=chain[-1])
        store.append_message(child.id, NewMessage("summary", "summary"))
        store.append_message(
            child.id,
            NewMessage("user", carried.content, meta={"copied_from": {"session": chain[-1], "seq": carried.seq}}),
            created_at=carried.created_at,
        )
        carried = store.get_messages(child.id)[-1]
        chain.append(child.id)
        store.end_session(child.id, "compression")
    hits = store.search("walrus")
    assert sorted((h.session_id, h.message_id) for h in hits) == sorted(
        [(chain[-1], carried.id), (root.id, store.get_messages(root.id)[1].id)]
    )
    # within one session, its own messages are all there
    assert len(store.search("walrus", session_id=root.id)) == 2
    assert len(store.search("question", session_id=chain[1])) == 1
    # the same words typed again are a message of their own, not a copy
    say(store, chain[1], "the walrus question")
    assert len(store.search("question")) == 2


_QUERY_PIECES = st.sampled_from(
    ["OR", "NOT", '"', "*", "pine", "pine*", '"pine cone"', "(", ")", "AND", "NEAR", ":", "-", "^",
     "'", "\\", "_", "é", "²", "\u0301", "«", "\x00", "\ufdd0", "a:b*", '"a b"*', "**", "OR*", "x"]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(st.one_of(_QUERY_PIECES, st.text(max_size=4)), max_size=8), glue=st.sampled_from([" ", "", "  "]))
def test_search_never_fails_on_operator_soup(store: SessionStore, pieces: list[str], glue: str) -> None:
    assert isinstance(store.search(glue.join(pieces)), list)


def test_search_blank_query(store: SessionStore) -> None:
    say(store, store.create_session(source="cli").id, "anything")
    assert store.search("") == [] and store.search("   \n") == [] and store.search("?!") == []


def test_search_within_one_session(store: SessionStore) -> None:
    one = store.create_session(source="cli")
    two = store.create_session(source="cli")
    say(store, one.id, "deploy the service")
    say(store, two.id, "deploy the other service")
    assert {h.session_id for h in store.search("deploy")} == {one.id, two.id}
    assert [h.session_id for h in store.search("deploy", session_id=two.id)] == [two.id]


# -- resolving ids ------------------------------------------------------------------------
def test_resolve_session(store: SessionStore) -> None:
    a = store.create_session(source="cli", session_id="abc000000001").id
    b = store.create_session(source="cli", session_id="abc000000002").id
    short = store.create_session(source="cli", session_id="abd0").id
    longer = store.create_session(source="cli", session_id="abd0ff").id
    assert store.resolve_session(a) == a
    assert store.resolve_session("abc000000002") == b
    assert store.resolve_session("abd0f") == longer
    assert store.resolve_session("abd0") == short  # an exact id wins over the ids it prefixes
    with pytest.raises(AmbiguousSession) as ambiguous:
        store.resolve_session("abc")
    assert ambiguous.value.candidates == [a, b]
    for prefix in ["ab", "abc0000000"]:
        with pytest.raises(AmbiguousSession):
            store.resolve_session(prefix)
    for unknown in ["fff", "", "ABC", "abc*", "ab%", "abc_", " abc000000001", "abc000000001x"]:
        with pytest.raises(SessionNotFound):
            store.resolve_session(unknown)


# -- parent chains and conversations ------------------------------------------------------
def test_parent_chain_and_newest_continuation(store: SessionStore, clock: FakeClock) -> None:
    root = store.create_session(source="cli")
    tick(clock)
    middle = store.create_session(source="cli", parent_id=root.id)
    tick(clock)
    older_child = store.create_session(source="cli", parent_id=middle.id)
    tick(clock)
    newest = store.create_session(source="cli", parent_id=middle.id)
    assert [s.id for s in store.parent_chain(newest.id)] == [root.id, middle.id, newest.id]
    assert [s.id for s in store.parent_chain(root.id)] == [root.id]
    # a child continues its parent only once the parent ended by compression
    assert store.newest_continuation(root.id) == root.id
    store.end_session(root.id, "compression")
    assert store.newest_continuation(root.id) == middle.id
    store.end_session(middle.id, "compression")
    assert store.newest_continuation(root.id) == newest.id
    assert store.newest_continuation(older_child.id) == older_child.id
    with pytest.raises(SessionNotFound):
        store.parent_chain("abcabcabcabc")
    with pytest.raises(SessionNotFound):
        store.newest_continuation("abcabcabcabc")


def test_list_conversations_collapses_chains(store: SessionStore, clock: FakeClock) -> None:
    root = store.create_session(source="cli", title="long talk")
    tick(clock)
    alone = store.create_session(source="cli", title="quick question")
    tick(clock)
    store.end_session(root.id, "compression")
    second = store.create_session(source="cli", parent_id=root.id)
    tick(clock)
    head = store.create_session(source="cli", parent_id=second.id)
    # a compression that died before ending `second`: `head` is a conversation of its own
    assert (head.id, head.id, 1) in [(c.root_id, c.head.id, c.segments) for c in store.list_conversations()]
    store.end_session(second.id, "compression")
    conversations = store.list_conversations()
    assert [(c.root_id, c.head.id, c.segments) for c in conversations] == [
        (root.id, head.id, 3),
        (alone.id, alone.id, 1),
    ]
    tick(clock)
    say(store, alone.id, "one more thing")
    assert [c.root_id for c in store.list_conversations()] == [alone.id, root.id]
    assert [c.root_id for c in store.list_conversations(limit=1)] == [alone.id]
    store.delete_session(second.id)  # the chain breaks in two
    assert sorted((c.root_id, c.head.id, c.segments) for c in store.list_conversations()) == sorted(
        [(alone.id, alone.id, 1), (root.id, root.id, 1), (head.id, head.id, 1)]
    )


def test_forks_are_their_conversations_children_not_conversations(store: SessionStore, clock: FakeClock) -> None:
    talk = store.create_session(source="web", title="talk")
    say(store, talk.id, "hello")
    tick(clock)
    first = store.create_session(source="background", forked_from=talk.id, title="side 1")
    tick(clock)
    second = store.create_session(source="background", forked_from=talk.id)
    assert first.forked_from == talk.id and store.get_session(second.id).forked_from == talk.id
    assert talk.forked_from is None and first.parent_id is None
    assert [s.id for s in store.forks(talk.id)] == [first.id, second.id]
    assert store.forks(first.id) == [] and store.forks("abcabcabcabc") == []
    say(store, first.id, "a side question")  # the most recently active session
    assert [c.head.id for c in store.list_conversations()] == [talk.id]
    assert store.newest_continuation(talk.id) == talk.id  # a fork is no continuation
    assert store.conversation_sessions(talk.id) == [store.get_session(talk.id)]
    with pytest.raises(SessionNotFound):
        store.create_session(source="background", forked_from="abcabcabcabc")
    store.delete_session(talk.id)  # forks stay, with no link: conversations of their own now
    assert store.get_session(first.id).forked_from is None
    assert sorted(c.head.id for c in store.list_conversations()) == sorted([first.id, second.id])


def test_model_config_updates_apply_atomically(store: SessionStore) -> None:
    import threading

    session = store.create_session(source="cli", model_config={"cwd": "/w", "count": 0})

    def bump() -> None:
        for _ in range(10):
            store.update_session(session.id, model_config=lambda c: {**c, "count": c["count"] + 1})

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert store.get_session(session.id).model_config == {"cwd": "/w", "count": 40}

    digest = store.set_session_prompt(session.id, "prompt text", model_config=lambda c: {**c, "built": True})
    after = store.get_session(session.id)
    assert after.system_prompt_hash == digest and after.model_config["built"] is True
    assert after.model_config["count"] == 40
    with pytest.raises(SessionNotFound):
        store.update_session("abcabcabcabc", model_config=lambda c: c)
