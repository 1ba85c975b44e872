"""The causal structure's relations, written pair by pair where each applies
(`models.structure._relations`), against the matrix formulation they replace: every kind as a
dense mask, applied in `Relation`'s order, on random graphs that hold every kind; and its groups
against a union-find over the same owners, communicators and engines."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order

from models.structure import Relation, causal_structure

Index = npt.NDArray[np.int64]


def groups_by_union_find(n: int, candidates: Index, inputs: dict[str, npt.NDArray[np.generic]]) -> list[int]:
    """Per candidate, a representative of its group: candidates joined with their owners, ranks
    of one communicator (a rank's GPU by its owner's) and GPUs of one engine, transitively."""
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    def join(i: int, j: int) -> None:
        parent[find(i)] = find(j)

    owner, communicator, lockstep = (inputs.get(name) for name in ("owner", "communicator", "lockstep"))
    c = candidates.tolist()
    for i in c:
        if owner is not None:
            join(i, int(owner[i]))
        for j in c:
            if lockstep is not None and lockstep[i] >= 0 and lockstep[i] == lockstep[j]:
                join(i, j)
            if communicator is not None and owner is not None and j != i and j != owner[i]:
                mine = communicator[i] if communicator[i] >= 0 else communicator[owner[i]]
                if mine >= 0 and mine == communicator[j]:
                    join(i, j)
    return [find(i) for i in c]


def dense_relations(
    n: int, edges: Index, alerting: list[int], inputs: dict[str, npt.NDArray[np.generic]]
) -> tuple[Index, npt.NDArray[np.int8]]:
    """Candidates and relations as masks over every pair, each kind overriding the ones before."""
    source = n
    rows = np.concatenate([edges[:, 0], np.full(len(alerting), source)])
    cols = np.concatenate([edges[:, 1], np.asarray(alerting, np.int64)])
    adjacency = sp.csr_matrix((np.ones(rows.shape[0]), (rows, cols)), shape=(n + 1, n + 1))
    order = breadth_first_order(adjacency, source, directed=True, return_predecessors=False)
    c = np.sort(order[order != source])
    calls = adjacency[:n, :n][c][:, c].toarray() > 0
    k = c.shape[0]
    reach = np.eye(k, dtype=bool)
    for _ in range(k):  # transitive closure by repeated squaring of one step
        reach = reach | ((reach.astype(int) @ calls.astype(int)) > 0)
    siblings = (calls.T.astype(int) @ calls.astype(int)) > 0
    none = np.zeros(n, bool)
    virtual, network, engine = (inputs.get(name, none)[c] for name in ("virtual", "network", "engine"))
    owner = inputs.get("owner")
    services = (np.ones(k, bool) if owner is None else owner[c] == c) & ~virtual & ~network
    relation = np.zeros((k, k), np.int8)
    masks = [(siblings & services[:, None] & services[None, :], Relation.PEER)]
    communicator = inputs.get("communicator")
    if communicator is not None and owner is not None:
        rank_of = communicator[c]
        mine = np.where(rank_of >= 0, rank_of, communicator[owner[c]])
        same = (mine[:, None] == rank_of[None, :]) & (mine[:, None] >= 0)
        masks.append((same & (c[None, :] != c[:, None]) & (c[None, :] != owner[c][:, None]), Relation.COLLECTIVE))
    if "lockstep" in inputs:
        group = inputs["lockstep"][c]
        masks.append(((group[:, None] == group[None, :]) & (group[:, None] >= 0), Relation.LOCKSTEP))
    masks += [
        (calls & virtual[None, :], Relation.MEASURED),
        (calls & network[None, :], Relation.NETWORK),
        (reach.T, Relation.ANCESTOR),
        (reach.T & engine[None, :], Relation.ENGINE),
    ]
    for mask, kind in masks:
        relation[mask] = kind
    np.fill_diagonal(relation, Relation.NONE)
    return c, relation


def test_relations_written_where_they_apply_equal_the_dense_masks() -> None:
    rng = np.random.default_rng(11)
    seen: set[int] = set()
    grouped = 0  # cases where some candidates share a group
    for _ in range(200):
        n = int(rng.integers(1, 30))
        edges = rng.integers(0, n, (int(rng.integers(0, 3 * n + 1)), 2)).astype(np.int64)
        edges = edges[edges[:, 0] != edges[:, 1]]
        alerting = rng.choice(n, size=int(rng.integers(1, min(n, 3) + 1)), replace=False).tolist()
        network = rng.random(n) < 0.2
        inputs: dict[str, npt.NDArray[np.generic]] = {"network": network, "virtual": ~network & (rng.random(n) < 0.2)}
        if rng.random() < 0.7:
            inputs["owner"] = np.where(rng.random(n) < 0.7, np.arange(n), rng.integers(0, n, n)).astype(np.int64)
            inputs["communicator"] = np.where(rng.random(n) < 0.4, rng.integers(0, 3, n), -1).astype(np.int64)
        if rng.random() < 0.5:
            inputs["lockstep"] = np.where(rng.random(n) < 0.3, rng.integers(0, 2, n), -1).astype(np.int64)
        if rng.random() < 0.5:
            inputs["engine"] = rng.random(n) < 0.2
        structure = causal_structure(n, edges, alerting, **inputs)  # type: ignore[arg-type]
        candidates, relation = dense_relations(n, edges, alerting, inputs)
        assert np.array_equal(structure.candidates, candidates)
        assert np.array_equal(structure.relation, relation)
        assert np.array_equal(structure.related, np.flatnonzero(relation != Relation.NONE))
        groups = np.asarray(groups_by_union_find(n, candidates, inputs))
        same = groups[:, None] == groups[None, :]
        assert np.array_equal(structure.group[:, None] == structure.group[None, :], same)
        grouped += int((same & ~np.eye(same.shape[0], dtype=bool)).any())
        seen.update(np.unique(relation).tolist())
    assert seen == {int(kind) for kind in Relation}
    assert grouped > 50
