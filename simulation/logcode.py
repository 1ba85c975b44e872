"""The log lines in each simulated service's code, drawn per seed.

A line is a format written at one place of one operation (`pos`, a fraction of the span) with a
probability per invocation (the branch that writes it is taken or not). Per service a seed draws
3-8 formats its operations' lines use, whether it logs after its downstream calls, how it logs a
failed request or a failed call, its background warnings and its slow-request logger. Services
without operations of their own (GPU workers) and database calls (virtual nodes) write nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import numpy.typing as npt

from rca.telemetry.spans import KIND_SERVER
from simulation import logformats as lf
from simulation.topology import CompiledTopology

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
STATUSES = ("INTERNAL", "UNAVAILABLE", "DEADLINE_EXCEEDED")
_COLUMNS = ("op", "service", "format", "kind", "pos", "p", "call", "callee", "reason", "status", "severity")


class LineKind(IntEnum):
    ENTRY = 0
    BRANCH = 1
    TAIL = 2  # after the work is done: not written when the request fails
    AFTER_CALL = 3  # after a downstream call: written only when that call was made
    EXTRA = 4  # written by rule (errors, warnings, fault evidence), not by `p`
    PERIODIC = 5  # a background thread's, on no span


@dataclass(frozen=True, slots=True)
class Lines:
    """One row per log line; `call`/`callee` name the call a line follows or reports (-1: none)."""

    op: I64  # -1 for service-level lines
    service: I64
    format: I64  # index into `logformats.FORMATS`
    kind: I64
    pos: F64
    p: F64
    call: I64
    callee: I64  # callee operation
    reason: I64  # into `logformats.REASONS`
    status: I64  # into `STATUSES`
    severity: npt.NDArray[np.int8]

    def literals(self, ct: CompiledTopology, rng: np.random.Generator) -> dict[str, npt.NDArray[np.object_]]:
        """Each literal slot's value per line."""
        operations = ct.topology.operations
        ops = np.asarray([o.name for o in operations] + [""], object)
        services = np.asarray(list(ct.services), object)
        classes = np.asarray(["".join(w.capitalize() for w in s.split("-")) for s in ct.services], object)
        # a call goes to the callee's service, or to the database or cache a CLIENT operation names
        callees = np.asarray([o.peer or o.service for o in operations] + [""], object)
        return {
            "op": ops[self.op],
            "svc": services[self.service],
            "cls": classes[self.service],
            "callee": callees[self.callee],
            "calleeop": ops[self.callee],
            "reason": np.asarray(lf.REASONS, object)[np.maximum(self.reason, 0)],
            "status": np.asarray(STATUSES, object)[np.maximum(self.status, 0)],
            "line": rng.integers(20, 900, self.op.shape[0]).astype(str).astype(object),
        }


class LineTable:
    """Lines appended in blocks (arrays broadcast against `op`); `add` returns their rows."""

    def __init__(self) -> None:
        self._parts: list[dict[str, npt.NDArray[np.generic]]] = []
        self._size = 0

    def add(
        self,
        op: I64,
        service: I64,
        fmt: I64,
        kind: LineKind,
        *,
        pos: F64 | float = np.nan,
        p: F64 | float = 0.0,
        call: I64 | int = -1,
        callee: I64 | int = -1,
        reason: I64 | int = -1,
        status: I64 | int = -1,
        severity: npt.NDArray[np.int8] | int | None = None,
    ) -> I64:
        n = op.shape[0]
        level = lf.SEVERITY[fmt] if severity is None else severity
        values = (op, service, fmt, int(kind), pos, p, call, callee, reason, status, level)
        self._parts.append({k: np.broadcast_to(v, (n,)) for k, v in zip(_COLUMNS, values, strict=True)})
        self._size += n
        return np.arange(self._size - n, self._size, dtype=np.int64)

    def finish(self) -> Lines:
        c = {k: np.concatenate([p[k] for p in self._parts]) if self._parts else np.zeros(0) for k in _COLUMNS}
        ints = {k: c[k].astype(np.int64) for k in _COLUMNS if k not in ("pos", "p", "severity")}
        return Lines(
            **ints, pos=c["pos"].astype(np.float64), p=c["p"].astype(np.float64), severity=c["severity"].astype(np.int8)
        )


@dataclass(frozen=True, slots=True)
class Habits:
    """How each service logs (arrays indexed by service), drawn per seed."""

    error_format: I64  # its line for a failed request, written with `error_p`
    error_p: F64
    call_failed_format: I64  # its line for a failed downstream call, written with `caller_p`
    caller_p: F64
    noise_format: I64  # a background WARN/ERROR line, `noise_rate` per request (more in a hiccup)
    noise_rate: F64
    slow_quantile: F64  # the slow-request logger's threshold, a quantile of its own latency; nan: none
    slow_format: I64

    @staticmethod
    def draw(ct: CompiledTopology, rng: np.random.Generator) -> Habits:
        n = len(ct.services)
        noisy = np.isin(np.arange(n), [ct.service_index[s] for s in ct.topology.noisy])
        warns = noisy | (rng.random(n) < rng.uniform(0.1, 0.4))
        rate = np.exp(rng.uniform(np.log(np.where(noisy, 0.005, 0.0005)), np.log(np.where(noisy, 0.05, 0.01))))
        slow = rng.random(n) < rng.uniform(0.2, 0.7)
        return Habits(
            error_format=rng.choice(lf.ids(lf.REQUEST_ERROR), n),
            error_p=rng.uniform(0.3, 1.0, n),
            call_failed_format=rng.choice(lf.ids(lf.CALL_FAILED), n),
            caller_p=rng.uniform(0.2, 0.9, n),
            noise_format=rng.choice(lf.ids(lf.NOISE), n),
            noise_rate=np.where(warns, rate, 0.0),
            slow_quantile=np.where(slow, 1.0 - np.exp(rng.uniform(np.log(5e-4), np.log(1e-2), n)), np.nan),
            slow_format=rng.choice(lf.ids(lf.SLOW), n),
        )


def code_lines(ct: CompiledTopology, table: LineTable, rng: np.random.Generator) -> None:
    """The lines each logging operation writes while it serves a request: an entry line, a few
    branches, a line after some of its calls, a tail line (each present per seed, DEBUG lines
    only in services running at DEBUG level)."""
    healthy = lf.ids(lf.HEALTHY)
    n_services = len(ct.services)
    vocabulary = rng.random((n_services, healthy.shape[0])).argsort(axis=1)  # each service's formats
    size = rng.integers(3, 9, n_services)
    debug = rng.random(n_services) < rng.uniform(0.0, 0.5)
    verbosity = rng.uniform(0.4, 1.6)  # how chatty the code is
    ops = np.flatnonzero(ct.op_kind == KIND_SERVER)

    def add(
        kind: LineKind, o: I64, pos: npt.ArrayLike, p: npt.ArrayLike, fmt: I64 | None = None, call: I64 | None = None
    ) -> None:
        s = ct.op_service[o]
        if fmt is None:
            fmt = healthy[vocabulary[s, (rng.random(s.shape[0]) * size[s]).astype(np.int64)]]
        kept = (lf.SEVERITY[fmt] > lf.DEBUG) | debug[s]
        index = np.full(o.shape[0], -1, np.int64) if call is None else call
        callee = np.full(o.shape[0], -1, np.int64)
        callee[index >= 0] = ct.call_callee[ct.call_offset[o[index >= 0]] + index[index >= 0]]
        where = np.asarray(pos, np.float64)[kept]
        chance = np.asarray(p, np.float64)[kept]
        table.add(o[kept], s[kept], fmt[kept], kind, pos=where, p=chance, call=index[kept], callee=callee[kept])

    n = ops.shape[0]
    always = rng.random(n) < 0.5
    o = ops[entry := rng.random(n) < 0.7]
    add(
        LineKind.ENTRY,
        o,
        rng.uniform(0, 0.08, o.shape[0]),
        np.where(always[entry], 1.0, rng.uniform(0.3, 1.0, o.shape[0])),
    )
    o = ops[tail := (rng.random(n) < 0.85) | ~entry]
    add(
        LineKind.TAIL,
        o,
        rng.uniform(0.93, 1.0, o.shape[0]),
        np.where(always[tail], 1.0, rng.uniform(0.5, 1.0, o.shape[0])),
    )
    o = np.repeat(ops, np.minimum(rng.poisson(1.5 * verbosity, n), 5))
    add(LineKind.BRANCH, o, rng.uniform(0.1, 0.9, o.shape[0]), rng.uniform(0.05, 0.7, o.shape[0]))
    calls = np.diff(ct.call_offset)[ops]
    o = np.repeat(ops, calls)
    index = np.arange(o.shape[0]) - np.repeat(np.cumsum(calls) - calls, calls)
    logged = rng.random(o.shape[0]) < min(0.9, 0.4 * verbosity)
    o, index = o[logged], index[logged]
    after = lf.ids(lf.AFTER_CALL)[rng.integers(0, len(lf.AFTER_CALL), n_services)]
    pos = (index + 1) / (calls[np.searchsorted(ops, o)] + 1)
    add(LineKind.AFTER_CALL, o, pos, rng.uniform(0.5, 1.0, o.shape[0]), after[ct.op_service[o]], index)


def per_op_lines(ct: CompiledTopology, table: LineTable, fmt_of_service: I64) -> I64:
    """One EXTRA line per operation in its service's format; the rows, indexed by operation."""
    return table.add(
        np.arange(len(ct.calls), dtype=np.int64), ct.op_service, fmt_of_service[ct.op_service], LineKind.EXTRA
    )


def call_failed_lines(ct: CompiledTopology, habits: Habits, table: LineTable) -> int:
    """A caller's line for each of its calls failing with each of `STATUSES`; returns the first
    row (the line of call c of op, status k: first + (call_offset[op] + c) * len(STATUSES) + k)."""
    statuses = len(STATUSES)
    op = np.repeat(np.repeat(np.arange(len(ct.calls), dtype=np.int64), np.diff(ct.call_offset)), statuses)
    callee = np.repeat(ct.call_callee, statuses)
    status = np.tile(np.arange(statuses, dtype=np.int64), ct.call_callee.shape[0])
    service = ct.op_service[op]
    rows = table.add(op, service, habits.call_failed_format[service], LineKind.EXTRA, callee=callee, status=status)
    return int(rows[0]) if rows.shape[0] else 0
