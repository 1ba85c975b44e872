"""Vectorised trace generation over a compiled topology.

Three passes over all requests at once: expand the call trees level by level (which calls are
made, retries, fan-out), compute durations bottom-up (self time + children, sequential or
parallel, network time on remote calls; errors propagate up), then place start times top-down
(children inside their parents). Each remote call is a CLIENT span in the caller (with
`peer.service`) around the callee's SERVER span; LLM engine requests get their worker spans from
`llm.sample_requests`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rca.ranking import Fault
from rca.simulation.columns import SpanColumns
from rca.simulation.conditions import Conditions
from rca.simulation.engines import add_worker_spans, request_signals, sample_engines, worker_span_count
from rca.simulation.faults import LLM_FAULTS, CallChange, FaultPlan
from rca.simulation.invocations import SEQ, Attempt, Invocations
from rca.simulation.topology import CompiledTopology
from rca.simulation.traffic import Hiccups, Traffic
from rca.spans import KIND_CLIENT, KIND_SERVER, SpanBatch

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
RETRY_BASE = 0.003  # remote calls whose first attempt fails transiently and is retried
FAULT_RETRY = 0.85  # calls retried under a call_structure retry fault
ERROR_PROPAGATION = 0.5  # chance a failed call fails its caller's span too
LOAD_EXPONENT = 0.3  # self time grows with load
NETWORK_S = 3e-4  # median one-way network time of a remote call


@dataclass(frozen=True, slots=True)
class _Tree:
    """One row per operation invocation; rows of depth d are contiguous (`bounds[d]:bounds[d+1]`)."""

    op: I64
    parent: I64  # row, -1 for a root
    trace: I64
    seq: I64
    instance: I64
    attempt: I64
    changed: npt.NDArray[np.bool_]  # invocations a call_structure fault changes
    bounds: tuple[int, ...]


def _targets(ct: CompiledTopology, plan: FaultPlan) -> npt.NDArray[np.bool_]:
    """Per operation, whether the fault applies to it: a datastore's client calls, or the
    target service's own operations (its calls to datastores are the datastores' time)."""
    if plan.peer:
        return np.array([peer == plan.peer for peer in ct.op_peer])
    own = np.array([peer is None for peer in ct.op_peer])
    result: npt.NDArray[np.bool_] = (ct.op_service == plan.service_index) & own
    return result


def _hit(
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


def _calls(
    ct: CompiledTopology,
    plan: FaultPlan | None,
    rng: np.random.Generator,
    ops: I64,
    attempt: I64,
    changed: npt.NDArray[np.bool_],
) -> tuple[I64, I64, I64, I64]:
    """The calls a level of invocations makes: (caller index in level, callee op, seq, attempt);
    `plan` is the case's call_structure fault, if any, `changed` the invocations it changes."""
    out: list[tuple[I64, I64, I64, I64]] = []
    order = np.argsort(ops, kind="stable")
    change, changed_call = (plan.change, plan.call) if plan else (CallChange.NONE, -1)
    for group in np.split(order, np.flatnonzero(np.diff(ops[order])) + 1):
        op = int(ops[group[0]])
        live = group[attempt[group] != Attempt.FAILED]
        k = live.shape[0]
        changes = changed[live]
        draws: dict[int, npt.NDArray[np.float64]] = {}  # per exclusive group: one draw per invocation
        taken: dict[int, float] = {}  # and the probability its earlier calls took
        for ci, (callee_f, p, max_count, exclusive) in enumerate(ct.calls[op].tolist()):
            callee = int(callee_f)
            prob = np.full(k, p)
            skipped = (change is CallChange.MISSING and ci == changed_call) or (
                change is CallChange.ABORT and ci >= changed_call
            )
            if skipped:
                prob[changes] = 0.0
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
                failed = (made & (rng.random(k) < RETRY_BASE)).astype(np.int64)
                if change is CallChange.RETRY and ci == changed_call:
                    timed = np.where(made & changes & (rng.random(k) < FAULT_RETRY), rng.integers(2, 4, k), 0)
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


def _expand(ct: CompiledTopology, plan: FaultPlan | None, rng: np.random.Generator, roots: I64, t_root: I64) -> _Tree:
    """The call trees of requests arriving at `t_root`; `plan` is the call_structure fault, if any."""
    n = roots.shape[0]
    level = {
        "op": roots,
        "parent": np.full(n, -1, np.int64),
        "trace": np.arange(n, dtype=np.int64),
        "seq": np.zeros(n, np.int64),
        "attempt": np.zeros(n, np.int64),
    }
    columns: dict[str, list[npt.NDArray[np.generic]]] = {k: [] for k in (*level, "instance", "changed")}
    bounds = [0]
    while level["op"].shape[0]:
        level["instance"] = rng.integers(0, ct.instances[ct.op_service[level["op"]]])
        for key, values in level.items():
            columns[key].append(values)
        changed = np.zeros(level["op"].shape[0], np.bool_)
        if plan is not None:
            changed = _hit(ct, plan, level["op"], level["instance"], t_root[level["trace"]], rng)
        columns["changed"].append(changed)
        caller, callee, seq, attempt = _calls(ct, plan, rng, level["op"], level["attempt"], changed)
        start = bounds[-1]
        bounds.append(start + level["op"].shape[0])
        trace = level["trace"][caller]
        level = {"op": callee, "parent": start + caller, "trace": trace, "seq": seq, "attempt": attempt}
    c = {k: np.concatenate(v) for k, v in columns.items()}
    return _Tree(c["op"], c["parent"], c["trace"], c["seq"], c["instance"], c["attempt"], c["changed"], tuple(bounds))


def _ids(rng: np.random.Generator, shape: int | tuple[int, int]) -> npt.NDArray[np.uint64]:
    result: npt.NDArray[np.uint64] = rng.integers(1, np.iinfo(np.uint64).max, shape, dtype=np.uint64, endpoint=True)
    return result


def generate(
    ct: CompiledTopology,
    plan: FaultPlan,
    traffic: Traffic,
    hiccups: Hiccups,
    rng: np.random.Generator,
    conditions: Conditions | None = None,
) -> SpanBatch:
    """Every span of a one-root case, sorted by start time."""
    return generate_invocations(ct, (plan,), traffic, hiccups, rng, conditions)[0]


def generate_invocations(
    ct: CompiledTopology,
    plans: Sequence[FaultPlan],
    traffic: Traffic,
    hiccups: Hiccups,
    rng: np.random.Generator,
    conditions: Conditions | None = None,
) -> tuple[SpanBatch, Invocations]:
    """Every span of the case (its roots `plans`, its healthy levels `conditions`, by default the
    topology as written), sorted by start time, and the invocations they came from."""
    conditions = conditions or Conditions.neutral(ct)
    arrivals = traffic.arrivals(rng)
    roots = rng.choice(ct.entry_ops, size=arrivals.shape[0], p=ct.entry_weights)
    structure = next((p for p in plans if p.fault is Fault.CALL_STRUCTURE), None)
    tree = _expand(ct, structure, rng, roots, arrivals)
    op, parent, n = tree.op, tree.parent, tree.op.shape[0]
    service = ct.op_service[op]
    t_root = arrivals[tree.trace]
    hits = [tree.changed if p is structure else _hit(ct, p, op, tree.instance, t_root, rng) for p in plans]
    load = traffic.load(t_root)
    hiccup = hiccups.factors(service, t_root)
    slow = hiccup.copy()
    failing = np.zeros(n, np.bool_)
    touched = np.zeros(n, np.bool_)  # what a non-LLM root applies to
    for plan, hit in zip(plans, hits, strict=True):
        touched |= hit & (plan.fault not in LLM_FAULTS)
        if plan.fault is Fault.LATENCY:
            slow *= np.where(hit, plan.magnitude * rng.lognormal(0, 0.2, n), 1.0)
        if plan.fault is Fault.ERRORS:
            failing |= hit & (rng.random(n) < plan.magnitude)
    spread = np.exp(ct.op_sigma[op] * conditions.sigma_scale * rng.standard_normal(n))
    self_s = ct.op_median[op] * conditions.op_scale[op] * spread * load**LOAD_EXPONENT * slow
    error = rng.random(n) < ct.op_error[op] * conditions.error_scale * np.where(hiccup > 1, 3.0, 1.0)
    error |= failing
    self_s = np.where(failing, self_s * rng.uniform(0.5, 1.0, n), self_s)
    if structure is not None and structure.change is CallChange.ABORT:
        error |= tree.changed & (rng.random(n) < 0.5)
        self_s = np.where(tree.changed, self_s * 0.6, self_s)
    failed = tree.attempt == Attempt.FAILED
    error |= failed
    self_s = np.where(failed, self_s * 0.3, self_s)
    engines = sample_engines(ct, conditions, plans, op, t_root, load, slow, rng)
    for e in engines:
        self_s[e.rows] = e.requests.duration_s
    remote = (parent >= 0) & (service != service[np.maximum(parent, 0)])
    net_in = np.where(remote, NETWORK_S * rng.lognormal(0, 0.5, n), 0.0)
    net_out = np.where(remote, NETWORK_S * rng.lognormal(0, 0.5, n), 0.0)
    duration, occupied = _durations(ct, tree, self_s, net_in + net_out, error, rng)
    pre = self_s * rng.uniform(0.15, 0.7, n)
    client_s, server_s = _starts(ct, tree, pre, occupied, net_in)
    columns = SpanColumns()
    op_names = columns.intern([o.name for o in ct.topology.operations])
    services = columns.intern(list(ct.services))
    peers = np.array([-1 if o.peer is None else int(columns.intern([o.peer])[0]) for o in ct.topology.operations])
    trace_ids = _ids(rng, (arrivals.shape[0], 2))
    span_id = _ids(rng, n)
    client_id = np.where(remote, _ids(rng, n), np.uint64(0))
    parent_span = np.where(parent >= 0, span_id[np.maximum(parent, 0)], np.uint64(0))
    start = t_root + np.round(server_s * 1e9).astype(np.int64)
    end = start + np.round(duration * 1e9).astype(np.int64)
    columns.add(
        {
            "trace": trace_ids[tree.trace],
            "span": span_id,
            "parent": np.where(remote, client_id, parent_span),
            "service": services[service],
            "operation": op_names[op],
            "peer": peers[op],
            "resource": np.full(n, -1),
            "kind": np.where(parent < 0, KIND_SERVER, ct.op_kind[op]),
            "start": start,
            "end": end,
            "error": error,
        },
        request_signals(engines, n),
    )
    invocations = Invocations(
        op, parent, tree.seq, tree.attempt, trace_ids[tree.trace], span_id, start, end, error, failing, touched, hiccup
    )
    r = np.flatnonzero(remote)
    client_start = t_root[r] + np.round(client_s[r] * 1e9).astype(np.int64)
    columns.add(
        {
            "trace": trace_ids[tree.trace[r]],
            "span": client_id[r],
            "parent": parent_span[r],
            "service": services[service[parent[r]]],
            "operation": op_names[op[r]],
            "peer": services[service[r]],
            "resource": np.full(r.shape[0], -1),
            "kind": np.full(r.shape[0], KIND_CLIENT),
            "start": client_start,
            "end": client_start + np.round(occupied[r] * 1e9).astype(np.int64),
            "error": error[r] | (tree.attempt[r] != Attempt.OK),
        }
    )
    add_worker_spans(columns, engines, start, trace_ids[tree.trace], span_id, _ids(rng, worker_span_count(engines)))
    return columns.build(), invocations


def _durations(
    ct: CompiledTopology,
    tree: _Tree,
    self_s: F64,
    network: F64,
    error: npt.NDArray[np.bool_],
    rng: np.random.Generator,
) -> tuple[F64, F64]:
    """Bottom-up: each span's duration, and the time its call occupies the caller (a timed-out
    attempt only until the deadline). Errors of final attempts propagate to callers (in place)."""
    n = int(self_s.shape[0])
    duration = self_s.copy()
    occupied = np.zeros(n)
    child_sum, child_max = np.zeros(n), np.zeros(n)
    deadline: F64 = rng.uniform(0.3, 0.8, n)
    parallel = ct.op_parallel[tree.op]
    b = tree.bounds
    for d in range(len(b) - 2, -1, -1):
        rows = slice(b[d], b[d + 1])
        duration[rows] = self_s[rows] + child_sum[rows] + child_max[rows]
        if d == 0:
            break
        p = tree.parent[rows]
        occ = np.where(tree.attempt[rows] == Attempt.TIMED_OUT, deadline[rows], 1.0) * duration[rows] + network[rows]
        occupied[rows] = occ
        par = parallel[p]
        np.add.at(child_sum, p[~par], occ[~par])
        np.maximum.at(child_max, p[par], occ[par])
        fails = error[rows] & (tree.attempt[rows] == Attempt.OK) & (rng.random(p.shape[0]) < ERROR_PROPAGATION)
        error[p[fails]] = True
    return duration, occupied


def _starts(ct: CompiledTopology, tree: _Tree, pre: F64, occupied: F64, net_in: F64) -> tuple[F64, F64]:
    """Top-down: client and server start of each row, seconds after its trace's arrival.
    Sequential callers run their calls back to back after `pre`; parallel ones all at once."""
    n = int(pre.shape[0])
    b = tree.bounds
    offset = np.zeros(n)
    rows = np.arange(b[1], n)
    if rows.shape[0]:
        order = rows[np.lexsort((tree.seq[rows], tree.parent[rows]))]
        p, occ = tree.parent[order], occupied[order]
        total = np.cumsum(occ)
        first = np.maximum.accumulate(np.where(np.r_[True, p[1:] != p[:-1]], np.arange(order.shape[0]), 0))
        before = total - occ - (total[first] - occ[first])
        offset[order] = np.where(ct.op_parallel[tree.op[p]], 0.0, before)
    client, server = np.zeros(n), np.zeros(n)
    for d in range(1, len(b) - 1):
        rows_d = slice(b[d], b[d + 1])
        p = tree.parent[rows_d]
        client[rows_d] = server[p] + pre[p] + offset[rows_d]
        server[rows_d] = client[rows_d] + net_in[rows_d]
    return client, server
