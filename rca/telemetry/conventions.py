"""The LLM-serving span conventions (docs/interface.md): which span and resource attributes rca
reads, and what they mean.

Decoders pass only the attributes named here (`SPAN_KEYS`, `RESOURCE_KEYS`) to
`span_signals` and `node_names`, so the mapping from attributes to signals lives in one place.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from rca.telemetry.spans import N_SIGNALS, Signal

AttrValue = str | bool | int | float | bytes | Sequence[object] | None

_DIRECT: dict[str, Signal] = {
    "gen_ai.latency.time_in_queue": Signal.QUEUE_TIME,
    "gen_ai.latency.time_in_scheduler": Signal.SCHEDULER_TIME,
    "gen_ai.latency.time_to_first_token": Signal.TIME_TO_FIRST_TOKEN,
    "gen_ai.latency.e2e": Signal.E2E_LATENCY,
    "gen_ai.latency.time_in_model_prefill": Signal.PREFILL_TIME,
    "gen_ai.latency.time_in_model_decode": Signal.DECODE_TIME,
    "gen_ai.usage.input_tokens": Signal.INPUT_TOKENS,
    "gen_ai.usage.prompt_tokens": Signal.INPUT_TOKENS,
    "gen_ai.usage.output_tokens": Signal.OUTPUT_TOKENS,
    "gen_ai.usage.completion_tokens": Signal.OUTPUT_TOKENS,
    "gpu.dram.bytes": Signal.GPU_DRAM_BYTES,
    "gpu.dram.utilization": Signal.GPU_DRAM_UTILIZATION,
    "gpu.l2.sectors": Signal.GPU_L2_SECTORS,
    "kv_cache.block_allocation_rate": Signal.KV_BLOCK_ALLOCATION_RATE,
    "kv_cache.avg_block_size": Signal.KV_AVG_BLOCK_SIZE,
    "kv_cache.usage": Signal.KV_USAGE,
    "nccl.bytes": Signal.NCCL_BYTES,
    "numa.remote_memory_ratio": Signal.NUMA_REMOTE_RATIO,
}
SIGNAL_ATTRIBUTES: Mapping[str, Signal] = _DIRECT  # attribute → signal, read-only
# Signals of the GPU (and the process placement) a span ran on: they count on its `gpu:` node where
# it names one. The others (queue, tokens, engine timings, NCCL) count on the span's service.
GPU_SIGNALS = frozenset(
    {
        Signal.GPU_DRAM_BYTES,
        Signal.GPU_DRAM_UTILIZATION,
        Signal.GPU_L2_SECTORS,
        Signal.KV_BLOCK_ALLOCATION_RATE,
        Signal.KV_AVG_BLOCK_SIZE,
        Signal.KV_USAGE,
        Signal.NUMA_REMOTE_RATIO,
        Signal.NUMA_MISMATCH,
    }
)

PRIORITY_HEADER = "http.request.header.x-priority"
PRIORITY_LEVEL = "gen_ai.request.priority"
URGENT_HEADER_VALUES = frozenset({"high", "urgent", "critical"})
PEER_KEYS = ("peer.service", "db.system", "db.name", "server.address")
GPU_ID = "gpu.id"
GPU_NUMA = "gpu.numa_node"
PROCESS_NUMA = "process.numa_node"
HOST_NAME = "host.name"
SERVICE_NAME = "service.name"
SERVICE_INSTANCE = "service.instance.id"
K8S_POD = "k8s.pod.name"
UNKNOWN_HOST = "unknown-host"  # the host of a GPU node whose resource names none (`resource_node`)
# What tells one instance of a service from another (replicas of one Deployment share the name):
# the pod first, as it outlives its container's restarts (the OpenTelemetry SDK draws a new
# `service.instance.id` for every process, so a series keyed on it would start again each time).
INSTANCE_KEYS = (K8S_POD, SERVICE_INSTANCE, HOST_NAME)
NCCL_PREFIX = "nccl:"
NCCL_P2P_OPS = frozenset({"nccl:Send", "nccl:Recv"})

SPAN_KEYS = frozenset({*_DIRECT, PRIORITY_HEADER, PRIORITY_LEVEL, *PEER_KEYS, GPU_ID, GPU_NUMA})
RESOURCE_KEYS = frozenset({SERVICE_NAME, *INSTANCE_KEYS, PROCESS_NUMA, GPU_NUMA})
UNKNOWN_SERVICE = "unknown_service"


def _number(value: AttrValue) -> float:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return math.nan
    return math.nan


def is_urgent(attributes: Mapping[str, AttrValue]) -> bool | None:
    """Whether the request is urgent: an `x-priority` header of high/urgent/critical, or a
    `gen_ai.request.priority` of 0 or below (lower is more urgent); None when unmarked."""
    header = attributes.get(PRIORITY_HEADER)
    if header is not None:
        values = [header] if isinstance(header, str) else header
        if isinstance(values, Sequence):
            return any(str(v).lower() in URGENT_HEADER_VALUES for v in values)
    level = _number(attributes.get(PRIORITY_LEVEL))
    return None if math.isnan(level) else level <= 0


def span_signals(attributes: Mapping[str, AttrValue], resource: Mapping[str, AttrValue]) -> list[float] | None:
    """The signal row of one span, or None when it carries no signal (NCCL latency, which
    comes from the span's duration, is filled in by the builder)."""
    row: list[float] | None = None
    for key, value in attributes.items():
        signal = _DIRECT.get(key)
        if signal is not None:
            row = row or [math.nan] * N_SIGNALS
            row[signal] = _number(value)
    urgent = is_urgent(attributes)
    if urgent is not None:  # marked on its own queue time, or for the children of a caller's span
        row = row or [math.nan] * N_SIGNALS
        row[Signal.URGENT] = float(urgent)
        if not math.isnan(row[Signal.QUEUE_TIME]):
            column = Signal.QUEUE_TIME_URGENT if urgent else Signal.QUEUE_TIME_ORDINARY
            row[column] = row[Signal.QUEUE_TIME]
    process_numa = resource.get(PROCESS_NUMA)
    gpu_numa = attributes.get(GPU_NUMA, resource.get(GPU_NUMA))
    if process_numa is not None and gpu_numa is not None:
        row = row or [math.nan] * N_SIGNALS
        row[Signal.NUMA_MISMATCH] = float(_number(process_numa) != _number(gpu_numa))
    return row


def peer_node(attributes: Mapping[str, AttrValue]) -> str | None:
    """The callee a caller span (client, producer, unmarked) names: `peer.service`, else
    `db.system[/db.name]`, else `server.address` (a Kubernetes Service's DNS name as the service
    it names: `service_of_address`). A name no service reports spans under stays a virtual node."""
    peer = attributes.get("peer.service")
    if peer:
        return str(peer)
    system = attributes.get("db.system")
    if system:
        db = attributes.get("db.name")
        return f"{system}/{db}" if db else str(system)
    address = attributes.get("server.address")
    return service_of_address(str(address)) if address else None


def service_of_address(address: str) -> str:
    """The Service a Kubernetes DNS name addresses (`<service>.<namespace>.svc`, then the cluster
    domain, `cluster.local` by default): its first label, which is the `service.name` its pods
    usually report, so the calls its server spans never answered (refused, timed out, failed on
    the way) land on it, not on a node of their own. Any other address as it is (an IP, an
    external host, a bare name)."""
    labels = address.rstrip(".").split(".")
    if len(labels) >= 3 and labels[2] == "svc" and all(labels[:2]):
        return labels[0]
    return address


def instance_of(resource: Mapping[str, AttrValue]) -> str | None:
    """The instance of its service a resource names (`INSTANCE_KEYS`, the first present), if any:
    the LLM-serving signals are kept per instance, so two replicas under one name stay apart."""
    for key in INSTANCE_KEYS:
        value = resource.get(key)
        if value is not None and value != "":
            return str(value)
    return None


def resource_node(attributes: Mapping[str, AttrValue], resource: Mapping[str, AttrValue]) -> str | None:
    """The GPU node `gpu:{host.name}/{gpu.id}` a span ran on, if it says."""
    gpu = attributes.get(GPU_ID)
    if gpu is None or gpu == "":
        return None
    host = resource.get(HOST_NAME) or UNKNOWN_HOST
    return f"gpu:{host}/{gpu}"


def with_nccl_latency(
    signals: npt.NDArray[np.float64],
    strings: Sequence[str],
    operation: npt.NDArray[np.int32],
    start_ns: npt.NDArray[np.integer],
    end_ns: npt.NDArray[np.integer],
) -> npt.NDArray[np.float64]:
    """`signals` with NCCL latency (seconds) filled in from the durations of `nccl:` spans
    (operations are indices into `strings`): point-to-point ops apart from collectives, whose
    duration includes waiting for the slowest rank. A copy when anything is filled in."""
    nccl = [i for i, text in enumerate(strings) if text.startswith(NCCL_PREFIX)]
    if not nccl:
        return signals
    rows = np.flatnonzero(np.isin(operation, nccl))
    if rows.shape[0] == 0:
        return signals
    p2p = np.isin(operation[rows], [i for i in nccl if strings[i] in NCCL_P2P_OPS])
    column = np.where(p2p, Signal.NCCL_P2P_LATENCY, Signal.NCCL_LATENCY)
    signals = signals.copy()
    signals[rows, column] = (end_ns[rows] - start_ns[rows]) / 1e9
    return signals
