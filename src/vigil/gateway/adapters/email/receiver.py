"""The receiving loop: new mail in the IMAP mailbox becomes gateway input, each mail marked
handled only once it is stored.

The loop asks the server for the mails with a UID above its watermark, oldest first, then
waits for more: in IDLE where the server has it (new mail is seen as it comes), at most
``email.poll_seconds`` either way. A mail is handed to :meth:`GatewayPort.receive` (which stores it, or
recognises its Message-ID as a duplicate, or answers a stranger with a pairing code); only
then is it flagged ``\\Seen`` and the watermark moved past it, in the store's ``state_meta``.
A crash in between reads it again, and the inbox's deduplication answers it once.

The first start remembers where the mailbox stands and handles only mail that comes after
it: pointing vigil at a mailbox full of old mail does not answer the old mail. A new
UIDVALIDITY (the mailbox was re-created) starts over the same way.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections import OrderedDict
from typing import Callable

from vigil.backoff import Backoff
from vigil.gateway.adapters.base import GatewayClosed, GatewayPort
from vigil.gateway.adapters.email.attachments import save_files
from vigil.gateway.adapters.email.imap import ImapError, Mailbox, Position
from vigil.gateway.adapters.email.inbound import parse
from vigil.gateway.adapters.email.smtp import Login
from vigil.platforms.email import Endpoint
from vigil.store import StoreError

log = logging.getLogger(__name__)

STRIKES = 3
"""Failures in a row of one mail (not of the store) after which it is skipped: one poison mail
must not keep every later mail from being read."""
SUBJECTS = 1000
"""Threads whose subject is remembered."""
State = Callable[[str, str, "str | None"], None]
"""Told ``(state, detail, error)`` as the loop connects, waits and fails."""


class Receiver:
    """See the module docstring."""

    def __init__(self, gateway: GatewayPort, server: Endpoint, login: Login, *, mailbox: str, own: str,
                 poll: float, state: State, backoff: tuple[float, float] = (1.0, 300.0),
                 subjects: "OrderedDict[str, str] | None" = None) -> None:
        self.gateway, self.server, self.login = gateway, server, login
        self.mailbox_name, self.own, self.poll, self.state = mailbox, own.lower(), poll, state
        self.backoff = Backoff(*backoff)
        self.subjects: OrderedDict[str, str] = subjects if subjects is not None else OrderedDict()
        """The latest subject of each thread (by its root), for answers that name no mail."""
        digest = hashlib.sha256(f"{login.username}|{server}|{mailbox}".encode()).hexdigest()[:16]
        self.key = f"email.imap.{digest}"
        """The ``state_meta`` key of this mailbox's watermark."""
        self._box: Mailbox | None = None
        self.failures = 0
        """Failed tries in a row (reset once connected)."""
        self.strikes: dict[int, int] = {}
        """Failures in a row of a mail, by UID."""

    async def run(self) -> None:
        """Read mail until cancelled; a failure is retried with back-off (a final one slower)."""
        self.failures = 0
        while True:
            try:
                await self._session()
                return  # the gateway is closing
            except asyncio.CancelledError:
                raise
            except ImapError as exc:
                self.failures += 1
                delay = min(self.backoff.cap, self.backoff.delay(self.failures - 1) * (10 if exc.final else 1))
                self.state("retrying", f"retrying in {delay:.3g} s", str(exc))
                log.warning("email: %s; retrying in %.3g s", exc, delay)
            except Exception as exc:  # the loop must outlive any one failure
                self.failures += 1
                delay = self.backoff.delay(self.failures - 1)
                self.state("retrying", f"retrying in {delay:.3g} s", f"{type(exc).__name__}: {exc}")
                log.exception("email: reading mail failed; retrying in %.3g s", delay)
            finally:
                self.close()
            await asyncio.sleep(delay)

    async def _session(self) -> None:
        box = self._box = Mailbox(self.server, self.login, self.mailbox_name)
        position = await asyncio.to_thread(box.open)
        mark = await self._watermark(position)
        self.state("connected", f"reading {self.mailbox_name} at {self.server}", None)
        self.failures = 0
        while True:
            mails = await asyncio.to_thread(box.new_mail, mark)
            for uid, raw in mails:
                try:
                    await self._handle(box, position, uid, raw)
                except GatewayClosed:
                    return
                except StoreError:
                    raise  # the store is away: the mail is read again once it is back
                except Exception:
                    self.strikes[uid] = self.strikes.get(uid, 0) + 1
                    if self.strikes[uid] < STRIKES:
                        raise
                    log.exception("email: mail %d fails every time; it is left unread and skipped", uid)
                    await asyncio.to_thread(self.gateway.store.set_meta, self.key,
                                            {"validity": position.validity, "uid": uid})
                self.strikes.pop(uid, None)
                mark = uid
            if not mails and box.idles:
                await asyncio.to_thread(box.wait, self.poll)
            elif not mails:
                await asyncio.sleep(self.poll)

    async def _watermark(self, position: Position) -> int:
        """The UID up to which mail is handled; set to the mailbox's end at the first start."""
        store = self.gateway.store
        entry = await asyncio.to_thread(store.get_meta, self.key)
        value = entry.value if entry is not None and isinstance(entry.value, dict) else None
        if value is not None and value.get("validity") == position.validity and isinstance(value.get("uid"), int):
            return int(value["uid"])
        start = position.next_uid - 1
        await asyncio.to_thread(store.set_meta, self.key, {"validity": position.validity, "uid": start})
        return start

    async def _handle(self, box: Mailbox, position: Position, uid: int, raw: bytes) -> None:
        mail = parse(raw, uid_key=f"<uid.{position.validity}.{uid}@imap>")
        if mail is None or mail.automatic or mail.sender == self.own:
            log.info("email: mail %d left alone (%s)", uid, "no sender" if mail is None else
                     "automatic" if mail.automatic else "the agent's own")
        else:
            self.subjects[mail.root] = mail.subject
            self.subjects.move_to_end(mail.root)
            while len(self.subjects) > SUBJECTS:
                self.subjects.popitem(last=False)
            notes = ""
            if mail.files and await self.gateway.may_talk("email", mail.sender):
                notes = await save_files(self.gateway, mail.route, mail.files)
            receipt = await self.gateway.receive(mail.inbound(notes))
            log.info("email: mail %d from %s %s", uid, mail.sender,
                     "denied" if receipt.denied else "again (duplicate)" if receipt.duplicate else "stored")
            await asyncio.to_thread(box.mark_seen, uid)
        await asyncio.to_thread(self.gateway.store.set_meta, self.key, {"validity": position.validity, "uid": uid})

    def close(self) -> None:
        """Drop the connection at once (a thread still waiting on it fails and ends)."""
        box, self._box = self._box, None
        client = box.client if box is not None else None
        if box is not None:
            box.client = None
        if client is not None:
            try:
                client.shutdown()
            except Exception:
                pass
