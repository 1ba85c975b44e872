"""`GET /metrics` of a live `rca serve` (with `--api-token`, which leaves it open) after spans
from the OpenTelemetry SDK: `promtool check metrics` accepts the exposition, and a real
Prometheus (Debian `prometheus`) scraping it every second answers queries for rca's series."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import Server, start_server, stop_server
from tests.debian import ensure_binary

TOKEN = "metrics-test-token"
TRACES = 40
DEADLINE_S = 60.0  # how long to wait for Prometheus to start and scrape (not a speed assertion)


def _send_spans(endpoint: str) -> int:
    """TRACES traces of a server span calling PostgreSQL, through the SDK's OTLP/gRPC exporter."""
    provider = TracerProvider(resource=Resource.create({"service.name": "checkout"}))
    exporter = OTLPSpanExporter(endpoint=endpoint, insecure=True, headers={"authorization": f"Bearer {TOKEN}"})
    provider.add_span_processor(BatchSpanProcessor(exporter))
    tracer = provider.get_tracer("tests")
    database = {"db.system": "postgresql"}
    for _ in range(TRACES):
        with tracer.start_as_current_span("POST /checkout", kind=SpanKind.SERVER):
            with tracer.start_as_current_span("INSERT orders", kind=SpanKind.CLIENT, attributes=database):
                pass
    provider.shutdown()  # flushes every span
    return 2 * TRACES


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = start_server(tmp_path_factory.mktemp("rca"), "--api-token", TOKEN)
    try:
        _send_spans(server.otlp_grpc)
        yield server
    finally:
        assert stop_server(server) == 0


def test_metrics_are_open_and_promtool_accepts_them(live: Server) -> None:
    assert httpx.get(f"{live.api}/graph", timeout=30).status_code == 401  # the token is in force
    response = httpx.get(f"{live.api}/metrics", timeout=30)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = {s.name: s.value for f in text_string_to_metric_families(response.text) for s in f.samples}
    assert samples["rca_spans_received_total"] == 2 * TRACES
    assert samples["rca_graph_spans_total"] == 2 * TRACES
    assert samples["rca_otlp_decode_seconds_count"] >= 1
    assert samples["rca_service_health"] == 1.0  # no incident: checkout is healthy
    promtool = ensure_binary("/usr/bin/promtool", "prometheus")
    check = subprocess.run(
        [promtool, "check", "metrics"], input=response.content, capture_output=True, timeout=60, check=False
    )
    assert check.returncode == 0, check.stdout.decode() + check.stderr.decode()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _query(prometheus: str, expr: str) -> list[dict[str, Any]]:
    try:
        answer = httpx.get(f"{prometheus}/api/v1/query", params={"query": expr}, timeout=10).json()
    except (httpx.HTTPError, ValueError):
        return []  # not up yet
    result: list[dict[str, Any]] = answer.get("data", {}).get("result", [])
    return result


def test_a_real_prometheus_scrapes_rca(live: Server, tmp_path: Path) -> None:
    binary = ensure_binary("/usr/bin/prometheus", "prometheus")
    port = _free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        f"""global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: rca
    static_configs:
      - targets: ["{live.http}"]
"""
    )
    log = (tmp_path / "prometheus.log").open("w")
    prometheus = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        end = time.monotonic() + DEADLINE_S
        up: list[dict[str, Any]] = []
        received: list[dict[str, Any]] = []
        while time.monotonic() < end and not (up and received):
            up = _query(url, 'up{job="rca"} == 1')
            received = _query(url, 'rca_spans_received_total{job="rca"} > 0')
            time.sleep(0.5)
        assert up, f"Prometheus never saw rca up:\n{(tmp_path / 'prometheus.log').read_text()[-3000:]}"
        assert received, "Prometheus has no rca_spans_received_total > 0"
        assert float(received[0]["value"][1]) == 2 * TRACES
        health = _query(url, 'rca_service_health{job="rca", service="checkout"}')
        assert [float(h["value"][1]) for h in health] == [1.0]
    finally:
        prometheus.terminate()
        prometheus.wait(timeout=30)
        log.close()
