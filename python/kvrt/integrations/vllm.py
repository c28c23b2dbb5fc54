"""kvrt as a vLLM KV connector: a node-level, exact, shared K/V tier.

Several vLLM engines on one node save the full prompt blocks they compute
into a kvrt node's pools and load each other's prefixes from there, with
kvrt's identity (namespaces, cache salt, LoRA), isolation and receipts.

Launch vLLM with (docs/integrations.md)::

    --kv-transfer-config '{"kv_connector": "KvrtConnector",
        "kv_connector_module_path": "kvrt.integrations.vllm",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {"descriptor": "/run/kvrt/node.json",
                                      "principal": "vllm-0",
                                      "namespace": "local/default"}}'

What each side does:

scheduler  ``get_num_new_matched_tokens`` asks the node how much of the
           prompt its namespace holds, with no side effect (a peek);
           ``update_state_after_alloc`` admits the request into kvrt: the
           executable-reuse receipt's blocks become the request's (leased,
           so no eviction can take them before the load) and kvrt allocates
           pool blocks for the rest of the prompt; ``build_connector_meta``
           names, per request, the blocks to load (kvrt -> engine) and the
           prompt blocks that become full in this step (engine -> kvrt);
           ``request_finished`` commits the saved rows, publishes them (as
           the reuse attempt's successor when there was a hit) and releases
           the kvrt request. Saves are synchronous in the forward, so they
           are complete when the scheduler sees the step's output: the
           engine's blocks may be freed at once.
worker     ``register_kv_caches`` maps every attention layer to its kvrt
           cache group and checks the shapes and dtypes against the node's
           pools; ``start_load_kv`` copies the hit blocks of every layer
           from kvrt's pools into the engine's paged tensors;
           ``save_kv_layer`` copies a layer's newly full prompt blocks into
           the kvrt blocks the scheduler named; ``get_block_ids_with_load_errors``
           reports the engine blocks a load could not fill, which vLLM then
           recomputes.

When the node is unreachable or dies, the connector reports no matches and
saves nothing (the engine recomputes, exactly as without a connector) and
tries to connect again every ``reconnect_interval_s``.

Requests with multimodal inputs are neither looked up nor saved: libkvrt's
request identity carries the adapter and the cache salt, not media.

When vLLM is importable the connector subclasses its real
``KVConnectorBase_V1``; otherwise a stand-in with the same interface, so
that engines built to vLLM's calling convention (tests/python/) use it.
"""

from __future__ import annotations

import enum
import logging
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

import numpy as np

import kvrt
from kvrt.integrations._tier import SessionLink, TierConfig

logger = logging.getLogger("kvrt.vllm")

try:  # pragma: no cover - exercised only where vLLM is installed
    from vllm.distributed.kv_transfer.kv_connector.v1.base import (
        KVConnectorBase_V1,
        KVConnectorMetadata,
        KVConnectorRole,
    )

    HAVE_VLLM = True
except ImportError:
    HAVE_VLLM = False

    class KVConnectorRole(enum.Enum):
        SCHEDULER = 0
        WORKER = 1

    class KVConnectorMetadata:
        """vLLM's scheduler -> worker metadata base (stand-in)."""

    class KVConnectorBase_V1:
        """The part of vLLM's KVConnectorBase_V1 a connector inherits (stand-in)."""

        def __init__(self, vllm_config, role, kv_cache_config=None):
            self._connector_metadata = None
            self._vllm_config = vllm_config
            if getattr(vllm_config, "kv_transfer_config", None) is None:
                raise ValueError("kv_transfer_config must be set for KVConnectorBase_V1")
            self._kv_transfer_config = vllm_config.kv_transfer_config
            self._kv_cache_config = kv_cache_config
            self._role = role

        @property
        def role(self):
            return self._role

        def bind_connector_metadata(self, connector_metadata):
            self._connector_metadata = connector_metadata

        def clear_connector_metadata(self):
            self._connector_metadata = None

        def _get_connector_metadata(self):
            assert self._connector_metadata is not None
            return self._connector_metadata

        def has_connector_metadata(self):
            return self._connector_metadata is not None

        def shutdown(self):
            return None


# ---- what the scheduler side tells the worker side ------------------------


@dataclass
class BlockCopy:
    """One request's blocks to copy between the engine and kvrt, in logical
    block order: engine_blocks[i] <-> kvrt_blocks[g][i] in every group g."""

    request_id: str
    engine_blocks: list[int]
    kvrt_blocks: list[list[int]]


@dataclass
class KvrtConnectorMetadata(KVConnectorMetadata):
    loads: list[BlockCopy] = field(default_factory=list)
    saves: list[BlockCopy] = field(default_factory=list)
    # Engine blocks of external tokens kvrt could not provide (the hit
    # shrank between the lookup and the admission, or the node is gone):
    # the worker reports them as load errors so that vLLM recomputes them.
    failed_loads: list[int] = field(default_factory=list)


# ---- the scheduler side's view of a request --------------------------------


@dataclass
class _Tracked:
    kvrt_request: int
    session_generation: int
    prompt: list[int]
    hit_blocks: int  # kvrt blocks the admission reused [blocks]
    saved_blocks: int  # prompt blocks named for saving so far [blocks]
    reuse_attempt: int
    kvrt_blocks: list[list[int]]  # per group, the kvrt request's table
    engine_blocks: list[int] = field(default_factory=list)
    executed: bool = False
    # A load of this request failed at admission: the next step computes
    # from garbage past the failed blocks (vLLM learns of the failure only
    # after it), so that step saves nothing.
    hold_saves: bool = False


def _prompt_of(request) -> list[int]:
    return list(getattr(request, "prompt_token_ids", None) or [])


def _identity_of(request) -> tuple[str, str]:
    """(adapter id, cache salt) of a vLLM request: its LoRA and cache_salt."""
    lora = getattr(request, "lora_request", None)
    adapter = ""
    if lora is not None:
        adapter = str(getattr(lora, "lora_name", None) or getattr(lora, "lora_int_id", ""))
    salt = getattr(request, "cache_salt", None) or ""
    return adapter, salt


def _has_media(request) -> bool:
    return bool(getattr(request, "mm_features", None) or getattr(request, "mm_positions", None))


def _first_group_ids(blocks) -> list[int]:
    """Engine block ids of the first KV-cache group from a KVCacheBlocks, a
    tuple of lists, or a list."""
    if hasattr(blocks, "get_block_ids"):
        blocks = blocks.get_block_ids()
    if blocks and isinstance(blocks[0], (list, tuple)):
        return list(blocks[0])
    return list(blocks or [])


_LAYER_INDEX = re.compile(r"(?:^|\.)(?:layers|h|blocks|layer)\.(\d+)(?:\.|$)")


def layer_index(layer_name: str) -> int:
    """The model layer of a vLLM attention layer name ("model.layers.7.self_attn.attn" -> 7)."""
    m = _LAYER_INDEX.search(layer_name)
    if m is None:
        raise kvrt.InvalidArgument(100, "invalid_argument", "layer_name",
                                   f"no layer index in the attention layer name {layer_name!r}")
    return int(m.group(1))


class KvrtConnector(KVConnectorBase_V1):
    """vLLM's KVConnectorBase_V1 over a kvrt node (module docstring)."""

    def __init__(self, vllm_config, role, kv_cache_config=None):
        super().__init__(vllm_config, role, kv_cache_config)
        self._config = TierConfig.from_extra(
            getattr(vllm_config.kv_transfer_config, "kv_connector_extra_config", None), "kv_connector_extra_config")
        self._block_size = int(vllm_config.cache_config.block_size)
        is_scheduler = role == KVConnectorRole.SCHEDULER
        self._link = SessionLink(self._config, f"{self._config.worker_name}-{'scheduler' if is_scheduler else 'worker'}",
                           self._config.namespace if is_scheduler else None)
        # scheduler side
        self._tracked: dict[str, _Tracked] = {}
        # The locally computed tokens vLLM named in the lookup: where the
        # external tokens of update_state_after_alloc start.
        self._local_computed: dict[str, int] = {}
        self._loads: list[BlockCopy] = []
        self._failed_loads: list[int] = []
        # worker side
        self._layers: dict[str, "_LayerCopy"] = {}
        self._load_errors: set[int] = set()
        self._failed_this_step: set[str] = set()  # requests whose load failed: nothing of theirs is saved
        self.counters = {"lookups": 0, "hit_tokens": 0, "loaded_blocks": 0, "saved_blocks": 0,
                         "published_blocks": 0, "load_error_blocks": 0, "node_errors": 0}

    # ==== scheduler side ====================================================

    def _session(self) -> Optional[kvrt.Session]:
        s = self._link.get()
        if s is not None and s.geometry.block_tokens != self._block_size:
            raise kvrt.Incompatible(201, "incompatible", "block_size",
                                    f"vLLM's block size is {self._block_size} tokens, the kvrt node's "
                                    f"{s.geometry.block_tokens}: they must be equal")
        return s

    def _request(self, request, prompt: list[int]) -> kvrt.Request:
        adapter, salt = _identity_of(request)
        return kvrt.Request(self._config.namespace, prompt, adapter_id=adapter, cache_salt=salt)

    def get_num_new_matched_tokens(self, request, num_computed_tokens: int) -> tuple[Optional[int], bool]:
        self._local_computed[request.request_id] = num_computed_tokens
        prompt = _prompt_of(request)
        if not prompt or _has_media(request):
            return 0, False
        s = self._session()
        if s is None:
            return 0, False
        try:
            hits, statuses = s.lookup([self._request(request, prompt)])
        except kvrt.ConnectionLost as e:
            self._link.lost(e)
            self.counters["node_errors"] += 1
            return 0, False
        self.counters["lookups"] += 1
        if int(statuses[0]) != 0:
            logger.warning("kvrt: lookup of %s refused: %s", request.request_id, kvrt.error_name(int(statuses[0])))
            return 0, False
        hit = int(hits[0])
        return max(0, hit - num_computed_tokens), False

    def update_state_after_alloc(self, request, blocks, num_external_tokens: int) -> None:
        req_id = request.request_id
        old = self._tracked.pop(req_id, None)
        if old is not None:  # preempted and scheduled again: start over
            self._end(req_id, old, publish=False)
        prompt = _prompt_of(request)
        engine_blocks = _first_group_ids(blocks)
        P = self._block_size
        first = self._local_computed.pop(req_id, 0) // P
        external = range(first, first + num_external_tokens // P)
        s = None if not prompt or _has_media(request) else self._session()
        if s is None:
            self._fail_loads(engine_blocks, external)
            return
        try:
            adm = s.admit([self._request(request, prompt)])[0]
            if not adm.admitted:
                logger.info("kvrt: %s not admitted (%s); it runs without the shared tier",
                            req_id, kvrt.AdmissionStatus(adm.status).name)
                self._fail_loads(engine_blocks, external)
                return
            tables = [list(s.block_table(adm.request, g)) for g in range(s.geometry.groups)]
        except kvrt.ConnectionLost as e:
            self._link.lost(e)
            self.counters["node_errors"] += 1
            self._fail_loads(engine_blocks, external)
            return
        hit_blocks = adm.hit_tokens // P
        t = _Tracked(adm.request, self._link.generation, prompt, hit_blocks, hit_blocks, adm.reuse_attempt, tables,
                     engine_blocks)
        self._tracked[req_id] = t
        self.counters["hit_tokens"] += adm.hit_tokens
        loadable = [j for j in external if j < hit_blocks and j < len(engine_blocks)]
        if loadable:
            self._loads.append(BlockCopy(req_id, [engine_blocks[j] for j in loadable],
                                         [[table[j] for j in loadable] for table in tables]))
        # External tokens past what the admission holds (the hit shrank
        # since the lookup): vLLM recomputes them.
        short = [j for j in external if j >= hit_blocks]
        self._fail_loads(engine_blocks, short)
        t.hold_saves = bool(short)

    def _fail_loads(self, engine_blocks: list[int], positions: Iterable[int]) -> None:
        for j in positions:
            if j < len(engine_blocks):
                self._failed_loads.append(engine_blocks[j])

    def build_connector_meta(self, scheduler_output) -> KvrtConnectorMetadata:
        meta = KvrtConnectorMetadata(loads=self._loads, failed_loads=self._failed_loads)
        self._loads, self._failed_loads = [], []
        for load in meta.loads:
            if load.request_id in self._tracked:
                self._tracked[load.request_id].executed = True
        scheduled = scheduler_output.num_scheduled_tokens
        for new in scheduler_output.scheduled_new_reqs:
            t = self._tracked.get(new.req_id)
            if t is None:
                continue
            t.engine_blocks = _first_group_ids(new.block_ids)
            self._plan_save(meta, new.req_id, t, new.num_computed_tokens + scheduled.get(new.req_id, 0))
        cached = scheduler_output.scheduled_cached_reqs
        resumed = set(getattr(cached, "resumed_req_ids", ()) or ())
        for i, req_id in enumerate(cached.req_ids):
            t = self._tracked.get(req_id)
            if t is None:
                continue
            new_ids = cached.new_block_ids[i]
            if new_ids is not None:
                ids = _first_group_ids(new_ids)
                t.engine_blocks = ids if req_id in resumed else t.engine_blocks + ids
            self._plan_save(meta, req_id, t, cached.num_computed_tokens[i] + scheduled.get(req_id, 0))
        return meta

    def _plan_save(self, meta: KvrtConnectorMetadata, req_id: str, t: _Tracked, computed_after: int) -> None:
        """Names the prompt blocks that are full once this step ran and were
        not named before: the worker copies them in this step's forward."""
        if t.hold_saves:
            t.hold_saves = False
            return
        full = min(computed_after, len(t.prompt)) // self._block_size
        full = min(full, len(t.engine_blocks), len(t.kvrt_blocks[0]))
        if full <= t.saved_blocks:
            return
        span = range(t.saved_blocks, full)
        meta.saves.append(BlockCopy(req_id, [t.engine_blocks[j] for j in span],
                                    [[table[j] for j in span] for table in t.kvrt_blocks]))
        t.saved_blocks = full
        t.executed = True

    def update_connector_output(self, connector_output) -> None:
        """Blocks a load could not fill (worker side): vLLM recomputes the
        request from the first of them, so what this connector named for
        saving from there on is named again once it is recomputed."""
        invalid = set(getattr(connector_output, "invalid_block_ids", None) or ())
        if not invalid:
            return
        for t in self._tracked.values():
            bad = [j for j, b in enumerate(t.engine_blocks) if b in invalid]
            if bad:
                t.saved_blocks = min(t.saved_blocks, max(bad[0], t.hit_blocks))

    def request_finished(self, request, block_ids: list[int]) -> tuple[bool, Optional[dict[str, Any]]]:
        self._local_computed.pop(request.request_id, None)
        t = self._tracked.pop(request.request_id, None)
        if t is not None:
            self._end(request.request_id, t, publish=True)
        return False, None

    def _end(self, req_id: str, t: _Tracked, publish: bool) -> None:
        """Commits and publishes what was saved, ends the reuse attempt and
        releases the kvrt request."""
        s = self._link.session
        if s is None or t.session_generation != self._link.generation:
            return  # the session that held it is gone, and the node released it
        P = self._block_size
        try:
            saved = t.saved_blocks if publish else t.hit_blocks
            new_blocks = saved > t.hit_blocks
            if new_blocks:
                kvrt.check_statuses(s.commit_rows([t.kvrt_request], [saved * P]), "commit_rows")
            if t.reuse_attempt:
                if new_blocks:
                    s.end_reuse(t.reuse_attempt, True, t.kvrt_request, t.prompt[:saved * P], saved)
                else:
                    s.end_reuse(t.reuse_attempt, t.executed)
                s.flush_reuse_ends()
            elif new_blocks:
                s.publish(t.kvrt_request, self._config.namespace, t.prompt[:saved * P], 0, saved)
            if new_blocks:
                self.counters["published_blocks"] += saved - t.hit_blocks
            kvrt.check_statuses(s.release([t.kvrt_request], kvrt.ReleaseReason.FINISHED), "release")
        except kvrt.ConnectionLost as e:
            self._link.lost(e)
            self.counters["node_errors"] += 1
        except kvrt.KvrtError as e:
            # The engine's output is unaffected (its own blocks hold the
            # rows); only the shared tier misses this request's blocks.
            logger.warning("kvrt: ending %s failed: %s", req_id, e)
            try:
                s.release([t.kvrt_request], kvrt.ReleaseReason.CANCELLED)
            except kvrt.KvrtError:
                pass

    def take_events(self) -> Iterable[Any]:
        return ()

    # ==== worker side =======================================================

    def register_kv_caches(self, kv_caches: dict[str, Any]) -> None:
        s = self._link.get()
        if s is None:
            logger.warning("kvrt: the worker has no session; loads fail over to recomputation, nothing is saved")
            return
        self._layers = _map_layers(s, kv_caches, self._block_size)

    def start_load_kv(self, forward_context, **kwargs: Any) -> None:
        meta = self._get_connector_metadata()
        self._failed_this_step = set()
        self._load_errors.update(meta.failed_loads)
        self.counters["load_error_blocks"] += len(meta.failed_loads)
        for load in meta.loads:
            try:
                if not self._layers:
                    raise kvrt.SessionEnded(1404, "session_ended", "session", "the worker has no kvrt session")
                for layer in self._layers.values():
                    layer.load(load)
                self.counters["loaded_blocks"] += len(load.engine_blocks)
            except (kvrt.KvrtError, IndexError, RuntimeError) as e:
                logger.warning("kvrt: loading %s failed (%s); vLLM recomputes its blocks", load.request_id, e)
                self._load_errors.update(load.engine_blocks)
                self._failed_this_step.add(load.request_id)
                self.counters["load_error_blocks"] += len(load.engine_blocks)

    def wait_for_layer_load(self, layer_name: str) -> None:
        return None  # start_load_kv copied every layer

    def save_kv_layer(self, layer_name: str, kv_layer, attn_metadata, **kwargs: Any) -> None:
        layer = self._layers.get(layer_name)
        if layer is None or not self.has_connector_metadata():
            return
        for save in self._get_connector_metadata().saves:
            if save.request_id in self._failed_this_step:
                continue
            layer.save(save, kv_layer)
            if layer.is_first:
                self.counters["saved_blocks"] += len(save.engine_blocks)

    def wait_for_save(self) -> None:
        return None  # save_kv_layer copied synchronously

    def get_finished(self, finished_req_ids: set[str]) -> tuple[Optional[set[str]], Optional[set[str]]]:
        return None, None

    def get_block_ids_with_load_errors(self) -> set[int]:
        errors, self._load_errors = self._load_errors, set()
        return errors

    def shutdown(self) -> None:
        self._layers = {}
        self._link.close()


# ---- copying a layer's blocks --------------------------------------------


class _LayerCopy:
    """One attention layer: its engine cache (2, blocks, block_size, heads,
    head_dim) and its rows in the kvrt pools of its cache group, as
    (blocks, block_tokens, heads, head_dim) arrays.

    Host memory (shared-memory pools, a CPU engine): a block of one layer is
    one contiguous run on both sides, so a load or save is one memmove per
    block and kind (kvrt.copy_blocks), with no temporary. GPU memory (GPU
    pools, a CUDA engine): torch index copies on the device."""

    def __init__(self, engine, pool_k, pool_v, group: int, local_layer: int, is_first: bool) -> None:
        self.engine = engine
        self.on_host = isinstance(pool_k, np.ndarray) and engine.device.type == "cpu"
        if self.on_host:
            self.engine_rows = (_host_array(engine[0]), _host_array(engine[1]))
        self.pool = (pool_k[:, :, local_layer], pool_v[:, :, local_layer])
        self.group = group
        self.is_first = is_first

    def load(self, copy: BlockCopy) -> None:
        if self.on_host:
            for kind in (0, 1):
                kvrt.copy_blocks(self.engine_rows[kind], copy.engine_blocks, self.pool[kind],
                                 copy.kvrt_blocks[self.group])
            return
        import torch

        dst = torch.as_tensor(copy.engine_blocks, dtype=torch.long, device=self.engine.device)
        src = torch.as_tensor(copy.kvrt_blocks[self.group], dtype=torch.long, device=self.pool[0].device)
        for kind in (0, 1):
            self.engine[kind].index_copy_(0, dst, self.pool[kind].index_select(0, src).to(self.engine.device))

    def save(self, copy: BlockCopy, kv_layer) -> None:
        if self.on_host:
            rows = self.engine_rows if kv_layer is self.engine else (_host_array(kv_layer[0]),
                                                                     _host_array(kv_layer[1]))
            for kind in (0, 1):
                kvrt.copy_blocks(self.pool[kind], copy.kvrt_blocks[self.group], rows[kind], copy.engine_blocks)
            return
        import torch

        src = torch.as_tensor(copy.engine_blocks, dtype=torch.long, device=kv_layer.device)
        dst = torch.as_tensor(copy.kvrt_blocks[self.group], dtype=torch.long, device=self.pool[0].device)
        for kind in (0, 1):
            self.pool[kind].index_copy_(0, dst, kv_layer[kind].index_select(0, src).to(self.pool[kind].device))
        torch.cuda.synchronize(self.pool[0].device)  # the rows are in the pool before the commit reaches the node


def _host_array(tensor):
    """A host tensor's memory as a NumPy array of same-sized integers
    (NumPy has no bfloat16; the copies move bytes)."""
    import torch

    if tensor.device.type != "cpu":
        raise kvrt.Incompatible(201, "incompatible", "kv_caches",
                                f"a cache on {tensor.device} and shared-memory pools: the engine's caches and the "
                                f"node's pools must both be host memory or both GPU memory")
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[tensor.element_size()]
    return tensor.view(ints).numpy()


def _map_layers(s: kvrt.Session, kv_caches: dict[str, Any], block_size: int) -> dict[str, _LayerCopy]:
    """Each attention layer's cache group and index in it (a group holds
    model layers [first_layer, first_layer + layers), 0x03C); shapes and
    dtypes must equal the pools'."""
    import torch

    groups = [(view.first_layer, view) for view in (s.pool_view(g) for g in range(s.geometry.groups))]
    total = sum(view.layers for _, view in groups)
    by_index = sorted(((layer_index(name), name) for name in kv_caches), key=lambda x: x[0])
    if len(by_index) != total or [i for i, _ in by_index] != list(range(total)):
        raise kvrt.Incompatible(201, "incompatible", "kv_caches",
                                f"the engine has attention layers {[i for i, _ in by_index]}, the kvrt node's "
                                f"layout {total} layers")
    arrays = [(s.kv_tensor(g, 0), s.kv_tensor(g, 1)) if view.memory == kvrt.Memory.CUDA
              else (s.kv_array(g, 0), s.kv_array(g, 1)) for g, (_, view) in enumerate(groups)]
    torch_dtype = {kvrt.DType.FP16: torch.float16, kvrt.DType.BF16: torch.bfloat16, kvrt.DType.FP32: torch.float32}
    out = {}
    for index, name in by_index:
        g = next(k for k, (f, v) in enumerate(groups) if f <= index < f + v.layers)
        f, view = groups[g]
        engine = kv_caches[name]
        want = (2, engine.shape[1], block_size, view.kv_heads, view.head_dim)
        if tuple(engine.shape) != want:
            raise kvrt.Incompatible(201, "incompatible", name,
                                    f"layer {name} has a cache of shape {tuple(engine.shape)}; the kvrt pool needs "
                                    f"(2, blocks, {block_size}, {view.kv_heads}, {view.head_dim})")
        for kind in (0, 1):
            if torch_dtype.get(kvrt.DType(view.dtype[kind])) != engine.dtype:
                raise kvrt.Incompatible(201, "incompatible", name,
                                        f"layer {name} stores {engine.dtype}, the kvrt pool "
                                        f"{kvrt.DType(view.dtype[kind]).name}")
        layer = _LayerCopy(engine, arrays[g][0], arrays[g][1], g, index - f, index == 0)
        for kind in (0, 1) if layer.on_host else ():
            if not _one_run_per_block(layer.pool[kind]) or not _one_run_per_block(layer.engine_rows[kind]):
                raise kvrt.Incompatible(201, "incompatible", name,
                                        "a block of one layer must be one contiguous run in the engine's cache and "
                                        "in the kvrt pool (axis order ending token_offset, kv_head, head_dim)")
        out[name] = layer
    return out


def _one_run_per_block(array) -> bool:
    expected = array.itemsize
    for extent, stride in reversed(list(zip(array.shape[1:], array.strides[1:]))):
        if extent != 1 and stride != expected:
            return False
        expected *= extent
    return True
