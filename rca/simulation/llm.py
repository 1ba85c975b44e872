"""The LLM engine's requests (contract section 6): queueing by priority, tensor-parallel ranks
computing `model_forward` in lockstep, `nccl:AllReduce` overlapping it, `nccl:Send`, `sampling`.

Times are seconds relative to the `llm_request` span's start. The ranks synchronise in every
collective, so one slow GPU slows every rank's forward; its peers then wait in AllReduce.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rca.ranking import Fault
from rca.simulation.faults import LLM_FAULTS, FaultPlan, Variant
from rca.simulation.topology import LlmCluster
from rca.spans import Signal

Array = npt.NDArray[np.float64]
URGENT_SHARE = 0.2
KIB = 1024.0


@dataclass(frozen=True, slots=True)
class SubSpan:
    """One span per request on a rank's worker (NCCL latency is derived from the duration later)."""

    rank: int
    name: str
    start_s: Array
    duration_s: Array
    gpu: bool
    signals: dict[Signal, Array]


@dataclass(frozen=True, slots=True)
class LlmRequests:
    duration_s: Array
    urgent: npt.NDArray[np.bool_]
    signals: dict[Signal, Array]  # of the `llm_request` spans
    sub: tuple[SubSpan, ...]


def _ln(rng: np.random.Generator, median: float | Array, sigma: float, n: int) -> Array:
    result: Array = median * rng.lognormal(0.0, sigma, n)
    return result


def sample_requests(
    cluster: LlmCluster,
    plan: FaultPlan,
    active: npt.NDArray[np.bool_],
    load: Array,
    self_factor: Array,
    rng: np.random.Generator,
) -> LlmRequests:
    """`llm_request` timings and the worker spans under them; `active` marks requests during
    the fault, `self_factor` scales the engine's own (non-GPU) time."""
    n, ranks = int(active.shape[0]), len(cluster.workers)
    fault = plan.fault if plan.fault in LLM_FAULTS else None
    hit = active if fault is not None else np.zeros(n, np.bool_)
    urgent: npt.NDArray[np.bool_] = rng.random(n) < URGENT_SHARE
    tokens_in = np.clip(_ln(rng, 600.0, 0.8, n), 16, 8000).round()
    tokens_out = np.clip(_ln(rng, 160.0, 0.7, n), 4, 1500).round()
    busy: Array = np.clip(load, 0.3, 2.0)
    queue = np.where(urgent, 0.012, 0.05) * busy**2 * rng.lognormal(0.0, 0.6, n)
    if fault is Fault.SCHEDULER_PRIORITY_INVERSION:
        queue = np.where(hit & urgent, _ln(rng, plan.magnitude, 0.5, n) * busy, queue)
        queue = np.where(hit & ~urgent, queue * 1.15, queue)
    queue *= self_factor
    scheduler = _ln(rng, 0.0015, 0.3, n) * self_factor
    # per-rank compute: prefill scales with input tokens, decode with output tokens
    prefill = tokens_in[:, None] * 6e-5 * (0.9 + 0.2 * busy)[:, None] * rng.lognormal(0, 0.03, (n, ranks))
    decode = tokens_out[:, None] * 0.011 * (0.85 + 0.3 * busy)[:, None] * rng.lognormal(0, 0.03, (n, ranks))
    shared = rng.lognormal(0.0, 0.1, n)[:, None]
    prefill, decode = prefill * shared, decode * shared
    r = plan.rank
    if fault is Fault.GPU_MEMORY_BANDWIDTH:
        decode[:, r] *= np.where(hit, plan.magnitude * rng.lognormal(0, 0.1, n), 1.0)
        prefill[:, r] *= np.where(hit, 1.2, 1.0)
    if fault is Fault.KV_CACHE_FRAGMENTATION:
        decode[:, r] *= np.where(hit, plan.magnitude * rng.lognormal(0, 0.1, n), 1.0)
    compute = prefill + decode
    step = compute.max(axis=1)  # lockstep: every rank's forward lasts as long as the slowest
    forward_start = queue + scheduler
    forward = step[:, None] * rng.uniform(0.997, 1.0, (n, ranks))
    sub: list[SubSpan] = []
    nccl_end = _nccl(plan, fault, hit, forward_start, forward, compute, step, rng, sub)
    gpu = [_gpu_signals(plan, fault, hit, busy, tokens_in, tokens_out, k, rng) for k in range(ranks)]
    for k in range(ranks):
        sub.append(SubSpan(k, "model_forward", forward_start, forward[:, k], True, gpu[k]))
    ready = np.maximum(forward_start + step, nccl_end.max(axis=1))
    sampling_end = np.zeros(n)
    for k in range(ranks):
        slow = np.where((fault is Fault.NUMA_MISMATCH) & hit & (k == r), plan.magnitude, 1.0)
        duration = tokens_out * 35e-6 * rng.lognormal(0.0, 0.25, n) * slow
        start = ready + _ln(rng, 5e-5, 0.4, n)
        sampling_end = np.maximum(sampling_end, start + duration)
        sub.append(SubSpan(k, "sampling", start, duration, False, _numa_signals(plan, fault, hit, k, rng)))
    total = sampling_end + _ln(rng, 0.002, 0.3, n) * self_factor
    prefill_time = step * (prefill.max(axis=1) / compute.max(axis=1))
    signals = {
        Signal.QUEUE_TIME: queue,
        Signal.QUEUE_TIME_URGENT: np.where(urgent, queue, np.nan),
        Signal.QUEUE_TIME_ORDINARY: np.where(urgent, np.nan, queue),
        Signal.SCHEDULER_TIME: scheduler,
        Signal.TIME_TO_FIRST_TOKEN: forward_start + prefill_time,
        Signal.E2E_LATENCY: total,
        Signal.PREFILL_TIME: prefill_time,
        Signal.DECODE_TIME: ready - forward_start - prefill_time,
        Signal.INPUT_TOKENS: tokens_in,
        Signal.OUTPUT_TOKENS: tokens_out,
    }
    return LlmRequests(total, urgent, signals, tuple(sub))


def _nccl(
    plan: FaultPlan,
    fault: Fault | None,
    hit: npt.NDArray[np.bool_],
    forward_start: Array,
    forward: Array,
    compute: Array,
    step: Array,
    rng: np.random.Generator,
    sub: list[SubSpan],
) -> Array:
    """AllReduce and Send spans per rank; returns each rank's AllReduce end (n, ranks)."""
    n, ranks = forward.shape
    r = plan.rank
    duration = step[:, None] * rng.uniform(0.12, 0.25, (n, ranks))
    # ranks that finish compute early wait for the slowest inside the collective
    duration += (step[:, None] - compute) * 0.8
    start = forward_start[:, None] + forward - duration - step[:, None] * rng.uniform(0.02, 0.3, (n, ranks))
    start = np.maximum(start, forward_start[:, None])
    send = 4e-6 * rng.lognormal(0.0, 0.25, (n, ranks))
    if fault is Fault.NCCL_COMMUNICATION:
        late = forward_start + forward[:, r] + _ln(rng, 2e-4, 0.5, n)  # no longer overlaps the forward
        if plan.variant is Variant.PEERS:
            own = duration[:, r] * rng.uniform(1.0, 1.3, n)
            send[:, r] = np.where(hit, _ln(rng, 18e-6, 0.25, n), send[:, r])
        else:
            own = duration[:, r] * plan.magnitude * rng.lognormal(0, 0.15, n)
            send[:, r] = np.where(hit, _ln(rng, 30e-6, 0.4, n), send[:, r])
        end_r = late + own
        for k in range(ranks):
            if k == r:
                continue
            # peers sit in the collective until the slow rank arrives
            peers = plan.variant is Variant.PEERS
            waited = end_r - start[:, k] if peers else duration[:, k] * rng.uniform(1.5, 2.5, n)
            duration[:, k] = np.where(hit, np.maximum(waited, duration[:, k]), duration[:, k])
        start[:, r] = np.where(hit, late, start[:, r])
        duration[:, r] = np.where(hit, own, duration[:, r])
    nccl_bytes = np.round(step[:, None] * 2.4e9 * rng.lognormal(0, 0.05, (n, ranks)))
    for k in range(ranks):
        signals = {Signal.NCCL_BYTES: nccl_bytes[:, k]}
        sub.append(SubSpan(k, "nccl:AllReduce", start[:, k], duration[:, k], False, signals))
        send_start = forward_start + forward[:, k] * rng.uniform(0.6, 0.95, n)
        sub.append(SubSpan(k, "nccl:Send", send_start, send[:, k], False, {}))
    result: Array = start + duration
    return result


def _gpu_signals(
    plan: FaultPlan,
    fault: Fault | None,
    hit: npt.NDArray[np.bool_],
    busy: Array,
    tokens_in: Array,
    tokens_out: Array,
    rank: int,
    rng: np.random.Generator,
) -> dict[Signal, Array]:
    """Nsight-style DRAM, L2 and KV-cache attributes of one rank's `model_forward` spans."""
    n = int(hit.shape[0])
    mine = hit & (rank == plan.rank)
    level = (busy - 0.6) / 0.9
    utilization = np.clip(0.45 + 0.25 * level + rng.normal(0, 0.07, n), 0.22, 0.86)
    dram = (tokens_out * 4.0e9 + tokens_in * 2.0e7) * rng.lognormal(0, 0.15, n)
    sectors = dram / 32 * rng.uniform(2.5, 4.0, n)
    allocation = np.clip(1.0 - rng.beta(1.5, 60.0, n), 0.9, 1.0)
    block = np.maximum(_ln(rng, 256 * KIB, 0.35, n), 136 * KIB)
    usage = np.clip(0.3 + 0.35 * level + rng.normal(0, 0.08, n), 0.05, 0.95)
    if fault is Fault.GPU_MEMORY_BANDWIDTH:
        utilization = np.where(mine, np.clip(rng.normal(0.935, 0.03, n), 0.86, 0.995), utilization)
        dram = np.where(mine, dram * rng.uniform(1.5, 2.0, n), dram)
    if fault is Fault.KV_CACHE_FRAGMENTATION:
        allocation = np.where(mine, rng.uniform(0.42, 0.72, n), allocation)
        block = np.where(mine, np.clip(_ln(rng, 16 * KIB, 0.4, n), 4 * KIB, 36 * KIB), block)
        sectors = np.where(mine, sectors * rng.uniform(2.0, 3.2, n), sectors)
        usage = np.where(mine, np.clip(rng.normal(0.9, 0.04, n), 0.7, 0.99), usage)
    return {
        Signal.GPU_DRAM_UTILIZATION: utilization,
        Signal.GPU_DRAM_BYTES: dram.round(),
        Signal.GPU_L2_SECTORS: sectors.round(),
        Signal.KV_BLOCK_ALLOCATION_RATE: allocation,
        Signal.KV_AVG_BLOCK_SIZE: block.round(),
        Signal.KV_USAGE: usage,
    }


def _numa_signals(
    plan: FaultPlan, fault: Fault | None, hit: npt.NDArray[np.bool_], rank: int, rng: np.random.Generator
) -> dict[Signal, Array]:
    """Sampling runs on the CPU: its process's NUMA node against the GPU's, and remote accesses.
    Rank 3 is a little noisier than the others even when healthy."""
    n = int(hit.shape[0])
    mine: npt.NDArray[np.bool_] = hit & (rank == plan.rank) & (fault is Fault.NUMA_MISMATCH)
    remote = rng.beta(3.0, 25.0, n) if rank == 3 else rng.beta(2.0, 35.0, n)
    remote = np.where(mine, rng.beta(6.0, 14.0, n), remote)
    return {Signal.NUMA_REMOTE_RATIO: remote, Signal.NUMA_MISMATCH: mine.astype(np.float64)}
