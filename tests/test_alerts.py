"""Alertmanager webhook bodies become core alerts: real captures, label precedence, times."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from api.schemas import WebhookBody
from rca.telemetry.alerts import (
    AlertStatus,
    fingerprint_of,
    format_rfc3339,
    nodes_for,
    parse_rfc3339_ns,
    service_of,
    strip_pod_suffix,
)

STARTS = 1_796_197_504_000_000_000  # 2026-12-02T07:45:04Z


def test_real_firing_capture(datasets: Path) -> None:
    body = WebhookBody.model_validate(json.loads((datasets / "alertmanager" / "firing-0.25.0.json").read_text()))
    (alert,) = body.to_alerts()
    assert body.version == "4" and body.truncatedAlerts == 0
    assert alert.status is AlertStatus.FIRING
    assert alert.fingerprint == "7d2d332feada5c59"
    assert alert.service == "checkout"
    assert alert.starts_at_ns == STARTS
    assert alert.ends_at_ns is None  # 0001-01-01T00:00:00Z
    assert alert.labels["alertname"] == "HighErrorRate"
    assert alert.annotations["summary"] == "checkout 5xx > 5%"
    assert alert.generator_url.startswith("http://prometheus.local/")


def test_real_resolved_capture(datasets: Path) -> None:
    body = WebhookBody.model_validate(json.loads((datasets / "alertmanager" / "resolved-0.25.0.json").read_text()))
    (alert,) = body.to_alerts()
    assert alert.status is AlertStatus.RESOLVED
    assert alert.key == ("7d2d332feada5c59", STARTS)
    assert alert.ends_at_ns == STARTS + 7_000_000_000


@pytest.mark.parametrize(
    ("labels", "service"),
    [
        ({"service": "a", "service_name": "b", "job": "c"}, "a"),
        ({"service_name": "b", "job": "c", "app": "d"}, "b"),
        ({"job": "c", "app": "d"}, "c"),
        ({"app": "d", "k8s_deployment_name": "e"}, "d"),
        ({"k8s_deployment_name": "e", "deployment": "f"}, "e"),
        ({"deployment": "f", "pod": "g-7d9f8b6c5d-x2x4z"}, "f"),
        ({"pod": "checkout-7d9f8b6c5d-x2x4z", "instance": "10.0.0.1:9090"}, "checkout"),
        ({"k8s_pod_name": "ts-order-service-5d4f9c7b8d-qwzt2"}, "ts-order-service"),
        ({"service": "", "job": "c"}, "c"),
        ({"alertname": "Watchdog"}, None),
    ],
)
def test_service_label_precedence(labels: dict[str, str], service: str | None) -> None:
    assert service_of(labels) == service


def test_pod_suffixes() -> None:
    assert strip_pod_suffix("frontend-6b8d9f7c5-bkx2z") == "frontend"
    assert strip_pod_suffix("node-exporter-x7k2p") == "node-exporter"  # DaemonSet: one suffix
    assert strip_pod_suffix("vllm-worker-0") == "vllm-worker-0"  # StatefulSet ordinal: kept
    assert strip_pod_suffix("redis") == "redis"


def test_rfc3339_keeps_nanoseconds_and_offsets() -> None:
    assert parse_rfc3339_ns("2026-12-02T07:45:04.123456789Z") == STARTS + 123_456_789
    assert parse_rfc3339_ns("2026-12-02T09:45:04.5+02:00") == STARTS + 500_000_000
    assert parse_rfc3339_ns("0001-01-01T00:00:00Z") is None
    assert format_rfc3339(STARTS) == "2026-12-02T07:45:04Z"
    assert format_rfc3339(STARTS + 120_000_000) == "2026-12-02T07:45:04.12Z"
    with pytest.raises(ValueError, match="RFC3339"):
        parse_rfc3339_ns("yesterday")
    with pytest.raises(ValueError):
        parse_rfc3339_ns("2026-13-02T07:45:04Z")
    assert parse_rfc3339_ns("2262-04-11T23:47:16.854775807Z") == 2**63 - 1  # the last time stored
    for far in ("9999-12-31T23:59:59Z", "1677-09-21T00:12:43Z"):  # found by the webhook fuzzer
        with pytest.raises(ValueError, match="1678-2262"):
            parse_rfc3339_ns(far)


def test_fingerprint_of_labels_is_order_free() -> None:
    assert fingerprint_of({"a": "1", "b": "2"}) == fingerprint_of({"b": "2", "a": "1"}) != fingerprint_of({"a": "1"})


def test_alert_nodes_never_empty_while_the_graph_has_traces() -> None:
    def place(service: str | None) -> tuple[str, ...]:
        known = {"gateway", "checkout", "redis"}
        return nodes_for(service, known=known, traced=["gateway", "checkout"], roots=["gateway"])

    assert place("redis") == ("redis",)  # a virtual node the graph knows
    assert place("checkout-ui") == ("checkout",)  # nearest traced service by name
    assert place("storefront") == ("gateway",)  # nothing alike: the trace roots
    assert place(None) == ("gateway",)
