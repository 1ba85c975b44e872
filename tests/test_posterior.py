"""The exact posterior: the vectorised form against Pyro's enumeration; root attribution."""

from __future__ import annotations

import math
from dataclasses import replace

import networkx as nx
import numpy as np
import pytest
import torch

from models.enumeration import enumerated_posterior
from models.health import HealthParams, fault_peak, load_params, log_faulty, log_healthy
from models.posterior import distinct_columns, log_posterior, observed
from models.structure import Relation, StructureCache, causal_structure, evidence_structure
from rca.evidence.nodes import N_COLUMNS, N_FAULTS, WAIT, F, extract_evidence
from rca.telemetry.faults import Fault
from tests.spanfactory import T0
from tests.test_incidents_service import shop_graph

LAT, ERR, CS = F[Fault.LATENCY], F[Fault.ERRORS], F[Fault.CALL_STRUCTURE]


def _chain_scores(seed: int, n: int = 6) -> np.ndarray:
    rng = np.random.default_rng(seed)
    score = np.abs(rng.normal(0, 1.5, size=(n, N_COLUMNS)))
    score[:, 3:] = np.nan  # no LLM signals on most nodes
    score[n - 1, 3] = abs(rng.normal(0, 1))  # one GPU-ish node
    return score


# Call structure's faulty density as narrow as the shipped fit makes it: its ratio peaks early.
NARROW = HealthParams(fault_loc=(math.log(10.0),) * N_COLUMNS, fault_scale=(0.8, 0.8, 0.3, *(0.8,) * (N_COLUMNS - 3)))


@pytest.mark.parametrize(("seed", "tied"), [(0, False), (1, False), (2, False), (3, True), (4, True)])
def test_vectorised_posterior_equals_pyro_enumeration(seed: int, tied: bool) -> None:
    score = _chain_scores(seed)
    if tied:  # scores repeat (as the many zeros of a large graph): evaluated once per value
        score = np.round(score)
    score[2, LAT] = 14.0
    score[4, CS] = 40.0  # beyond call structure's peak: the root's own score is capped in both forms
    edges = np.array([[0, 1], [1, 2], [2, 3], [1, 4], [4, 5]])
    structure = causal_structure(6, edges, [0])
    params = replace(NARROW, temperature=1.7)
    closed = np.exp(log_posterior(score, structure, params))
    s, mask = (torch.from_numpy(a) for a in observed(score))
    pyro_probs = enumerated_posterior(
        s, mask, torch.from_numpy(structure.candidates), torch.from_numpy(structure.relation).to(torch.int64), params
    )
    assert np.allclose(closed, pyro_probs.numpy(), atol=1e-9)
    assert math.isclose(float(closed.sum()), 1.0, rel_tol=1e-9)


def test_distinct_columns_give_back_every_score() -> None:
    rng = np.random.default_rng(5)
    score = rng.choice([0.0, 0.0, 0.0, 1.5, 2.25, 7.0], size=(40, N_FAULTS)) + (rng.random((40, N_FAULTS)) < 0.1)
    values, at = distinct_columns(score)
    assert np.array_equal(np.take_along_axis(values, at, axis=0), score)
    for f in range(N_FAULTS):  # no value twice in a column, but its padding
        column = values[: len(np.unique(score[:, f])), f]
        assert np.array_equal(column, np.unique(score[:, f]))
    values, at = distinct_columns(np.zeros((0, N_FAULTS)))
    assert at.shape == (0, N_FAULTS) and values.shape == (1, N_FAULTS)


def test_deepest_anomalous_node_is_the_root_and_callers_are_explained() -> None:
    # 0 -> 1 -> 2 -> 3; node 2 is slow in itself, its callers show propagated errors.
    score = np.zeros((4, N_COLUMNS))
    score[:, 3:] = np.nan
    score[2, LAT] = 20.0
    score[1, ERR] = score[0, ERR] = 8.0
    score[2, ERR] = 8.0
    structure = causal_structure(4, np.array([[0, 1], [1, 2], [2, 3]]), [0])
    posterior = np.exp(log_posterior(score, structure, HealthParams()))
    node_p = posterior.sum(axis=1)
    assert int(np.argmax(node_p)) == 2
    assert node_p[2] > 0.8
    assert int(np.argmax(posterior[2])) == LAT


def test_a_stronger_anomaly_never_makes_a_root_less_likely() -> None:
    peak = fault_peak(NARROW)[CS]
    grid = np.linspace(0.0, 60.0, 601)[:, None].repeat(N_COLUMNS, axis=1)
    ratio = (log_faulty(grid, NARROW) - log_healthy(grid, NARROW))[:, CS]
    assert 4.0 < peak < 10.0 and ratio[-1] < ratio.max()  # uncapped, a huge shift would look healthier
    structure = causal_structure(2, np.zeros((0, 2), np.int64), [0, 1])
    root_p = []
    for strong in (peak, 2 * peak, 50.0):
        score = np.zeros((2, N_COLUMNS))
        score[0, CS], score[1, LAT] = strong, 6.0
        root_p.append(float(np.exp(log_posterior(score, structure, NARROW))[0].sum()))
    assert root_p[0] > 0.5 and np.allclose(root_p, root_p[0])


def test_classes_that_cannot_be_measured_get_no_mass() -> None:
    score = np.zeros((2, N_COLUMNS))
    score[:, 3:] = np.nan
    structure = causal_structure(2, np.array([[0, 1]]), [0])
    posterior = np.exp(log_posterior(score, structure, HealthParams()))
    assert posterior[:, 3:].sum() == 0.0
    assert posterior[:, :3].sum() == pytest.approx(1.0)


def test_candidates_are_what_the_alerting_node_depends_on() -> None:
    # 0 -> 1, 2 -> 3 (unconnected to the alert on 0)
    structure = causal_structure(4, np.array([[0, 1], [2, 3]]), [0])
    assert structure.candidates.tolist() == [0, 1]
    assert structure.paths([1, 0]) == [(1, 0), (0,)]
    assert structure.relation.tolist() == [[Relation.NONE, Relation.NONE], [Relation.ANCESTOR, Relation.NONE]]


@pytest.mark.parametrize("seed", range(20))
def test_ancestors_and_peers_are_what_networkx_finds_in_a_graph_with_cycles(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 40))
    edges = rng.integers(0, n, (int(rng.integers(1, 3 * n)), 2))
    alerting = sorted(set(rng.integers(0, n, 2).tolist()))
    structure = causal_structure(n, edges, alerting)
    graph = nx.DiGraph(edges.tolist())
    graph.add_nodes_from(range(n))
    reachable = set(alerting).union(*(nx.descendants(graph, a) for a in alerting))
    assert structure.candidates.tolist() == sorted(reachable)
    for r, root in enumerate(structure.candidates.tolist()):
        for i, node in enumerate(structure.candidates.tolist()):
            callers = set(graph.predecessors(root)) & set(graph.predecessors(node)) & reachable
            expected = (
                Relation.NONE
                if node == root
                else Relation.ANCESTOR
                if nx.has_path(graph, node, root)
                else Relation.PEER
                if callers
                else Relation.NONE
            )
            assert structure.relation[r, i] == expected, (root, node)


def test_siblings_are_peers_only_where_both_are_services_of_their_own() -> None:
    # An engine (0) calls two replicas of a service (1, 2), a GPU it owns (3) and its host (4).
    edges = np.array([[0, 1], [0, 2], [0, 3], [0, 4]])
    relation = causal_structure(5, edges, [0], owner=np.array([0, 1, 2, 0, 4])).relation
    assert relation[1, 2] == relation[2, 1] == Relation.PEER  # replicas take each other's shed load
    for gpu, other in ((3, 4), (3, 1)):  # a GPU is no replica of its host or of a service
        assert relation[gpu, other] == relation[other, gpu] == Relation.NONE
    assert relation[1, 4] == Relation.PEER  # both their own owners


def test_a_callee_seen_only_through_the_roots_client_spans_is_explained_by_it() -> None:
    # 0 -> 1 (service) -> 2 (virtual: redis). 1 errors in itself; its redis client spans error too.
    score = np.zeros((3, N_COLUMNS))
    score[:, 3:] = np.nan
    score[1, ERR] = score[2, ERR] = 12.0
    virtual = np.array([False, False, True])
    structure = causal_structure(3, np.array([[0, 1], [1, 2]]), [0], virtual=virtual)
    assert structure.relation[1, 2] == Relation.MEASURED
    node_p = np.exp(log_posterior(score, structure, HealthParams())).sum(axis=1)
    assert int(np.argmax(node_p)) == 1


def test_tensor_parallel_peers_waiting_on_a_slow_rank_point_to_it() -> None:
    # engine 0 calls workers 1, 2, 3 (NCCL); worker 2's GPU (node 4) is slow; peers 1 and 3 wait.
    score = np.full((5, N_COLUMNS), np.nan)
    score[:, :3] = 0.0
    nccl, gpu = F[Fault.NCCL_COMMUNICATION], F[Fault.GPU_MEMORY_BANDWIDTH]
    score[1:4, nccl] = 0.0
    score[1:4, WAIT] = [9.0, 0.0, 9.0]  # the slow rank's peers wait for it in every collective; it does not
    score[4, gpu] = 15.0
    communicator = np.array([-1, 0, 0, 0, -1])
    owner = np.array([0, 1, 2, 3, 2])
    edges = np.array([[0, 1], [0, 2], [0, 3], [2, 4]])
    structure = causal_structure(5, edges, [0], communicator=communicator, owner=owner)
    assert structure.relation[4, 1] == structure.relation[4, 3] == Relation.COLLECTIVE
    assert structure.relation[1, 3] == Relation.COLLECTIVE
    posterior = np.exp(log_posterior(score, structure, HealthParams()))
    assert int(np.argmax(posterior.sum(axis=1))) == 4
    assert int(np.argmax(posterior[4])) == gpu


def test_quiet_peers_of_a_loud_rank_count_as_one_missing_stall() -> None:
    """Engine 0 calls a microservice (1) and eight tensor-parallel ranks (2-9, one communicator).
    Rank 5's own NCCL signal is loud (a slow point-to-point link, which stalls no collective) and
    its peers are quiet; the microservice is moderately slow. Whether the fault stalled the
    communicator is summed out for the group, so seven quiet peers count once: read rank by rank
    (a stall almost certain), each would count against the rank and the microservice would win."""
    score = np.full((10, N_COLUMNS), np.nan)
    score[:, :3] = 0.0
    nccl = F[Fault.NCCL_COMMUNICATION]
    score[2:, nccl] = score[2:, WAIT] = 0.0
    score[5, nccl], score[1, LAT] = 25.0, 4.6
    communicator = np.array([-1, -1, *(0,) * 8])
    edges = np.array([[0, k] for k in range(1, 10)])
    structure = causal_structure(10, edges, [0], communicator=communicator, owner=np.arange(10))
    assert (structure.relation[5, [2, 3, 4, 6, 7, 8, 9]] == Relation.COLLECTIVE).all()
    served = load_params()
    posterior = np.exp(log_posterior(score, structure, served))
    assert int(np.argmax(posterior.sum(axis=1))) == 5 and int(np.argmax(posterior[5])) == nccl
    rank_by_rank = replace(served, stall_rate=(1.0 - 1e-9,) * N_FAULTS)
    assert int(np.argmax(np.exp(log_posterior(score, structure, rank_by_rank)).sum(axis=1))) == 1


def test_the_prior_weighs_each_measurable_class_by_its_rate() -> None:
    """The class rates multiply each (node, class) entry's posterior by its class's rate: a node
    measurable in more classes gains, and the same evidence otherwise decides."""
    score = _chain_scores(3)
    score[0, ERR] = score[1, CS] = np.nan  # nodes measurable in different numbers of classes
    structure = causal_structure(6, np.array([[0, 1], [1, 2], [2, 3], [1, 4], [4, 5]]), [0])
    rates = np.array([4.0, 0.5, 0.25, *(1.0,) * (N_FAULTS - 3)])
    uniform = log_posterior(score, structure, HealthParams())
    weighted = log_posterior(score, structure, HealthParams(class_rate=tuple(rates)))
    finite = np.isfinite(uniform)
    assert (np.isfinite(weighted) == finite).all()
    expected = uniform + np.log(rates)[None, :]
    expected -= np.log(np.exp(expected[finite]).sum())
    assert np.allclose(weighted[finite], expected[finite])
    with_three = np.isfinite(uniform[:, :3]).all(axis=1)
    assert with_three.any() and not with_three.all()


def test_a_structure_is_reused_only_for_the_same_nodes_edges_and_alerts() -> None:
    graph = shop_graph()
    evidence = extract_evidence(graph, start_ns=T0 - 300 * 10**9, end_ns=graph.newest_ns + 1)
    cache, alert = StructureCache(), [evidence.nodes[0]]
    first = cache.get(evidence, alert)
    rescored = replace(evidence, score=evidence.score * 2.0)  # the structure reads no scores
    assert cache.get(rescored, alert) is first
    assert cache.get(evidence, [evidence.nodes[1]]) is not first
    fewer = replace(evidence, edges=evidence.edges[1:])
    rebuilt = cache.get(fewer, alert)
    assert rebuilt is not first
    same = evidence_structure(fewer, alert)
    assert np.array_equal(rebuilt.relation, same.relation) and np.array_equal(rebuilt.candidates, same.candidates)
    with pytest.raises(ValueError):
        rebuilt.relation[0, 0] = Relation.PEER  # shared between rankings: read-only
