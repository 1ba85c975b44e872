"""OTLP metric decoding, protobuf and OTLP/JSON: every data kind from requests built with the
`opentelemetry.proto` classes, the same from their OTLP/JSON; placement through the attributes
real DCGM exporter, vLLM, cAdvisor and kubelet series carry through a Collector; rejections with
reasons; malformed input; metric files; the encoder's round trip; and what the real
OpenTelemetry Python SDK exports."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from opentelemetry.exporter.otlp.proto.common._internal.metrics_encoder import encode_metrics
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import Counter as SdkCounter
from opentelemetry.sdk.metrics import Histogram as SdkHistogram
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader
from opentelemetry.sdk.resources import Resource

from ingest.files import decode_metric_file
from ingest.otlp_encode_metrics import encode_metric_batch
from ingest.otlp_metrics import decode_metrics_protobuf, parse_metrics_request
from ingest.otlp_metrics_json import MAX_VALUE_DEPTH, decode_metrics_json
from ingest.otlp_metrics_rules import BAD_SCALE, BAD_TEMPORALITY, NO_NAME, NO_SUM, NO_VALUE, exponential_buckets
from rca.graph.metric_measures import quantile
from rca.graph.service_graph import ServiceGraph
from rca.telemetry.metric_rows import BUCKETS_MISMATCH, MetricRows
from rca.telemetry.metrics import (
    PLACED_GPU,
    PLACED_HOST,
    PLACED_SERVICE,
    MetricBatch,
    MetricKind,
    concat_metrics,
)
from rca.telemetry.spans import DecodeError
from tests.metricrequests import (
    CUMULATIVE,
    DELTA,
    S0,
    T0,
    Row,
    both,
    exponential_point,
    histogram_point,
    metric,
    number,
    otlp_json,
    request,
    rows,
    summary_point,
)

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"
G, C, D, HC, HD = (
    MetricKind.GAUGE,
    MetricKind.CUMULATIVE,
    MetricKind.DELTA,
    MetricKind.HISTOGRAM_CUMULATIVE,
    MetricKind.HISTOGRAM_DELTA,
)


def checkout(name: str, kind: MetricKind, value: float, count: float = 0.0, buckets: Any = (None, None)) -> Row:
    return (name, "checkout", None, PLACED_SERVICE, kind, T0, S0, value, count, *buckets)


def test_every_kind_decodes_the_same_from_protobuf_and_json() -> None:
    message = request(
        (
            {"service.name": "checkout"},
            [
                metric("queue.depth", "gauge", number(3.5, {"queue": "a"}), number(7, {"queue": "b"})),
                metric("requests", "sum", number(120, {"route": "/cart"}), temporality=CUMULATIVE, monotonic=True),
                metric("bytes.sent", "sum", number(2048.0), temporality=DELTA, monotonic=True),
                metric("inflight", "sum", number(4), temporality=CUMULATIVE),  # an UpDownCounter: a level
                metric("balance", "sum", number(-3), temporality=DELTA),
                metric("latency", "histogram", histogram_point(1.25, 5, [0.1, 1.0], [1, 3, 1]), temporality=CUMULATIVE),
                metric("size", "histogram", histogram_point(10.0, 2), temporality=DELTA),
                metric(
                    "latency.exp",
                    "exponential_histogram",
                    exponential_point(12.0, 4, 0, 1, 1, [1, 2]),
                    temporality=DELTA,
                ),
                metric("gc", "summary", summary_point(0.5, 10, {0.5: 0.01, 0.95: 0.04, 0.99: 0.09})),
            ],
        )
    )
    expected = [
        checkout("queue.depth", G, 3.5),
        checkout("queue.depth", G, 7),
        checkout("requests", C, 120),
        checkout("bytes.sent", D, 2048.0),
        checkout("inflight", G, 4),
        checkout("balance", D, -3),
        checkout("latency", HC, 1.25, 5, ((0.1, 1.0), (1, 3, 1))),
        checkout("size", HD, 10.0, 2),
        # scale 0: base 2; the zero bucket up to 0, then (2, 4] and (4, 8] between edges 2**1 .. 2**3
        checkout("latency.exp", HD, 12.0, 4, ((0.0, 2.0, 4.0, 8.0), (1.0, 0.0, 1.0, 2.0, 0.0))),
        checkout("gc", HC, 0.5, 10),
        checkout("gc:p95", G, 0.04),
    ]
    for result in both(message):
        assert result.rejections == ()
        assert rows(result.batch) == expected


def test_exponential_buckets_become_explicit_bounds() -> None:
    bounds, counts = exponential_buckets(scale=1, zero_count=1, offset=-1, positive=[1, 2], negative=2)
    assert bounds == pytest.approx([0.0, 2**-0.5, 1.0, 2**0.5])
    assert counts == [3.0, 0.0, 1.0, 2.0, 0.0]  # negatives join the zero bucket: the counts add up
    # scale -10: base 2**1024 overflows; the buckets past the float range fold into the last one
    assert exponential_buckets(scale=-10, zero_count=0, offset=0, positive=[1, 1, 5], negative=0) == (
        [0.0, 1.0],
        [0.0, 0.0, 7.0],
    )
    assert exponential_buckets(scale=3, zero_count=4, offset=7, positive=[], negative=0) == ([0.0], [4.0, 0.0])
    # the p95 of 100 observations, 90 in (1, 2] and 10 in (2, 4], lies in (2, 4]
    bounds, counts = exponential_buckets(scale=0, zero_count=0, offset=0, positive=[90, 10], negative=0)
    assert 2.0 < quantile(tuple(bounds), np.asarray(counts), 0.95) <= 4.0


def test_the_spec_example_decodes() -> None:
    path = DATASETS / "spec-examples" / "opentelemetry-proto" / "metrics.json"
    if not path.is_file():
        pytest.skip(f"spec examples not found at {path} (shared datasets sit beside the checkout)")
    result = decode_metric_file(path)
    t = 1544712660300000000
    assert result.rejections == ()
    assert rows(result.batch) == [
        ("my.counter", "my.service", None, PLACED_SERVICE, D, t, t, 5.0, 0.0, None, None),
        ("my.gauge", "my.service", None, PLACED_SERVICE, G, t, 0, 10.0, 0.0, None, None),
        ("my.histogram", "my.service", None, PLACED_SERVICE, HD, t, t, 2.0, 2.0, (1.0,), (1, 1)),
        (
            "my.exponential.histogram",
            "my.service",
            None,
            PLACED_SERVICE,
            HD,
            t,
            t,
            10.0,
            3.0,
            (0.0, 2.0, 4.0, 8.0),
            (1.0, 0.0, 0.0, 2.0, 0.0),
        ),
    ]


def scraped(job: str, instance: str) -> dict[str, str]:
    """The resource a Collector's prometheus receiver gives a scrape target's series."""
    host, _, port = instance.rpartition(":")
    return {
        "service.name": job,
        "service.instance.id": instance,
        "server.address": host,
        "server.port": port,
        "url.scheme": "http",
    }


DCGM_LABELS = {
    "gpu": "0",
    "UUID": "GPU-5b8efff7-9803-8103-d269-b633813fc60c",
    "device": "nvidia0",
    "modelName": "NVIDIA H100 80GB HBM3",
    "Hostname": "gpu-node-1",
    "DCGM_FI_DRIVER_VERSION": "550.54.15",
}
WORKLOAD = {"container": "vllm", "namespace": "llm", "pod": "vllm-engine-7d9f8b6c5d-x2x4z"}
EXPORTED = {f"exported_{key}": value for key, value in WORKLOAD.items()}


@pytest.mark.parametrize(
    ("resource", "name", "data", "labels", "placed"),
    [
        pytest.param(  # honor_labels: true (the agent config): DCGM's own pod label names the workload
            scraped("dcgm-exporter", "10.0.3.7:9400"),
            "DCGM_FI_PROF_DRAM_ACTIVE",
            "gauge",
            {**DCGM_LABELS, **WORKLOAD},
            ("gpu:gpu-node-1/0", "vllm-engine", PLACED_GPU),
            id="dcgm-honor-labels",
        ),
        pytest.param(  # the default: the workload's labels exported_*, `pod` the exporter's own
            scraped("dcgm-exporter", "10.0.3.7:9400"),
            "DCGM_FI_PROF_NVLINK_TX_BYTES",
            "gauge",
            {**DCGM_LABELS, **EXPORTED, "pod": "dcgm-exporter-k8x2p", "namespace": "gpu-operator"},
            ("gpu:gpu-node-1/0", "vllm-engine", PLACED_GPU),
            id="dcgm-exported-pod",
        ),
        pytest.param(
            scraped("dcgm-exporter", "10.0.3.7:9400"),
            "DCGM_FI_DEV_XID_ERRORS",
            "gauge",
            {**DCGM_LABELS, "gpu": "1", "device": "nvidia1"},
            ("gpu:gpu-node-1/1", None, PLACED_GPU),
            id="dcgm-idle-gpu",
        ),
        pytest.param(
            scraped("vllm-engine", "10.0.3.21:8000"),
            "vllm:num_requests_waiting",
            "gauge",
            {"engine": "0", "model_name": "meta-llama/Llama-3.1-8B-Instruct", "pod": "vllm-engine-7d9f8b6c5d-x2x4z"},
            ("vllm-engine", None, PLACED_SERVICE),
            id="vllm",
        ),
        pytest.param(
            scraped("vllm-engine", "10.0.3.21:8000"),
            "vllm:num_preemptions_total",
            "sum",
            {"engine": "0", "model_name": "meta-llama/Llama-3.1-8B-Instruct"},
            ("vllm-engine", None, PLACED_SERVICE),
            id="vllm-static-target",
        ),
        pytest.param(
            scraped("kubernetes-cadvisor", "gpu-node-1:10250"),
            "container_cpu_usage_seconds_total",
            "sum",
            {
                "container": "rag",
                "cpu": "total",
                "id": "/kubepods/burstable/pod7d9f/cri-containerd-5b8e",
                "image": "ghcr.io/acme/rag-retriever:1.4.2",
                "namespace": "llm",
                "pod": "rag-retriever-5c7b9d6f8-x2x4z",
            },
            ("rag-retriever", None, PLACED_SERVICE),
            id="cadvisor",
        ),
        pytest.param(  # kubeletstats: the pod on the resource
            {"k8s.pod.name": "rag-retriever-5c7b9d6f8-x2x4z", "k8s.namespace.name": "llm", "k8s.node.name": "n1"},
            "k8s.pod.cpu.usage",
            "gauge",
            {},
            ("rag-retriever", None, PLACED_SERVICE),
            id="kubeletstats",
        ),
        pytest.param(
            scraped("node-exporter", "10.0.3.7:9100"),
            "node_memory_numa_numa_miss_total",
            "sum",
            {"node": "1"},
            ("host:10.0.3.7", None, PLACED_HOST),
            id="node-exporter",
        ),
    ],
)
def test_scraped_series_are_placed_by_their_real_attributes(
    resource: dict[str, str], name: str, data: str, labels: dict[str, str], placed: tuple[Any, ...]
) -> None:
    temporality, monotonic = (CUMULATIVE, True) if data == "sum" else (0, False)
    message = request(
        (resource, [metric(name, data, number(1.5, labels), temporality=temporality, monotonic=monotonic)])
    )
    for result in both(message):
        assert [row[1:4] for row in rows(result.batch)] == [placed]
        assert result.batch.kind.tolist() == [G if data == "gauge" else C]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (42, "42"),
        (-1.5, "-1.5"),
        (2.0, "2.0"),
        (True, "true"),
        (b"\x01\xff", "01ff"),
        (["a", 1], '["a",1]'),
        ({"b": 1, "a": [True]}, '{"a":[true],"b":1}'),
    ],
)
def test_attribute_values_that_are_not_strings_read_as_text(value: object, text: str) -> None:
    message = request(({"service.name": value}, [metric("up", "gauge", number(1.0, {"gpu": value, "host.name": "h"}))]))
    for result in both(message):
        assert [row[1] for row in rows(result.batch)] == [f"gpu:h/{text}"]


def test_points_that_cannot_be_read_are_rejected_with_reasons() -> None:
    stale = 1  # flags: NO_RECORDED_VALUE
    message = request(
        (
            {"service.name": "checkout"},
            [
                metric(
                    "up", "gauge", number(1.0), number(1.0, flags=stale), number(None), number(2.0, time_unix_nano=0)
                ),
                metric("nan", "gauge", number(float("nan"))),
                metric("requests", "sum", number(1), number(2), monotonic=True),  # UNSPECIFIED temporality
                metric("latency", "histogram", histogram_point(None, 3), temporality=CUMULATIVE),
                metric("size", "histogram", histogram_point(1.0, 1, [1.0], [1]), temporality=DELTA),
                metric("lat", "histogram", histogram_point(1.0, 1, flags=stale), temporality=DELTA),
                metric(
                    "exp",
                    "exponential_histogram",
                    exponential_point(1.0, 1, 21, 0, 0, [1]),
                    exponential_point(None, 1, 0, 0, 0, [1]),
                    temporality=DELTA,
                ),
                metric("gc", "summary", summary_point(1.0, 1, {0.95: 1.0}, flags=stale)),
                metric("", "gauge", number(1.0)),
            ],
        )
    )
    expected = Counter(
        {
            NO_VALUE: 1,
            "no timestamp: time_unix_nano is 0": 1,
            "value is not a finite number": 1,
            BAD_TEMPORALITY: 2,
            NO_SUM: 2,
            BUCKETS_MISMATCH: 1,
            BAD_SCALE: 1,
            NO_NAME: 1,
        }
    )
    for result in both(message):
        assert [row[0] for row in rows(result.batch)] == ["up"]
        assert Counter({r.reason: r.count for r in result.rejections}) == expected
        assert "staleness" not in result.message  # three markers: accepted, holding nothing


def _points_document(points: list[dict[str, Any]], data: str = "gauge", **body: Any) -> bytes:
    metric_json = {"name": "m", data: {"dataPoints": points, **body}}
    return json.dumps({"resourceMetrics": [{"scopeMetrics": [{"metrics": [metric_json]}]}]}).encode()


def test_json_accepts_enum_names_and_int64_as_numbers() -> None:
    points: list[dict[str, Any]] = [
        {"timeUnixNano": T0, "startTimeUnixNano": str(S0), "asInt": "-4"},
        {"timeUnixNano": T0, "asDouble": 1},
    ]
    result = decode_metrics_json(
        _points_document(points, "sum", aggregationTemporality="AGGREGATION_TEMPORALITY_CUMULATIVE", isMonotonic=True)
    )
    assert result.rejections == ()
    assert result.batch.value.tolist() == [-4.0, 1.0]
    assert result.batch.start_ns.tolist() == [S0, 0]
    assert result.batch.kind.tolist() == [C, C]


def test_json_points_with_fields_of_the_wrong_type_are_rejected_with_reasons() -> None:
    deep: dict[str, Any] = {"stringValue": "bottom"}
    for _ in range(MAX_VALUE_DEPTH + 1):
        deep = {"arrayValue": {"values": [deep]}}
    good: dict[str, Any] = {"timeUnixNano": str(T0), "asDouble": 1.0}
    bad: list[tuple[dict[str, Any], str]] = [
        ({"timeUnixNano": "soon"}, "timeUnixNano must be an integer"),
        ({"startTimeUnixNano": -1}, "startTimeUnixNano must be an integer"),
        ({"asDouble": "fast"}, "asDouble must be a number"),
        ({"asDouble": None, "asInt": "x"}, "asInt must be a 64-bit integer"),
        ({"flags": "stale"}, "flags must be an integer"),
        ({"attributes": {"gpu": "0"}}, "attributes must be a list of KeyValue"),
        ({"attributes": [{"key": "gpu", "value": {"intValue": "zero"}}]}, "attributes must be a list of KeyValue"),
        ({"attributes": [{"key": "gpu", "value": deep}]}, f"nests deeper than {MAX_VALUE_DEPTH} levels"),
    ]
    result = decode_metrics_json(_points_document([good] + [{**good, **fields} for fields, _ in bad]))
    assert len(result.batch) == 1
    assert result.rejected == len(bad)
    for _, reason in bad:
        assert reason in result.message
    histograms: list[tuple[dict[str, Any], str]] = [
        ({"bucketCounts": ["a"], "explicitBounds": []}, "bucketCounts must be an integer"),
        ({"explicitBounds": "1,2"}, "explicitBounds must be a list"),
        ({"count": 1.5e300}, "count must be an integer"),
    ]
    good = {"timeUnixNano": T0, "sum": 1.0, "count": "1"}
    histogram = _points_document([good] + [{**good, **f} for f, _ in histograms], "histogram", aggregationTemporality=2)
    result = decode_metrics_json(histogram)
    assert len(result.batch) == 1 and result.rejected == len(histograms)
    for _, reason in histograms:
        assert reason in result.message


@pytest.mark.parametrize(
    ("document", "reason"),
    [
        ({"name": 5, "gauge": {"dataPoints": [{}, {}]}}, "name must be a string"),
        ({"name": "m", "sum": {"dataPoints": [{}, {}], "aggregationTemporality": "SOMETIMES"}}, BAD_TEMPORALITY),
        (
            {"name": "m", "sum": {"dataPoints": [{}, {}], "aggregationTemporality": 2, "isMonotonic": "yes"}},
            "isMonotonic",
        ),
    ],
)
def test_json_metrics_with_fields_of_the_wrong_type_reject_all_their_points(document: object, reason: str) -> None:
    result = decode_metrics_json(json.dumps({"resourceMetrics": [{"scopeMetrics": [{"metrics": [document]}]}]}))
    assert len(result.batch) == 0 and result.rejected == 2
    assert reason in result.message


def test_json_resources_with_unreadable_attributes_reject_their_points() -> None:
    points = {"gauge": {"dataPoints": [{"timeUnixNano": T0, "asDouble": 1}] * 3}}
    document = {
        "resourceMetrics": [
            {"resource": {"attributes": "service.name=x"}, "scopeMetrics": [{"metrics": [{"name": "m", **points}]}]}
        ]
    }
    result = decode_metrics_json(json.dumps(document))
    assert len(result.batch) == 0 and result.rejected == 3
    assert "resource attributes must be a list of KeyValue" in result.message


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (b"not json {", "malformed OTLP/JSON"),
        (b"[1, 2]", "must be an object with resourceMetrics"),
        (b'{"resourceMetrics": {}}', r"\$.resourceMetrics must be a list"),
        (b'{"resourceMetrics": [{"resource": []}]}', r"resourceMetrics\[0\].resource must be an object"),
        (b'{"resourceMetrics": [{"scopeMetrics": [{"metrics": [7]}]}]}', r"metrics\[0\] must be an object"),
        (b'{"resourceMetrics": [{"scopeMetrics": [{"metrics": [{"gauge": []}]}]}]}', r"metrics\[0\].gauge must be"),
        (
            b'{"resourceMetrics": [{"scopeMetrics": [{"metrics": [{"sum": {"dataPoints": [7]}}]}]}]}',
            r"sum.dataPoints\[0\] must be an object",
        ),
        (b'{"resourceSpans": []}', "resourceSpans is not metrics"),
        (b'{"resource_logs": []}', "resource_logs is not metrics"),
        (b"[" * 100_000, "malformed OTLP/JSON"),
    ],
)
def test_malformed_json_is_refused_naming_the_field(body: bytes, match: str) -> None:
    with pytest.raises(DecodeError, match=match):
        decode_metrics_json(body)


def _bad_attribute_key() -> bytes:
    """A request whose one point attribute key is not UTF-8 (upb refuses proto3 strings that are not)."""
    data = request(({}, [metric("up", "gauge", number(1.0, {"kX": "v"}))])).SerializeToString()
    return bytes(data).replace(b"kX", b"k\xff")


@pytest.mark.parametrize(
    "data",
    [
        b"\xff\xff\xff",
        b"\x0a\x05\x12\x03",
        request(({}, [metric("up", "gauge", number(1.0))])).SerializeToString()[:-3],
        _bad_attribute_key(),
    ],
)
def test_malformed_protobuf_is_refused(data: bytes) -> None:
    with pytest.raises(DecodeError, match="malformed ExportMetricsServiceRequest"):
        parse_metrics_request(data)
    with pytest.raises(DecodeError, match="malformed ExportMetricsServiceRequest"):
        decode_metrics_protobuf(data)


def test_metric_files_decode_gzipped_or_not_and_refuse_other_signals(tmp_path: Path) -> None:
    message = request(({"service.name": "cart"}, [metric("up", "gauge", number(1.0), number(0.0))]))
    files = {
        "m.pb": message.SerializeToString(),
        "m.pb.gz": gzip.compress(message.SerializeToString()),
        "m.json.gz": gzip.compress(otlp_json(message)),
        "m.json": b"  \n" + otlp_json(message),
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
        result = decode_metric_file(tmp_path / name)
        assert result.batch.value.tolist() == [1.0, 0.0], name
    refused = {
        "traces.json": (b'{"resourceSpans": []}', "not metrics"),
        "logs.json": (b'{"resourceLogs": []}', "not metrics"),
        "jaeger.json": (b'{"data": []}', "not OTLP/JSON metrics"),
        "bad.gz": (b"\x1f\x8b\x08junk", "gzip"),
    }
    for name, (data, match) in refused.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(DecodeError, match=match) as info:
            decode_metric_file(tmp_path / name)
        assert str(info.value).startswith(str(tmp_path / name))


def test_encoded_batches_decode_to_the_same_points() -> None:
    built = MetricRows()
    dcgm = {"service.name": "dcgm-exporter"}
    for k in range(3):
        t = T0 + k * 10_000_000_000
        owned = {"gpu": "0", "Hostname": "n1", "exported_pod": "vllm-engine-7d9f8b6c5d-x2x4z"}
        built.add("DCGM_FI_PROF_DRAM_ACTIVE", G, dcgm, owned, t, 0, 0.5 + k)
        built.add("DCGM_FI_PROF_DRAM_ACTIVE", G, dcgm, {"gpu": "1", "Hostname": "n1"}, t, 0, 0.25)
        built.add("DCGM_FI_PROF_NVLINK_TX_BYTES", C, dcgm, owned, t, S0, 1e9 * (k + 1))
        built.add("node_memory_numa_numa_miss_total", C, {}, {"instance": "n1:9100"}, t, S0, 7.0 * k)
        built.add("requests", D, {"service.name": "checkout"}, {}, t, t - 10_000_000_000, 12.0)
        built.add(
            "latency", HC, {"service.name": "checkout"}, {}, t, S0, 3.5 * k, 7.0 * k, [0.1, 1.0], [k, 2 * k, 4 * k]
        )
        built.add("size", HD, {"service.name": "checkout"}, {}, t, S0, 10.0, 2.0)
        built.add("vllm:gpu_cache_usage_perc", G, {"service.name": "unknown_service"}, {}, t, 0, 0.9)
    batch = built.build().batch
    assert set(batch.placement.tolist()) == {PLACED_SERVICE, PLACED_GPU, PLACED_HOST}
    messages = encode_metric_batch(batch, max_points=5)
    assert len(messages) == -(-len(batch) // 5)
    decoded = [decode_metrics_protobuf(m) for m in messages]
    assert all(result.rejections == () for result in decoded)
    back = concat_metrics([result.batch for result in decoded])
    assert sorted(rows(back), key=repr) == sorted(rows(batch), key=repr)
    assert encode_metric_batch(MetricBatch.empty()) == []
    with pytest.raises(ValueError, match="max_points"):
        encode_metric_batch(batch, max_points=0)


@pytest.mark.parametrize("temporality", [AggregationTemporality.CUMULATIVE, AggregationTemporality.DELTA])
def test_what_the_opentelemetry_sdk_exports_decodes(temporality: AggregationTemporality) -> None:
    reader = InMemoryMetricReader(preferred_temporality={SdkCounter: temporality, SdkHistogram: temporality})
    resource = Resource.create({"service.name": "vllm-worker-0", "host.name": "gpu-node-1"})
    provider = MeterProvider(resource=resource, metric_readers=[reader])
    meter = provider.get_meter("rca.tests")
    requests = meter.create_counter("gen_ai.requests")
    inflight = meter.create_up_down_counter("gen_ai.requests.inflight")
    latency = meter.create_histogram("gen_ai.latency.e2e", unit="s")

    def dram(options: CallbackOptions) -> list[Observation]:
        return [Observation(0.93, {"gpu.index": 0}), Observation(0.41, {"gpu.index": 1})]

    meter.create_observable_gauge("gpu.dram.utilization", callbacks=[dram])
    for route in ("/v1/completions", "/v1/completions", "/v1/chat"):
        requests.add(1, {"route": route})
    inflight.add(10)
    inflight.add(-4)
    for seconds in (3.0, 7.0, 30.0):
        latency.record(seconds)
    data = reader.get_metrics_data()
    assert data is not None
    message = encode_metrics(data)
    provider.shutdown()
    cumulative = temporality == AggregationTemporality.CUMULATIVE
    for result in both(message):
        assert result.rejections == ()
        got = {(row[0], row[1], row[7]): row for row in rows(result.batch)}
        assert set(got) == {
            ("gen_ai.requests", "vllm-worker-0", 2.0),
            ("gen_ai.requests", "vllm-worker-0", 1.0),
            ("gen_ai.requests.inflight", "vllm-worker-0", 6.0),
            ("gen_ai.latency.e2e", "vllm-worker-0", 40.0),
            ("gpu.dram.utilization", "gpu:gpu-node-1/0", 0.93),
            ("gpu.dram.utilization", "gpu:gpu-node-1/1", 0.41),
        }
        kinds = {row[0]: row[4] for row in got.values()}
        assert kinds == {
            "gen_ai.requests": C if cumulative else D,
            "gen_ai.requests.inflight": G,  # an UpDownCounter: a level
            "gen_ai.latency.e2e": HC if cumulative else HD,
            "gpu.dram.utilization": G,
        }
        time, start, _, count, bounds, counts = got[("gen_ai.latency.e2e", "vllm-worker-0", 40.0)][5:]
        assert count == 3.0 and 0 < start <= time
        assert bounds is not None and counts is not None and bounds[:4] == (0.0, 5.0, 10.0, 25.0)
        assert counts[:5] == (0, 1, 1, 0, 1) and sum(counts) == 3
        assert got[("gpu.dram.utilization", "gpu:gpu-node-1/0", 0.93)][2:4] == (None, PLACED_GPU)


def test_series_sharing_a_node_stay_apart_through_the_encoder() -> None:
    """Two pods of one service: their counters are two series, and their rates survive a replay."""
    built = MetricRows()
    for k in range(4):
        for pod, per_second in (("cart-5f6585d649-fnmft", 1.0), ("cart-5f6585d649-x2x4z", 0.1)):
            t = T0 + k * 10**10
            built.add("container_cpu_usage_seconds_total", C, {}, {"pod": pod}, t, S0, per_second * (t - S0) / 1e9)
    batch = built.build().batch
    replayed = [decode_metrics_protobuf(chunk).batch for chunk in encode_metric_batch(batch)]
    assert len(np.unique(np.concatenate([b.series for b in replayed]))) == 2
    graph = ServiceGraph()
    for b in replayed:
        graph.add_metrics(b)
    _, sums, _ = graph.aggregate(0, graph.newest_ns + 1).metrics.view()
    assert sums[:, 1].sum() / sums[:, 0].sum() == pytest.approx((1.0 + 0.1) / 2)
