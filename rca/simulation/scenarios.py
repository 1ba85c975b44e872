"""Scenario names and `simulate`: one seeded fault-injection case end to end."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import numpy as np

from rca.ranking import Fault
from rca.simulation.alerts import decide_alerts, notifications
from rca.simulation.case import SimulatedCase, Truth
from rca.simulation.columns import chunks
from rca.simulation.faults import LLM_FAULTS, Variant, plan_fault
from rca.simulation.generator import generate_invocations
from rca.simulation.logs import log_chunks, write_logs
from rca.simulation.mesh import mesh
from rca.simulation.topologies import boutique, llm
from rca.simulation.topology import CompiledTopology, Topology
from rca.simulation.traffic import Hiccups, Traffic

BATCH_SECONDS = 5.0
ANCHOR_NS = 1_767_571_200 * 1_000_000_000  # 2026-01-05T00:00:00Z
_ANCHOR_SPREAD_S = 30 * 86_400
_RECOVERY_S = 120  # traffic after the fault, for the resolved notifications
_LOG_STREAM = 1  # the log writer's own random stream

TOPOLOGIES: dict[str, Callable[[], Topology]] = {
    "llm": llm,
    "boutique": boutique,
    "mesh200": lambda: mesh(200),
    "mesh1000": lambda: mesh(1000),
}
_GENERIC = (Fault.LATENCY, Fault.ERRORS, Fault.CALL_STRUCTURE)
_HARD = {
    "llm": ("nccl_communication-peers",),
    "boutique": ("latency-partial", "errors-partial"),
    "mesh200": ("errors-lowtraffic", "latency-lowtraffic"),
}
SCENARIOS: tuple[str, ...] = tuple(
    f"{topology}-{name}"
    for topology in TOPOLOGIES
    for name in (*_GENERIC, *(sorted(LLM_FAULTS) if topology == "llm" else ()), *_HARD.get(topology, ()))
)


@cache
def compiled(topology: str) -> CompiledTopology:
    return CompiledTopology(TOPOLOGIES[topology]())


def parse(scenario: str) -> tuple[str, Fault, Variant]:
    """`{topology}-{fault}[-{variant}]` → its parts; ValueError naming the known scenarios."""
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}")
    topology, fault, *variant = scenario.split("-")
    return topology, Fault(fault), Variant(variant[0] if variant else "")


def default_start_ns(seed: int) -> int:
    """A fixed event-time anchor per seed (whole seconds, spread over 30 days and the day's hours)."""
    return ANCHOR_NS + (seed * 7_919 % _ANCHOR_SPREAD_S) * 1_000_000_000


def simulate(scenario: str, *, seed: int, start_ns: int | None = None, rate: float | None = None) -> SimulatedCase:
    """One case: ~6 min of normal traffic, the fault for ~4 min, 2 min of recovery; `rate` is the
    mean requests per second (default: the topology's, ~20-60k spans a case). Deterministic per seed."""
    topology, fault, variant = parse(scenario)
    ct = compiled(topology)
    rng = np.random.default_rng([seed, SCENARIOS.index(scenario)])
    start = default_start_ns(seed) if start_ns is None else start_ns
    inject = start + int(rng.uniform(330, 390)) * 1_000_000_000
    end = inject + int(rng.uniform(210, 270)) * 1_000_000_000
    stop = end + _RECOVERY_S * 1_000_000_000
    plan = plan_fault(ct, fault, variant, inject, end, rng)
    requests = ct.topology.default_rate if rate is None else rate
    if requests <= 0:
        raise ValueError(f"rate must be positive, got {requests}")
    traffic = Traffic(start, stop, requests, float(rng.uniform(240, 600)), float(rng.uniform(0, 2 * np.pi)))
    noisy = [ct.service_index[s] for s in ct.topology.noisy]
    batch, invocations = generate_invocations(ct, plan, traffic, Hiccups.draw(noisy, start, stop, rng), rng)
    alerts = decide_alerts(batch, ct.topology.user_facing, inject, end, rng)
    sent = notifications(alerts, rng)
    log_rng = np.random.default_rng([seed, SCENARIOS.index(scenario), _LOG_STREAM])  # spans stay as they were
    logs = write_logs(ct, plan, invocations, start, stop, log_rng)
    truth = Truth(
        scenario=scenario,
        seed=seed,
        topology=topology,
        fault=str(fault),
        node=plan.node,
        service=plan.service,
        inject_ns=inject,
        end_ns=end,
        alert_services=tuple(dict.fromkeys(a.service for a in alerts)),
        services=len(ct.services),
    )
    return SimulatedCase(
        truth=truth,
        batches=chunks(batch, start, BATCH_SECONDS),
        logs=log_chunks(logs, start, BATCH_SECONDS),
        webhooks=tuple(n.body for n in sent),
        webhook_times_ns=tuple(n.sent_ns for n in sent),
        start_ns=start,
        end_ns=max(stop, int(batch.end_ns.max()) + 1, int(logs.time_ns.max(initial=0)) + 1),
    )
