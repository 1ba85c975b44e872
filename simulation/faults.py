"""Fault plans: which node a scenario breaks, how hard, how it shows and when; targets and sizes
drawn with the seed from the case's profile."""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from rca.telemetry.faults import Fault
from rca.telemetry.spans import KIND_SERVER
from simulation.profiles import DEFAULT, Profile
from simulation.topology import CompiledTopology, Role

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
ECHO_CHANCE = 0.5  # call_structure faults whose changed requests change a callee's path
SECOND = 1_000_000_000


class Variant(StrEnum):
    """The variants a scenario name may end with."""

    NONE = ""
    PEERS = "peers"  # nccl: the slow link's rank starts its collective late, so its peers wait longer than it
    PARTIAL = "partial"  # one of several instances of the service is faulty
    LOWTRAFFIC = "lowtraffic"  # a rarely called leaf
    DATASTORE = "datastore"  # a cache or vector database the services call, not a service
    DOUBLE = "double"  # an unrelated microservice fault overlaps the first


STARVED_SHARE = 0.5  # latency faults that starve the process (CPU contention) rather than slow one code path


class Mode(StrEnum):
    """How a fault shows, drawn per case."""

    NONE = ""
    COLLECTIVE = "collective"  # nccl: the communicator's transfers run at the slow link's pace
    P2P = "p2p"  # nccl: the rank's point-to-point sends slow
    MISPLACED = "misplaced"  # numa: the process runs on the other socket from its GPU
    SPILLED = "spilled"  # numa: the process's memory spilled to the remote node
    STARVED = "starved"  # latency: the process is short of CPU, so sending and reading its calls slow too
    ENGINE = "engine"  # kv: the engine's block table fragments, on every rank alike (vLLM keeps one per engine)


class CallChange(StrEnum):
    NONE = ""
    MISSING = "missing"  # the operation stops making one call
    ABORT = "abort"  # the operation returns early, skipping its later calls
    RETRY = "retry"  # a too-short client deadline: the call is retried several times


@dataclass(frozen=True, slots=True)
class Echo:
    """What a code defect's changed requests do downstream: a wrong argument or a missing field
    sends one callee operation down another branch, so that on `share` of the changed requests
    that reach it, it skips its call `call`. Its own code is fine; the truth stays the caller."""

    operation: int
    call: int
    share: float


@dataclass(frozen=True, slots=True)
class FaultPlan:
    """One root: what breaks, where, when and how hard. `magnitude` is in the class's own
    quantity: a slowdown factor (latency, GPU bandwidth, NUMA, NCCL), a block-size shrink factor
    (KV fragmentation), the urgent-to-ordinary queue-wait ratio (scheduler inversion), the share
    of failing requests (errors) or of changed requests (call_structure)."""

    fault: Fault
    node: str
    service: str
    service_index: int  # -1 for a datastore (a virtual node)
    inject_ns: int
    end_ns: int
    magnitude: float
    variant: Variant = Variant.NONE
    instance: int = -1  # a partial fault's replica; -1: every replica
    operation: int = -1  # call_structure: the changed operation and call
    call: int = -1
    change: CallChange = CallChange.NONE
    rank: int = -1  # LLM faults: the tensor-parallel rank
    replica: int = -1  # LLM faults: the engine replica
    peer: str = ""  # a datastore fault: the callee its callers' client spans name
    mode: Mode = Mode.NONE
    echo: Echo | None = None  # call_structure: a callee whose path the changed requests change
    # errors: the share of failing requests at `operation` whose handler catches the exception,
    # logs it and returns a fallback, skipping its calls from `call` on (`_caught_exception`)
    caught: float = 0.0

    def active(self, t_ns: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        result: npt.NDArray[np.bool_] = (t_ns >= self.inject_ns) & (t_ns < self.end_ns)
        return result


def _eligible(ct: CompiledTopology, min_visits: float) -> list[int]:
    """Services a generic fault may hit: instrumented with operations, not user-facing, not noisy,
    not GPU workers, and called often enough for the fault to be seen."""
    t = ct.topology
    skip = set(t.user_facing) | set(t.noisy) | {w for e in t.engines for w in e.workers}
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


def _size(profile: Profile, fault: Fault, rng: np.random.Generator) -> float:
    """A latency fault's slowdown or an errors fault's failing share, drawn from the profile."""
    return profile.slowdown.one(rng) if fault is Fault.LATENCY else profile.error_share.one(rng)


def plan_fault(
    ct: CompiledTopology,
    fault: Fault,
    variant: Variant,
    inject_ns: int,
    end_ns: int,
    rng: np.random.Generator,
    profile: Profile = DEFAULT,
) -> FaultPlan:
    """Draws the target and magnitude of `fault` on the topology (sizes from `profile`)."""
    t = ct.topology
    window_s = (end_ns - inject_ns) / 1e9
    if fault in LLM_FAULTS:
        return _llm_fault(ct, fault, variant, inject_ns, end_ns, rng, profile)
    min_visits = _MIN_FAULT_CALLS / (t.default_rate * window_s)
    if variant is Variant.DATASTORE:
        return _datastore(ct, fault, min_visits, inject_ns, end_ns, rng, profile)
    candidates = _eligible(ct, min_visits)
    if variant is Variant.PARTIAL:
        candidates = [c for c in candidates if ct.instances[c] > 1]
    if variant is Variant.LOWTRAFFIC:
        floor = _LOW_TRAFFIC_CALLS / (t.default_rate * window_s)
        leaves = [c for c in _eligible(ct, floor) if _is_leaf(ct, c)]
        leaves.sort(key=lambda c: float(ct.service_visits[c]))
        candidates = leaves[: max(1, len(leaves) // 4)]
    if fault is Fault.CALL_STRUCTURE:
        return _call_structure(ct, candidates, variant, inject_ns, end_ns, rng, profile.call_share.one(rng))
    target = _by_depth(ct, candidates, rng)
    instance = int(rng.integers(ct.instances[target])) if variant is Variant.PARTIAL else -1
    size = _size(profile, fault, rng)
    name = ct.services[target]
    mode = Mode.STARVED if fault is Fault.LATENCY and rng.random() < STARVED_SHARE else Mode.NONE
    plan = FaultPlan(fault, name, name, target, inject_ns, end_ns, size, variant, instance, mode=mode)
    return _caught_exception(ct, plan, rng, profile) if fault is Fault.ERRORS else plan


def _caught_exception(ct: CompiledTopology, plan: FaultPlan, rng: np.random.Generator, profile: Profile) -> FaultPlan:
    """For `profile.caught_chance` of errors faults, the handler that catches the exception: one
    of the service's busiest server operations, the call it throws before, and on what share of
    its failing requests it catches."""
    ops = np.flatnonzero((ct.op_service == plan.service_index) & (ct.op_kind == KIND_SERVER) & (ct.visits > 0))
    if rng.random() >= profile.caught_chance or ops.shape[0] == 0:
        return plan
    op = int(ops[np.argmax(ct.visits[ops] * rng.uniform(0.5, 1.5, ops.shape[0]))])
    call = int(rng.integers(len(ct.calls[op]) + 1))  # past the last call: the calls were all made
    return replace(plan, operation=op, call=call, caught=profile.caught_share.one(rng))


def plan_second_root(
    ct: CompiledTopology, first: FaultPlan, stop_ns: int, rng: np.random.Generator, profile: Profile = DEFAULT
) -> FaultPlan:
    """An unrelated microservice's latency or errors overlapping `first` in time: another
    service, not an engine or a worker, starting up to 20 s before or 90 s after it."""
    t = ct.topology
    inject = first.inject_ns + int(rng.uniform(-20, 90)) * SECOND
    end = min(max(inject + 150 * SECOND, first.end_ns + int(rng.uniform(-60, 60)) * SECOND), stop_ns - 30 * SECOND)
    skip = {first.service_index, *(ct.service_index[e.engine] for e in t.engines)}
    min_visits = _MIN_FAULT_CALLS / (t.default_rate * (end - inject) / 1e9)
    candidates = [c for c in _eligible(ct, min_visits) if c not in skip]
    target = _by_depth(ct, candidates, rng)
    fault = Fault.LATENCY if rng.random() < 0.5 else Fault.ERRORS
    size = _size(profile, fault, rng)
    name = ct.services[target]
    return FaultPlan(fault, name, name, target, inject, end, size)


def _llm_fault(
    ct: CompiledTopology,
    fault: Fault,
    variant: Variant,
    inject_ns: int,
    end_ns: int,
    rng: np.random.Generator,
    profile: Profile,
) -> FaultPlan:
    """A rank of one engine replica (its GPU node for GPU and KV faults), or the engine itself
    for a scheduler inversion."""
    engines = ct.topology.engines
    if not engines:
        raise ValueError(f"{fault} needs the llm topology")
    replica = int(rng.integers(len(engines)))
    cluster = engines[replica]
    rank = int(rng.integers(len(cluster.workers)))
    worker = cluster.workers[rank]
    node = cluster.gpu_node(rank) if fault in (Fault.GPU_MEMORY_BANDWIDTH, Fault.KV_CACHE_FRAGMENTATION) else worker
    service = worker
    if fault is Fault.SCHEDULER_PRIORITY_INVERSION:
        node = service = cluster.engine
        rank = -1
    mode = Mode.NONE
    if fault is Fault.NCCL_COMMUNICATION:
        mode = Mode.COLLECTIVE if variant is Variant.PEERS or rng.random() < 0.6 else Mode.P2P
    if fault is Fault.NUMA_MISMATCH:
        mode = Mode.MISPLACED if rng.random() < 0.65 else Mode.SPILLED
    magnitude = profile.slowdown.one(rng)
    index = ct.service_index[service]
    return FaultPlan(
        fault, node, service, index, inject_ns, end_ns, magnitude, variant, rank=rank, replica=replica, mode=mode
    )


def _datastore(
    ct: CompiledTopology,
    fault: Fault,
    min_visits: float,
    inject_ns: int,
    end_ns: int,
    rng: np.random.Generator,
    profile: Profile,
) -> FaultPlan:
    """A called datastore (cache, vector or relational database) turns slow or failing: every
    client call to it, from whichever service, sees it."""
    visits: dict[str, float] = {}
    for op, peer in enumerate(ct.op_peer):
        if peer is not None:
            visits[peer] = visits.get(peer, 0.0) + float(ct.visits[op])
    stores = sorted(p for p, v in visits.items() if v >= min_visits)
    if fault not in (Fault.LATENCY, Fault.ERRORS) or not stores:
        raise ValueError(f"no datastore {fault} on {ct.topology.name}")
    peer = stores[int(rng.integers(len(stores)))]
    size = _size(profile, fault, rng)
    return FaultPlan(fault, peer, peer, -1, inject_ns, end_ns, size, Variant.DATASTORE, peer=peer)


def _call_structure(
    ct: CompiledTopology,
    candidates: list[int],
    variant: Variant,
    inject_ns: int,
    end_ns: int,
    rng: np.random.Generator,
    share: float,
) -> FaultPlan:
    """An operation with downstream calls changes which calls it makes, on `share` of its requests."""
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
    echo = _echo(ct, op, call, change, rng)
    where = (name, name, service, inject_ns, end_ns)
    return FaultPlan(Fault.CALL_STRUCTURE, *where, share, variant, instance, op, call, change, echo=echo)


def _echo(ct: CompiledTopology, op: int, call: int, change: CallChange, rng: np.random.Generator) -> Echo | None:
    """For `ECHO_CHANCE` of the faults, a callee operation on another service that the changed
    requests still call and that makes calls of its own, with the call it skips and on what share."""
    callees = ct.calls[op][:, 0].astype(np.int64)
    made = np.arange(len(callees)) < call if change is CallChange.ABORT else np.arange(len(callees)) != call
    remote = ct.is_remote(np.full(len(callees), op), callees)
    eligible = [int(c) for c in callees[made & remote] if len(ct.calls[int(c)]) and ct.op_role[c] == Role.GENERIC]
    if not eligible or rng.random() >= ECHO_CHANCE:
        return None
    callee = eligible[int(rng.integers(len(eligible)))]
    return Echo(callee, int(rng.integers(len(ct.calls[callee]))), float(rng.uniform(0.1, 1.0)))
