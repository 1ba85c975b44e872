"""The Alertmanager v4 webhooks a case's fault would fire (docs/interface.md, Alerts and incidents).

Alerts are decided from the generated spans, as Prometheus rules over trace-derived metrics would
decide them: p95 latency or error ratio of a user-facing service's root spans during the fault
against before it. Groups are by (alertname, service) like the captured payloads; each group
sends a firing notification, sometimes a re-send of it, and a resolved one after the fault ends.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rca.telemetry.alerts import format_rfc3339
from rca.telemetry.spans import SpanBatch

ZERO_TIME = "0001-01-01T00:00:00Z"
RECEIVER = "rca-webhook"
EXTERNAL_URL = "http://alertmanager.local:9093"
LATENCY_RATIO = 1.25  # p95 during / before that fires HighLatency
ERROR_RISE = 0.02  # error-ratio rise that fires HighErrorRate
_SECOND = 1_000_000_000


@dataclass(frozen=True, slots=True)
class AlertSpec:
    name: str  # alertname
    service: str
    severity: str
    summary: str
    description: str
    expr: str
    starts_ns: int
    ends_ns: int


@dataclass(frozen=True, slots=True)
class Notification:
    sent_ns: int
    body: dict[str, object]


def fingerprint(labels: dict[str, str]) -> str:
    """Prometheus' label-set fingerprint: FNV-1a 64 over sorted `name 0xff value 0xff`."""
    h = 0xCBF29CE484222325
    for name in sorted(labels):
        for byte in name.encode() + b"\xff" + labels[name].encode() + b"\xff":
            h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def _changes(batch: SpanBatch, service: str, inject_ns: int, end_ns: int) -> tuple[float, float, float, float]:
    """(p95 before, p95 during, error ratio before, during) of a service's root spans."""
    names = {s: i for i, s in enumerate(batch.strings)}
    roots = (batch.parent_id == 0) & (batch.service == names.get(service, -1))
    before = roots & (batch.start_ns < inject_ns) & (batch.start_ns >= inject_ns - 300 * _SECOND)
    during = roots & (batch.start_ns >= inject_ns + 20 * _SECOND) & (batch.start_ns < end_ns)
    if not before.any() or not during.any():
        return 0.0, 0.0, 0.0, 0.0
    seconds = batch.duration_ns / 1e9
    return (
        float(np.percentile(seconds[before], 95)),
        float(np.percentile(seconds[during], 95)),
        float(batch.error[before].mean()),
        float(batch.error[during].mean()),
    )


def decide_alerts(
    batch: SpanBatch, user_facing: Sequence[str], inject_ns: int, end_ns: int, rng: np.random.Generator
) -> list[AlertSpec]:
    """The alerts the fault fires, 60-120 s after injection; never none (the strongest change
    on a user-facing service alerts even when faint)."""
    found: list[tuple[float, str, str, tuple[float, float, float, float]]] = []
    for service in user_facing:
        p95_before, p95_during, err_before, err_during = stats = _changes(batch, service, inject_ns, end_ns)
        latency = p95_during / p95_before if p95_before else 0.0
        errors = err_during - err_before
        found.append((latency / LATENCY_RATIO, "HighLatency", service, stats))
        found.append((errors / ERROR_RISE, "HighErrorRate", service, stats))
    firing = [f for f in found if f[0] >= 1.0] or [max(found)]
    alerts = []
    for _, name, service, (p95_before, p95_during, _, err_during) in sorted(firing, key=lambda f: -f[0]):
        starts = inject_ns + int(rng.uniform(60, 120)) * _SECOND
        ends = end_ns + int(rng.uniform(30, 75)) * _SECOND
        if name == "HighLatency":
            summary = f"{service} p95 latency above its SLO"
            description = f"p95 latency {p95_during:.3f}s over 5m (was {p95_before:.3f}s)"
            expr = f'histogram_quantile(0.95, rate(http_server_duration_bucket{{service="{service}"}}[5m]))'
            severity = "critical" if p95_during > 2 * p95_before else "warning"
        else:
            summary = f"{service} 5xx > 2%"
            description = f"error ratio {err_during:.3f} over 5m"
            expr = f'rate(http_server_errors_total{{service="{service}"}}[5m])'
            severity = "critical"
        alerts.append(AlertSpec(name, service, severity, summary, description, expr, starts, ends))
    return alerts


def _alert(spec: AlertSpec, resolved: bool) -> dict[str, object]:
    labels = {"alertname": spec.name, "service": spec.service, "severity": spec.severity}
    return {
        "status": "resolved" if resolved else "firing",
        "labels": labels,
        "annotations": {"description": spec.description, "summary": spec.summary},
        "startsAt": format_rfc3339(spec.starts_ns),
        "endsAt": format_rfc3339(spec.ends_ns) if resolved else ZERO_TIME,
        "generatorURL": f"http://prometheus.local/graph?g0.expr={spec.expr.replace(' ', '+')}",
        "fingerprint": fingerprint(labels),
    }


def _body(spec: AlertSpec, resolved: bool) -> dict[str, object]:
    alert = _alert(spec, resolved)
    labels = alert["labels"]
    group = {"alertname": spec.name, "service": spec.service}
    return {
        "receiver": RECEIVER,
        "status": alert["status"],
        "alerts": [alert],
        "groupLabels": group,
        "commonLabels": labels,
        "commonAnnotations": alert["annotations"],
        "externalURL": EXTERNAL_URL,
        "version": "4",
        "groupKey": "{}:{" + ", ".join(f'{k}="{v}"' for k, v in group.items()) + "}",
        "truncatedAlerts": 0,
    }


def notifications(alerts: Sequence[AlertSpec], rng: np.random.Generator) -> list[Notification]:
    """Per alert group: firing after group_wait, maybe a re-send, then resolved; in send order."""
    out = []
    for spec in alerts:
        first = spec.starts_ns + int(rng.uniform(5, 30) * _SECOND)
        out.append(Notification(first, _body(spec, resolved=False)))
        resend = first + 60 * _SECOND
        if rng.random() < 0.5 and resend < spec.ends_ns:
            out.append(Notification(resend, _body(spec, resolved=False)))
        out.append(Notification(spec.ends_ns + int(rng.uniform(5, 20) * _SECOND), _body(spec, resolved=True)))
    return sorted(out, key=lambda n: n.sent_ns)
