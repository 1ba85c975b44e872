"""`rca bench ingest`: end-to-end OTLP/gRPC spans/s beside the bare parse and bare receiver rates.

All three are measured in the same run on the same payload. The client runs in a child process,
so the receiver under test has the server process to itself, as in production.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import resource
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass

import grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from benchmarks.payload import export_requests
from ingest.otlp_proto import decode_protobuf
from rca.config import HostPort, Settings

SPANS_PER_REQUEST = 1024
REQUESTS = 64
METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


@dataclass(frozen=True)
class Rates:
    parse: float
    parse_extract: float
    bare_receiver: float
    rca_end_to_end: float
    peak_rss_mb: float


def _rate(work: Callable[[bytes], object], payloads: list[bytes], seconds: float) -> float:
    spans = 0
    deadline = time.perf_counter() + seconds
    start = time.perf_counter()
    while time.perf_counter() < deadline:
        for p in payloads[:8]:
            work(p)
            spans += SPANS_PER_REQUEST
    return spans / (time.perf_counter() - start)


def _client(address: str, payloads: list[bytes], seconds: float, in_flight: int, result: mp.Queue) -> None:  # type: ignore[type-arg]
    channel = grpc.insecure_channel(address, options=[("grpc.max_send_message_length", 64 << 20)])
    export = channel.unary_unary(METHOD)
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
        sent += SPANS_PER_REQUEST
    for f in pending:
        f.result()
        sent += SPANS_PER_REQUEST
    result.put(sent / (time.perf_counter() - start))


def _drive(address: str, payloads: list[bytes], seconds: float) -> float:
    ctx = mp.get_context("spawn")
    result: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
    process = ctx.Process(target=_client, args=(address, payloads, seconds, 4, result))
    process.start()
    rate: float = result.get(timeout=seconds + 60)
    process.join()
    return rate


def _bare_receiver(payloads: list[bytes], seconds: float) -> float:
    def export(request: bytes, context: grpc.ServicerContext) -> bytes:
        ExportTraceServiceRequest().ParseFromString(request)
        return b""

    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=8), options=[("grpc.max_receive_message_length", 64 << 20)]
    )
    handler = grpc.method_handlers_generic_handler(
        "opentelemetry.proto.collector.trace.v1.TraceService",
        {"Export": grpc.unary_unary_rpc_method_handler(export)},
    )
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        return _drive(f"127.0.0.1:{port}", payloads, seconds)
    finally:
        server.stop(0)


def _rca(payloads: list[bytes], seconds: float) -> float:
    from rca.compose import Service

    settings = Settings(
        otlp_grpc=HostPort("127.0.0.1", 0),
        otlp_http=HostPort("127.0.0.1", 0),
        http=HostPort("127.0.0.1", 0),
        retention_seconds=600.0,
    )
    rates: list[float] = []

    async def main() -> None:
        stop = asyncio.Event()
        ready: asyncio.Future[dict[str, str]] = asyncio.get_running_loop().create_future()
        service = Service(settings)
        task = asyncio.create_task(service.run(stop, ready.set_result))
        listening = await ready
        rates.append(await asyncio.to_thread(_drive, listening["otlp_grpc"], payloads, seconds))
        counts = service.ingestor.read(lambda g: g.counts())
        print(f"  graph: {counts.spans:,} spans ingested, {service.graph.nbytes() / 1e6:.1f} MB of window aggregates")
        stop.set()
        await task

    asyncio.run(main())
    return rates[0]


def measure(seconds: float) -> Rates:
    payloads = export_requests(REQUESTS, SPANS_PER_REQUEST, time.time_ns() - 120_000_000_000)
    parse = _rate(lambda p: ExportTraceServiceRequest().ParseFromString(p), payloads, seconds)
    extract = _rate(decode_protobuf, payloads, seconds)
    bare = _bare_receiver(payloads, seconds)
    rca = _rca(payloads, seconds)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return Rates(parse, extract, bare, rca, rss)


def run_ingest_benchmark(seconds: float) -> int:
    print(f"rca bench ingest: {SPANS_PER_REQUEST} spans/request, {seconds:g}s per measurement")
    r = measure(seconds)
    print(f"{'bare protobuf parse':<32}{r.parse:>12,.0f} spans/s")
    print(f"{'bare parse + extract (rca)':<32}{r.parse_extract:>12,.0f} spans/s")
    print(f"{'bare grpcio receiver':<32}{r.bare_receiver:>12,.0f} spans/s")
    print(
        f"{'rca end to end (gRPC → graph)':<32}{r.rca_end_to_end:>12,.0f} spans/s"
        f"   ({r.rca_end_to_end / r.bare_receiver:.2f} of bare receiver)"
    )
    print(f"{'peak RSS':<32}{r.peak_rss_mb:>12,.0f} MB")
    return 0
