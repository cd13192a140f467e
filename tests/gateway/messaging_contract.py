"""The part of the adapter contract a messaging platform keeps for what it declares
(:class:`vigil.platforms.spec.Capabilities`): answers streamed by edits at its pace, approvals
by buttons, files both ways, long answers split at its limit, and delivery errors — a
retryable one retried through the outbox, a permanent one ending the entry, said at once.

A harness opts in per part by having the members that part drives (see
:class:`MessagingHarness`); a platform that declares a capability its harness cannot drive
is skipped with a reason that names what is missing. A part that does not apply to a
platform at all (the web chat has no delivery to refuse: its pages pull their answers) is
named in the harness's ``not_driven`` with why, in words, and skipped with that. Each test starts from a fresh
conversation; together they take a few seconds per platform (the pace of edits is the
platform's, so a one-second pace is most of it).
"""

from __future__ import annotations

import re
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Protocol

import pytest

from vigil.platforms import get as platform_named
from vigil.platforms.spec import Capabilities
from vigil.store.gateway.gateway_tables import OutboxEntry
from vigil.testing.scripting import Reply, ToolCallSpec
from vigil.testing.waiting import eventually

PACE_SLACK = 0.9
"""The share of the declared pace two shown versions must be apart at least (clock slack)."""


@dataclass
class Shown:
    """One of the bot's messages as the platform shows it."""

    text: str
    versions: list[str] = field(default_factory=list)
    """Every text it showed, oldest first, ``text`` last (a message never edited: ``[text]``)."""
    times: list[float] = field(default_factory=list)
    """When versions were shown, where the platform records it (any one clock, in seconds)."""
    buttons: list[str] = field(default_factory=list)
    file: tuple[str, bytes] | None = None
    """The name and bytes of the file it carries."""
    ref: Any = None
    """The harness's handle on it (to press its buttons)."""


class MessagingHarness(Protocol):
    """What the messaging part of the contract asks of a harness, beyond ``ContractHarness``."""

    model: Any
    """The fake model (:class:`vigil.testing.fake_model.FakeModelServer`) the gateway talks to."""
    lines: list[str]
    """What the gateway said (its ``say`` lines)."""
    not_driven: Mapping[str, str]
    """Parts (as :func:`needs` names them: ``edits``, ``files``, ``delivery errors`` …) that do
    not apply to this platform or this harness's set-up, each with why, in words; optional."""

    async def messages(self, ack: Any) -> list[Shown]:
        """The bot's messages in the conversation of a delivered message, oldest first."""
        ...

    async def press(self, message: Shown, label: str) -> None:
        """The person who wrote presses the button ``label`` under ``message``."""
        ...

    async def deliver_file(self, name: str, data: bytes, caption: str, external_id: str) -> Any:
        """The person sends a file with a caption (an :class:`Ack` back)."""
        ...

    async def fail_next_answer(self, ack: Any, *, permanent: bool) -> None:
        """Make the platform refuse the answer to the conversation of ``ack`` — and the
        streamed preview's call, which may come first, where the platform streams: for a while
        (a 5xx), or for good (a refusal retrying cannot fix)."""
        ...


def capabilities(contract: Any) -> Capabilities:
    platform = platform_named(contract.adapter.name)
    return platform.capabilities if platform is not None else Capabilities()


MEMBERS = ("model", "lines", "messages", "press", "deliver_file", "fail_next_answer")


@dataclass(frozen=True)
class _Probe:
    """What one harness class can do, learnt from its first contract (so that the parts it
    cannot drive are skipped without starting a gateway each)."""

    name: str
    capabilities: Capabilities
    members: frozenset[str]
    not_driven: Mapping[str, str]


def needs(what: str, *members: str) -> Any:
    """The test runs for a platform that declares ``what`` (a :class:`Capabilities` field, or
    ``delivery errors``: every platform) with a harness that has ``members``."""
    def mark(test: Any) -> Any:
        test.needs = (what, members)
        return test
    return mark


def _declared(caps: Capabilities, what: str) -> bool:
    if what == "delivery errors":
        return True
    if what == "a message limit":
        return caps.max_message_chars is not None
    return bool(getattr(caps, what))


_TOKEN = re.compile(r"\bw\d{4}\b")


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def _words(count: int, paragraph: int = 0) -> list[str]:
    """``count`` numbered words (``w0000 ``…), a blank line after every ``paragraph`` of them."""
    words = [f"w{n:04d} " for n in range(count)]
    if paragraph:
        words = [w + ("\n\n" if (n + 1) % paragraph == 0 else "") for n, w in enumerate(words)]
    return words


def _key() -> str:
    return uuid.uuid4().hex


async def _settled(contract: Any, ack: Any, wanted: str) -> list[Shown]:
    """The conversation's messages once one of them shows ``wanted`` exactly."""
    async def shown() -> list[Shown] | None:
        messages = await contract.messages(ack)
        return messages if any(m.text == wanted for m in messages) else None

    return await eventually(shown, what=f"the answer {wanted[:40]!r}")


def _outbox(contract: Any, text: str) -> OutboxEntry | None:
    return next((e for e in contract.gateway.store.gateway.outbox_list(limit=50) if e.text == text), None)


class MessagingContract:
    """The tests; mixed into :class:`tests.gateway.adapter_contract.AdapterContract`."""

    @pytest.fixture
    def messaging(self, request: pytest.FixtureRequest) -> Any:
        """The test's ``contract``, or a skip (see :func:`needs`) decided before it is started
        where an earlier test of the class already showed what its harness can do."""
        what, members = request.function.needs
        owner = type(request.instance)
        probe: _Probe | None = owner.__dict__.get("_messaging_probe")
        if probe is None:
            contract = request.getfixturevalue("contract")
            probe = _Probe(contract.adapter.name, capabilities(contract),
                           frozenset(m for m in MEMBERS if hasattr(contract, m)),
                           dict(getattr(contract, "not_driven", {})))
            owner._messaging_probe = probe
        why = probe.not_driven.get(what)
        if not _declared(probe.capabilities, what):
            pytest.skip(f"{probe.name} does not declare {what}" + (f": {why}" if why else ""))
        if why:
            pytest.skip(f"{probe.name} ({what}): {why}")
        missing = [m for m in members if m not in probe.members]
        if missing:
            pytest.skip(f"the contract harness of {probe.name} cannot drive {what} yet: it has no "
                        f"{', '.join(missing)} (see tests/gateway/messaging_contract.py)")
        return request.getfixturevalue("contract")

    @needs("edits", "model", "messages")
    async def test_an_answer_streams_into_one_message_at_the_platform_pace(self, messaging: Any) -> None:
        contract, caps = messaging, capabilities(messaging)
        pace = getattr(contract, "edit_interval", caps.edit_interval)
        words = _words(8)  # written over about three paces: two edits before the last
        answer = "".join(words).strip()
        contract.model.queue(Reply.text(words[:-1] + [words[-1].strip()], chunk_delay=pace / 3))
        ack = await contract.deliver("stream please", _key())
        [message] = [m for m in await _settled(contract, ack, answer) if m.text == answer]
        seen = [_tokens(v) for v in message.versions]
        assert len([s for s in seen if s]) >= 3, f"the answer did not appear progressively: {message.versions}"
        assert all(s == _tokens(answer)[:len(s)] for s in seen), message.versions  # each a start of it
        assert all(len(a) <= len(b) for a, b in zip(seen, seen[1:])), message.versions
        gaps = [b - a for a, b in zip(message.times, message.times[1:])]
        assert all(gap >= pace * PACE_SLACK for gap in gaps), (pace, gaps)  # the last edit too

    @needs("buttons", "model", "messages", "press")
    async def test_a_dangerous_command_waits_for_the_buttons(self, messaging: Any, tmp_path: Path) -> None:
        contract = messaging
        ran, kept = tmp_path / "ran", tmp_path / "kept"
        for target, answer in ((ran, "done as you said"), (kept, "left it alone")):
            command = f"mkfs.ext4 /nonexistent/vigil-device; touch {target}"
            contract.model.queue(Reply.tool_calls(ToolCallSpec("terminal", {"command": command})), answer)
            ack = await contract.deliver("format the spare disk", _key())

            async def asked() -> list[Shown]:
                return [m for m in await contract.messages(ack) if m.buttons and "mkfs.ext4" in m.text]

            [request] = await eventually(asked, what="the approval request")
            labels = [b.lower() for b in request.buttons]
            assert any("approve" in b for b in labels) and any("deny" in b for b in labels), request.buttons
            assert not target.exists()  # nothing runs before the person decides
            label = next(b for b in request.buttons if ("approve" if target is ran else "deny") in b.lower())
            await contract.press(request, label)
            await _settled(contract, ack, answer)
        assert ran.exists() and not kept.exists()

    @needs("files", "model", "messages", "deliver_file")
    async def test_files_go_both_ways(self, messaging: Any) -> None:
        contract = messaging
        data = b"the secret word is pineapple\n"
        contract.model.queue(Reply.tool_calls(ToolCallSpec("send_file", {"path": "notes.txt", "name": "back.txt"})),
                             "Sent it back.")
        key = _key()
        ack = await contract.deliver_file("notes.txt", data, "keep this", key)
        await _settled(contract, ack, "Sent it back.")
        asked = [r.last_user_text or "" for r in contract.model.requests if "keep this" in (r.last_user_text or "")]
        assert asked and "notes.txt" in asked[0]  # the agent was told of the file
        entry = contract.stored(key)
        assert entry is not None and entry.session_id is not None
        assert (contract.gateway.workdir(entry.session_id) / "notes.txt").read_bytes() == data

        async def sent_back() -> list[tuple[str, bytes]]:  # it may follow the answer a moment later
            return [m.file for m in await contract.messages(ack) if m.file is not None]

        assert await eventually(sent_back, what="the file sent back") == [("back.txt", data)]

    @needs("a message limit", "model", "messages")
    async def test_a_long_answer_is_split_at_the_limit_in_order(self, messaging: Any) -> None:
        contract, limit = messaging, capabilities(messaging).max_message_chars
        assert limit is not None
        words = _words(int(limit * 2.5 / 6), paragraph=40)  # 6 characters a word: two and a half messages
        answer = "".join(words).strip()
        contract.model.queue(answer)
        ack = await contract.deliver("tell me everything", _key())
        tail = _tokens(answer)[-1]

        async def finished() -> list[Shown] | None:
            messages = await contract.messages(ack)
            return messages if messages and messages[-1].text.rstrip().endswith(tail) else None

        messages = await eventually(finished, what="the last part")
        parts = [m.text for m in messages if _tokens(m.text)]
        assert len(parts) >= 3 and all(len(p) <= limit for p in parts), [len(p) for p in parts]
        assert [t for p in parts for t in _tokens(p)] == _tokens(answer)  # nothing lost, in order
        assert re.sub(r"\s+", "", "".join(parts)) == re.sub(r"\s+", "", answer)

    @needs("delivery errors", "model", "messages", "fail_next_answer", "lines")
    async def test_a_retryable_delivery_error_is_retried_through_the_outbox(self, messaging: Any) -> None:
        contract = messaging
        entry = await self._refused(contract, "after the outage", permanent=False)
        await _settled(contract, entry[1], "after the outage")
        sent = await eventually(lambda: (e := _outbox(contract, "after the outage")) and e.status == "sent" and e,
                                what="the reply marked sent")
        assert sent.attempts >= 2
        assert any("retrying" in line for line in contract.lines)

    @needs("delivery errors", "model", "messages", "fail_next_answer", "lines")
    async def test_a_permanent_delivery_error_ends_the_entry_and_is_said(self, messaging: Any) -> None:
        contract = messaging
        _gate, ack = await self._refused(contract, "never shown", permanent=True)
        failed = await eventually(lambda: (e := _outbox(contract, "never shown")) and e.status == "failed" and e,
                                  what="the reply marked failed")
        assert failed.attempts == 1 and failed.last_error
        assert not any(m.text == "never shown" for m in await contract.messages(ack))
        await eventually(lambda: any("marked failed" in line for line in contract.lines), what="the failure said")

    @staticmethod
    async def _refused(contract: Any, answer: str, *, permanent: bool) -> tuple[threading.Event, Any]:
        """A turn whose answer the platform refuses (the fault set while the model holds it)."""
        gate = threading.Event()
        asked = len(contract.model.requests)
        contract.model.queue(Reply.text(answer, gate=gate))
        ack = await contract.deliver("hello", _key())
        await eventually(lambda: len(contract.model.requests) > asked, what="the model asked")
        await contract.fail_next_answer(ack, permanent=permanent)
        gate.set()
        return gate, ack
