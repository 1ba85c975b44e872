"""Assembly of a `SpanBatch` from raw span fields, with the validation every decoder shares.

Decoders append rows (`add`) or whole columns (`extend`) and `build`, or hand over ready
`SpanColumns` (the wire scanner); `assemble` validates all rows in one numba pass (no GIL) and
sets the invalid ones aside with a reason.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from numba import njit

from rca.telemetry.conventions import (
    PROCESS_NUMA,
    AttrValue,
    instance_of,
    peer_node,
    resource_node,
    span_signals,
    with_nccl_latency,
)
from rca.telemetry.spans import CALLER_KINDS, N_SIGNALS, DecodeResult, Rejection, SpanBatch

Attributes = Mapping[str, AttrValue]
_BELOW_2_63 = np.uint64(1 << 63)


@dataclass(frozen=True, slots=True)
class SpanColumns:
    """Raw span fields of one request before validation. Id words are big-endian uint64 (zero
    where the id's byte length, given beside it, is wrong); times are OTLP's unsigned fixed64;
    `service`, `operation`, `peer`, `resource`, `instance` index `strings` (-1: none); `signals` holds NaN
    where absent (NCCL latency is filled in by `assemble`)."""

    trace_id: npt.NDArray[np.uint64]  # (n, 2)
    trace_id_len: npt.NDArray[np.int64]
    span_id: npt.NDArray[np.uint64]
    span_id_len: npt.NDArray[np.int64]
    parent_id: npt.NDArray[np.uint64]
    parent_id_len: npt.NDArray[np.int64]
    start_ns: npt.NDArray[np.uint64]
    end_ns: npt.NDArray[np.uint64]
    kind: npt.NDArray[np.int64]
    error: npt.NDArray[np.bool_]
    service: npt.NDArray[np.int32]
    operation: npt.NDArray[np.int32]
    peer: npt.NDArray[np.int32]
    resource: npt.NDArray[np.int32]
    instance: npt.NDArray[np.int32]
    signals: npt.NDArray[np.float64]
    strings: tuple[str, ...]
    rejected: tuple[Rejection, ...] = ()


@dataclass(frozen=True, slots=True)
class AttributeEffect:
    """What a span's attributes make of it: the virtual callee, the GPU node, the signal row."""

    peer: str | None
    resource: str | None
    signals: list[float] | None


def attribute_effect(kind: int, attributes: Attributes, resource: Attributes) -> AttributeEffect:
    """The one reading of a span's `conventions.SPAN_KEYS` attributes and its resource's."""
    peer = peer_node(attributes) if kind in CALLER_KINDS else None
    return AttributeEffect(peer, resource_node(attributes, resource), span_signals(attributes, resource))


def reads_every_span(resource: Attributes) -> bool:
    """Whether spans without attributes still get a signal row from their resource."""
    return PROCESS_NUMA in resource


def id_words(values: list[bytes], width: int) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]]:
    """Big-endian uint64 words of fixed-width ids (zero where the length is wrong), and lengths."""
    lengths = np.fromiter(map(len, values), np.int64, len(values))
    if not (lengths == width).all():
        zero = b"\0" * width
        values = [v if len(v) == width else zero for v in values]
    words = np.frombuffer(b"".join(values), dtype=">u8").astype(np.uint64)
    return words.reshape(len(values), width // 8), lengths


_CHECKS = (
    "trace_id must be 16 bytes, not all zero",
    "span_id must be 8 bytes, not all zero",
    "parent_span_id must be empty or 8 bytes",
    "times must be below 2^63 ns",
    "kind must be a SpanKind (0..5)",
    "start_time_unix_nano is missing",
    "end_time_unix_nano is before start_time_unix_nano",
)


@njit(cache=True, nogil=True)
def _check_rows(
    c_trace_id: npt.NDArray[np.uint64],
    c_trace_id_len: npt.NDArray[np.int64],
    c_span_id: npt.NDArray[np.uint64],
    c_span_id_len: npt.NDArray[np.int64],
    c_parent_id_len: npt.NDArray[np.int64],
    c_start_ns: npt.NDArray[np.uint64],
    c_end_ns: npt.NDArray[np.uint64],
    c_kind: npt.NDArray[np.int64],
    start: npt.NDArray[np.int64],
    end: npt.NDArray[np.int64],
    kind: npt.NDArray[np.int8],
    failed: npt.NDArray[np.int64],
) -> None:
    """Per row: times as int64 (0 where not below 2^63), kind as int8 (0 where the row fails),
    and the first of `_CHECKS` the row fails (-1: none)."""
    for r in range(c_start_ns.shape[0]):
        start_ok, end_ok = c_start_ns[r] < _BELOW_2_63, c_end_ns[r] < _BELOW_2_63
        start[r] = np.int64(c_start_ns[r]) if start_ok else 0
        end[r] = np.int64(c_end_ns[r]) if end_ok else 0
        if c_trace_id_len[r] != 16 or (c_trace_id[r, 0] == 0 and c_trace_id[r, 1] == 0):
            failed[r] = 0
        elif c_span_id_len[r] != 8 or c_span_id[r] == 0:
            failed[r] = 1
        elif c_parent_id_len[r] != 8 and c_parent_id_len[r] != 0:
            failed[r] = 2
        elif not (start_ok and end_ok):
            failed[r] = 3
        elif c_kind[r] < 0 or c_kind[r] > 5:
            failed[r] = 4
        elif start[r] <= 0:
            failed[r] = 5
        elif end[r] < start[r]:
            failed[r] = 6
        else:
            failed[r] = -1
        kind[r] = c_kind[r] if failed[r] < 0 else 0


def assemble(columns: SpanColumns) -> DecodeResult:
    """Validates every row in one pass; invalid spans are set aside with the first reason that
    applies."""
    c = columns
    n = c.start_ns.shape[0]
    start, end, kind, failed = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int8), np.empty(n, np.int64)
    _check_rows(
        c.trace_id,
        c.trace_id_len,
        c.span_id,
        c.span_id_len,
        c.parent_id_len,
        c.start_ns,
        c.end_ns,
        c.kind,
        start,
        end,
        kind,
        failed,
    )
    counts = np.bincount(failed + 1, minlength=len(_CHECKS) + 1).tolist()
    rejected = {r.reason: r.count for r in c.rejected}
    for reason, count in zip(_CHECKS, counts[1:], strict=True):
        if count:
            rejected[reason] = rejected.get(reason, 0) + count
    signals = with_nccl_latency(c.signals, c.strings, c.operation, start, end)
    batch = SpanBatch(
        trace_id=c.trace_id,
        span_id=c.span_id,
        parent_id=c.parent_id,
        service=c.service,
        operation=c.operation,
        peer=c.peer,
        resource=c.resource,
        instance=c.instance,
        kind=kind,
        start_ns=start,
        end_ns=end,
        error=c.error,
        signals=signals,
        strings=c.strings,
    )
    rejections = tuple(Rejection(count, reason) for reason, count in rejected.items())
    return DecodeResult(batch if counts[0] == n else batch.select(failed < 0), rejections)


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
        self._instance: list[int] = []
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
        instance = instance_of(resource)
        self._instance += [-1 if instance is None else self._intern(instance)] * len(span_ids)
        every_span = reads_every_span(resource)
        for offset, attrs in enumerate(attributes):
            if attrs or every_span:
                self._apply(first + offset, attribute_effect(kinds[offset], attrs, resource))

    def _apply(self, row: int, effect: AttributeEffect) -> None:
        if effect.peer is not None:
            self._peer[row] = self._intern(effect.peer)
        if effect.resource is not None:
            self._resource[row] = self._intern(effect.resource)
        if effect.signals is not None:
            self._signal_rows[row] = effect.signals

    def build(self) -> DecodeResult:
        n = len(self._span)
        trace, trace_len = id_words(self._trace, 16)
        span, span_len = id_words(self._span, 8)
        parent, parent_len = id_words(self._parent, 8)
        names = {name: self._intern(name) for name in set(self._name)}
        signals = np.full((n, N_SIGNALS), math.nan)
        if self._signal_rows:
            rows = np.fromiter(self._signal_rows, np.intp, len(self._signal_rows))
            signals[rows] = np.asarray(list(self._signal_rows.values()), np.float64)
        columns = SpanColumns(
            trace_id=trace,
            trace_id_len=trace_len,
            span_id=span[:, 0],
            span_id_len=span_len,
            parent_id=parent[:, 0],
            parent_id_len=parent_len,
            start_ns=np.asarray(self._start, np.uint64),
            end_ns=np.asarray(self._end, np.uint64),
            kind=np.asarray(self._kind, np.int64),
            error=np.asarray(self._error, np.bool_),
            service=np.asarray(self._service, np.int32),
            operation=np.fromiter(map(names.__getitem__, self._name), np.int32, n),
            peer=np.asarray(self._peer, np.int32),
            resource=np.asarray(self._resource, np.int32),
            instance=np.asarray(self._instance, np.int32),
            signals=signals,
            strings=tuple(self._strings),
            rejected=tuple(Rejection(count, reason) for reason, count in self._rejected.items()),
        )
        return assemble(columns)
