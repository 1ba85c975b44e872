"""OTLP protobuf → log records, and the assembly both log decoders share. Pure functions.

Records are read from upb's objects one scope at a time into columns; validation (id lengths, a
timestamp) and severity inference then run over the whole request at once. A body that is not a
string becomes one: bytes as hex, anything else as compact JSON with sorted keys, so that the same
value always reads the same to the template miner.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError as ProtobufDecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from rca.telemetry.builder import id_words
from rca.telemetry.logs import LOG_RESOURCE_KEYS, LogBatch, LogDecodeResult, infer_severity, log_service, structured
from rca.telemetry.spans import DecodeError, Rejection

_BELOW_2_63 = np.uint64(1 << 63)
_CHECKS = (
    "trace_id must be empty or 16 bytes",
    "span_id must be empty or 8 bytes",
    "no timestamp: time_unix_nano and observed_time_unix_nano are both 0",
    "time must be below 2^63 ns",
)


def _bytes_hex(value: object) -> str:
    if isinstance(value, bytes):
        return value.hex()
    raise TypeError(f"{type(value).__name__} is not a body value")


def body_text(value: object) -> str:
    """A record's body as text: a string as is, nothing as "", bytes as hex, other values
    (numbers, booleans, arrays, maps) as compact JSON with sorted keys."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.hex()
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False, default=_bytes_hex)


class LogRecordColumns:
    """Raw log record fields of one request, gathered column by column; `build` validates them."""

    def __init__(self) -> None:
        self._time: list[int] = []
        self._observed: list[int] = []
        self._trace: list[bytes] = []
        self._span: list[bytes] = []
        self._number: list[int] = []
        self._text: list[str] = []
        self._body: list[str] = []
        self._service: list[int] = []
        self._strings: dict[str, int] = {}
        self._rejected: Counter[str] = Counter()

    def extend(
        self,
        service: str,
        times: list[int],
        observed: list[int],
        trace_ids: list[bytes],
        span_ids: list[bytes],
        numbers: list[int],
        texts: list[str],
        bodies: list[str],
    ) -> None:
        """Appends the records of one resource; times are OTLP's unsigned fixed64 nanoseconds."""
        self._time += times
        self._observed += observed
        self._trace += trace_ids
        self._span += span_ids
        self._number += numbers
        self._text += texts
        self._body += bodies
        self._service += [self._strings.setdefault(service, len(self._strings))] * len(times)

    def reject(self, reason: str) -> None:
        """Counts one record refused before it got its columns (a field of the wrong type)."""
        self._rejected[reason] += 1

    def build(self) -> LogDecodeResult:
        """The valid records as a `LogBatch`; the others counted by reason."""
        n = len(self._time)
        time = np.asarray(self._time, np.uint64).reshape(n)
        time = np.where(time != 0, time, np.asarray(self._observed, np.uint64).reshape(n))
        trace, trace_len = id_words(self._trace, 16)
        span, span_len = id_words(self._span, 8)
        failed = (
            (trace_len != 0) & (trace_len != 16),
            (span_len != 0) & (span_len != 8),
            time == 0,
            time >= _BELOW_2_63,
        )
        rejected = self._rejected.copy()
        bad = np.zeros(n, np.bool_)
        for reason, check in zip(_CHECKS, failed, strict=True):
            hit = check & ~bad
            if hit.any():
                rejected[reason] += int(hit.sum())
                bad |= hit
        rejections = tuple(Rejection(count, reason) for reason, count in rejected.items())
        texts, bodies, numbers = self._text, self._body, np.asarray(self._number, np.int64).reshape(n)
        keep = ~bad
        if bad.any():
            kept = keep.tolist()
            texts = [t for t, k in zip(texts, kept, strict=True) if k]
            bodies = [b for b, k in zip(bodies, kept, strict=True) if k]
            numbers = numbers[keep]
        for i in [i for i, body in enumerate(bodies) if body.startswith("{")]:  # a structured logger's line
            bodies[i], level = structured(bodies[i])
            texts[i] = texts[i] or level
        batch = LogBatch(
            time_ns=time[keep].astype(np.int64),
            service=np.asarray(self._service, np.int32).reshape(n)[keep],
            trace_id=trace[keep],
            span_id=span.reshape(n)[keep],
            severity=infer_severity(numbers, texts, bodies),
            body=tuple(bodies),
            strings=tuple(self._strings),
        )
        return LogDecodeResult(batch, rejections)


def any_value_of(value: AnyValue) -> Any:
    """The Python value of an AnyValue, maps and arrays included (upb bounds the nesting)."""
    field = value.WhichOneof("value")
    if field == "kvlist_value":
        return {kv.key: any_value_of(kv.value) for kv in value.kvlist_value.values}
    if field == "array_value":
        return [any_value_of(v) for v in value.array_value.values]
    return None if field is None else getattr(value, field)


def parse_logs_request(data: bytes) -> ExportLogsServiceRequest:
    """Parses protobuf bytes, raising `DecodeError` with the parser's message."""
    request = ExportLogsServiceRequest()
    try:
        request.ParseFromString(data)
    except ProtobufDecodeError as exc:
        raise DecodeError(f"malformed ExportLogsServiceRequest protobuf: {exc}") from exc
    return request


def decode_logs_protobuf(data: bytes) -> LogDecodeResult:
    """OTLP `ExportLogsServiceRequest` bytes → log records; `DecodeError` when malformed, invalid
    records (bad id length, no timestamp) rejected with a reason."""
    rows = LogRecordColumns()
    for resource_logs in parse_logs_request(data).resource_logs:
        resource = {
            kv.key: kv.value.string_value for kv in resource_logs.resource.attributes if kv.key in LOG_RESOURCE_KEYS
        }
        service = log_service(resource)
        for scope_logs in resource_logs.scope_logs:
            records = scope_logs.log_records
            if not records:
                continue
            fields = [
                (
                    r.time_unix_nano,
                    r.observed_time_unix_nano,
                    r.trace_id,
                    r.span_id,
                    r.severity_number,
                    r.severity_text,
                    r.body.string_value,
                )
                for r in records
            ]
            times, observed, trace, span, numbers, texts, bodies = map(list, zip(*fields, strict=True))
            for k in [k for k, body in enumerate(bodies) if not body]:  # empty, or not a string
                bodies[k] = body_text(any_value_of(records[k].body))
            rows.extend(service, times, observed, trace, span, numbers, texts, bodies)
    return rows.build()
