"""`/model NAME` checks the name against the endpoint's model list when it has one."""

from __future__ import annotations

from tests.runtime.conftest import Runtime, RuntimeFactory
from vigil.testing.fake_model import FakeModelServer


async def test_a_listed_name_switches(rt: Runtime, fake_model: FakeModelServer) -> None:
    reply = await rt.command("/model fake-model")
    assert reply.startswith("Model switched to fake-model (the endpoint lists it")
    assert rt.store.get_session(rt.session_id).model == "fake-model"


async def test_an_unlisted_name_is_refused_and_changes_nothing(rt: Runtime) -> None:
    outcome = await rt.send("/model fake-modle")
    assert outcome.reply is not None and outcome.reply.is_error
    text = outcome.reply.text
    assert "no model named 'fake-modle'" in text and "Did you mean fake-model?" in text
    assert "It offers: fake-model." in text
    assert rt.controller.model_name() == "fake-model"
    assert rt.store.get_session(rt.session_id).model in (None, "fake-model")
    assert "Model: fake-model" == await rt.command("/model")


async def test_without_a_model_list_it_switches_and_says_it_could_not_check(
    make_runtime: RuntimeFactory, fake_model: FakeModelServer
) -> None:
    # an endpoint path where GET …/models answers 404: no list is offered
    rt = await make_runtime(base_url=fake_model.base_url.rstrip("/") + "/no-list")
    reply = await rt.command("/model some-other-model")
    assert reply.startswith("Model switched to some-other-model (the name could not be checked:")
    assert "offers no model list" in reply
    assert rt.controller.model_name() == "some-other-model"
