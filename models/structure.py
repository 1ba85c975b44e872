"""The causal structure of an incident: candidates, who calls whom on the way to the alert, paths.

Faults propagate callee → caller. The candidates are the alerting nodes and every node they
depend on (reachable along caller → callee edges); a candidate's ancestors are the candidates
that reach it, i.e. its callers on the way to an alerting node.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order, shortest_path

Index = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class CausalStructure:
    """Candidates (node rows), their ancestor matrix and each one's path to an alerting node."""

    candidates: Index  # rows into the evidence's nodes
    ancestors: npt.NDArray[np.bool_]  # [r, i]: node i calls candidate r (transitively); i is a node row
    predecessor: Index  # BFS tree from the alerting nodes: parent of each node row, -1 at roots

    def path(self, node: int) -> list[int]:
        """Node rows from `node` up to the alerting node it was reached from."""
        out = [node]
        while self.predecessor[out[-1]] >= 0 and len(out) <= self.predecessor.shape[0]:
            out.append(int(self.predecessor[out[-1]]))
        return out


def causal_structure(n_nodes: int, edges: Index, alerting: list[int]) -> CausalStructure:
    """Candidates reachable from `alerting` (all nodes when none is given) over caller → callee `edges`."""
    alerting = sorted(set(alerting)) or list(range(n_nodes))
    source = n_nodes  # a super-source calling every alerting node
    rows = np.concatenate([edges[:, 0], np.full(len(alerting), source)])
    cols = np.concatenate([edges[:, 1], np.asarray(alerting, np.int64)])
    adjacency = sp.csr_matrix((np.ones(rows.shape[0]), (rows, cols)), shape=(n_nodes + 1, n_nodes + 1))
    order, predecessor = breadth_first_order(adjacency, source, directed=True, return_predecessors=True)
    candidates = np.sort(order[order != source]).astype(np.int64)
    predecessor = predecessor[:n_nodes].astype(np.int64)
    predecessor[(predecessor == source) | (predecessor < 0)] = -1
    inner = adjacency[:n_nodes, :n_nodes][candidates][:, candidates]
    reach = np.isfinite(shortest_path(inner, directed=True, unweighted=True))
    np.fill_diagonal(reach, False)
    ancestors = np.zeros((candidates.shape[0], n_nodes), np.bool_)
    ancestors[:, candidates] = reach.T  # reach[i, r]: i reaches r, so i is r's ancestor
    return CausalStructure(candidates, ancestors, predecessor)
