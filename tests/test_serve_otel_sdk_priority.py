"""The real OpenTelemetry SDK as a vLLM deployment sends it: the engine's `llm_request` spans
carry their queue time and no priority, the caller's client spans the captured `x-priority`
header. Exported engine first, then the callers, to a running `rca serve`; an Alertmanager
webhook on the caller then finds the engine's priority inversion."""

from __future__ import annotations

import datetime as dt
import time

import httpx
import numpy as np
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from tests.conftest import Server

SECOND = 1_000_000_000
WINDOWS, ONSET, PER_WINDOW = 24, 16, 30  # 10 s windows; urgent requests wait 8x longer from ONSET on


def _provider(service: str, server: Server) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    exporter = OTLPSpanExporter(endpoint=f"http://{server.otlp_grpc}", insecure=True)
    provider.add_span_processor(BatchSpanProcessor(exporter, max_export_batch_size=512))
    return provider


def _send(server: Server, begin_ns: int) -> None:
    rng = np.random.default_rng(3)
    router, engine = _provider("router", server), _provider("vllm-engine", server)
    caller, served = router.get_tracer("router"), engine.get_tracer("vllm")
    n = WINDOWS * PER_WINDOW
    starts = begin_ns + np.sort(rng.integers(0, WINDOWS * 10 * SECOND, n))
    urgent = rng.random(n) < 0.25
    queue = np.where(urgent, 0.012, 0.05) * rng.lognormal(0.0, 0.4, n)
    queue *= np.where(urgent & (starts >= begin_ns + ONSET * 10 * SECOND), 8.0, 1.0)
    for start, wait, high in zip(starts.tolist(), queue.tolist(), urgent.tolist(), strict=True):
        call = caller.start_span("POST /v1/chat/completions", kind=trace.SpanKind.CLIENT, start_time=start)
        call.set_attribute("peer.service", "vllm-engine")
        call.set_attribute("http.request.header.x-priority", ["high" if high else "normal"])
        end = start + int((wait + 0.2) * SECOND)
        request = served.start_span(
            "llm_request", context=trace.set_span_in_context(call), kind=trace.SpanKind.SERVER, start_time=start + 1000
        )
        request.set_attribute("gen_ai.latency.time_in_queue", wait)
        request.set_attribute("gen_ai.latency.e2e", wait + 0.2)
        request.end(end_time=end - 1000)
        call.end(end_time=end)
    engine.force_flush()  # the children first: they wait for their callers
    router.force_flush()
    engine.shutdown()
    router.shutdown()


def test_a_callers_captured_priority_header_shows_the_engines_inversion(server: Server) -> None:
    begin_ns = time.time_ns() - (WINDOWS * 10 + 20) * SECOND
    _send(server, begin_ns)
    onset = dt.datetime.fromtimestamp((begin_ns + ONSET * 10 * SECOND) / SECOND, dt.UTC)
    webhook = {
        "version": "4",
        "status": "firing",
        "alerts": [
            {
                "status": "firing",
                "labels": {"alertname": "SlowChat", "service": "router"},
                "startsAt": onset.isoformat().replace("+00:00", "Z"),
                "fingerprint": "chat-latency",
            }
        ],
    }
    answer = httpx.post(f"{server.api}/webhooks/alertmanager", json=webhook, timeout=60)
    assert answer.status_code == 200, answer.text
    incident = answer.json()["incidents"][0]["id"]
    causes = httpx.get(f"{server.api}/incidents/{incident}/causes", timeout=30).json()["causes"]
    top = causes[0]
    assert (top["node"], top["fault"]) == ("vllm-engine", "scheduler_priority_inversion"), causes[:3]
    signals = {e["signal"]: e for e in top["evidence"]}
    inversion = signals["queue_wait_urgent_minus_ordinary_s"]
    assert inversion["observed"] > inversion["baseline"] + 0.02 and inversion["score"] > 5
