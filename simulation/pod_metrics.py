"""Pod metrics of the real-deployment style: cAdvisor's CPU and memory series for every pod, as
the kubelet of its node exposes them (`container_cpu_usage_seconds_total`,
`container_cpu_cfs_throttled_seconds_total`, `container_memory_working_set_bytes`).

A pod's CPU demand is its idle draw plus the work of the calls it serves (each operation's self
time at the case's levels, a share of it on the CPU, more in a noisy service's GC-like hiccups),
split over the service's pods; an engine pod's follows its tokens. Its CPU limit leaves drawn
headroom over its busiest healthy interval. CFS throttles a pod whose demand passes the limit
(the excess), and in part one whose bursts come near it. A CPU-starved service (a latency fault's
STARVED mode) has its CPU cut to what lets its work run `magnitude` times slower: its usage pins
at that and throttling rises. Busy-but-healthy services use more CPU throughout; load swings move
every pod alike. Sometimes one microservice container restarts: its counters start again from
zero, with the restart as their start time, and its memory drops and grows back. Working sets
follow the load a little and drift slowly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rca.telemetry.faults import Fault
from simulation.conditions import Conditions
from simulation.engine_view import EngineView
from simulation.exporters import Deployment, Target
from simulation.faults import FaultPlan, Mode
from simulation.invocations import Invocations
from simulation.profiles import Range
from simulation.scrape import Scraped, edges, overlap_s
from simulation.topology import CompiledTopology

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
_RESTART_CHANCE = 0.25
_SECOND = 1_000_000_000


@dataclass(frozen=True, slots=True)
class PodUsage:
    """What the node exporters need of the pods: each node's pods' CPU (cores) at its kubelet's scrapes."""

    times_ns: dict[str, I64]
    cores: dict[str, F64]


def _demand(
    ct: CompiledTopology, conditions: Conditions, invocations: Invocations, d: Deployment, rng: np.random.Generator
) -> Callable[[str, I64], F64]:
    """Per workload (a service or a datastore), its CPU demand (cores) in each interval of some
    bounds: its idle draw plus the CPU share of the work of the calls it serves."""
    index = {w: i for i, w in enumerate(d.pods)}
    served_by = np.array(
        [index.get(peer or ct.services[s], -1) for s, peer in zip(ct.op_service, ct.op_peer, strict=True)]
    )
    owner = served_by[invocations.op]
    order = np.argsort(owner, kind="stable")
    first = np.searchsorted(owner[order], np.arange(len(index) + 1))
    work = ct.op_median[invocations.op] * conditions.op_scale[invocations.op] * np.sqrt(invocations.hiccup)
    share = {w: Range(0.2, 0.9, log=False).one(rng) for w in d.pods}
    idle = {w: Range(0.003, 0.05).one(rng) for w in d.pods}

    def demand(workload: str, bounds: I64) -> F64:
        rows = order[first[index[workload]] : first[index[workload] + 1]]
        busy = np.histogram(invocations.start_ns[rows], bins=bounds, weights=work[rows])[0] / (np.diff(bounds) / 1e9)
        result: F64 = idle[workload] + share[workload] * busy
        return result

    return demand


@dataclass(frozen=True, slots=True)
class _Pod:
    """One pod's CPU at its kubelet's scrapes: cores used and cores' worth throttled."""

    name: str
    workload: str
    used: F64
    throttled: F64


def pod_metrics(
    out: Scraped,
    d: Deployment,
    ct: CompiledTopology,
    conditions: Conditions,
    invocations: Invocations,
    views: dict[str, EngineView],
    plans: Sequence[FaultPlan],
    healthy_until_ns: int,
    load: Callable[[I64], F64],
    rng: np.random.Generator,
) -> PodUsage:
    """Every pod's cAdvisor series; returns each node's pods' CPU use for its node exporter."""
    demand = _demand(ct, conditions, invocations, d, rng)
    starved = [p for p in plans if p.fault is Fault.LATENCY and p.mode is Mode.STARVED]
    movable = [p for w, pods in d.pods.items() if w not in views for p in pods]
    restarted = movable[int(rng.integers(len(movable)))] if movable and rng.random() < _RESTART_CHANCE else ""
    restart_ns = d.start_ns + int(rng.uniform(60, max((d.stop_ns - d.start_ns) / 1e9 - 60, 61))) * _SECOND
    noise = Range(0.02, 0.1).one(rng)
    usage = PodUsage({}, {})
    for node in d.nodes:
        target = d.kubelet(node)
        times = target.times_ns
        bounds = edges(times, d.interval_s)
        seconds = np.diff(bounds) / 1e9
        before = times <= healthy_until_ns
        usage.times_ns[node], usage.cores[node] = times, np.zeros(times.shape[0])
        for workload, pods in d.pods.items():
            here = [(k, p) for k, p in enumerate(pods) if d.node_of[p] == node]
            if not here:
                continue
            if workload in views:
                view = views[workload]
                tokens = np.histogram(view.first_token, bins=bounds, weights=view.tokens_in + view.tokens_out)[0]
                wanted = Range(0.5, 3.0).one(rng) + Range(2e-4, 2e-3).one(rng) * tokens / seconds
            else:
                wanted = demand(workload, bounds) / len(pods)
            for instance, pod in here:
                want = wanted * rng.lognormal(0.0, 0.15) * rng.lognormal(0.0, noise, times.shape[0])
                usual = float(np.mean(want[before])) if before.any() else float(np.mean(want))
                limit = float(np.quantile(want[before] if before.any() else want, 0.95)) / Range(0.15, 0.7).one(rng)
                cap = np.full(times.shape[0], limit)
                for p in starved:
                    if p.service == workload and p.instance in (-1, instance):
                        active = overlap_s(np.array([p.inject_ns]), np.array([p.end_ns]), bounds)[0] / seconds
                        cap = cap * (1 - active) + np.minimum(cap, usual / p.magnitude) * active
                used = np.minimum(want, cap)
                throttled = np.maximum(want - cap, 0.0) + Range(0.005, 0.5).one(rng) * want * (want / cap) ** 2
                usage.cores[node] += used
                restart = restart_ns if pod == restarted else None
                _write_pod(out, d, target, _Pod(pod, workload, used, throttled), load(times), restart, rng)
    return usage


def _write_pod(
    out: Scraped, d: Deployment, target: Target, pod: _Pod, load: F64, restart_ns: int | None, rng: np.random.Generator
) -> None:
    """The pod's counters since its container started (or restarted) and its working set."""
    container = "vllm" if pod.workload in d.engines else pod.workload
    labels = d.cadvisor_labels(pod.name, container)
    started = d.start_ns - int(Range(3_600.0, 20 * 86_400.0).one(rng)) * _SECOND
    start = max(d.agent_start_ns, started)
    age = (d.start_ns - started) / 1e9
    seconds = np.diff(edges(target.times_ns, d.interval_s)) / 1e9
    cpu = float(np.mean(pod.used)) * age + np.cumsum(pod.used * seconds)
    out.counter("container_cpu_usage_seconds_total", target, labels, cpu, start, restart_ns)
    held = float(np.mean(pod.throttled)) * age + np.cumsum(pod.throttled * seconds)
    out.counter("container_cpu_cfs_throttled_seconds_total", target, labels, held, start, restart_ns)
    base = (Range(6e9, 4e10) if container == "vllm" else Range(3e7, 1.5e9)).one(rng)
    hours = (target.times_ns - d.start_ns) / 3.6e12
    trend = Range(-0.02, 0.02, log=False).one(rng) * hours  # slow growth or release over the case
    memory = base * (1.0 + 0.05 * (load - 1.0) + trend) * rng.lognormal(0.0, 0.005, load.shape[0])
    if restart_ns is not None:
        regrown = np.clip((target.times_ns - restart_ns) / 1e9 / 300.0, 0.0, 1.0)
        memory = np.where(target.times_ns >= restart_ns, memory * (0.5 + 0.5 * regrown), memory)
    out.gauge(
        "container_memory_working_set_bytes", target, labels, np.round(np.maximum(memory, 1e6)).astype(np.float64)
    )
