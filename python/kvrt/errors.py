"""kvrt's typed errors as a small exception hierarchy.

Every error a kvrt node or libkvrt answers has a numeric code, a name, the
field or argument it is about (possibly empty) and a reason for a person.
The class says what a caller can do about it:

    KvrtError
      InvalidArgument   the call's arguments are wrong; nothing changed
      NotAuthorized     the principal may not use that namespace or route
      StaleError        a receipt, table version or generation moved on
      Incompatible      producer and consumer differ on the layout or model
      CapacityError     the host or the node ran out of something
      ConnectionLost    the session is gone: connect again
        NodeLost, SessionEnded, RpcTimeout
      InternalError     a broken invariant inside kvrt (a bug: report it)
"""

from __future__ import annotations


class KvrtError(Exception):
    """An error answered by a kvrt node or libkvrt.

    Attributes: ``code`` (kvrt's ErrorCode number), ``name`` (its name, e.g.
    ``"node_lost"``), ``field`` (what it is about; may be empty) and
    ``reason`` (what happened).
    """

    def __init__(self, code: int, name: str, field: str, reason: str) -> None:
        super().__init__(code, name, field, reason)
        self.code = int(code)
        self.name = name
        self.field = field
        self.reason = reason

    def __str__(self) -> str:
        where = f" [{self.field}]" if self.field else ""
        return f"{self.name} ({self.code}){where}: {self.reason}"


class InvalidArgument(KvrtError, ValueError):
    """Arguments refused before anything changed (shapes, ranges, ids)."""


class NotAuthorized(KvrtError, PermissionError):
    """The principal holds no grant for the namespace, or the grant ended."""


class StaleError(KvrtError):
    """A receipt, table version or namespace generation is no longer current."""


class Incompatible(KvrtError):
    """Producer and consumer differ on a field that must be equal (layout, model)."""


class CapacityError(KvrtError):
    """The host or the node could not back what was asked (memory, slots)."""


class ConnectionLost(KvrtError, ConnectionError):
    """The session cannot be used any more: connect again."""


class NodeLost(ConnectionLost):
    """The node exited, restarted or stopped answering; nothing it issued survives."""


class SessionEnded(ConnectionLost):
    """The node (or this process) closed the session."""


class RpcTimeout(ConnectionLost, TimeoutError):
    """No answer within the session's call timeout."""


class InternalError(KvrtError):
    """A broken invariant inside kvrt."""


# Codes with their own class; the rest go by range (services/common/error.hpp).
_BY_CODE = {
    202: StaleError,  # stale_generation
    303: StaleError,  # stale_physical
    310: StaleError,  # stale_table_version
    705: StaleError,  # stale_tree_version
    802: StaleError,  # stale_slot_generation
    1100: StaleError,  # executor_stale_snapshot
    1204: StaleError,  # authorization_stale_generation
    1301: StaleError,  # reuse_attempt_closed
    1303: StaleError,  # reuse_receipt_revoked
    200: Incompatible,  # invalid_manifest
    201: Incompatible,  # incompatible
    600: CapacityError,  # storage_exhausted
    804: CapacityError,  # slots_exhausted
    900: InternalError,  # invariant_violated
    1400: NotAuthorized,  # not_owner
    1402: RpcTimeout,
    1404: SessionEnded,
    1406: NodeLost,
}

_BY_RANGE = [
    (100, 199, InvalidArgument),
    (300, 499, InvalidArgument),
    (1200, 1299, NotAuthorized),
    (1401, 1499, ConnectionLost),
]


def from_code(code: int, name: str, field: str, reason: str) -> KvrtError:
    """The exception object for a kvrt error (not raised)."""
    cls = _BY_CODE.get(int(code))
    if cls is None:
        cls = next((c for lo, hi, c in _BY_RANGE if lo <= int(code) <= hi), KvrtError)
    return cls(code, name, field, reason)
