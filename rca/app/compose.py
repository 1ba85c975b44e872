"""The composition root: the one place that wires core, receivers and API into `rca serve`.

It alone imports the adapters (`ingest`, `api`); the rest of `rca` stays free of grpc,
fastapi and pydantic.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import signal
import socket
import sys
from collections.abc import Callable, Sequence
from contextlib import nullcontext, suppress
from pathlib import Path
from typing import Any, TextIO

import uvicorn
from pydantic import ValidationError

from api.app import create_app
from api.metrics import ServiceMetrics
from api.schemas import WebhookBody, cause_json, several_roots_json
from ingest.files import decode_file, decode_log_file, decode_metric_file
from ingest.grpc_receiver import ExportHandler, start_grpc_server
from ingest.http_receiver import otlp_http_app
from models.health import load_params, params_version
from models.params_file import read_params
from models.ranker import MODEL_NAME, BayesianRanker
from rca.app.config import HostPort, Settings
from rca.graph.service_graph import ServiceGraph
from rca.graph.sink import SpanSink
from rca.graph.view import Window, graph_between
from rca.graph.writer import GraphWriter
from rca.incidents.feedback import FeedbackService
from rca.incidents.service import IncidentService
from rca.incidents.topology import topology_between
from rca.ranking.pull import TelemetryPull
from rca.ranking.warmup import warm_up
from rca.telemetry.alerts import Alert, format_rfc3339
from rca.telemetry.metric_table import MetricTable
from rca.telemetry.spans import DecodeError
from simulation import simulate
from simulation.case_files import write_case
from storage.sql import SqlIncidentStore, StoreError

log = logging.getLogger("rca")


class _QuietServer(uvicorn.Server):
    """A uvicorn server that leaves signal handling to `serve`."""

    def install_signal_handlers(self) -> None:  # uvicorn < 0.29
        return None

    def capture_signals(self) -> Any:  # uvicorn >= 0.29
        return nullcontext()


def _bind(address: HostPort) -> socket.socket:
    family = socket.AF_INET6 if ":" in address.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((address.host, address.port))
    sock.listen(1024)
    sock.setblocking(False)
    return sock


def _http_server(app: Any) -> _QuietServer:
    config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False, timeout_graceful_shutdown=5)
    return _QuietServer(config)


class Service:
    """Everything `rca serve` runs, built from `Settings`."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.graph = ServiceGraph(
            window_seconds=settings.window_seconds,
            retention_seconds=settings.retention_seconds,
            metric_table=MetricTable.default(settings.metric_rules),
        )
        self.writer = GraphWriter(self.graph, queue_size=settings.ingest_queue)
        self.metrics = ServiceMetrics()
        self.sink = SpanSink(self.writer, decode_seconds=self.metrics.decode_seconds.observe)
        self.store = SqlIncidentStore.open(settings.db)
        params = read_params(settings.params) if settings.params else load_params()
        model = BayesianRanker(params=params)
        warm_up(model, window_seconds=settings.window_seconds)  # the first alert finds the kernels loaded
        pulls: list[TelemetryPull] = []
        if settings.prometheus_url is not None:
            from ingest.prometheus import PrometheusPull  # httpx is loaded only when it is used

            pulls.append(
                PrometheusPull(
                    settings.prometheus_url,
                    writer=self.writer,
                    table=self.graph.measures.table,
                    window_seconds=settings.window_seconds,
                    timeout_s=settings.prometheus_timeout_seconds,
                )
            )
        self.metrics.model_info(MODEL_NAME, params_version(params))
        self.incidents = IncidentService(
            store=self.store,
            ranker=self.metrics.observed(model),
            graphs=self.writer,
            lookback_seconds=settings.lookback_seconds,
            pulls=pulls,
            history_seconds=model.history_seconds,
        )
        self.feedback = FeedbackService(
            store=self.store, model=model, graphs=self.writer, lookback_seconds=settings.lookback_seconds
        )
        self.metrics.watch(self.sink, self.writer, self.store)
        self.api = create_app(
            self.writer, self.incidents, api_token=settings.api_token, metrics=self.metrics, feedback=self.feedback
        )
        self.otlp_http = otlp_http_app(
            self.sink, max_message_bytes=settings.max_message_bytes, api_token=settings.api_token
        )

    async def run(self, stop: asyncio.Event, announce: Callable[[dict[str, str]], None]) -> None:
        """Starts every listener, announces their addresses, serves until `stop` is set."""
        s = self.settings
        handler = ExportHandler(self.sink, api_token=s.api_token)
        grpc_server, grpc_port = start_grpc_server(handler, str(s.otlp_grpc), max_message_bytes=s.max_message_bytes)
        sockets = {"otlp_http": _bind(s.otlp_http), "http": _bind(s.http)}
        servers = {"otlp_http": _http_server(self.otlp_http), "http": _http_server(self.api)}
        tasks = [asyncio.create_task(servers[k].serve(sockets=[sockets[k]])) for k in servers]
        while not all(server.started for server in servers.values()):
            if any(t.done() for t in tasks):
                grpc_server.stop(0)
                await asyncio.gather(*tasks)
                raise OSError("an HTTP listener failed to start")
            await asyncio.sleep(0.01)
        ports = {k: sock.getsockname()[1] for k, sock in sockets.items()}
        # What startup built (modules, the JIT-compiled scanner, models) lives as long as the
        # process: out of the collector's sight, full collections stop pausing rankings.
        gc.collect()
        gc.freeze()
        announce(
            {
                "event": "listening",
                "otlp_grpc": str(HostPort(s.otlp_grpc.host, grpc_port)),
                "otlp_http": str(HostPort(s.otlp_http.host, ports["otlp_http"])),
                "http": str(HostPort(s.http.host, ports["http"])),
            }
        )
        refresher = asyncio.create_task(self._refresh_incidents(stop))
        await stop.wait()
        await refresher
        log.info("shutting down: receivers stop accepting, in-flight work finishes")
        grpc_done = grpc_server.stop(grace=5)
        for server in servers.values():
            server.should_exit = True
        await asyncio.gather(*tasks)
        await asyncio.to_thread(grpc_done.wait)
        self.writer.close()
        self.store.close()
        log.info("stopped")

    async def _refresh_incidents(self, stop: asyncio.Event) -> None:
        """Once a graph window, re-ranks the open incidents that newer spans have moved on."""
        while not stop.is_set():
            with suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.settings.window_seconds)
            if stop.is_set():
                return
            try:
                await asyncio.to_thread(self.incidents.refresh_open)
            except Exception:  # a failed refresh must not stop the service; the next one retries
                log.exception("refreshing open incidents failed")


def serve(settings: Settings, out: TextIO = sys.stdout) -> int:
    """`rca serve`: runs until SIGTERM or SIGINT, then shuts down gracefully; returns 0."""
    if settings.listens_beyond_loopback() and not settings.api_token:
        log.warning("WARNING: listening beyond loopback without --api-token: anyone who can reach it can use it")

    def announce(line: dict[str, str]) -> None:
        out.write(json.dumps(line) + "\n")
        out.flush()

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with suppress(NotImplementedError):
                loop.add_signal_handler(sig, stop.set)
        await Service(settings).run(stop, announce)

    try:
        asyncio.run(main())
    except StoreError as exc:
        print(f"rca serve: --db: {exc}", file=sys.stderr)
        return 2
    return 0


def _webhook_alerts(path: str) -> list[Alert]:
    """The alerts of an Alertmanager webhook body in a file; ValueError names what is wrong."""
    try:
        return WebhookBody.model_validate_json(Path(path).read_bytes()).to_alerts()
    except ValidationError as exc:
        where = ".".join(str(part) for part in exc.errors()[0]["loc"])
        raise ValueError(f"{path}: not an Alertmanager webhook body: {where}: {exc.errors()[0]['msg']}") from None


NODE_FIELDS = ("kind", "service", "calls", "errors")


def analyze(
    paths: list[str],
    alerts_path: str | None = None,
    out: TextIO = sys.stdout,
    *,
    log_paths: Sequence[str] = (),
    metric_paths: Sequence[str] = (),
) -> int:
    """`rca analyze`: ranks the root causes in trace (and log and metric) files and prints them with the
    graph (JSON), and `simultaneous` where several roots explain the evidence better than one.

    With `--alerts` the alerting services and the window come from the webhook body (earliest
    startsAt less the look-back, to the newest span); without, the trace roots alert over the
    last look-back of the traces. Log records are added after every span, so that they join, and
    data points last."""
    graph = ServiceGraph(retention_seconds=10 * 365 * 86400.0)
    rejected = rejected_logs = rejected_points = 0
    try:
        alerts = _webhook_alerts(alerts_path) if alerts_path else []
        for path in paths:
            result = decode_file(Path(path))
            rejected += result.rejected
            graph.add(result.batch)
        for path in log_paths:
            logs = decode_log_file(Path(path))
            rejected_logs += logs.rejected
            graph.add_logs(logs.batch)
        for path in metric_paths:
            points = decode_metric_file(Path(path))
            rejected_points += points.rejected
            graph.add_metrics(points.batch)
    except (DecodeError, OSError, ValueError) as exc:
        print(f"rca analyze: {exc}", file=sys.stderr)
        return 2
    view = graph_between(graph, Window(0, graph.newest_ns + 1))
    topology = topology_between(graph, 0, graph.newest_ns + 1)  # the service's alert placement
    roots = list(topology.roots)
    alert_nodes = sorted({n for a in alerts for n in topology.nodes_for(a.service)})
    lookback_ns = int(Settings().lookback_seconds * 1e9)
    end = graph.newest_ns + 1
    start = min(a.starts_at_ns for a in alerts) - lookback_ns if alerts else end - lookback_ns
    ranking = BayesianRanker().rank(graph, alert_nodes=alert_nodes or roots, start_ns=start, end_ns=end)
    report = {
        "spans": graph.counts().spans,
        "rejected": rejected,
        "log_records": graph.counts().log_records,
        "rejected_log_records": rejected_logs,
        "data_points": graph.counts().metric_points,
        "unmapped_data_points": graph.counts().metric_points_unknown,
        "rejected_data_points": rejected_points,
        "alerting": alert_nodes or roots,
        "window": {"start": format_rfc3339(ranking.start_ns), "end": format_rfc3339(ranking.end_ns)},
        "model": {"name": ranking.model, "inference_ms": ranking.inference_ms},
        "causes": [cause_json(c) for c in ranking.causes],
        **several_roots_json(ranking),
        "nodes": {name: {k: data.get(k, 0.0) for k in NODE_FIELDS} for name, data in view.nodes(data=True)},
        "edges": [{"source": a, "target": b, "calls": d["calls"]} for a, b, d in view.edges(data=True)],
    }
    out.write(json.dumps(report, indent=2) + "\n")
    return 0


def simulate_case(
    scenario: str,
    out_dir: Path,
    seed: int,
    rate: float | None,
    out: TextIO = sys.stdout,
    profile: str = "default",
    style: str = "conventions",
) -> int:
    """`rca simulate`: writes one fault-injection case (traces, logs, metrics in the real-deployment
    `style`, webhooks, truth) and prints a JSON summary."""
    try:
        case = simulate(scenario, seed=seed, rate=rate, profile=profile, style=style)
    except ValueError as exc:
        print(f"rca simulate: {exc}", file=sys.stderr)
        return 2
    write_case(case, out_dir)
    truth = case.truth
    summary = {"scenario": scenario, "seed": seed, "spans": case.spans, "webhooks": len(case.webhooks)}
    summary |= {"data_points": case.data_points} if case.metrics else {}
    out.write(json.dumps({**summary, "fault": truth.fault, "node": truth.node, "out": str(out_dir)}) + "\n")
    return 0
