"""Data points into the graph: placement, the metric table, rates, resets, histograms, bounds."""

from __future__ import annotations

import numpy as np
import pytest

from rca.graph.metric_measures import MetricMeasures, per_reading, quantile
from rca.graph.names import NodeKind
from rca.graph.series import window_series
from rca.graph.service_graph import ServiceGraph
from rca.telemetry.faults import Fault
from rca.telemetry.metric_rows import BUCKETS_MISMATCH, MetricRows
from rca.telemetry.metric_table import MetricRule, MetricTable, parse_rules
from rca.telemetry.metrics import MetricBatch, MetricKind, place

S = 1_000_000_000
T0 = 1_767_571_200 * S
POD = "vllm-engine-7d9f8b6c5d-x2x4z"


def _means(graph: ServiceGraph, node: str, measure: str) -> np.ndarray:
    """Per window, the mean observed value of `measure` on `node` (NaN where none), its one
    instance's where a pod exported it."""
    series = window_series(graph, T0, T0, graph.newest_ns + 1)
    keys = series.metrics.keys
    mine = graph.names.signal_owners(keys >> 16) == graph.names.node_ids[node]
    rows = np.flatnonzero(mine & ((keys & 0xFFFF) == graph.measures.measures.index(measure)))
    assert rows.shape[0] == 1, f"{rows.shape[0]} rows of {measure} on {node}"
    sums = series.metrics.sums[int(rows[0])]
    with np.errstate(invalid="ignore"):
        return np.asarray(sums[:, 1] / sums[:, 0])


def _batch(rows: MetricRows) -> MetricBatch:
    result = rows.build()
    assert result.rejected == 0, result.message
    return result.batch


def test_placement_follows_the_exporters_labels() -> None:
    dcgm = {"service.name": "dcgm-exporter"}
    gpu = place(
        "DCGM_FI_PROF_DRAM_ACTIVE",
        dcgm,
        {"gpu": "3", "Hostname": "node-a", "pod": "dcgm-exporter-x7k2p", "exported_pod": POD},
    )
    assert (gpu.node, gpu.owner, gpu.gpu) == ("gpu:node-a/3", "vllm-engine", True)
    # An older dcgm-exporter without the host's network reports its own pod as Hostname: the
    # scraping agent's host.name places the GPU on the node node_exporter names.
    agent = {**dcgm, "host.name": "node-a"}
    old = place(
        "DCGM_FI_PROF_DRAM_ACTIVE",
        agent,
        {"gpu": "3", "Hostname": "dcgm-exporter-x7k2p", "pod": "dcgm-exporter-x7k2p", "exported_pod": POD},
    )
    assert (old.node, old.owner) == ("gpu:node-a/3", "vllm-engine")
    cadvisor = place("container_cpu_usage_seconds_total", {"service.name": "kubelet"}, {"pod": "cart-5f6585d649-fnmft"})
    assert (cadvisor.node, cadvisor.gpu, cadvisor.host) == ("cart", False, False)
    vllm = place(
        "vllm:num_requests_waiting", {"service.name": "vllm-engine", "service.instance.id": "10.0.0.7:8000"}, {}
    )
    assert vllm.node == "vllm-engine"
    numa = place("node_memory_numa_numa_miss_total", {"service.name": "node-exporter"}, {"instance": "node-a:9100"})
    assert (numa.node, numa.host) == ("host:node-a", True)
    sdk = place("k8s.pod.cpu.usage", {"k8s.deployment.name": "checkout"}, {})
    assert sdk.node == "checkout"
    assert place("x", {}, {}).node == "unknown_service"


def test_the_table_maps_known_names_either_spelling_and_takes_extensions() -> None:
    table = MetricTable.default()
    assert table.rule("DCGM_FI_PROF_DRAM_ACTIVE") is not None
    rule = table.rule("DCGM_FI_PROF_DRAM_ACTIVE")
    assert rule is not None and rule.fault is Fault.GPU_MEMORY_BANDWIDTH and rule.healthy is not None
    assert table.rule("container_cpu_usage_seconds") == table.rule("container_cpu_usage_seconds_total")
    p95 = table.rule("vllm:time_to_first_token_seconds:p95")
    assert p95 is not None and p95.signal.endswith("_p95")
    assert table.rule("my_gpu_hbm_busy_ratio") is None
    # vLLM renamed time per output token; both releases' names read as one signal, and NVML's
    # memory-busy percent (the exporter's default field) as a fraction, gated like DRAM activity.
    tpot, itl = table.rule("vllm:time_per_output_token_seconds"), table.rule("vllm:inter_token_latency_seconds")
    assert tpot is not None and itl is not None and tpot.signal == itl.signal and tpot.fault is Fault.LATENCY
    copy = table.rule("DCGM_FI_DEV_MEM_COPY_UTIL")
    assert copy is not None and copy.scale == 0.01 and (copy.healthy, copy.faulty) == (rule.healthy, rule.faulty)
    extra = parse_rules(
        [{"name": "my_gpu_hbm_busy_ratio", "signal": "hbm", "fault": "gpu_memory_bandwidth", "direction": "up"}],
        "test",
    )
    extended = MetricTable.default(extra)
    assert extended.rule("my_gpu_hbm_busy_ratio") == MetricRule(
        "my_gpu_hbm_busy_ratio", "hbm", Fault.GPU_MEMORY_BANDWIDTH
    )
    overridden = MetricTable.default(
        parse_rules([{"name": "vllm:num_requests_waiting", "signal": "q", "fault": "errors"}], "test")
    )
    assert overridden.rule("vllm:num_requests_waiting") == MetricRule("vllm:num_requests_waiting", "q", Fault.ERRORS)


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({"name": "a", "signal": "s", "fault": "slow"}, "fault 'slow'"),
        ({"name": "a", "signal": "s", "fault": "errors", "direction": "sideways"}, "direction"),
        ({"name": "a", "signal": "s", "fault": "errors", "healthy": 1.0}, "healthy and faulty"),
        ({"name": "a", "fault": "errors"}, "signal"),
        ({"name": "a", "signal": "s", "fault": "errors", "colour": "red"}, "colour"),
        ({"name": "a", "signal": "s", "fault": "errors", "scale": "big"}, "scale"),
    ],
)
def test_a_bad_table_entry_names_what_is_wrong(entry: dict[str, object], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_rules([entry], "[metrics] map")


def test_gauges_average_per_window_and_unknown_metrics_are_counted_not_kept() -> None:
    rows = MetricRows()
    for k in range(6):  # two points per 10 s window
        labels = {"gpu": "0", "Hostname": "h", "exported_pod": POD}
        rows.add("DCGM_FI_PROF_DRAM_ACTIVE", MetricKind.GAUGE, {}, labels, T0 + k * 5 * S, 0, 0.2 + 0.1 * k)
        rows.add("some_unmapped_total", MetricKind.CUMULATIVE, {"service.name": "other"}, {}, T0 + k * 5 * S, T0, k)
    graph = ServiceGraph()
    graph.add_metrics(_batch(rows))
    np.testing.assert_allclose(_means(graph, "gpu:h/0", "DCGM_FI_PROF_DRAM_ACTIVE"), [0.25, 0.45, 0.65])
    assert graph.names.kinds[graph.names.node_ids["gpu:h/0"]] is NodeKind.RESOURCE
    assert graph.names.nodes[graph.names.owners[graph.names.node_ids["gpu:h/0"]]] == "vllm-engine"
    assert "other" not in graph.names.node_ids  # an unmapped series makes no node
    assert graph.measures.unknown == {"some_unmapped_total": 6}
    counts = graph.counts()
    assert (counts.metric_points, counts.metric_points_unknown) == (6, 6)


def test_a_nodes_series_read_together_are_one_observation_their_mean() -> None:
    keys = np.array([7, 7, 3, 7, 7, 3], np.int64)
    times = np.array([10, 10, 10, 20, 20, 10], np.int64)
    values = np.array([1.0, 3.0, 5.0, 2.0, 6.0, 9.0])
    first, key, value = per_reading(keys, times, values)
    assert key.tolist() == [3, 7, 7] and value.tolist() == [7.0, 2.0, 4.0]
    assert times[first].tolist() == [10, 10, 20] and keys[first].tolist() == key.tolist()
    # A host's two NUMA nodes at 100 and 5000 pages/s, scraped together: one reading per scrape,
    # so the window keeps one observation each scrape and no spread between the two.
    rows = MetricRows()
    for k in range(4):
        for numa, rate in (("0", 100.0), ("1", 5000.0)):
            labels = {"node": numa}
            resource = {"service.name": "node-exporter", "host.name": "h"}
            rows.add("node_memory_numa_other_node_total", MetricKind.GAUGE, resource, labels, T0 + k * 5 * S, 0, rate)
    graph = ServiceGraph()
    graph.add_metrics(_batch(rows))
    series = window_series(graph, T0, T0, graph.newest_ns + 1)
    sums = series.metrics.sums[0]
    np.testing.assert_allclose(sums[:, 0], [2.0, 2.0])  # two scrapes per 10 s window, not four points
    np.testing.assert_allclose(sums[:, 1] / sums[:, 0], [2550.0, 2550.0])
    np.testing.assert_allclose(sums[:, 2] / sums[:, 0], [2550.0**2, 2550.0**2])  # no spread within
    first, key, value = per_reading(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))
    assert first.shape == key.shape == value.shape == (0,)


def test_cumulative_sums_become_rates_across_batches_and_resets() -> None:
    graph = ServiceGraph()
    pod = {"pod": "cart-5f6585d649-fnmft"}
    totals = [10.0, 11.0, 12.0, 13.0, 0.5, 1.5]  # one CPU-second per 5 s, then a restart at T0+20 s
    starts = [T0 - 100 * S] * 4 + [T0 + 19 * S] * 2
    for k, (total, start) in enumerate(zip(totals, starts, strict=True)):
        rows = MetricRows()
        rows.add("container_cpu_usage_seconds_total", MetricKind.CUMULATIVE, {}, pod, T0 + k * 5 * S, start, total)
        graph.add_metrics(_batch(rows))  # one point per request: the rate needs the series' last point
    means = _means(graph, "cart", "container_cpu_usage_seconds_total")
    # The first point has no rate; the restart's point counts from its new start (0.5 over 1 s).
    np.testing.assert_allclose(means, [0.2, (0.2 + 0.2) / 2, (0.5 + 0.2) / 2])


def test_a_series_back_after_a_gap_with_an_unseen_start_gives_no_lifetime_rate() -> None:
    graph = ServiceGraph()
    host = {"instance": "gpu-node-1:9100"}
    name = "node_memory_numa_other_node_total"
    # 100 pages/s for a minute; an hour later the series is back from a run begun a day before,
    # its counter at 9e6 (a lifetime mean of ~100 pages/s), moving 40 pages/s from then on.
    points = [(T0 + k * 15 * S, T0 - 1000 * S, 1e5 + 1500.0 * k) for k in range(5)]
    later, begun = T0 + 3600 * S, T0 + 3600 * S - 86_400 * S
    points += [(later + k * 15 * S, begun, 9e6 + 600.0 * k) for k in range(5)]
    for t, start, total in points:
        rows = MetricRows()
        rows.add(name, MetricKind.CUMULATIVE, {"service.name": "node-exporter"}, host, t, start, total)
        graph.add_metrics(_batch(rows))
    means = _means(graph, "host:gpu-node-1", name)  # the graph still holds the later minute
    values = means[np.isfinite(means)]  # 15 s between points, 10 s windows: one rate per window
    np.testing.assert_allclose(values, [40.0] * 4)  # no ~104/s reading of the day before


def test_delta_sums_are_rates_over_their_interval() -> None:
    rows = MetricRows()
    for k in range(4):
        t = T0 + (k + 1) * 5 * S
        rows.add(
            "vllm:num_preemptions_total", MetricKind.DELTA, {"service.name": "vllm-engine"}, {}, t, t - 5 * S, 10.0
        )
    graph = ServiceGraph()
    graph.add_metrics(_batch(rows))
    np.testing.assert_allclose(_means(graph, "vllm-engine", "vllm:num_preemptions_total"), [2.0, 2.0, 2.0])


def test_histograms_give_the_intervals_mean_and_p95() -> None:
    bounds = (0.1, 0.2, 0.5, 1.0)
    graph = ServiceGraph()
    name = "vllm:time_to_first_token_seconds"
    for k in range(5):
        rows = MetricRows()
        # Cumulative: each 10 s adds 10 observations: 9 in (0.1, 0.2], 1 in (0.5, 1.0], summing 2.3 s.
        counts = [0.0, 9.0 * k, 0.0, 1.0 * k, 0.0]
        rows.add(
            name,
            MetricKind.HISTOGRAM_CUMULATIVE,
            {"service.name": "vllm-engine"},
            {},
            T0 + k * 10 * S + S,
            T0,
            2.3 * k,
            10.0 * k,
            bounds,
            counts,
        )
        graph.add_metrics(_batch(rows))
    # The first point only starts the series: four intervals, four windows.
    np.testing.assert_allclose(_means(graph, "vllm-engine", name), [0.23] * 4)
    expected_p95 = quantile(bounds, np.array([0.0, 9.0, 0.0, 1.0, 0.0]), 0.95)
    assert 0.5 < expected_p95 <= 1.0
    np.testing.assert_allclose(_means(graph, "vllm-engine", name + ":p95"), [expected_p95] * 4)


def test_quantile_interpolates_inside_its_bucket() -> None:
    assert quantile((1.0, 2.0), np.array([0.0, 10.0, 0.0]), 0.5) == pytest.approx(1.5)
    assert quantile((1.0, 2.0), np.array([0.0, 0.0, 4.0]), 0.95) == 2.0  # the open bucket: its lower bound
    assert np.isnan(quantile((1.0,), np.array([0.0, 0.0]), 0.95))


def test_points_that_cannot_be_read_are_rejected_with_reasons() -> None:
    rows = MetricRows()
    rows.add("DCGM_FI_PROF_DRAM_ACTIVE", MetricKind.GAUGE, {"service.name": "a"}, {}, 0, 0, 0.5)
    rows.add("DCGM_FI_PROF_DRAM_ACTIVE", MetricKind.GAUGE, {"service.name": "a"}, {}, T0, 0, float("nan"))
    rows.add("h", MetricKind.HISTOGRAM_DELTA, {"service.name": "a"}, {}, T0, 0, 1.0, 2.0, (1.0,), (1.0,))
    rows.add("DCGM_FI_PROF_DRAM_ACTIVE", MetricKind.GAUGE, {"service.name": "a"}, {}, T0, 0, 0.5)
    result = rows.build()
    assert len(result.batch) == 1
    reasons = {r.reason: r.count for r in result.rejections}
    assert reasons == {
        "no timestamp: time_unix_nano is 0": 1,
        "value is not a finite number": 1,
        BUCKETS_MISMATCH: 1,
    }


def test_series_state_is_bounded_and_says_so() -> None:
    measures = MetricMeasures(MetricTable.default(), window_seconds=10.0, max_series=1_000)
    rows = MetricRows()
    for k in range(5_000):  # 5000 distinct counter series: more than the cap
        rows.add("container_cpu_usage_seconds_total", MetricKind.CUMULATIVE, {}, {"pod": f"p{k}"}, T0, T0 - S, 1.0)
    measures.observe(_batch(rows))
    assert measures.series_dropped == 5_000
    assert len(measures._series) == 0  # the state starts again instead of growing
