"""The published RCAEval methods as `rca bench` peers, on one small simulated case (in process)."""

from __future__ import annotations

import importlib.util

import pytest

from benchmarks.accuracy import LOOKBACK_NS, METHODS, REPLAY_PAST_ALERT_NS, START_NS
from benchmarks.cases import BenchCase, simulated_cases
from benchmarks.rcaeval_peers import GRAPH_PEERS, SPAN_PEERS, MissingExtraError, prepare
from rca.graph import ServiceGraph
from rca.simulation.scenarios import compiled

pytest.importorskip("RCAEval", reason="the optional 'bench' extra is not installed")


@pytest.fixture(scope="module")
def case() -> tuple[BenchCase, ServiceGraph, int, int]:
    case = next(simulated_cases(("boutique-latency",), (101,), START_NS))
    end = case.alert_ns + REPLAY_PAST_ALERT_NS
    graph = ServiceGraph(retention_seconds=3600.0)
    for batch in case.batches:
        graph.add(batch.select(batch.start_ns < end))
    return case, graph, case.alert_ns - LOOKBACK_NS, end


def test_the_peers_are_bench_methods() -> None:
    assert {"baro", "nsigma", "microrank", "tracerca"} <= set(METHODS)


@pytest.mark.parametrize("name", sorted(GRAPH_PEERS))
def test_metric_peers_rank_the_case_services(name: str, case: tuple[BenchCase, ServiceGraph, int, int]) -> None:
    bench_case, graph, start, end = case
    ranked = GRAPH_PEERS[name](graph, bench_case.alert_services, start, end)
    known = set(graph.names.nodes)
    assert len(ranked) >= 5 and len(set(ranked)) == len(ranked) and set(ranked) <= known
    assert bench_case.truth_service in ranked


@pytest.mark.parametrize("name", sorted(SPAN_PEERS))
def test_trace_peers_rank_the_case_services(name: str, case: tuple[BenchCase, ServiceGraph, int, int]) -> None:
    bench_case, _, start, end = case
    ranked = SPAN_PEERS[name](bench_case.batches, bench_case.alert_services, start, end)
    services = set(compiled("boutique").services)
    assert ranked and len(set(ranked)) == len(ranked) and set(ranked) <= services


def test_a_missing_extra_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "RCAEval" else real(name, *a))
    prepare(["rca", "threshold"])  # no RCAEval method asked for: nothing to say
    with pytest.raises(MissingExtraError, match=r"baro.*'bench' extra.*RCAEval"):
        prepare(["rca", "baro"])
