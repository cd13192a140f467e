"""The names the model sees for MCP tools: ``mcp__<server>__<tool>``, always a valid function
name of at most 64 characters, the same every time, and never one name for two tools."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from vigil.config.mcp import SERVER_NAME
from vigil.tools.mcp.naming import is_mcp_name, tool_name

FUNCTION_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
servers = st.from_regex(r"[A-Za-z0-9]{1,6}(?:[-_][A-Za-z0-9]{1,6}){0,3}", fullmatch=True)
"""Server names as config.yaml accepts them (SERVER_NAME's length look-ahead is too slow to draw from)."""


def test_a_plain_name_is_kept_as_it_is() -> None:
    assert tool_name("time", "get_current_time") == "mcp__time__get_current_time"
    assert is_mcp_name("mcp__time__get_current_time") and not is_mcp_name("terminal")


def test_a_name_that_does_not_fit_is_cut_and_marked_with_a_hash_of_the_real_one() -> None:
    long = tool_name("github", "x" * 80)
    assert len(long) == 64 and long.startswith("mcp__github__xxxx") and re.search(r"_[0-9a-f]{8}$", long)
    dotted = tool_name("fs", "read.file")
    assert dotted.startswith("mcp__fs__read_file_") and dotted != tool_name("fs", "read_file")


@given(server=servers, tool=st.text(max_size=100))
def test_every_name_is_a_valid_function_name_and_the_same_each_time(server: str, tool: str) -> None:
    assert SERVER_NAME.fullmatch(server)
    name = tool_name(server, tool)
    assert FUNCTION_NAME.fullmatch(name)
    assert name.startswith(f"mcp__{server}__")
    assert name == tool_name(server, tool)


@given(server=servers, tools=st.lists(st.text(max_size=80), min_size=2, max_size=6, unique=True))
def test_two_tools_of_a_server_never_share_a_name(server: str, tools: list[str]) -> None:
    assert len({tool_name(server, tool) for tool in tools}) == len(tools)


@given(first=servers, second=servers, tool=st.text(max_size=20))
def test_two_servers_never_share_a_name(first: str, second: str, tool: str) -> None:
    if first != second:
        assert tool_name(first, tool) != tool_name(second, tool)
