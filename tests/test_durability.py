"""Crash durability and overload, end to end against a real `rca serve` on SQLite.

`kill -9` in the middle of ingest and webhooks: every incident acknowledged (HTTP 200) before the
kill is there after a restart on the same database, with its alerts and a ranking where the ack
had one; the database passes `PRAGMA integrity_check`; ingest resumes. Under overload (an ingest
queue of one batch) clients get retryable codes and, retrying, lose no span: the spans the
clients saw acknowledged equal those the server counted and those in its graph."""

from __future__ import annotations

import copy
import os
import signal
import sqlite3
import threading
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from benchmarks.soak import METHOD, Template, export, server_metrics
from ingest.otlp_encode import encode_batch
from simulation import SimulatedCase, simulate
from tests.conftest import Server, start_server, stop_server


@cache
def case() -> SimulatedCase:
    return simulate("boutique-latency", seed=1, rate=1)


@cache
def messages() -> tuple[tuple[bytes, int], ...]:
    """(request, spans) of the case, in event-time order."""
    found = []
    for batch in case().batches:
        for body in encode_batch(batch, max_spans=256):
            found.append((body, Template.of(body).records))
    return tuple(found)


def webhooks() -> Iterator[dict[str, Any]]:
    """The case's webhooks, then copies with fresh fingerprints (new alerts), without end."""
    for k in range(1 << 20):
        for body in case().webhooks:
            fresh = copy.deepcopy(body)
            for alert in fresh["alerts"]:
                alert["fingerprint"] = f"{alert['fingerprint']}-{k}"
            yield fresh


def _integrity(db: Path) -> str:
    with sqlite3.connect(db) as connection:
        (result,) = connection.execute("PRAGMA integrity_check").fetchone()
        return str(result)


class Acks:
    """What the server acknowledged: spans, and per webhook the incidents and alerts it named."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.spans = 0
        self.incidents: dict[str, dict[str, Any]] = {}  # id -> the last summary acknowledged
        self.fingerprints: set[str] = set()


def _ingest(server: Server, acks: Acks, stop: threading.Event) -> None:
    with grpc.insecure_channel(server.otlp_grpc) as channel:
        call = channel.unary_unary(METHOD)
        while not stop.is_set():
            for body, spans in messages():
                if stop.is_set():
                    return
                try:
                    result = export(call, body, spans, max_retries=50)
                except grpc.RpcError:
                    return  # the server is gone: this export was never acknowledged
                with acks.lock:
                    acks.spans += result.accepted


def _post_webhooks(server: Server, acks: Acks, stop: threading.Event) -> None:
    with httpx.Client(timeout=30) as client:
        for body in webhooks():
            if stop.is_set():
                return
            try:
                response = client.post(f"{server.api}/webhooks/alertmanager", json=body)
            except httpx.HTTPError:
                return
            if response.status_code != 200:
                continue
            with acks.lock:
                acks.fingerprints |= {a["fingerprint"] for a in body["alerts"]}
                for summary in response.json()["incidents"]:
                    acks.incidents[summary["id"]] = summary


def test_kill_9_mid_ingest_and_webhooks_keeps_every_acknowledged_incident(tmp_path: Path) -> None:
    messages()  # encoded before the clock matters
    server = start_server(tmp_path, "--ingest-queue", "4")
    acks, stop = Acks(), threading.Event()
    threads = [threading.Thread(target=t, args=(server, acks, stop)) for t in (_ingest, _post_webhooks)]
    for thread in threads:
        thread.start()
    try:
        while True:  # both kinds of traffic under way, then the kill lands between requests or in one
            with acks.lock:
                if acks.spans >= 3000 and len(acks.fingerprints) >= 8:
                    break
            if not all(t.is_alive() for t in threads):
                pytest.fail("a client stopped before the kill")
            threading.Event().wait(0.05)
        os.kill(server.process.pid, signal.SIGKILL)
        assert server.process.wait(30) == -signal.SIGKILL
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
        if server.process.poll() is None:
            server.process.kill()
    with acks.lock:
        incidents, fingerprints = dict(acks.incidents), set(acks.fingerprints)
    assert _integrity(tmp_path / "rca.db") == "ok"

    restarted = start_server(tmp_path)
    try:
        stored: set[str] = set()
        for incident_id, acked in incidents.items():
            detail = httpx.get(f"{restarted.api}/incidents/{incident_id}", timeout=30)
            assert detail.status_code == 200, (incident_id, detail.text)
            alerts = detail.json()["alerts"]
            assert len(alerts) >= acked["alerts"]
            stored |= {a["fingerprint"] for a in alerts}
            causes = httpx.get(f"{restarted.api}/incidents/{incident_id}/causes", timeout=30).json()
            if acked["causes"]:
                assert causes["causes"], incident_id  # the ranking acknowledged (or a later one) is there
                assert sum(c["probability"] for c in causes["causes"]) == pytest.approx(1.0, abs=1e-6)
        assert fingerprints <= stored

        body, spans = messages()[0]
        with grpc.insecure_channel(restarted.otlp_grpc) as channel:
            assert export(channel.unary_unary(METHOD), body, spans).accepted == spans  # ingest resumes
        assert server_metrics(restarted.api)["rca_spans_received_total"] == spans
    finally:
        assert stop_server(restarted) == 0
    assert _integrity(tmp_path / "rca.db") == "ok"


def test_overload_answers_retryable_codes_and_retrying_clients_lose_no_span(tmp_path: Path) -> None:
    server = start_server(tmp_path, "--ingest-queue", "1")
    chunks = [messages()[k::6] for k in range(6)]  # six concurrent clients, every request once
    acked, retries, lock = [0], [0], threading.Lock()

    def client(chunk: tuple[tuple[bytes, int], ...]) -> None:
        with grpc.insecure_channel(server.otlp_grpc) as channel:
            call = channel.unary_unary(METHOD)
            for body, spans in chunk:
                result = export(call, body, spans)
                with lock:
                    acked[0] += result.accepted
                    retries[0] += result.retries

    try:
        threads = [threading.Thread(target=client, args=(chunk,)) for chunk in chunks]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(300)
        found = server_metrics(server.api)
        while found["rca_graph_spans_total"] < found["rca_spans_received_total"]:  # the queue drains
            threading.Event().wait(0.1)
            found = server_metrics(server.api)
    finally:
        assert stop_server(server) == 0
    assert acked[0] == case().spans  # every span of the case acknowledged once
    assert found["rca_spans_received_total"] == acked[0]
    assert found["rca_graph_spans_total"] == acked[0]
    assert retries[0] > 0  # the queue of one batch did overflow, and the clients were told to retry
    assert (
        found["rca_otlp_requests_refused_total{reason=overload}"]
        + found.get("rca_spans_dropped_total{reason=overload}", 0.0)
        > 0
    )
