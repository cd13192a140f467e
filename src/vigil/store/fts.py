"""A person's search (see ``search_query``) as an SQLite FTS5 MATCH expression.

Every term becomes an FTS5 string (inner quotes doubled), so punctuation and words such as
``NEAR(``, ``^`` or a stray ``"`` are searched for as words and never parsed; the operators and
parentheses around the strings are written here, from the parsed query, and nowhere else.
"""

from __future__ import annotations

from vigil.store.search_query import Clause, SearchQuery, Term, parse


def to_match_query(text: str) -> str | None:
    """The MATCH expression of the query ``text``; ``None`` when it can match nothing (no
    searchable word, or only NOT clauses)."""
    return render(parse(text))


def render(query: SearchQuery) -> str | None:
    """``query`` in FTS5 syntax (``None`` when it can match nothing)."""
    if not query.can_match:
        return None
    expression = " AND ".join(_clause(c) for c in query.wanted)
    for clause in query.unwanted:  # FTS5's NOT is binary: "a NOT b"
        expression = f"({expression}) NOT {_clause(clause)}"
    return expression


def _clause(clause: Clause) -> str:
    return "(" + " OR ".join(_term(t) for t in clause.terms) + ")"


def _term(term: Term) -> str:
    quoted = '"' + term.text.replace('"', '""') + '"'
    # A string followed by * makes its last token a prefix.
    return quoted + " *" if term.prefix else quoted
