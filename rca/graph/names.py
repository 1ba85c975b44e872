"""Node, operation and node-operation identities: the graph's names for what spans, log records
and data points point at, shared by all its windows."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from rca.graph.intindex import IntIndex
from rca.graph.keys import high, low, pair_key
from rca.telemetry.conventions import NCCL_PREFIX
from rca.telemetry.metrics import PLACED_GPU, PLACED_SERVICE, MetricBatch
from rca.telemetry.spans import SpanBatch

NO_OP = ""  # the operation of a node seen only as a callee, or counted without spans


class NodeKind(StrEnum):
    SERVICE = "service"
    VIRTUAL = "virtual"
    RESOURCE = "resource"
    # One instance of a service (`instance_nodes`): holds only its own span signals and the data
    # points its pod exported, which evidence reads per instance and reports on the service.
    INSTANCE = "instance"


class Names:
    """Node, operation and node-operation identities, shared by all windows."""

    def __init__(self) -> None:
        self.node_ids: dict[str, int] = {}
        self.nodes: list[str] = []
        self.kinds: list[NodeKind] = []
        self.owners: list[int] = []  # node id of the service that owns each node
        # GPU node id → the pod its exporter last named (`Placement.pod`), else the instance of the
        # spans that last named it: the engine replica it serves
        self.pods: dict[int, str] = {}
        self.op_ids: dict[str, int] = {}
        self.ops: list[str] = []
        self.nccl_ops: list[int] = []  # operations named `nccl:{op}` (docs/interface.md)
        self._nodeops = IntIndex()
        self._instances: dict[tuple[int, str], int] = {}  # (service node, instance) → instance node
        self.instance_names: dict[int, str] = {}  # instance node → its instance

    def node(self, name: str, kind: NodeKind, owner: str | None = None) -> int:
        index = self.node_ids.get(name)
        if index is None:
            index = self.node_ids[name] = len(self.nodes)
            self.nodes.append(name)
            self.kinds.append(kind)
            self.owners.append(index if owner is None else self.node(owner, NodeKind.SERVICE))
        elif kind is NodeKind.SERVICE and self.kinds[index] is not NodeKind.SERVICE:
            self.kinds[index] = NodeKind.SERVICE  # a callee we only knew by name now reports spans
            self.owners[index] = index
        return index

    def instance(self, node: int, instance: str) -> int:
        """The instance node of one process (`instance`) of service `node`."""
        index = self._instances.get((node, instance))
        if index is None:
            index = self._instances[node, instance] = self.node(f"{self.nodes[node]}@{instance}", NodeKind.INSTANCE)
            self.owners[index] = node
            self.instance_names[index] = instance
        return index

    def signal_owners(self, nodes: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Each node id as evidence reports it: an instance node as its service, any other id
        (network nodes' ids past the graph's nodes too) as itself."""
        if not self._instances:
            return nodes
        ids = np.fromiter(self._instances.values(), np.int64, len(self._instances))  # ascending: made in order
        owners = np.fromiter((self.owners[i] for i in ids.tolist()), np.int64, ids.shape[0])
        at = np.minimum(np.searchsorted(ids, nodes), ids.shape[0] - 1)
        mapped: npt.NDArray[np.int64] = np.where(ids[at] == nodes, owners[at], nodes)
        return mapped

    def of_kind(self, kind: NodeKind) -> npt.NDArray[np.bool_]:
        """Per node id, whether it is of `kind`."""
        return np.fromiter((k is kind for k in self.kinds), np.bool_, len(self.kinds))

    def op(self, name: str) -> int:
        index = self.op_ids.get(name)
        if index is None:
            index = self.op_ids[name] = len(self.ops)
            self.ops.append(name)
            if name.startswith(NCCL_PREFIX):
                self.nccl_ops.append(index)
        return index

    def nodeops(self, nodes: npt.NDArray[np.int64], ops: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        return self._nodeops.ids(pair_key(nodes, ops))

    @property
    def nodeop_node(self) -> npt.NDArray[np.int64]:
        """The node of each node-operation id."""
        return high(self._nodeops.keys)

    @property
    def nodeop_op(self) -> npt.NDArray[np.int64]:
        """The operation of each node-operation id."""
        return low(self._nodeops.keys)


def map_strings(
    column: npt.NDArray[np.int32], strings: tuple[str, ...], intern: Callable[[str], int]
) -> npt.NDArray[np.int64]:
    """Graph-wide ids for a column of batch string indices (-1 stays -1), interning each
    string the column uses once."""
    table = np.full(len(strings) + 1, -1, np.int64)  # the last entry answers index -1
    used = np.bincount(column + 1, minlength=len(strings) + 1)[1:]
    for s in np.flatnonzero(used).tolist():
        table[s] = intern(strings[s])
    mapped: npt.NDArray[np.int64] = table[column]
    return mapped


def span_nodes(names: Names, batch: SpanBatch) -> tuple[npt.NDArray[np.int64], ...]:
    """Each span's node, peer (virtual) node and resource (GPU) node, -1 where none. A GPU's
    instance (`Names.pods`) is that of the spans naming it."""
    strings = batch.strings
    nodes = map_strings(batch.service, strings, lambda name: names.node(name, NodeKind.SERVICE))
    peers = map_strings(batch.peer, strings, lambda name: names.node(name, NodeKind.VIRTUAL))
    named = batch.resource >= 0
    if not named.any():
        return nodes, peers, np.full(len(batch), -1, np.int64)
    table = np.full(len(strings) + 1, -1, np.int64)  # per resource string; the last answers -1
    triples = np.unique(np.stack([batch.resource[named], batch.service[named], batch.instance[named]]), axis=1)
    for resource, service, instance in triples.T.tolist():
        node = table[resource] = names.node(strings[resource], NodeKind.RESOURCE, strings[service])
        if instance >= 0:
            names.pods[node] = strings[instance]
    return nodes, peers, table[batch.resource]


def instance_nodes(
    names: Names,
    nodes: npt.NDArray[np.int64],
    instances: npt.NDArray[np.int32],
    strings: tuple[str, ...],
    named: npt.NDArray[np.bool_],
) -> npt.NDArray[np.int64]:
    """Per row, its service's instance node where `named` (`instances` index `strings`), else
    its node in `nodes`: what a row measured of one process stays apart from its replicas'."""
    if not named.any():
        return nodes
    width = len(strings)
    codes, inverse = np.unique(nodes[named] * width + instances[named], return_inverse=True)  # one pass, 1-D
    ids = np.asarray([names.instance(c // width, strings[c % width]) for c in codes.tolist()], np.int64)
    out = nodes.copy()
    out[named] = ids[inverse]
    return out


def span_signal_nodes(
    names: Names, batch: SpanBatch, nodes: npt.NDArray[np.int64], resources: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """The node each span's own signals are kept on: its service's instance node where its
    resource names an instance (replicas under one service name stay apart), else `nodes`'
    (so too for a span with no signal to keep: no GPU among its `resources`, no signal value;
    a collective carries its latency)."""
    named = batch.instance >= 0
    if named.any():
        named &= (resources >= 0) | ~np.isnan(batch.signals).all(axis=1)
    return instance_nodes(names, nodes, batch.instance, batch.strings, named)


def metric_nodes(names: Names, batch: MetricBatch, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The graph node of each of `rows`: services by name (the instance node of the pod a point
    names, `instance_nodes`), GPUs and hosts as resource nodes (a GPU owned by the pod its
    exporter names, else by whoever its spans named)."""
    strings = batch.strings
    shape = (len(strings), len(strings) + 1, int(batch.placement.max(initial=0)) + 1)  # owner -1 → 0
    code = np.ravel_multi_index((batch.node[rows], batch.owner[rows] + 1, batch.placement[rows]), shape)
    distinct, inverse = np.unique(code, return_inverse=True)
    ids = np.empty(distinct.shape[0], np.int64)
    parts = [part.tolist() for part in np.unravel_index(distinct, shape)]
    for k, (node, owner_1, placement) in enumerate(zip(*parts, strict=True)):
        owner = owner_1 - 1
        name = strings[node]
        known = names.node_ids.get(name)  # a node known from spans keeps its kind and owner
        if known is not None:
            ids[k] = known
        elif placement == PLACED_SERVICE:
            ids[k] = names.node(name, NodeKind.SERVICE)
        else:
            named = strings[owner] if placement == PLACED_GPU and owner >= 0 else None
            ids[k] = names.node(name, NodeKind.RESOURCE, named)
    result: npt.NDArray[np.int64] = ids[inverse.reshape(-1)]
    pod, placement = batch.pod[rows], batch.placement[rows]
    named = (pod >= 0) & (placement == PLACED_GPU)
    if named.any():
        pairs = np.unique(np.stack([result[named], pod[named]]), axis=1)
        names.pods.update((node, strings[pod]) for node, pod in pairs.T.tolist())
    # a service's point from one of its pods: kept on that instance (a GPU's pod names its owner)
    return instance_nodes(names, result, pod, strings, (pod >= 0) & (placement == PLACED_SERVICE))
