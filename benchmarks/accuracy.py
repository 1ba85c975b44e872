"""`rca bench`: methods side by side on the same cases, through the real service path.

rca's Bayesian ranker is measured end to end: each case's spans, then its log records and its
data points (the `real` suite's and Nezha's cases have them) as far as the signals say, go to a live
`rca serve` over OTLP/gRPC up to a minute past its first alert, its Alertmanager webhooks are
POSTed, and the ranking is read from `GET /incidents/{id}/causes`. The peers rank the same spans
in process, without the logs or metrics.
Metrics follow RCAEval: AC@k is the share of cases whose root-cause service is among the top k
(ranked services, duplicates dropped), Avg@5 the mean of AC@1..5; fault@1 is the share whose
top cause has the true fault class (simulated cases only). An overlapping-fault (`*-double`) case
has two roots: either one placed counts, as in `benchmarks.heldout`. Beside them rca's summary has
`mean_top1_probability`, the mean probability of its top cause, to hold against its AC@1.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
import urllib.request
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from tqdm import tqdm

from benchmarks.cases import SUITES, BenchCase, suite_cases
from benchmarks.peers import pagerank_ranking, threshold_ranking
from benchmarks.rcaeval_peers import GRAPH_PEERS, SPAN_PEERS, prepare
from benchmarks.serve_process import launch
from ingest.otlp_encode import encode_batch, encode_log_batch
from ingest.otlp_encode_metrics import encode_metric_batch
from models.training import REPLAY_PAST_ALERT_NS
from rca.graph.service_graph import ServiceGraph

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
EXPORT_LOGS = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"
EXPORT_METRICS = "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"
# What rca is sent: spans always, log records and data points where a case has them (the
# `real` suite's cases and Nezha's have metrics). The first is the default.
SIGNALS = ("traces+logs+metrics", "traces+logs", "traces+metrics", "traces")
LOOKBACK_NS = 300 * 1_000_000_000
START_NS = 1_767_225_600 * 1_000_000_000  # 2026-01-01T00:00:00Z
PeerMethod = Callable[[ServiceGraph, Sequence[str], int, int], list[str]]
PEERS: dict[str, PeerMethod] = {"threshold": threshold_ranking, "pagerank": pagerank_ranking, **GRAPH_PEERS}
METHODS = ("rca", *PEERS, *SPAN_PEERS)  # SPAN_PEERS rank the replayed spans themselves
MISSING = 10**6  # the place of a truth a method did not rank: counts in no AC@k


@dataclass
class _Scores:
    positions: list[int] = field(default_factory=list)
    fault_hits: list[bool] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    probabilities: list[float] = field(default_factory=list)  # top-1 probabilities, rca's only

    def add(self, position: int, seconds: float, fault_hit: bool | None, probability: float | None) -> None:
        self.positions.append(position)
        self.seconds.append(seconds)
        if fault_hit is not None:
            self.fault_hits.append(fault_hit)
        if probability is not None:
            self.probabilities.append(probability)

    def summary(self) -> dict[str, float | None]:
        n = max(len(self.positions), 1)
        ac = {k: sum(p <= k for p in self.positions) / n for k in range(1, 6)}
        summary = {
            "AC@1": ac[1],
            "AC@3": ac[3],
            "Avg@5": sum(ac.values()) / 5,
            "fault@1": sum(self.fault_hits) / len(self.fault_hits) if self.fault_hits else None,
            "seconds_per_case": sum(self.seconds) / n,
        }
        if self.probabilities:  # beside the interface's keys: calibration against AC@1
            summary["mean_top1_probability"] = sum(self.probabilities) / len(self.probabilities)
        return summary


def calibration_line(mean_top1_probability: float, top1_accuracy: float, accuracy: str = "AC@1") -> str:
    """How far the mean top-1 probability sits from a top-1 accuracy (`accuracy` names which), as
    the tables print it."""
    gap = abs(mean_top1_probability - top1_accuracy)
    return f"mean top-1 probability {mean_top1_probability:.2f} against {accuracy} {top1_accuracy:.2f} (gap {gap:.2f})"


def _position(ranked_services: Sequence[str], truths: Sequence[str]) -> int | None:
    """The best 1-based place of any of the truths among the ranked services (duplicates
    dropped; an overlapping-fault case has two roots, either one first is a hit), None if absent."""
    unique = list(dict.fromkeys(ranked_services))
    places = [unique.index(truth) + 1 for truth in truths if truth in unique]
    return min(places, default=None)


def _post(url: str, body: dict[str, object]) -> Any:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.load(response)


Export = Callable[..., bytes]


def _replay(export: Export, export_logs: Export, export_metrics: Export, case: BenchCase) -> ServiceGraph:
    """Sends the case's spans that ended by the cut (an exporter sends a span once it ends), then
    its log records and data points before the cut, over gRPC, as `models.training.simulated_case`
    adds them; returns the same spans as a local graph."""
    cut = case.alert_ns + REPLAY_PAST_ALERT_NS
    local = ServiceGraph(retention_seconds=3600.0)
    for batch in case.batches:
        part = batch.ended_before(cut)
        local.add(part)
        for message in encode_batch(part, max_spans=4096):
            export(message, timeout=30)
    for logs in case.logs:
        for message in encode_log_batch(logs.select(logs.time_ns < cut), max_records=4096):
            export_logs(message, timeout=30)
    for points in case.metrics:
        for message in encode_metric_batch(points.select(points.time_ns < cut), max_points=4096):
            export_metrics(message, timeout=30)
    return local


def _rank_with_rca(api: str, case: BenchCase) -> tuple[list[str], str | None, float, float, list[str]]:
    """rca's ranked services, its top cause's class, the seconds its webhooks took, its top
    cause's probability (0 where it named no cause: a miss it put no confidence in) and the
    services its `simultaneous` roots name (none where one root explains the evidence best)."""
    began = time.perf_counter()
    incident_id = None
    for webhook in case.webhooks:
        answer = _post(f"{api}/webhooks/alertmanager", webhook)
        if answer["incidents"]:
            incident_id = answer["incidents"][0]["id"]
    seconds = time.perf_counter() - began
    if incident_id is None:
        return [], None, seconds, 0.0, []
    answer = _get(f"{api}/incidents/{incident_id}/causes")
    causes = answer["causes"]
    top_fault, top_probability = (causes[0]["fault"], float(causes[0]["probability"])) if causes else (None, 0.0)
    several = [root["service"] for root in answer.get("simultaneous", [])]
    return [c["service"] for c in causes], top_fault, seconds, top_probability, several


def run_suite(
    suite: str, methods: Sequence[str], progress: bool = True, signals: str = SIGNALS[0]
) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """Runs the suite, sending rca the `signals` (`SIGNALS`); returns the report docs/interface.md describes (with
    the signals), the per fault type breakdown and, per case, where each method placed the truth
    and what it put first."""
    if suite not in SUITES:
        raise ValueError(f"unknown suite {suite!r}; one of {', '.join(SUITES)}")
    if signals not in SIGNALS:
        raise ValueError(f"unknown signals {signals!r}; one of {', '.join(SIGNALS)}")
    unknown = set(methods) - set(METHODS)
    if unknown:
        raise ValueError(f"unknown method(s) {', '.join(sorted(unknown))}; known: {', '.join(METHODS)}")
    prepare(methods)
    scores: dict[str, _Scores] = defaultdict(_Scores)
    by_type: dict[tuple[str, str], _Scores] = defaultdict(_Scores)
    workdir = tempfile.mkdtemp(prefix="rca-bench-")
    server, listening = launch("--db", f"sqlite:///{workdir}/rca.db", "--lookback-seconds", str(LOOKBACK_NS / 1e9))
    cases = 0
    per_case: list[dict[str, Any]] = []
    try:
        with grpc.insecure_channel(listening["otlp_grpc"]) as channel:
            export, export_logs = channel.unary_unary(EXPORT), channel.unary_unary(EXPORT_LOGS)
            export_metrics = channel.unary_unary(EXPORT_METRICS)
            api = f"http://{listening['http']}"
            sent = signals.split("+")
            replayed = suite_cases(suite, START_NS, logs="logs" in sent, metrics="metrics" in sent)
            for case in tqdm(replayed, desc=f"bench {suite}", disable=not progress, unit="case"):
                cases += 1
                local = _replay(export, export_logs, export_metrics, case)
                start, end = case.alert_ns - LOOKBACK_NS, case.alert_ns + REPLAY_PAST_ALERT_NS
                rank: dict[str, int | None] = {}
                top: dict[str, str | None] = {}
                row = {"case": case.case_id, "fault_type": case.fault_type, "truth": list(case.truth_services)}
                per_case.append(row | {"rank": rank, "top": top})
                for method in methods:
                    if method == "rca":
                        ranked, fault, seconds, probability, several = _rank_with_rca(api, case)
                        hit = fault in case.truth_faults if case.truth_faults else None
                        per_case[-1]["fault"] = fault  # rca's top cause's class
                        per_case[-1]["probability"] = probability  # and its probability
                        per_case[-1]["simultaneous"] = several  # the services of its several roots
                    else:
                        began = time.perf_counter()
                        peer = SPAN_PEERS.get(method)
                        ranked = (
                            peer(case.batches, case.alert_services, start, end)  # spans from `start` up to the cut
                            if peer
                            else PEERS[method](local, case.alert_services, start, end)
                        )
                        seconds, hit, probability = time.perf_counter() - began, None, None
                    position = _position(ranked, case.truth_services)
                    rank[method], top[method] = position, (ranked[0] if ranked else None)
                    for bucket in (scores[method], by_type[(method, case.fault_type)]):
                        bucket.add(position or MISSING, seconds, hit, probability)
                for webhook in case.resolved:  # the case's alerts end, as Alertmanager would tell
                    _post(f"{api}/webhooks/alertmanager", webhook)
    finally:
        server.terminate()
        server.wait(timeout=30)
    report = {"suite": suite, "signals": signals, "cases": cases, "methods": {m: scores[m].summary() for m in methods}}
    breakdown = {f"{m}/{t}": s.summary() | {"cases": len(s.positions)} for (m, t), s in sorted(by_type.items())}
    return report, breakdown, per_case


def _misses(per_case: list[dict[str, Any]]) -> list[str]:
    """One line per case that rca did not place first."""
    return [
        f"- {row['case']} ({row['fault_type']}): truth {' or '.join(row['truth'])} at {row['rank']['rca'] or 'none'}, "
        f"top {row['top']['rca']} (p {row['probability']:.2f})"
        for row in per_case
        if "rca" in row["rank"] and row["rank"]["rca"] != 1
    ]


def several_roots_line(per_case: list[dict[str, Any]]) -> str | None:
    """How often rca's `simultaneous` named every root of a two-root case, and how often it
    appeared on a one-root case; None where no case was ranked by rca."""
    rows = [row for row in per_case if "simultaneous" in row]
    if not rows:
        return None
    double = [row for row in rows if len(row["truth"]) > 1]
    both = sum(set(row["truth"]) <= set(row["simultaneous"]) for row in double)
    single = [row for row in rows if len(row["truth"]) == 1]
    flagged = sum(bool(row["simultaneous"]) for row in single)
    return (
        f"`simultaneous` named both roots in {both} of {len(double)} two-root cases "
        f"and appeared in {flagged} of {len(single)} one-root cases"
    )


def _table(report: dict[str, Any], breakdown: dict[str, Any]) -> str:
    lines = [
        f"suite {report['suite']} ({report['signals']}): {report['cases']} cases",
        "",
        "| method | AC@1 | AC@3 | Avg@5 | fault@1 | s/case |",
    ]
    lines.append("| --- | ---: | ---: | ---: | ---: | ---: |")

    def row(name: str, m: dict[str, Any]) -> str:
        fault = "–" if m["fault@1"] is None else f"{m['fault@1']:.2f}"
        return (
            f"| {name} | {m['AC@1']:.2f} | {m['AC@3']:.2f} | {m['Avg@5']:.2f} | {fault} | {m['seconds_per_case']:.3f} |"
        )

    lines += [row(name, m) for name, m in report["methods"].items()]
    lines += ["", "| method / fault type | cases | AC@1 | AC@3 | Avg@5 | fault@1 | s/case |"]
    lines.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    lines += [row(name, m).replace(f"| {name} |", f"| {name} | {m['cases']} |", 1) for name, m in breakdown.items()]
    rca = report["methods"].get("rca")
    if rca and "mean_top1_probability" in rca:
        p, ac = rca["mean_top1_probability"], rca["AC@1"]
        lines += ["", f"rca calibration: {calibration_line(p, ac)}"]
    return "\n".join(lines)


def run_accuracy_benchmark(
    suite: str, methods: Sequence[str], report_path: str | None, plot_path: str | None, signals: str = SIGNALS[0]
) -> int:
    try:
        report, breakdown, per_case = run_suite(suite, methods, progress=sys.stderr.isatty(), signals=signals)
    except (ValueError, FileNotFoundError) as exc:
        print(f"rca bench: {exc}", file=sys.stderr)
        return 2
    print(_table(report, breakdown))
    several = several_roots_line(per_case)
    if several:
        print(f"rca several roots: {several}")
    misses = _misses(per_case)
    if misses:
        print("\nrca's misses (place of the truth among the ranked services):", *misses, sep="\n")
    if report_path:
        extra = {"by_fault_type": breakdown, "per_case": per_case}
        Path(report_path).write_text(json.dumps(report | extra, indent=2) + "\n")
    if plot_path:
        from benchmarks.plot import plot_report

        plot_report(report, breakdown, Path(plot_path), per_case)
    return 0
