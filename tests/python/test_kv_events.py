"""A kvrt node's KV events read the way a vLLM consumer reads them: a SUB
socket (topic, 8-byte big-endian sequence number, msgpack EventBatch), a
replay through the ROUTER socket after a lost connection, and a fold of
BlockStored / BlockRemoved / AllBlocksCleared into the set of blocks the
node holds, checked against the node's own answers (a side-effect-free
lookup of every prompt) and for sequence numbers without gaps."""

from __future__ import annotations

import json
import random
import time

import pytest

zmq = pytest.importorskip("zmq")
msgpack = pytest.importorskip("msgpack")

import kvrt  # noqa: E402
from conftest import Node, publish  # noqa: E402

NS = "test/engines"


class Subscriber:
    """vLLM's subscriber pattern: SUB for the stream, a DEALER on the replay
    socket to fill gaps; folds the events into the blocks present."""

    def __init__(self, descriptor: str) -> None:
        d = json.load(open(descriptor))
        self.endpoint, self.replay_endpoint = d["events_endpoint"], d["events_replay_endpoint"]
        self.ctx = zmq.Context()
        self.sub = None
        self.next_seq = 0
        self.seen: list[int] = []
        # (parent hash, block tokens) -> hash, and hash -> that key: the blocks present.
        self.by_key: dict[tuple, bytes] = {}
        self.key_of: dict[bytes, tuple] = {}
        self.replays = 0
        self.cleared: list[int] = []  # batches that cleared everything
        self.lora_names: list = []  # of every BlockStored, in order

    def connect(self) -> None:
        self.sub = self.ctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.SUBSCRIBE, b"")
        self.sub.connect(self.endpoint)

    def disconnect(self) -> None:
        self.sub.close(linger=0)
        self.sub = None

    def apply(self, seq: int, payload: bytes) -> None:
        if seq < self.next_seq:
            return  # had it through a replay already
        assert seq == self.next_seq, f"batch {seq} arrived before {self.next_seq}"
        batch = msgpack.unpackb(payload, raw=False)
        assert isinstance(batch, list) and len(batch) == 3 and batch[2] == 0  # [ts, events, data_parallel_rank]
        assert isinstance(batch[0], float) and batch[0] > 1.6e9
        for event in batch[1]:
            kind = event[0]
            if kind == "BlockStored":
                _, hashes, parent, tokens, block_size, lora_id, medium, lora_name, extra_keys, group = event
                assert medium == "CPU" and lora_id is None and extra_keys is None and group == 0
                self.lora_names.append(lora_name)
                assert len(tokens) == block_size * len(hashes)
                for i, h in enumerate(hashes):
                    key = (parent, tuple(tokens[i * block_size:(i + 1) * block_size]))
                    assert h not in self.key_of, "a block stored twice without a removal"
                    self.by_key[key] = h
                    self.key_of[h] = key
                    parent = h
            elif kind == "BlockRemoved":
                _, hashes, medium, group = event
                for h in hashes:
                    key = self.key_of.pop(h)
                    del self.by_key[key]
            else:
                assert event == ["AllBlocksCleared"]
                self.by_key.clear()
                self.key_of.clear()
                self.cleared.append(seq)
        self.seen.append(seq)
        self.next_seq = seq + 1

    def replay(self) -> None:
        """Asks for every buffered batch from next_seq; applies them up to the end marker."""
        dealer = self.ctx.socket(zmq.DEALER)
        dealer.connect(self.replay_endpoint)
        dealer.send_multipart([b"", self.next_seq.to_bytes(8, "big")])
        while True:
            assert dealer.poll(5000), "no answer from the replay socket"
            empty, seq, payload = dealer.recv_multipart()
            if int.from_bytes(seq, "big", signed=True) == -1:
                break
            self.apply(int.from_bytes(seq, "big"), payload)
        dealer.close(linger=0)
        self.replays += 1

    def pump(self, seconds: float) -> None:
        """Reads the stream; a gap is filled by a replay first."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if not self.sub.poll(20):
                continue
            topic, seq, payload = self.sub.recv_multipart()
            seq = int.from_bytes(seq, "big")
            if seq > self.next_seq:
                self.replay()
            self.apply(seq, payload)

    def present_blocks(self, prompt: list[int], block: int) -> int:
        """Consecutive blocks of `prompt` the events say the node holds."""
        parent, n = None, 0
        while (n + 1) * block <= len(prompt):
            h = self.by_key.get((parent, tuple(prompt[n * block:(n + 1) * block])))
            if h is None:
                break
            parent, n = h, n + 1
        return n


@pytest.mark.parametrize("config", ["node-events.toml", "node-events-radix.toml"])
def test_a_subscriber_that_loses_the_stream_replays_and_folds_exactly_the_nodes_blocks(tmp_path, config):
    seed = 20261205
    rng = random.Random(seed)
    node = Node(tmp_path, f"tests/data/python/{config}")
    try:
        sub = Subscriber(node.descriptor)
        sub.connect()
        time.sleep(0.2)  # the PUB side learns of the subscription
        s = kvrt.Session(node.descriptor, "engine-a")
        s.authorize(NS)
        P = s.geometry.block_tokens
        systems = [[rng.randrange(1, 5000) for _ in range(rng.randrange(1, 4) * P)] for _ in range(6)]
        prompts = []
        for i in range(90):
            prompt = rng.choice(systems) + [rng.randrange(1, 5000) for _ in range(rng.randrange(1, 3 * P))]
            prompts.append(prompt)
            assert publish(s, prompt), f"seed {seed}: no room for prompt {i}"
            if i == 30:
                sub.pump(0.3)
                sub.disconnect()  # the subscriber loses its connection
            if i == 60:
                sub.connect()
                time.sleep(0.2)
        # Everything the node publishes arrives, on the stream or by replay.
        sub.pump(1.0)
        sub.replay()
        assert sub.seen == list(range(len(sub.seen))) and len(sub.seen) > 10, f"seed {seed}"
        assert sub.replays >= 2  # the gap after reconnecting, and the tail
        assert sub.cleared == [0]  # the node started cleared, and never cleared again
        assert node.stats()["leaked_blocks"] == 0
        # The pool is small: publishing evicted, so removals were folded too.
        hits, statuses = s.lookup([kvrt.Request(NS, p + [0]) for p in prompts])
        assert all(int(x) == 0 for x in statuses)
        folded = [sub.present_blocks(p, P) for p in prompts]
        assert [int(h) // P for h in hits] == folded, f"seed {seed}"
        assert any(f < len(p) // P for f, p in zip(folded, prompts)), "nothing was evicted"
        assert len(sub.key_of) > 0
        assert set(sub.lora_names) == {None}
        # An adapter's blocks name it (vLLM's lora_name), on either index.
        assert publish(s, [rng.randrange(5000, 9000) for _ in range(2 * P)], NS, adapter="adapter-x")
        sub.pump(0.5)
        sub.replay()
        assert sub.lora_names[-1] == "adapter-x", f"seed {seed}"
        s.close()
    finally:
        node.stop()
