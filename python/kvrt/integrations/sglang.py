"""kvrt as an SGLang HiCache storage backend: a node-level, exact, shared
K/V tier under SGLang's host memory (HiCache's L3).

Launch SGLang with (docs/integrations.md)::

    --enable-hierarchical-cache --hicache-storage-backend dynamic \\
    --hicache-storage-backend-extra-config '{"backend_name": "kvrt",
        "module_path": "kvrt.integrations.sglang", "class_name": "KvrtHiCacheStorage",
        "descriptor": "/run/kvrt/node.json", "principal": "sglang-0",
        "namespace": "local/default"}'

How HiCache's pages map onto kvrt. HiCache names a page by a key, the
SHA-256 chain of the page's tokens and every page before it (so a key
stands for its whole prefix), and asks a backend whether keys exist, to
store pages and to fetch them into its host pool. kvrt indexes token
prefixes, so each key becomes a one-block prefix of its own in the
configured namespace: P surrogate token ids drawn from SHAKE-256 of the
key, the model name and this rank's tensor/pipeline position (496 bits of a
key that is itself a SHA-256 chain; two keys meet only if SHA-256 does). A
page's rows are a pool block of every cache group; publishing it makes it
visible to every engine of the namespace, on any node process attached to
the same kvrt node.

- ``exists`` / ``batch_exists``: a side-effect-free lookup (a peek) of each
  key; ``batch_exists`` answers how many consecutive keys from the first
  are stored, in one call to the node.
- ``batch_set_v1`` / ``batch_set`` / ``set``: keys stored already are
  skipped; the others are admitted as one-block requests, their host pages
  copied into the blocks kvrt allocated, committed, published and
  released. A page kvrt has no room for answers False.
- ``batch_get_v1`` / ``batch_get`` / ``get``: each key is admitted with one
  token more than its block, so that the block is the hit (kvrt always
  leaves a prompt's last token to compute); the hit block is leased by
  the admission while it is copied into the host page, then the reuse
  attempt ends and the request is released.
- ``clear``: forgets this backend's statistics. The namespace's pages are
  shared with other engines; an engine's principal cannot purge them (the
  operator does, ``kvrt admin purge --namespace NS``).

When the node is unreachable or dies, keys do not exist, gets and sets
answer False (SGLang recomputes, exactly as without L3) and the session is
tried again every ``reconnect_interval_s``. Wrong arguments (index counts,
page shapes, a host pool whose geometry differs from the node's pools)
raise kvrt's typed errors.

When SGLang is importable the backend subclasses its real
``HiCacheStorage``; otherwise a stand-in with the same interface.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from dataclasses import dataclass
from typing import Any, Callable, List, Optional

import kvrt
from kvrt.integrations._tier import SessionLink, TierConfig

logger = logging.getLogger("kvrt.sglang")

try:  # pragma: no cover - exercised only where SGLang is installed
    from sglang.srt.mem_cache.hicache_storage import (
        HiCacheStorage,
        HiCacheStorageConfig,
        HiCacheStorageExtraInfo,
    )

    HAVE_SGLANG = True
except ImportError:
    HAVE_SGLANG = False

    @dataclass
    class HiCacheStorageConfig:
        """SGLang's storage configuration (stand-in, the fields kvrt reads)."""

        tp_rank: int = 0
        tp_size: int = 1
        pp_rank: int = 0
        pp_size: int = 1
        is_mla_model: bool = False
        is_page_first_layout: bool = False
        model_name: Optional[str] = None
        extra_config: Optional[dict] = None

    @dataclass
    class HiCacheStorageExtraInfo:
        prefix_keys: Optional[List[str]] = None
        extra_info: Optional[dict] = None

    class HiCacheStorage:
        """The part of SGLang's HiCacheStorage a backend inherits (stand-in)."""

        def register_mem_pool_host(self, mem_pool_host) -> None:
            self.mem_pool_host = mem_pool_host

        def batch_exists(self, keys, extra_info=None) -> int:
            for i, key in enumerate(keys):
                if not self.exists(key):
                    return i
            return len(keys)

        def clear(self) -> None:
            pass

        def get_stats(self):
            return None


# Keys of the extra config that SGLang reads itself (its dynamic backend loader).
_SGLANG_KEYS = frozenset({"backend_name", "module_path", "class_name", "interface_v1"})

# The shape of one flat page of a host pool in each of SGLang's layouts
# (HostKVCache.get_data_page / set_from_flat_data_page), for P tokens.
_FLAT_PAGE = {
    "layer_first": lambda L, P, H, D: (2, L, P, H, D),
    "page_first": lambda L, P, H, D: (2, P, L, H, D),
    "page_first_direct": lambda L, P, H, D: (2, 1, L, P, H, D),
    "page_head": lambda L, P, H, D: (2, 1, H, P, L, D),
}


def _page_rows(buffer, layout: str, kind: int, index: int, page: int, first: int, count: int):
    """Rows of layers [first, first+count) of the host page starting at
    token index `index`, as a (page, count, heads, head_dim) view."""
    if layout == "layer_first":
        return buffer[kind, first:first + count, index:index + page].transpose(0, 1)
    if layout == "page_first":
        return buffer[kind, index:index + page, first:first + count]
    if layout == "page_first_direct":
        return buffer[kind, index // page, first:first + count].transpose(0, 1)
    if layout == "page_head":
        return buffer[kind, index // page, :, :, first:first + count].permute(1, 2, 0, 3)
    raise kvrt.Incompatible(201, "incompatible", "layout", f"SGLang host layout {layout!r} is not one kvrt copies")


@dataclass
class _Group:
    """A kvrt cache group: its model layers and its pool tensors."""

    first_layer: int
    layers: int
    k: Any
    v: Any


class KvrtHiCacheStorage(HiCacheStorage):
    """SGLang's HiCacheStorage over a kvrt node (module docstring)."""

    def __init__(self, storage_config, kwargs: Optional[dict] = None) -> None:
        self._config = TierConfig.from_extra(getattr(storage_config, "extra_config", None),
                                             "hicache storage extra_config", ignore=_SGLANG_KEYS)
        if getattr(storage_config, "is_mla_model", False):
            raise kvrt.Incompatible(201, "incompatible", "is_mla_model",
                                    "kvrt's pools hold K and V per head; an MLA latent cache is not one of its layouts")
        rank = f"tp{storage_config.tp_rank}/{storage_config.tp_size}"
        if getattr(storage_config, "pp_size", 1) > 1:
            rank += f"|pp{storage_config.pp_rank}/{storage_config.pp_size}"
        self._key_suffix = f"|{storage_config.model_name or ''}|{rank}"
        self._link = SessionLink(self._config, f"{self._config.worker_name}-{rank.replace('/', 'of')}",
                                 self._config.namespace)
        self._lock = threading.Lock()  # HiCache's prefetch and backup threads share the link
        self._groups: list[_Group] = []
        self._groups_generation = -1
        self.mem_pool_host = None
        self.counters = {"exists_queries": 0, "exists_hits": 0, "get_pages": 0, "get_hits": 0, "set_pages": 0,
                         "set_stored": 0, "set_present": 0, "set_refused": 0, "node_errors": 0}

    # ---- the node and its pools -----------------------------------------

    def _session(self) -> Optional[kvrt.Session]:
        with self._lock:
            s = self._link.get()
            if s is not None and self._groups_generation != self._link.generation:
                groups = []
                for g in range(s.geometry.groups):
                    view = s.pool_view(g)
                    groups.append(_Group(view.first_layer, view.layers, s.kv_tensor(g, 0), s.kv_tensor(g, 1)))
                self._groups, self._groups_generation = groups, self._link.generation
                if self.mem_pool_host is not None:
                    self._check_host_pool(s, self.mem_pool_host)
            return s

    def _lost(self, error: Exception) -> None:
        with self._lock:
            self.counters["node_errors"] += 1
            self._link.lost(error)

    def _check_host_pool(self, s: kvrt.Session, host) -> None:
        """The host pool's pages must be kvrt blocks: equal page size, layer
        count, heads, head width and element type."""
        import torch

        view = s.pool_view(0)
        want = {"page_size": s.geometry.block_tokens, "layer_num": sum(g.layers for g in self._groups),
                "head_num": view.kv_heads, "head_dim": view.head_dim}
        for name, value in want.items():
            got = getattr(host, name, None)
            if got != value:
                raise kvrt.Incompatible(201, "incompatible", name,
                                        f"SGLang's host pool has {name} {got}, the kvrt node's pools {value}")
        dtypes = {kvrt.DType.FP16: torch.float16, kvrt.DType.BF16: torch.bfloat16, kvrt.DType.FP32: torch.float32}
        for kind in (0, 1):
            if dtypes.get(kvrt.DType(view.dtype[kind])) != host.dtype:
                raise kvrt.Incompatible(201, "incompatible", "dtype",
                                        f"SGLang's host pool stores {host.dtype}, the kvrt pool "
                                        f"{kvrt.DType(view.dtype[kind]).name}")
        if host.layout not in _FLAT_PAGE:
            raise kvrt.Incompatible(201, "incompatible", "layout", f"SGLang host layout {host.layout!r} is not one "
                                    f"kvrt copies ({sorted(_FLAT_PAGE)})")

    def register_mem_pool_host(self, mem_pool_host) -> None:
        self.mem_pool_host = mem_pool_host
        s = self._session()
        if s is not None:
            self._check_host_pool(s, mem_pool_host)

    # ---- keys -----------------------------------------------------------

    def _request(self, s: kvrt.Session, key: str, with_probe_token: bool) -> kvrt.Request:
        if not isinstance(key, str) or not key:
            raise kvrt.InvalidArgument(100, "invalid_argument", "keys", f"a HiCache key must be a non-empty string, "
                                       f"not {key!r}")
        P = s.geometry.block_tokens
        digest = hashlib.shake_256((key + self._key_suffix).encode()).digest(4 * P)
        tokens = [int.from_bytes(digest[4 * i:4 * i + 4], "little") & 0x7FFFFFFF for i in range(P)]
        if with_probe_token:
            tokens.append(0)
        return kvrt.Request(self._config.namespace, tokens)

    # ---- exists -----------------------------------------------------------

    def _present(self, keys: List[str]) -> list[bool]:
        s = self._session()
        if s is None or not keys:
            return [False] * len(keys)
        requests = [self._request(s, k, True) for k in keys]
        try:
            hits, statuses = s.lookup(requests)
        except kvrt.ConnectionLost as e:
            self._lost(e)
            return [False] * len(keys)
        P = s.geometry.block_tokens
        return [int(st) == 0 and int(h) >= P for h, st in zip(hits, statuses)]

    def exists(self, key: str) -> bool:
        return self.batch_exists([key]) == 1

    def batch_exists(self, keys: List[str], extra_info: Optional[HiCacheStorageExtraInfo] = None) -> int:
        """How many consecutive keys, from the first, are stored [pages]."""
        present = self._present(list(keys))
        run = present.index(False) if False in present else len(present)
        self.counters["exists_queries"] += len(keys)
        self.counters["exists_hits"] += run
        return run

    # ---- set ------------------------------------------------------------

    def _store(self, keys: List[str], rows: Callable[[int, int, int, int], Any]) -> list[bool]:
        """Stores page i's rows (rows(i, kind, first_layer, layers) -> a
        (page, layers, heads, head_dim) tensor) under keys[i]."""
        s = self._session()
        if s is None:
            return [False] * len(keys)
        results = self._present(keys)
        missing = [i for i, present in enumerate(results) if not present]
        self.counters["set_pages"] += len(keys)
        self.counters["set_present"] += len(keys) - len(missing)
        if not missing:
            return results
        P = s.geometry.block_tokens
        admitted = []
        try:
            requests = [self._request(s, keys[i], False) for i in missing]
            for i, request, a in zip(missing, requests, s.admit(requests, reuse=False)):
                if a.admitted:
                    admitted.append((i, request, a.request))
                else:
                    self.counters["set_refused"] += 1
            for i, _, rid in admitted:
                for g, group in enumerate(self._groups):
                    block = s.block_table(rid, g)[0]
                    group.k[block].copy_(rows(i, 0, group.first_layer, group.layers))
                    group.v[block].copy_(rows(i, 1, group.first_layer, group.layers))
            if admitted:
                kvrt.check_statuses(s.commit_rows([rid for _, _, rid in admitted], [P] * len(admitted)), "commit_rows")
                for i, request, rid in admitted:
                    s.publish(rid, self._config.namespace, request.tokens, 0, 1)
                    results[i] = True
                    self.counters["set_stored"] += 1
        except kvrt.ConnectionLost as e:
            self._lost(e)
            return [False] * len(keys)
        finally:
            if admitted and self._link.session is s:
                try:
                    s.release([rid for _, _, rid in admitted], kvrt.ReleaseReason.FINISHED)
                except kvrt.ConnectionLost as e:
                    self._lost(e)
        return results

    def batch_set_v1(self, keys: List[str], host_indices, extra_info: Optional[HiCacheStorageExtraInfo] = None
                     ) -> List[bool]:
        """Stores the host pages at host_indices (P token indices per key,
        the page's first index P-aligned) under keys; True per page stored."""
        host, firsts = self._host_pages(keys, host_indices)
        return self._store(list(keys), lambda i, kind, first, count: _page_rows(
            host.kv_buffer, host.layout, kind, firsts[i], host.page_size, first, count))

    def set(self, key: str, value: Optional[Any] = None, target_location: Optional[Any] = None,
            target_sizes: Optional[Any] = None) -> bool:
        return self.batch_set([key], [value])

    def batch_set(self, keys: List[str], values: Optional[Any] = None, target_locations: Optional[Any] = None,
                  target_sizes: Optional[Any] = None) -> bool:
        """Stores flat pages (HostKVCache.get_data_page) under keys; True if
        every page is stored."""
        keys = list(keys)
        if not self._sizable():
            return False
        if values is None or len(values) != len(keys):
            raise kvrt.InvalidArgument(100, "invalid_argument", "values",
                                       f"{len(keys)} keys need as many flat pages, got "
                                       f"{None if values is None else len(values)}")
        layout, pages = self._flat_pages(values)
        P = self._page_size()
        return all(self._store(keys, lambda i, kind, first, count: _page_rows(
            pages[i], layout, kind, 0, P, first, count)))

    # ---- get ------------------------------------------------------------

    def _fetch(self, keys: List[str], rows: Callable[[int, int, int, int], Any]) -> list[bool]:
        """Copies the stored page of keys[i] into rows(i, ...) for every key
        kvrt holds; True per page copied."""
        s = self._session()
        results = [False] * len(keys)
        if s is None or not keys:
            return results
        P = s.geometry.block_tokens
        admissions = []
        self.counters["get_pages"] += len(keys)
        try:
            requests = [self._request(s, k, True) for k in keys]
            admissions = s.admit(requests)
            for i, a in enumerate(admissions):
                if not a.admitted or a.hit_tokens < P:
                    continue
                for g, group in enumerate(self._groups):
                    block = s.block_table(a.request, g)[0]
                    rows(i, 0, group.first_layer, group.layers).copy_(group.k[block])
                    rows(i, 1, group.first_layer, group.layers).copy_(group.v[block])
                results[i] = True
                self.counters["get_hits"] += 1
            for i, a in enumerate(admissions):
                if a.admitted and a.reuse_attempt:
                    s.end_reuse(a.reuse_attempt, results[i])
            s.flush_reuse_ends()
        except kvrt.ConnectionLost as e:
            self._lost(e)
            return [False] * len(keys)
        finally:
            held = [a.request for a in admissions if a.admitted]
            if held and self._link.session is s:
                try:
                    s.release(held, kvrt.ReleaseReason.FINISHED)
                except kvrt.ConnectionLost as e:
                    self._lost(e)
        return results

    def batch_get_v1(self, keys: List[str], host_indices, extra_info: Optional[HiCacheStorageExtraInfo] = None
                     ) -> List[bool]:
        """Copies the pages of keys into the host pool at host_indices (P
        token indices per key); True per page copied."""
        host, firsts = self._host_pages(keys, host_indices)
        return self._fetch(list(keys), lambda i, kind, first, count: _page_rows(
            host.kv_buffer, host.layout, kind, firsts[i], host.page_size, first, count))

    def get(self, key: str, target_location: Optional[Any] = None, target_sizes: Optional[Any] = None):
        return self.batch_get([key], None if target_location is None else [target_location])[0]

    def batch_get(self, keys: List[str], target_locations: Optional[Any] = None, target_sizes: Optional[Any] = None):
        """Flat pages (the host pool's layout) of keys, None for a key kvrt
        does not hold; written into target_locations when given."""
        keys = list(keys)
        if not self._sizable():
            return [None] * len(keys)
        if target_locations is None:
            target_locations = [self._empty_flat_page() for _ in keys]
        if len(target_locations) != len(keys):
            raise kvrt.InvalidArgument(100, "invalid_argument", "target_locations",
                                       f"{len(keys)} keys need as many target pages, got {len(target_locations)}")
        layout, pages = self._flat_pages(target_locations)
        P = self._page_size()
        found = self._fetch(keys, lambda i, kind, first, count: _page_rows(
            pages[i], layout, kind, 0, P, first, count))
        return [t if ok else None for t, ok in zip(target_locations, found)]

    # ---- pages ----------------------------------------------------------

    def _host_pages(self, keys: List[str], host_indices) -> tuple[Any, list[int]]:
        host = self.mem_pool_host
        if host is None:
            raise kvrt.InvalidArgument(100, "invalid_argument", "mem_pool_host",
                                       "register_mem_pool_host must come before batch_get_v1 / batch_set_v1")
        P = host.page_size
        indices = [int(x) for x in (host_indices.tolist() if hasattr(host_indices, "tolist") else host_indices)]
        if len(indices) != len(keys) * P:
            raise kvrt.InvalidArgument(100, "invalid_argument", "host_indices",
                                       f"{len(keys)} pages of {P} tokens need {len(keys) * P} host indices, "
                                       f"got {len(indices)}")
        firsts = indices[::P]
        for i, first in enumerate(firsts):
            if first % P != 0 or first < 0 or first + P > host.size or indices[i * P:(i + 1) * P] != list(
                    range(first, first + P)):
                raise kvrt.InvalidArgument(100, "invalid_argument", "host_indices",
                                           f"page {i}'s host indices must be {P} consecutive token slots from a "
                                           f"multiple of {P} inside the pool's {host.size}")
        return host, firsts

    def _geometry(self) -> tuple[str, tuple, Any]:
        """(layout, flat page shape, dtype) of flat pages: the host pool's
        when registered, else layer_first in the node's element type."""
        import torch

        host = self.mem_pool_host
        if host is not None:
            L, P, H, D = host.layer_num, host.page_size, host.head_num, host.head_dim
            return host.layout, _FLAT_PAGE[host.layout](L, P, H, D), host.dtype
        s = self._session()
        if s is None:
            raise kvrt.NodeLost(1406, "node_lost", "session", "no kvrt session and no host pool to size a page")
        view = s.pool_view(0)
        dtypes = {kvrt.DType.FP16: torch.float16, kvrt.DType.BF16: torch.bfloat16, kvrt.DType.FP32: torch.float32}
        L = sum(g.layers for g in self._groups)
        shape = _FLAT_PAGE["layer_first"](L, s.geometry.block_tokens, view.kv_heads, view.head_dim)
        return "layer_first", shape, dtypes[kvrt.DType(view.dtype[0])]

    def _page_size(self) -> int:
        if self.mem_pool_host is not None:
            return self.mem_pool_host.page_size
        s = self._session()
        return s.geometry.block_tokens if s is not None else 0

    def _sizable(self) -> bool:
        """Whether a flat page can be sized (a host pool, or a session)."""
        return self.mem_pool_host is not None or self._session() is not None

    def _empty_flat_page(self):
        import torch

        _, shape, dtype = self._geometry()
        return torch.zeros(shape, dtype=dtype).flatten()

    def _flat_pages(self, flats) -> tuple[str, list]:
        layout, shape, dtype = self._geometry()
        pages = []
        for i, flat in enumerate(flats):
            numel = 1
            for n in shape:
                numel *= n
            if flat is None or getattr(flat, "dtype", None) != dtype or flat.numel() != numel:
                raise kvrt.InvalidArgument(100, "invalid_argument", "values",
                                           f"page {i} must be a flat {dtype} tensor of {numel} elements "
                                           f"({layout} {shape})")
            pages.append(flat.view(shape))
        return layout, pages

    # ---- the rest of HiCacheStorage ----------------------------------------

    def clear(self) -> None:
        for k in self.counters:
            self.counters[k] = 0

    def get_stats(self):
        return dict(self.counters)

    def close(self) -> None:
        with self._lock:
            self._groups = []
            self._link.close()
