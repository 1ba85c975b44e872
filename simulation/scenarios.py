"""Scenario names and `simulate`: one seeded fault-injection case end to end."""

from __future__ import annotations

import zlib
from dataclasses import replace
from functools import cache

import numpy as np

from rca.telemetry.faults import Fault
from rca.telemetry.metrics import MetricBatch
from simulation.alerts import decide_alerts, notifications
from simulation.attributes import SpanAttributes
from simulation.case import Root, SimulatedCase, Truth
from simulation.columns import chunks
from simulation.conditions import Conditions
from simulation.drifts import Drifts
from simulation.engines import NCCL_OPS
from simulation.faults import LLM_FAULTS, SECOND, FaultPlan, Variant, plan_fault, plan_second_root
from simulation.generator import generate_invocations
from simulation.logs import log_chunks, write_logs
from simulation.mesh import mesh
from simulation.profiles import PROFILES, Profile, profile_named
from simulation.real_style import STYLES, metric_chunks, real_physics, real_root, real_telemetry
from simulation.replica_names import REPLICA_NAMES, renamed, shared_names
from simulation.topologies import LlmLayout, boutique, llm
from simulation.topology import CompiledTopology
from simulation.traffic import Hiccups, Traffic

BATCHSECONDS = 5.0
ANCHOR_NS = 1_767_571_200 * 1_000_000_000  # 2026-01-05T00:00:00Z
_ANCHOR_SPREAD_S = 30 * 86_400
_RECOVERY_S = 120  # traffic after the fault, for the resolved notifications
_LOG_STREAM = 1  # the log writer's own random stream
_REAL_STREAM = 2  # the real style's own stream (the physics: the conventions style's but for `real_physics`)
_DRIFT_STREAM = 3  # the unrelated services' drifts (`simulation.drifts`)

TOPOLOGIES = ("llm", "boutique", "mesh200", "mesh1000")
_GENERIC = (Fault.LATENCY, Fault.ERRORS, Fault.CALL_STRUCTURE)
_EXTRA = {
    "llm": (
        "latency-datastore",
        "errors-datastore",
        "nccl_communication-peers",
        *(f"{f}-double" for f in sorted(LLM_FAULTS)),
    ),
    "boutique": ("latency-partial", "errors-partial"),
    "mesh200": ("errors-lowtraffic", "latency-lowtraffic"),
}
SCENARIOS: tuple[str, ...] = tuple(
    f"{topology}-{name}"
    for topology in TOPOLOGIES
    for name in (*_GENERIC, *(sorted(LLM_FAULTS) if topology == "llm" else ()), *_EXTRA.get(topology, ()))
)


@cache
def compiled(topology: str, layout: LlmLayout | None = None, variant: int = 0) -> CompiledTopology:
    """The topology (an LLM one as `layout` deploys it, a mesh wired as `variant`), compiled."""
    if topology == "llm":
        return CompiledTopology(llm(layout))
    if topology == "boutique":
        return CompiledTopology(boutique())
    if topology.startswith("mesh") and topology in TOPOLOGIES:
        return CompiledTopology(mesh(int(topology.removeprefix("mesh")), variant))
    raise ValueError(f"unknown topology {topology!r}; known: {', '.join(TOPOLOGIES)}")


def parse(scenario: str) -> tuple[str, Fault, Variant]:
    """`{topology}-{fault}[-{variant}]` → its parts; ValueError naming the known scenarios."""
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}")
    topology, fault, *variant = scenario.split("-")
    return topology, Fault(fault), Variant(variant[0] if variant else "")


def default_start_ns(seed: int) -> int:
    """A fixed event-time anchor per seed (whole seconds, spread over 30 days and the day's hours)."""
    return ANCHOR_NS + (seed * 7_919 % _ANCHOR_SPREAD_S) * 1_000_000_000


def draw_layout(profile: Profile, rng: np.random.Generator) -> LlmLayout:
    """A TP degree, one or two engine replicas, and which optional services run."""
    degrees = [d for d, _ in profile.tp_weights]
    weights = np.array([w for _, w in profile.tp_weights])
    tp = degrees[int(rng.choice(len(degrees), p=weights / weights.sum()))]
    replicas = 2 if rng.random() < profile.two_replicas else 1
    optional = frozenset(name for name, chance in profile.optional_services if rng.random() < chance)
    return LlmLayout(tp, replicas, optional)


def _traffic(start: int, stop: int, rate: float, profile: Profile, rng: np.random.Generator) -> Traffic:
    """The case's load: its daily and minutes-scale swings, and maybe a burst of 1-3 minutes."""
    traffic = Traffic(
        start,
        stop,
        rate,
        wave_period_s=float(rng.uniform(120, 900)),
        wave_phase=float(rng.uniform(0, 2 * np.pi)),
        day_amplitude=profile.day_amplitude.one(rng),
        wave_amplitude=profile.wave_amplitude.one(rng),
    )
    if rng.random() >= profile.burst_chance:
        return traffic
    begin = int(rng.uniform(start / SECOND + 60, stop / SECOND - 180)) * SECOND
    end = begin + int(rng.uniform(60, 180)) * SECOND
    return replace(traffic, burst_start_ns=begin, burst_end_ns=end, burst_factor=float(rng.uniform(1.2, 2.0)))


def simulate(
    scenario: str,
    *,
    seed: int,
    start_ns: int | None = None,
    rate: float | None = None,
    profile: str = "default",
    style: str = "conventions",
    replica_names: str = "distinct",
) -> SimulatedCase:
    """One case: ~6 min of normal traffic, the fault for ~4 min, 2 min of recovery; `rate` is the
    mean requests per second (default: the topology's times the profile's draw, ~20-60k spans a
    case). Every level, size and layout is drawn from `profile`. `style` is what the telemetry
    looks like: rca's own span conventions, or what a real deployment emits (`real_style`: vLLM's
    spans and scraped metrics, from the same requests). `replica_names` `shared` exports every
    engine replica under the first one's service names (`simulation.replica_names`), as one
    Deployment's pods. Deterministic per seed and start (scrapes fall on the start's clock, so
    another start draws another case of the same seed); the names draw nothing."""
    if style not in STYLES:
        raise ValueError(f"unknown style {style!r}; known: {', '.join(STYLES)}")
    if replica_names not in REPLICA_NAMES:
        raise ValueError(f"unknown replica names {replica_names!r}; known: {', '.join(REPLICA_NAMES)}")
    topology, fault, variant = parse(scenario)
    drawn = profile_named(profile)
    key = zlib.crc32(scenario.encode())
    rng = np.random.default_rng([seed, key, list(PROFILES).index(profile)])
    layout = draw_layout(drawn, rng) if topology == "llm" else None
    ct = compiled(topology, layout, drawn.mesh_variant if topology.startswith("mesh") else 0)
    start = default_start_ns(seed) if start_ns is None else start_ns
    inject = start + int(rng.uniform(330, 390)) * SECOND
    end = inject + int(rng.uniform(210, 270)) * SECOND
    stop = end + _RECOVERY_S * SECOND
    plan = plan_fault(ct, fault, variant, inject, end, rng, drawn)
    plans: tuple[FaultPlan, ...] = (plan,)
    if variant is Variant.DOUBLE:
        plans = (plan, plan_second_root(ct, plan, stop, rng, drawn))
    if style == "real":
        plans = tuple(real_physics(p) for p in plans)
    requests = ct.topology.default_rate * drawn.rate_scale.one(rng) if rate is None else rate
    if requests <= 0:
        raise ValueError(f"rate must be positive, got {requests}")
    traffic = _traffic(start, stop, requests, drawn, rng)
    conditions = Conditions.draw(ct, drawn, rng)
    noisy = [ct.service_index[s] for s in ct.topology.noisy]
    hiccups = Hiccups.draw(noisy, start, stop, rng, drawn.hiccups, (drawn.hiccup_factor.lo, drawn.hiccup_factor.hi))
    drift_rng = np.random.default_rng([seed, key, list(PROFILES).index(profile), _DRIFT_STREAM])
    drifts = Drifts.draw(ct, plans, start, stop, drawn, drift_rng)
    batch, invocations, nccl, engines = generate_invocations(ct, plans, traffic, hiccups, rng, conditions, drifts)
    comm_ids = tuple(e.comm_id for e in ct.topology.engines)
    attributes = SpanAttributes.of(nccl, comm_ids, NCCL_OPS, drawn.token_keys, drawn.priority_encoding)
    alerts = decide_alerts(batch, ct.topology.user_facing, inject, end, rng)
    sent = notifications(alerts, rng)
    log_rng = np.random.default_rng([seed, key, list(PROFILES).index(profile), _LOG_STREAM])
    log_plan = next((p for p in plans if p.fault not in LLM_FAULTS), plan)
    logs = write_logs(ct, log_plan, invocations, start, stop, log_rng)
    roots = tuple((p.node, p.service) for p in plans)
    metrics: tuple[MetricBatch, ...] = ()
    if style == "real":
        real_rng = np.random.default_rng([seed, key, list(PROFILES).index(profile), _REAL_STREAM])
        real = real_telemetry(ct, plans, conditions, batch, invocations, engines, traffic, real_rng)
        batch, attributes, metrics = real.spans, real.attributes, metric_chunks(real.metrics, start, BATCHSECONDS)
        roots = tuple(real_root(ct, p) for p in plans)
    names = shared_names(ct.topology.engines) if replica_names == "shared" else {}
    batch, logs = renamed(batch, names), renamed(logs, names)
    metrics = tuple(renamed(m, names) for m in metrics)
    roots = tuple((names.get(node, node), names.get(service, service)) for node, service in roots)  # GPUs keep theirs
    truth = Truth(
        scenario=scenario,
        seed=seed,
        topology=topology,
        fault=str(fault),
        node=roots[0][0],
        service=roots[0][1],
        inject_ns=inject,
        end_ns=end,
        alert_services=tuple(dict.fromkeys(a.service for a in alerts)),
        services=len(ct.services) - (sum(len(e.workers) for e in ct.topology.engines) if style == "real" else 0),
        profile=profile,
        layout=layout.label if layout else "",
        hot_services=conditions.hot,
        drifting=drifts.services(ct),
        roots=tuple(
            Root(node, str(p.fault), service, p.magnitude, p.inject_ns, p.end_ns, str(p.mode))
            for p, (node, service) in zip(plans, roots, strict=True)
        ),
        style=style,
        replica_names=replica_names,
    )
    return SimulatedCase(
        truth=truth,
        batches=chunks(batch, start, BATCHSECONDS),
        logs=log_chunks(logs, start, BATCHSECONDS),
        webhooks=tuple(n.body for n in sent),
        webhook_times_ns=tuple(n.sent_ns for n in sent),
        attributes=attributes,
        start_ns=start,
        end_ns=max(stop, int(batch.end_ns.max()) + 1, int(logs.time_ns.max(initial=0)) + 1),
        metrics=metrics,
    )
