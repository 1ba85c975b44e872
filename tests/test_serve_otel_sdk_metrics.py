"""Real OpenTelemetry SDK metric exporters (gRPC and HTTP) send data points to an in-process
`rca serve`: GPU series land on their GPU node owned by the exporter's pod, counters become
rates, histograms means, and unmapped metrics are only counted, by name, at `/metrics`."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcMetricExporter
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpMetricExporter
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricExporter, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from prometheus_client.parser import text_string_to_metric_families

from rca.graph.service_graph import ServiceGraph
from tests.test_serve_otel_sdk_logs import Live, live  # noqa: F401  (the fixture)

DCGM = Resource({"service.name": "dcgm-exporter"})
ENGINE = Resource.create({"service.name": "vllm-engine"})
POD = Resource({"k8s.pod.name": "cart-5f6585d649-fnmft", "k8s.namespace.name": "shop"})
ENGINE_POD = "vllm-engine-7d9f8b6c5d-x2x4z"
EXPORTS = 3


def _exporter(to: Live, protocol: str) -> MetricExporter:
    if protocol == "grpc":
        return GrpcMetricExporter(endpoint=f"http://{to.otlp_grpc}", insecure=True)
    return HttpMetricExporter(endpoint=f"http://{to.otlp_http}/v1/metrics")


def _dram(_: CallbackOptions) -> Iterable[Observation]:
    for gpu, level in ((0, 0.5), (1, 0.7)):
        yield Observation(level, {"gpu": str(gpu), "Hostname": "node-a", "exported_pod": ENGINE_POD})


def _emit(to: Live, protocol: str) -> None:
    """`EXPORTS` exports of: DCGM's DRAM activity for two GPUs, a pod's CPU seconds (3 per
    export), the engine's TTFT histogram (two requests of 0.2 s per export, by the GenAI
    semantic conventions), and one unmapped histogram."""
    readers = []
    providers = []
    for resource in (DCGM, ENGINE, POD):
        reader = PeriodicExportingMetricReader(_exporter(to, protocol), export_interval_millis=3_600_000)
        readers.append(reader)
        providers.append(MeterProvider(resource=resource, metric_readers=[reader]))
    dcgm, engine, pod = (p.get_meter("tests") for p in providers)
    dcgm.create_observable_gauge("DCGM_FI_PROF_DRAM_ACTIVE", callbacks=[_dram])
    cpu = pod.create_counter("container_cpu_usage_seconds_total", unit="s")
    ttft = engine.create_histogram("gen_ai.server.time_to_first_token", unit="s")
    unmapped = engine.create_histogram("http.server.request.duration", unit="s")
    for _ in range(EXPORTS):
        cpu.add(3)
        ttft.record(0.2)
        ttft.record(0.2)
        unmapped.record(0.01)
        for reader in readers:
            assert reader.force_flush(timeout_millis=20_000)
    for provider in providers:
        provider.shutdown()


def _measure_means(graph: ServiceGraph) -> dict[tuple[str, str], float]:
    """(node, measure) → mean of its observations over the retention (a service's pods' together)."""
    keys, sums, _ = graph.aggregate(0, graph.newest_ns + 1).metrics.view()
    nodes = graph.names.signal_owners(keys >> 16).tolist()
    totals: dict[tuple[str, str], list[float]] = {}
    for node, measure, row in zip(nodes, (keys & 0xFFFF).tolist(), sums, strict=True):
        total = totals.setdefault((graph.names.nodes[node], graph.measures.measures[measure]), [0.0, 0.0])
        total[0], total[1] = total[0] + float(row[0]), total[1] + float(row[1])
    return {where: total / count for where, (count, total) in totals.items()}


def _samples(of: Live) -> dict[str, float]:
    body, _ = of.service.metrics.exposition("")
    return {
        s.name + "".join(f"{{{k}={v}}}" for k, v in sorted(s.labels.items())): s.value
        for f in text_string_to_metric_families(body.decode())
        for s in f.samples
    }


@pytest.mark.parametrize("protocol", ["grpc", "http"], ids=["otlp-grpc", "otlp-http"])
def test_sdk_data_points_land_on_their_nodes_and_are_counted(live: Live, protocol: str) -> None:  # noqa: F811
    _emit(live, protocol)  # every export was acknowledged: its points are in the graph
    means = live.service.writer.read(_measure_means)
    # The SDK lower-cases instrument names; the table matches them whatever their case.
    assert means[("gpu:node-a/0", "dcgm_fi_prof_dram_active")] == pytest.approx(0.5)
    assert means[("gpu:node-a/1", "dcgm_fi_prof_dram_active")] == pytest.approx(0.7)
    owners = live.service.writer.read(lambda g: dict(zip(g.names.nodes, g.names.owners, strict=True)))
    names = live.service.writer.read(lambda g: list(g.names.nodes))
    assert names[owners["gpu:node-a/0"]] == names[owners["gpu:node-a/1"]] == "vllm-engine"
    # The counter's rate needs two points of the series: the SDK's exports are cumulative.
    assert means[("cart", "container_cpu_usage_seconds_total")] > 0
    assert means[("vllm-engine", "gen_ai.server.time_to_first_token")] == pytest.approx(0.2)
    assert not any(measure.startswith("http.server") for _, measure in means)
    samples = _samples(live)
    # Cumulative exports repeat every series each time, and shutting down exports once more.
    exports = samples["rca_unmapped_data_points_total{metric=http.server.request.duration}"]
    assert exports == EXPORTS + 1
    assert samples["rca_data_points_received_total"] == 5 * exports  # DRAM of two GPUs, CPU, TTFT, unmapped
    # Mapped points that gave a value: every DRAM point; the CPU counter's after its first; the
    # TTFT histogram's after its first that observed something (the shutdown's observed nothing).
    assert samples["rca_graph_data_points_total"] == 2 * exports + (exports - 1) + (EXPORTS - 1)
    assert samples["rca_graph_late_data_points_total"] == 0
