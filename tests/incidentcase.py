"""A live `rca serve` holding one simulated incident (spans over OTLP/gRPC, then the webhooks
Alertmanager had sent by a minute past the first alert), for the graph, page and dashboard tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
import httpx

from ingest.otlp_encode import encode_batch
from rca.telemetry.alerts import parse_rfc3339_ns
from simulation import simulate
from simulation.case import SimulatedCase
from tests.conftest import Server, start_server, stop_server

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
PAST_ALERT_NS = 60 * 1_000_000_000


@dataclass(frozen=True)
class LiveIncident:
    server: Server
    case: SimulatedCase
    incident_id: str
    cut_ns: int  # spans were sent up to here


def _first_alert_ns(case: SimulatedCase) -> int:
    starts = (parse_rfc3339_ns(str(a["startsAt"])) for w in case.webhooks for a in w["alerts"])  # type: ignore[attr-defined]
    return min(s for s in starts if s is not None)


@contextmanager
def live_incident(
    tmp_path: Path, scenario: str = "llm-gpu_memory_bandwidth", rate: float = 1.0
) -> Iterator[LiveIncident]:
    case = simulate(scenario, seed=1, rate=rate)
    cut = _first_alert_ns(case) + PAST_ALERT_NS
    server = start_server(tmp_path)
    try:
        with grpc.insecure_channel(server.otlp_grpc) as channel:
            export = channel.unary_unary(EXPORT)
            for batch in case.batches:
                for message in encode_batch(batch.ended_before(cut), max_spans=4096):
                    export(message, timeout=30)
        incident_id = ""
        for sent_ns, webhook in zip(case.webhook_times_ns, case.webhooks, strict=True):
            if sent_ns < cut:
                answer = httpx.post(f"{server.api}/webhooks/alertmanager", json=webhook, timeout=60)
                assert answer.status_code == 200, answer.text
                incident_id = incident_id or answer.json()["incidents"][0]["id"]
        assert incident_id, "no webhook was sent before the cut"
        yield LiveIncident(server, case, incident_id, cut)
    finally:
        assert stop_server(server) == 0
