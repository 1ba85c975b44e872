"""The published RCAEval methods as `rca bench` peers: each finds the known cause of a hand-built case,
and all run on a simulated one (in process)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from benchmarks.accuracy import LOOKBACK_NS, METHODS, REPLAY_PAST_ALERT_NS, START_NS
from benchmarks.cases import BenchCase, simulated_cases
from benchmarks.rcaeval_peers import GRAPH_PEERS, SPAN_PEERS, MissingExtraError, prepare
from rca.graph.service_graph import ServiceGraph
from rca.telemetry.builder import SpanBatchBuilder
from rca.telemetry.spans import SpanBatch

pytest.importorskip("RCAEval", reason="the optional 'bench' extra is not installed")

MS = 1_000_000
END_NS = START_NS + LOOKBACK_NS  # the peers take the window's middle as the onset
ONSET_NS = (START_NS + END_NS) // 2
TRACES = 1200  # one request every 250 ms: 40 per 10 s graph window
SLOWER_MS = 200.0  # payment's own latency after the onset, on top of its usual 20 ms


def slow_payment(share_before: float, share_after: float) -> SpanBatch:
    """Requests to `frontend` (10 ms of its own), a `share` of which call `payment` (20 ms); from the
    onset on, payment takes `SLOWER_MS` longer and nothing else changes but the share. Seeded jitter."""
    rng = np.random.default_rng(0)
    builder = SpanBatchBuilder()
    for k in range(TRACES):
        start = START_NS + k * (LOOKBACK_NS // TRACES)
        after = start >= ONSET_NS
        calls = rng.random() < (share_after if after else share_before)
        child = int((rng.normal(20.0, 2.0) + (SLOWER_MS if after else 0.0)) * MS) if calls else 0
        own = int(rng.normal(10.0, 1.0) * MS)
        trace, root, leaf = (k + 1).to_bytes(16, "big"), (2 * k + 1).to_bytes(8, "big"), (2 * k + 2).to_bytes(8, "big")
        builder.add(trace, root, b"", "frontend", "GET /", 2, start, start + own + child, False, {}, {})
        if calls:
            at = start + own // 2
            builder.add(trace, leaf, root, "payment", "charge", 2, at, at + child, False, {}, {})
    return builder.build().batch


def test_the_peers_are_bench_methods() -> None:
    assert {"baro", "nsigma", "microrank", "tracerca"} <= set(METHODS)


@pytest.mark.parametrize("name", sorted(GRAPH_PEERS))
def test_metric_peers_put_the_service_whose_latency_jumped_first(name: str) -> None:
    """Half the requests call payment before and after the onset: payment's latency jumps tenfold,
    frontend's (shared with its calls that skip payment) by less and with more spread."""
    graph = ServiceGraph(retention_seconds=3600.0)
    graph.add(slow_payment(0.5, 0.5))
    assert GRAPH_PEERS[name](graph, ["frontend"], START_NS, END_NS) == ["payment", "frontend"]


def test_tracerca_puts_the_operation_in_every_slow_trace_first() -> None:
    """After the onset every payment span is slow, and frontend is slow only where it calls payment:
    both have the same support among abnormal spans, payment twice frontend's confidence."""
    ranked = SPAN_PEERS["tracerca"]([slow_payment(0.5, 0.5)], ["frontend"], START_NS, END_NS)
    assert ranked == ["payment", "frontend"]


def test_microrank_puts_the_operation_the_slow_traces_go_through_first() -> None:
    """RCAEval's MicroRank weighs operations by their PageRank in the traces after the onset against
    those before (slow traces enter only as their count), so the case that has a known answer moves
    the traffic: payment, in a tenth of the requests before, is in all of them, slow, after."""
    ranked = SPAN_PEERS["microrank"]([slow_payment(0.1, 1.0)], ["frontend"], START_NS, END_NS)
    assert ranked == ["payment", "frontend"]


@pytest.fixture(scope="module")
def simulated() -> tuple[BenchCase, ServiceGraph, int, int]:
    case = next(simulated_cases(("boutique-latency",), (101,), START_NS))
    end = case.alert_ns + REPLAY_PAST_ALERT_NS
    graph = ServiceGraph(retention_seconds=3600.0)
    for batch in case.batches:
        graph.add(batch.select(batch.start_ns < end))
    return case, graph, case.alert_ns - LOOKBACK_NS, end


@pytest.mark.parametrize("name", sorted({*GRAPH_PEERS, *SPAN_PEERS}))
def test_peers_run_on_a_simulated_case_and_name_only_its_services(
    name: str, simulated: tuple[BenchCase, ServiceGraph, int, int]
) -> None:
    case, graph, start, end = simulated
    if name in GRAPH_PEERS:
        ranked = GRAPH_PEERS[name](graph, case.alert_services, start, end)
    else:
        ranked = SPAN_PEERS[name](case.batches, case.alert_services, start, end)
    assert ranked and len(set(ranked)) == len(ranked) and set(ranked) <= set(graph.names.nodes)


def test_a_missing_extra_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "RCAEval" else real(name, *a))
    prepare(["rca", "threshold"])  # no RCAEval method asked for: nothing to say
    with pytest.raises(MissingExtraError, match=r"baro.*'bench' extra.*RCAEval"):
        prepare(["rca", "baro"])
