"""The causal structure of an incident: candidates, how each could affect the others, paths.

Faults propagate callee → caller. The candidates are the alerting nodes and every node they
depend on (reachable along caller → callee edges). Besides the root itself, a root's fault shows
on seven kinds of other nodes (`Relation`): its ancestors (the candidates that reach it: callers
on the way to an alerting node), apart those that time whole LLM requests (`NodeEvidence.engine`:
an engine's TTFT, decode and e2e include the time of all it waits on, where a caller's self time
does not); the uninstrumented callees whose only evidence is the root's own
client spans; its siblings (called by one of its callers, both services of their own: replicas
that take shed load, where a GPU is no replica of its host); the
network nodes of its callees, measured by its own client calls; the ranks of its communicator
(`NodeEvidence.communicator`), which wait for it in every collective; and the other GPUs of its
engine where metrics alone show them (`NodeEvidence.lockstep`), which idle while it is slow.

Candidates also fall into groups whose evidence moves together whichever of them is at fault: one
service's nodes (its process, its GPUs, its callees' network) and a lockstep group's ranks with
theirs. Two roots within one group are not told apart from one (a communicator runs at its
slowest rank's pace), so the two-root model (`models.multiroot`) weighs no such pair.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from numba import njit
from scipy.sparse.csgraph import breadth_first_order, connected_components

from rca.evidence.nodes import NodeEvidence

Index = npt.NDArray[np.int64]


class Relation(IntEnum):
    """How node i stands to a root r (first that applies)."""

    NONE = 0
    ANCESTOR = 1
    MEASURED = 2  # an uninstrumented callee of r, seen only through r's client spans
    PEER = 3  # a sibling service of r: called by one of r's callers, not in r's communicator (replicas)
    NETWORK = 4  # the network node of one of r's callees, timed by r's client calls
    COLLECTIVE = 5  # a rank in r's communicator (lockstep collectives): it waits for r
    LOCKSTEP = 6  # another GPU of r's engine, known from metrics: it idles while r is slow
    ENGINE = 7  # an ancestor of r that times whole LLM requests: its TTFT, decode and e2e include r's time


@dataclass(frozen=True, slots=True)
class CausalStructure:
    """Candidates (node rows), their ancestor matrix and each one's path to an alerting node."""

    candidates: Index  # rows into the evidence's nodes
    relation: npt.NDArray[np.int8]  # [r, i]: `Relation` of candidate i to candidate r
    predecessor: Index  # BFS tree from the alerting nodes: parent of each node row, -1 at roots
    group: Index  # per candidate, its group (one service's nodes, a lockstep group's ranks): from 0
    related: Index = field(init=False)  # the flat positions of `relation` not NONE (most are)

    def __post_init__(self) -> None:
        object.__setattr__(self, "related", _flat_related(np.ascontiguousarray(self.relation)))

    def paths(self, nodes: Sequence[int]) -> list[tuple[int, ...]]:
        """Per node, the node rows from it up to the alerting node it was reached from; the walks
        up the tree are shared between nodes."""
        parent = self.predecessor.tolist()
        known: dict[int, tuple[int, ...]] = {}
        for node in nodes:
            chain: list[int] = []
            while node not in known and node >= 0 and len(chain) <= len(parent):
                chain.append(node)
                node = parent[node]
            path = known.get(node, ())
            for row in reversed(chain):
                path = (row, *path)
                known[row] = path
        return [known[node] for node in nodes]


def causal_structure(
    n_nodes: int,
    edges: Index,
    alerting: list[int],
    *,
    virtual: npt.NDArray[np.bool_] | None = None,
    network: npt.NDArray[np.bool_] | None = None,
    communicator: Index | None = None,
    owner: Index | None = None,
    lockstep: Index | None = None,
    engine: npt.NDArray[np.bool_] | None = None,
) -> CausalStructure:
    """Candidates reachable from `alerting` (all nodes when none is given) over caller → callee
    `edges`; `virtual` marks uninstrumented nodes, `network` callees' network nodes, `communicator`
    each NCCL rank's communicator (-1 elsewhere), `owner` the row of the service owning each node,
    `lockstep` each engine GPU's group (-1 elsewhere), `engine` the nodes timing whole LLM requests."""
    alerting = sorted(set(alerting)) or list(range(n_nodes))
    source = n_nodes  # a super-source calling every alerting node
    rows = np.concatenate([edges[:, 0], np.full(len(alerting), source)])
    cols = np.concatenate([edges[:, 1], np.asarray(alerting, np.int64)])
    adjacency = sp.csr_matrix((np.ones(rows.shape[0]), (rows, cols)), shape=(n_nodes + 1, n_nodes + 1))
    order, predecessor = breadth_first_order(adjacency, source, directed=True, return_predecessors=True)
    candidates = np.sort(order[order != source]).astype(np.int64)
    predecessor = predecessor[:n_nodes].astype(np.int64)
    predecessor[(predecessor == source) | (predecessor < 0)] = -1
    # Every node related to a candidate is a candidate itself (callers on the way, callees,
    # peers under a common caller are all reachable), so relations are candidate × candidate.
    inner = adjacency[:n_nodes, :n_nodes][candidates][:, candidates]
    # Replicas are services: not virtual, not network, and their own owners (a GPU is its
    # engine's, not a replica of the host or the other devices its engine also calls).
    k = candidates.shape[0]
    services = np.ones(k, np.bool_) if owner is None else owner[candidates] == candidates
    none = np.zeros(k, np.bool_)
    virtual_c, network_c = (none if mask is None else mask[candidates] for mask in (virtual, network))
    services &= ~virtual_c & ~network_c
    grouped = np.zeros((0, 0), np.int8)  # COLLECTIVE and LOCKSTEP pairs, where there are any
    if communicator is not None and owner is not None and (communicator >= 0).any():
        grouped = np.zeros((k, k), np.int8)
        np.copyto(grouped, Relation.COLLECTIVE, where=_communicators(candidates, communicator, owner))
    if lockstep is not None and (lockstep >= 0).any():
        group = lockstep[candidates]
        grouped = grouped if grouped.shape[0] else np.zeros((k, k), np.int8)
        np.copyto(grouped, Relation.LOCKSTEP, where=(group[:, None] == group[None, :]) & (group[:, None] >= 0))
    engine_c = none if engine is None else engine[candidates]
    relation = _relations(inner.indptr, inner.indices, services, virtual_c, network_c, engine_c, grouped)
    return CausalStructure(candidates, relation, predecessor, _groups(n_nodes, candidates, owner, grouped))


def _groups(n_nodes: int, candidates: Index, owner: Index | None, grouped: npt.NDArray[np.int8]) -> Index:
    """Per candidate, its group: candidates joined where one owns the other (or one service owns
    both) and where they share a communicator or an engine (`grouped`, k × k or 0 × 0)."""
    k = candidates.shape[0]
    a, b = np.nonzero(grouped)
    rows, cols = candidates[a], candidates[b]
    if owner is not None:
        rows, cols = np.concatenate([rows, candidates]), np.concatenate([cols, owner[candidates]])
    links = sp.csr_matrix((np.ones(rows.shape[0]), (rows, cols)), shape=(n_nodes, n_nodes))
    _, label = connected_components(links, directed=False)
    group: Index = np.unique(label[candidates], return_inverse=True)[1].astype(np.int64).reshape(k)
    return group


@njit(cache=True, nogil=True)
def _relations(
    indptr: npt.NDArray[np.int32],
    indices: npt.NDArray[np.int32],
    services: npt.NDArray[np.bool_],
    virtual: npt.NDArray[np.bool_],
    network: npt.NDArray[np.bool_],
    engine: npt.NDArray[np.bool_],
    grouped: npt.NDArray[np.int8],
) -> npt.NDArray[np.int8]:
    """[r, i]: the `Relation` of candidate i to root r, from caller → callee adjacency (CSR,
    n × n) and the candidates' kinds; `grouped`: the COLLECTIVE and LOCKSTEP pairs (n × n, or
    0 × 0 where there are none). Each kind is written where it applies, in the order of
    `Relation` (a later kind overrides an earlier one), only at its pairs: most stay NONE."""
    n = indptr.shape[0] - 1
    relation = np.zeros((n, n), np.int8)
    for caller in range(n):  # replicas: called by one caller
        callees = indices[indptr[caller] : indptr[caller + 1]]
        for a in callees:
            for b in callees:
                if services[a] and services[b]:
                    relation[a, b] = Relation.PEER
    for r in range(grouped.shape[0]):
        for i in range(n):
            if grouped[r, i]:
                relation[r, i] = grouped[r, i]
    for caller in range(n):  # what a root's own client spans measure
        for callee in indices[indptr[caller] : indptr[caller + 1]]:
            if virtual[callee]:
                relation[caller, callee] = Relation.MEASURED
            elif network[callee]:
                relation[caller, callee] = Relation.NETWORK
    reached = np.zeros(n, np.bool_)  # by the walk from the current caller: it is their ancestor
    stack = np.empty(n, np.int64)
    for caller in range(n):
        reached[:] = False
        reached[caller] = True
        kind = Relation.ENGINE if engine[caller] else Relation.ANCESTOR
        stack[0], top = caller, 1
        while top:
            top -= 1
            node = stack[top]
            for j in indices[indptr[node] : indptr[node + 1]]:
                if not reached[j]:
                    reached[j] = True
                    relation[j, caller] = kind
                    stack[top] = j
                    top += 1
    for i in range(n):
        relation[i, i] = Relation.NONE
    return relation


@njit(cache=True, nogil=True)
def _flat_related(relation: npt.NDArray[np.int8]) -> Index:
    """`np.flatnonzero(relation != Relation.NONE)` without the temporary mask (NONE is 0), read
    eight entries at a time: most words of the matrix are all NONE."""
    flat = relation.ravel()
    n = flat.shape[0]
    whole = n - n % 8
    words = flat[:whole].view(np.uint64)
    out = np.empty(n, np.int64)  # only the pages written are touched
    at = 0
    for w in range(words.shape[0]):
        if words[w]:
            for p in range(w * 8, w * 8 + 8):
                if flat[p]:
                    out[at] = p
                    at += 1
    for p in range(whole, n):
        if flat[p]:
            out[at] = p
            at += 1
    return out[:at].copy()


def _communicators(candidates: Index, communicator: Index, owner: Index) -> npt.NDArray[np.bool_]:
    """[r, i]: candidate i is a rank in the communicator of candidate r, or of the worker owning r
    (a rank's GPU), other than r and its owner."""
    rank_of = communicator[candidates]
    mine = np.where(rank_of >= 0, rank_of, communicator[owner[candidates]])
    lockstep: npt.NDArray[np.bool_] = (mine[:, None] == rank_of[None, :]) & (mine[:, None] >= 0)
    lockstep &= candidates[None, :] != candidates[:, None]
    lockstep &= candidates[None, :] != owner[candidates][:, None]
    return lockstep


class StructureCache:
    """The structure `evidence_structure` built last, with what it was built from: ranking again
    over the same nodes, edges and alerting nodes (an incident re-ranked as spans arrive, a second
    incident on the same services) reuses it. The structure reads no scores."""

    def __init__(self) -> None:
        self._last: tuple[tuple[object, ...], CausalStructure] | None = None

    def get(self, evidence: NodeEvidence, alert_nodes: Sequence[str]) -> CausalStructure:
        key = (tuple(alert_nodes), evidence.nodes, *(a.tobytes() for a in _structure_inputs(evidence)))
        last = self._last
        if last is not None and last[0] == key:
            return last[1]
        structure = evidence_structure(evidence, alert_nodes)
        shared = (structure.candidates, structure.relation, structure.predecessor, structure.group, structure.related)
        for array in shared:
            array.flags.writeable = False  # shared by every ranking that reuses it
        self._last = key, structure
        return structure


def _structure_inputs(evidence: NodeEvidence) -> tuple[npt.NDArray[np.generic], ...]:
    """The arrays of the evidence that `evidence_structure` reads besides its node names."""
    return (
        evidence.edges,
        evidence.virtual,
        evidence.network,
        evidence.communicator,
        evidence.owner,
        evidence.lockstep,
        evidence.engine,
    )


def evidence_structure(evidence: NodeEvidence, alert_nodes: Sequence[str]) -> CausalStructure:
    """The structure of the evidence's nodes around the alerting ones (unknown names are ignored)."""
    rows = {name: i for i, name in enumerate(evidence.nodes)}
    return causal_structure(
        len(evidence.nodes),
        evidence.edges,
        [rows[n] for n in alert_nodes if n in rows],
        virtual=evidence.virtual,
        network=evidence.network,
        communicator=evidence.communicator,
        owner=evidence.owner,
        lockstep=evidence.lockstep,
        engine=evidence.engine,
    )
