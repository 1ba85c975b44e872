"""Domain randomisation in the simulator: layouts and levels drawn per case, how calls pass on
failures, grow with load and cross the network, hot-but-healthy services and GPUs, incidents with
no LLM fault, overlapping roots, the differently configured `shifted` profile, the training and
calibration sets' sizes and seeds, and no constant shared with rca's evidence gates."""

from __future__ import annotations

import ast
from collections import Counter
from functools import cache
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from benchmarks.cases import HELD_OUT_SEEDS, suite_cases
from models.training import CALIBRATION_SEEDS, TRAINING_SCENARIOS, TRAINING_SEEDS, training_case, training_plan
from rca.graph.service_graph import ServiceGraph
from rca.graph.view import Window, graph_between
from rca.telemetry.faults import Fault
from rca.telemetry.spans import Signal
from simulation import SCENARIOS, SimulatedCase, Truth, simulate
from simulation.conditions import Conditions
from simulation.faults import LLM_FAULTS
from simulation.profiles import DEFAULT, SHIFTED
from simulation.scenarios import compiled, parse
from simulation.topologies import LlmLayout, engines

SECOND = 1_000_000_000
ROOT = Path(__file__).resolve().parents[1]


@cache
def case(scenario: str, seed: int, profile: str = "default", rate: float | None = 0.5) -> SimulatedCase:
    return simulate(scenario, seed=seed, rate=rate, profile=profile)


def views(c: SimulatedCase, inject_ns: int, end_ns: int) -> tuple[nx.DiGraph, nx.DiGraph]:
    graph = ServiceGraph(window_seconds=5.0, retention_seconds=86_400.0)
    for batch in c.batches:
        graph.add(batch)
    before = graph_between(graph, Window(c.start_ns, inject_ns - 10 * SECOND))
    during = graph_between(graph, Window(inject_ns + 30 * SECOND, end_ns))
    return before, during


def test_layouts_vary_per_case_tp_2_4_8_and_one_or_two_replicas() -> None:
    layouts = {case("llm-errors", seed, rate=0.05).truth.layout for seed in range(1, 41)}
    assert {layout.split("x")[0] for layout in layouts} == {"tp2", "tp4", "tp8"}
    assert {layout.split("x")[1] for layout in layouts} == {"1", "2"}


def test_two_replicas_have_their_own_engines_gpus_and_communicators() -> None:
    seed = next(s for s in range(1, 60) if case("llm-errors", s, rate=0.05).truth.layout.endswith("x2"))
    c = case("llm-errors", seed)
    names = set(c.batches[0].strings).union(*(b.strings for b in c.batches))
    assert {"vllm-engine", "vllm-engine-b"} <= names
    tp = int(c.truth.layout[2:].split("x")[0])
    assert {f"gpu:gpu-node-1/{k}" for k in range(tp)} | {f"gpu:gpu-node-2/{k}" for k in range(tp)} <= names
    assert {f"vllm-worker-b-{k}" for k in range(tp)} <= names
    two = engines(LlmLayout(tp, 2))
    assert len({e.comm_id for e in two}) == 2 and {e.host for e in two} == {"gpu-node-1", "gpu-node-2"}


def test_healthy_levels_are_drawn_wide_and_some_gpus_run_hot_but_steady() -> None:
    levels, hot_and_steady = [], 0
    for seed in range(1, 16):
        c = case("llm-errors", seed, rate=0.3)
        before, during = views(c, c.truth.inject_ns, c.truth.end_ns)
        for node in (n for n in before if str(n).startswith("gpu:")):
            b = before.nodes[node]["signals"]["gpu_dram_utilization"]["mean"]
            d = during.nodes[node]["signals"]["gpu_dram_utilization"]["mean"]
            levels.append(b)
            hot_and_steady += b > 0.82 and abs(d - b) < 0.05
    assert min(levels) < 0.45 and max(levels) > 0.82 and hot_and_steady >= 1


def test_call_physics_is_drawn_per_case_and_passing_on_failures_per_operation() -> None:
    ct = compiled("boutique")
    drawn = [Conditions.draw(ct, DEFAULT, np.random.default_rng(seed)) for seed in range(12)]
    propagation = np.stack([c.op_propagation for c in drawn])
    assert propagation.shape == (12, len(ct.calls))
    r = DEFAULT.error_propagation
    assert r.lo <= propagation.min() and propagation.max() <= r.hi
    assert propagation.min() < 0.35 and propagation.max() > 0.75  # some operations swallow, some rethrow
    for name, values in (
        ("load_exponent", [c.load_exponent for c in drawn]),
        ("network_s", [c.network_s for c in drawn]),
        ("transient_failures", [c.transient_failures for c in drawn]),
    ):
        spread = getattr(DEFAULT, name)
        assert spread.lo <= min(values) and max(values) <= spread.hi and len(set(values)) == 12, name
    neutral = Conditions.neutral(ct)
    assert set(neutral.op_propagation.tolist()) == {0.5} and neutral.load_exponent == 0.3


def test_busy_services_are_slow_but_unchanged() -> None:
    seed = next(s for s in range(1, 40) if case("boutique-errors", s).truth.hot_services)
    c = case("boutique-errors", seed)
    hot = [s for s in c.truth.hot_services if s != c.truth.service]
    before, during = views(c, c.truth.inject_ns, c.truth.end_ns)
    for service in (s for s in hot if s in before and s in during):
        b, d = before.nodes[service]["self_time_mean_s"], during.nodes[service]["self_time_mean_s"]
        assert 0.6 < d / b < 1.6


def test_incidents_without_an_llm_fault_hit_a_datastore_of_the_llm_stack() -> None:
    c = case("llm-latency-datastore", 1, rate=None)
    t = c.truth
    assert t.fault == "latency" and t.node == t.service and t.node in ("qdrant", "redis", "postgresql")
    before, during = views(c, t.inject_ns, t.end_ns)
    assert during.nodes[t.node]["kind"] == "virtual"
    callers = [u for u, _ in during.in_edges(t.node)]
    assert callers and all(not str(u).startswith("vllm") for u in callers)
    for caller in callers:  # every client call to it is slower, by about the fault's size
        rise = during.edges[caller, t.node]["latency_mean_s"] / before.edges[caller, t.node]["latency_mean_s"]
        assert 0.4 * t.roots[0].magnitude < rise < 2.5 * t.roots[0].magnitude


def test_overlapping_faults_carry_both_roots() -> None:
    for fault in sorted(LLM_FAULTS):
        t = case(f"llm-{fault}-double", 1, rate=0.2).truth
        first, second = t.roots
        assert (first.node, first.fault) == (t.node, t.fault) and len(t.roots) == 2
        assert second.fault in ("latency", "errors") and second.service not in (first.service, "vllm-engine")
        assert not second.service.startswith("vllm-")
        assert second.inject_ns < first.end_ns and first.inject_ns < second.end_ns  # they overlap


def test_the_second_root_shows_in_its_own_service() -> None:
    seed = next(s for s in range(1, 40) if case("llm-gpu_memory_bandwidth-double", s).truth.roots[1].magnitude > 0.2)
    c = case("llm-gpu_memory_bandwidth-double", seed, rate=None)
    second = c.truth.roots[1]
    before, during = views(c, second.inject_ns, second.end_ns)
    node = during.nodes[second.service]
    if second.fault == "latency":
        assert node["self_time_mean_s"] > 1.2 * before.nodes[second.service]["self_time_mean_s"]
    else:
        assert node["error_rate"] > before.nodes[second.service]["error_rate"] + 0.05


def test_the_shifted_profile_is_configured_differently() -> None:
    assert SHIFTED != DEFAULT and SHIFTED.token_keys != DEFAULT.token_keys
    assert SHIFTED.priority_encoding != DEFAULT.priority_encoding and SHIFTED.mesh_variant != DEFAULT.mesh_variant
    seeds = range(1, 101)
    default = [case("llm-errors", s, rate=0.02).truth for s in seeds]
    shifted = [case("llm-errors", s, "shifted", 0.02).truth for s in seeds]
    assert all(t.profile == "shifted" for t in shifted) and all(t.profile == "default" for t in default)

    def mean_tp(truths: list[Truth]) -> float:
        return float(np.mean([int(t.layout[2:].split("x")[0]) for t in truths]))

    assert mean_tp(shifted) > mean_tp(default)
    assert sum(t.layout.endswith("x2") for t in shifted) > sum(t.layout.endswith("x2") for t in default)
    assert np.mean([len(t.hot_services) for t in shifted]) > np.mean([len(t.hot_services) for t in default])
    a, b = case("llm-errors", 1), case("llm-errors", 1, "shifted")
    assert a.truth.inject_ns != b.truth.inject_ns or a.spans != b.spans
    mesh = (compiled("mesh200", None, DEFAULT.mesh_variant), compiled("mesh200", None, SHIFTED.mesh_variant))
    edges = [{(o.service, c.service) for o in m.topology.operations for c in o.calls} for m in mesh]
    assert edges[0] != edges[1]  # the shifted mesh is wired differently


def test_shifted_prompt_lengths_spread_wider() -> None:
    medians: list[list[float]] = []
    for profile in ("default", "shifted"):
        per_case = []
        for seed in range(1, 9):
            c = case("llm-errors", seed, profile, 0.3)
            per_case.append(float(np.nanmedian(np.concatenate([b.signals[:, Signal.INPUT_TOKENS] for b in c.batches]))))
        medians.append(per_case)
    assert np.std(np.log(medians[1])) > np.std(np.log(medians[0]))


def test_unknown_profile_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown profile"):
        simulate("llm-errors", seed=1, profile="nope")


def test_the_training_set_has_at_least_20_cases_per_class_from_its_own_seeds() -> None:
    plan = training_plan()
    per_class = Counter(parse(s)[1] for s, _ in plan)
    assert {f: per_class[f] for f in Fault if per_class[f] < 20} == {}
    assert not set(TRAINING_SEEDS) & set(HELD_OUT_SEEDS)
    assert not {seed for _, seed in plan} & set(HELD_OUT_SEEDS)
    assert not set(CALIBRATION_SEEDS) & ({seed for _, seed in plan} | set(HELD_OUT_SEEDS))
    assert all(s in SCENARIOS and not s.endswith("-double") for s in TRAINING_SCENARIOS)
    _, alerts, node, fault = training_case("llm-kv_cache_fragmentation", TRAINING_SEEDS[0])
    assert fault == "kv_cache_fragmentation" and node.startswith("gpu:") and alerts


def test_the_shifted_bench_suite_holds_held_out_shifted_cases() -> None:
    first = next(suite_cases("shifted", 1_800_000_000 * SECOND, logs=False))
    assert first.case_id.endswith("@shifted") and f"#{HELD_OUT_SEEDS[0]}" in first.case_id


def test_the_simulator_imports_nothing_from_the_evidence_code() -> None:
    """No constant is shared with rca's evidence gates: the simulator draws its own levels."""
    paths = sorted((ROOT / "simulation").rglob("*.py"))
    assert len(paths) > 10
    for path in paths:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom):
                names = [node.module or "", *(f"{node.module}.{a.name}" for a in node.names)]
            assert not any(n.startswith(("rca.evidence", "models")) for n in names), path
