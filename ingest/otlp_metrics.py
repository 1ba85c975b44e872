"""OTLP protobuf → metric data points. Pure functions; how each data kind reads and what is refused:
`ingest.otlp_metrics_rules`, shared with the JSON decoder.

Speed: upb parses (and so checks) the request into a wire twin of its schema whose data point
attributes stay raw `KeyValue` bytes, so a point's attribute set is a tuple of bytes, turned into
text once per distinct set (Prometheus series repeat one label set across many metrics). Gauge and
sum points, most of any scrape, are then read from the bytes by a numba wire scanner
(`ingest.otlp_metrics_scan`) into columns, points whose attribute fields are the same bytes
grouped, each group's text looked up once by that encoding; upb's objects are read only per
resource and metric. Every distinct `KeyValue` is still parsed with the real schema, so malformed
ones are refused as upb would, where upb's objects would read them. Where the scanner cannot be
sure (a metric's data given twice, a point's attributes not one after another), the points are
read through upb's objects (`decode_metrics_reference`), as histograms and summaries always are.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any, TypeVar

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError as ProtobufDecodeError
from google.protobuf.message import Message
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.metrics.v1 import metrics_pb2
from opentelemetry.proto.resource.v1 import resource_pb2

from ingest import otlp_metrics_rules as rules
from ingest.otlp_logs import any_value_of, body_text
from ingest.otlp_metrics_scan import Columns, Mismatch, NumberPoints
from rca.telemetry.metric_rows import MetricRows
from rca.telemetry.metrics import MetricDecodeResult, MetricKind
from rca.telemetry.spans import DecodeError


def attribute_texts(items: Iterable[KeyValue]) -> dict[str, str]:
    """Attributes as text (`ingest.otlp_metrics_rules`); string values, the common case, read directly."""
    items = list(items)
    out = {kv.key: kv.value.string_value for kv in items}
    if "" in out.values():  # empty, or not a string
        out = {kv.key: body_text(any_value_of(kv.value)) for kv in items}
    return out


def _raw_attributes_schema() -> type[Message]:
    """`MetricsData`, the wire twin of ExportMetricsServiceRequest, with every data point's
    `attributes` as raw bytes, in a descriptor pool of its own."""
    pool = descriptor_pool.DescriptorPool()
    for module in (common_pb2, resource_pb2, metrics_pb2):
        file = descriptor_pb2.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(file)
        for message in file.message_type:
            for field in message.field:
                if message.name.endswith("DataPoint") and field.name == "attributes":
                    field.type = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
                    field.ClearField("type_name")
        pool.Add(file)
    schema: type[Message] = message_factory.GetMessageClass(
        pool.FindMessageTypeByName(metrics_pb2.MetricsData.DESCRIPTOR.full_name)
    )
    return schema


_RawMetricsData = _raw_attributes_schema()
_RawNumberDataPoint: type[Message] = message_factory.GetMessageClass(
    _RawMetricsData.DESCRIPTOR.file.pool.FindMessageTypeByName(metrics_pb2.NumberDataPoint.DESCRIPTOR.full_name)
)


def _parse(message: Message, data: bytes) -> None:
    try:
        message.ParseFromString(data)
    except ProtobufDecodeError as exc:
        raise DecodeError(f"malformed ExportMetricsServiceRequest protobuf: {exc}") from exc


def parse_metrics_request(data: bytes) -> ExportMetricsServiceRequest:
    """Parses protobuf bytes, raising `DecodeError` with the parser's message."""
    request = ExportMetricsServiceRequest()
    _parse(request, data)
    return request


MAX_ATTRIBUTE_SETS = 50_000
Key = TypeVar("Key", bound=Hashable)
# Attribute sets read so far, shared by requests (the mappings are never changed once made):
# by their raw `KeyValue`s, and by the encoding of a number point's attribute fields (the scan's).
_ATTRIBUTE_SETS: dict[tuple[bytes, ...], dict[str, str]] = {}
_ENCODED_SETS: dict[bytes, dict[str, str]] = {}


def _remembered(cache: dict[Key, dict[str, str]], key: Key, read: Callable[[Key], dict[str, str]]) -> dict[str, str]:
    """`read(key)`, once per key while the cache holds it (at most `MAX_ATTRIBUTE_SETS` keys: past
    that it starts again)."""
    found = cache.get(key)
    if found is None:
        if len(cache) >= MAX_ATTRIBUTE_SETS:
            cache.clear()
        found = cache[key] = read(key)
    return found


def _key_values_text(raw: tuple[bytes, ...]) -> dict[str, str]:
    """Attributes as text from their raw `KeyValue` encodings, each parsed with the real schema."""
    items = []
    for item in raw:
        kv = KeyValue()
        _parse(kv, item)
        items.append(kv)
    return attribute_texts(items)


class _Points:
    """The points of one request (parsed with raw point attributes) gathered into `rows`; its
    gauge and sum points read by the wire scanner from `data` where given (`Mismatch` when the
    scanner cannot read them), through upb's objects otherwise."""

    def __init__(self, data: bytes | None = None) -> None:
        self.rows = MetricRows()
        self._sets = _ATTRIBUTE_SETS
        self.scanned = None if data is None else NumberPoints(data, self.encoded_attributes)

    def attributes(self, raw: Iterable[bytes]) -> dict[str, str]:
        """A point's attributes as text, read once per distinct set of raw `KeyValue`s (across
        requests: scrapes repeat their series; the memory of sets is bounded)."""
        key = tuple(raw)
        found = self._sets.get(key)  # the hit, most points' case, without a call
        return found if found is not None else _remembered(self._sets, key, _key_values_text)

    def encoded_attributes(self, fields: bytes) -> dict[str, str]:
        """The attributes of a number point whose attribute fields, one after another, are
        `fields`: what `attributes` reads from their `KeyValue`s, remembered by their encoding."""
        found = _ENCODED_SETS.get(fields)
        return found if found is not None else _remembered(_ENCODED_SETS, fields, self._point_attributes)

    def _point_attributes(self, fields: bytes) -> dict[str, str]:
        point = _RawNumberDataPoint()
        _parse(point, fields)
        return self.attributes(point.attributes)

    def numbers(self, name: str, kind: MetricKind, resource: dict[str, str], points: Any, index: int) -> None:
        """The gauge or sum points of metric `index`: from the scan where there is one."""
        read = self._read if self.scanned is None else self.scanned.columns
        sets, times, starts, values, _, no_value = read(index, points)  # staleness markers hold nothing
        if no_value:
            self.rows.reject(rules.NO_VALUE, no_value)
        if times:
            self.rows.add_numbers(name, kind, resource, sets, times, starts, values)

    def _read(self, index: int, points: Any) -> Columns:
        """The columns of number points read through upb's objects (the scan's yardstick)."""
        attributes = self.attributes
        read = [
            (attributes(p.attributes), p.time_unix_nano, p.start_time_unix_nano, getattr(p, value))
            for p in points
            if (value := p.WhichOneof("value")) is not None and not p.flags & rules.NO_RECORDED_VALUE
        ]
        stale = sum(1 for p in points if p.flags & rules.NO_RECORDED_VALUE) if len(read) < len(points) else 0
        sets, times, starts, values = map(list, zip(*read, strict=True)) if read else ([], [], [], [])
        return sets, times, starts, values, stale, len(points) - len(read) - stale

    def histograms(self, name: str, kind: MetricKind, resource: dict[str, str], points: Any, exponential: bool) -> None:
        for p in points:
            if p.flags & rules.NO_RECORDED_VALUE:
                continue  # a staleness marker: accepted, nothing to keep
            if not p.HasField("sum"):
                self.rows.reject(rules.NO_SUM)
            elif exponential and not rules.MIN_SCALE <= p.scale <= rules.MAX_SCALE:
                self.rows.reject(rules.BAD_SCALE)
            else:
                head = (name, kind, resource, self.attributes(p.attributes), p.time_unix_nano, p.start_time_unix_nano)
                buckets = (
                    rules.exponential_buckets(
                        p.scale,
                        p.zero_count,
                        p.positive.offset,
                        p.positive.bucket_counts,
                        sum(p.negative.bucket_counts),
                    )
                    if exponential
                    else (p.explicit_bounds, p.bucket_counts)
                )
                rules.add_histogram(self.rows, head, (p.sum, float(p.count)), buckets)

    def summaries(self, name: str, kind: MetricKind, resource: dict[str, str], points: Any) -> None:
        for p in points:
            if not p.flags & rules.NO_RECORDED_VALUE:  # a staleness marker holds nothing to keep
                head = (name, kind, resource, self.attributes(p.attributes), p.time_unix_nano, p.start_time_unix_nano)
                quantiles = [(q.quantile, q.value) for q in p.quantile_values]
                rules.add_summary(self.rows, head, (p.sum, float(p.count)), quantiles)

    def metric(self, metric: Any, resource: dict[str, str], index: int) -> None:
        data = metric.WhichOneof("data")
        if data is None:
            return
        body = getattr(metric, data)
        kind: MetricKind | str = MetricKind.HISTOGRAM_CUMULATIVE if data == "summary" else MetricKind.GAUGE
        if data == "sum":
            kind = rules.sum_kind(body.aggregation_temporality, body.is_monotonic)
        elif data in ("histogram", "exponential_histogram"):
            kind = rules.histogram_kind(body.aggregation_temporality)
        if not metric.name or isinstance(kind, str):
            self.rows.reject(str(kind) if metric.name else rules.NO_NAME, len(body.data_points))
        elif data in ("gauge", "sum"):
            self.numbers(metric.name, kind, resource, body.data_points, index)
        elif data == "summary":
            self.summaries(metric.name, kind, resource, body.data_points)
        else:
            self.histograms(metric.name, kind, resource, body.data_points, data == "exponential_histogram")


_RESOURCES: dict[bytes, dict[str, str]] = {}  # by their encoding: an exporter repeats its resource


def _resource(resource: Any) -> dict[str, str]:
    """A resource's attributes as text, the same mapping for the same resource (bounded)."""
    return _remembered(_RESOURCES, resource.SerializeToString(), lambda _: attribute_texts(resource.attributes))


def _decode(request: Any, points: _Points) -> MetricDecodeResult:
    index = 0
    for resource_metrics in request.resource_metrics:
        resource = _resource(resource_metrics.resource)
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                points.metric(metric, resource, index)
                index += 1
    if points.scanned is not None:
        points.scanned.check(index)
    return points.rows.build()


def decode_metrics_protobuf(data: bytes) -> MetricDecodeResult:
    """OTLP `ExportMetricsServiceRequest` bytes → data points; `DecodeError` when malformed,
    points that cannot be read (`ingest.otlp_metrics_rules`) rejected with a reason."""
    request = _RawMetricsData()
    _parse(request, data)
    try:
        return _decode(request, _Points(data))
    except Mismatch:
        return _decode(request, _Points())


def decode_metrics_reference(data: bytes) -> MetricDecodeResult:
    """The same points with gauges and sums read through upb's objects only (the scanner's
    fallback and yardstick)."""
    request = _RawMetricsData()
    _parse(request, data)
    return _decode(request, _Points())
