"""The simulator's LLM-serving physics on generated spans (contract section 6): tensor-parallel ranks
in lockstep (a slow rank computes longer, its peers wait inside the collective), NCCL faults on
the ring and on point-to-point sends, and fault sizes drawn from subtle to gross."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np
import pytest

from rca.telemetry.spans import Signal, SpanBatch
from simulation import SimulatedCase, simulate

SECOND = 1_000_000_000


@cache
def case(scenario: str, seed: int, rate: float | None = None) -> SimulatedCase:
    return simulate(scenario, seed=seed, rate=rate)


def joined(c: SimulatedCase) -> SpanBatch:
    columns = {k: np.concatenate([getattr(b, k) for b in c.batches]) for k in SpanBatch.__dataclass_fields__}
    return SpanBatch(**{**columns, "strings": c.batches[0].strings})


def first_seed(scenario: str, at_least: float, mode: str = "") -> int:
    """The first seed whose root is at least `at_least` strong (and shows as `mode`)."""
    for seed in range(1, 200):
        root = simulate(scenario, seed=seed, rate=0.05).truth.roots[0]
        if root.magnitude >= at_least and mode in ("", root.mode):
            return seed
    raise AssertionError(f"no seed of {scenario} with magnitude >= {at_least} {mode}")


@dataclass(frozen=True)
class Ranks:
    """One replica's worker spans per request: (ranks, requests) arrays, requests in the same
    order on every rank, and which requests ran before and during the fault."""

    rank: int  # the faulty rank
    start: dict[str, np.ndarray]
    end: dict[str, np.ndarray]
    before: np.ndarray
    during: np.ndarray

    def duration(self, op: str) -> np.ndarray:
        return (self.end[op] - self.start[op]) / 1e9

    @property
    def peers(self) -> list[int]:
        return [k for k in range(self.start["model_forward"].shape[0]) if k != self.rank]


def ranks(c: SimulatedCase) -> Ranks:
    s = joined(c)
    root = c.truth.roots[0]
    worker = root.service
    prefix, rank = worker.rsplit("-", 1)
    workers = sorted((w for w in s.strings if w.rsplit("-", 1)[0] == prefix), key=lambda w: int(w.rsplit("-", 1)[1]))
    index = {v: i for i, v in enumerate(s.strings)}
    start, end = {}, {}
    for op in ("model_forward", "nccl:AllReduce", "nccl:Send", "sampling"):
        per_rank = []
        for w in workers:
            rows = np.flatnonzero((s.service == index[w]) & (s.operation == index[op]))
            per_rank.append(rows[np.argsort(s.parent_id[rows])])
        parents = [s.parent_id[r] for r in per_rank]
        assert all(np.array_equal(parents[0], p) for p in parents)  # every request has a span on every rank
        start[op] = np.stack([s.start_ns[r] for r in per_rank])
        end[op] = np.stack([s.end_ns[r] for r in per_rank])
    t0 = start["model_forward"][0]
    before = t0 < root.inject_ns
    during = (t0 >= root.inject_ns + 30 * SECOND) & (t0 < root.end_ns)
    return Ranks(int(rank), start, end, before, during)


@pytest.mark.parametrize(
    ("scenario", "size"),
    [("llm-gpu_memory_bandwidth", 3.0), ("llm-kv_cache_fragmentation", 6.0), ("llm-numa_mismatch", 6.0)],
)
def test_a_slow_rank_computes_longer_and_its_peers_wait_in_the_collective(scenario: str, size: float) -> None:
    c = case(scenario, first_seed(scenario, size))
    r = ranks(c)
    forward, allreduce = r.duration("model_forward"), r.duration("nccl:AllReduce")
    before, during, k, peers = r.before, r.during, r.rank, r.peers

    def rise(values: np.ndarray) -> float:
        return float(np.median(values[during]) / np.median(values[before]))

    assert rise(forward[k]) > 1.15  # the straggler's own forward rises
    for p in peers:
        assert 0.8 < rise(forward[p]) < 1.25  # its peers' compute does not
        assert rise(allreduce[p]) > 1.5 and np.median(allreduce[p, during]) > np.median(allreduce[k, during])
    # each peer waits for about the straggler's extra compute, request by request
    extra = forward[k, during] - forward[peers][:, during]
    waited = allreduce[peers][:, during] - allreduce[k, during]
    assert 0.8 < float(np.median(waited / extra)) < 1.25
    # the straggler's own wait in the collective is the shortest
    assert float(np.mean(allreduce[k, during] < allreduce[peers][:, during].min(axis=0))) > 0.9


def test_a_slow_link_slows_every_ranks_collective_and_breaks_its_own_overlap() -> None:
    scenario = "llm-nccl_communication"
    c = case(scenario, first_seed(scenario, 3.0, "collective"))
    r = ranks(c)
    allreduce = r.duration("nccl:AllReduce")
    for k in range(allreduce.shape[0]):
        assert np.median(allreduce[k, r.during]) > 1.5 * np.median(allreduce[k, r.before])
    overlaps = r.start["nccl:AllReduce"][r.rank] < r.end["model_forward"][r.rank]
    assert overlaps[r.before].mean() > 0.95 and overlaps[r.during].mean() < 0.01
    peers_overlap = r.start["nccl:AllReduce"][r.peers] < r.end["model_forward"][r.peers]
    assert peers_overlap[:, r.during].mean() > 0.95  # the peers' comm still overlaps their compute


def test_point_to_point_contention_shows_in_the_ranks_send_only() -> None:
    scenario = "llm-nccl_communication"
    c = case(scenario, first_seed(scenario, 3.0, "p2p"))
    r, size = ranks(c), c.truth.roots[0].magnitude
    send, allreduce = r.duration("nccl:Send"), r.duration("nccl:AllReduce")

    def rise(values: np.ndarray) -> float:
        return float(np.median(values[r.during]) / np.median(values[r.before]))

    assert 0.6 * size < rise(send[r.rank]) < 1.6 * size
    assert all(0.8 < rise(send[p]) < 1.25 for p in r.peers)
    assert all(rise(allreduce[k]) < 1.3 for k in range(allreduce.shape[0]))


def test_the_peers_variant_hides_the_slow_link_behind_its_waiting_peers() -> None:
    c = case("llm-nccl_communication-peers", first_seed("llm-nccl_communication-peers", 3.0))
    r = ranks(c)
    allreduce = r.duration("nccl:AllReduce")
    own = np.median(allreduce[r.rank, r.during]) / np.median(allreduce[r.rank, r.before])
    for p in r.peers:
        assert np.median(allreduce[p, r.during]) / np.median(allreduce[p, r.before]) > own


@pytest.mark.parametrize(
    "scenario",
    ["llm-gpu_memory_bandwidth", "llm-kv_cache_fragmentation", "llm-numa_mismatch", "llm-nccl_communication"],
)
def test_fault_sizes_range_from_subtle_to_gross(scenario: str) -> None:
    sizes = [simulate(scenario, seed=seed, rate=0.05).truth.roots[0].magnitude for seed in range(1, 41)]
    assert min(sizes) < 1.8 and max(sizes) > 7.0
    assert len({round(s, 6) for s in sizes}) == len(sizes)


def test_measured_slowdown_of_the_faulty_gpu_spans_a_wide_range() -> None:
    rises = []
    for seed in range(1, 31):
        r = ranks(case("llm-gpu_memory_bandwidth", seed, 0.5))
        forward = r.duration("model_forward")[r.rank]
        rises.append(float(np.median(forward[r.during]) / np.median(forward[r.before])))
    assert min(rises) < 1.5 and max(rises) > 6.0


def test_ranks_report_the_physics_of_their_own_fault_class() -> None:
    """The faulty GPU's DRAM headroom shrinks by about the fault's size; a fragmented cache's
    blocks shrink by it; a misplaced process reads mostly remote memory."""
    seed = first_seed("llm-gpu_memory_bandwidth", 3.0)
    c = case("llm-gpu_memory_bandwidth", seed)
    s, root = joined(c), c.truth.roots[0]
    index = {v: i for i, v in enumerate(s.strings)}
    mine = s.resource == index[root.node]
    before, during = mine & (s.start_ns < root.inject_ns), mine & (s.start_ns >= root.inject_ns + 30 * SECOND)
    during &= s.start_ns < root.end_ns
    util = s.signals[:, Signal.GPU_DRAM_UTILIZATION]
    headroom = (1 - np.mean(util[before])) / (1 - np.mean(util[during]))
    assert 0.6 * root.magnitude < headroom < 1.6 * root.magnitude
    kv = case("llm-kv_cache_fragmentation", first_seed("llm-kv_cache_fragmentation", 3.0))
    s, root = joined(kv), kv.truth.roots[0]
    mine = s.resource == {v: i for i, v in enumerate(s.strings)}[root.node]
    block = s.signals[:, Signal.KV_AVG_BLOCK_SIZE]
    b = np.median(block[mine & (s.start_ns < root.inject_ns)])
    d = np.median(block[mine & (s.start_ns >= root.inject_ns + 30 * SECOND) & (s.start_ns < root.end_ns)])
    assert 0.6 * root.magnitude < b / d < 1.6 * root.magnitude
