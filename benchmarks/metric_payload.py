"""Synthetic OTLP metric export requests for benchmarks: what a Collector's prometheus receiver
sends from one scrape round of a GPU fleet, ~1000 data points a request. DCGM gauges per GPU
(a dozen labels each, as the exporter writes them), cAdvisor counters per pod, vLLM gauges,
counters and histograms per engine, and some series rca does not map. Request `k` is scrape
round `k`: counters grow from round to round, so their rates are real."""

from __future__ import annotations

import random
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import AGGREGATION_TEMPORALITY_CUMULATIVE, Metric, ResourceMetrics

SCRAPE_NS = 15_000_000_000
GPUS = 48  # 6 hosts of 8
PODS = 96
ENGINES = 6
DCGM_GAUGES = (
    "DCGM_FI_PROF_DRAM_ACTIVE",
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_PROF_NVLINK_TX_BYTES",
    "DCGM_FI_DEV_FB_USED",
)
CADVISOR_COUNTERS = ("container_cpu_usage_seconds_total", "container_cpu_cfs_throttled_seconds_total")
TTFT_BOUNDS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
POINTS_PER_REQUEST = GPUS * len(DCGM_GAUGES) + PODS * (len(CADVISOR_COUNTERS) + 1) + ENGINES * 4


def _attributes(target: Any, labels: dict[str, str]) -> None:
    """Appends `labels` to a repeated KeyValue field."""
    for key, value in labels.items():
        kv: KeyValue = target.add()
        kv.key = key
        kv.value.string_value = value


def _resource(request: ExportMetricsServiceRequest, job: str, instance: str) -> ResourceMetrics:
    resource: ResourceMetrics = request.resource_metrics.add()
    _attributes(resource.resource.attributes, {"service.name": job, "service.instance.id": instance})
    return resource


class _Family:
    """The metrics of one scrape target by name: a metric family's series are points of one
    OTLP metric, as the prometheus receiver sends them."""

    def __init__(self, request: ExportMetricsServiceRequest, job: str, instance: str) -> None:
        self.scope = _resource(request, job, instance).scope_metrics.add()
        self.metrics: dict[str, Metric] = {}

    def metric(self, name: str) -> Metric:
        if name not in self.metrics:
            self.metrics[name] = self.scope.metrics.add()
            self.metrics[name].name = name
        return self.metrics[name]

    def gauge(self, name: str, labels: dict[str, str], t: int, value: float) -> None:
        point = self.metric(name).gauge.data_points.add()
        _attributes(point.attributes, labels)
        point.time_unix_nano, point.as_double = t, value

    def counter(self, name: str, labels: dict[str, str], t: int, start: int, value: float) -> None:
        metric = self.metric(name)
        metric.sum.is_monotonic = True
        metric.sum.aggregation_temporality = AGGREGATION_TEMPORALITY_CUMULATIVE
        point = metric.sum.data_points.add()
        _attributes(point.attributes, labels)
        point.time_unix_nano, point.start_time_unix_nano, point.as_double = t, start, value

    def histogram(self, name: str, labels: dict[str, str], t: int, start: int, count: int, total: float) -> None:
        metric = self.metric(name)
        metric.histogram.aggregation_temporality = AGGREGATION_TEMPORALITY_CUMULATIVE
        point = metric.histogram.data_points.add()
        _attributes(point.attributes, labels)
        point.time_unix_nano, point.start_time_unix_nano = t, start
        point.count, point.sum = count, total
        point.explicit_bounds.extend(TTFT_BOUNDS)
        share = count // (len(TTFT_BOUNDS) + 1)
        point.bucket_counts.extend([share] * len(TTFT_BOUNDS) + [count - share * len(TTFT_BOUNDS)])


def _round(k: int, start_ns: int, rng: random.Random) -> bytes:
    request = ExportMetricsServiceRequest()
    t, since = start_ns + k * SCRAPE_NS, start_ns - SCRAPE_NS
    dcgm = _Family(request, "dcgm-exporter", "10.0.0.9:9400")
    for gpu in range(GPUS):
        labels = {
            "gpu": str(gpu % 8),
            "UUID": f"GPU-{gpu:08x}-4b1c-9d2e-{gpu:012x}",
            "device": f"nvidia{gpu % 8}",
            "modelName": "NVIDIA H100 80GB HBM3",
            "Hostname": f"gpu-node-{gpu // 8}",
            "DCGM_FI_DRIVER_VERSION": "550.54.15",
            "container": "vllm",
            "namespace": "serving",
            "pod": "dcgm-exporter-x7k2p",
            "exported_pod": f"vllm-engine-{gpu // 8}-7d9f8b6c5d-x2x4z",
        }
        for name in DCGM_GAUGES:
            dcgm.gauge(name, labels, t, rng.random())
    kubelet = _Family(request, "kubelet", "10.0.0.2:10250")
    for pod in range(PODS):
        labels = {"pod": f"svc-{pod:03d}-5f6585d649-fnmft", "container": "app", "namespace": "shop"}
        for name in CADVISOR_COUNTERS:
            kubelet.counter(name, labels, t, since, (k + 1) * 7.5 * rng.random())
        kubelet.gauge("container_memory_working_set_bytes", labels, t, 2e8 * (1 + rng.random()))
    vllm = _Family(request, "vllm-engine", "10.0.0.7:8000")
    for engine in range(ENGINES):
        labels = {
            "model_name": "meta-llama/Llama-3.1-70B",
            "engine": "0",
            "pod": f"vllm-engine-{engine}-7d9f8b6c5d-x2x4z",
        }
        vllm.gauge("vllm:kv_cache_usage_perc", labels, t, rng.random())
        vllm.gauge("vllm:num_requests_waiting", labels, t, float(rng.randrange(20)))
        vllm.counter("vllm:num_preemptions_total", labels, t, since, float(k * 3))
        vllm.histogram("vllm:time_to_first_token_seconds", labels, t, since, (k + 1) * 200, (k + 1) * 16.0)
    body: bytes = request.SerializeToString()
    return body


def metric_export_requests(count: int, points_per_request: int, start_ns: int, seed: int = 13) -> list[bytes]:
    """`count` scrape rounds as export requests of `POINTS_PER_REQUEST` points each (the
    argument is the load's nominal size, kept for the benchmark's interface)."""
    del points_per_request  # one scrape round is what it is
    rng = random.Random(seed)
    return [_round(k, start_ns, rng) for k in range(count)]
