"""Benchmark cases: simulated scenarios and the Nezha dev cases, laid one after another in event time.

Every case is moved to its own stretch of event time (an hour apart, beyond the graph's
retention), so one `rca serve` replays a whole suite as live traffic would arrive. A case carries
its spans, its log records and (the `real` suite: the simulator's real-deployment style) its data
points, moved together so that records still join their spans.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.nezha import case_telemetry, default_root, load_cases, shift_batch, shift_logs
from benchmarks.nezha_metrics import case_metrics
from rca.telemetry.logs import LogBatch
from rca.telemetry.metrics import MetricBatch
from rca.telemetry.spans import SpanBatch
from simulation import SCENARIOS, simulate

GAP_NS = 3600 * 1_000_000_000
NEZHA_ALERT_DELAY_NS = 60 * 1_000_000_000  # the alert fires a minute after injection
NEZHA_BASELINE_MINUTES = 5
NEZHA_ENTRY = {"TrainTicket": "ts-ui-dashboard", "OnlineBoutique": "frontend"}
HELD_OUT_SEEDS = (101, 102, 103)  # the shipped health parameters were fitted on other seeds (`models.training`)


@dataclass(frozen=True, slots=True)
class BenchCase:
    case_id: str
    fault_type: str  # the table's grouping: a FAULT name, or Nezha's own fault type
    truth_services: tuple[str, ...]  # the root-cause services, the primary first: two where faults overlap
    truth_faults: tuple[str, ...]  # the roots' FAULT classes; empty where the source uses another vocabulary
    batches: tuple[SpanBatch, ...]
    logs: tuple[LogBatch, ...]  # empty where the case is run on traces only
    webhooks: tuple[dict[str, object], ...]
    alert_ns: int  # the first alert's startsAt
    alert_services: tuple[str, ...]
    resolved: tuple[dict[str, object], ...]  # the notifications that end the case's alerts, sent after it
    metrics: tuple[MetricBatch, ...] = ()  # data points, where the case has them

    @property
    def end_ns(self) -> int:
        return max(int(b.end_ns.max()) for b in self.batches if len(b))


def _rfc3339(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def nezha_webhook(case_id: str, service: str, starts_ns: int, ends_ns: int | None = None) -> dict[str, object]:
    """The Alertmanager v4 body of a latency alert on `service`; resolved at `ends_ns` when given."""
    labels = {"alertname": "HighLatency", "service": service, "severity": "critical"}
    status = "firing" if ends_ns is None else "resolved"
    alert = {
        "status": status,
        "labels": labels,
        "annotations": {"summary": f"{service} p95 latency high"},
        "startsAt": _rfc3339(starts_ns),
        "endsAt": "0001-01-01T00:00:00Z" if ends_ns is None else _rfc3339(ends_ns),
        "generatorURL": "http://prometheus.local/graph",
        "fingerprint": hashlib.sha256(f"{case_id}/{service}".encode()).hexdigest()[:16],
    }
    return {
        "version": "4",
        "groupKey": f'{{}}:{{alertname="HighLatency", service="{service}"}}',
        "truncatedAlerts": 0,
        "status": status,
        "receiver": "rca",
        "groupLabels": {"alertname": "HighLatency"},
        "commonLabels": labels,
        "commonAnnotations": alert["annotations"],
        "externalURL": "http://alertmanager.local",
        "alerts": [alert],
    }


def case_name(scenario: str, seed: int, profile: str = "default", style: str = "conventions") -> str:
    """A simulated case's id in reports: `scenario#seed`, with `@profile` unless the default and
    `+style` unless rca's own conventions."""
    named = f"{scenario}#{seed}" + ("" if profile == "default" else f"@{profile}")
    return named + ("" if style == "conventions" else f"+{style}")


def simulated_cases(
    scenarios: tuple[str, ...],
    seeds: tuple[int, ...],
    start_ns: int,
    logs: bool = True,
    profile: str = "default",
    style: str = "conventions",
    metrics: bool = True,
) -> Iterator[BenchCase]:
    """Each (seed, scenario) case of the generator `profile` in the telemetry `style`, one after
    another in event time; with its log records and data points unless not `logs`/`metrics`."""
    cursor = start_ns
    for seed in seeds:
        for scenario in scenarios:
            case = simulate(scenario, seed=seed, start_ns=cursor, profile=profile, style=style)
            truth = case.truth
            starts = [a["startsAt"] for w in case.webhooks for a in _alerts(w)]
            alert_ns = min(int(datetime.fromisoformat(str(s).replace("Z", "+00:00")).timestamp() * 1e9) for s in starts)
            firing = tuple(w for w in case.webhooks if w.get("status") == "firing")
            resolved = tuple(w for w in case.webhooks if w.get("status") == "resolved")
            yield BenchCase(
                case_name(scenario, seed, profile, style),
                truth.fault,
                tuple(dict.fromkeys((truth.service, *(r.service for r in truth.roots)))),
                tuple(dict.fromkeys((truth.fault, *(r.fault for r in truth.roots)))),
                case.batches,
                case.logs if logs else (),
                firing,
                alert_ns,
                truth.alert_services,
                resolved,
                case.metrics if metrics else (),
            )
            cursor = truth.end_ns + GAP_NS


def _alerts(webhook: dict[str, object]) -> list[dict[str, object]]:
    alerts = webhook.get("alerts")
    return [a for a in alerts if isinstance(a, dict)] if isinstance(alerts, list) else []


def nezha_cases(
    root: Path, start_ns: int, limit: int | None = None, logs: bool = True, metrics: bool = True
) -> Iterator[BenchCase]:
    """The Nezha dev cases, each with its baseline minutes before it; with the pods' metrics of
    the same stretch of time (moved with the spans) unless not `metrics`."""
    cursor = start_ns
    for index, case in enumerate(load_cases(root)[:limit]):
        telemetry = case_telemetry(case, root, NEZHA_BASELINE_MINUTES, logs=logs)
        first = min(int(b.start_ns.min()) for b in telemetry.spans if len(b))
        last = max(int(b.end_ns.max()) for b in telemetry.spans if len(b))
        offset = cursor - first
        moved = tuple(shift_batch(b, offset, 1000 + index) for b in telemetry.spans)
        moved_logs = tuple(shift_logs(b, offset, 1000 + index) for b in telemetry.logs)
        points = case_metrics(case.trace_files[0].parent.parent, first, last) if metrics else None
        moved_points = () if points is None else (replace(points, time_ns=points.time_ns + offset),)
        alert_ns = case.inject_ns + offset + NEZHA_ALERT_DELAY_NS
        entry = NEZHA_ENTRY.get(case.system, "frontend")
        yield BenchCase(
            case.case_id,
            case.fault_type,
            (case.root_cause_service,),
            (),
            moved,
            moved_logs,
            (nezha_webhook(case.case_id, entry, alert_ns),),
            alert_ns,
            (entry,),
            (nezha_webhook(case.case_id, entry, alert_ns, ends_ns=max(int(b.end_ns.max()) for b in moved)),),
            moved_points,
        )
        cursor = max(int(b.end_ns.max()) for b in moved) + GAP_NS


SMOKE_SCENARIOS = (
    "llm-gpu_memory_bandwidth",
    "llm-kv_cache_fragmentation",
    "llm-scheduler_priority_inversion",
    "llm-numa_mismatch",
    "llm-errors",
    "boutique-latency",
    "boutique-call_structure",
)
SIM_SCENARIOS = tuple(s for s in SCENARIOS if not s.startswith("mesh1000"))
REAL_SCENARIOS = tuple(s for s in SCENARIOS if s.startswith("llm-"))  # every LLM class, the generic ones on llm
SUITES = ("smoke", "sim", "shifted", "real", "nezha", "full")


def suite_cases(suite: str, start_ns: int, logs: bool = True, metrics: bool = True) -> Iterator[BenchCase]:
    """The cases of a suite (`SUITES`), with their log records and data points unless not
    `logs`/`metrics`; Nezha cases only where the shared datasets are present."""
    root = default_root()
    has_nezha = (root / "nezha-dev" / "cases.json").exists()
    if suite == "smoke":
        yield from simulated_cases(SMOKE_SCENARIOS, HELD_OUT_SEEDS[:1], start_ns, logs)
    elif suite == "sim":
        yield from simulated_cases(SIM_SCENARIOS, HELD_OUT_SEEDS, start_ns, logs)
    elif suite == "shifted":  # the differently configured generator: what a fit to the default cannot have seen
        yield from simulated_cases(SIM_SCENARIOS, HELD_OUT_SEEDS, start_ns, logs, profile="shifted")
    elif suite == "real":  # as a real vLLM + DCGM + kubelet + node_exporter deployment emits it
        yield from simulated_cases(REAL_SCENARIOS, HELD_OUT_SEEDS, start_ns, logs, style="real", metrics=metrics)
    elif suite == "nezha":
        if not has_nezha:
            raise FileNotFoundError(f"Nezha dataset absent: expected {root / 'nezha-dev'}")
        yield from nezha_cases(root, start_ns, logs=logs, metrics=metrics)
    elif suite == "full":
        yield from simulated_cases(SIM_SCENARIOS, HELD_OUT_SEEDS, start_ns, logs)
        yield from simulated_cases(SIM_SCENARIOS, HELD_OUT_SEEDS, start_ns + 200 * GAP_NS, logs, profile="shifted")
        real_start = start_ns + 300 * GAP_NS
        yield from simulated_cases(REAL_SCENARIOS, HELD_OUT_SEEDS, real_start, logs, style="real", metrics=metrics)
        if has_nezha:
            yield from nezha_cases(root, start_ns + 400 * GAP_NS, logs=logs, metrics=metrics)
    else:
        raise ValueError(f"unknown suite {suite!r}; one of {', '.join(SUITES)}")
