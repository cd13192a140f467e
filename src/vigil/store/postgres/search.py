"""Full-text search over messages in PostgreSQL, with the meaning SQLite's store gives it.

The query language is parsed once, in ``search_query``; here each term becomes a tsquery
built by functions that have no syntax to misread: ``phraseto_tsquery`` for words and phrases
(a chunk that punctuation splits, like ``a:b``, is a phrase, as in SQLite), and for the last
word of a prefix term ``to_tsquery`` of nothing but letters and digits followed by ``:*``. The
operators (``&&``, ``||``, ``!!``, ``<->``) are written here around parameters; user text only
ever travels as a parameter.
"""

from __future__ import annotations

from vigil.store.postgres.conn import Run
from vigil.store.postgres.migrations import INDEXED_CHARS, SEARCH_CONFIG
from vigil.store.records import SearchHit
from vigil.store.search_query import Clause, SearchQuery, Term, parse, words_of

_HEADLINE = "StartSel=«, StopSel=», MinWords=8, MaxWords=16, ShortWord=0"
_RANK_NORMALISATION = 1  # divide by 1 + log(length): a long message is not better for being long
_CONFIG = f"'{SEARCH_CONFIG}'::regconfig"

# A message copied into a continuation (compression keeps recent messages verbatim, see
# agent/compression) is listed once, under the newest session holding it. The copy's meta is
# canonical JSON (sorted keys, no spaces) holding "copied_from":{"seq":N,"session":"ID"}; user
# text inside meta is JSON-escaped, so it cannot spell that with bare quotes. The copy keeps the
# original's created_at, which narrows the look cheaply first.
_NOT_CARRIED = """
    AND NOT EXISTS (
        SELECT 1 FROM {s}.sessions k JOIN {s}.messages c ON c.session_id = k.id
        WHERE k.parent_id = m.session_id AND c.created_at = m.created_at
          AND pg_catalog.strpos(c.meta,
                '"copied_from":{"seq":' || m.seq || ',"session":"' || m.session_id || '"}') > 0)
"""
_IN_SESSION = "AND m.session_id = %s"
_SEARCH = f"""
    WITH q AS (SELECT {{query}} AS query), best AS (
        SELECT m.id, pg_catalog.ts_rank(m.words, q.query, {_RANK_NORMALISATION}) AS rank
        FROM {{s}}.messages m, q
        WHERE m.words @@ q.query {{where}}
        ORDER BY rank DESC, m.id DESC
        LIMIT %s
    )
    SELECT m.id, m.session_id, m.role, m.created_at, s.title,
        pg_catalog.ts_headline({_CONFIG}, pg_catalog.left(m.content, {INDEXED_CHARS}),
            q.query, %s) AS snippet
    FROM best JOIN {{s}}.messages m ON m.id = best.id JOIN {{s}}.sessions s ON s.id = m.session_id, q
    ORDER BY best.rank DESC, m.id DESC
"""


def to_tsquery_sql(query: SearchQuery) -> tuple[str, list[str]] | None:
    """An SQL expression of type tsquery for ``query`` and its parameters, in order; ``None``
    when the query can match nothing."""
    if not query.can_match:
        return None
    params: list[str] = []
    wanted = " && ".join(_clause(c, params) for c in query.wanted)
    unwanted = "".join(f" && !!{_clause(c, params)}" for c in query.unwanted)
    return f"({wanted}{unwanted})", params


def _clause(clause: Clause, params: list[str]) -> str:
    return "(" + " || ".join(_term(t, params) for t in clause.terms) + ")"


def _term(term: Term, params: list[str]) -> str:
    if not term.prefix:
        params.append(term.text)
        return f"pg_catalog.phraseto_tsquery({_CONFIG}, {{s}}.search_text(%s))"
    words = words_of(term)  # never empty: parse keeps only terms with a letter or digit
    head, last = words[:-1], words[-1]
    prefix = f"pg_catalog.to_tsquery({_CONFIG}, %s)"
    if not head:
        params.append(last + ":*")
        return prefix
    params.extend([" ".join(head), last + ":*"])
    return f"pg_catalog.tsquery_phrase(pg_catalog.phraseto_tsquery({_CONFIG}, %s), {prefix})"


def search_messages(run: Run, query: str, limit: int, session_id: str | None) -> list[SearchHit]:
    """Messages matching ``query``, best first (see ``SessionStore.search``)."""
    built = to_tsquery_sql(parse(query))
    if built is None or limit == 0:
        return []
    expression, params = built
    statement = _SEARCH.replace("{query}", expression)
    if session_id is None:
        statement, where = statement.replace("{where}", _NOT_CARRIED), []
    else:
        statement, where = statement.replace("{where}", _IN_SESSION), [session_id]
    rows = run(statement, (*params, *where, limit, _HEADLINE)).fetchall()
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
