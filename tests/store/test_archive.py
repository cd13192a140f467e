"""Archived conversations (``vigil.store.archive``) on every store backend: by the root of the
conversation, so a compressed conversation is archived whole and stays archived when it is
listed by its newest session."""

from __future__ import annotations

import pytest

from vigil.store import NewMessage, SessionNotFound, SessionStore, archive


def _compressed(store: SessionStore) -> tuple[str, str]:
    first = store.create_session(source="web", title="Trip")
    store.append_message(first.id, NewMessage("user", "plan a trip"))
    store.end_session(first.id, "compression")
    child = store.create_session(source="web", title="Trip", parent_id=first.id)
    return first.id, child.id


def test_a_conversation_is_archived_whole_and_brought_back(store: SessionStore) -> None:
    root, child = _compressed(store)
    other = store.create_session(source="cli", title="Other").id
    assert archive.set_archived(store, child, True, now=100.0)
    assert not archive.set_archived(store, root, True, now=200.0)  # one conversation, archived already
    assert archive.archived_roots(store) == {root: 100.0}
    assert archive.is_archived(store, root) and archive.is_archived(store, child)
    assert not archive.is_archived(store, other)
    kept, put_away = archive.split(store.list_conversations(), archive.archived_roots(store))
    assert [h.head.id for h in kept] == [other] and [h.head.id for h in put_away] == [child]
    assert archive.set_archived(store, root, False, now=300.0)
    assert archive.archived_roots(store) == {} and not archive.set_archived(store, child, False, now=400.0)


def test_an_unknown_session_writes_nothing_and_forget_drops_the_entry(store: SessionStore) -> None:
    with pytest.raises(SessionNotFound):
        archive.set_archived(store, "no-such-session", True, now=1.0)
    assert archive.archived_roots(store) == {}
    root, child = _compressed(store)
    archive.set_archived(store, child, True, now=1.0)
    store.delete_sessions([root, child])
    archive.forget(store, [root])
    assert store.list_meta(archive.ARCHIVE_PREFIX) == []
