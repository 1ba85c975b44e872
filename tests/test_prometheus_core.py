"""The core of `--prometheus-url`, without a Prometheus: call statistics in the graph (never over
nodes spans reached rca for), the ingest queue taking them, rankings pulling their window and
history and going on when a pull fails, `sources` stored and shown, the adapter's covered ranges,
query names and answer checks."""

from __future__ import annotations

from pathlib import Path

import msgspec
import numpy as np
import pytest

from api.schemas import causes_json
from ingest.prometheus import Covered
from ingest.prometheus_results import BadAnswer, decode
from ingest.promql import SampleRole, build_selectors, mapped_names, prometheus_names
from rca.graph.accumulators import EdgeSum
from rca.graph.call_stats import CallStats
from rca.graph.service_graph import ServiceGraph
from rca.graph.view import Window, graph_between
from rca.graph.writer import GraphWriter
from rca.incidents.model import Incident, IncidentCauses, IncidentStatus
from rca.incidents.service import IncidentService
from rca.ranking.causes import Ranking
from rca.ranking.pull import SourceStatus
from rca.telemetry.alerts import Alert, AlertStatus
from rca.telemetry.metric_table import MetricTable
from storage.ranking_codec import ranking_from_bytes, ranking_to_bytes
from storage.sql import SqlIncidentStore
from tests.spanfactory import T0, batch
from tests.test_incidents_service import FixedRanker

S = 1_000_000_000


def stats(*rows: tuple[int, str, str, float, float, float, float]) -> CallStats:
    """Rows of (window start, client or "", server, calls, failed, server s, client s)."""
    strings = list(dict.fromkeys(n for r in rows for n in r[1:3] if n))
    return CallStats(
        window_ns=np.asarray([r[0] for r in rows], np.int64),
        client=np.asarray([strings.index(r[1]) if r[1] else -1 for r in rows], np.int32),
        server=np.asarray([strings.index(r[2]) for r in rows], np.int32),
        calls=np.asarray([r[3] for r in rows]),
        failed=np.asarray([r[4] for r in rows]),
        server_seconds=np.asarray([r[5] for r in rows]),
        client_seconds=np.asarray([r[6] for r in rows]),
        strings=tuple(strings),
    )


def test_call_stats_count_like_spans_and_leave_traced_nodes_be() -> None:
    graph = ServiceGraph(window_seconds=10)
    graph.add(batch(("checkout", "Place", 1, 0, 0, 30)))  # spans reach rca for checkout
    graph.add_call_stats(
        stats(
            (T0, "gateway", "checkout", 100, 1, 3.0, 3.5),  # names checkout: spans say it better
            (T0, "checkout", "payment", 100, 1, 1.0, 1.2),
            (T0, "payment", "ledger", 50, 5, 0.5, 0.6),
            (T0, "", "payment", 100, 0, 2.0, 0.0),  # a caller no instrumented service is
        )
    )
    view = graph_between(graph, Window(T0, T0 + 10 * S))
    assert set(view.edges) == {("payment", "ledger")}
    assert "gateway" not in view
    payment = view.nodes["payment"]["operations"]
    assert payment[""]["calls"] == 100 and payment[""]["self_time_mean_s"] == pytest.approx((2.0 - 0.6) / 100)
    assert payment["call:ledger"]["calls"] == 50 and payment["call:ledger"]["errors"] == 5
    assert view.nodes["ledger"]["operations"][""]["latency_mean_s"] == pytest.approx(0.01)
    assert view.edges["payment", "ledger"]["calls"] == 50
    assert view.nodes["checkout"]["calls"] == 1  # its one span, nothing more


def test_call_stats_keep_to_retention_and_go_through_the_ingest_queue() -> None:
    writer = GraphWriter(ServiceGraph(window_seconds=10, retention_seconds=60))
    try:
        writer.submit(stats((T0, "a", "b", 10, 0, 1.0, 1.1), (T0 - 120 * S, "a", "b", 10, 0, 1.0, 1.1)))
        graph = writer.graph
        assert graph.newest_ns == T0
        assert sorted(graph.windows) == [T0 // (10 * S)]  # the old row is past retention
        assert graph_between(graph, Window(T0 - 300 * S, T0 + S)).edges["a", "b"]["calls"] == 10
    finally:
        writer.close()


class RecordingPull:
    """A source that records what it was asked for and answers as told."""

    name = "prometheus"

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.asked: list[tuple[int, int]] = []

    def pull(self, start_ns: int, end_ns: int) -> SourceStatus:
        self.asked.append((start_ns, end_ns))
        if self.fail:
            raise ConnectionError("refused")
        return SourceStatus(self.name, True, "1 new windows")


def alert(starts_ns: int) -> Alert:
    labels = {"alertname": "Slow", "service": "checkout"}
    return Alert("f00d", AlertStatus.FIRING, labels, {}, starts_ns, None, "", "checkout")


@pytest.mark.parametrize("fail", [False, True])
def test_rankings_and_refreshes_pull_and_survive_a_failing_pull(tmp_path: Path, fail: bool) -> None:
    writer = GraphWriter(ServiceGraph(window_seconds=10, retention_seconds=3600))
    store = SqlIncidentStore.open(f"sqlite:///{tmp_path}/rca.db")
    pull = RecordingPull(fail)
    now = [T0 + 600 * S]
    service = IncidentService(
        store=store, ranker=FixedRanker(), graphs=writer, pulls=[pull], clock=lambda: now[0], history_seconds=600
    )
    try:
        (summary,) = service.handle([alert(T0 + 300 * S)])
        assert pull.asked == [(T0 + 300 * S - 300 * S - 600 * S, T0 + 600 * S)]  # no spans: up to now
        causes = service.causes(summary.incident.id)
        assert causes is not None and causes.ranking is not None
        names = [(s.name, s.ok) for s in causes.ranking.sources]
        assert names == [("spans", True), ("prometheus", not fail)]
        assert ("pull failed: refused" in causes.ranking.sources[1].detail) is fail
        service.causes(summary.incident.id)
        assert len(pull.asked) == 1  # read again with the graph where it was: not due
        now[0] += 10 * S
        service.refresh_open()  # every window: the sources brought up to date over the retention
        assert pull.asked[-1] == (now[0] - 3600 * S, now[0])
        writer.submit(batch(("checkout", "Place", 1, 0, 0, 30)))  # spans: now is the newest span
        service.refresh_open()
        assert pull.asked[-1] == (T0 + 1 - 3600 * S, T0 + 1)
    finally:
        store.close()
        writer.close()


def test_sources_are_stored_and_old_rankings_still_read() -> None:
    ranking = Ranking(1, 2, "m", 1.0, (), sources=(SourceStatus("prometheus", False, "timeout"),))
    assert ranking_from_bytes(ranking_to_bytes(ranking)) == ranking
    old = msgspec.msgpack.decode(ranking_to_bytes(Ranking(1, 2, "m", 1.0, ())))
    del old["sources"]  # as rankings were stored before sources
    assert ranking_from_bytes(msgspec.msgpack.encode(old)).sources == ()


def test_causes_list_the_sources_and_spans_always() -> None:
    incident = Incident("inc-1", IncidentStatus.OPEN, T0, None, 1, ("checkout",))
    spans_only = causes_json(IncidentCauses(incident, T0, T0 + 1, None))
    assert spans_only["sources"] == [{"name": "spans", "ok": True, "detail": ""}]
    statuses = (SourceStatus("spans", True, ""), SourceStatus("prometheus", False, "timeout"))
    ranked = causes_json(IncidentCauses(incident, T0, T0 + 1, Ranking(T0, T0 + 1, "m", 1.0, (), sources=statuses)))
    assert ranked["sources"][1] == {"name": "prometheus", "ok": False, "detail": "timeout"}


def test_covered_ranges_merge_give_gaps_and_stay_bounded() -> None:
    covered = Covered(limit=2)
    assert covered.gaps(0, 10) == [(0, 10)]
    covered.add(2, 4)
    covered.add(6, 8)
    assert covered.gaps(0, 10) == [(0, 2), (4, 6), (8, 10)]
    covered.add(4, 6)  # touching ranges merge
    assert covered.ranges == [(2, 8)]
    covered.add(10, 12)
    covered.add(20, 22)
    assert covered.ranges == [(10, 12), (20, 22)]  # the oldest forgotten first
    assert covered.gaps(0, 30) == [(0, 10), (12, 20), (22, 30)]


def test_queries_name_every_mapped_metric_in_each_spelling() -> None:
    assert prometheus_names("DCGM_FI_PROF_DRAM_ACTIVE") == ("DCGM_FI_PROF_DRAM_ACTIVE",)
    assert prometheus_names("k8s.pod.cpu.usage") == ("k8s.pod.cpu.usage", "k8s_pod_cpu_usage")
    names = mapped_names(MetricTable.default())
    assert names["k8s_pod_cpu_usage"].metric == "k8s.pod.cpu.usage"
    assert names["vllm:num_preemptions_total"].role is SampleRole.COUNTER
    assert names["vllm:time_to_first_token_seconds_sum"].role is SampleRole.HISTOGRAM_SUM
    selectors = build_selectors(MetricTable.default())
    assert "DCGM_FI_PROF_DRAM_ACTIVE|" in selectors["metrics"]
    assert r"k8s\\.pod\\.cpu\\.usage" in selectors["metrics"]  # a regex, in a PromQL string
    assert selectors["span_metrics"].endswith(',span_kind=~"SPAN_KIND_SERVER|SPAN_KIND_CONSUMER|"}')


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"<html>proxy error</html>", "not a Prometheus API answer"),
        (b'{"status":"error","errorType":"bad_data","error":"parse error"}', "query failed: bad_data parse error"),
        (b'{"status":"success","data":{"resultType":"vector","result":[]}}', "expected a matrix"),
    ],
)
def test_answers_that_are_not_matrices_are_refused(body: bytes, message: str) -> None:
    with pytest.raises(BadAnswer, match=message):
        decode(body)


def test_call_stats_share_calls_out_to_failed_requests_so_successful_ones_call_as_many() -> None:
    graph = ServiceGraph(window_seconds=10)
    graph.add_call_stats(
        stats(
            (T0, "", "front", 100, 20, 2.0, 0.0),  # front's own requests, a fifth failed
            (T0, "front", "back", 50, 5, 0.5, 0.6),
        )
    )
    keys, sums, _ = graph.aggregate(T0, T0 + 10 * S).edges.view()
    names = graph.names
    by_callee = {names.nodes[int(names.nodeop_node[k & 0xFFFFFFFF])]: row for k, row in zip(keys, sums, strict=True)}
    local, remote = by_callee["front"], by_callee["back"]  # requests → call:back → back
    assert local[EdgeSum.FAILED_CALLER] == pytest.approx(50 * 0.2)  # the failed requests' share
    assert (local[EdgeSum.CALLS] - local[EdgeSum.FAILED_CALLER]) / (100 - 20) == pytest.approx(50 / 100)
    assert remote[EdgeSum.FAILED_CALLER] == 5  # a failed call is its client operation's failure
