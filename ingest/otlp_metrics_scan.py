"""Wire-level scan of OTLP `ExportMetricsServiceRequest` bytes into the columns of its gauge and
sum points (numba, no GIL), the protobuf decoder's fast path (`ingest.otlp_metrics`).

Runs only on bytes upb has already parsed; any inconsistency makes `scan` answer `BAD` (never a
crash) and the caller reads upb's objects instead. Per metric (every record of the request, in
order) it counts the staleness markers and the points without a value, and keeps the other
points' time, start and value as protobuf reads them (last occurrence wins, `as_int` and
`as_double` one oneof, unknown fields and fields of the wrong wire type skipped). A metric whose
`data` oneof is given more than once, or a point whose attribute fields are not one after another,
is `BAD` too (upb merges or interleaves; no exporter writes that). Kept points whose attribute
fields are byte-for-byte the same share a group, so that their attributes are read once per group
(and found again by that encoding in later requests); a group whose `KeyValue`s are malformed
refuses the request only where a metric that upb's objects would read uses it.
"""

from __future__ import annotations

from collections.abc import Callable, Sized
from typing import Any

import numpy as np
import numpy.typing as npt
from numba import njit, types

from ingest.otlp_fields import (
    METRIC_EXPONENTIAL_HISTOGRAM,
    METRIC_GAUGE,
    METRIC_HISTOGRAM,
    METRIC_SUM,
    METRIC_SUMMARY,
    NUMBER_AS_DOUBLE,
    NUMBER_AS_INT,
    NUMBER_ATTRIBUTES,
    NUMBER_FLAGS,
    NUMBER_START_TIME,
    NUMBER_TIME,
    NUMBERS_POINTS,
)
from ingest.otlp_metrics_rules import NO_RECORDED_VALUE
from ingest.otlp_wire import (
    BAD,
    I64,
    LEN,
    R_LEN,
    R_OFF,
    VARINT,
    fixed64,
    group_of,
    grown,
    length,
    records,
    skip,
    slots_for,
    tag,
    varint,
)
from rca.graph.intindex import Num
from rca.telemetry.spans import DecodeError

# Columns per metric: its kept points' rows [first, end), its staleness markers, its points
# without a value.
M_FIRST, M_END, M_STALE, M_NO_VALUE = range(4)
# Columns per kept point (uint64): time, start, and its value's float64 bits.
P_TIME, P_START, P_VALUE = range(3)
_DATA = (METRIC_GAUGE, METRIC_SUM, METRIC_HISTOGRAM, METRIC_EXPONENTIAL_HISTOGRAM, METRIC_SUMMARY)
_NONE, _DOUBLE, _INT = 0, 1, 2  # which value a point has


@njit(cache=True, nogil=True)
def _point(
    buf: npt.NDArray[np.uint8], pos: Num, end: Num, row: Num, u: npt.NDArray[np.uint64], at: npt.NDArray[np.int64]
) -> tuple[Num, Num, Num]:
    """Reads a NumberDataPoint into row `row` of `u` and the offset and length of its attribute
    fields, one after another, into row `row` of `at`: (which value, whether it is a staleness
    marker, position after it or -1: malformed, or attributes not one after another)."""
    start = time = bits = flags = np.uint64(0)
    which = _NONE
    first = last = pos
    while pos < end:
        field_at = pos
        field, wire, pos = tag(buf, pos, end)
        if pos < 0:
            return _NONE, 0, -1
        if wire == I64 and field in (NUMBER_START_TIME, NUMBER_TIME, NUMBER_AS_DOUBLE, NUMBER_AS_INT):
            if pos + 8 > end:
                return _NONE, 0, -1
            value = fixed64(buf, pos)
            pos += 8
            if field == NUMBER_START_TIME:
                start = value
            elif field == NUMBER_TIME:
                time = value
            else:
                bits, which = value, _DOUBLE if field == NUMBER_AS_DOUBLE else _INT
        elif wire == LEN and field == NUMBER_ATTRIBUTES:
            if first == last:
                first = field_at
            elif field_at != last:
                return _NONE, 0, -1
            n, pos = length(buf, pos, end)
            pos += n
            last = pos
        elif wire == VARINT and field == NUMBER_FLAGS:
            flags, pos = varint(buf, pos, end)
        else:
            pos = skip(buf, pos, end, wire, field)
        if pos < 0:
            return _NONE, 0, -1
    if which == _INT:
        bits = np.float64(np.int64(bits)).view(np.uint64)
    u[row, P_TIME], u[row, P_START], u[row, P_VALUE] = time, start, bits
    at[row, 0], at[row, 1] = first, last - first
    return which, np.int64(flags & np.uint64(NO_RECORDED_VALUE)), end


@njit(cache=True, nogil=True)
def _numbers(
    buf: npt.NDArray[np.uint8],
    pos: Num,
    end: Num,
    m: npt.NDArray[np.int64],
    u: npt.NDArray[np.uint64],
    at: npt.NDArray[np.int64],
) -> tuple[Num, npt.NDArray[np.uint64], npt.NDArray[np.int64]]:
    """Reads a Gauge or Sum's points into its metric's row `m` (`M_FIRST` set) and the kept ones
    onto `u` and `at`; returns the kept points in all (or BAD) and the arrays, grown."""
    row = m[M_END]
    while pos < end:
        field, wire, pos = tag(buf, pos, end)
        if pos < 0:
            return BAD, u, at
        if not (field == NUMBERS_POINTS and wire == LEN):
            pos = skip(buf, pos, end, wire, field)
            if pos < 0:
                return BAD, u, at
            continue
        n, pos = length(buf, pos, end)
        if pos < 0:
            return BAD, u, at
        u, at = grown(u, row, row + 1), grown(at, row, row + 1)
        which, stale, pos = _point(buf, pos, pos + n, row, u, at)
        if pos < 0:
            return BAD, u, at
        if stale:
            m[M_STALE] += 1
        elif which == _NONE:
            m[M_NO_VALUE] += 1
        else:
            row += 1
    m[M_END] = row
    return row, u, at


@njit((types.Array(types.uint8, 1, "C", readonly=True),), cache=True, nogil=True)  # compiled on import
def scan(
    buf: npt.NDArray[np.uint8],
) -> tuple[Num, npt.NDArray[np.int64], npt.NDArray[np.uint64], npt.NDArray[np.int64], Any, Any, Num]:
    """(kept points or BAD, per metric `M_*`, per kept point `P_*` and its attribute fields'
    (offset, length) (rows up to the count), each kept point's attribute group, each group's
    first point, the number of groups). Points share a group when their attribute fields are the
    same bytes."""
    metrics, n_metrics = records(buf)
    m = np.zeros((max(n_metrics, 0), 4), np.int64)
    u, at = np.empty((64, 3), np.uint64), np.empty((64, 2), np.int64)
    none = np.empty(0, np.int64)
    if n_metrics < 0:
        return BAD, m, u, at, none, none, 0
    n_points = 0
    for k in range(n_metrics):
        m[k, M_FIRST] = m[k, M_END] = n_points
        pos, end = metrics[k, R_OFF], metrics[k, R_OFF] + metrics[k, R_LEN]
        data = 0
        while pos < end:
            field, wire, pos = tag(buf, pos, end)
            if pos < 0:
                return BAD, m, u, at, none, none, 0
            if wire == LEN and field in _DATA:
                data += 1
                n, pos = length(buf, pos, end)
                if data > 1 or pos < 0:
                    return BAD, m, u, at, none, none, 0
                if field in (METRIC_GAUGE, METRIC_SUM):
                    n_points, u, at = _numbers(buf, pos, pos + n, m[k], u, at)
                    if n_points < 0:
                        return BAD, m, u, at, none, none, 0
                pos += n
            else:
                pos = skip(buf, pos, end, wire, field)
                if pos < 0:
                    return BAD, m, u, at, none, none, 0
    slots, each = slots_for(n_points), np.arange(n_points + 1)  # one range a point: its fields
    groups, reps = np.empty(n_points, np.int64), np.empty(n_points, np.int64)
    n_groups = 0
    for row in range(n_points):
        groups[row], n_groups = group_of(buf, row, at, each, slots, reps, n_groups)
    return n_points, m, u, at, groups, reps, n_groups


class Mismatch(Exception):
    """The scan and upb's objects disagree: decode the request through upb's objects."""


# A metric's kept number points (attributes, times, starts, values), its staleness markers and
# its points without a value.
Columns = tuple[list[dict[str, str]], list[int], list[int], list[float], int, int]


class NumberPoints:
    """The scanned gauge and sum points of one request, handed out metric by metric."""

    def __init__(self, data: bytes, attributes: Callable[[bytes], dict[str, str]]) -> None:
        """Scans `data` (parsed by upb already); `Mismatch` when the scan cannot be used.
        `attributes` reads a point's attribute fields as text: once per group, here; where it
        refuses them, the metrics that read the group are refused when they are read."""
        n, m, u, at, groups, reps, n_groups = scan(np.frombuffer(data, np.uint8))
        if n < 0:
            raise Mismatch
        fields = [data[offset : offset + size] for offset, size in at[reps[:n_groups]].tolist()]
        self._refused: dict[int, DecodeError] = {}
        try:
            texts = list(map(attributes, fields))
        except DecodeError:
            texts = [self._refusing(attributes, group, encoded) for group, encoded in enumerate(fields)]
        self._groups: list[int] = groups.tolist()
        self._sets = list(map(texts.__getitem__, self._groups))
        self._time: list[int] = u[:n, P_TIME].tolist()
        self._start: list[int] = u[:n, P_START].tolist()
        self._value: list[float] = u[:n, P_VALUE].view(np.float64).tolist()
        self._metrics: list[list[int]] = m.tolist()

    def _refusing(self, attributes: Callable[[bytes], dict[str, str]], group: int, fields: bytes) -> dict[str, str]:
        try:
            return attributes(fields)
        except DecodeError as exc:
            self._refused[group] = exc
            return {}

    def columns(self, index: int, points: Sized) -> Columns:
        """The columns of metric `index`, whose `points` upb read (their count must agree)."""
        if index >= len(self._metrics):
            raise Mismatch
        first, end, stale, no_value = self._metrics[index]
        if end - first + stale + no_value != len(points):
            raise Mismatch
        for group in self._groups[first:end] if self._refused else ():
            if group in self._refused:
                raise self._refused[group]
        return (
            self._sets[first:end],
            self._time[first:end],
            self._start[first:end],
            self._value[first:end],
            stale,
            no_value,
        )

    def check(self, metrics: int) -> None:
        """`Mismatch` unless the request has `metrics` metrics, as the scan found."""
        if metrics != len(self._metrics):
            raise Mismatch
