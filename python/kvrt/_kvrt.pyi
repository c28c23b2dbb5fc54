"""Type stubs of kvrt._kvrt, the pybind11 binding of libkvrt (api/kvrt.h).

Units: tokens and rows are token positions; a block holds
Geometry.block_tokens rows; bytes are bytes. Request ids, reuse attempts
and block ids are the node's, valid in the session that received them.
"""

from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

from .errors import KvrtError

TokenIds = Union[Sequence[int], npt.NDArray[np.integer]]
Ids = Union[Sequence[int], npt.NDArray[np.integer]]

ABI_VERSION: int

def abi_version() -> int:
    """The ABI version of the libkvrt this module loaded."""

def error_name(code: int) -> str:
    """The name of a kvrt error code ("unknown" for none kvrt has)."""

def copy_blocks(dst: npt.NDArray[Any], dst_blocks: Sequence[int], src: npt.NDArray[Any], src_blocks: Sequence[int]) -> None:
    """dst[dst_blocks[i]] = src[src_blocks[i]] for every i [blocks: indices
    of the first axis], one memmove per block with the GIL released. Each
    block of both arrays must be one contiguous run of the same bytes;
    InvalidArgument otherwise, or for an index outside its array (nothing
    is copied then)."""

class Request:
    """One prompt to look up or admit: its granted namespace, its token ids
    (one-dimensional, each fitting int32), and its identity extras (an
    adapter / LoRA id, the request's cache salt; "" for none). Requests
    reuse each other's blocks only where namespace and extras agree."""

    namespace_name: str
    adapter_id: str
    cache_salt: str
    def __init__(self, namespace_name: str, tokens: TokenIds, adapter_id: str = "", cache_salt: str = "") -> None: ...
    @property
    def tokens(self) -> npt.NDArray[np.int32]:
        """The prompt [tokens] (a copy)."""
    def __len__(self) -> int:
        """Prompt length [tokens]."""

HANDOFF_ADMIT: int
HANDOFF_RELEASE: int

class HandoffReceipt:
    """What the radix owner froze for a scheduler (0x08G)."""
    status: int
    lease: int
    """Nonzero: the matched path's lock, to admit or release."""
    hit_tokens: int
    suffix: Tuple[int, int]
    """The prompt rows still to compute [tokens)."""
    new_physical_blocks: int
    new_useful_kv_bytes: int
    new_physical_capacity_bytes: int
    tree_version: int

PROMPT_COMPUTED: int
PROMPT_REUSED: int
PROMPT_MISSED: int

class PromptItem:
    """One item of a prompt written against a prompt schema (0x0CB): a
    declared module with its parameters, or free text (module_id "") from
    position gap_begin."""
    tokens: list[int]
    module_id: str
    parameters: dict[str, str]
    gap_begin: int
    use_cache: bool
    def __init__(self, tokens: TokenIds, module_id: str = "", parameters: dict[str, str] = ...,
                 gap_begin: int = 0, use_cache: bool = True) -> None: ...

class PromptSegment:
    """One segment of an assembled prompt, in declared position order."""
    item: int
    """The items[] entry it is."""
    position_begin: int
    """Its positions are [position_begin, position_begin + tokens)."""
    tokens: int
    outcome: int
    """PROMPT_COMPUTED (free text), PROMPT_REUSED (copy_prompt_module it) or PROMPT_MISSED."""
    miss_reason: int
    """PROMPT_MISSED: the reuse funnel's reason number; else -1."""
    module: int
    """PROMPT_REUSED: the session's handle of the leased module; else 0."""

class Admission:
    """What admission answered for one request."""

    status: int
    """kvrt.AdmissionStatus: ADMITTED, NO_ROOM, ROLLED_BACK, HIT_WITHDRAWN or FAILED."""
    request: int
    """The request's id while admitted (other calls name it)."""
    hit_tokens: int
    """Prompt rows reused from the index: do not compute them [rows]."""
    reuse_attempt: int
    """Nonzero: end it with Session.end_reuse once the hit's rows were read."""
    reuse_rejection: int
    """Why nothing was reused (kvrt's RejectionReason); -1: a hit, or no lookup."""
    blocks: int
    """Logical blocks of the request per cache group [blocks]."""
    @property
    def admitted(self) -> bool: ...
    @property
    def error(self) -> Optional[KvrtError]:
        """The typed error of a FAILED or HIT_WITHDRAWN admission (not raised)."""

class Geometry:
    groups: int
    """Cache groups, one pool each."""
    block_tokens: int
    """Rows per block [tokens]."""
    capacity_blocks: int
    """Blocks per pool [blocks]."""

class PoolView:
    cache_group: int
    memory: int
    """kvrt.Memory: HOST (shared memory, mapped) or CUDA (GPU memory, imported)."""
    device: int
    """The CUDA device of a CUDA pool."""
    first_layer: int
    """The group holds model layers [first_layer, first_layer + layers)."""
    bytes: int
    """The pool segment's size [bytes]."""
    row_bytes: int
    """One token's K and V of this group [bytes]."""
    k_row_bytes: int
    """The K part of a row [bytes]."""
    layers: int
    kv_heads: int
    head_dim: int
    element_bytes: int
    """One K element [bytes]."""
    @property
    def dtype(self) -> Tuple[int, int]:
        """kvrt.DType of K and of V."""

class Session:
    def __init__(
        self,
        descriptor: str,
        principal: str,
        worker_name: str = "engine",
        call_timeout_ms: int = 0,
        middleman: bool = False,
        token: Optional[str] = None,
    ) -> None:
        """Opens a session on the node whose descriptor file is `descriptor`,
        as `principal`, with its token (hex) `token`, or else the one in
        <descriptor>.tokens/<principal>.token.
        call_timeout_ms: a call with no answer raises RpcTimeout; 0: 30000 [ms]."""
    def close(self) -> None:
        """Ends the session (on the node once no array view of its pools remains)."""
    @property
    def closed(self) -> bool: ...
    @property
    def id(self) -> int: ...
    @property
    def principal(self) -> str: ...
    @property
    def geometry(self) -> Geometry: ...
    def authorize(self, namespace_name: str) -> int:
        """Grants the namespace at its current generation; returns the generation."""
    def lookup(self, requests: Sequence[Request]) -> Tuple[npt.NDArray[np.uint32], npt.NDArray[np.int32]]:
        """(hit_tokens [tokens], statuses) per request: the rows an admission
        would reuse now, found with no side effect on the node. A status is
        0 or an error code (kvrt.error_name) for that request alone."""
    def handoff(self, requests: Sequence[Request], request_ids: Ids,
                free_tail_rows: Optional[Ids] = None) -> list[HandoffReceipt]:
        """The scheduler handoff (a node with prefix_index = "radix"): each
        request's match with its path locked while the scheduler decides.
        Every receipt with a lease must be disposed of (dispose_handoffs):
        admitted, then released once the admission holds its blocks, or
        released when the request is rejected or deferred."""
    def dispose_handoffs(self, leases: Ids, dispositions: Ids) -> npt.NDArray[np.int32]:
        """HANDOFF_ADMIT or HANDOFF_RELEASE per lease; a status per lease
        (705 stale_tree_version: release it and ask again; 708 unknown_lease)."""
    def save_session(self, namespace_name: str, label: str, tokens: TokenIds, request: int,
                     position_contract: str = "") -> None:
        """The session tier (a node with [tier]): saves rows [0, len(tokens))
        of the admitted request (committed) under `label`."""
    def resume_session(self, namespace_name: str, label: str, prompt: TokenIds, request: int,
                       position_contract: str = "") -> Tuple[int, int]:
        """(rows, refusal): the saved history written into the admitted
        request's rows [0, rows), refusal -1; or (0, why) when the node's
        identity of the save no longer holds (0 no_saved_history, 1
        namespace_rotated, 2 semantic_changed, 3 layout_changed, 4
        position_contract_changed, 5 history_not_prefix, 6 incomplete_save)."""
    def register_prompt_schema(self, namespace_name: str, schema_toml: str) -> int:
        """Registers a prompt schema (TOML) for the namespace; returns its generation."""
    def assemble_prompt(self, namespace_name: str, schema_id: str, schema_generation: int,
                        items: Sequence[PromptItem]) -> list[PromptSegment]:
        """The node's assembly: one segment per item in declared position
        order, each reused module leased to this session until
        copy_prompt_module or release_prompt_module."""
    def copy_prompt_module(self, module: int, request: int, row_begin: int) -> None:
        """Copies a reused module's rows into rows [row_begin, +tokens) of an
        admitted request, then gives its leases back."""
    def release_prompt_module(self, module: int) -> None:
        """Gives a reused module's leases back without copying it."""
    def publish_prompt_module(self, namespace_name: str, schema_id: str, schema_generation: int, module_id: str,
                              tokens: TokenIds, request: int, parameters: dict[str, str] = ...) -> None:
        """Publishes a module computed alone at its declared positions: rows
        [0, len(tokens)) of the admitted request, committed."""
    def admit(self, requests: Sequence[Request], reuse: bool = True) -> list[Admission]:
        """One reuse message and one allocation for the batch, in order."""
    def block_table(self, request: int, group: int = 0) -> npt.NDArray[np.uint32]:
        """The request's pool blocks of a cache group, logical block order."""
    def commit_rows(self, requests: Ids, valid_rows: Ids) -> npt.NDArray[np.int32]:
        """Rows [0, valid_rows[i]) of requests[i] are written; a status per op."""
    def append(self, requests: Ids) -> Tuple[npt.NDArray[np.uint32], npt.NDArray[np.int32]]:
        """One more position per request: (the new position [tokens], status);
        kvrt.STATUS_NO_ROOM / STATUS_QUOTA_EXCEEDED: try again later."""
    def fork(self, parents: Ids) -> Tuple[npt.NDArray[np.uint64], npt.NDArray[np.int32]]:
        """One child per parent, sharing all its parent's blocks (an append
        into a shared partial block copies it first): (child ids, 0 where
        refused; a status per op). Children are requests like any other."""
    def stats_json(self, validate: bool = False) -> str:
        """The node's statistics as JSON text (Session.stats parses it)."""
    def release(self, requests: Ids, reason: int = 0) -> npt.NDArray[np.int32]:
        """Requests finished (kvrt.ReleaseReason), a status per op."""
    def publish(self, request: int, namespace_name: str, tokens: TokenIds, first_block: int, end_block: int) -> None:
        """Publishes full blocks [first_block, end_block) (rows committed;
        tokens from position 0 cover end_block blocks)."""
    def end_reuse(
        self,
        attempt: int,
        executed: bool,
        request: int = 0,
        tokens: Optional[TokenIds] = None,
        successor_end_block: int = 0,
    ) -> None:
        """Ends an admitted request's reuse attempt (queued until the next
        admit or flush_reuse_ends); a successor publishes the request's
        blocks [0, successor_end_block). StaleError for an attempt not open."""
    def flush_reuse_ends(self) -> None: ...
    def pool_view(self, group: int = 0) -> PoolView: ...
    def read_rows(self, group: int, block: int, first_row: int, rows: int) -> npt.NDArray[np.uint8]:
        """Rows of a pool block copied out in canonical order (K then V):
        shape (rows, row_bytes)."""
    def write_rows(self, group: int, block: int, first_row: int, data: npt.ArrayLike) -> None:
        """Whole canonical rows from a C-contiguous buffer into a pool block."""
    def kv_array(self, group: int, kind: int) -> np.ndarray:
        """K (kind 0) or V (1) of a pool, zero-copy: shape (blocks,
        block_tokens, layers, kv_heads, head_dim), the pool's strides.
        A GPU pool raises Incompatible (Session.kv_tensor gives it)."""
    def cuda_array_interface(self, group: int, kind: int) -> dict:
        """K or V of a GPU pool as a __cuda_array_interface__ (version 3)
        dict with "device" and an "owner" that keeps the pools alive;
        Session.kv_tensor wraps it. A host pool raises Incompatible."""
