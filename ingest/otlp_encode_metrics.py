"""Metric data points → OTLP protobuf: the inverse of `ingest.otlp_metrics`, for replaying batches
(simulator cases, datasets) through the real ingest path.

Rows are grouped by (node, owner, placement) into resources and by name and kind into metrics,
with the attributes that `rca.telemetry.metrics.place` reads back as the same node: a service as the
resource's `service.name`; a GPU `gpu:{host}/{index}` as DCGM exporter labels (`gpu`, `Hostname`,
`exported_pod` for its owner) under the resource `service.name` "dcgm-exporter"; a host
`host:{name}` as node_exporter's `instance` label (its metric names start with `node_`). Gauges
become gauges, cumulative and delta rows monotonic sums of that temporality, histogram rows
histograms with their buckets where they have them. The original attributes are not kept; each
point carries its series identity as the attribute `rca.graph.series` (hex), so series that share a
node (two pods of one service, per-NUMA-node counters) stay apart when read back.
"""

from __future__ import annotations

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality, Metric, ScopeMetrics

from ingest.otlp_encode import SCOPE_NAME
from rca.telemetry.metrics import GPU_PREFIX, HOST_PREFIX, PLACED_GPU, PLACED_HOST, MetricBatch, MetricKind

SERIES = "rca.series"
DCGM_EXPORTER = "dcgm-exporter"
NODE_EXPORTER = "node-exporter"
CUMULATIVE = AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE
DELTA = AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA
_TEMPORALITY = {
    MetricKind.CUMULATIVE: CUMULATIVE,
    MetricKind.DELTA: DELTA,
    MetricKind.HISTOGRAM_CUMULATIVE: CUMULATIVE,
    MetricKind.HISTOGRAM_DELTA: DELTA,
}
_HISTOGRAMS = (MetricKind.HISTOGRAM_CUMULATIVE, MetricKind.HISTOGRAM_DELTA)

Where = tuple[int, int, int, int]  # node, owner, pod, placement


def _key_values(attributes: dict[str, str]) -> list[KeyValue]:
    out = []
    for key, value in attributes.items():
        kv = KeyValue(key=key)
        kv.value.string_value = value
        out.append(kv)
    return out


def _attributes(batch: MetricBatch, where: Where) -> tuple[dict[str, str], dict[str, str]]:
    """(resource, point) attributes that place a point on `where`'s node."""
    node, owner, pod, placement = where
    name = batch.strings[node]
    if placement == PLACED_GPU:
        host, _, index = name.removeprefix(GPU_PREFIX).rpartition("/")
        point = {"gpu": index, "Hostname": host}
        if pod >= 0 or owner >= 0:
            point["exported_pod"] = batch.strings[pod if pod >= 0 else owner]
        return {"service.name": DCGM_EXPORTER}, point
    if placement == PLACED_HOST:
        return {"service.name": NODE_EXPORTER}, {"instance": name.removeprefix(HOST_PREFIX)}
    return {"service.name": name}, {"pod": batch.strings[pod]} if pod >= 0 else {}


def _metric(scope: ScopeMetrics, name: str, kind: MetricKind) -> Metric:
    metric: Metric = scope.metrics.add()
    metric.name = name
    if kind in _HISTOGRAMS:
        metric.histogram.aggregation_temporality = _TEMPORALITY[kind]
    elif kind != MetricKind.GAUGE:
        metric.sum.aggregation_temporality = _TEMPORALITY[kind]
        metric.sum.is_monotonic = True
    else:
        metric.gauge.SetInParent()
    return metric


def _message(batch: MetricBatch, lo: int, hi: int) -> bytes:
    """One ExportMetricsServiceRequest of rows [lo, hi)."""
    request = ExportMetricsServiceRequest()
    scopes: dict[Where, tuple[ScopeMetrics, list[KeyValue]]] = {}
    metrics: dict[tuple[Where, int, int], Metric] = {}
    columns = [
        c[lo:hi].tolist()
        for c in (
            batch.node,
            batch.owner,
            batch.pod,
            batch.placement,
            batch.name,
            batch.kind,
            batch.time_ns,
            batch.start_ns,
            batch.series,
        )
    ]
    columns += [
        batch.value[lo:hi].tolist(),
        batch.count[lo:hi].tolist(),
        batch.bucket_bounds[lo:hi],
        batch.bucket_counts[lo:hi],
    ]
    for node, owner, pod, placement, name, kind, time, start, series, value, count, bounds, buckets in zip(
        *columns, strict=True
    ):
        where = (node, owner, pod, placement)
        if where not in scopes:
            resource, point = _attributes(batch, where)
            resource_metrics = request.resource_metrics.add()
            resource_metrics.resource.attributes.extend(_key_values(resource))
            scope = resource_metrics.scope_metrics.add()
            scope.scope.name = SCOPE_NAME
            scopes[where] = scope, _key_values(point)
        scope, labels = scopes[where]
        metric = metrics.get((where, name, kind))
        if metric is None:
            metric = metrics[where, name, kind] = _metric(scope, batch.strings[name], MetricKind(kind))
        if kind in _HISTOGRAMS:
            p = metric.histogram.data_points.add()
            p.sum, p.count = value, round(count)
            if bounds is not None and buckets is not None:
                p.explicit_bounds.extend(bounds)
                p.bucket_counts.extend(round(c) for c in buckets)
        else:
            p = (metric.gauge if kind == MetricKind.GAUGE else metric.sum).data_points.add()
            p.as_double = value
        p.time_unix_nano, p.start_time_unix_nano = time, start
        p.attributes.extend(labels)
        p.attributes.add(key=SERIES).value.string_value = f"{series:016x}"
    return bytes(request.SerializeToString())


def encode_metric_batch(batch: MetricBatch, max_points: int = 4096) -> list[bytes]:
    """The batch as serialized OTLP ExportMetricsServiceRequest messages of at most `max_points`
    data points each, rows in order across messages; an empty batch gives no message."""
    if max_points < 1:
        raise ValueError(f"max_points must be at least 1, got {max_points}")
    n = len(batch)
    return [_message(batch, lo, min(lo + max_points, n)) for lo in range(0, n, max_points)]
