"""Simulated log records: what each service writes while it serves the case's requests.

Every record of a request carries the trace and span id of the invocation that wrote it and
its service's name. Healthy logs vary: which lines a request writes depends on the branches it
takes and the calls it makes; failed requests skip their tail line and may log an error; a
caller may log a failed or timed-out call; some services log background warnings (more in a
noisy service's hiccups), slow requests over their own latency quantile, or periodic lines on
no span. A fault adds its own evidence (`logfaults`). Rates are drawn per seed.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rca.telemetry.logs import LogBatch
from rca.telemetry.spans import KIND_SERVER
from simulation import logformats as lf
from simulation.columns import chunk_bounds
from simulation.faults import FaultPlan
from simulation.invocations import Attempt, Invocations
from simulation.logcode import (
    STATUSES,
    Habits,
    LineKind,
    Lines,
    LineTable,
    call_failed_lines,
    code_lines,
    per_op_lines,
)
from simulation.logfaults import echo_skipped, fault_lines, fault_records, skipped
from simulation.topology import CompiledTopology

I64 = npt.NDArray[np.int64]
Records = tuple[I64, I64, I64]  # invocation row (-1: none), line, time


def _at(inv: Invocations, rows: I64, frac: npt.NDArray[np.float64]) -> I64:
    """Times a fraction `frac` into each row's span."""
    result: I64 = inv.start_ns[rows] + (frac * (inv.end_ns[rows] - inv.start_ns[rows])).astype(np.int64)
    return result


def _code_records(ct: CompiledTopology, lines: Lines, inv: Invocations, rng: np.random.Generator) -> tuple[I64, I64]:
    """(row, line) of the code lines each invocation writes: branches taken, calls made, no
    tail line on a failed request."""
    code = np.flatnonzero(np.isin(lines.kind, (LineKind.ENTRY, LineKind.BRANCH, LineKind.TAIL, LineKind.AFTER_CALL)))
    code = code[np.argsort(lines.op[code], kind="stable")]
    n_ops = len(ct.calls)
    first = np.searchsorted(lines.op[code], np.arange(n_ops))
    count = np.searchsorted(lines.op[code], np.arange(n_ops), side="right") - first
    per_row = count[inv.op]
    row = np.repeat(np.arange(len(inv), dtype=np.int64), per_row)
    within = np.arange(row.shape[0]) - np.repeat(np.cumsum(per_row) - per_row, per_row)
    line = code[np.repeat(first[inv.op], per_row) + within]
    keep = rng.random(row.shape[0]) < lines.p[line]
    keep &= ~((lines.kind[line] == LineKind.TAIL) & inv.error[row])
    after = lines.kind[line] == LineKind.AFTER_CALL
    width = int(np.diff(ct.call_offset).max(initial=0)) + 1
    child = np.flatnonzero(inv.parent >= 0)
    made = np.unique(inv.parent[child] * width + inv.call_index[child])
    keep[after] &= np.isin(row[after] * width + lines.call[line[after]], made)
    return row[keep], line[keep]


def _caller_records(
    ct: CompiledTopology, habits: Habits, inv: Invocations, first: int, rng: np.random.Generator
) -> Records:
    """A caller's record of each failed or timed-out remote call it sees, when it logs them: at
    the failed call's end, within the caller's span."""
    child = np.flatnonzero(inv.parent >= 0)
    caller = inv.parent[child]
    caller_service = ct.op_service[inv.op[caller]]
    failed = (inv.error[child] | (inv.attempt[child] != Attempt.OK)) & (ct.op_service[inv.op[child]] != caller_service)
    failed &= rng.random(child.shape[0]) < habits.caller_p[caller_service]
    child, caller = child[failed], caller[failed]
    status = np.select(
        [inv.attempt[child] == Attempt.TIMED_OUT, inv.attempt[child] == Attempt.FAILED],
        [STATUSES.index("DEADLINE_EXCEEDED"), STATUSES.index("UNAVAILABLE")],
        STATUSES.index("INTERNAL"),
    )
    line = first + (ct.call_offset[inv.op[caller]] + inv.call_index[child]) * len(STATUSES) + status
    return caller, line, np.clip(inv.end_ns[child], inv.start_ns[caller], inv.end_ns[caller])


def _slow_threshold(ct: CompiledTopology, habits: Habits, inv: Invocations, before_ns: int) -> I64:
    """Per operation, the duration its service's slow-request logger warns above: a quantile of
    the operation's own durations before `before_ns` (never, where the service has none)."""
    n_ops = len(ct.calls)
    never = np.full(n_ops, np.iinfo(np.int64).max)
    base = inv.start_ns < before_ns
    if not base.any():
        return never
    op, duration = inv.op[base], (inv.end_ns - inv.start_ns)[base]
    ordered = duration[np.lexsort((duration, op))]
    count = np.bincount(op, minlength=n_ops)
    quantile = habits.slow_quantile[ct.op_service]
    found = (count > 0) & np.isfinite(quantile)
    at = np.cumsum(count) - count + np.floor(np.where(found, quantile, 0.0) * np.maximum(count - 1, 0))
    result: I64 = np.where(found, ordered[np.minimum(at.astype(np.int64), ordered.shape[0] - 1)], never)
    return result


def _periodic(line: I64, start_ns: int, stop_ns: int, rng: np.random.Generator) -> Records:
    """Background lines on no span, every 10-60 s per service."""
    period = (np.asarray(rng.uniform(10, 60, line.shape[0])) * 1e9).astype(np.int64)
    count = (stop_ns - start_ns) // period
    which = np.repeat(np.arange(line.shape[0]), count)
    tick = np.arange(which.shape[0]) - np.repeat(np.cumsum(count) - count, count)
    phase = rng.integers(0, period)[which]
    jitter = rng.normal(0, 0.05, which.shape[0]) * period[which]
    time = np.clip(start_ns + phase + tick * period[which] + jitter.astype(np.int64), start_ns, stop_ns - 1)
    return np.full(which.shape[0], -1, np.int64), line[which], time


def _batch(
    ct: CompiledTopology, lines: Lines, inv: Invocations, parts: list[Records], rng: np.random.Generator
) -> LogBatch:
    row, line, time = (np.concatenate(c) for c in zip(*parts, strict=True))
    order = np.argsort(time, kind="stable")
    row, line, time = row[order], line[order], time[order]
    spanned = row >= 0
    at = np.maximum(row, 0)
    elapsed = np.where(spanned, (time - inv.start_ns[at]) / 1e6, rng.lognormal(1.0, 0.5, row.shape[0]))
    bodies = lf.render(lines.format, lines.literals(ct, rng), line, elapsed, rng)
    return LogBatch(
        time_ns=time,
        service=lines.service[line].astype(np.int32),
        trace_id=np.where(spanned[:, None], inv.trace_id[at], np.uint64(0)),
        span_id=np.where(spanned, inv.span_id[at], np.uint64(0)),
        severity=lines.severity[line],
        body=tuple(bodies),
        strings=ct.services,
    )


def log_chunks(batch: LogBatch, start_ns: int, seconds: float) -> tuple[LogBatch, ...]:
    """Consecutive event-time chunks of a time-sorted batch (empty chunks left out)."""
    return tuple(
        LogBatch(
            time_ns=batch.time_ns[lo:hi],
            service=batch.service[lo:hi],
            trace_id=batch.trace_id[lo:hi],
            span_id=batch.span_id[lo:hi],
            severity=batch.severity[lo:hi],
            body=batch.body[lo:hi],
            strings=batch.strings,
        )
        for lo, hi in chunk_bounds(batch.time_ns, start_ns, seconds)
    )


def write_logs(
    ct: CompiledTopology, plan: FaultPlan, inv: Invocations, start_ns: int, stop_ns: int, rng: np.random.Generator
) -> LogBatch:
    """Every log record of the case, sorted by time."""
    habits = Habits.draw(ct, rng)
    table = LineTable()
    code_lines(ct, table, rng)
    error_line = per_op_lines(ct, table, habits.error_format)
    noise_line = per_op_lines(ct, table, habits.noise_format)
    slow_line = per_op_lines(ct, table, habits.slow_format)
    failed_first = call_failed_lines(ct, habits, table)
    evidence = fault_lines(ct, plan, table, rng)
    has_ops = np.isin(np.arange(len(ct.services)), ct.op_service[ct.op_kind == KIND_SERVER])
    periodic = np.flatnonzero(has_ops & (rng.random(len(ct.services)) < rng.uniform(0.1, 0.4)))
    periodic_line = table.add(
        np.full(periodic.shape[0], -1, np.int64),
        periodic,
        rng.choice(lf.ids(lf.PERIODIC), periodic.shape[0]),
        LineKind.PERIODIC,
    )
    lines = table.finish()
    parts: list[Records] = []
    row, line = _code_records(ct, lines, inv, rng)
    gone, changed = skipped(plan, evidence, lines, inv, row, line, rng)
    gone |= echo_skipped(ct, plan, lines, inv, row, line)
    row, line = row[~gone], line[~gone]
    parts.append((row, line, _at(inv, row, np.clip(lines.pos[line] + rng.normal(0, 0.01, row.shape[0]), 0, 1))))
    parts.append(fault_records(plan, evidence, lines, inv, changed, rng))
    service = ct.op_service[inv.op]
    logs = ct.op_kind[inv.op] == KIND_SERVER  # database calls write nothing
    n = len(inv)
    failed = np.flatnonzero(logs & inv.error & (rng.random(n) < habits.error_p[service]))
    parts.append((failed, error_line[inv.op[failed]], _at(inv, failed, rng.uniform(0.6, 1.0, failed.shape[0]))))
    noisy = np.flatnonzero(logs & (rng.random(n) < habits.noise_rate[service] * inv.hiccup))
    parts.append((noisy, noise_line[inv.op[noisy]], _at(inv, noisy, rng.random(noisy.shape[0]))))
    slow = np.flatnonzero(logs & (inv.end_ns - inv.start_ns > _slow_threshold(ct, habits, inv, plan.inject_ns)[inv.op]))
    parts.append((slow, slow_line[inv.op[slow]], inv.end_ns[slow]))
    parts.append(_caller_records(ct, habits, inv, failed_first, rng))
    parts.append(_periodic(periodic_line, start_ns, stop_ns, rng))
    return _batch(ct, lines, inv, parts, rng)
