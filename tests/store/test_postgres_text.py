"""What PostgreSQL text cannot hold (NUL), and full-text search with SQLite's meaning."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vigil.store import NewMessage, ToolCall
from vigil.store.postgres.text import ESCAPE, escape, unescape

pytestmark = pytest.mark.postgres

pytest.importorskip("psycopg")

from vigil.store.postgres import PostgresStore  # noqa: E402
from vigil.store.postgres.migrations import INDEXED_CHARS  # noqa: E402

tricky_text = st.text(alphabet=st.sampled_from(["\x00", ESCAPE, "0", "a", " "]) | st.characters())


@given(a=tricky_text, b=tricky_text)
def test_escaping_round_trips_and_keeps_prefixes(a: str, b: str) -> None:
    assert "\x00" not in escape(a)
    assert unescape(escape(a)) == a
    assert escape(a + b) == escape(a) + escape(b)


def test_plain_text_is_stored_unchanged() -> None:
    text = "ordinary text — with ünïcode, \\ backslashes and 'quotes'"
    assert escape(text) is text and unescape(text) is text
    assert unescape(ESCAPE) == "" and unescape("x" + ESCAPE + "0") == "x\x00"  # cut-off snippets


@pytest.fixture
def pg_store(pg_clean_url: str) -> PostgresStore:
    store = PostgresStore(pg_clean_url)
    yield store  # type: ignore[misc]
    store.close()


def test_nul_survives_every_text_column(pg_store: PostgresStore) -> None:
    odd = "before\x00after \ufdd0 \ufdd00 end"
    prompt = "You are vigil.\x00\n"
    session = pg_store.create_session(
        source="cli\x00x", title=odd, model="m\x00", model_config={"k": odd}, tool_names=["a\x00"],
        system_prompt=prompt,
    )
    assert session.system_prompt_hash == hashlib.sha256(prompt.encode()).hexdigest()
    assert pg_store.get_prompt(session.system_prompt_hash) == prompt
    stored = pg_store.get_session(session.id)
    assert (stored.source, stored.title, stored.model) == ("cli\x00x", odd, "m\x00")
    assert stored.model_config == {"k": odd} and stored.tool_names == ("a\x00",)
    message = NewMessage(
        role="assistant", content=odd, tool_calls=(ToolCall("c\x00", "t", odd),), meta={odd: odd}
    )
    appended = pg_store.append_message(session.id, message)
    assert pg_store.get_messages(session.id) == [appended]
    assert appended.content == odd and appended.tool_calls[0].arguments == odd
    result = NewMessage(role="tool", content="x", tool_call_id="c\x00", tool_name="t\x00")
    tool = pg_store.append_message(session.id, result)
    assert pg_store.get_messages(session.id, after_seq=1) == [tool]
    pg_store.set_meta("k\x00ey", odd)
    assert pg_store.get_meta("k\x00ey").value == odd  # type: ignore[union-attr]
    assert [e.key for e in pg_store.list_meta("k\x00")] == ["k\x00ey"]
    assert pg_store.compare_and_set_meta("k\x00ey", odd, odd + "!") is True
    assert [h.message_id for h in pg_store.search("after")] == [appended.id]


def say(store: PostgresStore, session_id: str, text: str) -> int:
    return store.append_message(session_id, NewMessage(role="user", content=text)).id


def test_no_word_is_a_stop_word(pg_store: PostgresStore) -> None:
    session = pg_store.create_session(source="cli").id
    hamlet = say(pg_store, session, "To be, or not to be, that is the question")
    other = say(pg_store, session, "a question of taste")
    assert [h.message_id for h in pg_store.search("not")] == [hamlet]
    assert [h.message_id for h in pg_store.search("to be")] == [hamlet]
    assert {h.message_id for h in pg_store.search("question")} == {hamlet, other}


def test_words_are_stemmed(pg_store: PostgresStore) -> None:
    session = pg_store.create_session(source="cli").id
    planted = say(pg_store, session, "We planted tomatoes yesterday")
    assert [h.message_id for h in pg_store.search("tomato")] == [planted]
    assert [h.message_id for h in pg_store.search("planting")] == [planted]


def test_punctuation_separates_words_as_in_sqlite(pg_store: PostgresStore) -> None:
    session = pg_store.create_session(source="cli").id
    text = "edit src/vigil/store.py, then see https://example.com/docs?q=1 or mail a_b@host.org"
    edit = say(pg_store, session, text)
    for query in ["vigil", "store.py", "store", "example", "docs", "host", "src/vigil", "a_b", "https"]:
        assert [h.message_id for h in pg_store.search(query)] == [edit], query
    assert pg_store.search("vigil/src") == []  # a chunk with punctuation is a phrase: order counts


@pytest.mark.parametrize(
    "hostile",
    [
        "'", "''", "\\", "\\'", "a & b", "!tomato", "tomato:*", "tomato:A", "<->", "tomato <2> grows",
        "(", "tomato | x", "-tomato", '"tomato grows"', "tomato & !grows", "'tomato' & 'x'",
        "\ufdd0", "\ufdd00", "🍅 tomato", "ƒoo", "%", "_", "tomato%", "$1", "%s", "%(x)s",
    ],
)
def test_query_syntax_is_never_read_as_syntax(pg_store: PostgresStore, hostile: str) -> None:
    session = pg_store.create_session(source="cli").id
    say(pg_store, session, "a tomato grows")
    assert isinstance(pg_store.search(hostile), list)
    assert isinstance(pg_store.search(hostile, session_id=session), list)


def test_query_words_are_all_required(pg_store: PostgresStore) -> None:
    session = pg_store.create_session(source="cli").id
    both = say(pg_store, session, "a tomato and a potato")
    say(pg_store, session, "a tomato alone")
    assert [h.message_id for h in pg_store.search("tomato | potato")] == [both]  # | is no operator
    assert [h.message_id for h in pg_store.search("tomato & !potato")] == [both]  # nor ! a negation
    assert pg_store.search("tomato " * 3000 + "cucumber") == []  # a long query is fine


def test_a_huge_message_is_stored_and_found_by_its_beginning(pg_store: PostgresStore) -> None:
    # Distinct words, so that a tsvector of the whole text would pass PostgreSQL's 1 MB limit.
    text = "needle " + " ".join(f"w{i:07d}x" for i in range(250_000))
    session = pg_store.create_session(source="cli").id
    huge = say(pg_store, session, text)
    assert pg_store.get_messages(session)[0].content == text
    hits = pg_store.search("needle")
    assert [h.message_id for h in hits] == [huge] and "«needle»" in hits[0].snippet
    assert len(text) > 10 * INDEXED_CHARS


def test_snippets_mark_matches(pg_store: PostgresStore) -> None:
    session = pg_store.create_session(source="cli", title="Notes\x00").id
    say(pg_store, session, "The zeppelin\x00departs at noon; the zeppelin is late.")
    (hit,) = pg_store.search("zeppelin")
    assert hit.snippet.count("«zeppelin»") == 2 and "\x00" in hit.snippet
    assert hit.session_title == "Notes\x00"
