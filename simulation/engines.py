"""The LLM engine replicas inside a case: which invocations are each replica's `llm_request`, the
lockstep model of its tensor-parallel group (`llm.sample_requests`), and its workers' spans."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rca.telemetry.conventions import NCCL_PREFIX
from rca.telemetry.spans import KIND_INTERNAL, Signal
from simulation.attributes import NcclSpans
from simulation.columns import SpanBlocks
from simulation.conditions import Conditions
from simulation.faults import LLM_FAULTS, FaultPlan
from simulation.llm import LlmRequests, sample_requests
from simulation.topology import CompiledTopology, LlmCluster, Role

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


NCCL_OPS = ("AllReduce", "Send")


@dataclass(frozen=True, slots=True)
class EngineRequests:
    rows: I64  # invocation rows of this replica's `llm_request` spans
    replica: int
    cluster: LlmCluster
    requests: LlmRequests


def replica_instances(clusters: Sequence[LlmCluster]) -> dict[str, str]:
    """Each replica's engine and worker services mapped to its host: the instance their spans
    carry, which tells replicas apart where they share service names (`replica_names`)."""
    return {service: c.host for c in clusters for service in (c.engine, *c.workers)}


def sample_engines(
    ct: CompiledTopology,
    conditions: Conditions,
    plans: Sequence[FaultPlan],
    op: I64,
    t_root: I64,
    load: F64,
    slow: F64,
    rng: np.random.Generator,
) -> list[EngineRequests]:
    """Each replica's requests; an LLM fault applies to its own replica only."""
    llm_plan = next((p for p in plans if p.fault in LLM_FAULTS), None)
    out = []
    is_request = ct.op_role[op] == Role.LLM_REQUEST
    for replica, cluster in enumerate(ct.topology.engines):
        rows = np.flatnonzero(is_request & (ct.op_service[op] == ct.service_index[cluster.engine]))
        if rows.shape[0] == 0 or conditions.serving is None:
            continue
        plan = llm_plan if llm_plan is not None and llm_plan.replica == replica else None
        active = plan.active(t_root[rows]) if plan is not None else np.zeros(rows.shape[0], np.bool_)
        ranks = conditions.ranks[replica]
        requests = sample_requests(conditions.serving, ranks, plan, active, load[rows], slow[rows], rng)
        out.append(EngineRequests(rows, replica, cluster, requests))
    return out


def request_signals(engines: Sequence[EngineRequests], n: int) -> dict[Signal, F64]:
    """The `llm_request` spans' signal columns over all `n` invocations (NaN elsewhere)."""
    signals: dict[Signal, F64] = {}
    for e in engines:
        for signal, values in e.requests.signals.items():
            signals.setdefault(signal, np.full(n, np.nan))[e.rows] = values
    return signals


def add_worker_spans(
    columns: SpanBlocks,
    engines: Sequence[EngineRequests],
    start_ns: I64,
    trace: npt.NDArray[np.uint64],
    span_id: npt.NDArray[np.uint64],
    ids: npt.NDArray[np.uint64],
) -> NcclSpans:
    """Every rank's spans under its replica's `llm_request` spans (`start_ns`, `trace`, `span_id`
    per invocation); `ids` are fresh span ids, as many as the worker spans. Returns the NCCL
    spans' communicator (in the order of the topology's engines), op (`NCCL_OPS`) and ranks; a
    rank sends to its ring neighbour."""
    used = 0
    nccl: list[NcclSpans] = []
    for e in engines:
        workers = columns.intern(list(e.cluster.workers))
        gpus = columns.intern([e.cluster.gpu_node(k) for k in range(len(e.cluster.workers))])
        m, tp = e.rows.shape[0], len(e.cluster.workers)
        for sub in e.requests.sub:
            if sub.name.startswith(NCCL_PREFIX):
                op = NCCL_OPS.index(sub.name.removeprefix(NCCL_PREFIX))
                peer = (sub.rank + 1) % tp if op == NCCL_OPS.index("Send") else -1
                rows = [np.full(m, v, np.int64) for v in (e.replica, op, sub.rank, peer)]
                nccl.append(NcclSpans(ids[used : used + m], *rows))
            sub_start = start_ns[e.rows] + np.round(sub.start_s * 1e9).astype(np.int64)
            columns.add(
                {
                    "trace": trace[e.rows],
                    "span": ids[used : used + m],
                    "parent": span_id[e.rows],
                    "service": np.full(m, workers[sub.rank]),
                    "operation": columns.intern([sub.name]).repeat(m),
                    "peer": np.full(m, -1),
                    "resource": np.full(m, gpus[sub.rank] if sub.gpu else -1),
                    "kind": np.full(m, KIND_INTERNAL),
                    "start": sub_start,
                    "end": sub_start + np.round(sub.duration_s * 1e9).astype(np.int64),
                    "error": np.zeros(m, np.bool_),
                },
                sub.signals,
            )
            used += m
    return NcclSpans.concat(nccl)


def worker_span_count(engines: Sequence[EngineRequests]) -> int:
    return sum(e.rows.shape[0] * len(e.requests.sub) for e in engines)
