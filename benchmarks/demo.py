"""`make demo` until `rca demo` lands: start `rca serve`, replay a generated shop, print the graph.

The spans are made by the project itself (a small shop topology with a Redis cache) and sent
through the real OTLP/gRPC receiver; the graph is read back from `GET /graph`.
"""

from __future__ import annotations

import json
import random
import signal
import sys
import time
import urllib.request

import grpc

from benchmarks.serve_process import launch
from ingest.otlp_encode import encode_batch
from rca.builder import SpanBatchBuilder
from rca.spans import KIND_CLIENT, KIND_SERVER, SpanBatch

CALLS = {"frontend": ["cart", "checkout"], "checkout": ["payment", "cart"], "cart": []}
METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def shop_traces(count: int, start_ns: int, seed: int = 1) -> SpanBatch:
    rng = random.Random(seed)
    builder = SpanBatchBuilder()

    def visit(service: str, trace: bytes, parent: bytes, start: int) -> int:
        span = rng.randbytes(8)
        t = start + rng.randint(50_000, 300_000)
        for callee in CALLS.get(service, []):
            t = visit(callee, trace, span, t)
        if service == "cart":  # an uninstrumented cache: a client span naming it
            cache_end = t + int(rng.lognormvariate(12.5, 0.3))
            cache = {"db.system": "redis"}
            builder.add(trace, rng.randbytes(8), span, service, "GET", KIND_CLIENT, t, cache_end, False, cache, {})
            t = cache_end
        end = t + int(rng.lognormvariate(13.5, 0.4))
        error = rng.random() < 0.01
        builder.add(trace, span, parent, service, f"{service}.handle", KIND_SERVER, start, end, error, {}, {})
        return end

    for i in range(count):
        visit("frontend", rng.randbytes(16), b"", start_ns + i * 20_000_000)
    return builder.build().batch


def main() -> int:
    server, listening = launch()
    print(f"rca serve is up: {json.dumps(listening)}")
    try:
        spans = shop_traces(500, time.time_ns() - 60_000_000_000)
        with grpc.insecure_channel(listening["otlp_grpc"]) as channel:
            export = channel.unary_unary(METHOD)
            for message in encode_batch(spans):
                export(message, timeout=10)
        print(f"sent {len(spans)} spans over OTLP/gRPC")
        with urllib.request.urlopen(f"http://{listening['http']}/graph", timeout=10) as response:
            graph = json.load(response)
        print("service graph (GET /graph):")
        for edge in graph["edges"]:
            print(f"  {edge['source']:>10} → {edge['target']:<10} {edge['mainstat']:>12}  {edge['secondarystat']}")
    finally:
        server.send_signal(signal.SIGTERM)
        code = server.wait(timeout=20)
    print(f"rca serve stopped with exit code {code}")
    return code


if __name__ == "__main__":
    sys.exit(main())
