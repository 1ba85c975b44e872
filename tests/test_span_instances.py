"""Each span's instance of its service (`k8s.pod.name`, else `service.instance.id`, else
`host.name`): read alike by every span decoder, kept through the encoder and the OpenTelemetry
SDK replay, and carried by the simulator's engine replicas, which may share service names."""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from concurrent import futures
from functools import cache

import grpc
import numpy as np
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from benchmarks.sdk_replay import replay_with_sdk
from ingest.jaeger_json import decode_jaeger_json
from ingest.otlp_encode import encode_batch
from ingest.otlp_json import decode_otlp_json
from ingest.otlp_proto import _scanned, decode_protobuf, decode_reference, parse_request
from rca.telemetry.alerts import strip_pod_suffix
from rca.telemetry.builder import SpanBatchBuilder
from rca.telemetry.conventions import AttrValue
from rca.telemetry.spans import KIND_SERVER, DecodeResult, SpanBatch
from simulation import SimulatedCase, simulate

T0 = 1_767_000_000_000_000_000
TRACE_ID = bytes(range(1, 17))
ENGINE = "vllm-engine"
Resource = dict[str, str]
# One span per resource: (its process's resource attributes besides service.name, the instance read).
RESOURCES: tuple[tuple[Resource, str | None], ...] = (
    ({"service.instance.id": "vllm-engine-7d9f-a"}, "vllm-engine-7d9f-a"),
    ({"service.instance.id": "vllm-engine-7d9f-b"}, "vllm-engine-7d9f-b"),  # a second replica, same name
    ({"k8s.pod.name": "vllm-engine-5c6b-x"}, "vllm-engine-5c6b-x"),
    ({"host.name": "gpu-node-3"}, "gpu-node-3"),
    ({}, None),
    ({"service.instance.id": "i-1", "k8s.pod.name": "pod-1", "host.name": "host-1"}, "pod-1"),
    ({"k8s.pod.name": "pod-2", "host.name": "host-2"}, "pod-2"),
    ({"host.name": "host-3", "service.instance.id": "i-3"}, "i-3"),  # the key wins, not the order
)
SCENARIO = "llm-nccl_communication"
RATE = 0.1  # requests per second: a few thousand spans, every replica's among them


def instances(batch: SpanBatch) -> dict[int, str | None]:
    """Each span's instance by span id."""
    return {
        int(span): None if i < 0 else batch.strings[i]
        for span, i in zip(batch.span_id.tolist(), batch.instance.tolist(), strict=True)
    }


def services(batch: SpanBatch) -> dict[int, str]:
    return {int(span): batch.strings[s] for span, s in zip(batch.span_id.tolist(), batch.service.tolist(), strict=True)}


def _protobuf() -> bytes:
    """An export request of one ResourceSpans per resource, all of service `ENGINE`."""
    request = ExportTraceServiceRequest()
    for n, (resource, _) in enumerate(RESOURCES, 1):
        resource_spans = request.resource_spans.add()
        attributes = {"service.name": ENGINE, **resource}
        resource_spans.resource.attributes.extend(
            KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in attributes.items()
        )
        resource_spans.scope_spans.add().spans.append(
            Span(
                trace_id=TRACE_ID,
                span_id=n.to_bytes(8, "big"),
                name="llm_request",
                kind=Span.SPAN_KIND_SERVER,
                start_time_unix_nano=T0,
                end_time_unix_nano=T0 + 1_000_000,
            )
        )
    return bytes(request.SerializeToString())


def _otlp_json() -> bytes:
    resource_spans = [
        {
            "resource": {
                "attributes": [
                    {"key": k, "value": {"stringValue": v}} for k, v in {"service.name": ENGINE, **resource}.items()
                ]
            },
            "scopeSpans": [
                {
                    "spans": [
                        {
                            "traceId": TRACE_ID.hex(),
                            "spanId": n.to_bytes(8, "big").hex(),
                            "name": "llm_request",
                            "kind": 2,
                            "startTimeUnixNano": str(T0),
                            "endTimeUnixNano": str(T0 + 1_000_000),
                        }
                    ]
                }
            ],
        }
        for n, (resource, _) in enumerate(RESOURCES, 1)
    ]
    return json.dumps({"resourceSpans": resource_spans}).encode()


def _jaeger_json() -> bytes:
    """One trace whose spans each name their own process (the resource as its tags)."""
    trace = {
        "traceID": TRACE_ID.hex(),
        "spans": [
            {
                "traceID": TRACE_ID.hex(),
                "spanID": n.to_bytes(8, "big").hex(),
                "operationName": "llm_request",
                "references": [],
                "startTime": T0 // 1000,
                "duration": 1000,
                "processID": f"p{n}",
                "tags": [{"key": "span.kind", "type": "string", "value": "server"}],
            }
            for n in range(1, len(RESOURCES) + 1)
        ],
        "processes": {
            f"p{n}": {
                "serviceName": ENGINE,
                "tags": [{"key": k, "type": "string", "value": v} for k, v in resource.items()],
            }
            for n, (resource, _) in enumerate(RESOURCES, 1)
        },
    }
    return json.dumps({"data": [trace]}).encode()


def _scanner(data: bytes) -> DecodeResult:
    """The wire scanner's decode, which `decode_protobuf` takes whenever it can."""
    result = _scanned(data, parse_request(data))
    assert result is not None, "the scanner fell back to upb"
    return result


DECODERS: dict[str, tuple[Callable[[], bytes], Callable[[bytes], DecodeResult]]] = {
    "otlp-protobuf": (_protobuf, decode_protobuf),
    "otlp-protobuf-scanner": (_protobuf, _scanner),
    "otlp-protobuf-upb": (_protobuf, decode_reference),
    "otlp-json": (_otlp_json, decode_otlp_json),
    "jaeger-json": (_jaeger_json, decode_jaeger_json),
}


@pytest.mark.parametrize("name", DECODERS)
def test_every_decoder_reads_the_instance_of_each_resource(name: str) -> None:
    encode, decode = DECODERS[name]
    result = decode(encode())
    assert result.rejected == 0
    assert set(services(result.batch).values()) == {ENGINE}
    assert instances(result.batch) == {n: expected for n, (_, expected) in enumerate(RESOURCES, 1)}


def _built() -> SpanBatch:
    """Spans of every resource of `RESOURCES`, some on a GPU (with and without a host) and with
    a NUMA placement, a non-LLM caller among them."""
    builder = SpanBatchBuilder()
    spans: list[tuple[str, Mapping[str, AttrValue], Mapping[str, AttrValue]]] = [
        *((ENGINE, resource, {}) for resource, _ in RESOURCES),
        (ENGINE, {"host.name": "gpu-node-1", "process.numa_node": 0}, {"gpu.id": "1", "gpu.numa_node": 1}),
        (ENGINE, {"service.instance.id": "vllm-engine-7d9f-b", "host.name": "gpu-node-2"}, {"gpu.id": "0"}),
        ("vllm-worker-0", {}, {"gpu.id": "0"}),  # a GPU and no host: no instance
        ("router", {}, {"peer.service": ENGINE}),
    ]
    for n, (service, resource, attributes) in enumerate(spans, 1):
        start = T0 + n * 1000
        builder.add(
            TRACE_ID,
            n.to_bytes(8, "big"),
            b"",
            service,
            "op",
            KIND_SERVER,
            start,
            start + 500,
            False,
            attributes,
            resource,
        )
    return builder.build().batch


@pytest.mark.parametrize("max_spans", [1, 4, 2048])
def test_encode_decode_keeps_each_spans_instance(max_spans: int) -> None:
    batch = _built()
    assert instances(batch)[len(batch)] is None and instances(batch)[len(batch) - 1] is None
    decoded = [decode_protobuf(message) for message in encode_batch(batch, max_spans)]
    assert all(d.rejected == 0 for d in decoded)
    got = {k: v for d in decoded for k, v in instances(d.batch).items()}
    assert got == instances(batch)
    gpus = {
        int(span): d.batch.strings[r]
        for d in decoded
        for span, r in zip(d.batch.span_id.tolist(), d.batch.resource.tolist(), strict=True)
        if r >= 0
    }
    assert gpus == {9: "gpu:gpu-node-1/1", 10: "gpu:gpu-node-2/0", 11: "gpu:unknown-host/0"}


def test_encoded_resources_name_the_instance() -> None:
    """One resource per instance of a service (and per GPU host), `service.instance.id` on it."""
    request = ExportTraceServiceRequest.FromString(encode_batch(_built())[0])
    processes = [{kv.key: kv.value.string_value for kv in rs.resource.attributes} for rs in request.resource_spans]
    named = sorted(p["service.instance.id"] for p in processes if p["service.name"] == ENGINE and len(p) > 1)
    expected = [instance for _, instance in RESOURCES if instance is not None]
    assert named == sorted([*expected, "gpu-node-1", "vllm-engine-7d9f-b"])
    assert {p["service.name"] for p in processes if "service.instance.id" not in p} == {
        ENGINE,
        "vllm-worker-0",
        "router",
    }


@cache
def several_replicas(replica_names: str, style: str = "conventions") -> SimulatedCase:
    """The first case of seeds 101..140 whose LLM deployment has two or more engine replicas."""
    for seed in range(101, 141):
        case = simulate(SCENARIO, seed=seed, rate=RATE, style=style, replica_names=replica_names)
        if int(case.truth.layout.rpartition("x")[2]) >= 2:
            return case
    raise AssertionError(f"no seed of {SCENARIO} in 101..140 draws several replicas")


def _instances_by_service(case: SimulatedCase) -> dict[str, set[str | None]]:
    found: dict[str, set[str | None]] = defaultdict(set)
    for batch in case.batches:
        for service, instance in zip(batch.service.tolist(), batch.instance.tolist(), strict=True):
            found[batch.strings[service]].add(None if instance < 0 else batch.strings[instance])
    return found


def _hosts(case: SimulatedCase) -> set[str | None]:
    return {f"gpu-node-{r + 1}" for r in range(int(case.truth.layout.rpartition("x")[2]))}


@pytest.mark.parametrize("style", ["conventions", "real"])
def test_shared_replica_names_differ_by_instance(style: str) -> None:
    case = several_replicas("shared", style)
    found = _instances_by_service(case)
    llm = {service for service in found if service.startswith("vllm-")}
    assert ENGINE in llm and not any(service.startswith(("vllm-engine-", "vllm-worker-b")) for service in found)
    assert (style == "real") == (llm == {ENGINE})  # vLLM's workers trace nothing
    assert all(found[service] == _hosts(case) for service in llm)  # every replica's host under one name
    assert all(found[service] == {None} for service in found.keys() - llm)


def test_shared_replica_names_reach_the_pods_their_metrics_name() -> None:
    """One Deployment's pods strip back to one workload: the second engine's pods and the GPUs'
    exported pods name the first engine's, each pod its own."""
    case = several_replicas("shared", "real")
    pods = {batch.strings[p] for batch in case.metrics for p in np.unique(batch.pod[batch.pod >= 0]).tolist()}
    engine_pods = {pod for pod in pods if strip_pod_suffix(pod).startswith("vllm-")}
    assert {strip_pod_suffix(pod) for pod in engine_pods} == {ENGINE}
    assert len(engine_pods) == len(_hosts(case))  # one pod per replica


def test_distinct_replica_names_have_one_instance_each() -> None:
    case = several_replicas("distinct")
    found = _instances_by_service(case)
    workers = {service for service in found if service.startswith("vllm-worker")}
    assert any(service.startswith("vllm-worker-b-") for service in workers)
    assert all(len(found[service]) == 1 for service in workers)
    assert found["vllm-worker-0"] == found[ENGINE] == {"gpu-node-1"}
    assert found["vllm-worker-b-0"] == found["vllm-engine-b"] == {"gpu-node-2"}


def test_simulated_gpu_spans_run_on_their_instance() -> None:
    """A rank's GPU node is on the host its spans name as their instance."""
    case = several_replicas("shared")
    pairs = {
        (batch.strings[r].removeprefix("gpu:").rpartition("/")[0], batch.strings[i])
        for batch in case.batches
        for r, i in zip(batch.resource.tolist(), batch.instance.tolist(), strict=True)
        if r >= 0
    }
    assert pairs == {(host, host) for host in _hosts(case)}


class _Collector:
    """An OTLP/gRPC trace endpoint on loopback that keeps every request's bytes."""

    def __init__(self) -> None:
        self.requests: list[bytes] = []
        self._lock = threading.Lock()

    def export(self, request: bytes, _context: grpc.ServicerContext) -> bytes:
        with self._lock:
            self.requests.append(request)
        return bytes(ExportTraceServiceResponse().SerializeToString())


@pytest.fixture
def collector() -> Iterator[tuple[_Collector, str]]:
    kept = _Collector()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    handler = grpc.method_handlers_generic_handler(
        "opentelemetry.proto.collector.trace.v1.TraceService",
        {"Export": grpc.unary_unary_rpc_method_handler(kept.export)},
    )
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield kept, f"127.0.0.1:{port}"
    finally:
        server.stop(None)


def test_sdk_replay_keeps_replicas_apart(collector: tuple[_Collector, str]) -> None:
    """Through the OpenTelemetry SDK each replica is its own TracerProvider: its spans arrive
    under the shared service name with their own instance."""
    kept, endpoint = collector
    case = several_replicas("shared")
    assert replay_with_sdk(case, endpoint) == case.spans
    got: dict[int, str | None] = {}
    for request in kept.requests:
        result = decode_protobuf(request)
        assert result.rejected == 0
        got.update(instances(result.batch))
    expected = {k: v for batch in case.batches for k, v in instances(batch).items()}
    assert got == expected
    assert set(expected.values()) == {None} | _hosts(case)
