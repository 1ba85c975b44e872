"""Wire-level scan of OTLP `ExportTraceServiceRequest` bytes into span columns (numba, no GIL).

Runs only on bytes upb has already parsed, so the wire format is known to be valid; any
inconsistency still makes `scan` return a negative status (never a crash), and the caller then
falls back to reading upb's objects. Per span it reads the fixed fields with protobuf's
semantics (last occurrence wins, unknown fields and fields of the wrong wire type skipped,
repeated `status` messages merged), interns the names, and groups spans whose attributes that
rca reads (the keys given in `wanted`) are byte-for-byte identical, so the attributes are
interpreted once per group, not once per span. The wire primitives are `ingest.otlp_wire`'s.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from numba import njit, types

from ingest.otlp_fields import (
    KEY_VALUE_KEY,
    SPAN_ATTRIBUTES,
    SPAN_END_TIME,
    SPAN_KIND,
    SPAN_NAME,
    SPAN_PARENT_SPAN_ID,
    SPAN_SPAN_ID,
    SPAN_START_TIME,
    SPAN_STATUS,
    SPAN_TRACE_ID,
    STATUS_CODE,
)
from ingest.otlp_wire import (
    BAD,
    HASH_SEED,
    I64,
    LEN,
    R_INDEX,
    R_LEN,
    R_OFF,
    R_RESOURCE,
    R_SCOPE,
    VARINT,
    digest,
    fixed64,
    group_of,
    grown,
    int32,
    length,
    records,
    same,
    skip,
    slot_of,
    slots_for,
    tag,
    varint,
)
from rca.graph.intindex import Num, ids_of

# Columns of the uint64 output matrix.
U_TRACE_HI, U_TRACE_LO, U_SPAN, U_PARENT, U_START, U_END = range(6)
N_U = 6
# Columns of the int64 output matrix.
I_TRACE_LEN, I_SPAN_LEN, I_PARENT_LEN, I_KIND, I_STATUS, I_RESOURCE, I_SCOPE, I_INDEX, I_NAME, I_GROUP = range(10)
N_I = 10
# Offset and length of interned names (first `n_names` rows), then group representatives.
T_NAME_OFF, T_NAME_LEN, T_GROUP_REP = range(3)
N_T = 3

# A span's length-delimited fields rca reads (ids, name, attributes, status)
_SPAN_LEN_FIELDS = (SPAN_TRACE_ID, SPAN_SPAN_ID, SPAN_PARENT_SPAN_ID, SPAN_NAME, SPAN_ATTRIBUTES, SPAN_STATUS)

_BYTES = types.Array(types.uint8, 1, "C", readonly=True)
_SIG = (_BYTES, types.int64, _BYTES, types.int64[::1], types.uint64[:, ::1], types.int64[:, ::1], types.int64[:, ::1])


@njit(cache=True, nogil=True, inline="always")
def _big_endian(buf: npt.NDArray[np.uint8], pos: Num) -> Num:
    value = np.uint64(0)
    for k in range(8):
        value = (value << np.uint64(8)) | np.uint64(buf[pos + k])
    return value


@njit(cache=True, nogil=True)
def _is_wanted(
    buf: npt.NDArray[np.uint8], pos: Num, length: Num, keys: npt.NDArray[np.uint8], key_ends: npt.NDArray[np.int64]
) -> Any:
    start = 0
    for k in range(key_ends.shape[0]):
        stop = key_ends[k]
        if stop - start == length:
            match = True
            for j in range(length):
                if buf[pos + j] != keys[start + j]:
                    match = False
                    break
            if match:
                return True
        start = stop
    return False


@njit(cache=True, nogil=True)
def _key(buf: npt.NDArray[np.uint8], pos: Num, end: Num) -> tuple[Num, Num]:
    """(offset, length) of a KeyValue's key (last occurrence); length -1 when malformed."""
    key_pos: Num = pos
    key_len: Num = 0
    while pos < end:
        field, wire, pos = tag(buf, pos, end)
        if pos < 0:
            return 0, -1
        if field == KEY_VALUE_KEY and wire == LEN:
            key_len, pos = length(buf, pos, end)
            if pos < 0:
                return 0, -1
            key_pos = pos
            pos += key_len
        else:
            pos = skip(buf, pos, end, wire, field)
            if pos < 0:
                return 0, -1
    return key_pos, key_len


@njit(cache=True, nogil=True)
def _status_code(buf: npt.NDArray[np.uint8], pos: Num, end: Num, code: Num) -> tuple[Num, Any]:
    """The `code` after reading one Status occurrence (merged into the previous ones)."""
    while pos < end:
        field, wire, pos = tag(buf, pos, end)
        if pos < 0:
            return code, False
        if field == STATUS_CODE and wire == VARINT:
            value, pos = varint(buf, pos, end)
            if pos < 0:
                return code, False
            code = int32(value)
        else:
            pos = skip(buf, pos, end, wire, field)
            if pos < 0:
                return code, False
    return code, True


@njit(cache=True, nogil=True)
def _span(
    buf: npt.NDArray[np.uint8],
    pos: Num,
    end: Num,
    row: Num,
    u: npt.NDArray[np.uint64],
    i: npt.NDArray[np.int64],
    kv: npt.NDArray[np.int64],
    n_kv: Num,
    keys: npt.NDArray[np.uint8],
    key_ends: npt.NDArray[np.int64],
) -> tuple[Num, Num, Num, Num]:
    """Reads one Span into row `row` and its wanted KeyValues into `kv` (room for one per two
    bytes of the span); returns the new length of `kv`, the name's offset and length, and the
    position after the span (-1: malformed)."""
    trace_pos: Num = 0
    span_pos: Num = 0
    parent_pos: Num = 0
    name_pos: Num = 0
    trace_len: Num = 0
    span_len: Num = 0
    parent_len: Num = 0
    name_len: Num = 0
    kind: Num = 0
    code: Num = 0
    start = stop = np.uint64(0)
    while pos < end:
        field, wire, pos = tag(buf, pos, end)
        if pos < 0:
            return n_kv, 0, 0, -1
        if wire == LEN and field in _SPAN_LEN_FIELDS:
            n, pos = length(buf, pos, end)
            if pos < 0:
                return n_kv, 0, 0, -1
            if field == SPAN_TRACE_ID:
                trace_pos, trace_len = pos, n
            elif field == SPAN_SPAN_ID:
                span_pos, span_len = pos, n
            elif field == SPAN_PARENT_SPAN_ID:
                parent_pos, parent_len = pos, n
            elif field == SPAN_NAME:
                name_pos, name_len = pos, n
            elif field == SPAN_STATUS:
                code, ok = _status_code(buf, pos, pos + n, code)
                if not ok:
                    return n_kv, 0, 0, -1
            else:
                key_pos, key_len = _key(buf, pos, pos + n)
                if key_len < 0:
                    return n_kv, 0, 0, -1
                if _is_wanted(buf, key_pos, key_len, keys, key_ends):
                    kv[n_kv, 0], kv[n_kv, 1] = pos, n
                    n_kv += 1
            pos += n
        elif field == SPAN_KIND and wire == VARINT:
            value, pos = varint(buf, pos, end)
            if pos < 0:
                return n_kv, 0, 0, -1
            kind = int32(value)
        elif field in (SPAN_START_TIME, SPAN_END_TIME) and wire == I64:
            if pos + 8 > end:
                return n_kv, 0, 0, -1
            if field == SPAN_START_TIME:
                start = fixed64(buf, pos)
            else:
                stop = fixed64(buf, pos)
            pos += 8
        else:
            pos = skip(buf, pos, end, wire, field)
            if pos < 0:
                return n_kv, 0, 0, -1
    if trace_len == 16:
        u[row, U_TRACE_HI] = _big_endian(buf, trace_pos)
        u[row, U_TRACE_LO] = _big_endian(buf, trace_pos + 8)
    if span_len == 8:
        u[row, U_SPAN] = _big_endian(buf, span_pos)
    if parent_len == 8:
        u[row, U_PARENT] = _big_endian(buf, parent_pos)
    u[row, U_START], u[row, U_END] = start, stop
    i[row, I_TRACE_LEN], i[row, I_SPAN_LEN], i[row, I_PARENT_LEN] = trace_len, span_len, parent_len
    i[row, I_KIND], i[row, I_STATUS] = kind, code
    return n_kv, name_pos, name_len, end


@njit(cache=True, nogil=True)
def _dedupe(
    buf: npt.NDArray[np.uint8],
    n_spans: Num,
    name_at: npt.NDArray[np.int64],
    kv: npt.NDArray[np.int64],
    kv_from: npt.NDArray[np.int64],
    i: npt.NDArray[np.int64],
    t: npt.NDArray[np.int64],
) -> tuple[Num, Num]:
    """Interns names (`I_NAME`) and groups spans by their wanted attributes (`I_GROUP`, -1
    for none) with open addressing on hashes and exact byte comparison."""
    name_slots = slots_for(n_spans)
    group_slots = slots_for(n_spans)
    mask = name_slots.shape[0] - 1
    n_names = n_groups = 0
    for row in range(n_spans):
        pos, n = name_at[row, 0], name_at[row, 1]
        slot = slot_of(digest(buf, pos, n, HASH_SEED), mask)
        while True:
            known = name_slots[slot]
            if known < 0:
                name_slots[slot] = n_names
                t[n_names, T_NAME_OFF], t[n_names, T_NAME_LEN] = pos, n
                i[row, I_NAME] = n_names
                n_names += 1
                break
            if t[known, T_NAME_LEN] == n and same(buf, t[known, T_NAME_OFF], pos, n):
                i[row, I_NAME] = known
                break
            slot = (slot + 1) & mask
        if kv_from[row] == kv_from[row + 1]:
            i[row, I_GROUP] = -1
        else:
            i[row, I_GROUP], n_groups = group_of(buf, row, kv, kv_from, group_slots, t[:, T_GROUP_REP], n_groups)
    return n_names, n_groups


@njit(_SIG, cache=True, nogil=True)
def scan(
    buf: npt.NDArray[np.uint8],
    n_spans: Num,
    keys: npt.NDArray[np.uint8],
    key_ends: npt.NDArray[np.int64],
    u: npt.NDArray[np.uint64],
    i: npt.NDArray[np.int64],
    t: npt.NDArray[np.int64],
) -> tuple[Num, Num]:
    """Fills `u`, `i` (one row per span) and `t`; returns (names, groups), or (BAD, BAD)."""
    spans, n = records(buf)
    if n != n_spans:
        return BAD, BAD
    kv = np.empty((64, 2), np.int64)
    n_kv = 0
    kv_from = np.empty(n_spans + 1, np.int64)
    name_at = np.zeros((n_spans, 2), np.int64)
    for row in range(n_spans):
        pos, end = spans[row, R_OFF], spans[row, R_OFF] + spans[row, R_LEN]
        kv_from[row] = n_kv
        kv = grown(kv, n_kv, n_kv + spans[row, R_LEN] // 2 + 1)  # a KeyValue takes at least 2 bytes
        n_kv, name_at[row, 0], name_at[row, 1], pos = _span(buf, pos, end, row, u, i, kv, n_kv, keys, key_ends)
        if pos < 0:
            return BAD, BAD
        i[row, I_RESOURCE], i[row, I_SCOPE], i[row, I_INDEX] = (
            spans[row, R_RESOURCE],
            spans[row, R_SCOPE],
            spans[row, R_INDEX],
        )
    kv_from[n_spans] = n_kv
    return _dedupe(buf, n_spans, name_at, kv, kv_from, i, t)


@njit(cache=True, nogil=True)
def combinations(
    i: npt.NDArray[np.int64], every: npt.NDArray[np.bool_], caller_kinds: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Each span's combination of (attribute group, resource, caller kind or not), -1 for spans
    with no wanted attributes whose resource is not read for `every` span; and the first span of
    each combination. Spans of one combination have the same attribute effect."""
    n, n_resources = i.shape[0], every.shape[0]
    keys = np.full(n, -1, np.int64)
    for row in range(n):
        group, resource = i[row, I_GROUP], i[row, I_RESOURCE]
        if group >= 0 or every[resource]:
            caller = 0
            for kind in caller_kinds:
                if i[row, I_KIND] == kind:
                    caller = 1
            keys[row] = ((group + 1) * n_resources + resource) * 2 + caller
    rows = np.flatnonzero(keys >= 0)
    size = 16
    while size < 2 * rows.shape[0]:
        size *= 2
    ids = np.empty(rows.shape[0], np.int64)
    n_combos, _ = ids_of(
        np.zeros(size, np.int64), np.full(size, -1, np.int64), np.empty(rows.shape[0], np.int64), 0, keys[rows], ids
    )
    combo = np.full(n, -1, np.int64)
    first = np.full(n_combos, -1, np.int64)
    for k in range(rows.shape[0]):
        combo[rows[k]] = ids[k]
        if first[ids[k]] < 0:
            first[ids[k]] = rows[k]
    return combo, first


@njit(cache=True, nogil=True)
def spread(
    i: npt.NDArray[np.int64],
    combo: npt.NDArray[np.int64],
    service_of: npt.NDArray[np.int32],
    operation_of: npt.NDArray[np.int32],
    combo_peer: npt.NDArray[np.int32],
    combo_resource: npt.NDArray[np.int32],
    combo_signals: npt.NDArray[np.float64],
    error_status: Num,
) -> tuple[
    npt.NDArray[np.int32],
    npt.NDArray[np.int32],
    npt.NDArray[np.int32],
    npt.NDArray[np.int32],
    npt.NDArray[np.float64],
    npt.NDArray[np.bool_],
]:
    """Per span: service and operation (string indices), error flag, and its combination's peer,
    resource and signal row (-1, -1 and NaN where it has none)."""
    n, n_signals = i.shape[0], combo_signals.shape[1]
    service, operation = np.empty(n, np.int32), np.empty(n, np.int32)
    peer, resource = np.full(n, -1, np.int32), np.full(n, -1, np.int32)
    signals = np.full((n, n_signals), np.nan)
    error = np.empty(n, np.bool_)
    for row in range(n):
        service[row] = service_of[i[row, I_RESOURCE]]
        operation[row] = operation_of[i[row, I_NAME]]
        error[row] = i[row, I_STATUS] == error_status
        c = combo[row]
        if c >= 0:
            peer[row], resource[row] = combo_peer[c], combo_resource[c]
            signals[row, :] = combo_signals[c, :]
    return service, operation, peer, resource, signals, error
