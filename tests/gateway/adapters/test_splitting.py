"""The shared splitter: long answers cut into messages that fit, nothing lost or reordered."""

from __future__ import annotations

import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from vigil.gateway.adapters.splitting import clip, pieces, split_text, utf16_units

TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=2000)
FEW = st.text(alphabet="ab \n.`~&;<>😀", max_size=2000)
LINE = st.text(alphabet="abc xyz.`😀", min_size=0, max_size=60)
BLOCK = st.builds(lambda fence, info, lines: f"{fence}{info}\n" + "\n".join(lines) + f"\n{fence}",
                  st.sampled_from(["```", "````", "~~~"]), st.sampled_from(["", "python", "sh"]),
                  st.lists(LINE, max_size=30))
MARKDOWN = st.lists(st.one_of(LINE, BLOCK, st.just("")), max_size=40).map("\n".join)
LINK = re.compile(r"<[^<>\n]{0,30}>|&[a-z]{2,4};")


def _open_at_end(text: str) -> bool:
    """Whether ``text`` ends inside a fenced code block (CommonMark's fences)."""
    state: tuple[str, int] | None = None
    for line in text.split("\n"):
        fence = re.fullmatch(r" {0,3}(`{3,}|~{3,})(.*)", line)
        if fence is None:
            continue
        run, info = fence.groups()
        if state is None and not (run[0] == "`" and "`" in info):
            state = (run[0], len(run))
        elif state is not None and run[0] == state[0] and len(run) >= state[1] and not info.strip():
            state = None
    return state is not None


@settings(max_examples=200, deadline=None)
@given(st.one_of(TEXT, FEW, MARKDOWN), st.integers(24, 600), st.booleans(), st.booleans())
def test_pieces_fit_and_join_back_in_order(text: str, limit: int, code: bool, units: bool) -> None:
    measure = utf16_units if units else len
    cut = pieces(text, limit, measure=measure, code_blocks=code, keep=LINK)
    assert "".join(piece.body for piece in cut) == text  # nothing lost, nothing reordered
    assert all(piece.body for piece in cut)
    assert all(measure(piece.text) <= limit for piece in cut)
    if not code:
        assert split_text(text, limit, measure=measure) == [piece.body for piece in cut]


@settings(max_examples=150, deadline=None)
@given(MARKDOWN, st.integers(60, 400), st.sampled_from([None, "```"]))
def test_every_message_closes_the_code_it_opens(text: str, limit: int, fence: str | None) -> None:
    assume(not re.search("`{6,}|~{6,}", text))  # a fence too long to repeat in a small message is not
    if fence is not None:  # a platform whose code blocks are all opened and closed by one fence
        text = re.sub(r"(?m)^ {0,3}(`{3,}|~{3,}).*$", "```", text)
    cut = pieces(text, limit, code_blocks=True, fence=fence)
    for piece in cut[:-1]:  # the last one ends as the text does
        assert not _open_at_end(piece.text), piece
    for before, after in zip(cut, cut[1:]):
        assert bool(before.closes) == bool(after.opens)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(st.text(alphabet="ab ", max_size=40), st.sampled_from(["<https://x.y|a link>", "&amp;"])),
                max_size=200).map("".join), st.integers(60, 300))
def test_unbreakable_spans_stay_whole(text: str, limit: int) -> None:
    ends = {sum(len(p.body) for p in pieces(text, limit, keep=LINK)[:n + 1])
            for n in range(len(pieces(text, limit, keep=LINK)))}
    for match in LINK.finditer(text):
        assert not any(match.start() < end < match.end() for end in ends), (match.group(), ends)


@settings(max_examples=100, deadline=None)
@given(st.one_of(TEXT, FEW, MARKDOWN), st.integers(24, 500))
def test_trimmed_messages_leave_out_only_whitespace(text: str, limit: int) -> None:
    parts = split_text(text, limit, code_blocks=True, trim=True)
    kept = [piece for piece in pieces(text, limit, code_blocks=True) if piece.body.strip()]
    assert len(parts) == len(kept)
    for part, piece in zip(parts, kept):
        assert part.strip() and len(part) <= limit
        assert part == piece.opens + piece.body.rstrip() + piece.closes  # the cut's whitespace alone is gone


def test_edge_cases() -> None:
    assert split_text("", 100) == [] and pieces("", 100) == []
    assert split_text("a" * 3000 + "\n\n" + "b" * 3000, 4096) == ["a" * 3000 + "\n\n", "b" * 3000]
    assert split_text("one two. three", 12) == ["one two. ", "three"]  # a sentence before a word
    assert [utf16_units(p) for p in split_text("😀" * 3000, 4096, measure=utf16_units)] == [4096, 1904]
    assert split_text("x" * 10, 4) == ["xxxx", "xxxx", "xx"]  # no break anywhere: hard cuts
    code = "intro\n```python\n" + "x = 1\n" * 40 + "```\nafter"
    parts = split_text(code, 80, code_blocks=True)
    assert all(p.count("```") % 2 == 0 for p in parts)
    assert all(p.startswith("```python\n") for p in parts[1:-1]) and parts[-1].endswith("after")
    assert "```\n```" not in "".join(parts)  # a block whose end comes next is not reopened for nothing
    with pytest.raises(ValueError, match="too small"):
        split_text("abc", 1)
    with pytest.raises(ValueError, match="too small"):
        split_text("abc", 10, code_blocks=True)
    assert clip("abcdef", 4) == "abc…" and clip("abc", 4) == "abc"
    assert utf16_units(clip("😀" * 10, 5, measure=utf16_units)) <= 5
