"""Rankings that read Prometheus (`--prometheus-url`) at 1000 services: `python -m benchmarks.prometheus_scale`.

A real Prometheus is backfilled with what a fleet of the scale benchmark's generated mesh
(`simulation.mesh`) would hold without rca seeing a span: the servicegraph connector's
counters and seconds per client → server pair, and per service a mapped gauge (working set) and
counter (CPU seconds); one service's own time rises fivefold at the onset. An `IncidentService`
with a `PrometheusPull` and no spans then takes a first webhook (its pull fetches the whole window
and history: cold), and then, as `rca serve` runs: every graph window the refresher
(`refresh_open`: the sources brought up to date, the open incident re-ranked), and every few
windows a new alert, a window after the last refresh (its pull fetches the window closed since).
Reported: p50/p95 of the webhook (pull and ranking), of its pull alone and of its ranking alone,
beside ranking the same windows in process with the data already in the graph; the refresh; the
cold first webhook. `--no-refresh` leaves the refresher out: each webhook's pull then fetches
every window since the last. The issue's bar: p95 <= 250 ms.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

import numpy as np
import numpy.typing as npt

from benchmarks.prometheus_backfill import Family, Sample, backfilled
from ingest.prometheus import PrometheusPull
from models.ranker import BayesianRanker
from rca.graph.service_graph import ServiceGraph
from rca.graph.writer import GraphWriter
from rca.incidents.service import IncidentService
from rca.ranking.pull import SourceStatus
from rca.telemetry.alerts import Alert, AlertStatus
from rca.telemetry.metric_table import MetricTable
from simulation.mesh import mesh
from simulation.topology import CompiledTopology
from storage.sql import SqlIncidentStore

S = 1_000_000_000
WINDOW_S, SAMPLE_S = 10.0, 15.0
REQUESTS_PER_S = 400.0
WIRE_S = 0.001
SLOWDOWN = 5.0
BEFORE_ONSET_S, AFTER_ONSET_S = 16 * 60, 14 * 60
GATEWAY = "frontend"


@dataclass(frozen=True, slots=True)
class Fleet:
    """Per client → server pair: calls/s and server seconds per call before and after the onset."""

    pairs: list[tuple[str, str]]
    rate: npt.NDArray[np.float64]
    seconds: npt.NDArray[np.float64]  # (pair, 2): before, after
    services: list[str]
    faulty: str


def fleet(services: int) -> Fleet:
    ct = CompiledTopology(mesh(services))
    ops = ct.topology.operations
    below = [int(c) for i, o in enumerate(ops) if o.service == GATEWAY for c in ct.calls[i][:, 0].tolist()]
    faulty = next(ops[int(c)].service for b in below for c in ct.calls[b][:, 0].tolist() if not ops[int(c)].peer)
    server = np.zeros((len(ops), 2))  # mean seconds per call of each operation, before and after
    for op in reversed(ct.topological_order()):
        own = ops[op].median_s * (SLOWDOWN if ops[op].service == faulty else 1.0)
        server[op] = [ops[op].median_s, own]
        for callee, p, count, _ in ct.calls[op].tolist():
            wire = WIRE_S if ops[int(callee)].service != ops[op].service else 0.0
            server[op] += p * (1 + count) / 2 * (server[int(callee)] + wire)
    rate: dict[tuple[str, str], float] = {}
    seconds: dict[tuple[str, str], npt.NDArray[np.float64]] = {}

    def add(pair: tuple[str, str], calls: float, per_call: npt.NDArray[np.float64]) -> None:
        rate[pair] = rate.get(pair, 0.0) + calls
        seconds[pair] = seconds.get(pair, np.zeros(2)) + calls * per_call

    for op, o in enumerate(ops):
        calls = REQUESTS_PER_S * float(ct.visits[op])
        if o.peer:  # a database client span: the database is the server
            add((o.service, o.peer), calls, server[op])
        if op in ct.entry_ops:
            add(("user", o.service), calls, server[op])
        for callee, p, count, _ in ct.calls[op].tolist():
            if ops[int(callee)].service != o.service:
                add((o.service, ops[int(callee)].service), calls * p * (1 + count) / 2, server[int(callee)])
    pairs = sorted(rate)
    r = np.asarray([rate[p] for p in pairs])
    mean = np.asarray([seconds[p] for p in pairs]) / np.maximum(r, 1e-12)[:, None]
    return Fleet(pairs, r, mean, list(ct.services), faulty)


def families(f: Fleet, start_s: float, onset_s: float, rng: np.random.Generator) -> list[Family]:
    t = np.arange(start_s, onset_s + AFTER_ONSET_S + SAMPLE_S, SAMPLE_S)
    after = t >= onset_s
    out = {n: Family(n, "counter") for n in ("traces_service_graph_request", "traces_service_graph_request_failed")}
    sums = {k: Family(f"traces_service_graph_request_{k}_seconds_sum", "unknown") for k in ("server", "client")}
    traffic = rng.lognormal(0.0, 0.05, t.shape)  # the fleet's load: every pair's calls move with it
    for (client, server), rate, (before_s, after_s) in zip(f.pairs, f.rate, f.seconds, strict=True):
        labels = {"client": client, "server": server}
        calls = rate * SAMPLE_S * traffic * rng.lognormal(0.0, 0.005, t.shape)
        per_call = np.where(after, after_s, before_s) * rng.lognormal(0.0, 0.01, t.shape)
        for name, share in (("traces_service_graph_request", 1.0), ("traces_service_graph_request_failed", 0.002)):
            out[name].series.append(Sample(f"{name}_total", labels, t, np.cumsum(calls * share)))
        for side, extra in (("server", 0.0), ("client", WIRE_S)):
            sums[side].series.append(Sample(sums[side].name, labels, t, np.cumsum(calls * (per_call + extra))))
    memory = Family("container_memory_working_set_bytes", "gauge")
    cpu = Family("container_cpu_usage_seconds", "counter")
    for service in f.services:
        labels = {"pod": f"{service}-5d9f8b7c6d-x2x4z", "namespace": "prod", "container": "app"}
        memory.series.append(Sample(memory.name, labels, t, 2e8 * rng.lognormal(0.0, 0.02, t.shape)))
        used = np.cumsum(0.2 * SAMPLE_S * rng.lognormal(0.0, 0.05, t.shape))
        cpu.series.append(Sample(f"{cpu.name}_total", labels, t, used))
    return [*out.values(), *sums.values(), memory, cpu]


class TimedPull:
    """A pull that records how long each took, and fails loudly (a benchmark of failed pulls is none)."""

    def __init__(self, inner: PrometheusPull) -> None:
        self.inner = inner
        self.name = inner.name
        self.ms: list[float] = []

    def pull(self, start_ns: int, end_ns: int) -> SourceStatus:
        began = time.perf_counter()
        status = self.inner.pull(start_ns, end_ns)
        self.ms.append((time.perf_counter() - began) * 1000)
        if not status.ok:
            raise RuntimeError(f"the pull failed: {status.detail}")
        return status


@dataclass(frozen=True, slots=True)
class Report:
    services: int
    pairs: int
    series: int
    samples: int
    rankings: int
    windows_apart: int
    refresh: bool
    setup_s: float  # backfill and Prometheus start
    cold_webhook_ms: float  # the first: its pull fetched the whole window and history
    cold_pull_ms: float
    webhook_p50_ms: float  # later: pull of the new windows and ranking
    webhook_p95_ms: float
    pull_p50_ms: float
    pull_p95_ms: float
    ranking_p50_ms: float
    ranking_p95_ms: float
    in_process_p50_ms: float  # the same windows ranked with every window already in the graph
    in_process_p95_ms: float
    refresh_p50_ms: float  # every window: pull, and the open incident re-ranked (nan without)
    refresh_p95_ms: float
    top_cause: str
    faulty: str


def _p(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def run(services: int, rankings: int, apart: int, refresh: bool, seed: int, workdir: Path) -> Report:
    f = fleet(services)
    start_s = float((time.time() - 4 * 3600) // 600 * 600)
    onset_ns = int((start_s + BEFORE_ONSET_S) * S)
    fams = families(f, start_s, onset_ns / S, np.random.default_rng(seed))
    series = sum(len(x.series) for x in fams)
    samples = sum(len(s.times_s) for x in fams for s in x.series)
    window_ns = int(WINDOW_S * S)
    began = time.perf_counter()
    with backfilled(fams, workdir) as prometheus:
        setup_s = time.perf_counter() - began
        writer = GraphWriter(ServiceGraph(window_seconds=WINDOW_S))
        store = SqlIncidentStore.open(f"sqlite:///{workdir}/rca.db")
        table = MetricTable.default()
        source = PrometheusPull(prometheus.url, writer=writer, table=table, window_seconds=WINDOW_S, timeout_s=10)
        pull = TimedPull(source)
        ranker = BayesianRanker()
        now = [onset_ns + 120 * S + S // 2]
        service = IncidentService(store=store, ranker=ranker, graphs=writer, pulls=[pull], clock=lambda: now[0])
        webhook_ms: list[float] = []
        webhook_pull_ms: list[float] = []
        refresh_ms: list[float] = []
        windows: list[tuple[tuple[str, ...], int, int, float]] = []
        try:
            for i in range(rankings + 1):
                if i:
                    for _ in range(apart - 1 if refresh else 0):
                        now[0] += window_ns
                        t0 = time.perf_counter()
                        service.refresh_open()
                        refresh_ms.append((time.perf_counter() - t0) * 1000)
                    now[0] += window_ns * (1 if refresh else apart)
                labels = {"alertname": "HighLatency", "service": GATEWAY}
                alert = Alert(f"{i:016x}", AlertStatus.FIRING, labels, {}, now[0] - 60 * S, None, "", GATEWAY)
                pulls_before = len(pull.ms)
                t0 = time.perf_counter()
                (summary,) = service.handle([alert])
                webhook_ms.append((time.perf_counter() - t0) * 1000)
                webhook_pull_ms.append(sum(pull.ms[pulls_before:]))
                stored = store.rankings([summary.incident.id], top=1)[summary.incident.id]
                r = stored.ranking
                if not all(status.ok for status in r.sources):
                    raise RuntimeError(f"ranking {i} without its sources: {r.sources}")
                windows.append((stored.alert_nodes, r.start_ns, r.end_ns, r.inference_ms))
                top = r.causes[0].node if r.causes else ""
            in_process = []  # a fresh ranker, warmed as the refresher warms the live one: a window before
            alone = BayesianRanker()
            for nodes, start, end, _ in windows[1:]:
                writer.read(partial(alone.rank, alert_nodes=nodes, start_ns=start, end_ns=end - window_ns))
                t0 = time.perf_counter()
                writer.read(partial(alone.rank, alert_nodes=nodes, start_ns=start, end_ns=end))
                in_process.append((time.perf_counter() - t0) * 1000)
        finally:
            source.close()
            store.close()
            writer.close()
    live, pulls, ranked = webhook_ms[1:], webhook_pull_ms[1:], [w[3] for w in windows[1:]]
    nan = [float("nan")]
    return Report(
        services, len(f.pairs), series, samples, rankings, apart, refresh, setup_s, webhook_ms[0],
        webhook_pull_ms[0], _p(live, 50), _p(live, 95), _p(pulls, 50), _p(pulls, 95), _p(ranked, 50),
        _p(ranked, 95), _p(in_process, 50), _p(in_process, 95), _p(refresh_ms or nan, 50),
        _p(refresh_ms or nan, 95), top, f.faulty,
    )  # fmt: skip


def table(r: Report) -> str:
    rows = [
        ("webhook: pull + ranking", r.webhook_p50_ms, r.webhook_p95_ms),
        ("its pull alone", r.pull_p50_ms, r.pull_p95_ms),
        ("its ranking alone", r.ranking_p50_ms, r.ranking_p95_ms),
        ("in process, data already loaded", r.in_process_p50_ms, r.in_process_p95_ms),
        ("refresh every window (background)", r.refresh_p50_ms, r.refresh_p95_ms),
    ]
    lines = [
        f"{r.services} services, {r.pairs} client-server pairs, {r.series:,} series, {r.samples:,} samples "
        f"(backfill and start {r.setup_s:.1f} s); {r.rankings} webhooks {r.windows_apart} windows apart, "
        f"{'with' if r.refresh else 'without'} the refresher",
        f"cold first webhook {r.cold_webhook_ms:.0f} ms (its pull {r.cold_pull_ms:.0f} ms); "
        f"top cause {r.top_cause} (fault injected on {r.faulty})",
        "| | p50 ms | p95 ms |",
        "| --- | ---: | ---: |",
        *(f"| {name} | {p50:.0f} | {p95:.0f} |" for name, p50, p95 in rows),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.prometheus_scale", description=__doc__)
    parser.add_argument("--services", type=int, default=1000)
    parser.add_argument("--rankings", type=int, default=20, help="webhooks after the first (default 20)")
    parser.add_argument("--apart", type=int, default=3, help="graph windows between webhooks (default 3)")
    parser.add_argument("--no-refresh", action="store_true", help="without the refresher between webhooks")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--report", metavar="FILE", help="write the JSON report here")
    args = parser.parse_args(argv)
    if args.services < 10 or args.rankings < 1 or not 0 < args.apart * args.rankings * WINDOW_S <= AFTER_ONSET_S - 180:
        print("--services >= 10, --rankings >= 1, --apart x --rankings windows within 11 min", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="rca-prometheus-") as workdir:
        report = run(args.services, args.rankings, args.apart, not args.no_refresh, args.seed, Path(workdir))
    print(table(report))
    if args.report:
        Path(args.report).write_text(json.dumps(asdict(report), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
