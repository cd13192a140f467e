"""The Telegram adapter's parsers and splitters, and the fake's text rules, fuzzed."""

from __future__ import annotations

import datetime as dt
import html

from hypothesis import given, settings
from hypothesis import strategies as st
from telegram.error import BadRequest, Forbidden, InvalidToken, NetworkError, RetryAfter, TimedOut

from vigil.gateway.adapters.telegram.buttons import callback_data, parse_callback
from vigil.gateway.adapters.telegram.inbound import Place, normalize_command, owner_of, route_for, target_of
from vigil.gateway.adapters.telegram.outbound import delivery_error, preview, split_text, utf16_len
from vigil.store.gateway.gateway_tables import RouteKey
from vigil.testing.telegram_api.text import EntityError, check_text

TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=3000)


@settings(max_examples=150, deadline=None)
@given(TEXT, st.integers(min_value=4, max_value=700))
def test_split_pieces_fit_and_join_back(text: str, limit: int) -> None:
    pieces = split_text(text, limit)
    assert "".join(pieces) == text
    assert all(0 < utf16_len(p) <= limit for p in pieces)


def test_split_counts_utf16_like_telegram() -> None:
    emoji = "😀" * 3000  # two UTF-16 units each
    pieces = split_text(emoji)
    assert len(pieces) == 2 and utf16_len(pieces[0]) == 4096


def test_split_prefers_paragraphs_then_words() -> None:
    text = "a" * 3000 + "\n\n" + "b" * 3000
    assert split_text(text) == ["a" * 3000 + "\n\n", "b" * 3000]
    words = ("word " * 2000).strip()
    assert all(not p.startswith("ord") for p in split_text(words))


@given(TEXT)
def test_a_preview_always_fits_one_message(text: str) -> None:
    shown = preview(text)
    assert utf16_len(shown) <= 4096 and (shown == text or shown.endswith("…"))


@given(st.text(max_size=200), st.sampled_from(["vigil_bot", "Vigil_Bot", None]))
def test_normalize_command_never_invents_text(text: str, bot: str | None) -> None:
    result = normalize_command(text, bot)
    assert result is None or len(result) <= len(text)
    if not text.startswith("/"):
        assert result == text


def test_normalize_command_strips_our_name_and_ignores_other_bots() -> None:
    assert normalize_command("/hb@vigil_bot status", "vigil_bot") == "/hb status"
    assert normalize_command("/heartbeat@VIGIL_BOT every 10m x", "vigil_bot") == "/heartbeat every 10m x"
    assert normalize_command("/new@other_bot", "vigil_bot") is None
    assert normalize_command("/new", "vigil_bot") == "/new"
    assert normalize_command("/etc/hosts is a file", "vigil_bot") == "/etc/hosts is a file"


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_", min_size=1, max_size=40), st.booleans())
def test_callback_data_round_trips(approval_id: str, approved: bool) -> None:
    data = callback_data(approval_id, approved)
    assert len(data.encode()) <= 64 and parse_callback(data) == (approval_id, approved)


@given(st.text(max_size=80))
def test_other_callback_data_is_not_an_approval(data: str) -> None:
    parsed = parse_callback(data)
    assert parsed is None or data.startswith("approval:")


def test_routes_and_owners() -> None:
    private = route_for(Place(42, "private", None, 42), group_per_user=True)
    assert private == RouteKey("telegram", "42") and owner_of(private) == "42"
    group = route_for(Place(-100, "supergroup", 7, 42), group_per_user=True)
    assert group == RouteKey("telegram", "-100", "7", "42") and owner_of(group) == "42"
    shared = route_for(Place(-100, "group", None, 42), group_per_user=False)
    assert shared == RouteKey("telegram", "-100") and owner_of(shared) is None
    assert target_of(group) == (-100, 7) and target_of(private) == (42, None)


def test_platform_errors_become_delivery_errors(monkeypatch) -> None:
    monkeypatch.setenv("PTB_TIMEDELTA", "1")  # as the adapter runs it
    limited = delivery_error(RetryAfter(dt.timedelta(seconds=3)))
    assert limited.retryable and limited.retry_after == 3
    assert delivery_error(NetworkError("Bad Gateway (502)")).retryable
    assert delivery_error(TimedOut()).retryable
    assert not delivery_error(BadRequest("Chat not found")).retryable
    assert not delivery_error(Forbidden("bot was blocked by the user")).retryable
    assert not delivery_error(InvalidToken("Unauthorized")).retryable


@given(TEXT.filter(lambda t: t.strip()))
def test_escaped_html_parses_back_to_the_text(text: str) -> None:
    if utf16_len(text) <= 4096:
        assert check_text(html.escape(text, quote=False), "HTML") == text


def test_the_fake_refuses_what_telegram_refuses() -> None:
    for text, mode in [("1 < 2", "HTML"), ("<script>x</script>", "HTML"), ("<b>open", "HTML"),
                       ("done.", "MarkdownV2"), ("*bold", "Markdown"), ("", None), ("x" * 4097, None)]:
        try:
            check_text(text, mode)
        except EntityError as exc:
            assert str(exc).startswith("Bad Request")
        else:
            raise AssertionError(f"{text[:20]!r} in {mode} was accepted")
    assert check_text("<b>bold</b> &amp; done", "HTML") == "bold & done"
    assert check_text("done\\.", "MarkdownV2") == "done."


def test_the_fake_is_driven_over_http_from_another_process() -> None:
    import httpx

    from vigil.testing.telegram_api.server import FakeTelegramServer

    with FakeTelegramServer() as fake, httpx.Client(base_url=fake.api_url) as http:
        update = http.post("/_fake/messages", json={"chat_id": 5, "user_id": 5, "text": "hi"}).json()
        assert update["message"]["text"] == "hi" and fake.pending() == 1
        assert http.post("/_fake/messages", json={"chat_id": "x", "user_id": 5, "text": "hi"}).status_code == 400
        assert http.post("/_fake/faults", json={"times": 1, "status": 200}).status_code == 400
        assert http.post("/_fake/faults", json={"times": 1, "status": 429, "retry_after": 2}).json() == {"faults_left": 1}
        limited = http.post(f"/bot{fake.token}/getMe")
        assert limited.status_code == 429 and limited.json()["parameters"] == {"retry_after": 2}
        assert http.get("/botnot-the-token/getMe").json() == {"ok": False, "error_code": 401, "description": "Unauthorized"}
        sent = http.post(f"/bot{fake.token}/sendMessage", data={"chat_id": "5", "text": "hello"}).json()
        assert sent["ok"] and sent["result"]["chat"]["id"] == 5
        assert http.get("/_fake/sent", params={"chat_id": 5}).json()[0]["text"] == "hello"
        assert http.get("/_fake/state").json()["pending"] == 1
