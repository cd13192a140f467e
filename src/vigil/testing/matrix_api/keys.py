"""The end-to-end encryption part of the fake homeserver: device keys and one-time keys as
clients upload them (``/keys/upload``), hand them out (``/keys/query``, ``/keys/claim``), and
to-device messages (``/sendToDevice``) queued for the recipient's next ``/sync``, with the
``device_lists.changed`` a client needs to learn of a new device. The server never reads what
it relays: clients encrypt and decrypt (matrix-nio with its ``e2e`` extra on both sides).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vigil.testing.matrix_api.state import Account, HomeserverState

JSON = dict[str, Any]


class DeviceKeys:
    """Keys and to-device messages, under the homeserver state's lock."""

    def __init__(self, state: "HomeserverState") -> None:
        self.state = state
        self.device_keys: dict[str, dict[str, JSON]] = {}
        self.one_time: dict[tuple[str, str], dict[str, Any]] = {}
        self.changes: list[tuple[int, str]] = []
        """(position, user) whenever a user's devices changed."""
        self.to_device: list[tuple[int, str, str, JSON]] = []
        """(position, user, device, event) waiting for that device's sync."""

    def upload(self, account: "Account", body: JSON) -> JSON:
        with self.state.lock:
            keys = body.get("device_keys")
            if isinstance(keys, dict):
                self.device_keys.setdefault(account.user_id, {})[account.device_id] = keys
                self.changes.append((self.state.next_position(), account.user_id))
            one_time = body.get("one_time_keys")
            if isinstance(one_time, dict):
                self.one_time.setdefault((account.user_id, account.device_id), {}).update(one_time)
            return {"one_time_key_counts": self.counts(account)}

    def counts(self, account: "Account") -> dict[str, int]:
        with self.state.lock:
            keys = self.one_time.get((account.user_id, account.device_id), {})
            return {"signed_curve25519": sum(1 for key in keys if key.startswith("signed_curve25519:"))}

    def query(self, body: JSON) -> JSON:
        wanted = body.get("device_keys") or {}
        with self.state.lock:
            return {"device_keys": {user: dict(self.device_keys.get(user, {})) for user in wanted}, "failures": {}}

    def claim(self, body: JSON) -> JSON:
        found: dict[str, dict[str, JSON]] = {}
        with self.state.lock:
            for user, devices in (body.get("one_time_keys") or {}).items():
                for device in devices:
                    keys = self.one_time.get((user, device), {})
                    key_id = next(iter(keys), None)
                    if key_id is not None:
                        found.setdefault(user, {})[device] = {key_id: keys.pop(key_id)}
        return {"one_time_keys": found, "failures": {}}

    def send(self, account: "Account", kind: str, body: JSON) -> None:
        with self.state.lock:
            for user, devices in (body.get("messages") or {}).items():
                for device, content in devices.items():
                    targets = list(self.device_keys.get(user, {})) if device == "*" else [device]
                    for target in targets:
                        event = {"sender": account.user_id, "type": kind, "content": content}
                        self.to_device.append((self.state.next_position(), user, target, event))

    def for_sync(self, account: "Account", since: int, shares: set[str]) -> JSON:
        """The encryption parts of a sync response for ``account`` since ``since``."""
        with self.state.lock:
            to_device = [event for position, user, device, event in self.to_device
                         if position > since and user == account.user_id and device == account.device_id]
            changed = sorted({user for position, user in self.changes if position > since and user in shares})
            return {"to_device": {"events": to_device}, "device_lists": {"changed": changed, "left": []},
                    "device_one_time_keys_count": self.counts(account)}

    def pending(self, account: "Account", since: int, shares: set[str]) -> bool:
        """Whether a sync since ``since`` would bring ``account`` something of these."""
        with self.state.lock:
            return (any(position > since and user == account.user_id and device == account.device_id
                        for position, user, device, _event in self.to_device)
                    or any(position > since and user in shares for position, user in self.changes))
