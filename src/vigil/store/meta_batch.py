"""Batches of ``state_meta`` compare-and-sets, as every backend checks and encodes them before
writing anything (see ``SessionStore.compare_and_set_many``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from vigil.store.checks import check_key
from vigil.store.records import MetaSwap
from vigil.store.rows import canonical_json


@dataclass(frozen=True, slots=True)
class EncodedSwap:
    """A :class:`MetaSwap` with its values as canonical JSON text (``None``: absent)."""

    key: str
    want: str | None
    new: str | None
    also: tuple[tuple[str, str | None], ...]


def encode_swaps(swaps: Sequence[MetaSwap]) -> list[EncodedSwap]:
    """Check and encode a batch; ``ValueError`` for a bad or repeated key, nothing written."""
    encoded, seen = [], set()
    for swap in swaps:
        keys = [swap.key, *(key for key, _ in swap.also)]
        for key in keys:
            check_key(key)
            if key in seen:
                raise ValueError(f"the key {key!r} appears twice in one compare-and-set batch")
            seen.add(key)
        encoded.append(
            EncodedSwap(
                swap.key,
                _encode(swap.expected),
                _encode(swap.new),
                tuple((key, _encode(value)) for key, value in swap.also),
            )
        )
    return encoded


def _encode(value: object) -> str | None:
    return None if value is None else canonical_json(value)
