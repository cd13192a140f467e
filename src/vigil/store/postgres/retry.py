"""Running a store operation again while PostgreSQL cannot serve it for a moment.

A lost connection is a delay, not a failure. Every store method is one transaction, and
:class:`Retry` runs it again whole, on another connection, while it fails in a way that says
nothing about the transaction itself (:func:`is_transient`): the connection was lost (a
restart, a fail-over, ``pg_terminate_backend``), the server is starting, or the transaction
lost a serialization race or a deadlock. Running it again is safe because a transaction that
failed left nothing behind; the one case where that is unknown, a connection lost during
``COMMIT``, is settled before the failure gets here (``conn.Database``).
"""

from __future__ import annotations

import logging
import threading
import time
from functools import wraps
from typing import Any, Callable, Concatenate, Generic, ParamSpec, TypeVar

import psycopg
from psycopg_pool import PoolTimeout

from vigil.backoff import Backoff
from vigil.store.errors import StoreUnavailable, StoreUnwritable

RETRY_SECONDS = 30.0
"""How long one store operation is tried again while it fails transiently before
``StoreUnavailable`` is raised."""
PAUSES = (0.02, 1.0)
"""First and longest pause between two tries (:mod:`vigil.backoff`: doubling, jittered, so that
threads that lost their connections together do not come back in step)."""
BACKOFF = Backoff(*PAUSES)

_RETRYABLE_STATES = frozenset({
    "40001",  # serialization_failure
    "40P01",  # deadlock_detected
    "57P01",  # admin_shutdown: pg_terminate_backend, a fast shutdown or fail-over
    "57P02",  # crash_shutdown: another backend crashed, the server restarts
    "57P03",  # cannot_connect_now: starting up, shutting down
    "25P03",  # idle_in_transaction_session_timeout
    "53300",  # too_many_connections
})

log = logging.getLogger(__name__)
P = ParamSpec("P")
T = TypeVar("T")
O = TypeVar("O")


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` ended a transaction that may succeed when run again whole: the
    connection failed or was lost (no answer from the server, or a connection error of class
    08), no pooled connection came in time, the server is shutting down or starting, or a
    serialization failure or deadlock."""
    if isinstance(exc, PoolTimeout):
        return True
    if not isinstance(exc, psycopg.Error):
        return False
    state = exc.sqlstate
    if state is None:  # raised by the client: the connection could not be made or was lost
        return isinstance(exc, psycopg.OperationalError)
    return state in _RETRYABLE_STATES or state.startswith("08")


class Retry:
    """Calls an operation again while it raises ``StoreUnavailable`` (not ``StoreUnwritable``:
    a full disk lasts until a person acts), for up to ``seconds`` with jittered back-off;
    then the last error is raised, saying how many tries it had."""

    def __init__(self, seconds: float = RETRY_SECONDS) -> None:
        self.seconds = seconds
        self._active = threading.local()

    def __call__(self, work: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """``work(*args, **kwargs)``, tried until it succeeds or the time is up.

        ``work`` must be one whole transaction (or a read). Calls nested inside it are not
        retried on their own: the outermost call runs again whole.
        """
        if getattr(self._active, "on", False):
            return work(*args, **kwargs)
        self._active.on = True
        try:
            deadline = time.monotonic() + self.seconds
            tries = 1
            while True:
                try:
                    return work(*args, **kwargs)
                except StoreUnwritable:
                    raise
                except StoreUnavailable as exc:
                    wait = BACKOFF.delay(tries - 1)
                    if time.monotonic() + wait > deadline:
                        if tries > 1:
                            raise StoreUnavailable(f"{exc} (still failing after {tries} tries)") from exc
                        raise
                    log.info("store operation failed (%s); trying again in %.2f s", exc, wait)
                    time.sleep(wait)
                    tries += 1
        finally:
            self._active.on = False


def retried(method: Callable[Concatenate[O, P], T]) -> Callable[Concatenate[O, P], T]:
    """Decorates a method that is one transaction (or one read) of an object whose
    ``Database`` is ``self._db``: each call runs through the database's :class:`Retry`."""

    @wraps(method)
    def call(self: O, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._db.retry(method, self, *args, **kwargs)  # type: ignore[attr-defined, no-any-return]

    return call


class Retried(Generic[O]):
    """``tables`` (an object each of whose public methods is one transaction) with every
    method call run through ``retry``; attributes that are not methods pass through."""

    def __init__(self, tables: O, retry: Retry) -> None:
        self._tables = tables
        self._retry = retry

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._tables, name)
        if name.startswith("_") or not callable(value):
            return value

        @wraps(value)
        def call(*args: Any, **kwargs: Any) -> Any:
            return self._retry(value, *args, **kwargs)

        setattr(self, name, call)  # found directly from now on
        return call
