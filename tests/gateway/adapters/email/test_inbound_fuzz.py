"""Fuzz: whatever a mailbox holds — broken headers, odd charsets, missing parts, random bytes —
becomes a stored mail with a plain sender and thread, or is left alone; reading it never
raises (a raise would stop the receiver on that mail for ever)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from vigil.gateway.adapters.email.inbound import parse, without_quote
from vigil.platforms.email import ADDRESS

HEADERS = st.sampled_from([
    "From", "To", "Subject", "Message-ID", "In-Reply-To", "References", "Content-Type", "Auto-Submitted",
    "Content-Transfer-Encoding", "MIME-Version", "Precedence",
])
VALUES = st.one_of(
    st.text(max_size=60),
    st.sampled_from([
        "me@example.com", "Me <ME@Example.COM>", "<a@b>", "<x@y> <z@w>", "text/plain; charset=klingon",
        "multipart/alternative; boundary=b", "text/html; charset=utf-8", "base64", "quoted-printable",
        "=?utf-8?b?w6k=?=", "=?bogus?q?x?=", "auto-replied", "bulk", '"q"@example.com', "a@b.c, d@e.f",
    ]),
)


def _mail(headers: list[tuple[str, str]], body: bytes) -> bytes:
    lines = [f"{name}: {value}".encode("utf-8", "surrogateescape") for name, value in headers]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


@settings(max_examples=300, deadline=None)
@given(headers=st.lists(st.tuples(HEADERS, VALUES), max_size=10), body=st.one_of(
    st.binary(max_size=300), st.text(max_size=300).map(str.encode),
    st.just(b"--b\r\nContent-Type: text/html\r\n\r\n<p>hi<script>x</script></p>\r\n--b--\r\n"),
))
def test_any_mail_is_read_or_left_alone_without_raising(headers: list[tuple[str, str]], body: bytes) -> None:
    got = parse(_mail(headers, body), uid_key="<uid.1.2@imap>")
    if got is None:
        return
    assert ADDRESS.fullmatch(got.sender) and got.sender == got.sender.lower()
    assert got.references[-1] == got.message_id and got.root == got.references[0]
    inbound = got.inbound()
    assert inbound.route.chat == got.sender and inbound.external_id == f"mid:{got.message_id}"
    assert "\r" not in got.text and "\x00" not in got.text + got.subject


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=500))
def test_random_bytes_are_never_a_crash(raw: bytes) -> None:
    parse(raw, uid_key="<uid.1.1@imap>")


def test_the_quoted_mail_below_a_reply_is_left_out() -> None:
    assert without_quote("Yes, at 5.\r\n\r\nOn Thu, 3 Dec 2026, Agent wrote:\r\n> When?\r\n") == "Yes, at 5."
    assert without_quote("Fine\n> quoted\n>> older") == "Fine"
    assert without_quote("> only a quote, answered inline\nmy answer") == "> only a quote, answered inline\nmy answer"
