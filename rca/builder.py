"""Assembly of a `SpanBatch` from raw span fields, with the validation every decoder shares.

Decoders append rows (`add`) or whole columns (`extend`, the fast path); `build` validates all
rows at once with numpy and sets the invalid ones aside with a reason.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from rca.conventions import NCCL_PREFIX, PROCESS_NUMA, AttrValue, peer_node, resource_node, span_signals
from rca.spans import CALLER_KINDS, N_SIGNALS, DecodeResult, Rejection, Signal, SpanBatch

_ZERO16, _ZERO8 = b"\0" * 16, b"\0" * 8
Attributes = Mapping[str, AttrValue]


def _ids(values: list[bytes], width: int, allow_empty: bool) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.bool_]]:
    """Big-endian uint64 words of fixed-width ids, and which rows had a valid length."""
    lengths = np.fromiter(map(len, values), np.int64, len(values))
    ok = (lengths == width) | ((lengths == 0) if allow_empty else False)
    if not ok.all() or allow_empty:
        zero = b"\0" * width
        values = [v if len(v) == width else zero for v in values]
    words = np.frombuffer(b"".join(values), dtype=">u8").astype(np.uint64)
    return words.reshape(len(values), width // 8), ok


def _times(values: Sequence[int]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """Nanosecond times as int64, and which fit (OTLP's fixed64 may hold more)."""
    raw = np.asarray(values, np.uint64)
    ok = raw < np.uint64(1 << 63)
    return np.where(ok, raw, 0).astype(np.int64), ok


class SpanBatchBuilder:
    """Collects raw spans; `build` turns them into one validated `SpanBatch`."""

    def __init__(self) -> None:
        self._strings: dict[str, int] = {}
        self._trace: list[bytes] = []
        self._span: list[bytes] = []
        self._parent: list[bytes] = []
        self._service: list[int] = []
        self._name: list[str] = []
        self._peer: list[int] = []
        self._resource: list[int] = []
        self._kind: list[int] = []
        self._start: list[int] = []
        self._end: list[int] = []
        self._error: list[bool] = []
        self._signal_rows: dict[int, list[float]] = {}
        self._rejected: dict[str, int] = {}

    def _intern(self, text: str) -> int:
        index = self._strings.get(text)
        if index is None:
            index = self._strings[text] = len(self._strings)
        return index

    def reject(self, reason: str, count: int = 1) -> None:
        """Counts spans a decoder could not even read into fields."""
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
        attributes: Attributes,
        resource: Attributes,
    ) -> None:
        """Appends one span (validated in `build`)."""
        self.extend(
            service,
            resource,
            [trace_id],
            [span_id],
            [parent_id],
            [name],
            [kind],
            [start_ns],
            [end_ns],
            [error],
            [attributes],
        )

    def extend(
        self,
        service: str,
        resource: Attributes,
        trace_ids: list[bytes],
        span_ids: list[bytes],
        parent_ids: list[bytes],
        names: list[str],
        kinds: Sequence[int],
        starts: Sequence[int],
        ends: Sequence[int],
        errors: Sequence[bool],
        attributes: Sequence[Attributes],
    ) -> None:
        """Appends the spans of one resource, column by column; `attributes` need hold only
        the keys in `conventions.SPAN_KEYS` (an empty mapping where a span has none)."""
        first = len(self._span)
        self._trace += trace_ids
        self._span += span_ids
        self._parent += parent_ids
        self._service += [self._intern(service)] * len(span_ids)
        self._name += names
        self._kind += kinds
        self._start += starts
        self._end += ends
        self._error += errors
        self._peer += [-1] * len(span_ids)
        self._resource += [-1] * len(span_ids)
        every_span = PROCESS_NUMA in resource
        for offset, attrs in enumerate(attributes):
            if attrs or every_span:
                self._read_attributes(first + offset, kinds[offset], attrs, resource)

    def _read_attributes(self, row: int, kind: int, attrs: Attributes, resource: Attributes) -> None:
        peer = peer_node(attrs) if kind in CALLER_KINDS else None
        gpu = resource_node(attrs, resource)
        if peer is not None:
            self._peer[row] = self._intern(peer)
        if gpu is not None:
            self._resource[row] = self._intern(gpu)
        signals = span_signals(attrs, resource)
        if signals is not None:
            self._signal_rows[row] = signals

    def build(self) -> DecodeResult:
        trace, trace_ok = _ids(self._trace, 16, allow_empty=False)
        span, span_ok = _ids(self._span, 8, allow_empty=False)
        parent, parent_ok = _ids(self._parent, 8, allow_empty=True)
        start, start_ok = _times(self._start)
        end, end_ok = _times(self._end)
        kind = np.asarray(self._kind, np.int64)
        checks = (
            (trace_ok & trace.any(axis=1), "trace_id must be 16 bytes, not all zero"),
            (span_ok & (span[:, 0] != 0), "span_id must be 8 bytes, not all zero"),
            (parent_ok, "parent_span_id must be empty or 8 bytes"),
            (start_ok & end_ok, "times must be below 2^63 ns"),
            ((kind >= 0) & (kind <= 5), "kind must be a SpanKind (0..5)"),
            (start > 0, "start_time_unix_nano is missing"),
            (end >= start, "end_time_unix_nano is before start_time_unix_nano"),
        )
        keep = np.ones(start.shape[0], np.bool_)
        rejected = dict(self._rejected)
        for ok, reason in checks:
            bad = keep & ~ok
            if bad.any():
                rejected[reason] = rejected.get(reason, 0) + int(bad.sum())
                keep &= ok
        batch = self._columns(trace, span[:, 0], parent[:, 0], start, end, np.where(keep, kind, 0).astype(np.int8))
        rejections = tuple(Rejection(count, reason) for reason, count in rejected.items())
        return DecodeResult(batch if keep.all() else batch.select(keep), rejections)

    def _columns(
        self,
        trace: npt.NDArray[np.uint64],
        span: npt.NDArray[np.uint64],
        parent: npt.NDArray[np.uint64],
        start: npt.NDArray[np.int64],
        end: npt.NDArray[np.int64],
        kind: npt.NDArray[np.int8],
    ) -> SpanBatch:
        n = start.shape[0]
        names = {name: self._intern(name) for name in set(self._name)}
        operation = np.fromiter(map(names.__getitem__, self._name), np.int32, n)
        signals = np.full((n, N_SIGNALS), math.nan)
        if self._signal_rows:
            rows = np.fromiter(self._signal_rows, np.intp, len(self._signal_rows))
            signals[rows] = np.asarray(list(self._signal_rows.values()), np.float64)
        nccl = [index for name, index in names.items() if name.startswith(NCCL_PREFIX)]
        if nccl:
            is_nccl = np.isin(operation, nccl)
            signals[is_nccl, Signal.NCCL_LATENCY] = (end[is_nccl] - start[is_nccl]) / 1e9
        return SpanBatch(
            trace_id=trace,
            span_id=span,
            parent_id=parent,
            service=np.asarray(self._service, np.int32),
            operation=operation,
            peer=np.asarray(self._peer, np.int32),
            resource=np.asarray(self._resource, np.int32),
            kind=kind,
            start_ns=start,
            end_ns=end,
            error=np.asarray(self._error, np.bool_),
            signals=signals,
            strings=tuple(self._strings),
        )
