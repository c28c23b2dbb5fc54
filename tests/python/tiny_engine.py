"""A tiny inference engine with vLLM's shapes and calling order, for
testing kvrt's vLLM connector end to end on the CPU.

- Its own paged K/V caches: one tensor per attention layer, shaped
  (2, blocks, block_size, kv_heads, head_dim) in fp16 as vLLM's.
- A deterministic 4-layer transformer (tests/data/python/tiny-engine-layout.toml).
  Every token is computed alone, in a fixed order of operations, from its
  hidden state and the cached K/V of the positions before it, so a row's
  bits do not depend on how the prompt was batched or chunked: a row loaded
  from kvrt must equal, bit for bit, the row this engine would compute.
- A scheduler loop in the order of vLLM v1's ``Scheduler.schedule`` and
  ``update_from_output`` and of ``KVConnectorModelRunnerMixin``: running
  requests first, then waiting ones (``get_num_new_matched_tokens`` ->
  block allocation -> ``update_state_after_alloc``), ``build_connector_meta``
  on the step's output; the worker binds the metadata, ``start_load_kv``,
  per layer ``wait_for_layer_load`` / attention / ``save_kv_layer``, then
  ``wait_for_save``, ``get_finished``, ``get_block_ids_with_load_errors`` and
  ``clear_connector_metadata``; the scheduler truncates requests at invalid
  blocks (recompute from there, dropping the step's sample), then
  ``update_connector_output``, and calls ``request_finished`` before it frees
  a finished request's blocks. Chunked prefill under a token budget; greedy
  sampling; no local prefix cache (as ``--no-enable-prefix-caching``), so
  every reuse is kvrt's.

Run as a process (tests/python/test_tiny_engine.py)::

    tiny_engine.py --workload W.json --out R.json [--descriptor D --principal P]
                   [--verify-loads]

W.json is {"requests": [{"id", "prompt": [...], "max_tokens"}], ...}; R.json
gets every request's output tokens, the prefill tokens computed, the rows
verified against recomputation and the connector's counters.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Callable, Optional

import torch

BLOCK_SIZE, LAYERS, HEADS, HEAD_DIM, VOCAB = 16, 4, 2, 16, 512
MODEL_DIM = HEADS * HEAD_DIM
LAYER_NAMES = [f"model.layers.{i}.self_attn.attn" for i in range(LAYERS)]


def random_tokens(rng, n: int) -> list[int]:
    """n token ids of the model's vocabulary drawn from `rng` (a random.Random)."""
    return [rng.randrange(VOCAB) for _ in range(n)]


class TinyModel:
    """Seeded weights; per-token forward in float32 with fp16 K/V storage."""

    def __init__(self, seed: int = 7) -> None:
        g = torch.Generator().manual_seed(seed)

        def w(rows: int, cols: int) -> torch.Tensor:
            return torch.randn(rows, cols, generator=g) / math.sqrt(rows)

        self.embed = torch.randn(VOCAB, MODEL_DIM, generator=g)
        self.layers = [dict(q=w(MODEL_DIM, MODEL_DIM), k=w(MODEL_DIM, MODEL_DIM), v=w(MODEL_DIM, MODEL_DIM),
                            o=w(MODEL_DIM, MODEL_DIM), up=w(MODEL_DIM, 2 * MODEL_DIM), down=w(2 * MODEL_DIM, MODEL_DIM))
                       for _ in range(LAYERS)]
        self.unembed = w(MODEL_DIM, VOCAB)
        freq = torch.exp(-math.log(1000.0) * torch.arange(0, MODEL_DIM, 2, dtype=torch.float32) / MODEL_DIM)
        self.freq = freq

    def position(self, pos: int) -> torch.Tensor:
        angle = pos * self.freq
        return torch.stack((torch.sin(angle), torch.cos(angle)), dim=1).reshape(MODEL_DIM)

    def hidden_in(self, token: int, pos: int) -> torch.Tensor:
        return self.embed[token] + self.position(pos)

    def layer_token(self, layer: int, h: torch.Tensor, cache: torch.Tensor, blocks: list[int], pos: int) -> torch.Tensor:
        """One token through one layer: writes its K and V into the paged
        cache at `pos`, attends over positions 0..pos read from the cache."""
        w = self.layers[layer]
        q = (h @ w["q"]).view(HEADS, HEAD_DIM)
        block, offset = blocks[pos // BLOCK_SIZE], pos % BLOCK_SIZE
        cache[0, block, offset] = (h @ w["k"]).view(HEADS, HEAD_DIM).to(torch.float16)
        cache[1, block, offset] = (h @ w["v"]).view(HEADS, HEAD_DIM).to(torch.float16)
        rows = pos + 1
        full, rest = divmod(rows, BLOCK_SIZE)
        used = blocks[:full + (1 if rest else 0)]
        keys = cache[0, used].reshape(-1, HEADS, HEAD_DIM)[:rows].float()
        values = cache[1, used].reshape(-1, HEADS, HEAD_DIM)[:rows].float()
        scores = torch.einsum("hd,thd->ht", q, keys) / math.sqrt(HEAD_DIM)
        out = torch.einsum("ht,thd->hd", torch.softmax(scores, dim=1), values).reshape(MODEL_DIM)
        h = h + out @ w["o"]
        return h + torch.tanh(h @ w["up"]) @ w["down"]

    def sample(self, h: torch.Tensor) -> int:
        return int(torch.argmax(h @ self.unembed))

    def reference_kv(self, tokens: list[int]) -> list[torch.Tensor]:
        """Every layer's K/V rows of `tokens` computed alone, token by token,
        in a scratch cache: (2, len, heads, head_dim) per layer."""
        blocks = list(range((len(tokens) + BLOCK_SIZE - 1) // BLOCK_SIZE))
        caches = [torch.zeros((2, len(blocks), BLOCK_SIZE, HEADS, HEAD_DIM), dtype=torch.float16) for _ in range(LAYERS)]
        for pos, token in enumerate(tokens):
            h = self.hidden_in(token, pos)
            for layer in range(LAYERS):
                h = self.layer_token(layer, h, caches[layer], blocks, pos)
        return [c.reshape(2, -1, HEADS, HEAD_DIM)[:, :len(tokens)] for c in caches]


@dataclass
class EngineRequest:
    request_id: str
    prompt_token_ids: list[int]
    max_tokens: int
    output: list[int] = field(default_factory=list)
    num_computed_tokens: int = 0
    blocks: list[int] = field(default_factory=list)
    status: str = "waiting"  # waiting, running, finished
    cache_salt: Optional[str] = None
    lora_request: None = None
    mm_features: list = field(default_factory=list)

    @property
    def all_token_ids(self) -> list[int]:
        return self.prompt_token_ids + self.output

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_token_ids) + len(self.output)


class TinyEngine:
    """vLLM's scheduler and model runner around TinyModel, with an optional
    KV connector (scheduler and worker roles, as vLLM builds them)."""

    def __init__(self, connector_factory: Optional[Callable] = None, num_blocks: int = 128,
                 token_budget: int = 40, max_running: int = 4, verify_loads: bool = False) -> None:
        self.model = TinyModel()
        self.caches = {n: torch.zeros((2, num_blocks, BLOCK_SIZE, HEADS, HEAD_DIM), dtype=torch.float16)
                       for n in LAYER_NAMES}
        self.free_blocks = list(range(num_blocks))
        self.token_budget = token_budget
        self.max_running = max_running
        self.waiting: list[EngineRequest] = []
        self.running: list[EngineRequest] = []
        self.finished: dict[str, EngineRequest] = {}
        self.finished_req_ids: set[str] = set()
        self.steps = 0
        self.prefill_tokens_computed = 0
        self.verify_loads = verify_loads
        self.verified_rows = 0
        self.scheduler_connector = self.worker_connector = None
        if connector_factory is not None:
            from kvrt.integrations.vllm import KVConnectorRole

            self.scheduler_connector = connector_factory(KVConnectorRole.SCHEDULER)
            self.worker_connector = connector_factory(KVConnectorRole.WORKER)
            self.worker_connector.register_kv_caches(self.caches)

    def add_request(self, request_id: str, prompt: list[int], max_tokens: int) -> None:
        self.waiting.append(EngineRequest(request_id, list(prompt), max_tokens))

    # ---- scheduler (vLLM v1 Scheduler.schedule) -------------------------

    def _allocate(self, request: EngineRequest, tokens: int) -> Optional[list[int]]:
        need = (tokens + BLOCK_SIZE - 1) // BLOCK_SIZE - len(request.blocks)
        if need > len(self.free_blocks):
            return None
        new = [self.free_blocks.pop(0) for _ in range(max(0, need))]
        request.blocks += new
        return new

    def schedule(self) -> SimpleNamespace:
        budget = self.token_budget
        scheduled: dict[str, int] = {}
        new_reqs, cached = [], SimpleNamespace(req_ids=[], new_block_ids=[], num_computed_tokens=[],
                                               resumed_req_ids=set())
        for r in self.running:
            if budget == 0:
                break
            n = min(r.num_tokens - r.num_computed_tokens, budget)
            new = self._allocate(r, r.num_computed_tokens + n)
            if new is None:
                break  # no preemption in this engine: the workloads fit its blocks
            scheduled[r.request_id] = n
            budget -= n
            cached.req_ids.append(r.request_id)
            cached.new_block_ids.append((new,))
            cached.num_computed_tokens.append(r.num_computed_tokens)
        while self.waiting and budget > 0 and len(self.running) < self.max_running:
            r = self.waiting[0]
            external = 0
            if self.scheduler_connector is not None:
                external, load_async = self.scheduler_connector.get_num_new_matched_tokens(r, 0)
                assert external is not None and not load_async
            computed = external
            n = min(r.num_tokens - computed, budget)
            assert n > 0, "a connector must leave the last prompt token to compute"
            if self._allocate(r, computed + n) is None:
                break
            if self.scheduler_connector is not None:
                self.scheduler_connector.update_state_after_alloc(r, (list(r.blocks),), external)
            self.waiting.pop(0)
            self.running.append(r)
            r.status = "running"
            r.num_computed_tokens = computed
            scheduled[r.request_id] = n
            budget -= n
            new_reqs.append(SimpleNamespace(req_id=r.request_id, prompt_token_ids=r.prompt_token_ids,
                                            block_ids=(list(r.blocks),), num_computed_tokens=computed,
                                            mm_features=[]))
        out = SimpleNamespace(scheduled_new_reqs=new_reqs, scheduled_cached_reqs=cached,
                              num_scheduled_tokens=scheduled, finished_req_ids=self.finished_req_ids,
                              kv_connector_metadata=None)
        if self.scheduler_connector is not None:
            out.kv_connector_metadata = self.scheduler_connector.build_connector_meta(out)
        self.finished_req_ids = set()
        return out

    # ---- model runner (KVConnectorModelRunnerMixin + the forward) -------

    def execute(self, out: SimpleNamespace) -> SimpleNamespace:
        conn = self.worker_connector
        by_id = {r.request_id: r for r in self.running}
        if conn is not None:
            conn.bind_connector_metadata(out.kv_connector_metadata)
            conn.start_load_kv(None)
            if self.verify_loads:
                self._verify(out.kv_connector_metadata, by_id)
        work = [(by_id[rid], by_id[rid].num_computed_tokens, n) for rid, n in out.num_scheduled_tokens.items()]
        hidden = {}
        for r, start, n in work:
            tokens = r.all_token_ids
            for pos in range(start, start + n):
                hidden[(r.request_id, pos)] = self.model.hidden_in(tokens[pos], pos)
                if pos < len(r.prompt_token_ids):
                    self.prefill_tokens_computed += 1
        for layer, name in enumerate(LAYER_NAMES):
            if conn is not None:
                conn.wait_for_layer_load(name)
            for r, start, n in work:
                for pos in range(start, start + n):
                    key = (r.request_id, pos)
                    hidden[key] = self.model.layer_token(layer, hidden[key], self.caches[name], r.blocks, pos)
            if conn is not None:
                conn.save_kv_layer(name, self.caches[name], None)
        sampled = {}
        for r, start, n in work:
            if start + n == r.num_tokens:  # the step reached the request's last known token
                sampled[r.request_id] = self.model.sample(hidden[(r.request_id, start + n - 1)])
        result = SimpleNamespace(sampled=sampled, invalid_block_ids=set(), finished_sending=None,
                                 finished_recving=None)
        if conn is not None:
            conn.wait_for_save()
            result.finished_sending, result.finished_recving = conn.get_finished(out.finished_req_ids)
            result.invalid_block_ids = conn.get_block_ids_with_load_errors()
            conn.clear_connector_metadata()
        return result

    def _verify(self, meta, by_id: dict[str, EngineRequest]) -> None:
        """Every block loaded from kvrt equals this engine's own computation
        of it, bit for bit, in every layer, K and V."""
        for load in meta.loads:
            r = by_id[load.request_id]
            ref = self.model.reference_kv(r.prompt_token_ids)
            for b in load.engine_blocks:
                j = r.blocks.index(b)
                rows = slice(j * BLOCK_SIZE, (j + 1) * BLOCK_SIZE)
                for layer, name in enumerate(LAYER_NAMES):
                    got = self.caches[name][:, b].view(torch.int16)
                    want = ref[layer][:, rows].contiguous().view(torch.int16)
                    if not torch.equal(got, want):
                        raise AssertionError(f"{load.request_id}: block {j} of layer {layer} loaded from kvrt "
                                             f"differs from the engine's recomputation")
                self.verified_rows += BLOCK_SIZE

    # ---- scheduler (vLLM v1 Scheduler.update_from_output) ---------------

    def update(self, out: SimpleNamespace, result: SimpleNamespace) -> None:
        failed = set()
        if result.invalid_block_ids:
            for r in self.running:
                bad = [j for j, b in enumerate(r.blocks) if b in result.invalid_block_ids]
                if bad:
                    failed.add(r.request_id)
                    r.num_computed_tokens = min(r.num_computed_tokens, bad[0] * BLOCK_SIZE)
        for rid, n in out.num_scheduled_tokens.items():
            r = next(x for x in self.running if x.request_id == rid)
            if rid in failed:
                continue
            r.num_computed_tokens += n
            if rid in result.sampled:
                r.output.append(result.sampled[rid])
        if self.scheduler_connector is not None:
            self.scheduler_connector.update_connector_output(result)
        for r in [x for x in self.running if len(x.output) >= x.max_tokens]:
            self.running.remove(r)
            r.status = "finished"
            if self.scheduler_connector is not None:
                delay, _ = self.scheduler_connector.request_finished(r, list(r.blocks))
                assert not delay
            self.free_blocks += r.blocks
            r.blocks = []
            self.finished[r.request_id] = r
            self.finished_req_ids.add(r.request_id)

    def step(self) -> None:
        out = self.schedule()
        if not out.num_scheduled_tokens:
            raise RuntimeError("the engine scheduled nothing: its blocks cannot hold the waiting request")
        self.update(out, self.execute(out))
        self.steps += 1

    def run(self, on_step: Optional[Callable[[int], None]] = None) -> dict[str, list[int]]:
        while self.waiting or self.running:
            self.step()
            if on_step is not None:
                on_step(self.steps)
        return {rid: r.output for rid, r in self.finished.items()}

    def shutdown(self) -> None:
        for c in (self.worker_connector, self.scheduler_connector):
            if c is not None:
                c.shutdown()


def kvrt_connector_factory(descriptor: str, principal: str, namespace: str = "test/engines",
                           reconnect_interval_s: float = 0.2) -> Callable:
    from kvrt.integrations.vllm import KvrtConnector

    extra = {"descriptor": descriptor, "principal": principal, "namespace": namespace, "worker_name": principal,
             "reconnect_interval_s": reconnect_interval_s}
    config = SimpleNamespace(kv_transfer_config=SimpleNamespace(kv_connector_extra_config=extra),
                             cache_config=SimpleNamespace(block_size=BLOCK_SIZE))
    return lambda role: KvrtConnector(config, role)


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workload", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--descriptor")
    p.add_argument("--principal", default="engine-a")
    p.add_argument("--verify-loads", action="store_true")
    args = p.parse_args(argv)
    workload = json.load(open(args.workload))
    factory = kvrt_connector_factory(args.descriptor, args.principal) if args.descriptor else None
    engine = TinyEngine(factory, verify_loads=args.verify_loads)
    for r in workload["requests"]:
        engine.add_request(r["id"], r["prompt"], r["max_tokens"])

    def progress(step: int) -> None:
        print(f"step {step} finished {len(engine.finished)}", flush=True)

    outputs = engine.run(progress)
    counters = dict(engine.scheduler_connector.counters) if engine.scheduler_connector else {}
    if engine.worker_connector is not None:
        for k, v in engine.worker_connector.counters.items():
            counters[k] = counters.get(k, 0) + v
    engine.shutdown()
    json.dump({"outputs": outputs, "prefill_tokens_computed": engine.prefill_tokens_computed,
               "verified_rows": engine.verified_rows, "steps": engine.steps, "counters": counters},
              open(args.out, "w"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
