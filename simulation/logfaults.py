"""A fault's own log evidence, as real code writes it; its size drawn per seed, subtle to gross.

`errors`: the faulty service logs an exception (one or two new ERROR formats, some with a stack
trace) on a share of its failing requests; where its handler catches the exception
(`FaultPlan.caught`), the catch block logs it, at ERROR or WARN, on every request it catches, and
the handler's code after the throw is not run. `call_structure` (missing call, early return): on a
share of the changed requests the lines of the skipped code path are not written, and/or a new
INFO/WARN line says why; where the changed requests send a callee down another branch
(`faults.Echo`), the callee's lines around the call it skips are not written either. Other
faults write nothing of their own here; their slowness shows only where a service's slow-request
logger catches it, and failed calls in callers' logs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rca.telemetry.faults import Fault
from rca.telemetry.spans import KIND_SERVER
from simulation import logformats as lf
from simulation.faults import CallChange, FaultPlan
from simulation.invocations import Invocations
from simulation.logcode import LineKind, Lines, LineTable
from simulation.topology import CompiledTopology

I64 = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]
_CODE_KINDS = (LineKind.ENTRY, LineKind.BRANCH, LineKind.TAIL, LineKind.AFTER_CALL)


@dataclass(frozen=True, slots=True)
class FaultLogs:
    """The drawn evidence: `lines` are its new lines ((operation, variant) rows for an exception,
    one for a call_structure reason), written on `share` of the requests it applies to."""

    share: float
    lines: npt.NDArray[np.int64]  # (operations of the table, variants); -1 where none
    segment: tuple[float, float] = (np.inf, np.inf)  # call_structure: the skipped code, as span fractions
    announce: bool = False  # call_structure: the new line is written (else only the lines vanish)
    caught_line: int = -1  # errors: the catch block's line, where the handler catches

    @staticmethod
    def none() -> FaultLogs:
        return FaultLogs(0.0, np.full((0, 0), -1, np.int64))


def fault_lines(ct: CompiledTopology, plan: FaultPlan, table: LineTable, rng: np.random.Generator) -> FaultLogs:
    """Draws the fault's evidence and adds its lines to `table`."""
    n_ops = len(ct.calls)
    if plan.fault is Fault.ERRORS:
        variants = rng.choice(lf.ids(lf.EXCEPTIONS), int(rng.integers(1, 3)), replace=False)
        if plan.peer:  # a failing datastore: the operations calling it log the client's exception
            calls = [ct.calls[op][:, 0].astype(np.int64).tolist() for op in range(n_ops)]
            ops = np.array([op for op in range(n_ops) if any(ct.op_peer[c] == plan.peer for c in calls[op])], np.int64)
        else:
            ops = np.flatnonzero((ct.op_service == plan.service_index) & (ct.op_kind == KIND_SERVER))
        op, fmt = np.repeat(ops, variants.shape[0]), np.tile(variants, ops.shape[0])
        lines = np.full((n_ops, variants.shape[0]), -1, np.int64)
        lines[ops] = table.add(op, ct.op_service[op], fmt, LineKind.EXTRA).reshape(ops.shape[0], -1)
        share = float(rng.uniform(0.05, 1.0))
        if plan.caught <= 0:
            return FaultLogs(share, lines)
        segment = _call_segment(ct.calls[plan.operation].shape[0], plan.call, abort=True)
        handler = np.array([plan.operation], np.int64)
        level = int(rng.choice([lf.ERROR, lf.WARN]))
        caught = table.add(
            handler,
            ct.op_service[handler],
            rng.choice(lf.ids(lf.CAUGHT), 1),
            LineKind.EXTRA,
            pos=segment[0],
            severity=level,
        )
        return FaultLogs(share, lines, segment, caught_line=int(caught[0]))
    if plan.change not in (CallChange.MISSING, CallChange.ABORT):
        return FaultLogs.none()
    segment = _call_segment(ct.calls[plan.operation].shape[0], plan.call, plan.change is CallChange.ABORT)
    first = segment[0]
    pool = lf.EARLY_RETURN if plan.change is CallChange.ABORT else lf.SKIPPED_CALL
    op = np.array([plan.operation], np.int64)
    line = table.add(
        op,
        ct.op_service[op],
        rng.choice(lf.ids(pool), 1),
        LineKind.EXTRA,
        pos=first,
        callee=int(ct.calls[plan.operation][plan.call, 0]),
        reason=int(rng.integers(len(lf.REASONS))),
        severity=int(rng.choice([lf.DEBUG, lf.INFO, lf.INFO, lf.WARN])),
    )
    lines = np.full((n_ops, 1), -1, np.int64)
    lines[plan.operation] = line
    return FaultLogs(float(rng.uniform(0.15, 1.0)), lines, segment, bool(rng.random() < 0.6))


def _call_segment(calls: int, call: int, abort: bool) -> tuple[float, float]:
    """Where the code skipped with call `call` of `calls` lies, as span fractions (an early return
    skips the rest)."""
    return (call + 0.5) / (calls + 1), np.inf if abort else (call + 1.5) / (calls + 1)


def _code_between(lines: Lines, op: int, segment: tuple[float, float]) -> Bools:
    """The code lines of operation `op` written within `segment` (span fractions)."""
    lo, hi = segment
    inside: Bools = (lines.op == op) & (lines.pos >= lo) & (lines.pos < hi) & np.isin(lines.kind, _CODE_KINDS)
    return inside


def _changed(plan: FaultPlan, inv: Invocations, evidence: FaultLogs, rng: np.random.Generator) -> Bools:
    """The requests a call_structure fault's log evidence shows on (an errors fault's: those whose
    exception its handler caught)."""
    if plan.fault is Fault.ERRORS:
        return inv.caught
    changed: Bools = inv.hit & (inv.op == plan.operation) & (rng.random(len(inv)) < evidence.share)
    return changed


def skipped(
    plan: FaultPlan,
    evidence: FaultLogs,
    lines: Lines,
    inv: Invocations,
    row: I64,
    line: I64,
    rng: np.random.Generator,
) -> tuple[Bools, Bools]:
    """Which code-line records (`row`, `line`) the skipped code path no longer writes, and the
    requests the fault shows on (for the new line)."""
    if not np.isfinite(evidence.segment[0]):
        return np.zeros(row.shape[0], np.bool_), np.zeros(len(inv), np.bool_)
    changed = _changed(plan, inv, evidence, rng)
    return changed[row] & _code_between(lines, plan.operation, evidence.segment)[line], changed


def echo_skipped(ct: CompiledTopology, plan: FaultPlan, lines: Lines, inv: Invocations, row: I64, line: I64) -> Bools:
    """Which code-line records the echo's callee no longer writes: the code around the call it
    skips, on the invocations the changed requests sent down another branch."""
    if plan.echo is None:
        return np.zeros(row.shape[0], np.bool_)
    echo = plan.echo
    segment = _call_segment(len(ct.calls[echo.operation]), echo.call, abort=False)
    gone: Bools = inv.echoed[row] & _code_between(lines, echo.operation, segment)[line]
    return gone


def fault_records(
    plan: FaultPlan,
    evidence: FaultLogs,
    lines: Lines,
    inv: Invocations,
    changed: Bools,
    rng: np.random.Generator,
) -> tuple[I64, I64, I64]:
    """The fault's new records: (invocation row, line, time)."""
    if plan.fault is Fault.ERRORS:
        rows = np.flatnonzero(inv.failing & (rng.random(len(inv)) < evidence.share))
        if plan.peer:  # the failed datastore call's caller logs it
            rows = inv.parent[rows]
        variant = rng.integers(0, evidence.lines.shape[1], rows.shape[0])
        line = evidence.lines[inv.op[rows], variant]
        rows, line = rows[line >= 0], line[line >= 0]
        frac = rng.uniform(0.2, 1.0, rows.shape[0])
        if evidence.caught_line >= 0:
            handled = np.flatnonzero(changed)
            rows, line = (
                np.concatenate([rows, handled]),
                np.concatenate([line, np.full(handled.shape[0], evidence.caught_line)]),
            )
            frac = np.concatenate([frac, np.full(handled.shape[0], evidence.segment[0])])
    elif changed.any():
        vanishes = bool(_code_between(lines, plan.operation, evidence.segment).any())
        rows = np.flatnonzero(changed) if evidence.announce or not vanishes else np.zeros(0, np.int64)
        line = np.full(rows.shape[0], evidence.lines[plan.operation, 0], np.int64)
        frac = np.full(rows.shape[0], evidence.segment[0])
    else:
        rows = line = np.zeros(0, np.int64)
        frac = np.zeros(0)
    duration = inv.end_ns[rows] - inv.start_ns[rows]
    return rows, line, inv.start_ns[rows] + (frac * duration).astype(np.int64)
