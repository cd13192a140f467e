"""``vigil pairing ...``: who may talk to the agent from the messaging platforms.

The gateway sends a pairing code to a platform user it does not know (see
:mod:`vigil.gateway.authorization`); these commands list the requests and paired users,
approve or deny a code, and revoke a pairing. Loads none of the gateway machinery.
"""

from __future__ import annotations

import getpass
import re
import socket
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from vigil.cli.context import AppContext, pass_app
from vigil.cli.render import console, echo_json, relative, shorten, visible
from vigil import platforms as registry
from vigil.clock import SystemClock
from vigil.gateway import pairing
from vigil.store.gateway.pairing_tables import APPROVED, DENIED, EXPIRED, LOCKED, CodeDecision, PairedUser, PendingCode

_PLATFORM = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
_PAIRED = [p for p in registry.platforms() if p.capabilities.pairing and p.section is not None]
_EXAMPLE = _PAIRED[-1].name if _PAIRED else "PLATFORM"
_ALLOW_LISTS = ", ".join(f"{p.section}.allow" for p in _PAIRED)
_NAMES = ", ".join(p.name for p in _PAIRED)
_USER_ID = re.compile(r"^[A-Za-z0-9_.@:+-]{1,64}$")  # as the allow-lists in config.yaml


class PairingRefused(click.ClickException):
    """A refused pairing command: one ``Error:`` line (or JSON error), exit 1."""

    def __init__(self, message: str, kind: str = "refused") -> None:
        super().__init__(message)
        self.vigil_kind = kind


def _who() -> str:
    try:
        user = getpass.getuser()
    except Exception:  # no login name in a container: the host still says something
        user = "?"
    return f"{user}@{socket.gethostname()}"


@click.group("pairing", help=f"""Who may talk to the agent on a platform.

    A platform user who is not on the platform's allow-list ({_ALLOW_LISTS} in
    config.yaml) and writes to the agent gets an 8-character pairing code instead of an
    answer, valid for an hour. Approve it here to let them in.

    \b
      vigil pairing list                    pending codes and paired users
      vigil pairing approve K7QM3XPA        let the user with that code in
      vigil pairing deny K7QM3XPA           drop the request
      vigil pairing revoke {_EXAMPLE} 12345   shut a paired user out again

    Five wrong codes within 15 minutes lock approvals for a while.
    """)
def pairing_group() -> None:
    """``vigil pairing``."""


@pairing_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (for scripts).")
@pass_app
def list_pairing(app: AppContext, as_json: bool) -> None:
    """List pending codes and paired users.

    Codes themselves are never shown (only the person who asked has theirs); the allow-lists
    of config.yaml are listed too.
    """
    now = SystemClock().now()
    pending = app.store.pairing.pending(now=now)
    users = app.store.pairing.users()
    allowed = _allow_lists(app)
    lock = app.store.pairing.lock_state(now=now, limits=pairing.LIMITS)
    if as_json:
        echo_json({
            "pending": [_code_json(code, now) for code in pending],
            "users": [_user_json(user) for user in users],
            "allowed_in_config": [{"platform": p, "user": u} for p, ids in allowed.items() for u in ids],
            "approvals_locked_until": lock.locked_until if lock.outcome == LOCKED else None,
        })
        return
    if lock.outcome == LOCKED and lock.locked_until is not None:
        click.echo(_locked_text(lock.locked_until, now))
    if pending:
        table = Table(box=None, pad_edge=False, title="Waiting for approval", title_justify="left")
        for column in ("platform", "user", "name", "chat", "asked", "expires"):
            table.add_column(column)
        for code in pending:
            table.add_row(
                escape(code.platform), escape(visible(code.user_id)), escape(shorten(code.display_name, 30)),
                escape(shorten(code.chat, 24)), f"{relative(now - code.created_at)} ago",
                f"in {relative(code.expires_at - now)}",
            )
        console.print(table)
        click.echo("Approve one with `vigil pairing approve CODE` (the code the person was sent).")
    else:
        click.echo("No pairing requests are waiting.")
    if users:
        table = Table(box=None, pad_edge=False, title="Paired users", title_justify="left")
        for column in ("platform", "user", "name", "status", "since", "by"):
            table.add_column(column)
        for user in users:
            status, since, by = (
                ("paired", user.approved_at, user.approved_by) if user.active
                else ("revoked", user.revoked_at or 0.0, user.revoked_by or "")
            )
            table.add_row(
                escape(user.platform), escape(visible(user.user_id)), escape(shorten(user.display_name, 30)),
                status, f"{relative(now - since)} ago", escape(shorten(by, 30)),
            )
        console.print(table)
    for platform, ids in allowed.items():
        click.echo(f"Allowed in config.yaml ({platform}.allow): {', '.join(ids)}")


def _allow_lists(app: AppContext) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for platform in registry.platforms():
        if not platform.capabilities.pairing or platform.section is None:
            continue
        allow = getattr(getattr(app.settings, platform.section, None), "allow", None) or []
        if allow:
            found[platform.name] = list(allow)
    return found


@pairing_group.command("approve")
@click.argument("code")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (for scripts).")
@pass_app
def approve(app: AppContext, code: str, as_json: bool) -> None:
    """Let in the platform user who was sent CODE.

    Case, spaces and dashes in CODE do not matter. A wrong code counts towards the lock-out.
    """
    decided = _decide(app, code, approve=True)
    assert decided.code is not None and decided.user is not None
    if as_json:
        echo_json({"approved": _user_json(decided.user), "chat": decided.code.chat})
        return
    click.echo(
        f"✓ Paired {decided.code.platform} user {visible(decided.code.user_id)}"
        f"{_named(decided.code.display_name)}: their messages are answered from now on."
    )


@pairing_group.command("deny")
@click.argument("code")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (for scripts).")
@pass_app
def deny(app: AppContext, code: str, as_json: bool) -> None:
    """Drop the pairing request that was sent CODE.

    The person is not told; if they write again they get a new code.
    """
    decided = _decide(app, code, approve=False)
    assert decided.code is not None
    if as_json:
        echo_json({"denied": _code_json(decided.code, SystemClock().now())})
        return
    click.echo(f"Dropped the pairing request of {decided.code.platform} user {visible(decided.code.user_id)}.")


def _decide(app: AppContext, text: str, *, approve: bool) -> CodeDecision:
    try:
        code = pairing.normalize(text)
    except pairing.NotACode as exc:
        raise PairingRefused(visible(str(exc)), "usage") from None
    now = SystemClock().now()
    digest = pairing.code_hash(code)
    store = app.store.pairing
    if approve:
        decided = store.approve(digest, by=_who(), now=now, limits=pairing.LIMITS)
    else:
        decided = store.deny(digest, now=now, limits=pairing.LIMITS)
    if decided.outcome in (APPROVED, DENIED):
        return decided
    if decided.outcome == LOCKED:
        raise PairingRefused(_locked_text(decided.locked_until or now, now))
    if decided.outcome == EXPIRED:
        raise PairingRefused(
            f"that code expired {relative(now - decided.code.expires_at) if decided.code else ''} ago; "
            "the person gets a new one when they write again"
        )
    left = pairing.LIMITS.max_wrong - decided.wrong
    warning = (
        _locked_text(decided.locked_until, now) if decided.locked_until is not None and left <= 0
        else f"{left} more wrong code{'s' if left != 1 else ''} within 15 minutes lock approvals"
    )
    raise PairingRefused(f"no pending pairing request has that code ({warning}); `vigil pairing list` shows the requests", "not_found")


def _locked_text(until: float, now: float) -> str:
    return (
        f"approvals are locked after {pairing.LIMITS.max_wrong} wrong codes within 15 minutes; "
        f"try again in {relative(max(1.0, until - now))}"
    )


@pairing_group.command("revoke", help=f"""Shut a paired user out again.

    PLATFORM is {_NAMES} (or another adapter's name); USER is their platform user id,
    as `vigil pairing list` shows it. Their pending code, if any, is dropped too, and their
    conversations' heartbeats stop firing.
    """)
@click.argument("platform")
@click.argument("user")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (for scripts).")
@pass_app
def revoke(app: AppContext, platform: str, user: str, as_json: bool) -> None:
    """``vigil pairing revoke``."""
    if not _PLATFORM.match(platform):
        raise PairingRefused(f"{visible(platform)[:40]!r} is not a platform name (such as {_EXAMPLE})", "usage")
    if platform == "web":
        raise PairingRefused("the web chat has no platform users: its login token is the key (delete gateway.token to change it)")
    if not _USER_ID.match(user):
        raise PairingRefused(
            f"{visible(user)[:70]!r} is not a platform user id (letters, digits and _.@:+-, at most 64)", "usage"
        )
    if user in _allow_lists(app).get(platform, []):
        raise PairingRefused(
            f"{platform} user {user} is on {platform}.allow in config.yaml; remove them there "
            "(`vigil config show` shows the file) — revoking here would not shut them out"
        )
    now = SystemClock().now()
    revoked = app.store.pairing.revoke(platform, user, by=_who(), now=now)
    if revoked is None:
        raise PairingRefused(f"{platform} user {user} is not paired (`vigil pairing list` shows who is)", "not_found")
    if as_json:
        echo_json({"revoked": _user_json(revoked)})
        return
    if revoked.revoked_at is not None and revoked.revoked_at < now:
        click.echo(f"{platform} user {user} was revoked already, {relative(now - revoked.revoked_at)} ago.")
        return
    click.echo(f"Revoked {platform} user {user}{_named(revoked.display_name)}: their messages get a pairing code again.")


def _named(name: str) -> str:
    return f" ({shorten(name, 40)})" if name else ""


def _code_json(code: PendingCode, now: float) -> dict[str, Any]:
    return {
        "platform": code.platform,
        "user": code.user_id,
        "name": code.display_name,
        "chat": code.chat,
        "thread": code.thread,
        "asked_at": code.created_at,
        "expires_at": code.expires_at,
        "expires_in": max(0.0, code.expires_at - now),
    }


def _user_json(user: PairedUser) -> dict[str, Any]:
    return {
        "platform": user.platform,
        "user": user.user_id,
        "name": user.display_name,
        "status": "paired" if user.active else "revoked",
        "approved_at": user.approved_at,
        "approved_by": user.approved_by,
        "revoked_at": user.revoked_at,
        "revoked_by": user.revoked_by,
    }
