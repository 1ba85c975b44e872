"""Fault plans: which node a scenario breaks, how hard, and when; targets drawn with the seed."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from rca.ranking import Fault
from rca.simulation.topology import CompiledTopology, Role

LLM_FAULTS = frozenset(
    {
        Fault.GPU_MEMORY_BANDWIDTH,
        Fault.KV_CACHE_FRAGMENTATION,
        Fault.SCHEDULER_PRIORITY_INVERSION,
        Fault.NCCL_COMMUNICATION,
        Fault.NUMA_MISMATCH,
    }
)
_MIN_FAULT_CALLS = 40.0  # expected calls of a target during the fault at the default rate
_LOW_TRAFFIC_CALLS = 12.0


class Variant(StrEnum):
    """The hard variants a scenario name may end with."""

    NONE = ""
    PEERS = "peers"  # nccl: tensor-parallel peers wait on the slow rank and look worse than it
    PARTIAL = "partial"  # one of several instances of the service is faulty
    LOWTRAFFIC = "lowtraffic"  # a rarely called leaf


class CallChange(StrEnum):
    NONE = ""
    MISSING = "missing"  # the operation stops making one call
    ABORT = "abort"  # the operation returns early, skipping its later calls
    RETRY = "retry"  # a too-short client deadline: the call is retried several times


@dataclass(frozen=True, slots=True)
class FaultPlan:
    fault: Fault
    node: str
    service: str
    service_index: int
    inject_ns: int
    end_ns: int
    magnitude: float  # latency factor, error share or LLM slowdown, by fault
    variant: Variant = Variant.NONE
    instance: int = -1  # a partial fault's replica; -1: every replica
    operation: int = -1  # call_structure: the changed operation and call
    call: int = -1
    change: CallChange = CallChange.NONE
    rank: int = -1  # LLM faults: the tensor-parallel rank

    def active(self, t_ns: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        result: npt.NDArray[np.bool_] = (t_ns >= self.inject_ns) & (t_ns < self.end_ns)
        return result


def _eligible(ct: CompiledTopology, min_visits: float) -> list[int]:
    """Services a generic fault may hit: instrumented with operations, not user-facing, not noisy,
    not GPU workers, and called often enough for the fault to be seen."""
    t = ct.topology
    skip = set(t.user_facing) | set(t.noisy) | set(t.llm.workers if t.llm else ())
    has_ops = set(ct.op_service.tolist())
    return [
        i
        for i, s in enumerate(ct.services)
        if s not in skip and i in has_ops and ct.service_visits[i] >= min_visits and ct.service_depth[i] >= 0
    ]


def _by_depth(ct: CompiledTopology, candidates: list[int], rng: np.random.Generator) -> int:
    """A depth drawn uniformly among the candidates' depths, then a service at that depth."""
    depths = sorted({int(ct.service_depth[c]) for c in candidates})
    depth = depths[int(rng.integers(len(depths)))]
    at = [c for c in candidates if ct.service_depth[c] == depth]
    return at[int(rng.integers(len(at)))]


def _is_leaf(ct: CompiledTopology, service: int) -> bool:
    ops = np.flatnonzero(ct.op_service == service)
    return all(not ct.is_remote(np.full(len(ct.calls[o]), o), ct.calls[o][:, 0].astype(np.int64)).any() for o in ops)


def plan_fault(
    ct: CompiledTopology,
    fault: Fault,
    variant: Variant,
    inject_ns: int,
    end_ns: int,
    rng: np.random.Generator,
) -> FaultPlan:
    """Draws the target and magnitude of `fault` on the topology."""
    t = ct.topology
    window_s = (end_ns - inject_ns) / 1e9
    if fault in LLM_FAULTS:
        if t.llm is None:
            raise ValueError(f"{fault} needs the llm topology")
        rank = int(rng.integers(len(t.llm.workers)))
        worker = t.llm.workers[rank]
        node = t.llm.gpu_node(rank) if fault in (Fault.GPU_MEMORY_BANDWIDTH, Fault.KV_CACHE_FRAGMENTATION) else worker
        service = worker
        if fault is Fault.SCHEDULER_PRIORITY_INVERSION:
            node = service = t.llm.engine
            rank = -1
        magnitude = {
            Fault.GPU_MEMORY_BANDWIDTH: rng.uniform(1.6, 2.4),
            Fault.KV_CACHE_FRAGMENTATION: rng.uniform(1.3, 1.8),
            Fault.SCHEDULER_PRIORITY_INVERSION: rng.uniform(0.2, 0.5),  # urgent queue wait, s
            Fault.NCCL_COMMUNICATION: rng.uniform(3.0, 5.0),
            Fault.NUMA_MISMATCH: rng.uniform(1.8, 3.0),
        }[fault]
        return FaultPlan(
            fault, node, service, ct.service_index[service], inject_ns, end_ns, float(magnitude), variant, rank=rank
        )
    min_visits = _MIN_FAULT_CALLS / (t.default_rate * window_s)
    candidates = _eligible(ct, min_visits)
    if variant is Variant.PARTIAL:
        candidates = [c for c in candidates if ct.instances[c] > 1]
    if variant is Variant.LOWTRAFFIC:
        floor = _LOW_TRAFFIC_CALLS / (t.default_rate * window_s)
        leaves = [c for c in _eligible(ct, floor) if _is_leaf(ct, c)]
        leaves.sort(key=lambda c: float(ct.service_visits[c]))
        candidates = leaves[: max(1, len(leaves) // 4)]
    if fault is Fault.CALL_STRUCTURE:
        return _call_structure(ct, candidates, variant, inject_ns, end_ns, rng)
    target = _by_depth(ct, candidates, rng)
    instance = int(rng.integers(ct.instances[target])) if variant is Variant.PARTIAL else -1
    size = rng.uniform(2.0, 6.0) if fault is Fault.LATENCY else rng.uniform(0.15, 0.5)
    name = ct.services[target]
    return FaultPlan(fault, name, name, target, inject_ns, end_ns, float(size), variant, instance)


def _call_structure(
    ct: CompiledTopology,
    candidates: list[int],
    variant: Variant,
    inject_ns: int,
    end_ns: int,
    rng: np.random.Generator,
) -> FaultPlan:
    """An operation with downstream calls changes which calls it makes."""
    callers = [
        c
        for c in candidates
        if any(len(ct.calls[o]) and ct.op_role[o] == Role.GENERIC for o in np.flatnonzero(ct.op_service == c))
    ]
    service = _by_depth(ct, callers, rng)
    ops = [int(o) for o in np.flatnonzero(ct.op_service == service) if len(ct.calls[o]) and ct.visits[o] > 0]
    op = ops[int(np.argmax([ct.visits[o] * rng.uniform(0.5, 1.5) for o in ops]))]
    callees = ct.calls[op][:, 0].astype(np.int64)
    remote = np.flatnonzero(ct.is_remote(np.full(len(callees), op), callees))
    change = [CallChange.MISSING, CallChange.ABORT, CallChange.RETRY][int(rng.integers(3))]
    if change is CallChange.RETRY and remote.size == 0:
        change = CallChange.MISSING
    call = int(rng.choice(remote)) if change is CallChange.RETRY else int(rng.integers(len(callees)))
    name = ct.services[service]
    instance = int(rng.integers(ct.instances[service])) if variant is Variant.PARTIAL else -1
    return FaultPlan(
        Fault.CALL_STRUCTURE, name, name, service, inject_ns, end_ns, 1.0, variant, instance, op, call, change
    )
