"""Vectorised trace generation over a compiled topology.

Three passes over all requests at once: expand the call trees level by level (`calltree`: which
calls are made, retries, fan-out), compute durations bottom-up (self time + children, sequential or
parallel, network time on remote calls; errors propagate up), then place start times top-down
(children inside their parents). Each remote call is a CLIENT span in the caller (with
`peer.service`) around the callee's SERVER span; LLM engine requests get their worker spans from
`llm.sample_requests`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from rca.telemetry.faults import Fault
from rca.telemetry.spans import KIND_CLIENT, KIND_SERVER, SpanBatch
from simulation.attributes import NcclSpans
from simulation.calltree import CallTree, expand, fault_hits
from simulation.columns import SpanBlocks
from simulation.conditions import Conditions
from simulation.drifts import NO_DRIFTS, Drifts
from simulation.engines import (
    EngineRequests,
    add_worker_spans,
    replica_instances,
    request_signals,
    sample_engines,
    worker_span_count,
)
from simulation.faults import LLM_FAULTS, CallChange, FaultPlan, Mode
from simulation.invocations import Attempt, Invocations
from simulation.topology import CompiledTopology
from simulation.traffic import Hiccups, Traffic

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


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
    drifts: Drifts = NO_DRIFTS,
) -> tuple[SpanBatch, Invocations, NcclSpans, list[EngineRequests]]:
    """Every span of the case (its roots `plans`, its healthy levels `conditions`, by default the
    topology as written, and the unrelated services' `drifts`), sorted by start time, the
    invocations they came from, the NCCL spans' communicators and ranks, and each engine
    replica's requests (the per-rank truth)."""
    conditions = conditions or Conditions.neutral(ct)
    arrivals = traffic.arrivals(rng)
    roots = rng.choice(ct.entry_ops, size=arrivals.shape[0], p=ct.entry_weights)
    structure = next((p for p in plans if p.fault is Fault.CALL_STRUCTURE), None)
    caught = next((p for p in plans if p.fault is Fault.ERRORS and p.caught > 0), None)
    tree = expand(ct, structure, rng, roots, arrivals, conditions.transient_failures, caught, drifts)
    op, parent, n = tree.op, tree.parent, tree.op.shape[0]
    service = ct.op_service[op]
    t_root = arrivals[tree.trace]
    hits = [tree.changed if p is structure else fault_hits(ct, p, op, tree.instance, t_root, rng) for p in plans]
    load = traffic.load(t_root)
    hiccup = hiccups.factors(service, t_root)
    slow = hiccup * drifts.slowdown(service, t_root)
    failing = np.zeros(n, np.bool_)
    touched = np.zeros(n, np.bool_)  # what a non-LLM root applies to
    for plan, hit in zip(plans, hits, strict=True):
        touched |= hit & (plan.fault not in LLM_FAULTS)
        if plan.fault is Fault.LATENCY:
            slow *= np.where(hit, plan.magnitude * rng.lognormal(0, 0.2, n), 1.0)
        if plan.fault is Fault.ERRORS:
            failing |= hit & (rng.random(n) < plan.magnitude)
    failing &= ~tree.caught  # the handler returned a fallback
    spread = np.exp(ct.op_sigma[op] * conditions.sigma_scale * rng.standard_normal(n))
    self_s = ct.op_median[op] * conditions.op_scale[op] * spread * load**conditions.load_exponent * slow
    error = rng.random(n) < ct.op_error[op] * conditions.error_scale * np.where(hiccup > 1, 3.0, 1.0)
    error |= failing | drifts.failed(service, t_root, rng)
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
    net_in = np.where(remote, conditions.network_s * rng.lognormal(0, 0.5, n), 0.0)
    net_out = np.where(remote, conditions.network_s * rng.lognormal(0, 0.5, n), 0.0)
    for plan, hit in zip(plans, hits, strict=True):  # a starved caller is slow to send and to read its calls
        if plan.mode is Mode.STARVED:
            starved = remote & hit[np.maximum(parent, 0)]
            factor = np.where(starved, plan.magnitude * rng.lognormal(0, 0.2, n), 1.0)
            net_in, net_out = net_in * factor, net_out * factor
    duration, occupied = _durations(ct, tree, self_s, net_in + net_out, error, conditions.op_propagation, rng)
    pre = self_s * rng.uniform(0.15, 0.7, n)
    client_s, server_s = _starts(ct, tree, pre, occupied, net_in)
    columns = SpanBlocks(replica_instances(ct.topology.engines))
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
        *(op, parent, tree.seq, tree.attempt, trace_ids[tree.trace], span_id, start, end),
        *(error, failing, tree.caught, touched, tree.echoed, hiccup),
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
    ids = _ids(rng, worker_span_count(engines))
    nccl = add_worker_spans(columns, engines, start, trace_ids[tree.trace], span_id, ids)
    return columns.build(), invocations, nccl, engines


def _durations(
    ct: CompiledTopology,
    tree: CallTree,
    self_s: F64,
    network: F64,
    error: npt.NDArray[np.bool_],
    propagation: F64,
    rng: np.random.Generator,
) -> tuple[F64, F64]:
    """Bottom-up: each span's duration, and the time its call occupies the caller (a timed-out
    attempt only until the deadline). Errors of final attempts propagate to callers (in place), at
    each calling operation's `propagation` chance."""
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
        fails = error[rows] & (tree.attempt[rows] == Attempt.OK) & (rng.random(p.shape[0]) < propagation[tree.op[p]])
        error[p[fails]] = True
    return duration, occupied


def _starts(ct: CompiledTopology, tree: CallTree, pre: F64, occupied: F64, net_in: F64) -> tuple[F64, F64]:
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
