"""Markdown to Slack mrkdwn, and long answers split into messages (with fuzzing)."""

from __future__ import annotations

import html
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vigil.gateway.adapters.slack.mrkdwn import from_slack, to_mrkdwn
from vigil.gateway.adapters.slack.mrkdwn import FENCE, split_message


@pytest.mark.parametrize(("markdown", "mrkdwn"), [
    ("**bold** and __bold__", "*bold* and *bold*"),
    ("*italic* and _italic_", "_italic_ and _italic_"),
    ("~~gone~~", "~gone~"),
    ("[the docs](https://example.com/a?b=1&c=2)", "<https://example.com/a?b=1&amp;c=2|the docs>"),
    ("# Title\n## Sub **x**", "*Title*\n*Sub x*"),
    ("- one\n* two\n  + three", "• one\n• two\n  • three"),
    ("use `a**b**c` here", "use `a**b**c` here"),
    ("```python\nx = 1 < 2 and **y**\n```", "```\nx = 1 &lt; 2 and **y**\n```"),
    ("<script>&</script> <@U123> <!channel>", "&lt;script&gt;&amp;&lt;/script&gt; &lt;@U123&gt; &lt;!channel&gt;"),
    ("2 * 3 * 4", "2 * 3 * 4"),
    ("```\nnever closed", "```\nnever closed\n```"),
])
def test_markdown_becomes_mrkdwn(markdown: str, mrkdwn: str) -> None:
    assert to_mrkdwn(markdown) == mrkdwn


def test_what_slack_delivers_becomes_plain_text() -> None:
    assert from_slack("see <https://x.io/a|the page> &amp; <https://y.io> &lt;3 <@U1>") == \
        "see the page (https://x.io/a) & https://y.io <3 <@U1>"


_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=400)
_MARKDOWNISH = st.lists(st.sampled_from([
    "**", "*", "_", "__", "~~", "`", "```", "\n", "# ", "- ", "[a](http://b.c)", "<", ">", "&", "|", "word", " ",
]), max_size=60).map("".join)


@settings(max_examples=150, deadline=None)
@given(st.one_of(_TEXT, _MARKDOWNISH))
def test_model_text_never_makes_a_mention_or_link_of_its_own(text: str) -> None:
    out = to_mrkdwn(text)
    links = re.findall(r"<[^<>]*>", out)
    made = re.findall(r"\[[^\[\]\n]+\]\([^()\s]+\)", text)
    assert len(links) <= len(made)  # every <…> comes from a Markdown link
    assert not any(link.startswith(("<@", "<!", "<#")) for link in links)


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="abc xyz<>&\n", max_size=200))
def test_code_blocks_keep_their_text(code: str) -> None:
    code = code.replace("`", "")
    lines = [line for line in code.split("\n") if not line.lstrip().startswith("```")]
    body = "\n".join(lines)
    out = to_mrkdwn(f"```sh\n{body}\n```")
    assert html.unescape(out) == f"```\n{body}\n```"


@settings(max_examples=150, deadline=None)
@given(st.one_of(_TEXT, _MARKDOWNISH, st.text(alphabet="ab \n`&;<>", max_size=3000)), st.integers(60, 500))
def test_split_parts_fit_and_keep_the_text(text: str, limit: int) -> None:
    parts = split_message(text, limit)
    assert all(len(part) <= limit for part in parts)
    assert all(part.strip() for part in parts)
    rejoined = re.sub(r"\s+", "", "".join(parts).replace(FENCE, ""))
    assert rejoined == re.sub(r"\s+", "", text.replace(FENCE, ""))


def test_a_long_answer_splits_at_paragraphs_and_reopens_code() -> None:
    paragraphs = "\n\n".join(f"paragraph {n} " + "word " * 150 for n in range(8))
    parts = split_message(paragraphs, 1000)
    assert len(parts) > 1 and all(p.startswith("paragraph") for p in parts)
    code = "```\n" + "\n".join(f"line {n}" for n in range(400)) + "\n```"
    parts = split_message(code, 500)
    assert all(p.startswith("```") and p.endswith("```") for p in parts)
    assert split_message("") == []
