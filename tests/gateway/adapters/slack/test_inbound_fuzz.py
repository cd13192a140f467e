"""Whatever Slack (or someone holding the signing secret) sends, the adapter answers with a
clear status and never a crash: malformed events are ignored or refused, nothing is stored."""

from __future__ import annotations

import json
import sqlite3

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.gateway.adapters.slack.conftest import SlackHarness
from vigil.gateway.adapters.slack.inbound import candidate, command_text
from vigil.gateway.adapters.slack.mrkdwn import from_slack

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
_EVENT = st.fixed_dictionaries({}, optional={
    "type": st.sampled_from(["message", "app_mention", "reaction_added"]) | st.text(max_size=5),
    "user": st.sampled_from(["U1", "", "U0VIGILBOT"]) | _JSON,
    "channel": st.sampled_from(["D1", "C1"]) | _JSON,
    "ts": st.sampled_from(["1.1"]) | _JSON,
    "thread_ts": st.sampled_from(["1.0"]) | _JSON,
    "text": st.text(max_size=40) | _JSON,
    "subtype": st.sampled_from(["file_share", "message_changed"]) | _JSON,
    "files": _JSON,
    "channel_type": st.sampled_from(["im", "channel"]) | _JSON,
    "bot_id": _JSON,
})


@settings(max_examples=150, deadline=None)
@given(_EVENT)
def test_any_event_is_a_candidate_or_ignored(event: dict) -> None:
    found = candidate(event, "U0VIGILBOT")
    if found is not None:
        assert found.route.adapter == "slack" and found.route.chat == event["channel"]
        assert found.user == event["user"] != "U0VIGILBOT"
        assert "<@U0VIGILBOT" not in found.text


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80))
def test_command_text_and_slack_text_never_fail(text: str) -> None:
    assert command_text(text).startswith("/")
    from_slack(text)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.binary(max_size=200) | _JSON.map(lambda v: json.dumps(v).encode()),
       kind=st.sampled_from(["application/json", "application/x-www-form-urlencoded", "text/plain"]))
async def test_signed_garbage_is_refused_cleanly(slack: SlackHarness, body: bytes, kind: str) -> None:
    response = await slack.sender.post(body, kind)
    assert response.status_code in (200, 400), response.text
    with sqlite3.connect(slack.profile.state_db) as db:
        assert db.execute("SELECT count(*) FROM gateway_inbox").fetchone()[0] == 0
