"""Wire-level scan of OTLP `ExportTraceServiceRequest` bytes into span columns (numba, no GIL).

Runs only on bytes upb has already parsed, so the wire format is known to be valid; any
inconsistency still makes `scan` return a negative status (never a crash), and the caller then
falls back to reading upb's objects. Per span it reads the fixed fields with protobuf's
semantics (last occurrence wins, unknown fields and fields of the wrong wire type skipped,
repeated `status` messages merged), interns the names, and groups spans whose attributes that
rca reads (the keys given in `wanted`) are byte-for-byte identical, so the attributes are
interpreted once per group, not once per span.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from numba import njit, types

from ingest.otlp_fields import (
    KEY_VALUE_KEY,
    REQUEST_RESOURCES,
    RESOURCE_SCOPES,
    SCOPE_RECORDS,
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

BAD = -1  # inconsistent with the span count, or a wire error: use the reference decoder

_VARINT, _I64, _LEN, _SGROUP, _EGROUP, _I32 = 0, 1, 2, 3, 4, 5
# A span's length-delimited fields rca reads (ids, name, attributes, status)
_SPAN_LEN_FIELDS = (SPAN_TRACE_ID, SPAN_SPAN_ID, SPAN_PARENT_SPAN_ID, SPAN_NAME, SPAN_ATTRIBUTES, SPAN_STATUS)
_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)

_BYTES = types.Array(types.uint8, 1, "C", readonly=True)
_SIG = (_BYTES, types.int64, _BYTES, types.int64[::1], types.uint64[:, ::1], types.int64[:, ::1], types.int64[:, ::1])


@njit(cache=True, nogil=True, inline="always")
def _varint(buf: npt.NDArray[np.uint8], pos: Num, end: Num) -> tuple[Num, Num]:
    """(value as uint64, next position); next position -1 when malformed."""
    if pos < end and buf[pos] < 0x80:
        return np.uint64(buf[pos]), pos + 1
    result = np.uint64(0)
    for k in range(10):
        if pos >= end:
            return np.uint64(0), -1
        b = buf[pos]
        pos += 1
        if k < 9:
            result |= np.uint64(b & 0x7F) << np.uint64(7 * k)
        else:
            result |= np.uint64(b & 0x01) << np.uint64(63)
        if b < 0x80:
            return result, pos
    return np.uint64(0), -1


@njit(cache=True, nogil=True, inline="always")
def _int32(value: Num) -> Num:
    """An enum/int32 field's value: the low 32 bits, signed."""
    low = np.int64(value & np.uint64(0xFFFFFFFF))
    return low - (1 << 32) if low >= (1 << 31) else low


@njit(cache=True, nogil=True)
def _skip_plain(buf: npt.NDArray[np.uint8], pos: Num, end: Num, wire: Num) -> Num:
    """Position after a non-group field's payload; -1 when malformed."""
    if wire == _VARINT:
        _, pos = _varint(buf, pos, end)
        return pos
    if wire == _I64:
        return pos + 8 if pos + 8 <= end else -1
    if wire == _I32:
        return pos + 4 if pos + 4 <= end else -1
    if wire == _LEN:
        length, pos = _varint(buf, pos, end)
        if pos < 0 or length > np.uint64(end - pos):
            return -1
        return pos + np.int64(length)
    return -1


@njit(cache=True, nogil=True)
def _skip(buf: npt.NDArray[np.uint8], pos: Num, end: Num, wire: Num, field: Num) -> Num:
    """Position after a field's payload (groups included); -1 when malformed."""
    if wire != _SGROUP:
        return _skip_plain(buf, pos, end, wire)
    depth = 1
    while pos < end:
        tag, pos = _varint(buf, pos, end)
        if pos < 0:
            return -1
        w = np.int64(tag & np.uint64(7))
        if w == _EGROUP:
            depth -= 1
            if depth == 0:
                return pos if np.int64(tag >> np.uint64(3)) == field else -1
        elif w == _SGROUP:
            depth += 1
        else:
            pos = _skip_plain(buf, pos, end, w)
            if pos < 0:
                return -1
    return -1


@njit(cache=True, nogil=True, inline="always")
def _fixed64(buf: npt.NDArray[np.uint8], pos: Num) -> Num:
    value = np.uint64(0)
    for k in range(8):
        value |= np.uint64(buf[pos + k]) << np.uint64(8 * k)
    return value


@njit(cache=True, nogil=True, inline="always")
def _big_endian(buf: npt.NDArray[np.uint8], pos: Num) -> Num:
    value = np.uint64(0)
    for k in range(8):
        value = (value << np.uint64(8)) | np.uint64(buf[pos + k])
    return value


@njit(cache=True, nogil=True, inline="always")
def _same(buf: npt.NDArray[np.uint8], a: Num, b: Num, length: Num) -> Any:
    k = 0
    while k < length and buf[a + k] == buf[b + k]:
        k += 1
    return k == length


@njit(cache=True, nogil=True, inline="always")
def _hash(buf: npt.NDArray[np.uint8], pos: Num, length: Num, h: Num) -> Num:
    for k in range(length):
        h = (h ^ np.uint64(buf[pos + k])) * _FNV_PRIME
    return h


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
        tag, pos = _varint(buf, pos, end)
        if pos < 0:
            return 0, -1
        field, wire = np.int64(tag >> np.uint64(3)), np.int64(tag & np.uint64(7))
        if field == KEY_VALUE_KEY and wire == _LEN:
            length, pos = _varint(buf, pos, end)
            if pos < 0 or length > np.uint64(end - pos):
                return 0, -1
            key_pos, key_len = pos, np.int64(length)
            pos += key_len
        else:
            pos = _skip(buf, pos, end, wire, field)
            if pos < 0:
                return 0, -1
    return key_pos, key_len


@njit(cache=True, nogil=True)
def _status_code(buf: npt.NDArray[np.uint8], pos: Num, end: Num, code: Num) -> tuple[Num, Any]:
    """The `code` after reading one Status occurrence (merged into the previous ones)."""
    while pos < end:
        tag, pos = _varint(buf, pos, end)
        if pos < 0:
            return code, False
        field, wire = np.int64(tag >> np.uint64(3)), np.int64(tag & np.uint64(7))
        if field == STATUS_CODE and wire == _VARINT:
            value, pos = _varint(buf, pos, end)
            if pos < 0:
                return code, False
            code = _int32(value)
        else:
            pos = _skip(buf, pos, end, wire, field)
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
        tag, pos = _varint(buf, pos, end)
        if pos < 0:
            return n_kv, 0, 0, -1
        field, wire = np.int64(tag >> np.uint64(3)), np.int64(tag & np.uint64(7))
        if wire == _LEN and field in _SPAN_LEN_FIELDS:
            length, pos = _varint(buf, pos, end)
            if pos < 0 or length > np.uint64(end - pos):
                return n_kv, 0, 0, -1
            n = np.int64(length)
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
        elif field == SPAN_KIND and wire == _VARINT:
            value, pos = _varint(buf, pos, end)
            if pos < 0:
                return n_kv, 0, 0, -1
            kind = _int32(value)
        elif field in (SPAN_START_TIME, SPAN_END_TIME) and wire == _I64:
            if pos + 8 > end:
                return n_kv, 0, 0, -1
            if field == SPAN_START_TIME:
                start = _fixed64(buf, pos)
            else:
                stop = _fixed64(buf, pos)
            pos += 8
        else:
            pos = _skip(buf, pos, end, wire, field)
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
    for none) with open addressing on FNV-1a hashes and exact byte comparison."""
    size = 16
    while size < 2 * n_spans:
        size *= 2
    mask = size - 1
    name_slots = np.full(size, -1, np.int64)
    group_slots = np.full(size, -1, np.int64)
    n_names = n_groups = 0
    for row in range(n_spans):
        pos, length = name_at[row, 0], name_at[row, 1]
        slot = np.int64(_hash(buf, pos, length, _FNV_OFFSET) & np.uint64(mask))
        while True:
            known = name_slots[slot]
            if known < 0:
                name_slots[slot] = n_names
                t[n_names, T_NAME_OFF], t[n_names, T_NAME_LEN] = pos, length
                i[row, I_NAME] = n_names
                n_names += 1
                break
            if t[known, T_NAME_LEN] == length and _same(buf, t[known, T_NAME_OFF], pos, length):
                i[row, I_NAME] = known
                break
            slot = (slot + 1) & mask
        first, last = kv_from[row], kv_from[row + 1]
        if first == last:
            i[row, I_GROUP] = -1
            continue
        h = _FNV_OFFSET
        for k in range(first, last):
            h = (h ^ np.uint64(kv[k, 1])) * _FNV_PRIME
            h = _hash(buf, kv[k, 0], kv[k, 1], h)
        slot = np.int64(h & np.uint64(mask))
        while True:
            known = group_slots[slot]
            if known < 0:
                group_slots[slot] = n_groups
                t[n_groups, T_GROUP_REP] = row
                i[row, I_GROUP] = n_groups
                n_groups += 1
                break
            rep = t[known, T_GROUP_REP]
            rep_first, rep_last = kv_from[rep], kv_from[rep + 1]
            equal = rep_last - rep_first == last - first
            k = 0
            while equal and k < last - first:
                a, b = kv[rep_first + k], kv[first + k]
                equal = a[1] == b[1] and _same(buf, a[0], b[0], b[1])
                k += 1
            if equal:
                i[row, I_GROUP] = known
                break
            slot = (slot + 1) & mask
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
    kv = np.empty((64, 2), np.int64)
    n_kv = 0
    kv_from = np.empty(n_spans + 1, np.int64)
    name_at = np.zeros((n_spans, 2), np.int64)
    row, resource, pos, end = 0, 0, 0, buf.shape[0]
    while pos < end:
        tag, pos = _varint(buf, pos, end)
        if pos < 0:
            return BAD, BAD
        field, wire = np.int64(tag >> np.uint64(3)), np.int64(tag & np.uint64(7))
        if not (field == REQUEST_RESOURCES and wire == _LEN):
            pos = _skip(buf, pos, end, wire, field)
            if pos < 0:
                return BAD, BAD
            continue
        length, pos = _varint(buf, pos, end)
        if pos < 0 or length > np.uint64(end - pos):
            return BAD, BAD
        rs_end = pos + np.int64(length)
        scope = 0
        while pos < rs_end:
            tag, pos = _varint(buf, pos, rs_end)
            if pos < 0:
                return BAD, BAD
            field, wire = np.int64(tag >> np.uint64(3)), np.int64(tag & np.uint64(7))
            if not (field == RESOURCE_SCOPES and wire == _LEN):
                pos = _skip(buf, pos, rs_end, wire, field)
                if pos < 0:
                    return BAD, BAD
                continue
            length, pos = _varint(buf, pos, rs_end)
            if pos < 0 or length > np.uint64(rs_end - pos):
                return BAD, BAD
            ss_end = pos + np.int64(length)
            index = 0
            while pos < ss_end:
                tag, pos = _varint(buf, pos, ss_end)
                if pos < 0:
                    return BAD, BAD
                field, wire = np.int64(tag >> np.uint64(3)), np.int64(tag & np.uint64(7))
                if not (field == SCOPE_RECORDS and wire == _LEN):
                    pos = _skip(buf, pos, ss_end, wire, field)
                    if pos < 0:
                        return BAD, BAD
                    continue
                length, pos = _varint(buf, pos, ss_end)
                if pos < 0 or length > np.uint64(ss_end - pos) or row >= n_spans:
                    return BAD, BAD
                kv_from[row] = n_kv
                room: Num = n_kv + np.int64(length) // 2 + 1  # a KeyValue takes at least 2 bytes
                if room > kv.shape[0]:
                    grown = np.empty((max(room, 2 * kv.shape[0]), 2), np.int64)
                    grown[:n_kv] = kv[:n_kv]
                    kv = grown
                n_kv, name_pos, name_len, pos = _span(
                    buf, pos, pos + np.int64(length), row, u, i, kv, n_kv, keys, key_ends
                )
                if pos < 0:
                    return BAD, BAD
                name_at[row, 0], name_at[row, 1] = name_pos, name_len
                i[row, I_RESOURCE], i[row, I_SCOPE], i[row, I_INDEX] = resource, scope, index
                row += 1
                index += 1
            scope += 1
        resource += 1
    if row != n_spans:
        return BAD, BAD
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
