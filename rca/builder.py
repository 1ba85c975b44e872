"""Row-by-row assembly of a `SpanBatch`, with the validation every decoder shares."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from rca.conventions import AttrValue, peer_node, resource_node, span_signals
from rca.spans import N_SIGNALS, DecodeResult, Rejection, SpanBatch

_NO_SIGNALS = [math.nan] * N_SIGNALS


class SpanBatchBuilder:
    """Collects spans, refusing invalid ones with a reason, then builds one `SpanBatch`."""

    def __init__(self) -> None:
        self._strings: dict[str, int] = {}
        self._trace: list[bytes] = []
        self._span: list[bytes] = []
        self._parent: list[bytes] = []
        self._service: list[int] = []
        self._operation: list[int] = []
        self._peer: list[int] = []
        self._resource: list[int] = []
        self._kind: list[int] = []
        self._start: list[int] = []
        self._end: list[int] = []
        self._error: list[bool] = []
        self._signals: list[list[float]] = []
        self._rejected: dict[str, int] = {}

    def _intern(self, text: str) -> int:
        index = self._strings.get(text)
        if index is None:
            index = self._strings[text] = len(self._strings)
        return index

    def reject(self, reason: str, count: int = 1) -> None:
        self._rejected[reason] = self._rejected.get(reason, 0) + count

    def add(
        self,
        trace_id: bytes,
        span_id: bytes,
        parent_id: bytes,
        service: str,
        name: str,
        kind: int,
        start_ns: int,
        end_ns: int,
        error: bool,
        attributes: Mapping[str, AttrValue],
        resource: Mapping[str, AttrValue],
    ) -> bool:
        """Adds one span; returns False (and records why) when it is invalid."""
        if len(trace_id) != 16 or not any(trace_id):
            self.reject(f"trace_id must be 16 non-zero bytes, got {len(trace_id)} bytes")
            return False
        if len(span_id) != 8 or not any(span_id):
            self.reject(f"span_id must be 8 non-zero bytes, got {len(span_id)} bytes")
            return False
        if len(parent_id) not in (0, 8):
            self.reject(f"parent_span_id must be empty or 8 bytes, got {len(parent_id)} bytes")
            return False
        if start_ns <= 0:
            self.reject("start_time_unix_nano is missing")
            return False
        if end_ns < start_ns:
            self.reject("end_time_unix_nano is before start_time_unix_nano")
            return False
        self._trace.append(trace_id)
        self._span.append(span_id)
        self._parent.append(parent_id or b"\0" * 8)
        self._service.append(self._intern(service))
        self._operation.append(self._intern(name))
        self._kind.append(kind)
        self._start.append(start_ns)
        self._end.append(end_ns)
        self._error.append(error)
        if attributes or resource:
            peer = peer_node(attributes)
            gpu = resource_node(attributes, resource)
            row = span_signals(name, (end_ns - start_ns) / 1e9, attributes, resource)
        else:
            peer = gpu = None
            row = span_signals(name, (end_ns - start_ns) / 1e9, {}, {}) if name[:5] == "nccl:" else None
        self._peer.append(-1 if peer is None else self._intern(peer))
        self._resource.append(-1 if gpu is None else self._intern(gpu))
        self._signals.append(_NO_SIGNALS if row is None else row)
        return True

    def build(self) -> DecodeResult:
        n = len(self._span)
        batch = SpanBatch(
            trace_id=np.frombuffer(b"".join(self._trace), dtype=">u8").astype(np.uint64).reshape(n, 2),
            span_id=np.frombuffer(b"".join(self._span), dtype=">u8").astype(np.uint64),
            parent_id=np.frombuffer(b"".join(self._parent), dtype=">u8").astype(np.uint64),
            service=np.asarray(self._service, np.int32),
            operation=np.asarray(self._operation, np.int32),
            peer=np.asarray(self._peer, np.int32),
            resource=np.asarray(self._resource, np.int32),
            kind=np.asarray(self._kind, np.int8),
            start_ns=np.asarray(self._start, np.int64),
            end_ns=np.asarray(self._end, np.int64),
            error=np.asarray(self._error, np.bool_),
            signals=np.asarray(self._signals, np.float64).reshape(n, N_SIGNALS),
            strings=tuple(self._strings),
        )
        rejections = tuple(Rejection(count, reason) for reason, count in self._rejected.items())
        return DecodeResult(batch, rejections)
