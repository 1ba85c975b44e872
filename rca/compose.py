"""The composition root: the one place that wires core, receivers and API into `rca serve`.

It alone imports the adapters (`ingest`, `api`); the rest of `rca` stays free of grpc,
fastapi and pydantic.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import socket
import sys
from collections.abc import Callable
from contextlib import nullcontext, suppress
from pathlib import Path
from typing import Any, TextIO

import uvicorn

from api.app import create_app
from ingest.case_files import write_case
from ingest.files import decode_file
from ingest.grpc_receiver import TraceServiceHandler, start_grpc_server
from ingest.http_receiver import otlp_http_app
from models.ranker import BayesianRanker
from rca.config import HostPort, Settings
from rca.graph import ServiceGraph
from rca.graphview import Window, graph_between
from rca.incident_service import IncidentService
from rca.ingestion import Ingestor
from rca.receiving import SpanSink
from rca.simulation import simulate
from rca.spans import DecodeError
from rca.store import IncidentStore, StoreError

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
        self.graph = ServiceGraph(window_seconds=settings.window_seconds, retention_seconds=settings.retention_seconds)
        self.ingestor = Ingestor(self.graph, queue_size=settings.ingest_queue)
        self.sink = SpanSink(self.ingestor)
        self.store = IncidentStore.open(settings.db)
        self.incidents = IncidentService(
            store=self.store, ranker=BayesianRanker(), graphs=self.ingestor, lookback_seconds=settings.lookback_seconds
        )
        self.api = create_app(self.ingestor, self.incidents)
        self.otlp_http = otlp_http_app(
            self.sink, max_message_bytes=settings.max_message_bytes, api_token=settings.api_token
        )

    async def run(self, stop: asyncio.Event, announce: Callable[[dict[str, str]], None]) -> None:
        """Starts every listener, announces their addresses, serves until `stop` is set."""
        s = self.settings
        handler = TraceServiceHandler(self.sink, api_token=s.api_token)
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
        self.ingestor.close()
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


def analyze(paths: list[str], out: TextIO = sys.stdout) -> int:
    """`rca analyze`: decode trace files and print the service graph they make (JSON).

    Ranking root causes over it arrives with the inference issue; the graph is the input."""
    graph = ServiceGraph(retention_seconds=10 * 365 * 86400.0)
    rejected = 0
    for path in paths:
        try:
            result = decode_file(Path(path))
        except (DecodeError, OSError) as exc:
            print(f"rca analyze: {exc}", file=sys.stderr)
            return 2
        rejected += result.rejected
        graph.add(result.batch)
    view = graph_between(graph, Window(0, graph.newest_ns + 1))
    report = {
        "spans": graph.counts().spans,
        "rejected": rejected,
        "nodes": {
            name: {k: data[k] for k in ("kind", "service", "calls", "errors")} for name, data in view.nodes(data=True)
        },
        "edges": [{"source": a, "target": b, "calls": d["calls"]} for a, b, d in view.edges(data=True)],
    }
    out.write(json.dumps(report, indent=2) + "\n")
    return 0


def simulate_case(scenario: str, out_dir: Path, seed: int, rate: float | None, out: TextIO = sys.stdout) -> int:
    """`rca simulate`: writes one fault-injection case (traces, webhooks, truth) and prints a JSON summary."""
    try:
        case = simulate(scenario, seed=seed, rate=rate)
    except ValueError as exc:
        print(f"rca simulate: {exc}", file=sys.stderr)
        return 2
    write_case(case, out_dir)
    truth = case.truth
    summary = {"scenario": scenario, "seed": seed, "spans": case.spans, "webhooks": len(case.webhooks)}
    out.write(json.dumps({**summary, "fault": truth.fault, "node": truth.node, "out": str(out_dir)}) + "\n")
    return 0
