"""`rca bench ingest`: end-to-end OTLP/gRPC spans/s (and log records/s) beside the bare parse and
bare receiver rates.

All are measured in the same run on the same payload. The client runs in a child process, so the
receiver under test has the server process to itself, as in production. Two bare grpcio receivers
serve as references: one that only parses (upb) and one that also extracts span records with rca's
decoder, so that the ratio to the second is the cost of everything rca does after decoding (queue,
graph, acknowledgement). The bare receivers and rca are measured in alternating rounds and each
ratio is the median of the rounds' ratios: on a shared machine one pair of measurements moves by a
third from run to run. Log records are measured the same way after the spans, beside a bare receiver
that parses `ExportLogsServiceRequest` (`benchmarks.log_payload`: 1000 records of ~100 characters per
request, a few dozen templates), and then metric data points (`benchmarks.metric_payload`: one scrape
round of a GPU fleet per request, ~700 points of DCGM, cAdvisor and vLLM series).
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import resource
import statistics
import threading
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import grpc
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from benchmarks.log_payload import RECORDS_PER_REQUEST, TEMPLATES, log_export_requests
from benchmarks.metric_payload import POINTS_PER_REQUEST, metric_export_requests
from benchmarks.payload import export_requests
from ingest.otlp_logs import decode_logs_protobuf
from ingest.otlp_metrics import decode_metrics_protobuf
from ingest.otlp_proto import decode_protobuf
from rca.app.config import HostPort, Settings

if TYPE_CHECKING:
    from rca.app.compose import Service

T = TypeVar("T")

SPANS_PER_REQUEST = 1024
REQUESTS = 64
STEADY_REFRESH_S = 5
METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
LOGS_METHOD = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"
METRICS_METHOD = "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"


def _parse(request: bytes) -> None:
    ExportTraceServiceRequest().ParseFromString(request)


def _parse_logs(request: bytes) -> None:
    ExportLogsServiceRequest().ParseFromString(request)


def _parse_metrics(request: bytes) -> None:
    ExportMetricsServiceRequest().ParseFromString(request)


@dataclass(frozen=True)
class Load:
    """What is measured: `requests(count, per_request, start_ns)` of `per_request` records each,
    sent to the Export `method`, parsed alone by `parse` and decoded by rca's `decode`."""

    method: str
    per_request: int
    requests: Callable[[int, int, int], list[bytes]]
    parse: Callable[[bytes], object]
    decode: Callable[[bytes], object]

    @property
    def service(self) -> str:
        return self.method.split("/")[1]


SPANS = Load(METHOD, SPANS_PER_REQUEST, export_requests, _parse, decode_protobuf)
LOGS = Load(LOGS_METHOD, RECORDS_PER_REQUEST, log_export_requests, _parse_logs, decode_logs_protobuf)
METRICS = Load(METRICS_METHOD, POINTS_PER_REQUEST, metric_export_requests, _parse_metrics, decode_metrics_protobuf)


@dataclass(frozen=True)
class Rates:
    parse: float
    parse_extract: float
    bare_receiver: tuple[float, ...]  # parse only, one per round
    decoding_receiver: tuple[float, ...]  # parse + extract, one per round
    rca_end_to_end: tuple[float, ...]
    peak_rss_mb: float

    @property
    def ratios(self) -> tuple[float, ...]:
        """rca over the parse-only receiver, round by round."""
        return _ratios(self.rca_end_to_end, self.bare_receiver)

    @property
    def decoding_ratios(self) -> tuple[float, ...]:
        """rca over the parse-and-extract receiver, round by round."""
        return _ratios(self.rca_end_to_end, self.decoding_receiver)


def _ratios(rates: tuple[float, ...], references: tuple[float, ...]) -> tuple[float, ...]:
    return tuple(r / b for r, b in zip(rates, references, strict=True))


def _rate(load: Load, work: Callable[[bytes], object], payloads: list[bytes], seconds: float) -> float:
    records = 0
    deadline = time.perf_counter() + seconds
    start = time.perf_counter()
    while time.perf_counter() < deadline:
        for p in payloads[:8]:
            work(p)
            records += load.per_request
    return records / (time.perf_counter() - start)


def _client(load: Load, address: str, payloads: list[bytes], seconds: float, in_flight: int, result: mp.Queue) -> None:  # type: ignore[type-arg]
    channel = grpc.insecure_channel(address, options=[("grpc.max_send_message_length", 64 << 20)])
    export = channel.unary_unary(load.method)
    grpc.channel_ready_future(channel).result(timeout=10)
    sent = 0
    pending: list[grpc.Future] = []
    start = time.perf_counter()
    deadline = start + seconds
    i = 0
    while time.perf_counter() < deadline:
        while len(pending) < in_flight:
            pending.append(export.future(payloads[i % len(payloads)]))
            i += 1
        pending.pop(0).result()
        sent += load.per_request
    for f in pending:
        f.result()
        sent += load.per_request
    result.put(sent / (time.perf_counter() - start))


def _drive(load: Load, address: str, payloads: list[bytes], seconds: float) -> float:
    ctx = mp.get_context("spawn")
    result: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
    process = ctx.Process(target=_client, args=(load, address, payloads, seconds, 4, result))
    process.start()
    rate: float = result.get(timeout=seconds + 60)
    process.join()
    return rate


def _bare_receiver(load: Load, payloads: list[bytes], seconds: float, work: Callable[[bytes], object]) -> float:
    """A grpcio server with the same options as rca's whose handler only runs `work` on the bytes."""

    def export(request: bytes, context: grpc.ServicerContext) -> bytes:
        work(request)
        return b""

    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=8), options=[("grpc.max_receive_message_length", 64 << 20)]
    )
    handler = grpc.method_handlers_generic_handler(
        load.service, {"Export": grpc.unary_unary_rpc_method_handler(export)}
    )
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        return _drive(load, f"127.0.0.1:{port}", payloads, seconds)
    finally:
        server.stop(0)


def _with_rca(drive: Callable[[str], T], watch: Callable[[Service], None] | None = None) -> T:
    """Runs `drive(otlp_grpc_address)` against an in-process `rca serve` (10 min retention);
    `watch` runs beside it in the event loop's thread pool."""
    from rca.app.compose import Service

    settings = Settings(
        otlp_grpc=HostPort("127.0.0.1", 0),
        otlp_http=HostPort("127.0.0.1", 0),
        http=HostPort("127.0.0.1", 0),
        retention_seconds=600.0,
    )
    results: list[T] = []

    async def main() -> None:
        stop = asyncio.Event()
        ready: asyncio.Future[dict[str, str]] = asyncio.get_running_loop().create_future()
        service = Service(settings)
        task = asyncio.create_task(service.run(stop, ready.set_result))
        listening = await ready
        watcher = asyncio.create_task(asyncio.to_thread(watch, service)) if watch else None
        results.append(await asyncio.to_thread(drive, listening["otlp_grpc"]))
        counts = service.writer.read(lambda g: g.counts())
        ingested = (
            f"{counts.spans:,} spans"
            if counts.spans
            else f"{counts.log_records:,} log records"
            if counts.log_records
            else f"{counts.metric_points:,} data points"
        )
        print(f"  graph: {ingested} ingested, {service.graph.nbytes() / 1e6:.1f} MB of window aggregates")
        stop.set()
        if watcher:
            await watcher
        await task

    asyncio.run(main())
    return results[0]


def _rca(load: Load, payloads: list[bytes], seconds: float) -> float:
    return _with_rca(lambda address: _drive(load, address, payloads, seconds))


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _steady_client(address: str, rate: float, seconds: float, result: mp.Queue) -> None:  # type: ignore[type-arg]
    """Sends `rate` spans/s, paced, with event times following the clock: fresh requests (new
    ids, times of now) are made every `STEADY_REFRESH_S` seconds."""
    channel = grpc.insecure_channel(address, options=[("grpc.max_send_message_length", 64 << 20)])
    export = channel.unary_unary(METHOD)
    grpc.channel_ready_future(channel).result(timeout=10)
    interval = SPANS_PER_REQUEST / rate
    start = time.perf_counter()
    sent = late = 0
    pending: list[grpc.Future] = []
    slot, payloads = -1, []
    while (now := time.perf_counter() - start) < seconds:
        if int(now // STEADY_REFRESH_S) != slot:
            slot = int(now // STEADY_REFRESH_S)
            payloads = export_requests(16, SPANS_PER_REQUEST, time.time_ns(), seed=slot)
        pending = [f for f in pending if not f.done()]
        if len(pending) >= 64:
            late += 1
            time.sleep(interval)
            continue
        pending.append(export.future(payloads[sent % len(payloads)]))
        sent += 1
        pause = start + sent * interval - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
    for f in pending:
        f.result()
    result.put((sent * SPANS_PER_REQUEST / (time.perf_counter() - start), late))


def run_steady_benchmark(rate: float, seconds: float, every: float = 30.0) -> int:
    """`rca bench ingest --rate R`: a steady R spans/s into rca (10 min retention), RSS over time."""
    print(f"rca bench ingest --rate {rate:,.0f}: {seconds:g}s, event times follow the clock, RSS every {every:g}s")
    done = threading.Event()

    def watch(service: Service) -> None:
        begin = time.perf_counter()
        while not done.wait(every):
            counts = service.writer.read(lambda g: g.counts())
            print(
                f"  t={time.perf_counter() - begin:5.0f}s  RSS {_rss_mb():6.0f} MB  spans {counts.spans:>12,}"
                f"  windows {len(service.graph.windows):3d}  aggregates {service.graph.nbytes() / 1e6:6.1f} MB"
                f"  pending {counts.pending:,}",
                flush=True,
            )

    def drive(address: str) -> tuple[float, int]:
        ctx = mp.get_context("spawn")
        result: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
        process = ctx.Process(target=_steady_client, args=(address, rate, seconds, result))
        process.start()
        try:
            achieved: tuple[float, int] = result.get(timeout=seconds + 120)
        finally:
            done.set()
            process.join()
        return achieved

    achieved, waits = _with_rca(drive, watch)
    print(f"{'achieved rate':<32}{achieved:>12,.0f} spans/s  ({waits} waits for a full window of 64 in flight)")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{'RSS at the end':<32}{_rss_mb():>12,.0f} MB   (peak {peak:,.0f} MB)")
    return 0


def measure(seconds: float, rounds: int, load: Load = SPANS) -> Rates:
    payloads = load.requests(REQUESTS, load.per_request, time.time_ns() - 120_000_000_000)
    parse = _rate(load, load.parse, payloads, seconds)
    extract = _rate(load, load.decode, payloads, seconds)
    bare, decoding, rca = [], [], []
    for _ in range(rounds):
        bare.append(_bare_receiver(load, payloads, seconds, load.parse))
        decoding.append(_bare_receiver(load, payloads, seconds, load.decode))
        rca.append(_rca(load, payloads, seconds))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return Rates(parse, extract, tuple(bare), tuple(decoding), tuple(rca), rss)


def _median_ratio(ratios: tuple[float, ...]) -> str:
    return f"{statistics.median(ratios):>12.2f}   (median; rounds: {', '.join(f'{x:.2f}' for x in ratios)})"


def _rounds(rates: tuple[float, ...], unit: str) -> str:
    return f"{statistics.median(rates):>12,.0f} {unit}   (rounds: {', '.join(f'{r:,.0f}' for r in rates)})"


def _table(r: Rates, unit: str) -> None:
    print(f"{'bare protobuf parse':<40}{r.parse:>12,.0f} {unit}")
    print(f"{'bare parse + extract (rca)':<40}{r.parse_extract:>12,.0f} {unit}")
    print(f"{'bare grpcio receiver: parse':<40}{_rounds(r.bare_receiver, unit)}")
    print(f"{'bare grpcio receiver: parse + extract':<40}{_rounds(r.decoding_receiver, unit)}")
    print(f"{'rca end to end (gRPC → graph)':<40}{_rounds(r.rca_end_to_end, unit)}")
    print(f"{'rca / receiver: parse':<40}{_median_ratio(r.ratios)}")
    print(f"{'rca / receiver: parse + extract':<40}{_median_ratio(r.decoding_ratios)}")
    print(f"{'peak RSS (all rounds)':<40}{r.peak_rss_mb:>12,.0f} MB")


def run_ingest_benchmark(seconds: float, rounds: int) -> int:
    print(f"rca bench ingest: {SPANS_PER_REQUEST} spans/request, {seconds:g}s per measurement, {rounds} rounds")
    _table(measure(seconds, rounds), "spans/s")
    print(f"log records: {RECORDS_PER_REQUEST} records/request of ~100 characters from {len(TEMPLATES)} templates")
    _table(measure(seconds, rounds, LOGS), "records/s")
    print(f"data points: {POINTS_PER_REQUEST} points/request, one scrape round of DCGM, cAdvisor and vLLM series")
    _table(measure(seconds, rounds, METRICS), "points/s")
    return 0
