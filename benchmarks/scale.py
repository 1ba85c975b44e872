"""`rca bench scale`: how ranking cost grows with the graph (50, 200 and 1000 services).

Per size, the simulator's generated mesh of that many services (`simulation.mesh`: the same
topologies as the `mesh200-*` and `mesh1000-*` scenarios) carries a latency fault; its spans up to
a minute past the alert are replayed over OTLP/gRPC into a fresh `rca serve`, paced at a steady
spans/s; then webhooks on the user-facing gateway are POSTed one after another, each alert with its
own fingerprint, so each one re-ranks the incident. Webhook time is the POST until its 200 (which
carries the causes: ranking is synchronous); ranking time is the model's own `inference_ms`. The
graph does not change while the webhooks arrive, so rankings after the first reuse every window
series column (`rca.graph.series.SeriesCache`); the last column measures ranking in process with a
second of new spans added before each, as under live ingest.
"""

from __future__ import annotations

import gc
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import grpc
import numpy as np

from benchmarks.accuracy import EXPORT, LOOKBACK_NS, START_NS, _get, _post
from benchmarks.cases import nezha_webhook
from benchmarks.serve_process import launch
from ingest.otlp_encode import encode_batch
from models.ranker import BayesianRanker
from models.training import REPLAY_PAST_ALERT_NS
from rca.graph.service_graph import ServiceGraph
from rca.incidents.topology import topology_between
from rca.telemetry.faults import Fault
from rca.telemetry.spans import SpanBatch
from simulation.faults import Variant, plan_fault
from simulation.generator import generate
from simulation.mesh import mesh
from simulation.topology import CompiledTopology
from simulation.traffic import Hiccups, Traffic

SIZES = (50, 200, 1000)
SECOND = 1_000_000_000
BASELINE_S, ALERT_DELAY_S = 360, 90  # normal traffic before the fault; the fault until its alert
GATEWAY = "frontend"


@dataclass(frozen=True, slots=True)
class ScaleRow:
    services: int
    spans: int  # replayed into the graph
    candidates: int  # nodes the ranking scored
    replay_spans_per_s: float  # achieved
    ranking_p50_ms: float
    ranking_p95_ms: float
    webhook_p50_ms: float
    webhook_p95_ms: float
    live_ranking_p50_ms: float  # in process, a second of new spans added before each ranking
    live_ranking_p95_ms: float


def mesh_case(services: int, seed: int, rate: float, start_ns: int) -> tuple[SpanBatch, int]:
    """A latency fault in the `services`-service mesh: its spans up to a minute past the alert
    (start-sorted), and the alert's time."""
    ct = CompiledTopology(mesh(services))
    rng = np.random.default_rng([seed, services])
    inject = start_ns + BASELINE_S * SECOND
    alert = inject + ALERT_DELAY_S * SECOND
    stop = alert + REPLAY_PAST_ALERT_NS
    plan = plan_fault(ct, Fault.LATENCY, Variant.NONE, inject, stop + 120 * SECOND, rng)
    traffic = Traffic(start_ns, stop, rate, 300.0, 0.0)
    noisy = [ct.service_index[s] for s in ct.topology.noisy]
    batch = generate(ct, plan, traffic, Hiccups.draw(noisy, start_ns, stop, rng), rng)
    return batch.select(batch.start_ns < stop), alert


def _replay(export: grpc.UnaryUnaryMultiCallable, batch: SpanBatch, spans_per_second: float | None) -> float:
    """Sends the spans in 4096-span requests, paced to `spans_per_second` (None: as fast as
    accepted); returns the achieved spans/s."""
    messages = encode_batch(batch, max_spans=4096)
    sizes = np.cumsum([0] + [min(4096, len(batch) - i * 4096) for i in range(len(messages))])
    began = time.perf_counter()
    for i, message in enumerate(messages):
        if spans_per_second:
            time.sleep(max(0.0, began + sizes[i] / spans_per_second - time.perf_counter()))
        export(message, timeout=60)
    return len(batch) / max(time.perf_counter() - began, 1e-9)


def _ranking_under_ingest(batch: SpanBatch, alert_ns: int, rankings: int) -> tuple[float, float]:
    """Ranking time in process while spans keep arriving: the case but its last `rankings`
    seconds goes into a graph, then each ranking follows one more second of spans (so the newest
    windows change, and now and then a new window opens, as under live ingest)."""
    cut = int(batch.start_ns.max()) - rankings * SECOND
    graph = ServiceGraph()
    graph.add(batch.select(batch.start_ns < cut))
    ranker = BayesianRanker()
    start = alert_ns - LOOKBACK_NS
    alert_nodes = topology_between(graph, start, graph.newest_ns + 1).nodes_for(GATEWAY)
    ranker.rank(graph, alert_nodes=alert_nodes, start_ns=start, end_ns=graph.newest_ns + 1)
    gc.collect()
    gc.freeze()  # as `rca serve` does after startup
    ms = []
    for k in range(rankings):
        since = cut + k * SECOND
        graph.add(batch.select((batch.start_ns >= since) & (batch.start_ns < since + SECOND)))
        began = time.perf_counter()
        ranker.rank(graph, alert_nodes=alert_nodes, start_ns=start, end_ns=graph.newest_ns + 1)
        ms.append((time.perf_counter() - began) * 1000)
    return _percentiles(ms)


def _percentiles(values: Sequence[float]) -> tuple[float, float]:
    return float(np.percentile(values, 50)), float(np.percentile(values, 95))


def measure(services: int, *, seed: int, rate: float, spans_per_second: float | None, webhooks: int) -> ScaleRow:
    batch, alert_ns = mesh_case(services, seed, rate, START_NS)
    workdir = tempfile.mkdtemp(prefix="rca-scale-")
    server, listening = launch("--db", f"sqlite:///{workdir}/rca.db")
    try:
        with grpc.insecure_channel(listening["otlp_grpc"]) as channel:
            achieved = _replay(channel.unary_unary(EXPORT), batch, spans_per_second)
        api = f"http://{listening['http']}"
        ranking_ms, webhook_ms, candidates = [], [], 0
        for i in range(webhooks):
            body = nezha_webhook(f"scale-{services}-{seed}-{i}", GATEWAY, alert_ns)  # a fresh fingerprint each
            began = time.perf_counter()
            answer = _post(f"{api}/webhooks/alertmanager", body)
            webhook_ms.append((time.perf_counter() - began) * 1000)
            incident = answer["incidents"][0]
            if not incident["causes"]:
                raise RuntimeError(f"webhook {i} at {services} services answered without causes")
            causes = _get(f"{api}/incidents/{incident['id']}/causes")
            ranking_ms.append(float(causes["model"]["inference_ms"]))
            candidates = len(causes["causes"])
    finally:
        server.terminate()
        server.wait(timeout=30)
    live = _ranking_under_ingest(batch, alert_ns, webhooks)
    return ScaleRow(
        services, len(batch), candidates, achieved, *_percentiles(ranking_ms), *_percentiles(webhook_ms), *live
    )


def run_scale(
    sizes: Sequence[int], *, seed: int, rate: float, spans_per_second: float | None, webhooks: int
) -> dict[str, object]:
    """The scale report: one row per size, and the settings it ran with."""
    rows = [measure(n, seed=seed, rate=rate, spans_per_second=spans_per_second, webhooks=webhooks) for n in sizes]
    return {
        "suite": "scale",
        "seed": seed,
        "requests_per_second": rate,
        "target_spans_per_second": spans_per_second,
        "webhooks_per_size": webhooks,
        "rows": [asdict(r) for r in rows],
    }


def table(report: dict[str, object]) -> str:
    rows = report["rows"]
    assert isinstance(rows, list)
    lines = [
        "| services | spans in graph | candidates | replay spans/s | ranking p50 / p95 ms | webhook p50 / p95 ms "
        "| ranking under ingest p50 / p95 ms |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r['services']} | {r['spans']:,} | {r['candidates']} | {r['replay_spans_per_s']:,.0f} "
            f"| {r['ranking_p50_ms']:.0f} / {r['ranking_p95_ms']:.0f} "
            f"| {r['webhook_p50_ms']:.0f} / {r['webhook_p95_ms']:.0f} "
            f"| {r['live_ranking_p50_ms']:.0f} / {r['live_ranking_p95_ms']:.0f} |"
        )
    return "\n".join(lines)


def run_scale_benchmark(
    sizes: Sequence[int], seed: int, rate: float, spans_per_second: float, webhooks: int, report_path: str | None
) -> int:
    if not sizes or min(sizes) < 10 or rate <= 0 or webhooks < 1:
        print("rca bench scale: sizes >= 10 services, --rate > 0 and --webhooks >= 1", file=sys.stderr)
        return 2
    report = run_scale(sizes, seed=seed, rate=rate, spans_per_second=spans_per_second or None, webhooks=webhooks)
    print(table(report))
    if report_path:
        Path(report_path).write_text(json.dumps(report, indent=2) + "\n")
    return 0
