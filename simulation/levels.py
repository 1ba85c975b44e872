"""Healthy levels of an LLM-serving case, drawn per case from its profile (`profiles`): the served
model and hardware (shared by the engine replicas) and each replica's ranks, hot-but-healthy ones
included (a GPU steadily near its bandwidth roofline, a rank steadily on the wrong socket)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from simulation.profiles import Profile, Range

Array = npt.NDArray[np.float64]
_BLOCK_TOKENS = (16, 32)  # vLLM's block sizes in tokens
_COMM_BYTES_PER_TOKEN = Range(0.5e6, 2.6e6)  # 2 all-reduces a layer of hidden x 2 bytes, 7B to 70B
_DRAM_BYTES_PER_TOKEN = Range(1e9, 8e9)  # weights streamed per generated token, per rank
_SIGNAL_NOISE = Range(0.01, 0.06, log=False)  # per-span spread of utilisation readings
_KV_USAGE = Range(0.2, 0.8, log=False)
_MISPLACED_REMOTE = Range(0.35, 0.8, log=False)
_MISPLACED_SLOWDOWN = Range(1.1, 1.8)


@dataclass(frozen=True, slots=True)
class ServingLevels:
    """The model's and the hardware's levels, the same on every replica."""

    tokens_in: float  # median prompt length
    tokens_out: float
    decode_token_s: float  # one decode step of one rank
    prefill_token_s: float
    host_share: float  # a rank's CPU-side share of its compute
    comm_share: float  # a collective's transfer against a rank's compute
    comm_bytes_per_token: float
    send_s: float  # median point-to-point send
    queue_s: float  # median ordinary queue wait at mean load
    urgent_ratio: float  # urgent wait / ordinary wait, healthy
    urgent_share: float
    block_bytes: float  # a KV block on one rank
    dram_bytes_per_token: float
    noise: float

    @staticmethod
    def draw(profile: Profile, tp: int, rng: np.random.Generator) -> ServingLevels:
        decode = profile.decode_token_s.one(rng)
        block_tokens = _BLOCK_TOKENS[int(rng.integers(len(_BLOCK_TOKENS)))]
        return ServingLevels(
            tokens_in=profile.input_tokens.one(rng),
            tokens_out=profile.output_tokens.one(rng),
            decode_token_s=decode,
            prefill_token_s=decode * float(rng.uniform(0.002, 0.006)),
            host_share=profile.host_share.one(rng),
            comm_share=profile.comm_share.one(rng),
            comm_bytes_per_token=_COMM_BYTES_PER_TOKEN.one(rng) / tp,
            send_s=profile.send_latency_s.one(rng),
            queue_s=profile.queue_ordinary_s.one(rng),
            urgent_ratio=profile.urgent_wait_ratio.one(rng),
            urgent_share=profile.urgent_share.one(rng),
            block_bytes=block_tokens * profile.kv_bytes_per_token.one(rng) / tp,
            dram_bytes_per_token=_DRAM_BYTES_PER_TOKEN.one(rng) / tp,
            noise=_SIGNAL_NOISE.one(rng),
        )


@dataclass(frozen=True, slots=True)
class RankLevels:
    """One replica's healthy level per rank."""

    dram: Array  # DRAM bandwidth utilisation at mean load
    kv_allocation: Array
    kv_usage: Array
    remote: Array  # NUMA remote-access ratio
    misplaced: npt.NDArray[np.bool_]  # steadily on the other socket from its GPU
    host_factor: Array  # CPU-side slowdown (a misplaced rank's, steady)

    @property
    def tp(self) -> int:
        return int(self.dram.shape[0])

    @staticmethod
    def draw(profile: Profile, tp: int, rng: np.random.Generator) -> RankLevels:
        dram = np.clip(profile.dram_utilization.one(rng) + rng.normal(0, 0.02, tp), 0.05, 0.97)
        if rng.random() < profile.hot_gpu_chance:
            dram[int(rng.integers(tp))] = profile.hot_gpu.one(rng)
        allocation = np.clip(profile.kv_allocation.one(rng) + rng.normal(0, 0.01, tp), 0.5, 0.999)
        usage = np.clip(_KV_USAGE.one(rng) + rng.normal(0, 0.03, tp), 0.05, 0.95)
        remote = profile.numa_remote.many(rng, tp)
        misplaced = np.zeros(tp, np.bool_)
        host = np.ones(tp)
        if rng.random() < profile.misplaced_rank_chance:
            k = int(rng.integers(tp))
            misplaced[k] = True
            remote[k] = _MISPLACED_REMOTE.one(rng)
            host[k] = _MISPLACED_SLOWDOWN.one(rng)
        return RankLevels(dram, allocation, usage, remote, misplaced, host)
