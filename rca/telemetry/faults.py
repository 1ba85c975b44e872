"""The fault vocabulary: what kind of fault a root cause is (docs/interface.md, HTTP API: `FAULT`)."""

from __future__ import annotations

from enum import StrEnum


class Fault(StrEnum):
    """The fault vocabulary (docs/interface.md, HTTP API: `FAULT`)."""

    LATENCY = "latency"
    ERRORS = "errors"
    CALL_STRUCTURE = "call_structure"
    GPU_MEMORY_BANDWIDTH = "gpu_memory_bandwidth"
    KV_CACHE_FRAGMENTATION = "kv_cache_fragmentation"
    SCHEDULER_PRIORITY_INVERSION = "scheduler_priority_inversion"
    NCCL_COMMUNICATION = "nccl_communication"
    NUMA_MISMATCH = "numa_mismatch"
