"""A small made-up fleet's history as a Prometheus would hold it, for the `--prometheus-url` tests.

A chain `frontend → checkout → payment → postgres` as the servicegraph connector reports it (calls
from `user` into frontend, counters and histogram sums by client and server), 20 calls/s on every
edge; payment's own time rises tenfold at `ONSET` (and every caller's wait with it). DCGM's
`DCGM_FI_PROF_DRAM_ACTIVE` for two GPUs of a vLLM engine pod: GPU 1's rises from 0.3 to 0.6 at the
onset (below the fault gate: it is measured, not a cause). Hours in the past, on 5 s samples.
"""

from __future__ import annotations

import time

import numpy as np

from benchmarks.prometheus_backfill import Family, Sample

S = 1_000_000_000
WINDOW_S = 10.0
SAMPLE_S = 5.0
START_NS = (time.time_ns() - 4 * 3600 * S) // (600 * S) * (600 * S)
ONSET_NS = START_NS + 25 * 60 * S
END_NS = START_NS + 40 * 60 * S
RATE = 20.0  # calls/s on every edge
FAILED = 0.2  # failed calls/s on every edge
WIRE_S = 0.002  # client seconds less server seconds per call
OWN_S = {"frontend": 0.01, "checkout": 0.01, "payment": 0.02, "postgres": 0.005}
SLOW_PAYMENT_S = 0.2
EDGES = (("user", "frontend"), ("frontend", "checkout"), ("checkout", "payment"), ("payment", "postgres"))
GPU_POD = "vllm-engine-6d9f8b7c5d-x2x4z"
HOST = "gpu-node-a"
GPU_BEFORE, GPU_AFTER = 0.3, 0.6


def times_s() -> np.ndarray:
    return np.arange(START_NS // S, END_NS // S + 1, SAMPLE_S, dtype=np.float64)


def server_seconds(service: str, t: np.ndarray) -> np.ndarray:
    """Mean server seconds per call of `service` at times `t` (s): its own time and its callee's wait."""
    own = np.full(t.shape, OWN_S[service])
    if service == "payment":
        own = np.where(t >= ONSET_NS / S, SLOW_PAYMENT_S, own)
    callee = {"frontend": "checkout", "checkout": "payment", "payment": "postgres"}.get(service)
    return own if callee is None else own + server_seconds(callee, t) + WIRE_S


def families() -> list[Family]:
    t = times_s()
    elapsed = t - t[0]
    calls = Family("traces_service_graph_request", "counter")
    failed = Family("traces_service_graph_request_failed", "counter")
    hist = {side: Family(f"traces_service_graph_request_{side}_seconds", "histogram") for side in ("server", "client")}
    for client, server in EDGES:
        labels = {"client": client, "server": server}
        calls.series.append(Sample("traces_service_graph_request_total", labels, t, RATE * elapsed))
        failed.series.append(Sample("traces_service_graph_request_failed_total", labels, t, FAILED * elapsed))
        mean = server_seconds(server, t)
        for side, per_call in (("server", mean), ("client", mean + WIRE_S)):
            total = np.r_[0.0, np.cumsum(per_call[1:] * RATE * SAMPLE_S)]
            name = f"traces_service_graph_request_{side}_seconds"
            bucket = {**labels, "le": "+Inf"}
            hist[side].series.append(Sample(f"{name}_bucket", bucket, t, RATE * elapsed))
            hist[side].series.append(Sample(f"{name}_count", labels, t, RATE * elapsed))
            hist[side].series.append(Sample(f"{name}_sum", labels, t, total))
    dram = Family("DCGM_FI_PROF_DRAM_ACTIVE", "gauge")
    for gpu in (0, 1):
        level = np.where((gpu == 1) & (t >= ONSET_NS / S), GPU_AFTER, GPU_BEFORE)
        labels = {"gpu": str(gpu), "Hostname": HOST, "pod": GPU_POD, "namespace": "llm"}
        dram.series.append(Sample("DCGM_FI_PROF_DRAM_ACTIVE", labels, t, level))
    return [calls, failed, *hist.values(), dram]
