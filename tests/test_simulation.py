"""The fault-injection simulator: determinism, truth nodes in the graph, and each fault's signal
against its own baseline (contract sections 3 and 6)."""

from __future__ import annotations

import math
from functools import cache

import networkx as nx
import numpy as np
import pytest

from rca.graph.service_graph import ServiceGraph
from rca.graph.view import Window, graph_between
from rca.telemetry.faults import Fault
from rca.telemetry.spans import SpanBatch
from simulation import SCENARIOS, SimulatedCase, simulate
from simulation.calltree import expand
from simulation.faults import CallChange, Echo, FaultPlan
from simulation.invocations import SEQ
from simulation.scenarios import compiled

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
    assert {f"llm-{f}-double" for f in (*llm_faults, "nccl_communication", "numa_mismatch")} <= names
    assert not any(s.startswith(("boutique-gpu", "mesh200-nccl")) for s in names)
    assert {"llm-nccl_communication-peers", "boutique-latency-partial", "mesh200-errors-lowtraffic"} <= names
    assert {"llm-latency-datastore", "llm-errors-datastore"} <= names


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
    assert 10_000 <= case(scenario).spans <= 100_000


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_truth_node_is_in_the_graph_and_owned_by_the_truth_service(scenario: str) -> None:
    c = simulate(scenario, seed=2, rate=compiled(scenario.split("-")[0]).topology.default_rate / 4)
    t = c.truth
    graph = ServiceGraph(retention_seconds=86_400.0)
    for batch in c.batches:
        assert len(batch) and int(batch.start_ns.min()) >= c.start_ns and int(batch.start_ns.max()) < c.end_ns
        graph.add(batch)
    view = graph_between(graph, Window(c.start_ns, c.end_ns))
    for root in t.roots:
        assert root.node in view and view.nodes[root.node]["service"] == root.service
        assert view.nodes[root.service]["kind"] == ("virtual" if scenario.endswith("-datastore") else "service")
        assert root.node.startswith("gpu:") == (root.fault in ("gpu_memory_bandwidth", "kv_cache_fragmentation"))
        assert c.start_ns + 300 * SECOND < root.inject_ns < root.end_ns < c.end_ns
    assert (t.roots[0].node, t.roots[0].fault, t.roots[0].service) == (t.node, t.fault, t.service)
    assert len(t.roots) == (2 if scenario.endswith("-double") else 1)
    assert set(t.alert_services) <= set(compiled(t.topology).topology.user_facing) and t.alert_services
    services = {s for b in c.batches for s in (b.strings[i] for i in np.unique(b.service))}
    assert t.services >= len(services) and t.profile == "default"
    assert t.layout.startswith("tp") == (t.topology == "llm")
    batch_starts = [int(b.start_ns[0]) for b in c.batches]
    assert batch_starts == sorted(batch_starts)


def test_targets_spread_over_depths_not_only_leaves() -> None:
    ct = compiled("mesh200")
    depths = {int(ct.service_depth[ct.service_index[case("mesh200-latency", s, 0.1).truth.service]]) for s in range(12)}
    assert len(depths) >= 3
    internal = [case("boutique-errors", s, 0.1).truth.service for s in range(12)]
    assert {"checkoutservice", "cartservice"} & set(internal)


def strong_seed(scenario: str, at_least: float) -> int:
    """The first seed whose (primary) fault is at least `at_least` strong."""
    return next(s for s in range(1, 200) if simulate(scenario, seed=s, rate=0.05).truth.roots[0].magnitude >= at_least)


def test_gpu_memory_bandwidth_saturates_the_faulty_gpu_only() -> None:
    seed = strong_seed("llm-gpu_memory_bandwidth", 4.0)
    before, during = graphs("llm-gpu_memory_bandwidth", seed)
    root = case("llm-gpu_memory_bandwidth", seed).truth.roots[0]
    utilization = "gpu_dram_utilization"
    headroom = (1 - signal(before, root.node, utilization)) / (1 - signal(during, root.node, utilization))
    assert 0.6 * root.magnitude < headroom < 1.6 * root.magnitude
    assert signal(during, root.node, "gpu_dram_bytes") > signal(before, root.node, "gpu_dram_bytes")
    for other in (n for n in during if n.startswith("gpu:") and n != root.node):
        assert abs(signal(during, other, utilization) - signal(before, other, utilization)) < 0.06


def test_kv_cache_fragmentation_shows_in_blocks_and_l2() -> None:
    seed = strong_seed("llm-kv_cache_fragmentation", 4.0)
    before, during = graphs("llm-kv_cache_fragmentation", seed)
    root = case("llm-kv_cache_fragmentation", seed).truth.roots[0]
    allocation = signal(before, root.node, "kv_block_allocation_rate") / signal(
        during, root.node, "kv_block_allocation_rate"
    )
    assert 0.6 * root.magnitude**0.5 < allocation < 1.6 * root.magnitude**0.5
    block = signal(before, root.node, "kv_avg_block_size") / signal(during, root.node, "kv_avg_block_size")
    assert 0.6 * root.magnitude < block < 1.6 * root.magnitude
    assert signal(during, root.node, "gpu_l2_sectors") > 1.4 * signal(before, root.node, "gpu_l2_sectors")


def test_priority_inversion_makes_urgent_requests_wait_longer_than_ordinary() -> None:
    seed = strong_seed("llm-scheduler_priority_inversion", 3.0)
    before, during = graphs("llm-scheduler_priority_inversion", seed)
    root = case("llm-scheduler_priority_inversion", seed).truth.roots[0]
    assert root.node.startswith("vllm-engine")
    assert signal(before, root.node, "queue_time_urgent") < signal(before, root.node, "queue_time_ordinary")
    ratio = signal(during, root.node, "queue_time_urgent") / signal(during, root.node, "queue_time_ordinary")
    assert ratio > 0.5 * root.magnitude


def test_numa_mismatch_on_the_faulty_worker() -> None:
    seeds = [s for s in range(1, 60) if simulate("llm-numa_mismatch", seed=s, rate=0.05).truth.roots[0].magnitude > 3]
    modes = set()
    for seed in seeds[:4]:
        before, during = graphs("llm-numa_mismatch", seed)
        root = case("llm-numa_mismatch", seed).truth.roots[0]
        modes.add(root.mode)
        assert signal(during, root.node, "numa_remote_ratio") > signal(before, root.node, "numa_remote_ratio") + 0.1
        if root.mode == "misplaced":
            assert signal(during, root.node, "numa_mismatch") > 0.95
        for other in (n for n in during if n.startswith("vllm-worker") and n != root.node):
            assert signal(during, other, "numa_mismatch") == signal(before, other, "numa_mismatch")
    assert modes == {"misplaced", "spilled"}


@pytest.mark.parametrize("scenario", ["llm-latency", "boutique-latency", "mesh200-latency"])
def test_latency_raises_the_faulty_service_self_time(scenario: str) -> None:
    seed = strong_seed(scenario, 3.0)
    before, during = graphs(scenario, seed)
    root = case(scenario, seed, _rate(scenario)).truth.roots[0]
    rise = during.nodes[root.node]["self_time_mean_s"] / before.nodes[root.node]["self_time_mean_s"]
    assert rise > 1 + 0.4 * (root.magnitude - 1)


@pytest.mark.parametrize("scenario", ["llm-errors", "boutique-errors", "mesh200-errors", "boutique-errors-partial"])
def test_errors_raise_the_faulty_service_error_rate(scenario: str) -> None:
    seed = strong_seed(scenario, 0.15)
    before, during = graphs(scenario, seed)
    root = case(scenario, seed, _rate(scenario)).truth.roots[0]
    share = 0.5 if scenario.endswith("partial") else 1.0  # one replica of two or three
    rise = during.nodes[root.node]["error_rate"] - before.nodes[root.node]["error_rate"]
    assert rise > 0.25 * share * root.magnitude


def test_partial_latency_hits_a_share_of_the_calls() -> None:
    seed = strong_seed("boutique-latency-partial", 4.0)
    before, during = graphs("boutique-latency-partial", seed)
    service = case("boutique-latency-partial", seed).truth.node
    ratio = during.nodes[service]["self_time_mean_s"] / before.nodes[service]["self_time_mean_s"]
    p50 = during.nodes[service]["latency_p50_s"] / before.nodes[service]["latency_p50_s"]
    assert ratio > 1.2 and p50 < ratio  # the mean moves, most calls (other replicas) do not


@pytest.mark.parametrize(
    ("scenario", "seed"),
    [("llm-call_structure", 1), ("mesh200-call_structure", 1), *(("boutique-call_structure", s) for s in (1, 2, 3, 4))],
)
def test_call_structure_changes_the_calls_per_request_of_the_faulty_service(scenario: str, seed: int) -> None:
    before, during = graphs(scenario, seed)
    root = case(scenario, seed, _rate(scenario)).truth.roots[0]
    service = root.node

    def per_call(graph: nx.DiGraph) -> dict[str, float]:
        calls = graph.nodes[service]["calls"]
        return {callee: d["calls"] / calls for _, callee, d in graph.out_edges(service, data=True)}

    b, d = per_call(before), per_call(during)
    change = max(abs(math.log((d.get(k, 0.0) + 1e-3) / (b.get(k, 0.0) + 1e-3))) for k in b | d)
    assert change > 0.3 * root.magnitude  # the changed share of its requests


def test_low_traffic_target_is_a_rarely_called_leaf() -> None:
    c = case("mesh200-errors-lowtraffic", 1, _rate("mesh200"))
    ct = compiled("mesh200")
    visits = ct.service_visits[ct.service_index[c.truth.service]]
    assert visits < np.median(ct.service_visits)
    _, during = graphs("mesh200-errors-lowtraffic")
    assert during.out_degree(c.truth.node) == 0 or all(
        during.nodes[n]["kind"] == "virtual" for n in during.successors(c.truth.node)
    )
    # a handful of calls a minute (whether its errors show depends on the drawn error share)
    assert 0 < during.nodes[c.truth.node]["calls"] < np.median([during.nodes[n]["calls"] for n in during])


def test_noisy_services_are_noisy_when_healthy() -> None:
    before, _ = graphs("boutique-latency")
    ad = before.nodes["adservice"]
    assert ad["error_rate"] > 0.01 and ad["latency_p95_s"] > 2.5 * ad["latency_p50_s"]


def test_children_start_and_end_inside_their_parents() -> None:
    s = spans(case("llm-nccl_communication"))
    order = np.argsort(s.span_id)
    has = s.parent_id != 0
    parent = order[np.searchsorted(s.span_id[order], s.parent_id[has])]
    assert np.array_equal(s.span_id[parent], s.parent_id[has])
    assert (s.start_ns[has] >= s.start_ns[parent]).all() and (s.end_ns[has] <= s.end_ns[parent]).all()
    assert np.array_equal(s.trace_id[has], s.trace_id[parent])


def test_a_code_defects_changed_requests_send_its_callee_down_another_branch() -> None:
    # frontend's GET /product/{id} stops making its first call on 70 % of its requests; the
    # changed requests reach ListRecommendations, which skips its own call on 60 % of them.
    ct = compiled("boutique")
    op, recommend = (
        ct.op_index[("frontend", "GET /product/{id}")],
        ct.op_index[("recommendationservice", "ListRecommendations")],
    )
    echo = Echo(recommend, 0, 0.6)
    frontend = ct.service_index["frontend"]
    where = ("frontend", "frontend", frontend, 0, SECOND)
    plan = FaultPlan(Fault.CALL_STRUCTURE, *where, 0.7, operation=op, call=0, change=CallChange.MISSING, echo=echo)
    tree = expand(ct, plan, np.random.default_rng(7), np.full(2000, op), np.zeros(2000, np.int64))
    parent = np.maximum(tree.parent, 0)
    reached = (tree.op == recommend) & (tree.parent >= 0)
    assert not (tree.echoed & ~(reached & tree.changed[parent])).any()  # only what the changed requests reach
    assert 0.5 < tree.echoed[reached & tree.changed[parent]].mean() < 0.7
    its_call = (tree.parent >= 0) & (tree.op == int(ct.calls[recommend][0, 0]))
    called = np.bincount(parent[its_call], minlength=len(tree.op)) > 0
    assert not called[tree.echoed].any()  # the skipped call
    assert called[reached & ~tree.echoed].all()  # made on every other request (p = 1)


def test_a_caught_exception_skips_the_handlers_later_calls_on_the_requests_it_catches() -> None:
    # frontend's GET /product/{id} makes its six calls on every request; an errors fault failing
    # half of them is caught on 80 % of those, before the third call.
    ct = compiled("boutique")
    op = ct.op_index[("frontend", "GET /product/{id}")]
    where = ("frontend", "frontend", ct.service_index["frontend"], 0, SECOND)
    plan = FaultPlan(Fault.ERRORS, *where, 0.5, operation=op, call=2, caught=0.8)
    tree = expand(ct, None, np.random.default_rng(7), np.full(2000, op), np.zeros(2000, np.int64), caught=plan)
    roots = np.flatnonzero(tree.parent < 0)
    assert 0.35 < tree.caught[roots].mean() < 0.45 and not tree.caught[tree.parent >= 0].any()
    child = (tree.parent >= 0) & (tree.parent < roots.shape[0])  # the roots' own calls
    calls = np.zeros((roots.shape[0], len(ct.calls[op])), np.bool_)
    calls[tree.parent[child], tree.seq[child] // SEQ] = True
    assert calls[tree.caught[roots]].sum(axis=1).tolist() == [2] * int(tree.caught[roots].sum())
    assert calls[tree.caught[roots]][:, :2].all() and calls[~tree.caught[roots]].all()
