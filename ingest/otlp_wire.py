"""Protobuf wire primitives the numba scanners share (`ingest.otlp_scan` for spans,
`ingest.otlp_metrics_scan` for metric points): varints, skipping fields (groups included), fixed64
reads, hashing with exact byte comparison, the walk to an export request's records, and the
grouping of records by their raw attribute bytes.

Every reader returns a negative position or count on malformed bytes, never a crash: the scanners
run only on bytes upb has already parsed, and answer `BAD` (use the reference decoder) on any
inconsistency. numba's on-disk cache of a kernel is keyed by its own file only: after changing this
module, delete the scanners' cached kernels (`ingest/__pycache__/otlp_*.nb?`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from numba import njit

from ingest.otlp_fields import REQUEST_RESOURCES, RESOURCE_SCOPES, SCOPE_RECORDS
from rca.graph.intindex import Num

Bytes = npt.NDArray[np.uint8]
Ints = npt.NDArray[np.int64]
BAD = -1  # inconsistent, or a wire error: use the reference decoder
VARINT, I64, LEN, SGROUP, EGROUP, I32 = 0, 1, 2, 3, 4, 5  # wire types
HASH_SEED = np.uint64(0xCBF29CE484222325)
HASH_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)  # odd, its bits spread: a golden-ratio constant
# Columns of `records`: a record's payload offset and length, its resource, scope (within the
# resource) and index (within the scope).
R_OFF, R_LEN, R_RESOURCE, R_SCOPE, R_INDEX = range(5)


@njit(cache=True, nogil=True, inline="always")
def varint(buf: Bytes, pos: Num, end: Num) -> tuple[Num, Num]:
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
def tag(buf: Bytes, pos: Num, end: Num) -> tuple[Num, Num, Num]:
    """(field number, wire type, next position); next position -1 when malformed."""
    value, pos = varint(buf, pos, end)
    return np.int64(value >> np.uint64(3)), np.int64(value & np.uint64(7)), pos


@njit(cache=True, nogil=True, inline="always")
def length(buf: Bytes, pos: Num, end: Num) -> tuple[Num, Num]:
    """(payload length, payload position) of a length-delimited field; position -1 when the
    length is malformed or runs past `end`."""
    n, pos = varint(buf, pos, end)
    if pos < 0 or n > np.uint64(end - pos):
        return 0, -1
    return np.int64(n), pos


@njit(cache=True, nogil=True, inline="always")
def int32(value: Num) -> Num:
    """An enum/int32 field's value: the low 32 bits, signed."""
    low = np.int64(value & np.uint64(0xFFFFFFFF))
    return low - (1 << 32) if low >= (1 << 31) else low


@njit(cache=True, nogil=True)
def _skip_plain(buf: Bytes, pos: Num, end: Num, wire: Num) -> Num:
    """Position after a non-group field's payload; -1 when malformed."""
    if wire == VARINT:
        _, pos = varint(buf, pos, end)
        return pos
    if wire == I64:
        return pos + 8 if pos + 8 <= end else -1
    if wire == I32:
        return pos + 4 if pos + 4 <= end else -1
    if wire == LEN:
        n, pos = length(buf, pos, end)
        return pos + n if pos >= 0 else -1
    return -1


@njit(cache=True, nogil=True)
def skip(buf: Bytes, pos: Num, end: Num, wire: Num, field: Num) -> Num:
    """Position after a field's payload (groups included); -1 when malformed."""
    if wire != SGROUP:
        return _skip_plain(buf, pos, end, wire)
    depth = 1
    while pos < end:
        value, pos = varint(buf, pos, end)
        if pos < 0:
            return -1
        w = np.int64(value & np.uint64(7))
        if w == EGROUP:
            depth -= 1
            if depth == 0:
                return pos if np.int64(value >> np.uint64(3)) == field else -1
        elif w == SGROUP:
            depth += 1
        else:
            pos = _skip_plain(buf, pos, end, w)
            if pos < 0:
                return -1
    return -1


@njit(cache=True, nogil=True, inline="always")
def byte(buf: Bytes, pos: Num) -> Num:
    """The byte at `pos` (never negative) as uint64: an unsigned index spares numba's check for
    a negative one, so that LLVM reads eight neighbouring bytes as one word."""
    return np.uint64(buf[np.uint64(pos)])


@njit(cache=True, nogil=True, inline="always")
def fixed64(buf: Bytes, pos: Num) -> Num:
    value = np.uint64(0)
    for k in range(8):
        value |= byte(buf, pos + k) << np.uint64(8 * k)
    return value


@njit(cache=True, nogil=True, inline="always")
def same(buf: Bytes, a: Num, b: Num, n: Num) -> Any:
    """Whether the `n` bytes at `a` and at `b` are the same (compared eight at a time)."""
    k = 0
    while k + 8 <= n:
        if fixed64(buf, a + k) != fixed64(buf, b + k):
            return False
        k += 8
    while k < n and byte(buf, a + k) == byte(buf, b + k):
        k += 1
    return k == n


@njit(cache=True, nogil=True, inline="always")
def mix(h: Num, word: Num) -> Num:
    """`h` with one more 64-bit word hashed in."""
    return (h ^ np.uint64(word)) * HASH_MULTIPLIER


@njit(cache=True, nogil=True, inline="always")
def digest(buf: Bytes, pos: Num, n: Num, h: Num) -> Num:
    """`h` with the `n` bytes at `pos` hashed in, eight at a time."""
    k = 0
    while k + 8 <= n:
        h = mix(h, fixed64(buf, pos + k))
        k += 8
    while k < n:
        h = mix(h, byte(buf, pos + k))
        k += 1
    return h


@njit(cache=True, nogil=True, inline="always")
def slot_of(h: Num, mask: Num) -> Num:
    """A hash's slot in a table of `mask + 1` slots, every bit of the hash mixed in (murmur3's
    finalizer: the words are mixed in by multiplication, which moves bits up only)."""
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xFF51AFD7ED558CCD)
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xC4CEB9FE1A85EC53)
    h ^= h >> np.uint64(33)
    return np.int64(h & np.uint64(mask))


@njit(cache=True, nogil=True, inline="always")
def grown(a: Any, n: Num, need: Num) -> Any:
    """`a` (rows of a 2-D array) with room for at least `need` rows, its first `n` kept."""
    if need <= a.shape[0]:
        return a
    out = np.empty((max(need, 2 * a.shape[0]), a.shape[1]), a.dtype)
    out[:n] = a[:n]
    return out


@njit(cache=True, nogil=True)
def _enter(buf: Bytes, pos: Num, end: Num, wanted: Num) -> tuple[Num, Num, Num]:
    """From `pos`, the next length-delimited field `wanted` before `end`, other fields skipped:
    (payload position, payload end, 1), or (end, end, 0) when there is none; position -1 when
    malformed."""
    while pos < end:
        field, wire, pos = tag(buf, pos, end)
        if pos < 0:
            return -1, -1, 0
        if field == wanted and wire == LEN:
            n, pos = length(buf, pos, end)
            return pos, pos + n, 1 if pos >= 0 else 0
        pos = skip(buf, pos, end, wire, field)
        if pos < 0:
            return -1, -1, 0
    return end, end, 0


@njit(cache=True, nogil=True)
def records(buf: Bytes) -> tuple[Ints, Num]:
    """The records (spans, log records, metrics) of an export request, in order, as rows of the
    `R_*` columns; and how many there are, or `BAD`."""
    out = np.empty((16, 5), np.int64)
    wanted = (REQUEST_RESOURCES, RESOURCE_SCOPES, SCOPE_RECORDS)
    ends, counts = np.full(3, buf.shape[0]), np.zeros(3, np.int64)  # resource, scope, index
    n = depth = pos = 0
    while True:
        pos, inner_end, found = _enter(buf, pos, ends[depth], wanted[depth])
        if pos < 0:
            return out, BAD
        if not found:  # the enclosing message is done: on to its next sibling
            if depth == 0:
                return out, n
            depth -= 1
            counts[depth] += 1
        elif depth < 2:
            depth += 1
            ends[depth], counts[depth] = inner_end, 0
        else:
            out = grown(out, n, n + 1)
            out[n, R_OFF], out[n, R_LEN] = pos, inner_end - pos
            out[n, R_RESOURCE], out[n, R_SCOPE], out[n, R_INDEX] = counts[0], counts[1], counts[2]
            n += 1
            counts[2] += 1
            pos = inner_end


@njit(cache=True, nogil=True)
def group_of(buf: Bytes, row: Num, kv: Ints, kv_from: Ints, slots: Ints, reps: Any, n_groups: Num) -> tuple[Num, Num]:
    """The group of record `row`, whose attributes are the byte ranges `kv[kv_from[row]:
    kv_from[row + 1]]` (offset, length): records whose ranges hold the same bytes, in the same
    order, share a group. Open addressing on their hashes in `slots` (a power of two, -1 where
    free, at most half full) and exact byte comparison with each group's representative record
    (`reps`). Returns (group, groups in use): a new group takes the next number."""
    first, last = kv_from[row], kv_from[row + 1]
    h = HASH_SEED
    for k in range(first, last):
        h = digest(buf, kv[k, 0], kv[k, 1], mix(h, kv[k, 1]))
    mask = slots.shape[0] - 1
    slot = slot_of(h, mask)
    while True:
        known = slots[slot]
        if known < 0:
            slots[slot] = n_groups
            reps[n_groups] = row
            return n_groups, n_groups + 1
        rep = reps[known]
        rep_first, rep_last = kv_from[rep], kv_from[rep + 1]
        equal = rep_last - rep_first == last - first
        k = 0
        while equal and k < last - first:
            n = kv[first + k, 1]
            equal = kv[rep_first + k, 1] == n and same(buf, kv[rep_first + k, 0], kv[first + k, 0], n)
            k += 1
        if equal:
            return known, n_groups
        slot = (slot + 1) & mask


@njit(cache=True, nogil=True)
def slots_for(n: Num) -> Ints:
    """Free hash slots for `n` keys: a power of two, at least twice `n` and at least 16."""
    size = 16
    while size < 2 * n:
        size *= 2
    return np.full(size, -1, np.int64)
