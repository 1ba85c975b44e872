"""Several roots at once (`models.multiroot`): the closed form against Pyro's enumeration, two
unrelated simulated faults in one window named together (in process and through the API), and
single faults left alone."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient

from benchmarks.nezha import shift_batch
from models.enumeration import log_evidence, single_root_model, two_root_marginals, two_root_model
from models.health import HealthParams, load_params
from models.multiroot import EXTRA_ROOT_PRIOR, compare_roots
from models.posterior import log_posterior, observed
from models.ranker import BayesianRanker
from models.structure import CausalStructure, Relation, causal_structure
from rca.evidence.nodes import N_COLUMNS, N_FAULTS, F
from rca.graph.service_graph import ServiceGraph
from rca.ranking.causes import Ranking
from rca.telemetry.alerts import format_rfc3339, parse_rfc3339_ns
from rca.telemetry.faults import Fault
from rca.telemetry.spans import SpanBatch
from simulation import simulate
from simulation.case import SimulatedCase
from storage.ranking_codec import ranking_from_bytes, ranking_to_bytes
from tests.apiapp import api_app

LOOKBACK_NS = 300 * 1_000_000_000
PAST_ALERT_NS = 60 * 1_000_000_000  # spans up to a minute past the first alert, as rca bench replays
LAT, ERR, CS = F[Fault.LATENCY], F[Fault.ERRORS], F[Fault.CALL_STRUCTURE]
ENTRY_KEYS = {"node", "service", "fault", "probability"}


@pytest.fixture
def float64() -> Any:
    """Pyro's enumeration in double precision (the closed form's)."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(before)


def _chain(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """0 -> 1 -> 2 -> 3, 1 -> 4 -> 5, 0 -> 6: noise, two faulty nodes (2 slow, 5 erroring) and a
    call-structure score past its peak on 6."""
    score = np.abs(np.random.default_rng(seed).normal(0, 1.5, size=(7, N_COLUMNS)))
    score[:, 3:] = np.nan
    score[5, 3] = 1.0
    score[2, LAT], score[5, ERR], score[6, CS] = 14.0, 12.0, 40.0
    return score, np.array([[0, 1], [1, 2], [2, 3], [1, 4], [4, 5], [0, 6]])


# node 3 is node 2's (its GPU, say); nodes 4 and 6 are ranks of one communicator
GROUPED = {"owner": np.array([0, 1, 2, 2, 4, 5, 6]), "communicator": np.array([-1, -1, -1, -1, 0, -1, 0])}


@pytest.mark.usefixtures("float64")
@pytest.mark.parametrize(
    ("seed", "params", "grouped"),
    [(0, HealthParams(), False), (1, HealthParams(), False), (0, load_params(), False), (0, load_params(), True)],
)
def test_closed_form_equals_pyro_enumeration(seed: int, params: HealthParams, grouped: bool) -> None:
    score, edges = _chain(seed)
    structure = causal_structure(7, edges, [0], **(GROUPED if grouped else {}))  # type: ignore[arg-type]
    assert np.unique(structure.group).shape[0] == (5 if grouped else 7)
    log_post = log_posterior(score, structure, params)
    top = 5
    compared = compare_roots(score[structure.candidates], structure, log_post, params, top=top)
    assert compared is not None

    roots, classes = np.divmod(np.argsort(-log_post, axis=None, kind="stable")[:top], N_FAULTS)
    s, mask = (torch.from_numpy(a) for a in observed(score[structure.candidates]))
    relation = torch.from_numpy(structure.relation).to(torch.int64)
    group = torch.from_numpy(structure.group)
    pair_args = (s, mask, relation, group, torch.from_numpy(roots), torch.from_numpy(classes), params)
    one = log_evidence(single_root_model, s, mask, torch.arange(7), relation, params)
    two = log_evidence(two_root_model, *pair_args)
    prior_odds = math.log(EXTRA_ROOT_PRIOR) - math.log1p(-EXTRA_ROOT_PRIOR)
    assert compared.log_odds == pytest.approx(prior_odds + two - one, abs=1e-4)

    # P(node is one of the roots) = P(first root on it) + P(second root on it): never both
    first_root, second_root = two_root_marginals(*pair_args)
    first = first_root.reshape(7, N_FAULTS).sum(-1).numpy()
    second = np.bincount(roots, weights=second_root.numpy(), minlength=7)
    probability = np.zeros(7)
    probability[compared.nodes] = compared.probability
    np.testing.assert_allclose(probability, first + second, atol=1e-6)
    assert probability.sum() == pytest.approx(2.0)


LOCKSTEP_GROUPS = ([0, 1, 2], [3, 4])  # a communicator's ranks, an engine's GPUs


def _lockstep_case(rng: np.random.Generator, n: int = 7) -> tuple[np.ndarray, CausalStructure]:
    """Random scores and relations over `n` candidates where two groups are in lockstep with each
    other (communicator ranks, engine GPUs) and related to the rest in every other way, so that
    a root's group holds nodes the other root reaches."""
    score = rng.exponential(1.5, (n, N_COLUMNS))
    score[rng.random(score.shape) < 0.1] = 15.0
    score[rng.random(score.shape) < 0.3] = np.nan
    other = [r for r in Relation if r not in (Relation.COLLECTIVE, Relation.LOCKSTEP)]
    relation = rng.choice(other, (n, n)).astype(np.int8)
    for members in LOCKSTEP_GROUPS:
        for a in members:
            relation[a, members] = rng.choice([Relation.COLLECTIVE, Relation.LOCKSTEP], len(members))
    np.fill_diagonal(relation, Relation.NONE)
    group = np.arange(n)
    for members in LOCKSTEP_GROUPS:
        group[members] = members[0]
    return score, CausalStructure(np.arange(n), relation, np.full(n, -1), np.unique(group, return_inverse=True)[1])


@pytest.mark.usefixtures("float64")
@pytest.mark.parametrize("seed", range(4))
def test_closed_form_equals_pyro_enumeration_with_lockstep_groups(seed: int) -> None:
    rng = np.random.default_rng(seed)
    score, structure = _lockstep_case(rng)
    s, mask = (torch.from_numpy(a) for a in observed(score))
    relation = torch.from_numpy(structure.relation).to(torch.int64)
    odds = []
    for stall_rate in (0.2, 0.9):  # how often a root's fault stalls its group: it moves the odds
        params = replace(load_params(), stall_rate=(stall_rate,) * N_FAULTS, temperature=1.7)
        log_post = log_posterior(score, structure, params)
        compared = compare_roots(score, structure, log_post, params, top=4)
        assert compared is not None
        roots, classes = np.divmod(np.argsort(-log_post, axis=None, kind="stable")[:4], N_FAULTS)
        pair_args = (s, mask, relation, torch.from_numpy(structure.group), torch.from_numpy(roots))
        pair_args += (torch.from_numpy(classes), params)
        one = log_evidence(single_root_model, s, mask, torch.arange(7), relation, params)
        two = log_evidence(two_root_model, *pair_args)
        prior_odds = math.log(EXTRA_ROOT_PRIOR) - math.log1p(-EXTRA_ROOT_PRIOR)
        assert compared.log_odds == pytest.approx(prior_odds + two - one, abs=1e-6)
        first_root, second_root = two_root_marginals(*pair_args)
        probability = np.zeros(7)
        probability[compared.nodes] = compared.probability
        expected = first_root.reshape(7, N_FAULTS).sum(-1).numpy() + np.bincount(roots, second_root.numpy(), 7)
        np.testing.assert_allclose(probability, expected, atol=1e-9)
        odds.append(compared.log_odds)
    assert abs(odds[0] - odds[1]) > 1e-3


def _two_faulty(erroring: float) -> tuple[np.ndarray, np.ndarray]:
    """The chain with node 2 slow and node 5 erroring (`erroring`: its error score), all else quiet;
    gross faults, since the posterior is tempered (a moderate second fault may not beat its prior)."""
    score, edges = _chain(0)
    score[:, :3] = 0.0
    score[2, LAT], score[5, ERR] = 30.0, erroring
    return score, edges


def test_two_faulty_nodes_win_over_one_and_are_named_with_their_classes() -> None:
    score, edges = _two_faulty(erroring=30.0)
    structure = causal_structure(7, edges, [0])
    params = load_params()
    compared = compare_roots(score, structure, log_posterior(score, structure, params), params)
    assert compared is not None and compared.log_odds > 0.0
    assert dict(zip(compared.nodes[:2].tolist(), compared.classes[:2].tolist(), strict=True)) == {2: LAT, 5: ERR}
    assert compared.probability[:2].min() > 0.9 and compared.probability.max() <= 1.0


def test_two_faulty_nodes_of_one_service_are_not_two_roots() -> None:
    # the same evidence, but node 5 is node 2's (say its GPU): one service, whose nodes the
    # evidence can't tell apart as two roots; what is left over is not worth a second root
    score, edges = _two_faulty(erroring=30.0)
    owner = np.array([0, 1, 2, 3, 4, 2, 6])
    structure = causal_structure(7, edges, [0], owner=owner)
    params = load_params()
    compared = compare_roots(score, structure, log_posterior(score, structure, params), params)
    assert compared is not None and compared.log_odds < 0.0
    assert {2, 5} not in [set(compared.nodes[:2].tolist())]


def test_one_faulty_node_keeps_the_single_root() -> None:
    score, edges = _two_faulty(erroring=0.0)
    structure = causal_structure(7, edges, [0])
    for params in (HealthParams(), load_params()):
        compared = compare_roots(score, structure, log_posterior(score, structure, params), params)
        assert compared is not None and compared.log_odds < 0.0


def test_a_single_candidate_has_no_pair_to_weigh() -> None:
    score = np.full((1, N_COLUMNS), 5.0)
    structure = causal_structure(1, np.zeros((0, 2), np.int64), [0])
    params = load_params()
    assert compare_roots(score, structure, log_posterior(score, structure, params), params) is None


def test_a_node_and_what_it_is_reported_as_count_once() -> None:
    # 0 -> 1 -> 2, where 2 stands for 1 (a network node reported as its callee)
    score = np.zeros((3, N_COLUMNS))
    score[:, 3:] = np.nan
    score[1, ERR], score[2, LAT] = 12.0, 12.0
    structure = causal_structure(3, np.array([[0, 1], [1, 2]]), [0])
    params = load_params()
    log_post = log_posterior(score, structure, params)
    compared = compare_roots(score, structure, log_post, params, report=np.array([0, 1, 1]))
    assert compared is not None
    assert 2 not in compared.nodes.tolist()
    assert compared.probability.max() <= 1.0
    with pytest.raises(ValueError, match="extra_root_prior"):
        compare_roots(score, structure, log_post, params, extra_root_prior=1.0)


# -- simulated faults ---------------------------------------------------------------------------


def _alerts_ns(case: SimulatedCase) -> list[int]:
    return [parse_rfc3339_ns(str(a["startsAt"])) or 0 for w in case.webhooks for a in w["alerts"]]  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Overlaid:
    """Simulated cases in one event time, each later one moved so that its fault starts with the
    first's (fresh trace and span ids), with every alert moved alike."""

    batches: tuple[SpanBatch, ...]
    alerts: tuple[dict[str, Any], ...]
    alert_ns: int  # the earliest alert
    services: tuple[str, ...]  # the alerting services
    roots: tuple[str, ...]  # the injected faults' nodes


def overlaid(*cases: SimulatedCase) -> Overlaid:
    batches: list[SpanBatch] = []
    alerts: list[dict[str, Any]] = []
    for salt, case in enumerate(cases):
        shift = cases[0].truth.inject_ns - case.truth.inject_ns
        batches += [shift_batch(b, shift, salt) if salt else b for b in case.batches]
        for webhook in case.webhooks:
            for alert in webhook["alerts"]:  # type: ignore[attr-defined]
                moved = format_rfc3339((parse_rfc3339_ns(alert["startsAt"]) or 0) + shift)
                alerts.append({**alert, "startsAt": moved})
    first = min(min(_alerts_ns(c)) + cases[0].truth.inject_ns - c.truth.inject_ns for c in cases)
    batches.sort(key=lambda b: int(b.start_ns.min()) if len(b) else 0)
    services = tuple(dict.fromkeys(s for c in cases for s in c.truth.alert_services))
    return Overlaid(tuple(batches), tuple(alerts), first, services, tuple(c.truth.node for c in cases))


def _ranked(case: Overlaid) -> Ranking:
    """The ranking when the first alert arrives with a minute more of spans."""
    graph = ServiceGraph(retention_seconds=3600.0)
    cut = case.alert_ns + PAST_ALERT_NS
    for b in case.batches:
        graph.add(b.ended_before(cut))
    start, end = case.alert_ns - LOOKBACK_NS, graph.newest_ns + 1
    return BayesianRanker().rank(graph, alert_nodes=case.services, start_ns=start, end_ns=end)


def _contract_entries(entries: list[dict[str, Any]]) -> None:
    faults = {f.value for f in Fault}
    for entry in entries:
        assert set(entry) == ENTRY_KEYS
        assert isinstance(entry["node"], str) and isinstance(entry["service"], str)
        assert entry["fault"] in faults and 0.0 <= entry["probability"] <= 1.0
    probabilities = [e["probability"] for e in entries]
    assert probabilities == sorted(probabilities, reverse=True)


DOUBLE_FAULTS = [("llm-gpu_memory_bandwidth", "boutique-errors", 1)]


@pytest.mark.parametrize(("llm", "boutique", "seed"), DOUBLE_FAULTS)
def test_an_llm_fault_and_a_microservice_fault_together_are_both_named(llm: str, boutique: str, seed: int) -> None:
    case = overlaid(simulate(llm, seed=seed), simulate(boutique, seed=seed))
    ranking = _ranked(case)
    assert ranking.simultaneous, "two unrelated faults in one window, but no several roots"
    named = {root.node: root for root in ranking.simultaneous}
    assert all(named[root].probability > 0.5 for root in case.roots if root in named)
    assert set(case.roots) <= set(named)
    assert ranking.causes[0].node in case.roots
    assert all(0.0 <= root.probability <= 1.0 for root in ranking.simultaneous)
    assert ranking_from_bytes(ranking_to_bytes(ranking)) == ranking  # stored with the ranking, exactly


# Held-out seeds (the shipped parameters were fitted on seeds 1 and 2), both topologies. Over every
# single-fault scenario and seeds 101-103, 1 of 63 rankings named several roots (boutique-errors
# 101: cartservice, and one of its callers for what their errors leave unexplained; a NUMA fault
# read as its process and its host, one service, did too until pairs within a group were left
# out), so at most 1 of these 21.
SINGLE_FAULTS = [
    "llm-latency",
    "llm-errors",
    "llm-gpu_memory_bandwidth",
    "llm-nccl_communication",
    "boutique-latency",
    "boutique-errors",
    "boutique-call_structure",
]


def test_single_faults_are_seldom_split_into_several_roots() -> None:
    several = [
        (s, seed)
        for s in SINGLE_FAULTS
        for seed in (101, 102, 103)
        if _ranked(overlaid(simulate(s, seed=seed))).simultaneous
    ]
    assert len(several) <= 1, several


API_DOUBLE = ("llm-nccl_communication-double", 1)  # the simulator's NCCL fault with a microservice fault


def test_the_api_serves_several_roots_in_the_contract_shape(tmp_path: Path) -> None:
    """Spans up to a minute past the first alert, then one webhook with every alert of both
    faults: one incident (the faults share a graph), whose causes carry both roots."""
    simulated = simulate(*API_DOUBLE[:1], seed=API_DOUBLE[1])
    case = overlaid(simulated)
    cut = case.alert_ns + PAST_ALERT_NS
    body = {"version": "4", "status": "firing", "receiver": "rca", "alerts": list(case.alerts)}
    with api_app(tmp_path / "rca.db") as (app, writer):
        for b in case.batches:
            writer.submit(b.ended_before(cut))
        client = TestClient(app)
        answer = client.post("/webhooks/alertmanager", json=body)
        assert answer.status_code == 200, answer.text
        (incident,) = answer.json()["incidents"]
        causes = client.get(f"/incidents/{incident['id']}/causes").json()
    assert "simultaneous" in causes
    _contract_entries(causes["simultaneous"])
    roots = {root.node for root in simulated.truth.roots}
    assert len(roots) == 2
    assert roots <= {e["node"] for e in causes["simultaneous"] if e["probability"] > 0.5}
