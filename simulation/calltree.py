"""The first pass of trace generation: every request's call tree, expanded level by level (which
calls each operation makes, how many, transient failures retried, a load balancer's pick among
replicas) with a call_structure fault's changes (and their echo in a callee, `faults.Echo`) and
a caught exception's skipped calls, and which invocations each fault applies to."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rca.telemetry.faults import Fault
from simulation.conditions import NEUTRAL_TRANSIENT_FAILURES
from simulation.drifts import NO_DRIFTS, Drifts
from simulation.faults import CallChange, FaultPlan
from simulation.invocations import SEQ, Attempt
from simulation.topology import CompiledTopology

I64 = npt.NDArray[np.int64]
FAULT_RETRY = 0.85  # calls retried under a call_structure retry fault


@dataclass(frozen=True, slots=True)
class CallTree:
    """One row per operation invocation; rows of depth d are contiguous (`bounds[d]:bounds[d+1]`)."""

    op: I64
    parent: I64  # row, -1 for a root
    trace: I64
    seq: I64
    instance: I64
    attempt: I64
    changed: npt.NDArray[np.bool_]  # invocations a call_structure fault changes
    echoed: npt.NDArray[np.bool_]  # callee invocations the changed requests send down another branch
    caught: npt.NDArray[np.bool_]  # failing invocations whose handler catches the exception
    bounds: tuple[int, ...]


def _targets(ct: CompiledTopology, plan: FaultPlan) -> npt.NDArray[np.bool_]:
    """Per operation, whether the fault applies to it: a datastore's client calls, or the
    target service's own operations (its calls to datastores are the datastores' time)."""
    if plan.peer:
        return np.array([peer == plan.peer for peer in ct.op_peer])
    own = np.array([peer is None for peer in ct.op_peer])
    result: npt.NDArray[np.bool_] = (ct.op_service == plan.service_index) & own
    return result


def fault_hits(
    ct: CompiledTopology, plan: FaultPlan, op: I64, instance: I64, t_ns: I64, rng: np.random.Generator
) -> npt.NDArray[np.bool_]:
    """Rows the fault applies to: its target, during the fault, on the faulty replica (and for a
    call_structure fault, on the share of the operation's requests it changes)."""
    hit = _targets(ct, plan)[op] & plan.active(t_ns)
    if plan.instance >= 0:
        hit &= instance == plan.instance
    if plan.fault is Fault.CALL_STRUCTURE:
        hit &= (op == plan.operation) & (rng.random(op.shape[0]) < plan.magnitude)
    result: npt.NDArray[np.bool_] = hit
    return result


@dataclass(frozen=True, slots=True)
class _Skips:
    """Per invocation of a level, the calls a fault makes it skip: every call from `cut` on (an
    early return, a caught exception) and call `missing`; `retried` ones retry the plan's call."""

    cut: I64
    missing: I64
    retried: npt.NDArray[np.bool_]

    @staticmethod
    def of(
        structure: FaultPlan | None,
        changed: npt.NDArray[np.bool_],
        caught: FaultPlan | None,
        caught_rows: npt.NDArray[np.bool_],
    ) -> _Skips:
        k = changed.shape[0]
        cut, missing = np.full(k, np.iinfo(np.int64).max), np.full(k, -1, np.int64)
        change = structure.change if structure else CallChange.NONE
        if structure is not None and change is CallChange.ABORT:
            cut[changed] = structure.call
        if structure is not None and change is CallChange.MISSING:
            missing[changed] = structure.call
        if caught is not None:
            cut[caught_rows] = np.minimum(cut[caught_rows], caught.call)
        return _Skips(cut, missing, changed if change is CallChange.RETRY else np.zeros(k, np.bool_))


def _calls(
    ct: CompiledTopology,
    plan: FaultPlan | None,
    rng: np.random.Generator,
    ops: I64,
    attempt: I64,
    skips: _Skips,
    echoed: npt.NDArray[np.bool_],
    transient_failures: float,
    drifts: Drifts,
    t_ns: I64,
) -> tuple[I64, I64, I64, I64]:
    """The calls a level of invocations (at `t_ns`) makes: (caller index in level, callee op,
    seq, attempt); `plan` is the case's call_structure fault, if any, `skips` what the faults
    take out and `echoed` the invocations its echo changes; `transient_failures` of remote calls
    fail at first and are retried; `drifts` change how often some calls are made."""
    out: list[tuple[I64, I64, I64, I64]] = []
    order = np.argsort(ops, kind="stable")
    retry_call = plan.call if plan and plan.change is CallChange.RETRY else -1
    echo = plan.echo if plan else None
    for group in np.split(order, np.flatnonzero(np.diff(ops[order])) + 1):
        op = int(ops[group[0]])
        live = group[attempt[group] != Attempt.FAILED]
        k = live.shape[0]
        cut, missing, retried, echoes = skips.cut[live], skips.missing[live], skips.retried[live], echoed[live]
        draws: dict[int, npt.NDArray[np.float64]] = {}  # per exclusive group: one draw per invocation
        taken: dict[int, float] = {}  # and the probability its earlier calls took
        for ci, (callee_f, p, max_count, exclusive) in enumerate(ct.calls[op].tolist()):
            callee = int(callee_f)
            prob = np.where((ci >= cut) | (ci == missing), 0.0, p)
            if echo is not None and op == echo.operation and ci == echo.call:
                prob[echoes] = 0.0
            drifted = drifts.call_factor(op, ci, t_ns[live])
            if drifted is not None:
                prob = prob * drifted
            if exclusive:
                draw, below = draws.setdefault(int(exclusive), rng.random(k)), taken.get(int(exclusive), 0.0)
                made = (draw >= below) & (draw < below + prob)
                taken[int(exclusive)] = below + p
            else:
                made = rng.random(k) < prob
            count = np.where(made, rng.integers(1, int(max_count) + 1, k), 0)
            failed = np.zeros(k, np.int64)
            timed = np.zeros(k, np.int64)
            if ct.op_service[callee] != ct.op_service[op]:
                failed = (made & (rng.random(k) < transient_failures)).astype(np.int64)
                if ci == retry_call:
                    timed = np.where(made & retried & (rng.random(k) < FAULT_RETRY), rng.integers(2, 4, k), 0)
            total = count + failed + timed
            caller = np.repeat(live, total)
            position = np.arange(caller.shape[0]) - np.repeat(np.cumsum(total) - total, total)
            t_rep, f_rep = np.repeat(timed, total), np.repeat(failed, total)
            kind = np.where(position < t_rep, Attempt.TIMED_OUT, np.where(position < t_rep + f_rep, Attempt.FAILED, 0))
            out.append((caller, np.full(caller.shape[0], callee), ci * SEQ + position, kind.astype(np.int64)))
    if not out:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty, empty
    callers, callees, seqs, kinds = (np.concatenate(c) for c in zip(*out, strict=True))
    return callers, callees, seqs, kinds


def expand(
    ct: CompiledTopology,
    plan: FaultPlan | None,
    rng: np.random.Generator,
    roots: I64,
    t_root: I64,
    transient_failures: float = NEUTRAL_TRANSIENT_FAILURES,
    caught: FaultPlan | None = None,
    drifts: Drifts = NO_DRIFTS,
) -> CallTree:
    """The call trees of requests arriving at `t_root`; `plan` is the call_structure fault, if any;
    `transient_failures` of remote calls fail at first and are retried; `caught` is an errors
    fault whose handler catches its exception (`FaultPlan.caught`), if any; `drifts` change how
    often some calls are made."""
    n = roots.shape[0]
    level = {
        "op": roots,
        "parent": np.full(n, -1, np.int64),
        "trace": np.arange(n, dtype=np.int64),
        "seq": np.zeros(n, np.int64),
        "attempt": np.zeros(n, np.int64),
    }
    columns: dict[str, list[npt.NDArray[np.generic]]] = {
        k: [] for k in (*level, "instance", "changed", "echoed", "caught")
    }
    bounds = [0]
    from_changed = np.zeros(n, np.bool_)  # called by an invocation the fault changed
    while level["op"].shape[0]:
        level["instance"] = rng.integers(0, ct.instances[ct.op_service[level["op"]]])
        for key, values in level.items():
            columns[key].append(values)
        changed = np.zeros(level["op"].shape[0], np.bool_)
        if plan is not None:
            changed = fault_hits(ct, plan, level["op"], level["instance"], t_root[level["trace"]], rng)
        columns["changed"].append(changed)
        echoed = np.zeros(level["op"].shape[0], np.bool_)
        if plan is not None and plan.echo is not None:
            echoed = from_changed & (level["op"] == plan.echo.operation)
            echoed &= rng.random(echoed.shape[0]) < plan.echo.share
        columns["echoed"].append(echoed)
        caught_rows = np.zeros(level["op"].shape[0], np.bool_)
        if caught is not None:
            caught_rows = fault_hits(ct, caught, level["op"], level["instance"], t_root[level["trace"]], rng)
            caught_rows &= (level["op"] == caught.operation) & (
                rng.random(caught_rows.shape[0]) < caught.magnitude * caught.caught
            )
        columns["caught"].append(caught_rows)
        skips = _Skips.of(plan, changed, caught, caught_rows)
        caller, callee, seq, attempt = _calls(
            ct,
            plan,
            rng,
            level["op"],
            level["attempt"],
            skips,
            echoed,
            transient_failures,
            drifts,
            t_root[level["trace"]],
        )
        from_changed = changed[caller]
        start = bounds[-1]
        bounds.append(start + level["op"].shape[0])
        trace = level["trace"][caller]
        level = {"op": callee, "parent": start + caller, "trace": trace, "seq": seq, "attempt": attempt}
    c = {k: np.concatenate(v) for k, v in columns.items()}
    tree = (c["op"], c["parent"], c["trace"], c["seq"], c["instance"], c["attempt"], c["changed"], c["echoed"])
    return CallTree(*tree, c["caught"], tuple(bounds))
