"""The small query language of session search, read the same way by every backend.

    pine cone          both words (in any order, anywhere in the message)
    "pine cone"        the phrase: these words next to each other, in this order
    pine*              a word starting with "pine" (pine, pines, pineapple); also "pine co"*
    pine OR cedar      either word; OR joins the terms on each side of it
    NOT cone           leave out the messages holding the word (or "phrase", or group)

OR and NOT are operators only in capitals and only where they have something to work on;
anywhere else they are plain words, like every other character: no text is a syntax error,
and nothing is handed to a database as query syntax. Each backend renders the parsed
:class:`SearchQuery` in its own syntax (``fts.py`` for SQLite, ``postgres/search.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SEARCHABLE = re.compile(r"[^\W_]")
"""A term needs a letter or digit: anything else is a separator to both backends."""
_TOKEN = re.compile(r'"(?P<phrase>[^"]*)"?(?P<phrase_star>\*+)?|(?P<word>[^\s"]+)')
_OR, _NOT = "OR", "NOT"


@dataclass(frozen=True, slots=True)
class Term:
    """A word or a quoted phrase (``text``, as typed); ``prefix``: its last word may go on."""

    text: str
    prefix: bool = False


@dataclass(frozen=True, slots=True)
class Clause:
    """Terms of which a message must hold at least one (one term: that one), or, when
    ``negated``, none."""

    terms: tuple[Term, ...]
    negated: bool = False


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """Clauses a message must satisfy all of."""

    clauses: tuple[Clause, ...]

    @property
    def wanted(self) -> tuple[Clause, ...]:
        return tuple(c for c in self.clauses if not c.negated)

    @property
    def unwanted(self) -> tuple[Clause, ...]:
        return tuple(c for c in self.clauses if c.negated)

    @property
    def can_match(self) -> bool:
        """Whether there is something to look for (a query of only NOT clauses has not)."""
        return bool(self.wanted)


def parse(text: str) -> SearchQuery:
    """Read ``text`` as a query (see the module docstring). Never raises."""
    tokens: list[str | Term] = []
    # NUL would end the query inside a quoted FTS5 term; it separates words instead.
    for match in _TOKEN.finditer(text.replace("\x00", " ")):
        if match["word"] is not None:
            word = match["word"]
            if word in (_OR, _NOT):
                tokens.append(word)
                continue
            stripped = word.rstrip("*")
            term = Term(stripped, prefix=stripped != word)
        else:
            term = Term(match["phrase"], prefix=match["phrase_star"] is not None)
        if _SEARCHABLE.search(term.text):
            tokens.append(term)
        # else: nothing in it can match; dropped like a separator
    return SearchQuery(tuple(_clauses(tokens)))


def _clauses(tokens: list[str | Term]) -> list[Clause]:
    clauses: list[Clause] = []
    i = 0
    while i < len(tokens):
        negated = tokens[i] == _NOT and i + 1 < len(tokens) and isinstance(tokens[i + 1], Term)
        if negated:
            i += 1
        terms = [_as_term(tokens[i])]
        i += 1
        while i + 1 < len(tokens) and tokens[i] == _OR and isinstance(tokens[i + 1], Term):
            terms.append(_as_term(tokens[i + 1]))
            i += 2
        clauses.append(Clause(tuple(terms), negated))
    return clauses


def _as_term(token: str | Term) -> Term:
    """An operator with nothing to work on is the plain word it spells."""
    return token if isinstance(token, Term) else Term(token)


def words_of(term: Term) -> list[str]:
    """The runs of letters and digits in ``term``: the words a prefix applies to the last of."""
    return re.findall(r"[^\W_]+", term.text)
