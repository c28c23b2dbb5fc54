"""kvrt.integrations.vllm.KvrtConnector driven in vLLM's calling order
(scheduler: get_num_new_matched_tokens, update_state_after_alloc,
build_connector_meta, request_finished; worker: register_kv_caches,
bind_connector_metadata, start_load_kv, save_kv_layer per layer,
get_block_ids_with_load_errors) by two engines of one node: engine B loads
bitwise what engine A saved; a node that is gone means no match and no
error; a node left quiescent."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from conftest import Node  # noqa: E402
from kvrt.integrations.vllm import KvrtConnector, KVConnectorRole  # noqa: E402

P, LAYERS, HEADS, DIM, ENGINE_BLOCKS = 16, 4, 2, 16, 32
NAMES = [f"model.layers.{i}.self_attn.attn" for i in range(LAYERS)]


@pytest.fixture(params=["node-engines.toml", "node-engines-split.toml"])
def engines_node(tmp_path, request):
    """The tiny engine's node: one cache group, or two listed out of layer order."""
    n = Node(tmp_path, f"tests/data/python/{request.param}")
    # Each group's first model layer, as the layout files declare them.
    n.first_layers = {"node-engines.toml": [0], "node-engines-split.toml": [2, 0]}[request.param]
    yield n
    n.stop()


def vllm_config(descriptor, principal):
    extra = {"descriptor": descriptor, "principal": principal, "namespace": "test/engines",
             "worker_name": principal, "reconnect_interval_s": 0.0}
    return SimpleNamespace(kv_transfer_config=SimpleNamespace(kv_connector_extra_config=extra),
                           cache_config=SimpleNamespace(block_size=P))


class Engine:
    """The scheduler- and worker-side connectors of one engine and its paged caches."""

    def __init__(self, descriptor, principal):
        cfg = vllm_config(descriptor, principal)
        self.scheduler = KvrtConnector(cfg, KVConnectorRole.SCHEDULER)
        self.worker = KvrtConnector(cfg, KVConnectorRole.WORKER)
        self.caches = {n: torch.zeros((2, ENGINE_BLOCKS, P, HEADS, DIM), dtype=torch.float16) for n in NAMES}
        self.worker.register_kv_caches(self.caches)

    def step(self, request, blocks, computed, scheduled):
        out = SimpleNamespace(
            scheduled_new_reqs=[SimpleNamespace(req_id=request.request_id, prompt_token_ids=request.prompt_token_ids,
                                                block_ids=(blocks,), num_computed_tokens=computed, mm_features=[])],
            scheduled_cached_reqs=SimpleNamespace(req_ids=[], new_block_ids=[], num_computed_tokens=[],
                                                  resumed_req_ids=set()),
            num_scheduled_tokens={request.request_id: scheduled})
        meta = self.scheduler.build_connector_meta(out)
        self.worker.bind_connector_metadata(meta)
        self.worker.start_load_kv(None)
        return meta

    def forward_layers(self):
        for name in NAMES:
            self.worker.wait_for_layer_load(name)
            self.worker.save_kv_layer(name, self.caches[name], None)
        self.worker.wait_for_save()
        errors = self.worker.get_block_ids_with_load_errors()
        self.worker.clear_connector_metadata()
        return errors

    def close(self):
        self.worker.shutdown()
        self.scheduler.shutdown()


def request(rid, prompt):
    return SimpleNamespace(request_id=rid, prompt_token_ids=prompt, cache_salt=None, lora_request=None,
                           mm_features=[])


def test_engine_b_loads_bitwise_what_engine_a_saved(engines_node):
    a = Engine(engines_node.descriptor, "engine-a")
    b = Engine(engines_node.descriptor, "engine-b")
    prompt = list(range(300, 300 + 3 * P + 5))

    # A: nothing to load; its forward writes the prompt's rows, the connector saves the full blocks.
    ra = request("a-1", prompt)
    assert a.scheduler.get_num_new_matched_tokens(ra, 0) == (0, False)
    a_blocks = [4, 9, 2, 7]
    a.scheduler.update_state_after_alloc(ra, (a_blocks,), 0)
    gen = torch.Generator().manual_seed(11)
    for name in NAMES:
        for blk in a_blocks:
            bits = torch.randint(-30000, 30000, (2, P, HEADS, DIM), generator=gen, dtype=torch.int16)
            a.caches[name][:, blk] = bits.view(torch.float16)
    meta = a.step(ra, a_blocks, 0, len(prompt))
    assert [s.engine_blocks for s in meta.saves] == [a_blocks[:3]] and meta.loads == []
    assert a.forward_layers() == set()
    assert a.scheduler.request_finished(ra, a_blocks) == (False, None)
    assert a.scheduler.counters["published_blocks"] == 3

    # B: the same prompt; three blocks come from kvrt (the last token is always computed).
    rb = request("b-1", prompt)
    ext, load_async = b.scheduler.get_num_new_matched_tokens(rb, 0)
    assert (ext, load_async) == (3 * P, False)
    b_blocks = [20, 3, 11, 30]
    b.scheduler.update_state_after_alloc(rb, (b_blocks,), ext)
    meta = b.step(rb, b_blocks, ext, len(prompt) - ext)
    assert [l.engine_blocks for l in meta.loads] == [b_blocks[:3]] and meta.saves == []
    # Each model layer's rows are in the pool of the group that holds that
    # layer, at its place in the group (the layout file's, not group order).
    import kvrt

    with kvrt.Session(engines_node.descriptor, "engine-b") as view:
        firsts = [view.pool_view(g).first_layer for g in range(view.geometry.groups)]
        assert firsts == engines_node.first_layers
        for i, name in enumerate(NAMES):
            g = next(g for g, f in enumerate(firsts) if f <= i < f + view.pool_view(g).layers)
            for kind in (0, 1):
                pool = view.kv_tensor(g, kind)
                for ab, kb in zip(a_blocks[:3], meta.loads[0].kvrt_blocks[g]):
                    assert torch.equal(pool[kb, :, i - firsts[g]].view(torch.int16),
                                       a.caches[name][kind, ab].view(torch.int16))
    assert b.forward_layers() == set()
    for name in NAMES:
        for ab, bb in zip(a_blocks[:3], b_blocks[:3]):
            assert torch.equal(a.caches[name][:, ab].view(torch.int16), b.caches[name][:, bb].view(torch.int16))
    b.scheduler.request_finished(rb, b_blocks)
    a.close()
    b.close()
    stats = engines_node.quiescent()
    assert stats["validate_ok"] and stats["leaked_blocks"] == 0
    assert stats["owners"]["allocator"]["live_requests"] == 0


def test_a_namespace_elsewhere_sees_nothing_and_a_lost_node_means_recompute(engines_node):
    a = Engine(engines_node.descriptor, "engine-a")
    prompt = list(range(900, 900 + 2 * P + 1))
    ra = request("a-1", prompt)
    a.scheduler.get_num_new_matched_tokens(ra, 0)
    a.scheduler.update_state_after_alloc(ra, ([0, 1, 2],), 0)
    a.step(ra, [0, 1, 2], 0, len(prompt))
    a.forward_layers()
    a.scheduler.request_finished(ra, [0, 1, 2])
    # engine-c is granted another namespace only: its connector finds no session grant here.
    c = KvrtConnector(vllm_config(engines_node.descriptor, "engine-c"), KVConnectorRole.SCHEDULER)
    assert c.get_num_new_matched_tokens(request("c-1", prompt), 0) == (0, False)
    # The node dies: lookups answer no match, admissions fail over, nothing raises.
    engines_node.stop()
    rb = request("a-2", prompt)
    assert a.scheduler.get_num_new_matched_tokens(rb, 0) == (0, False)
    a.scheduler.update_state_after_alloc(rb, ([5, 6, 7],), 0)
    assert a.scheduler.request_finished(rb, [5, 6, 7]) == (False, None)
    assert a.scheduler.counters["node_errors"] >= 1


def test_bad_caches_and_block_ids_raise_typed_errors_and_leave_the_node_intact(engines_node):
    import kvrt

    cfg = vllm_config(engines_node.descriptor, "engine-a")
    worker = KvrtConnector(cfg, KVConnectorRole.WORKER)
    good = {n: torch.zeros((2, ENGINE_BLOCKS, P, HEADS, DIM), dtype=torch.float16) for n in NAMES}
    for caches in ({**good, NAMES[1]: torch.zeros((2, ENGINE_BLOCKS, P, HEADS, DIM + 1), dtype=torch.float16)},
                   {**good, NAMES[2]: torch.zeros((2, ENGINE_BLOCKS, P, HEADS, DIM), dtype=torch.float32)},
                   {n: c for n, c in good.items() if n != NAMES[3]},  # a layer missing
                   {**{n: c for n, c in good.items() if n != NAMES[0]}, "model.lm_head": good[NAMES[0]]}):
        with pytest.raises((kvrt.Incompatible, kvrt.InvalidArgument)):
            worker.register_kv_caches(caches)
    worker.register_kv_caches(good)
    from kvrt.integrations.vllm import BlockCopy, KvrtConnectorMetadata

    # An engine block past the caches (one list of kvrt blocks per group of
    # either layout): the save raises, nothing is written.
    worker.bind_connector_metadata(KvrtConnectorMetadata(saves=[BlockCopy("r", [ENGINE_BLOCKS], [[0], [0]])]))
    worker.start_load_kv(None)
    with pytest.raises(kvrt.InvalidArgument):
        worker.save_kv_layer(NAMES[0], good[NAMES[0]], None)
    worker.clear_connector_metadata()
    # A kvrt block past the pool in a load: reported as a load error, recomputed.
    worker.bind_connector_metadata(KvrtConnectorMetadata(loads=[BlockCopy("r", [1, 2], [[0, 10 ** 6]] * 2)]))
    worker.start_load_kv(None)
    assert worker.get_block_ids_with_load_errors() == {1, 2}
    worker.clear_connector_metadata()
    worker.shutdown()
    stats = engines_node.quiescent()
    assert stats["validate_ok"] and stats["leaked_blocks"] == 0
