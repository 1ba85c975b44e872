"""What a simulation produces: the spans, the webhooks they would fire, and the ground truth."""

from __future__ import annotations

from dataclasses import dataclass

from rca.telemetry.logs import LogBatch
from rca.telemetry.metrics import MetricBatch
from rca.telemetry.spans import SpanBatch
from simulation.attributes import SpanAttributes


@dataclass(frozen=True, slots=True)
class Root:
    """One injected fault; `magnitude` in its class's own quantity and `mode` how it shows
    (`faults.FaultPlan`, `faults.Mode`)."""

    node: str
    fault: str
    service: str
    magnitude: float
    inject_ns: int
    end_ns: int
    mode: str


@dataclass(frozen=True, slots=True)
class Truth:
    """The injected fault (written as `truth.json` with the same field names, times RFC3339):
    `node`/`fault` is the primary root, `roots` every root (two where faults overlap)."""

    scenario: str
    seed: int
    topology: str
    fault: str  # one of the FAULT names (docs/interface.md)
    node: str  # the graph node of the cause (a service, or a `gpu:{host}/{gpu}` or `host:{host}` resource node)
    service: str  # the service owning that node
    inject_ns: int
    end_ns: int
    alert_services: tuple[str, ...]  # services the webhook alerts name
    services: int  # instrumented services in the topology
    profile: str  # the generator profile drawn from (`profiles`)
    layout: str  # the LLM deployment, `tp{degree}x{replicas}`; empty elsewhere
    hot_services: tuple[str, ...]  # busy but healthy throughout
    roots: tuple[Root, ...]
    drifting: tuple[str, ...] = ()  # unrelated services that changed during the case (`simulation.drifts`)
    style: str = "conventions"  # what the telemetry looks like (`real_style.STYLES`)
    replica_names: str = "distinct"  # engine replicas' service names (`replica_names.REPLICA_NAMES`)


@dataclass(frozen=True, slots=True)
class SimulatedCase:
    """Spans, log records and data points in event-time order (chunks of `BATCH_SECONDS`; no data
    points in the conventions style), Alertmanager v4 webhook bodies in send order and the event
    time each is sent at (`webhook_times_ns`, same order), and what the spans carry beyond their
    signals (`attributes`). Every span, record and point lies in [start_ns, end_ns)."""

    truth: Truth
    batches: tuple[SpanBatch, ...]
    logs: tuple[LogBatch, ...]
    webhooks: tuple[dict[str, object], ...]
    webhook_times_ns: tuple[int, ...]
    start_ns: int
    end_ns: int
    attributes: SpanAttributes
    metrics: tuple[MetricBatch, ...] = ()

    @property
    def spans(self) -> int:
        return sum(len(b) for b in self.batches)

    @property
    def log_records(self) -> int:
        return sum(len(b) for b in self.logs)

    @property
    def data_points(self) -> int:
        return sum(len(b) for b in self.metrics)
