"""The fault-injection simulator: determinism, truth nodes in the graph, and each fault's signal
against its own baseline (contract sections 3 and 6)."""

from __future__ import annotations

import math
from functools import cache

import networkx as nx
import numpy as np
import pytest

from rca.graph import ServiceGraph
from rca.graphview import Window, graph_between
from rca.simulation import SCENARIOS, SimulatedCase, simulate
from rca.simulation.scenarios import compiled
from rca.spans import SpanBatch

SECOND = 1_000_000_000
KIB = 1024


@cache
def case(scenario: str, seed: int = 1, rate: float | None = None) -> SimulatedCase:
    return simulate(scenario, seed=seed, rate=rate)


@cache
def graphs(scenario: str, seed: int = 1) -> tuple[nx.DiGraph, nx.DiGraph]:
    """The graph before the fault and during it (from 30 s after injection); meshes at half rate."""
    c = case(scenario, seed, _rate(scenario))
    graph = ServiceGraph(window_seconds=5.0, retention_seconds=86_400.0)
    for batch in c.batches:
        graph.add(batch)
    t = c.truth
    before = graph_between(graph, Window(c.start_ns, t.inject_ns - 10 * SECOND))
    during = graph_between(graph, Window(t.inject_ns + 30 * SECOND, t.end_ns))
    return before, during


def _rate(scenario: str) -> float | None:
    topology = scenario.split("-")[0]
    return compiled(topology).topology.default_rate / 2 if topology.startswith("mesh") else None


def signal(graph: nx.DiGraph, node: str, name: str) -> float:
    return float(graph.nodes[node]["signals"][name]["mean"])


def spans(c: SimulatedCase) -> SpanBatch:
    return SpanBatch(
        **{
            name: np.concatenate([getattr(b, name) for b in c.batches])
            for name in SpanBatch.__dataclass_fields__
            if name != "strings"
        },
        strings=c.batches[0].strings,
    )


def test_scenarios_cover_every_fault_on_every_topology_where_it_makes_sense() -> None:
    names = set(SCENARIOS)
    for topology in ("llm", "boutique", "mesh200", "mesh1000"):
        assert {f"{topology}-latency", f"{topology}-errors", f"{topology}-call_structure"} <= names
    llm_faults = ("gpu_memory_bandwidth", "kv_cache_fragmentation", "scheduler_priority_inversion")
    assert {f"llm-{f}" for f in (*llm_faults, "nccl_communication", "numa_mismatch")} <= names
    assert not any(s.startswith(("boutique-gpu", "mesh200-nccl")) for s in names)
    assert {"llm-nccl_communication-peers", "boutique-latency-partial", "mesh200-errors-lowtraffic"} <= names


def test_same_seed_same_case_other_seed_other_case() -> None:
    a, b = simulate("boutique-errors", seed=7, rate=1.0), simulate("boutique-errors", seed=7, rate=1.0)
    assert a.truth == b.truth and a.webhooks == b.webhooks and a.webhook_times_ns == b.webhook_times_ns
    assert len(a.batches) == len(b.batches)
    for x, y in zip(a.batches, b.batches, strict=True):
        assert np.array_equal(x.span_id, y.span_id) and np.array_equal(x.start_ns, y.start_ns)
        assert np.array_equal(x.signals, y.signals, equal_nan=True) and x.strings == y.strings
    c = simulate("boutique-errors", seed=8, rate=1.0)
    assert c.start_ns != a.start_ns and not np.array_equal(c.batches[0].span_id, a.batches[0].span_id)


def test_start_and_rate_are_honoured() -> None:
    low = simulate("llm-latency", seed=3, start_ns=1_800_000_000 * SECOND, rate=0.5)
    high = simulate("llm-latency", seed=3, start_ns=1_800_000_000 * SECOND, rate=2.0)
    assert low.start_ns == 1_800_000_000 * SECOND
    assert min(int(b.start_ns.min()) for b in low.batches) >= low.start_ns
    assert 3.0 < high.spans / low.spans < 5.0


@pytest.mark.parametrize("scenario", ["llm-latency", "boutique-latency", "mesh200-latency"])
def test_default_rate_gives_a_ci_sized_case(scenario: str) -> None:
    assert 15_000 <= case(scenario).spans <= 70_000


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_truth_node_is_in_the_graph_and_owned_by_the_truth_service(scenario: str) -> None:
    c = simulate(scenario, seed=2, rate=compiled(scenario.split("-")[0]).topology.default_rate / 4)
    t = c.truth
    graph = ServiceGraph(retention_seconds=86_400.0)
    for batch in c.batches:
        assert len(batch) and int(batch.start_ns.min()) >= c.start_ns and int(batch.start_ns.max()) < c.end_ns
        graph.add(batch)
    view = graph_between(graph, Window(c.start_ns, c.end_ns))
    assert t.node in view and view.nodes[t.node]["service"] == t.service
    assert view.nodes[t.service]["kind"] == "service"
    assert t.node.startswith("gpu:") == (t.fault in ("gpu_memory_bandwidth", "kv_cache_fragmentation"))
    assert set(t.alert_services) <= set(compiled(t.topology).topology.user_facing) and t.alert_services
    assert c.start_ns + 300 * SECOND < t.inject_ns < t.end_ns < c.end_ns
    assert t.services == len(compiled(t.topology).services)
    batch_starts = [int(b.start_ns[0]) for b in c.batches]
    assert batch_starts == sorted(batch_starts)


def test_targets_spread_over_depths_not_only_leaves() -> None:
    ct = compiled("mesh200")
    depths = {int(ct.service_depth[ct.service_index[case("mesh200-latency", s, 0.1).truth.service]]) for s in range(12)}
    assert len(depths) >= 3
    internal = [case("boutique-errors", s, 0.1).truth.service for s in range(12)]
    assert {"checkoutservice", "cartservice"} & set(internal)


def test_gpu_memory_bandwidth_saturates_the_faulty_gpu_only() -> None:
    before, during = graphs("llm-gpu_memory_bandwidth")
    node = case("llm-gpu_memory_bandwidth").truth.node
    assert signal(before, node, "gpu_dram_utilization") < 0.75 < 0.9 < signal(during, node, "gpu_dram_utilization")
    assert signal(during, node, "gpu_dram_bytes") > 1.3 * signal(before, node, "gpu_dram_bytes")
    assert during.nodes[node]["latency_p50_s"] > before.nodes[node]["latency_p50_s"]
    for other in (n for n in during if n.startswith("gpu:") and n != node):
        assert signal(during, other, "gpu_dram_utilization") < 0.8


def test_kv_cache_fragmentation_shows_in_blocks_and_l2() -> None:
    before, during = graphs("llm-kv_cache_fragmentation")
    node = case("llm-kv_cache_fragmentation").truth.node
    allocation = "kv_block_allocation_rate"
    assert signal(before, node, allocation) > 0.95 > 0.7 > signal(during, node, allocation)
    assert signal(before, node, "kv_avg_block_size") > 128 * KIB > 32 * KIB > signal(during, node, "kv_avg_block_size")
    assert signal(during, node, "gpu_l2_sectors") > 1.5 * signal(before, node, "gpu_l2_sectors")


def test_priority_inversion_makes_urgent_requests_wait_longer_than_ordinary() -> None:
    before, during = graphs("llm-scheduler_priority_inversion")
    engine = case("llm-scheduler_priority_inversion").truth.node
    assert engine == "vllm-engine"
    assert signal(before, engine, "queue_time_urgent") < signal(before, engine, "queue_time_ordinary")
    assert signal(during, engine, "queue_time_urgent") > 2 * signal(during, engine, "queue_time_ordinary")


def _worker_spans(c: SimulatedCase, worker: str, during: bool) -> dict[str, dict[int, tuple[int, int]]]:
    """Per operation of one worker, {engine parent span: (start, end)} before or during the fault."""
    s = spans(c)
    index = {v: i for i, v in enumerate(s.strings)}
    t = c.truth
    window = (s.start_ns >= t.inject_ns + 30 * SECOND) & (s.start_ns < t.end_ns) if during else s.start_ns < t.inject_ns
    rows = np.flatnonzero((s.service == index[worker]) & window)
    out: dict[str, dict[int, tuple[int, int]]] = {}
    for row in rows.tolist():
        name = s.strings[s.operation[row]]
        out.setdefault(name, {})[int(s.parent_id[row])] = (int(s.start_ns[row]), int(s.end_ns[row]))
    return out


def _send_ns(c: SimulatedCase, worker: str, during: bool) -> float:
    return float(np.median([e - b for b, e in _worker_spans(c, worker, during)["nccl:Send"].values()]))


def _overlapping(c: SimulatedCase, worker: str, during: bool) -> float:
    """Share of requests whose AllReduce ends within the forward."""
    ops = _worker_spans(c, worker, during)
    forward, allreduce = ops["model_forward"], ops["nccl:AllReduce"]
    both = forward.keys() & allreduce.keys()
    return float(np.mean([allreduce[p][1] <= forward[p][1] for p in both]))


def test_nccl_contention_slows_the_faulty_rank_and_breaks_the_overlap() -> None:
    c = case("llm-nccl_communication")
    worker = c.truth.node
    assert _send_ns(c, worker, False) < 8_000 < 15_000 < _send_ns(c, worker, True)
    assert _overlapping(c, worker, False) > 0.99 and _overlapping(c, worker, True) < 0.01
    before, during = graphs("llm-nccl_communication")
    assert signal(during, worker, "nccl_latency") > 2 * signal(before, worker, "nccl_latency")


def test_nccl_peers_variant_makes_peers_wait_longest() -> None:
    c = case("llm-nccl_communication-peers")
    before, during = graphs("llm-nccl_communication-peers")
    worker = c.truth.node
    workers = [n for n in during if n.startswith("vllm-worker-")]
    rise = {w: signal(during, w, "nccl_latency") / signal(before, w, "nccl_latency") for w in workers}
    assert max(rise, key=rise.__getitem__) != worker  # the inherent hard case: a peer looks worst
    assert _send_ns(c, worker, True) > 12_000


def test_numa_mismatch_on_the_faulty_worker() -> None:
    before, during = graphs("llm-numa_mismatch")
    worker = case("llm-numa_mismatch").truth.node
    assert signal(before, worker, "numa_mismatch") < 0.02 and signal(during, worker, "numa_mismatch") > 0.95
    assert signal(before, worker, "numa_remote_ratio") < 0.15 < signal(during, worker, "numa_remote_ratio")
    for other in (n for n in during if n.startswith("vllm-worker-") and n != worker):
        assert signal(during, other, "numa_mismatch") == 0.0


@pytest.mark.parametrize("scenario", ["llm-latency", "boutique-latency", "mesh200-latency"])
def test_latency_raises_the_faulty_service_self_time(scenario: str) -> None:
    before, during = graphs(scenario)
    service = case(scenario).truth.node
    assert during.nodes[service]["self_time_mean_s"] > 1.8 * before.nodes[service]["self_time_mean_s"]


@pytest.mark.parametrize("scenario", ["llm-errors", "boutique-errors", "mesh200-errors", "boutique-errors-partial"])
def test_errors_raise_the_faulty_service_error_rate(scenario: str) -> None:
    before, during = graphs(scenario)
    service = case(scenario).truth.node
    assert during.nodes[service]["error_rate"] > before.nodes[service]["error_rate"] + 0.04


def test_partial_latency_hits_a_share_of_the_calls() -> None:
    before, during = graphs("boutique-latency-partial")
    service = case("boutique-latency-partial").truth.node
    ratio = during.nodes[service]["self_time_mean_s"] / before.nodes[service]["self_time_mean_s"]
    p50 = during.nodes[service]["latency_p50_s"] / before.nodes[service]["latency_p50_s"]
    assert ratio > 1.2 and p50 < ratio  # the mean moves, most calls (other replicas) do not


@pytest.mark.parametrize(
    ("scenario", "seed"),
    [("llm-call_structure", 1), ("mesh200-call_structure", 1), *(("boutique-call_structure", s) for s in (1, 2, 3, 4))],
)
def test_call_structure_changes_the_calls_per_request_of_the_faulty_service(scenario: str, seed: int) -> None:
    before, during = graphs(scenario, seed)
    service = case(scenario, seed, _rate(scenario)).truth.node

    def per_call(graph: nx.DiGraph) -> dict[str, float]:
        calls = graph.nodes[service]["calls"]
        return {callee: d["calls"] / calls for _, callee, d in graph.out_edges(service, data=True)}

    b, d = per_call(before), per_call(during)
    change = max(abs(math.log((d.get(k, 0.0) + 1e-3) / (b.get(k, 0.0) + 1e-3))) for k in b | d)
    assert change > math.log(1.5)


def test_low_traffic_target_is_a_rarely_called_leaf() -> None:
    c = case("mesh200-errors-lowtraffic", 1, _rate("mesh200"))
    ct = compiled("mesh200")
    visits = ct.service_visits[ct.service_index[c.truth.service]]
    assert visits < np.median(ct.service_visits)
    before, during = graphs("mesh200-errors-lowtraffic")
    assert during.out_degree(c.truth.node) == 0 or all(
        during.nodes[n]["kind"] == "virtual" for n in during.successors(c.truth.node)
    )
    assert during.nodes[c.truth.node]["error_rate"] > before.nodes[c.truth.node]["error_rate"]


def test_noisy_services_are_noisy_when_healthy() -> None:
    before, _ = graphs("boutique-latency")
    ad = before.nodes["adservice"]
    assert ad["error_rate"] > 0.01 and ad["latency_p95_s"] > 4 * ad["latency_p50_s"]


def test_children_start_and_end_inside_their_parents() -> None:
    s = spans(case("llm-nccl_communication"))
    order = np.argsort(s.span_id)
    has = s.parent_id != 0
    parent = order[np.searchsorted(s.span_id[order], s.parent_id[has])]
    assert np.array_equal(s.span_id[parent], s.parent_id[has])
    assert (s.start_ns[has] >= s.start_ns[parent]).all() and (s.end_ns[has] <= s.end_ns[parent]).all()
    assert np.array_equal(s.trace_id[has], s.trace_id[parent])
