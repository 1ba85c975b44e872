"""Unrelated services that drift while a fault plays out (`simulation.drifts`): what each kind
changes, where and when, and what a draw may pick."""

from __future__ import annotations

import numpy as np
import pytest

from rca.telemetry.faults import Fault
from simulation import simulate
from simulation.calltree import expand
from simulation.drifts import NO_DRIFTS, Drift, DriftKind, Drifts
from simulation.faults import FaultPlan
from simulation.generator import generate_invocations
from simulation.invocations import SEQ
from simulation.profiles import DEFAULT
from simulation.scenarios import compiled
from simulation.traffic import Hiccups, Traffic

SECOND = 1_000_000_000
STOP = 120 * SECOND


def _boutique_case(drifts: Drifts) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(service, span seconds, error, start) per invocation of two minutes of boutique traffic
    with a latency fault on cartservice, the same draws but for `drifts`."""
    ct = compiled("boutique")
    cart = ct.service_index["cartservice"]
    plan = FaultPlan(Fault.LATENCY, "cartservice", "cartservice", cart, 0, STOP, 2.0)
    traffic = Traffic(0, STOP, 40.0, 300.0, 0.0)
    calm = Hiccups.draw([], 0, STOP, np.random.default_rng(1))
    _, inv, _, _ = generate_invocations(ct, (plan,), traffic, calm, np.random.default_rng(7), None, drifts)
    return ct.op_service[inv.op], (inv.end_ns - inv.start_ns) / 1e9, inv.error, inv.start_ns


def test_a_slow_drift_slows_its_service_in_its_window_and_nothing_else() -> None:
    ct = compiled("boutique")
    ad = ct.service_index["adservice"]
    slow = Drifts((Drift(ad, DriftKind.SLOW, 60 * SECOND, STOP, 2.5),))
    service, base, _, start = _boutique_case(NO_DRIFTS)
    _, drifted, _, _ = _boutique_case(slow)
    inside = (service == ad) & (start >= 65 * SECOND)  # a span starts after its request arrives
    before = (service == ad) & (start < 55 * SECOND)
    assert inside.sum() > 50 and before.sum() > 50
    assert np.allclose(drifted[inside], 2.5 * base[inside], rtol=1e-6, atol=2e-9)  # a leaf: its span is its self time
    others = ~np.isin(service, [ad, ct.service_index["frontend"]])  # but adservice and its caller
    assert np.array_equal(drifted[others], base[others])  # the draws are the same elsewhere
    assert np.array_equal(drifted[before], base[before])


def test_an_errors_drift_fails_its_share_of_the_services_requests() -> None:
    ct = compiled("boutique")
    currency = ct.service_index["currencyservice"]
    failing = Drifts((Drift(currency, DriftKind.ERRORS, 0, STOP, 0.3),))
    service, _, base, _ = _boutique_case(NO_DRIFTS)
    _, _, drifted = _boutique_case(failing)[:3]
    own = service == currency
    assert own.sum() > 300
    assert 0.22 < drifted[own].mean() - base[own].mean() < 0.38


def test_a_calls_drift_makes_its_operation_send_that_call_less_often_while_it_lasts() -> None:
    ct = compiled("boutique")
    op = ct.op_index[("frontend", "GET /product/{id}")]
    drift = Drifts((Drift(ct.service_index["frontend"], DriftKind.CALLS, 0, SECOND, 0.25, op, 1),))
    arrivals = np.concatenate([np.zeros(2000, np.int64), np.full(2000, 2 * SECOND)])  # during, then after
    tree = expand(ct, None, np.random.default_rng(7), np.full(4000, op), arrivals, drifts=drift)
    roots = np.flatnonzero(tree.parent < 0)
    child = (tree.parent >= 0) & (tree.parent < roots.shape[0])
    made = np.zeros((roots.shape[0], len(ct.calls[op])), np.bool_)
    made[tree.parent[child], tree.seq[child] // SEQ] = True
    during, after = made[:2000], made[2000:]
    assert 0.2 < during[:, 1].mean() < 0.3 and after[:, 1].all()  # the call is made on every request (p = 1)
    assert during[:, 0].all() and during[:, 2:].all()  # the operation's other calls are untouched


def test_drifts_fall_on_distinct_services_that_no_root_runs_on_and_no_engine() -> None:
    for scenario in ("boutique-latency", "llm-gpu_memory_bandwidth-double", "mesh200-errors"):
        counts = []
        for seed in range(1, 13):
            truth = simulate(scenario, seed=seed, rate=5.0).truth
            counts.append(len(truth.drifting))
            assert len(set(truth.drifting)) == len(truth.drifting)
            assert not {r.service for r in truth.roots} & set(truth.drifting)
            assert not any(s.startswith(("vllm-worker", "vllm-engine")) for s in truth.drifting)
        assert set(counts) <= set(range(*DEFAULT.drifts)) and len(set(counts)) > 1


def test_drifts_leave_the_fault_and_the_healthy_levels_as_they_were(monkeypatch: pytest.MonkeyPatch) -> None:
    seed = next(s for s in range(1, 20) if simulate("boutique-latency", seed=s, rate=5.0).truth.drifting)
    drifting = simulate("boutique-latency", seed=seed, rate=5.0)
    monkeypatch.setattr(Drifts, "draw", staticmethod(lambda *_: NO_DRIFTS))
    calm = simulate("boutique-latency", seed=seed, rate=5.0)
    assert calm.truth.drifting == () and drifting.truth.drifting
    assert calm.truth.roots == drifting.truth.roots and calm.truth.hot_services == drifting.truth.hot_services
    assert calm.truth.end_ns == drifting.truth.end_ns and calm.start_ns == drifting.start_ns
