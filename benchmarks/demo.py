"""`rca demo`: the whole story on one machine in under a minute (docs/interface.md, Command line).

A simulated LLM-serving cluster with an injected fault (`simulation`) is shifted so that its
first alert fired a minute ago, its spans and then its log records up to now go through the real
OpenTelemetry SDK and OTLP/gRPC exporters into a fresh `rca serve` on free loopback ports, the Alertmanager webhooks
fired by then are POSTed, and the ranked causes are printed beside the truth with the URL of the
incident's causal graph.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TextIO

from benchmarks.serve_process import launch

if TYPE_CHECKING:
    from simulation import SimulatedCase

PAST_ALERT_NS = 60 * 1_000_000_000  # spans sent up to a minute past the first alert, as `rca bench` does
SHOWN_CAUSES = 3


def _clock(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%H:%M:%S UTC")


def _post(url: str, body: object) -> Any:
    data = json.dumps(body).encode()
    request = urllib.request.Request(url, data, headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.load(response)


def _first_alert_ns(case: SimulatedCase) -> int:
    starts = [str(a["startsAt"]) for w in case.webhooks for a in w["alerts"]]  # type: ignore[attr-defined]
    return min(int(datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp() * 1e9) for s in starts)


def live_case(scenario: str, seed: int, rate: float) -> tuple[SimulatedCase, int]:
    """The case re-simulated so that its first alert started a minute ago, cut at now: only the
    spans, log records and firing webhooks that exist by then. Returns it and the cut (event time)."""
    from simulation import simulate

    probe = simulate(scenario, seed=seed, rate=rate)
    offset = _first_alert_ns(probe) + PAST_ALERT_NS - probe.start_ns
    case = simulate(scenario, seed=seed, rate=rate, start_ns=time.time_ns() - offset)
    cut = _first_alert_ns(case) + PAST_ALERT_NS
    sent = [(w, t) for w, t in zip(case.webhooks, case.webhook_times_ns, strict=True) if t <= cut]
    firing = [(w, t) for w, t in sent if w.get("status") == "firing"]
    batches = tuple(b.ended_before(cut) for b in case.batches)
    logs = tuple(b.select(b.time_ns < cut) for b in case.logs)
    trimmed = replace(
        case,
        batches=tuple(b for b in batches if len(b)),
        logs=tuple(b for b in logs if len(b)),
        webhooks=tuple(w for w, _ in firing),
        webhook_times_ns=tuple(t for _, t in firing),
        end_ns=cut,
    )
    return trimmed, cut


def _drain(stream: TextIO, tail: deque[str]) -> None:
    """Keeps the service's stderr flowing (a full pipe would block it) and its last lines."""
    for line in stream:
        tail.append(line)


def _alerts_line(webhook: dict[str, Any]) -> str:
    names = sorted(
        {f"{a['labels'].get('alertname', '?')} on {a['labels'].get('service', '?')}" for a in webhook["alerts"]}
    )
    return ", ".join(names)


def _evidence(cause: dict[str, Any]) -> str:
    top = sorted(cause["evidence"], key=lambda e: -(e["score"] or 0.0))[:2]
    return "; ".join(f"{e['signal']} {e['observed']:.3g} against {e['baseline']:.3g} before" for e in top) or "none"


def _story_of_causes(causes: dict[str, Any], truth_node: str, out: TextIO) -> None:
    model = causes["model"]
    print(f"\nrca concluded ({model['name']}, {model['inference_ms']:.0f} ms of inference):", file=out)
    for cause in causes["causes"][:SHOWN_CAUSES]:
        mark = "   <- the injected node" if cause["node"] == truth_node else ""
        owner = f" (service {cause['service']})" if cause["service"] != cause["node"] else ""
        print(
            f"  {cause['rank']}. {cause['node']}{owner}: {cause['fault']}, p = {cause['probability']:.2f}{mark}",
            file=out,
        )
        print(f"     evidence: {_evidence(cause)}", file=out)
        print(f"     path: {' -> '.join(cause['path'])}", file=out)


def _verdict(causes: list[dict[str, Any]], node: str, fault: str) -> str:
    ranks = [c["rank"] for c in causes if c["node"] == node]
    if not ranks:
        return f"the injected node {node} is not among the candidates"
    top = causes[0]
    if ranks[0] == 1:
        same = "and the fault class" if top["fault"] == fault else f"but the fault class is {top['fault']}"
        return f"rca's top cause is the injected node {node} {same}"
    return f"the injected node {node} is ranked #{ranks[0]} (top: {top['node']})"


def run_demo(
    scenario: str,
    seed: int,
    rate: float,
    *,
    http: str = "127.0.0.1:0",
    keep_running: bool = False,
    out: TextIO = sys.stdout,
) -> int:
    """Runs the demo (`rate`: requests per second; 0.5 makes ~9k spans up to the cut, a few seconds
    through the SDK); returns 0 when every step worked, whatever rca concluded."""
    began = time.monotonic()
    workdir = tempfile.mkdtemp(prefix="rca-demo-")
    with ThreadPoolExecutor(1) as pool:  # the service starts (seconds: torch, Pyro) while the case is made
        starting = pool.submit(launch, "--db", f"sqlite:///{workdir}/rca.db", "--http", http)
        from benchmarks.sdk_replay import replay_logs_with_sdk, replay_with_sdk  # overlaps the service's start

        try:
            case, cut = live_case(scenario, seed, rate)
        except ValueError:
            _stop(starting.result()[0])
            raise
        server, listening = starting.result()
    truth = case.truth
    tail: deque[str] = deque(maxlen=20)
    assert server.stderr is not None
    threading.Thread(target=_drain, args=(server.stderr, tail), daemon=True).start()
    api = f"http://{listening['http']}"
    try:
        print(f"rca demo: scenario {scenario}, seed {seed}", file=out)
        print(f"  rca serve is up: OTLP/gRPC {listening['otlp_grpc']}, API {api} (data in {workdir})", file=out)
        print(
            f"  injected: {truth.fault} on {truth.node} (service {truth.service}) at {_clock(truth.inject_ns)},"
            f" in the simulated {truth.topology} cluster ({truth.services} services)",
            file=out,
        )
        sent_at = time.monotonic()
        spans = replay_with_sdk(case, listening["otlp_grpc"])
        records = replay_logs_with_sdk(case, listening["otlp_grpc"])
        print(
            f"  sent {spans:,} spans and {records:,} log records ({_clock(case.start_ns)} to {_clock(cut)})"
            f" through the OpenTelemetry SDK's OTLP/gRPC exporters in {time.monotonic() - sent_at:.1f} s",
            file=out,
        )
        incident_id = None
        for webhook, sent_ns in zip(case.webhooks, case.webhook_times_ns, strict=True):
            answer = _post(f"{api}/webhooks/alertmanager", webhook)
            ids = [i["id"] for i in answer["incidents"]]
            incident_id = incident_id or (ids[0] if ids else None)
            print(
                f"  Alertmanager at {_clock(sent_ns)}: {_alerts_line(webhook)} -> incident {', '.join(ids)}", file=out
            )
        if incident_id is None:
            print("rca demo: the webhooks opened no incident", file=out)
            return 1
        causes = _get(f"{api}/incidents/{incident_id}/causes")
        _story_of_causes(causes, truth.node, out)
        print(f"\nverdict: {_verdict(causes['causes'], truth.node, truth.fault)}", file=out)
        print(f"\nthe causal graph:  {api}/ui/incidents/{incident_id}", file=out)
        print(f"causes as JSON:    {api}/incidents/{incident_id}/causes", file=out)
        print(f"service graph:     {api}/graph   metrics: {api}/metrics", file=out)
        print(f"(demo took {time.monotonic() - began:.1f} s)", file=out)
        if keep_running:
            print("rca serve keeps running; Ctrl-C stops it", file=out, flush=True)
            _wait_for_interrupt()
    finally:
        code = _stop(server)
    if code != 0:
        print(f"rca serve exited with {code}:\n{''.join(tail)}", file=sys.stderr)
    return code


def _stop(server: subprocess.Popen[str]) -> int:
    server.send_signal(signal.SIGTERM)
    try:
        return server.wait(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()


def _wait_for_interrupt() -> None:
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(1.0):
        pass
