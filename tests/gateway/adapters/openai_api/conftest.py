"""One real gateway (``vigil gateway run``) for a test module, driven through its
OpenAI-compatible API by the official ``openai`` SDK, with the fake model behind it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import httpx
import openai
import pytest

from tests.gateway.process import history
from tests.gateway.adapters.web.conftest import WebGateway, module_gateway
from vigil.testing.fake_model import FakeModelServer


@pytest.fixture(scope="module")
def shared(fake_model_session: FakeModelServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebGateway]:
    """One gateway for the module: each test starts conversations of its own."""
    with module_gateway(fake_model_session, tmp_path_factory, "api") as running:
        yield running


@pytest.fixture
def gw(shared: WebGateway, fake_model: FakeModelServer) -> WebGateway:
    """The module's gateway, with the fake model's script reset for this test."""
    return shared


def openai_sdk(gateway: WebGateway, timeout: float = 30) -> openai.OpenAI:
    """The ``openai`` SDK pointed at ``gateway``, with the gateway token as its key (retrying nothing)."""
    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=gateway.token, max_retries=0, timeout=timeout)


@pytest.fixture
def client(gw: WebGateway) -> Iterator[openai.OpenAI]:
    """The ``openai`` SDK pointed at the module's gateway."""
    with openai_sdk(gw) as sdk:
        yield sdk


def conversation(gw: WebGateway, session_id: str) -> dict[str, Any]:
    """The conversation as the web chat shows it."""
    return history(gw.api(), session_id)


def said(gw: WebGateway, session_id: str, role: str) -> list[str]:
    return [m["content"] for m in conversation(gw, session_id)["messages"] if m["role"] == role and m["content"]]


def inbox_total(home: Path) -> int:
    from tests.gateway.adapters.web.conftest import inbox_total as total

    return total(home)


def raw(gw: WebGateway, **kwargs: Any) -> httpx.Client:
    """A plain HTTP client of the gateway (for what an SDK would never send)."""
    return gw.http(**kwargs)
