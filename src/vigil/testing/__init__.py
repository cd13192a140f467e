"""Test support: a fake OpenAI/Anthropic-compatible model server with prefix-cache accounting.

Typical use, with the ``fake_model`` fixture from ``vigil.testing.pytest_plugin``::

    fake_model.queue(
        Reply.tool_calls(ToolCallSpec("read_file", {"path": "notes.txt"})),
        "Done.",
    )
    fake_model.rule(contains="weather", reply="Sunny.")
    ...  # run the code under test against fake_model.base_url / anthropic_base_url
    assert fake_model.last_request.full_prefix_hit

Names are imported lazily so ``python -m vigil.testing.fake_model`` does not import its own
module twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vigil.testing.fake_model import FakeModelServer
    from vigil.testing.records import RecordedRequest
    from vigil.testing.scripting import Reply, Rule, ToolCallSpec

__all__ = ["FakeModelServer", "RecordedRequest", "Reply", "Rule", "ToolCallSpec"]

_HOMES = {
    "FakeModelServer": "vigil.testing.fake_model",
    "RecordedRequest": "vigil.testing.records",
    "Reply": "vigil.testing.scripting",
    "Rule": "vigil.testing.scripting",
    "ToolCallSpec": "vigil.testing.scripting",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'vigil.testing' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_HOMES[name]), name)
