"""The real-deployment style (`simulate(..., style="real")`): the same case, with the same
requests and the same per-rank truth, told the way a real vLLM V1 + DCGM exporter + kubelet +
node_exporter deployment tells it: vLLM's own `llm_request` spans and no worker spans
(`real_spans`), and the metrics a Collector's `prometheus` receiver makes of its scrapes
(`exporters`; `real_metrics` for the GPUs and engines, `pod_metrics`, `node_metrics`).

The truth names the node where the fault lives as this style's telemetry names it:

- GPU memory bandwidth, NCCL: the rank's GPU `gpu:{host}/{rank}`, what
  `rca.telemetry.metrics.place` makes of its DCGM series (`gpu` and `Hostname`), owned by the engine (the
  series' `exported_pod`); a slow NCCL link is its rank's (that GPU's NVLink counters).
- KV-cache fragmentation: the engine. vLLM V1 keeps one block table per engine, its blocks on
  every rank (each holds its share of the heads), and reports KV usage per engine: fragmentation
  slows every rank alike (`real_physics`), where rca's own conventions let one rank's cache fail.
- NUMA placement: the host `host:{host}`, whose node_exporter NUMA counters show it; the rank's
  process has no node of its own in this telemetry (no worker spans, one engine pod). Its
  service is the engine, whose GPUs the host holds and whose process is misplaced.
- scheduler priority inversion: the engine, as in the conventions style, though vLLM records no
  request priority: it shows in the engine's queue times, told urgent from ordinary only where
  the engine's callers capture the request's `x-priority` header on their spans.
- every other fault: as in the conventions style.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from rca.telemetry.faults import Fault
from rca.telemetry.metrics import HOST_PREFIX, MetricBatch
from rca.telemetry.spans import SpanBatch
from simulation.attributes import NcclSpans, SpanAttributes
from simulation.conditions import Conditions
from simulation.engine_view import EngineView
from simulation.engines import EngineRequests
from simulation.exporters import Deployment
from simulation.faults import LLM_FAULTS, FaultPlan, Mode
from simulation.invocations import Invocations
from simulation.node_metrics import node_metrics
from simulation.pod_metrics import pod_metrics
from simulation.real_metrics import GpuDraws, engine_metrics
from simulation.real_spans import request_attributes, vllm_spans
from simulation.scrape import Scraped
from simulation.topology import CompiledTopology
from simulation.traffic import Traffic

STYLES = ("conventions", "real")
_GPU_FAULTS = (Fault.GPU_MEMORY_BANDWIDTH, Fault.NCCL_COMMUNICATION)


@dataclass(frozen=True, slots=True)
class RealTelemetry:
    spans: SpanBatch
    metrics: MetricBatch
    attributes: SpanAttributes


def real_physics(plan: FaultPlan) -> FaultPlan:
    """The plan as a real vLLM engine undergoes it: KV fragmentation in its one block table."""
    return replace(plan, mode=Mode.ENGINE) if plan.fault is Fault.KV_CACHE_FRAGMENTATION else plan


def real_root(ct: CompiledTopology, plan: FaultPlan) -> tuple[str, str]:
    """(node, service) of a root as the real-deployment style's telemetry names it."""
    if plan.fault not in LLM_FAULTS or plan.fault is Fault.SCHEDULER_PRIORITY_INVERSION:
        return plan.node, plan.service
    cluster = ct.topology.engines[plan.replica]
    if plan.fault is Fault.KV_CACHE_FRAGMENTATION:
        return cluster.engine, cluster.engine
    if plan.fault in _GPU_FAULTS:
        return cluster.gpu_node(plan.rank), cluster.engine
    return f"{HOST_PREFIX}{cluster.host}", cluster.engine


def real_telemetry(
    ct: CompiledTopology,
    plans: Sequence[FaultPlan],
    conditions: Conditions,
    batch: SpanBatch,
    invocations: Invocations,
    engines: Sequence[EngineRequests],
    traffic: Traffic,
    rng: np.random.Generator,
) -> RealTelemetry:
    """The case's spans as vLLM emits them, their vLLM attributes, and every scraped metric over
    the case's traffic ([traffic.start_ns, traffic.end_ns))."""
    workers = {w for e in ct.topology.engines for w in e.workers}
    empty = NcclSpans.concat([])
    attributes = SpanAttributes.of(empty, (), (), "prompt_tokens", "header")
    attributes = replace(attributes, requests=request_attributes(batch, rng))
    d = Deployment.draw(ct, traffic.start_ns, traffic.end_ns, rng)
    out = Scraped()
    healthy_until = min(p.inject_ns for p in plans)
    llm_plan = next((p for p in plans if p.fault in LLM_FAULTS), None)
    gpus = GpuDraws.draw(rng)
    views: dict[str, EngineView] = {}
    hosts = {}
    for e in engines:
        view = views[e.cluster.engine] = EngineView.of(e, invocations)
        plan = llm_plan if llm_plan is not None and llm_plan.replica == e.replica else None
        hosts[e.cluster.host] = (view, e.cluster, plan)
        engine_metrics(out, d, view, e.cluster, plan, healthy_until, gpus, rng)
    usage = pod_metrics(out, d, ct, conditions, invocations, views, plans, healthy_until, traffic.load, rng)
    node_metrics(out, d, hosts, usage, traffic.load, rng)
    return RealTelemetry(vllm_spans(batch, workers, priority_header=d.priority_header), out.build(), attributes)


def metric_chunks(batch: MetricBatch, start_ns: int, seconds: float) -> tuple[MetricBatch, ...]:
    """Consecutive event-time chunks of `batch` (empty ones left out)."""
    width = int(seconds * 1e9)
    chunk = (batch.time_ns - start_ns) // width
    return tuple(batch.select(chunk == c) for c in np.unique(chunk).tolist())
