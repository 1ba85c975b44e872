"""Topologies: services, their operations and the downstream calls each operation makes.

A `Topology` is written by name (readable builders); `CompiledTopology` turns it into index
arrays for the vectorised generator and derives depth and expected traffic per service.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np
import numpy.typing as npt

from rca.telemetry.spans import KIND_CLIENT, KIND_SERVER


class Role(IntEnum):
    """How an operation's spans are made: generic self time + calls, or the LLM engine model."""

    GENERIC = 0
    LLM_REQUEST = 1


@dataclass(frozen=True, slots=True)
class Call:
    """One downstream call an operation may make (`count` calls, 1..max_count, when made); calls
    of one `group` exclude each other, their probabilities summing to at most 1."""

    service: str
    operation: str
    probability: float = 1.0
    max_count: int = 1
    group: int = 0  # > 0: one of the operation's calls of this group at most (a load balancer's pick)


@dataclass(frozen=True, slots=True)
class Operation:
    """An operation of a service: lognormal self time, background errors, its calls in order
    (sequential unless `parallel`). A CLIENT operation with `peer` is a call to an
    uninstrumented callee (database, cache): a virtual node."""

    service: str
    name: str
    median_s: float
    sigma: float = 0.4
    error_rate: float = 0.002
    calls: tuple[Call, ...] = ()
    parallel: bool = False
    kind: int = KIND_SERVER
    peer: str | None = None
    role: Role = Role.GENERIC


def db(service: str, name: str, peer: str, median_s: float, sigma: float = 0.5) -> Operation:
    """A CLIENT span to an uninstrumented database or cache."""
    return Operation(service, name, median_s, sigma, 0.001, kind=KIND_CLIENT, peer=peer)


@dataclass(frozen=True, slots=True)
class LlmCluster:
    """One engine replica's tensor-parallel group (LLM-serving spans, docs/interface.md): its own GPUs on its own
    host, its ranks one NCCL communicator."""

    engine: str
    workers: tuple[str, ...]
    host: str
    gpu_numa: tuple[int, ...]  # NUMA node of each rank's GPU
    comm_id: str  # the communicator's id (`nccl.comm_id`)

    def gpu_node(self, rank: int) -> str:
        return f"gpu:{self.host}/{rank}"


@dataclass(frozen=True, slots=True)
class Topology:
    name: str
    operations: tuple[Operation, ...]
    entries: tuple[tuple[str, str, float], ...]  # (service, operation, share of requests)
    user_facing: tuple[str, ...]
    noisy: tuple[str, ...]  # healthy but high-variance or error-prone services
    instances: tuple[tuple[str, int], ...] = ()  # replicas where more than one
    default_rate: float = 2.0  # requests per second
    engines: tuple[LlmCluster, ...] = ()  # the LLM engine replicas
    extra_services: tuple[str, ...] = field(default=())  # services with spans but no generic ops


class CompiledTopology:
    """Index arrays over a topology's operations, and derived depth and traffic."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        ops = topology.operations
        names = [o.service for o in ops] + list(topology.extra_services)
        self.services: tuple[str, ...] = tuple(dict.fromkeys(names))
        self.service_index = {s: i for i, s in enumerate(self.services)}
        self.op_index = {(o.service, o.name): i for i, o in enumerate(ops)}
        if len(self.op_index) != len(ops):
            raise ValueError(f"{topology.name}: duplicate operation names")
        self.op_service = np.array([self.service_index[o.service] for o in ops], np.int64)
        self.op_median = np.array([o.median_s for o in ops])
        self.op_sigma = np.array([o.sigma for o in ops])
        self.op_error = np.array([o.error_rate for o in ops])
        self.op_parallel = np.array([o.parallel for o in ops])
        self.op_kind = np.array([o.kind for o in ops], np.int8)
        self.op_role = np.array([o.role for o in ops], np.int8)
        # per op: (callee op, probability, max count, exclusive group) rows
        self.calls: list[npt.NDArray[np.float64]] = []
        for o in ops:
            rows = [(self.op_index[(c.service, c.operation)], c.probability, c.max_count, c.group) for c in o.calls]
            self.calls.append(np.array(rows, np.float64).reshape(-1, 4))
        self.op_peer = tuple(o.peer for o in ops)
        # every call flat, operation by operation: op's calls are rows call_offset[op]:call_offset[op + 1]
        self.call_offset = np.concatenate([[0], np.cumsum([c.shape[0] for c in self.calls])]).astype(np.int64)
        self.call_callee = np.concatenate([c[:, 0] for c in self.calls] + [np.zeros(0)]).astype(np.int64)
        self.entry_ops = np.array([self.op_index[(s, o)] for s, o, _ in topology.entries], np.int64)
        weights = np.array([w for _, _, w in topology.entries])
        self.entry_weights = weights / weights.sum()
        replicas = dict(topology.instances)
        self.instances = np.array([replicas.get(s, 1) for s in self.services], np.int64)
        self.op_depth = self._depths()
        self.visits = self._visits()
        depth = np.full(len(self.services), np.iinfo(np.int64).max)
        np.minimum.at(depth, self.op_service, self.op_depth)
        self.service_depth = depth
        self.service_visits = np.bincount(self.op_service, self.visits, len(self.services))

    def _depths(self) -> npt.NDArray[np.int64]:
        depth = np.full(len(self.calls), -1, np.int64)
        queue = deque(int(e) for e in self.entry_ops)
        depth[self.entry_ops] = 0
        while queue:
            op = queue.popleft()
            for callee in self.calls[op][:, 0].astype(np.int64).tolist():
                if depth[callee] < 0:
                    depth[callee] = depth[op] + 1
                    queue.append(callee)
        return depth

    def topological_order(self) -> list[int]:
        """Operations callers first (raises on a call cycle)."""
        indegree = np.zeros(len(self.calls), np.int64)
        for rows in self.calls:
            np.add.at(indegree, rows[:, 0].astype(np.int64), 1)
        ready = deque(np.flatnonzero(indegree == 0).tolist())
        order: list[int] = []
        while ready:
            op = ready.popleft()
            order.append(op)
            for callee in self.calls[op][:, 0].astype(np.int64).tolist():
                indegree[callee] -= 1
                if indegree[callee] == 0:
                    ready.append(callee)
        if len(order) != len(self.calls):
            raise ValueError(f"{self.topology.name}: the call graph has a cycle")
        return order

    def _visits(self) -> npt.NDArray[np.float64]:
        """Expected invocations of each operation per request."""
        visits = np.zeros(len(self.calls))
        np.add.at(visits, self.entry_ops, self.entry_weights)
        for op in self.topological_order():
            for callee, p, count, _ in self.calls[op].tolist():
                visits[int(callee)] += visits[op] * p * (1 + count) / 2
        return visits

    def is_remote(self, caller_ops: npt.NDArray[np.int64], callee_ops: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        result: npt.NDArray[np.bool_] = self.op_service[caller_ops] != self.op_service[callee_ops]
        return result
