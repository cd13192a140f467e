"""Full-text search over messages in PostgreSQL, with the meaning SQLite's store gives it.

A query is plain words: every whitespace-separated chunk must match (as a phrase, when
punctuation splits it into several words, like ``a:b``), and nothing in it is ever read as
query syntax. Chunks are handed to PostgreSQL as an array parameter and each goes through
``phraseto_tsquery``, which has no syntax to misread; quoting is never needed.
"""

from __future__ import annotations

import re

from vigil.store.postgres_conn import Run
from vigil.store.postgres_migrations import INDEXED_CHARS, SEARCH_CONFIG
from vigil.store.records import SearchHit

_WORDISH = re.compile(r"\w")
_HEADLINE = "StartSel=«, StopSel=», MinWords=8, MaxWords=16, ShortWord=0"
_RANK_NORMALISATION = 1  # divide by 1 + log(length): a long message is not better for being long

_SEARCH = f"""
    WITH q AS (
        SELECT {{s}}.all_of(
            pg_catalog.phraseto_tsquery('{SEARCH_CONFIG}'::regconfig, {{s}}.search_text(w))) AS query
        FROM pg_catalog.unnest(%s::text[]) AS w
    ), best AS (
        SELECT m.id, pg_catalog.ts_rank(m.words, q.query, {_RANK_NORMALISATION}) AS rank
        FROM {{s}}.messages m, q
        WHERE m.words @@ q.query {{where}}
        ORDER BY rank DESC, m.id DESC
        LIMIT %s
    )
    SELECT m.id, m.session_id, m.role, m.created_at, s.title,
        pg_catalog.ts_headline('{SEARCH_CONFIG}'::regconfig, pg_catalog.left(m.content, {INDEXED_CHARS}),
            q.query, %s) AS snippet
    FROM best JOIN {{s}}.messages m ON m.id = best.id JOIN {{s}}.sessions s ON s.id = m.session_id, q
    ORDER BY best.rank DESC, m.id DESC
"""
_IN_SESSION = "AND m.session_id = %s"


def search_words(query: str) -> list[str]:
    """The chunks of ``query`` that can match something, each once, in order.

    Chunks with no letter or digit are dropped; so is NUL (a separator, as in SQLite).
    """
    chunks = query.replace("\x00", " ").split()
    return list(dict.fromkeys(c for c in chunks if _WORDISH.search(c)))


def search_messages(run: Run, query: str, limit: int, session_id: str | None) -> list[SearchHit]:
    """Messages matching every word of ``query``, best first (see ``SessionStore.search``)."""
    words = search_words(query)
    if not words or limit == 0:
        return []
    if session_id is None:
        statement, params = _SEARCH.replace("{where}", ""), (words, limit, _HEADLINE)
    else:
        statement, params = _SEARCH.replace("{where}", _IN_SESSION), (words, session_id, limit, _HEADLINE)
    rows = run(statement, params).fetchall()
    return [
        SearchHit(
            session_id=r["session_id"],
            message_id=r["id"],
            role=r["role"],
            snippet=r["snippet"],
            created_at=r["created_at"],
            session_title=r["title"],
        )
        for r in rows
    ]
