"""One engine replica's requests (LLM-serving spans, docs/interface.md): queueing by priority, tensor-parallel ranks
computing `model_forward`, `nccl:AllReduce` overlapping it, `nccl:Send`, `sampling`.

Times are seconds relative to the `llm_request` span's start. The ranks run in lockstep: every
rank computes its own share (`model_forward` lasts its own compute), then all meet in the
collective, which ends for all of them once the last rank has arrived and the transfer is done.
A rank slowed by its own GPU bandwidth, KV fragmentation or NUMA placement therefore computes
longer while each peer waits inside `nccl:AllReduce` for about its extra compute; the straggler's
own wait is the shortest. A slow link slows the whole ring's transfers (every rank's collective)
and, being serialised behind its compute, no longer overlaps its forward; a congested
point-to-point path shows in that rank's `nccl:Send`. A KV fault of the whole engine (its one block
table, `Mode.ENGINE`) slows every rank alike: no rank straggles. Levels and sizes are drawn per case
(`levels.ServingLevels`); a fault's magnitude is in its class's own quantity (`faults.FaultPlan`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rca.telemetry.faults import Fault
from rca.telemetry.spans import Signal
from simulation.faults import FaultPlan, Mode, Variant
from simulation.levels import RankLevels, ServingLevels

Array = npt.NDArray[np.float64]
Bools = npt.NDArray[np.bool_]


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
    signals: dict[Signal, Array]  # of the `llm_request` spans
    sub: tuple[SubSpan, ...]
    device_s: Array  # (requests, ranks): each rank's time on its GPU (its compute less the host side)


def _ln(rng: np.random.Generator, median: float | Array, sigma: float, shape: int | tuple[int, int]) -> Array:
    result: Array = median * rng.lognormal(0.0, sigma, shape)
    return result


def _towards_one(level: Array, factor: float | Array) -> Array:
    """A utilisation-like level whose headroom shrinks by `factor` (1 keeps it)."""
    result: Array = 1.0 - (1.0 - level) / factor
    return result


@dataclass(frozen=True, slots=True)
class _Fault:
    """The plan as it applies to this replica's requests: `hit` rows, the rank, the size."""

    fault: Fault | None
    hit: Bools
    rank: int
    size: float
    mode: Mode
    variant: Variant

    def on(self, fault: Fault) -> Bools:
        result: Bools = self.hit if self.fault is fault else np.zeros_like(self.hit)
        return result

    def holds(self, rank: int) -> bool:
        """Whether the fault sits on `rank`: its own, or every rank of an engine-wide fault."""
        return rank == self.rank or self.mode is Mode.ENGINE


def sample_requests(
    levels: ServingLevels,
    ranks: RankLevels,
    plan: FaultPlan | None,
    active: Bools,
    load: Array,
    self_factor: Array,
    rng: np.random.Generator,
) -> LlmRequests:
    """`llm_request` timings and the worker spans under them; `plan` is the LLM fault on this
    replica (None: healthy), `active` marks requests during it, `self_factor` scales the
    engine's own (non-GPU) time."""
    n, tp = int(active.shape[0]), ranks.tp
    f = _Fault(
        plan.fault if plan else None,
        active if plan else np.zeros(n, np.bool_),
        plan.rank if plan else -1,
        plan.magnitude if plan else 1.0,
        plan.mode if plan else Mode.NONE,
        plan.variant if plan else Variant.NONE,
    )
    urgent: Bools = rng.random(n) < levels.urgent_share
    tokens_in = np.clip(_ln(rng, levels.tokens_in, 0.8, n), 8, 32_000).round()
    tokens_out = np.clip(_ln(rng, levels.tokens_out, 0.7, n), 2, 4_000).round()
    busy: Array = np.clip(load, 0.3, 2.5)
    shared = rng.lognormal(0.0, 0.1, n)[:, None]
    prefill = tokens_in[:, None] * levels.prefill_token_s * (0.9 + 0.2 * busy)[:, None] * shared
    decode = tokens_out[:, None] * levels.decode_token_s * (0.85 + 0.3 * busy)[:, None] * shared
    prefill = prefill * rng.lognormal(0, 0.03, (n, tp))
    decode = decode * rng.lognormal(0, 0.03, (n, tp))
    host = decode * levels.host_share * ranks.host_factor[None, :]
    healthy = prefill + decode * (1 - levels.host_share) + host
    r = f.rank
    if r >= 0:
        gpu, kv, numa = f.on(Fault.GPU_MEMORY_BANDWIDTH), f.on(Fault.KV_CACHE_FRAGMENTATION), f.on(Fault.NUMA_MISMATCH)
        decode[:, r] *= np.where(gpu, f.size, 1.0)
        fragmented = [k for k in range(tp) if f.holds(k)]
        decode[:, fragmented] *= np.where(kv, np.sqrt(f.size), 1.0)[:, None]
        prefill[:, r] *= np.where(gpu, 1 + 0.2 * (f.size - 1), 1.0)
        host[:, r] *= np.where(numa, f.size, 1.0)
    device = prefill + decode * (1 - levels.host_share)
    compute = device + host
    step = compute.max(axis=1)
    slowdown = step / healthy.max(axis=1)  # a straggler fills the batch: everyone queues longer
    ordinary = levels.queue_s * busy**2 * slowdown**1.5 * rng.lognormal(0.0, 0.6, n)
    queue = np.where(urgent, ordinary * levels.urgent_ratio * rng.lognormal(0.0, 0.3, n), ordinary)
    inversion = f.on(Fault.SCHEDULER_PRIORITY_INVERSION)
    queue = np.where(inversion & urgent, ordinary * f.size * rng.lognormal(0.0, 0.3, n), queue)
    queue = np.where(inversion & ~urgent, queue * rng.uniform(0.85, 1.0, n), queue)
    queue *= self_factor
    scheduler = _ln(rng, 0.0015, 0.3, n) * self_factor
    forward_start = queue + scheduler
    sub: list[SubSpan] = []
    ready = _collectives(levels, f, forward_start, compute, healthy, tokens_in + tokens_out, rng, sub)
    for k in range(tp):
        signals = _gpu_signals(levels, ranks, f, busy, tokens_in, tokens_out, k, rng)
        sub.append(SubSpan(k, "model_forward", forward_start, compute[:, k], True, signals))
    sampling_end = np.zeros(n)
    for k in range(tp):
        slow = ranks.host_factor[k] * np.where(f.on(Fault.NUMA_MISMATCH) & (k == r), f.size, 1.0)
        duration = tokens_out * 35e-6 * rng.lognormal(0.0, 0.25, n) * slow
        start = ready + _ln(rng, 5e-5, 0.4, n)
        sampling_end = np.maximum(sampling_end, start + duration)
        sub.append(SubSpan(k, "sampling", start, duration, False, _numa_signals(ranks, f, k, rng)))
    total = sampling_end + _ln(rng, 0.002, 0.3, n) * self_factor
    prefill_time = prefill.max(axis=1) * (1 + levels.comm_share)
    signals = {
        Signal.QUEUE_TIME: queue,
        Signal.QUEUE_TIME_URGENT: np.where(urgent, queue, np.nan),
        Signal.QUEUE_TIME_ORDINARY: np.where(urgent, np.nan, queue),
        Signal.URGENT: urgent.astype(np.float64),
        Signal.SCHEDULER_TIME: scheduler,
        Signal.TIME_TO_FIRST_TOKEN: forward_start + prefill_time,
        Signal.E2E_LATENCY: total,
        Signal.PREFILL_TIME: prefill_time,
        Signal.DECODE_TIME: np.maximum(ready - forward_start - prefill_time, 0.0),
        Signal.INPUT_TOKENS: tokens_in,
        Signal.OUTPUT_TOKENS: tokens_out,
    }
    return LlmRequests(total, signals, tuple(sub), device)


def _collectives(
    levels: ServingLevels,
    f: _Fault,
    forward_start: Array,
    compute: Array,
    healthy: Array,
    tokens: Array,
    rng: np.random.Generator,
    sub: list[SubSpan],
) -> Array:
    """AllReduce and Send spans per rank; returns when the last rank leaves the collective."""
    n, tp = compute.shape
    r = f.rank
    step = compute.max(axis=1)
    comm = levels.comm_share * healthy.mean(axis=1)[:, None] * rng.lognormal(0.0, 0.08, (n, tp))
    send = levels.send_s * rng.lognormal(0.0, 0.25, (n, tp))
    nccl = f.on(Fault.NCCL_COMMUNICATION)
    ring = nccl & (f.mode is Mode.COLLECTIVE)
    if r >= 0 and f.fault is Fault.NCCL_COMMUNICATION:
        comm *= np.where(ring, f.size * rng.lognormal(0.0, 0.1, n), 1.0)[:, None]
        send_factor = f.size if f.mode is Mode.P2P else f.size ** (0.2 if f.variant is Variant.PEERS else 0.5)
        send[:, r] *= np.where(nccl, send_factor, 1.0)
    # each rank enters the collective near the end of its own compute; all leave together
    tail = comm * rng.uniform(0.1, 0.3, (n, tp))
    leave = forward_start[:, None] + step[:, None] + tail
    enter = forward_start[:, None] + compute + tail - comm
    if r >= 0:
        # the slow link's rank can no longer overlap: it sends after its compute, the others wait
        late = forward_start + compute[:, r] + _ln(rng, 2e-4, 0.5, n)
        enter[:, r] = np.where(ring, late, enter[:, r])
        leave[:, r] = np.where(ring, late + comm[:, r], leave[:, r])
        leave = np.where(ring[:, None], np.maximum(leave, leave[:, r : r + 1] + _ln(rng, 3e-5, 0.3, (n, tp))), leave)
    enter = np.maximum(enter, forward_start[:, None])
    for k in range(tp):
        signals = {Signal.NCCL_BYTES: np.round(tokens * levels.comm_bytes_per_token * rng.lognormal(0, 0.05, n))}
        sub.append(SubSpan(k, "nccl:AllReduce", enter[:, k], leave[:, k] - enter[:, k], False, signals))
        send_start = forward_start + compute[:, k] * rng.uniform(0.6, 0.95, n)
        p2p = {Signal.NCCL_BYTES: np.round(_ln(rng, 16_384.0, 0.5, n))}
        sub.append(SubSpan(k, "nccl:Send", send_start, send[:, k], False, p2p))
    result: Array = leave.max(axis=1)
    return result


def _gpu_signals(
    levels: ServingLevels,
    ranks: RankLevels,
    f: _Fault,
    busy: Array,
    tokens_in: Array,
    tokens_out: Array,
    rank: int,
    rng: np.random.Generator,
) -> dict[Signal, Array]:
    """Nsight-style DRAM, L2 and KV-cache attributes of one rank's `model_forward` spans."""
    n = int(busy.shape[0])
    mine = f.holds(rank)
    gpu = f.on(Fault.GPU_MEMORY_BANDWIDTH) & mine
    kv = f.on(Fault.KV_CACHE_FRAGMENTATION) & mine
    noise = levels.noise
    utilization = ranks.dram[rank] + 0.1 * (busy - 1.0) + rng.normal(0, noise, n)
    utilization = np.where(gpu, _towards_one(utilization, f.size), utilization)
    utilization = np.where(kv, _towards_one(utilization, f.size**0.15), utilization)
    dram = (tokens_out * levels.dram_bytes_per_token + tokens_in * 2.0e7) * rng.lognormal(0, 0.15, n)
    dram = np.where(gpu, dram * f.size**0.2, dram)
    sectors = dram / 32 * rng.uniform(2.5, 4.0, n)
    sectors = np.where(kv, sectors * np.sqrt(f.size), sectors)
    allocation = ranks.kv_allocation[rank] * (1 - rng.beta(1.5, 150.0, n))
    allocation = np.where(kv, allocation / np.sqrt(f.size) * rng.lognormal(0, 0.05, n), allocation)
    block = _ln(rng, levels.block_bytes, 0.25, n)
    block = np.where(kv, block / f.size, block)
    usage = ranks.kv_usage[rank] + 0.25 * (busy - 1.0) + rng.normal(0, noise, n)
    usage = np.where(kv, _towards_one(np.clip(usage, 0, 1), np.sqrt(f.size)), usage)
    return {
        Signal.GPU_DRAM_UTILIZATION: np.clip(utilization, 0.02, 0.998),
        Signal.GPU_DRAM_BYTES: dram.round(),
        Signal.GPU_L2_SECTORS: sectors.round(),
        Signal.KV_BLOCK_ALLOCATION_RATE: np.clip(allocation, 0.01, 1.0),
        Signal.KV_AVG_BLOCK_SIZE: np.maximum(block, 512.0).round(),
        Signal.KV_USAGE: np.clip(usage, 0.01, 0.999),
    }


def _numa_signals(ranks: RankLevels, f: _Fault, rank: int, rng: np.random.Generator) -> dict[Signal, Array]:
    """Sampling runs on the CPU: its process's NUMA node against the GPU's, and remote accesses.
    A rank steadily placed on the other socket is mismatched and remote-heavy while healthy."""
    hit = f.on(Fault.NUMA_MISMATCH) & (rank == f.rank)
    n = int(hit.shape[0])
    remote = np.clip(ranks.remote[rank] * rng.lognormal(0.0, 0.3, n), 0.0, 1.0)
    misplaced = f.mode is Mode.MISPLACED
    moved = remote + (1 - remote) * rng.uniform(0.3, 0.9) if misplaced else _towards_one(remote, f.size)
    remote = np.where(hit, np.clip(moved * rng.lognormal(0.0, 0.05, n), 0.0, 1.0), remote)
    mismatch = np.where(hit & (f.mode is Mode.MISPLACED), 1.0, float(ranks.misplaced[rank]))
    return {Signal.NUMA_REMOTE_RATIO: remote, Signal.NUMA_MISMATCH: np.broadcast_to(mismatch, (n,)).astype(np.float64)}
