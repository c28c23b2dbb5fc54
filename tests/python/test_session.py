"""The kvrt Python session against a node process: rows written through a
zero-copy view in one session are reused bitwise by another; a lookup
changes nothing; bad input raises typed exceptions and leaves the node
intact; a killed engine leaks nothing; a view keeps its memory alive past
close(); concurrent calls on one session are serialised."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import kvrt

NS = "test/shared"


def open_session(node, principal="worker-0", ns=NS):
    s = kvrt.Session(node.descriptor, principal, worker_name=f"pytest-{principal}")
    s.authorize(ns)
    return s


def fill_rows(s, request, tokens, seed):
    """Writes every row of the request's blocks through the pools' K and V
    views: row t of group g gets bits drawn from (seed, g, t)."""
    P = s.geometry.block_tokens
    for g in range(s.geometry.groups):
        table = s.block_table(request, g)
        K, V = s.kv_arrays(g)
        for t in range(len(tokens)):
            rng = np.random.default_rng([seed, g, t])
            for view in (K, V):
                cell = view[table[t // P], t % P]
                cell.view(np.uint16)[...] = rng.integers(0, 1 << 16, size=cell.shape, dtype=np.uint16)


def expected_row(g, t, seed, shape):
    rng = np.random.default_rng([seed, g, t])
    return (rng.integers(0, 1 << 16, size=shape, dtype=np.uint16),
            rng.integers(0, 1 << 16, size=shape, dtype=np.uint16))


def assert_rows(s, request, seed, count, first_row=0):
    """Rows first_row.. of `request` hold, bitwise, the rows fill_rows wrote
    for tokens 0..count-1 with `seed`."""
    P = s.geometry.block_tokens
    for g in range(s.geometry.groups):
        table = s.block_table(request, g)
        K, V = s.kv_arrays(g)
        for t in range(count):
            k_bits, v_bits = expected_row(g, t, seed, K.shape[2:])
            blk, row = table[(first_row + t) // P], (first_row + t) % P
            np.testing.assert_array_equal(K[blk, row].view(np.uint16), k_bits)
            np.testing.assert_array_equal(V[blk, row].view(np.uint16), v_bits)


def publish_prompt(s, tokens, seed, blocks):
    """Admits `tokens`, writes and commits its rows, publishes `blocks` full
    blocks and releases it."""
    a = s.admit([kvrt.Request(NS, tokens)])[0]
    assert a.admitted, a
    fill_rows(s, a.request, tokens, seed)
    assert list(s.commit_rows([a.request], [len(tokens)])) == [0]
    s.publish(a.request, NS, tokens, 0, blocks)
    assert list(s.release([a.request])) == [0]


def test_rows_written_through_a_view_are_reused_bitwise_by_another_session(node):
    a = open_session(node, "worker-0")
    b = open_session(node, "worker-1")
    P = a.geometry.block_tokens
    prompt = np.arange(5000, 5000 + 3 * P + 5, dtype=np.int32)
    publish_prompt(a, prompt, seed=7, blocks=3)

    hits, statuses = b.lookup([kvrt.Request(NS, prompt)])
    assert list(statuses) == [0] and list(hits) == [3 * P]
    adm = b.admit([kvrt.Request(NS, prompt)])[0]
    assert adm.admitted and adm.hit_tokens == 3 * P and adm.reuse_attempt != 0
    for g in range(b.geometry.groups):
        table = b.block_table(adm.request, g)
        K, V = b.kv_arrays(g)
        view = b.pool_view(g)
        for t in range(adm.hit_tokens):
            k_bits, v_bits = expected_row(g, t, 7, K.shape[2:])
            blk, row = table[t // P], t % P
            np.testing.assert_array_equal(K[blk, row].view(np.uint16), k_bits)
            np.testing.assert_array_equal(V[blk, row].view(np.uint16), v_bits)
            # The copying read agrees with the view: canonical order is K then V.
            canonical = b.read_rows(g, blk, row, 1)
            assert canonical.shape == (1, view.row_bytes)
            assert canonical.tobytes() == k_bits.tobytes() + v_bits.tobytes()
    b.end_reuse(adm.reuse_attempt, True)
    b.flush_reuse_ends()
    assert list(b.release([adm.request])) == [0]
    a.close()
    b.close()
    s = node.quiescent()
    assert s["validate_ok"] and s["leaked_blocks"] == 0


def test_torch_tensors_share_the_pool_memory(node):
    torch = pytest.importorskip("torch")
    s = open_session(node)
    K = s.kv_array(0, 0)
    T = s.kv_tensor(0, 0)
    assert tuple(T.shape) == K.shape and T.dtype == torch.float16
    T[3, 2].fill_(1.5)
    assert np.all(K[3, 2] == np.float16(1.5))
    assert T.data_ptr() == K.__array_interface__["data"][0]


@pytest.mark.parametrize("radix", [False, True])
def test_a_lookup_changes_nothing_and_predicts_the_admission(request, radix):
    node = request.getfixturevalue("radix_node" if radix else "node")
    a = open_session(node, "worker-0")
    b = open_session(node, "worker-1")
    P = a.geometry.block_tokens
    prompt = np.arange(9000, 9000 + 3 * P + 1, dtype=np.int32)
    publish_prompt(a, prompt, seed=3, blocks=3)
    # Two blocks shared, then B's own: a radix match would split the edge.
    mine = np.concatenate([prompt[:2 * P], np.arange(70000, 70000 + P + 3, dtype=np.int32)])
    before = node.stats()["owners"]["prefix_index"]
    hits, statuses = b.lookup([kvrt.Request(NS, mine), kvrt.Request(NS, prompt), kvrt.Request("test/other", mine)])
    after = node.stats()["owners"]["prefix_index"]
    assert list(hits[:2]) == [2 * P, 3 * P] and list(statuses[:2]) == [0, 0]
    assert kvrt.error_name(int(statuses[2])) == "authorization_namespace_denied" and hits[2] == 0
    assert after["lookups"] == before["lookups"]
    assert after["peeks"] == before["peeks"] + 2
    if radix:
        assert after["tree_nodes"] == before["tree_nodes"]
    adm = b.admit([kvrt.Request(NS, mine)])[0]
    assert adm.admitted and adm.hit_tokens == 2 * P
    b.end_reuse(adm.reuse_attempt, False)
    b.flush_reuse_ends()
    b.release([adm.request])


@pytest.mark.parametrize("radix", [False, True], ids=["hash_chain", "radix"])
def test_a_publication_is_keyed_by_the_identity_the_request_was_admitted_with(request, radix):
    # Blocks computed with an adapter (or under a cache salt) answer only
    # requests with the same one (0x07B): kvrt.Session.publish keys them by
    # the admitted request's identity, not by its tokens alone.
    node = request.getfixturevalue("radix_node" if radix else "node")
    a = open_session(node, "worker-0")
    P = a.geometry.block_tokens
    lora = np.arange(31000, 31000 + 2 * P + 1, dtype=np.int32)
    adm = a.admit([kvrt.Request(NS, lora, adapter_id="adapter-x")], reuse=False)[0]
    assert adm.admitted
    assert list(a.commit_rows([adm.request], [len(lora)])) == [0]
    a.publish(adm.request, NS, lora, 0, 2)
    a.release([adm.request])
    salted = np.arange(41000, 41000 + 2 * P + 1, dtype=np.int32)
    adm = a.admit([kvrt.Request(NS, salted, cache_salt="user-7")], reuse=False)[0]
    assert list(a.commit_rows([adm.request], [len(salted)])) == [0]
    a.publish(adm.request, NS, salted, 0, 2)
    a.release([adm.request])
    hits, statuses = a.lookup([kvrt.Request(NS, lora, adapter_id="adapter-x"), kvrt.Request(NS, lora),
                               kvrt.Request(NS, lora, adapter_id="adapter-y"),
                               kvrt.Request(NS, salted, cache_salt="user-7"), kvrt.Request(NS, salted),
                               kvrt.Request(NS, salted, cache_salt="user-8")])
    assert list(statuses) == [0] * 6
    assert list(hits) == [2 * P, 0, 0, 2 * P, 0, 0]
    a.close()


def test_bad_input_raises_typed_errors_and_leaves_the_node_intact(node):
    s = open_session(node)
    P = s.geometry.block_tokens
    with pytest.raises(kvrt.InvalidArgument) as e:
        kvrt.Request(NS, [])
    assert e.value.field == "tokens"
    with pytest.raises(kvrt.InvalidArgument):
        kvrt.Request(NS, np.zeros((2, 3), dtype=np.int32))
    with pytest.raises(kvrt.InvalidArgument):
        kvrt.Request(NS, [1.0, 2.0])
    with pytest.raises(kvrt.InvalidArgument):
        kvrt.Request(NS, [1 << 40])
    with pytest.raises(kvrt.NotAuthorized) as e:
        s.authorize("test/other")
    assert e.value.code == 1202 and e.value.name == "authorization_namespace_denied"

    denied = s.admit([kvrt.Request("test/other", [1, 2, 3])])[0]
    assert denied.status == kvrt.AdmissionStatus.FAILED
    assert isinstance(denied.error, kvrt.NotAuthorized)

    prompt = np.arange(100, 100 + 2 * P, dtype=np.int32)
    a = s.admit([kvrt.Request(NS, prompt)])[0]
    assert a.admitted
    row_bytes = s.pool_view(0).row_bytes
    blk = int(s.block_table(a.request, 0)[0])
    with pytest.raises(kvrt.InvalidArgument):  # not whole rows
        s.write_rows(0, blk, 0, np.zeros(row_bytes + 1, dtype=np.uint8))
    with pytest.raises(kvrt.InvalidArgument):  # a block past the pool
        s.write_rows(0, s.geometry.capacity_blocks, 0, np.zeros(row_bytes, dtype=np.uint8))
    with pytest.raises(kvrt.InvalidArgument):  # a group past the pools
        s.pool_view(s.geometry.groups)
    with pytest.raises(kvrt.InvalidArgument):
        s.kv_array(0, 2)
    with pytest.raises(kvrt.InvalidArgument):  # rows past the block
        s.read_rows(0, blk, P - 1, 2)
    with pytest.raises(kvrt.InvalidArgument):
        s.commit_rows([a.request], [1, 2])
    with pytest.raises(kvrt.InvalidArgument):
        s.block_table(a.request + 1000, 0)
    with pytest.raises(kvrt.InvalidArgument):
        s.release([a.request + 1000])
    with pytest.raises(kvrt.InvalidArgument):
        s.publish(a.request, NS, prompt[:P], 0, 2)  # tokens short of the blocks
    with pytest.raises(kvrt.StaleError) as e:  # an attempt this session never admitted
        s.end_reuse(12345, True)
    assert e.value.name == "reuse_attempt_closed"

    # Nothing above changed the request: it still commits and releases.
    assert list(s.commit_rows([a.request], [2 * P])) == [0]
    assert list(s.release([a.request])) == [0]
    with pytest.raises(kvrt.InvalidArgument):  # released twice
        s.release([a.request])
    s.close()
    with pytest.raises(kvrt.SessionEnded):
        s.admit([kvrt.Request(NS, prompt)])
    stats = node.quiescent()
    assert stats["validate_ok"] and stats["leaked_blocks"] == 0
    assert stats["owners"]["allocator"]["live_requests"] == 0


def test_a_killed_engine_leaks_nothing(node):
    script = textwrap.dedent(f"""
        import os, signal, numpy as np, kvrt
        s = kvrt.Session({node.descriptor!r}, "worker-2")
        s.authorize({NS!r})
        P = s.geometry.block_tokens
        reqs = [kvrt.Request({NS!r}, np.arange(k * 1000, k * 1000 + 2 * P + 3, dtype=np.int32)) for k in range(4)]
        got = s.admit(reqs)
        assert all(a.admitted for a in got), got
        s.commit_rows([a.request for a in got], [P] * 4)
        print("holding", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    engine = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert engine.returncode == -9, engine.stderr
    assert "holding" in engine.stdout
    stats = node.quiescent()
    alloc = stats["owners"]["allocator"]
    assert alloc["live_requests"] == 0 and alloc["live_leases"] == 0
    assert stats["leaked_blocks"] == 0 and stats["validate_ok"]
    assert alloc["requests_reclaimed"] == 4


def test_a_pool_view_keeps_its_memory_past_close(node):
    s = open_session(node)
    K = s.kv_array(0, 0)
    s.close()
    assert s.closed
    K[0, 0, 0, 0, 0] = 2.0  # the mapping is still there
    assert K[0, 0, 0, 0, 0] == 2.0
    assert node.stats()["workers_connected"] == 1  # the C session waits for the view
    del K
    gc.collect()
    for _ in range(200):
        if node.stats(validate=False)["workers_connected"] == 0:
            break
    assert node.stats(validate=False)["workers_connected"] == 0


def test_threads_sharing_a_session_are_serialised(node):
    s = open_session(node)
    P = s.geometry.block_tokens
    errors = []

    def work(k):
        try:
            for i in range(20):
                prompt = np.arange(k * 10000 + i * 100, k * 10000 + i * 100 + P + 1, dtype=np.int32)
                a = s.admit([kvrt.Request(NS, prompt)])[0]
                assert a.admitted
                s.lookup([kvrt.Request(NS, prompt)])
                assert list(s.release([a.request])) == [0]
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    s.close()
    assert node.quiescent()["owners"]["allocator"]["live_requests"] == 0


def test_copy_blocks_moves_whole_blocks_and_refuses_what_is_not_one_run():
    src = np.arange(6 * 4 * 3, dtype=np.int16).reshape(6, 4, 3)
    dst = np.zeros((5, 4, 3), dtype=np.int16)
    kvrt.copy_blocks(dst, [4, 0], src, [1, 5])
    assert (dst[4] == src[1]).all() and (dst[0] == src[5]).all() and not dst[1:4].any()
    before = dst.copy()
    for args in ((dst, [5], src, [0]),  # outside the destination
                 (dst, [0, 1], src, [0]),  # counts differ
                 (dst, [0], src[:, :, :2], [0]),  # a source block is not one run
                 (dst, [0], np.zeros((2, 4, 2), dtype=np.int16), [0])):  # runs of other lengths
        with pytest.raises(kvrt.InvalidArgument):
            kvrt.copy_blocks(*args)
    assert (dst == before).all()


def test_a_token_handed_over_opens_the_session_and_a_wrong_one_is_refused(node):
    token = open(node.descriptor + ".tokens/worker-0.token").read().strip()
    with kvrt.Session(node.descriptor, "worker-0", token=token) as s:
        assert s.principal == "worker-0" and s.authorize(NS) > 0
    wrong = ("0" if token[0] != "0" else "1") + token[1:]
    with pytest.raises(kvrt.KvrtError) as refused:
        kvrt.Session(node.descriptor, "worker-0", token=wrong)
    assert not isinstance(refused.value, kvrt.InternalError)
    assert node.quiescent()["validate_ok"]


def test_a_fork_shares_its_parents_blocks_until_an_append_copies_the_tail(node):
    s = open_session(node)
    P = s.geometry.block_tokens
    prompt = np.arange(700, 700 + 2 * P + 3, dtype=np.int32)
    a = s.admit([kvrt.Request(NS, prompt)], reuse=False)[0]
    fill_rows(s, a.request, prompt, seed=3)
    assert list(s.commit_rows([a.request], [len(prompt)])) == [0]
    children, statuses = s.fork([a.request, a.request])
    assert list(statuses) == [0, 0] and len(set(children) | {a.request}) == 3
    parent = [list(s.block_table(a.request, g)) for g in range(s.geometry.groups)]
    for c in children:
        assert [list(s.block_table(int(c), g)) for g in range(s.geometry.groups)] == parent
    positions, statuses = s.append([int(children[0])])
    assert list(statuses) == [0] and int(positions[0]) == len(prompt)
    copied = list(s.block_table(int(children[0]), 0))
    assert copied[:2] == parent[0][:2] and copied[2] != parent[0][2]
    # The copy holds the parent's rows of the shared partial block.
    K, V = s.kv_arrays(0)
    for t in range(2 * P, len(prompt)):
        assert np.array_equal(K[copied[2], t % P].view(np.uint16), K[parent[0][2], t % P].view(np.uint16))
    with pytest.raises(kvrt.InvalidArgument):
        s.fork([987654321])
    assert list(s.release([a.request, *map(int, children)])) == [0, 0, 0]
    stats = node.quiescent()
    assert stats["validate_ok"] and stats["leaked_blocks"] == 0


def test_the_sessions_statistics_are_the_nodes(node):
    s = open_session(node)
    a = s.admit([kvrt.Request(NS, np.arange(1, 40, dtype=np.int32))], reuse=False)[0]
    mine = s.stats(validate=True)
    assert mine["validated"] and mine["validate_ok"]
    assert mine["owners"]["allocator"]["live_requests"] == 1
    assert mine.keys() == node.stats().keys()
    s.release([a.request])
    assert s.stats()["owners"]["allocator"]["live_requests"] == 0


def test_a_host_pool_says_so_and_has_no_cuda_interface(node):
    s = open_session(node)
    view = s.pool_view(0)
    assert view.memory == kvrt.Memory.HOST and view.device == 0
    with pytest.raises(kvrt.Incompatible):
        s.cuda_array_interface(0, 0)


def test_scheduler_handoff_locks_a_path_until_disposed(radix_node):
    """A Python scheduler holds the radix path of a request while it
    decides: admitted (then released once allocated) or released; leases it
    does not hold and a hash-chain node's refusal are typed statuses."""
    a = open_session(radix_node)
    P = a.geometry.block_tokens
    prompt = np.arange(7000, 7000 + 2 * P + 3, dtype=np.int32)
    publish_prompt(a, prompt, seed=3, blocks=2)
    free_tail = [0, P]
    got = a.handoff([kvrt.Request(NS, prompt), kvrt.Request(NS, prompt)], [11, 12], free_tail)
    assert [h.status for h in got] == [0, 0]
    assert [h.hit_tokens for h in got] == [2 * P, 2 * P]
    assert got[0].suffix == (2 * P, 2 * P + 3)
    assert [h.new_physical_blocks for h in got] == [1, 0]  # a private tail of P rows covers the 3 left
    assert got[0].lease != 0 and got[0].lease != got[1].lease
    admit, release = kvrt.HANDOFF_ADMIT, kvrt.HANDOFF_RELEASE
    statuses = a.dispose_handoffs([got[0].lease, got[1].lease, 999], [admit, release, release])
    assert list(statuses) == [0, 0, 708]  # 708: unknown_lease
    assert kvrt.error_name(708) == "unknown_lease"
    adm = a.admit([kvrt.Request(NS, prompt)])[0]
    assert adm.admitted and adm.hit_tokens == 2 * P
    assert list(a.dispose_handoffs([got[0].lease], [release])) == [0]
    a.end_reuse(adm.reuse_attempt, False)
    a.flush_reuse_ends()
    a.release([adm.request])
    with pytest.raises(kvrt.InvalidArgument):
        a.handoff([kvrt.Request(NS, prompt)], [1, 2])
    stats = a.stats_json()
    assert '"handoffs_admitted"' in stats
    a.close()


def test_a_hash_chain_node_refuses_the_handoff(node):
    s = open_session(node)
    got = s.handoff([kvrt.Request(NS, [1, 2, 3])], [1])
    assert got[0].status == 100 and got[0].lease == 0  # invalid_argument
    s.close()


SCHEMA = """
schema_id = "support"
generation = 1
[[module]]
id = "system"
positions = [0, 64]
[[module]]
id = "document"
positions = [100, 164]
parameters = ["doc_id"]
"""


def test_a_published_prompt_module_is_copied_bitwise_into_another_sessions_prompt(node):
    """Prompt Cache (0x0CB) through the C ABI: worker-0 computes the system
    module in a request of its own (rows written here stand in for the
    model's), publishes it and releases the request; worker-1's assembly
    reuses it at its declared positions, copies its rows into its own
    request at another row offset, and they are the published bits."""
    a = open_session(node, "worker-0")
    b = open_session(node, "worker-1")
    assert a.register_prompt_schema(NS, SCHEMA) == 1
    system = np.arange(300, 340, dtype=np.int32)
    m = a.admit([kvrt.Request(NS, system)], reuse=False)[0]
    assert m.admitted, m
    fill_rows(a, m.request, system, seed=11)
    assert list(a.commit_rows([m.request], [len(system)])) == [0]
    a.publish_prompt_module(NS, "support", 1, "system", system, m.request)
    assert list(a.release([m.request])) == [0]

    question = [7, 8, 9, 10, 11]
    items = [kvrt.PromptItem(question, gap_begin=70),
             kvrt.PromptItem(system, module_id="system"),
             kvrt.PromptItem([5] * 20, module_id="document", parameters={"doc_id": "faq"})]
    segments = b.assemble_prompt(NS, "support", 1, items)
    assert [s.item for s in segments] == [1, 0, 2]  # declared position order
    assert [s.position_begin for s in segments] == [0, 70, 100]
    sys_seg, free, doc = segments
    assert sys_seg.outcome == kvrt.PROMPT_REUSED and sys_seg.module != 0 and sys_seg.tokens == 40
    assert free.outcome == kvrt.PROMPT_COMPUTED
    assert doc.outcome == kvrt.PROMPT_MISSED and doc.miss_reason == 6  # no_candidate

    # b's prompt stores a 3-token lead first: the module lands at row 3.
    prompt = np.concatenate([np.array([1, 2, 3], dtype=np.int32), system])
    target = b.admit([kvrt.Request(NS, prompt)], reuse=False)[0]
    assert target.admitted, target
    b.copy_prompt_module(sys_seg.module, target.request, 3)
    assert_rows(b, target.request, 11, len(system), first_row=3)
    # The handle is spent; other tokens for the module are a miss of T.
    with pytest.raises(kvrt.KvrtError) as e:
        b.copy_prompt_module(sys_seg.module, target.request, 3)
    assert e.value.name == "unknown_lease"
    other = [kvrt.PromptItem(system[:-1], module_id="system")]
    again = b.assemble_prompt(NS, "support", 1, other)
    assert again[0].outcome == kvrt.PROMPT_MISSED and again[0].miss_reason == 12  # module_position_mismatch
    # A reused module may be given back without a copy.
    reused = b.assemble_prompt(NS, "support", 1, [kvrt.PromptItem(system, module_id="system")])[0]
    assert reused.outcome == kvrt.PROMPT_REUSED
    b.release_prompt_module(reused.module)
    # A prompt of another schema generation is refused, typed.
    with pytest.raises(kvrt.StaleError):
        b.assemble_prompt(NS, "support", 2, items)
    assert list(b.release([target.request])) == [0]
    a.close()
    b.close()
    s = node.quiescent()
    assert s["validate_ok"] and s["leaked_blocks"] == 0


@pytest.fixture
def tier_node(tmp_path):
    """node-test.toml with a [tier] in the test's directory (its layout path made absolute)."""
    from conftest import SOURCE_DIR, Node
    text = (SOURCE_DIR / "tests/data/node/node-test.toml").read_text()
    text = text.replace('layout = "', f'layout = "{SOURCE_DIR}/tests/data/node/', 1)
    text += f'\n[tier]\ndirectory = "{tmp_path / "tier"}"\nbudget_mib = 4\n'
    config = tmp_path / "node-tier.toml"
    config.write_text(text)
    n = Node(tmp_path, str(config))
    yield n
    n.stop()


def test_a_conversation_saved_to_the_session_tier_resumes_bitwise(tier_node):
    """The session tier (0x0CC) through the C ABI: a history's rows, saved
    when the conversation went quiet, come back into the next turn's own
    request bitwise; another label, or a prompt that does not continue the
    history, is a refusal (the turn computes everything), not an error."""
    s = open_session(tier_node, "worker-0")
    history = np.arange(900, 940, dtype=np.int32)
    a = s.admit([kvrt.Request(NS, history)], reuse=False)[0]
    assert a.admitted, a
    fill_rows(s, a.request, history, seed=23)
    assert list(s.commit_rows([a.request], [len(history)])) == [0]
    s.save_session(NS, "conversation-1", history, a.request)
    assert list(s.release([a.request])) == [0]

    turn = np.concatenate([history, np.array([1, 2, 3, 4], dtype=np.int32)])
    b = s.admit([kvrt.Request(NS, turn)], reuse=False)[0]
    assert b.admitted, b
    rows, refusal = s.resume_session(NS, "conversation-1", turn, b.request)
    assert (rows, refusal) == (len(history), -1)
    assert_rows(s, b.request, 23, len(history))
    assert s.resume_session(NS, "conversation-2", turn, b.request) == (0, 0)  # no_saved_history
    other = turn.copy()
    other[5] += 1
    assert s.resume_session(NS, "conversation-1", other, b.request) == (0, 5)  # history_not_prefix
    with pytest.raises(kvrt.InvalidArgument):
        s.resume_session(NS, "conversation-1", turn, 424242)
    assert list(s.release([b.request])) == [0]
    s.close()
    st = tier_node.quiescent()
    assert st["validate_ok"] and st["leaked_blocks"] == 0
