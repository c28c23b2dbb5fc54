"""kvrt: the Python session of a kvrt node (libkvrt's C ABI, api/kvrt.h).

A session is opened on a node with its descriptor file and a principal's
name; it is granted cache namespaces and then, per scheduler iteration,
looks prompts up (no side effect), admits requests (the exact hit and the
request's pool blocks), writes and commits rows, publishes full blocks and
releases finished requests. Pool memory is shared: ``kv_array`` and
``kv_tensor`` are zero-copy views of the node's pools in this process.

Units: tokens and rows are token positions; a block holds
``geometry.block_tokens`` rows; ``pool_view(g).row_bytes`` is one token's K
and V of cache group ``g`` in canonical order (K then V).

Errors raise ``kvrt.errors.KvrtError`` subclasses (code, name, field,
reason). Calls that talk to the node release the GIL; one session is used
by one thread at a time (calls from several threads are serialised).
"""

from __future__ import annotations

import enum

from . import errors
from ._kvrt import (
    ABI_VERSION,
    HANDOFF_ADMIT,
    HANDOFF_RELEASE,
    PROMPT_COMPUTED,
    PROMPT_MISSED,
    PROMPT_REUSED,
    Admission,
    Geometry,
    HandoffReceipt,
    PoolView,
    PromptItem,
    PromptSegment,
    Request,
    abi_version,
    copy_blocks,
    error_name,
)
from ._kvrt import Session as _Session
from .errors import (
    CapacityError,
    ConnectionLost,
    Incompatible,
    InternalError,
    InvalidArgument,
    KvrtError,
    NodeLost,
    NotAuthorized,
    RpcTimeout,
    SessionEnded,
    StaleError,
)

__all__ = [
    "ABI_VERSION", "Admission", "AdmissionStatus", "CapacityError", "ConnectionLost", "DType", "Geometry",
    "HANDOFF_ADMIT", "HANDOFF_RELEASE", "HandoffReceipt", "PROMPT_COMPUTED", "PROMPT_MISSED", "PROMPT_REUSED",
    "PromptItem", "PromptSegment",
    "Incompatible", "InternalError", "InvalidArgument", "KvrtError", "Memory", "NodeLost", "NotAuthorized", "PoolView",
    "ReleaseReason", "Request", "RpcTimeout", "Session", "SessionEnded", "StaleError", "abi_version",
    "check_statuses", "copy_blocks", "error_name", "errors", "STATUS_NO_ROOM", "STATUS_QUOTA_EXCEEDED", "STATUS_ROLLED_BACK",
]

if abi_version() != ABI_VERSION:
    raise ImportError(f"kvrt: libkvrt has ABI {abi_version()}, this package was built for {ABI_VERSION}")


class AdmissionStatus(enum.IntEnum):
    """``Admission.status`` (kvrt_admission_status)."""

    ADMITTED = 0  # the request holds its blocks
    NO_ROOM = 1  # no free block now (pool or namespace quota): try again later
    ROLLED_BACK = 2  # a fault rolled the allocation back: try again
    HIT_WITHDRAWN = 3  # a purge took the hit's blocks in between: admit again
    FAILED = 4  # refused with a typed error (Admission.error)


class ReleaseReason(enum.IntEnum):
    FINISHED = 0
    CANCELLED = 1
    PREEMPTED = 3


class Memory(enum.IntEnum):
    """Where a pool's bytes are (PoolView.memory)."""

    HOST = 0  # shared memory, mapped into this process
    CUDA = 1  # GPU memory on PoolView.device, imported through CUDA IPC


class DType(enum.IntEnum):
    """A pool's storage type (``PoolView.dtype``: K's and V's)."""

    FP32 = 0
    FP16 = 1
    BF16 = 2
    FP8_E4M3 = 3
    INT8 = 4


# Per-op statuses of the batched calls besides 0 and error codes: refusals
# that changed nothing (try again later).
STATUS_NO_ROOM = -1
STATUS_QUOTA_EXCEEDED = -2
STATUS_ROLLED_BACK = -3


def check_statuses(statuses, what: str = "op") -> None:
    """Raises the first per-op error of a batched call's statuses (codes > 0).

    The retryable refusals (negative statuses) are left to the caller."""
    for i, code in enumerate(statuses):
        if int(code) > 0:
            raise errors.from_code(int(code), error_name(int(code)), f"{what}[{i}]", f"{what} {i} was refused")


class Session(_Session):
    """A session on a kvrt node.

    ``Session(descriptor, principal, worker_name="engine", call_timeout_ms=0,
    middleman=False, token=None)``: the principal's token (hex) is ``token``,
    or else read from ``<descriptor>.tokens/<principal>.token``; the session opens on the
    node's session channel and maps its shared-memory pools. Closing it
    (``close()``, or leaving a ``with`` block) ends it on the node once no
    array view of its pools remains.
    """

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def stats(self, validate: bool = False) -> dict:
        """The node's statistics, as ``kvrt stats --json`` prints them: every
        owner's gauges and counters and the reuse funnel; ``validate``: every
        owner re-derives its invariants first (slower). The first call opens
        the node's statistics connection."""
        import json

        return json.loads(self.stats_json(validate))

    def kv_arrays(self, group: int = 0):
        """(K, V) of a cache group's pool as NumPy arrays, zero-copy, each of
        shape (blocks, block_tokens, layers, kv_heads, head_dim)."""
        return self.kv_array(group, 0), self.kv_array(group, 1)

    def kv_tensor(self, group: int, kind: int):
        """Tensor ``kind`` (0 = K, 1 = V) of a pool as a torch tensor sharing
        the pool's memory, shape (blocks, block_tokens, layers, kv_heads,
        head_dim): a CPU tensor over a shared-memory pool, a CUDA tensor over
        a GPU pool (imported from the node's CUDA IPC handles when the session
        opened); bfloat16 pools as torch.bfloat16. The tensor keeps the
        mapping alive past ``close()``."""
        import torch

        view = self.pool_view(group)
        if view.memory == Memory.CUDA:
            interface = self.cuda_array_interface(group, kind)
            tensor = torch.as_tensor(_CudaPoolTensor(interface), device=f"cuda:{interface['device']}")
        else:
            tensor = torch.from_numpy(self.kv_array(group, kind))
        if view.dtype[kind] == DType.BF16:
            tensor = tensor.view(torch.bfloat16)
        return tensor


class _CudaPoolTensor:
    """A GPU pool tensor as torch imports it (__cuda_array_interface__);
    torch holds this object, and with it the pools' owner, for the tensor's
    life."""

    def __init__(self, interface: dict) -> None:
        self._owner = interface.pop("owner")
        interface.pop("device")
        self.__cuda_array_interface__ = interface
