"""`--prometheus-url` against a real Prometheus (Debian's `prometheus` and `promtool`, backfilled
with `tests.prometheus_case`): pulls put the metrics and the servicegraph calls in the graph once,
a ranking with no spans sent finds the callee that slowed, and one with Prometheus gone still answers."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from benchmarks.prometheus_backfill import PROMETHEUS, PROMTOOL, RunningPrometheus, backfilled
from ingest.prometheus import PrometheusPull
from models.ranker import BayesianRanker
from rca.graph.accumulators import SignalSum
from rca.graph.service_graph import ServiceGraph
from rca.graph.view import Window, graph_between
from rca.graph.writer import GraphWriter
from rca.incidents.service import IncidentService
from rca.telemetry.alerts import format_rfc3339
from rca.telemetry.metric_table import MetricTable
from storage.sql import SqlIncidentStore
from tests import prometheus_case as case
from tests.debian import ensure_binary

S = case.S
ALERT_NS = case.ONSET_NS + 120 * S
NOW_NS = case.ONSET_NS + 300 * S  # the tests' wall clock: five minutes into the fault
PULL = (case.ONSET_NS - 600 * S, case.ONSET_NS + 300 * S)


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningPrometheus]:
    ensure_binary(PROMETHEUS, "prometheus")
    ensure_binary(PROMTOOL, "prometheus")
    with backfilled(case.families(), tmp_path_factory.mktemp("prometheus")) as running:
        yield running


@pytest.fixture
def writer() -> Iterator[GraphWriter]:
    writer = GraphWriter(ServiceGraph(window_seconds=case.WINDOW_S, retention_seconds=3600))
    yield writer
    writer.close()


def pull_for(url: str, writer: GraphWriter) -> PrometheusPull:
    return PrometheusPull(url, writer=writer, table=MetricTable.default(), window_seconds=case.WINDOW_S, timeout_s=5.0)


def gpu_means(graph: ServiceGraph, node: str, start_ns: int, end_ns: int) -> float:
    """The mean of DCGM_FI_PROF_DRAM_ACTIVE on `node` over [start_ns, end_ns)."""
    keys, sums, _ = graph.aggregate(start_ns, end_ns).metrics.view()
    key = (graph.names.node_ids[node] << 16) | graph.measures.measures.index("DCGM_FI_PROF_DRAM_ACTIVE")
    (row,) = np.flatnonzero(keys == key)
    return float(sums[row, SignalSum.SUM] / sums[row, SignalSum.COUNT])


def test_a_pull_adds_the_metrics_and_the_service_graph(prometheus: RunningPrometheus, writer: GraphWriter) -> None:
    pull = pull_for(prometheus.url, writer)
    status = pull.pull(*PULL)
    pull.close()
    assert (status.name, status.ok) == ("prometheus", True), status.detail
    assert status.detail.startswith("90 new windows")
    graph = writer.graph
    gpu = f"gpu:{case.HOST}/1"
    assert graph.names.nodes[graph.names.owners[graph.names.node_ids[gpu]]] == "vllm-engine"
    before = (case.ONSET_NS - 300 * S, case.ONSET_NS)
    after = (case.ONSET_NS + 10 * S, case.ONSET_NS + 300 * S)
    assert gpu_means(graph, gpu, *before) == pytest.approx(case.GPU_BEFORE)
    assert gpu_means(graph, gpu, *after) == pytest.approx(case.GPU_AFTER)
    assert gpu_means(graph, f"gpu:{case.HOST}/0", *after) == pytest.approx(case.GPU_BEFORE)

    steady = graph_between(graph, Window(*before))
    assert set(steady.edges) == {("frontend", "checkout"), ("checkout", "payment"), ("payment", "postgres")}
    assert "user" not in steady  # Tempo's caller of untraced requests is nobody's node
    for caller, callee in steady.edges:
        edge = steady.edges[caller, callee]
        assert edge["calls"] == pytest.approx(case.RATE * 300, rel=1e-6)
        assert edge["errors"] == pytest.approx(case.FAILED * 300, rel=1e-6)
    operations = steady.nodes["frontend"]["operations"]  # its requests, and its calls to checkout
    assert set(operations) == {"", "call:checkout"}
    assert operations[""]["calls"] == operations["call:checkout"]["calls"] == pytest.approx(case.RATE * 300)
    slow = graph_between(graph, Window(case.ONSET_NS + 60 * S, after[1])).nodes["payment"]["operations"][""]
    calling = case.OWN_S["postgres"] + case.WIRE_S  # the client seconds of payment's call to postgres
    assert slow["self_time_mean_s"] == pytest.approx(case.SLOW_PAYMENT_S)
    assert slow["latency_mean_s"] == pytest.approx(case.SLOW_PAYMENT_S + calling)
    assert steady.nodes["payment"]["operations"][""]["self_time_mean_s"] == pytest.approx(case.OWN_S["payment"])


def test_b_a_second_pull_of_the_same_window_adds_nothing(prometheus: RunningPrometheus, writer: GraphWriter) -> None:
    pull = pull_for(prometheus.url, writer)
    assert pull.pull(*PULL).ok

    def snapshot() -> tuple[Any, ...]:
        graph = writer.graph
        view = graph_between(graph, Window(*PULL))
        calls = sorted((a, b, d["calls"], d["errors"]) for a, b, d in view.edges(data=True))
        _, metric_sums, _ = graph.aggregate(*PULL).metrics.view()
        return tuple(calls), float(metric_sums[:, SignalSum.COUNT].sum()), graph.counts()

    first = snapshot()
    again = pull.pull(*PULL)
    later = pull.pull(PULL[0] + 100 * S, PULL[1] + 60 * S)  # overlapping: only the six new windows
    pull.close()
    assert (again.ok, again.detail) == (True, "0 new windows: 0 metric points, 0 call rows")
    assert later.ok and later.detail.startswith("6 new windows")
    view = graph_between(writer.graph, Window(*PULL))
    assert sorted((a, b, d["calls"], d["errors"]) for a, b, d in view.edges(data=True)) == list(first[0])
    _, metric_sums, _ = writer.graph.aggregate(*PULL).metrics.view()
    assert float(metric_sums[:, SignalSum.COUNT].sum()) == first[1]


def _webhook(service: str) -> dict[str, Any]:
    labels = {"alertname": "HighLatency", "service": service, "severity": "page"}
    return {
        "version": "4",
        "groupKey": '{}:{alertname="HighLatency"}',
        "truncatedAlerts": 0,
        "status": "firing",
        "receiver": "rca",
        "groupLabels": {"alertname": "HighLatency"},
        "commonLabels": labels,
        "commonAnnotations": {},
        "externalURL": "http://alertmanager:9093",
        "alerts": [
            {
                "status": "firing",
                "labels": labels,
                "annotations": {"summary": f"{service} p95 latency above 500 ms"},
                "startsAt": format_rfc3339(ALERT_NS),
                "endsAt": "0001-01-01T00:00:00Z",
                "generatorURL": "http://prometheus:9090/graph",
                "fingerprint": "5e1b3c7a9d2f4e60",
            }
        ],
    }


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Any]:
    """The API over an empty graph, ranking with a Prometheus at the URL the test gives."""
    opened: list[Any] = []

    def make(url: str) -> TestClient:
        writer = GraphWriter(ServiceGraph(window_seconds=case.WINDOW_S))
        store = SqlIncidentStore.open(f"sqlite:///{tmp_path}/rca-{len(opened)}.db")
        pull = pull_for(url, writer)
        service = IncidentService(
            store=store, ranker=BayesianRanker(), graphs=writer, pulls=[pull], clock=lambda: NOW_NS
        )
        client = TestClient(create_app(writer, service))
        opened.append((client, pull, store, writer))
        return client

    yield make
    for client, pull, store, writer in opened:
        client.close()
        pull.close()
        store.close()
        writer.close()


def _rank(client: TestClient) -> dict[str, Any]:
    response = client.post("/webhooks/alertmanager", json=_webhook("frontend"))
    assert response.status_code == 200, response.text
    (summary,) = response.json()["incidents"]
    causes = client.get(f"/incidents/{summary['id']}/causes")
    assert causes.status_code == 200, causes.text
    body: dict[str, Any] = causes.json()
    return body


def test_c_with_no_spans_sent_the_callee_that_slowed_ranks_first(prometheus: RunningPrometheus, api: Any) -> None:
    causes = _rank(api(prometheus.url))
    assert causes["causes"][0]["node"] == "payment", [(c["node"], c["probability"]) for c in causes["causes"]]
    assert causes["causes"][0]["fault"] == "latency"
    assert causes["causes"][0]["path"] == ["payment", "checkout", "frontend"]
    assert causes["sources"][0] == {"name": "spans", "ok": True, "detail": ""}
    (prom,) = [s for s in causes["sources"] if s["name"] == "prometheus"]
    assert prom["ok"] is True and prom["detail"].endswith("call rows")


def test_d_with_prometheus_gone_the_ranking_still_answers(api: Any) -> None:
    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    causes = _rank(api(url))
    (prom,) = [s for s in causes["sources"] if s["name"] == "prometheus"]
    assert prom["ok"] is False and "cannot query" in prom["detail"]
    assert causes["causes"] == []  # nothing to rank from: no spans, no metrics
    assert {"name": "spans", "ok": True, "detail": ""} in causes["sources"]


def test_e_errors_are_reported_and_logged_once_per_kind(
    prometheus: RunningPrometheus, writer: GraphWriter, caplog: pytest.LogCaptureFixture
) -> None:
    wrong_path = pull_for(f"{prometheus.url}/no-such-prefix", writer)
    with socket.socket() as silent:  # accepts connections (the kernel does) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        stuck = PrometheusPull(
            f"http://127.0.0.1:{silent.getsockname()[1]}",
            writer=writer,
            table=MetricTable.default(),
            window_seconds=case.WINDOW_S,
            timeout_s=0.5,
        )
        with caplog.at_level("WARNING", logger="rca.prometheus"):
            statuses = [p.pull(*PULL) for p in (wrong_path, wrong_path, stuck, stuck)]
        stuck.close()
    wrong_path.close()
    assert [s.ok for s in statuses] == [False] * 4
    assert "answered 404" in statuses[0].detail
    assert "within 0.5s" in statuses[2].detail
    assert len(caplog.records) == 2  # once per kind of failure
    assert writer.graph.windows == {}  # nothing half-added
    fresh = pull_for(prometheus.url, writer)
    assert fresh.pull(*PULL).detail.startswith("90 new windows")  # the failed ones covered nothing
    fresh.close()
