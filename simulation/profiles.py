"""Generator profiles: the ranges every per-case level and magnitude is drawn from.

Each case draws its own levels from its profile with its own seeded stream (domain
randomisation), so no fitted model can learn one fixed healthy level or one fault size. The
`shifted` profile is configured differently on purpose (rates, latency spread, TP layouts,
replica counts, noise, hot services, which optional services exist, magnitude ranges, attribute
encodings): a held-out check that a fit did not learn the default profile's constants.

Where the ranges come from (none is taken from rca's evidence code):

- fault magnitudes: a slowdown factor in the class's own physical quantity, log-uniform from
  barely visible (x1.3, within healthy noise) to gross (x10 and more), as incident reports span;
- GPU DRAM utilisation: decode is memory-bound; served models sit anywhere from a third of peak
  (small batches) to the 90-odd % well-tuned decode kernels reach near the roofline;
- KV cache: vLLM's block manager keeps most allocated blocks in use (85-99 % in steady serving);
  a block holds 16 or 32 tokens of KV (2 x layers x KV heads x head size x 2 bytes, split over
  the TP ranks), 32-320 KiB a token for 7B-70B models;
- NUMA: a process pinned next to its GPU still reads some remote memory (shared libraries, page
  cache, pinned buffers): 0.5-25 % of its accesses;
- NCCL: an 8-byte point-to-point send costs 1.5-15 us between NVLink and PCIe/host-bridge paths;
  a collective's transfer is 3-45 % of a decode step's compute (NVLink to PCIe);
- calls: a caller rethrows a callee's failure or handles it (a fallback, a default, a retry
  elsewhere) by the code path, so each calling operation fails with its failed calls at its own
  chance; self time grows with load at an exponent between near-flat (ample headroom) and steep
  (contention); one-way network time is 0.1-1 ms, in-rack to across zones; 0.05-1 % of remote
  calls fail at first (a reset connection, a restarting pod) and are retried;
- caught exceptions: a handler that catches what it throws logs it (at ERROR, or at WARN where the
  team reads it as handled) and returns a fallback, so the request succeeds without the calls the
  rest of the handler would have made; some code paths rethrow instead;
- drifts: in a real incident's window other services change too (a deploy, a cron job, an
  expired cache, a shift in what users ask for): up to a few services slow by x1.2-3, fail
  0.3-5 % of their requests or make one call a fifth to most as often, for minutes;
- queues: vLLM's waiting time ranges from milliseconds (idle) to seconds (saturated); a working
  priority scheduler lets urgent requests wait 10-80 % of what ordinary ones wait.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True, slots=True)
class Range:
    """A closed range, drawn log-uniformly (`log`) or uniformly."""

    lo: float
    hi: float
    log: bool = True

    def __post_init__(self) -> None:
        if not self.lo <= self.hi or (self.log and self.lo <= 0):
            raise ValueError(f"bad range [{self.lo}, {self.hi}]")

    def many(self, rng: np.random.Generator, size: int) -> npt.NDArray[np.float64]:
        if self.log:
            drawn: npt.NDArray[np.float64] = np.exp(rng.uniform(math.log(self.lo), math.log(self.hi), size))
            return drawn
        return rng.uniform(self.lo, self.hi, size)

    def one(self, rng: np.random.Generator) -> float:
        return float(self.many(rng, 1)[0])


@dataclass(frozen=True, slots=True)
class Profile:
    """What a generator configuration draws from (see the module docstring for the sources)."""

    name: str
    # traffic and noise
    rate_scale: Range  # the topology's default request rate times this
    day_amplitude: Range
    wave_amplitude: Range
    burst_chance: float  # a load burst (x1.2-2 for 1-3 min) somewhere in the case
    sigma_scale: Range  # every operation's self-time spread
    median_spread: float  # lognormal sigma of a per-case, per-operation median multiplier
    error_scale: Range  # background error rates
    error_propagation: Range  # per calling operation: the chance a failed call fails its span too
    load_exponent: Range  # self time grows as load to this power
    network_s: Range  # median one-way network time of a remote call
    transient_failures: Range  # remote calls whose first attempt fails and is retried
    hiccups: tuple[int, int]  # per noisy service, [lo, hi)
    hiccup_factor: Range
    hot_services: tuple[int, int]  # busy-but-healthy services on the request path, [lo, hi)
    hot_factor: Range  # their steady self-time multiplier
    drifts: tuple[int, int]  # unrelated services that change during the case (`simulation.drifts`), [lo, hi)
    drift_slowdown: Range  # a slowed one's self-time factor
    drift_errors: Range  # a failing one's share of failing requests
    drift_calls: Range  # the factor on the chance that a changed operation makes its call
    optional_services: tuple[tuple[str, float], ...]  # LLM stack extras and the chance each exists
    mesh_variant: int  # which generated mesh structure
    # fault sizes
    slowdown: Range  # latency and LLM faults: the factor in the class's own quantity
    error_share: Range
    caught_chance: float  # errors: the faulty handler catches its exception (else it rethrows)
    caught_share: Range  # and then, on this share of its failing requests
    call_share: Range  # call_structure: share of the operation's requests changed
    # LLM serving layout and levels
    tp_weights: tuple[tuple[int, float], ...]
    two_replicas: float
    dram_utilization: Range
    hot_gpu_chance: float  # one rank steadily near its bandwidth roofline
    hot_gpu: Range
    kv_allocation: Range
    kv_bytes_per_token: Range  # the model's KV bytes per token (all ranks)
    numa_remote: Range
    misplaced_rank_chance: float  # a rank steadily running on the other socket: healthy but mismatched
    send_latency_s: Range
    comm_share: Range
    queue_ordinary_s: Range
    urgent_wait_ratio: Range
    urgent_share: Range
    input_tokens: Range
    output_tokens: Range
    decode_token_s: Range  # one decode step of one rank
    host_share: Range  # a step's host-side (CPU) share of a rank's compute
    # attribute encodings docs/interface.md allows (LLM-serving spans)
    token_keys: str  # "input_tokens" or "prompt_tokens"
    priority_encoding: str  # "level" (gen_ai.request.priority) or "header" (x-priority)


DEFAULT = Profile(
    name="default",
    rate_scale=Range(0.75, 1.35),
    day_amplitude=Range(0.1, 0.45, log=False),
    wave_amplitude=Range(0.04, 0.25, log=False),
    burst_chance=0.3,
    sigma_scale=Range(0.75, 1.4),
    median_spread=0.3,
    error_scale=Range(0.5, 2.5),
    error_propagation=Range(0.2, 0.9, log=False),
    load_exponent=Range(0.15, 0.5, log=False),
    network_s=Range(1.5e-4, 6e-4),
    transient_failures=Range(5e-4, 0.01),
    hiccups=(1, 5),
    hiccup_factor=Range(2.0, 6.0),
    hot_services=(0, 3),
    hot_factor=Range(2.5, 10.0),
    drifts=(0, 3),
    drift_slowdown=Range(1.2, 3.0),
    drift_errors=Range(0.003, 0.05),
    drift_calls=Range(0.2, 0.85, log=False),
    optional_services=(("moderation", 0.8), ("embedding-service", 1.0), ("guardrails", 0.2), ("reranker", 0.2)),
    mesh_variant=0,
    slowdown=Range(1.3, 12.0),
    error_share=Range(0.02, 0.6),
    caught_chance=0.4,
    caught_share=Range(0.3, 1.0, log=False),
    call_share=Range(0.15, 1.0),
    tp_weights=((2, 0.3), (4, 0.45), (8, 0.25)),
    two_replicas=0.35,
    dram_utilization=Range(0.3, 0.92, log=False),
    hot_gpu_chance=0.3,
    hot_gpu=Range(0.82, 0.93, log=False),
    kv_allocation=Range(0.85, 0.99, log=False),
    kv_bytes_per_token=Range(32 * 1024.0, 320 * 1024.0),
    numa_remote=Range(0.005, 0.22),
    misplaced_rank_chance=0.15,
    send_latency_s=Range(2e-6, 12e-6),
    comm_share=Range(0.04, 0.35),
    queue_ordinary_s=Range(0.004, 0.25),
    urgent_wait_ratio=Range(0.1, 0.8),
    urgent_share=Range(0.12, 0.3, log=False),
    input_tokens=Range(200.0, 1500.0),
    output_tokens=Range(60.0, 400.0),
    decode_token_s=Range(0.006, 0.035),
    host_share=Range(0.05, 0.3, log=False),
    token_keys="input_tokens",
    priority_encoding="level",
)

SHIFTED = Profile(
    name="shifted",
    rate_scale=Range(0.5, 2.0),
    day_amplitude=Range(0.05, 0.6, log=False),
    wave_amplitude=Range(0.1, 0.35, log=False),
    burst_chance=0.5,
    sigma_scale=Range(0.6, 1.8),
    median_spread=0.6,
    error_scale=Range(0.3, 4.0),
    error_propagation=Range(0.05, 1.0, log=False),
    load_exponent=Range(0.1, 0.7, log=False),
    network_s=Range(8e-5, 1.2e-3),
    transient_failures=Range(2e-4, 0.03),
    hiccups=(2, 7),
    hiccup_factor=Range(1.8, 8.0),
    hot_services=(1, 4),
    hot_factor=Range(2.0, 15.0),
    drifts=(0, 4),
    drift_slowdown=Range(1.15, 4.0),
    drift_errors=Range(0.002, 0.08),
    drift_calls=Range(0.1, 0.9, log=False),
    optional_services=(("moderation", 0.3), ("embedding-service", 0.6), ("guardrails", 0.8), ("reranker", 0.7)),
    mesh_variant=1,
    slowdown=Range(1.25, 16.0),
    error_share=Range(0.015, 0.8),
    caught_chance=0.5,
    caught_share=Range(0.15, 1.0, log=False),
    call_share=Range(0.1, 1.0),
    tp_weights=((2, 0.2), (4, 0.3), (8, 0.5)),
    two_replicas=0.6,
    dram_utilization=Range(0.25, 0.94, log=False),
    hot_gpu_chance=0.5,
    hot_gpu=Range(0.8, 0.95, log=False),
    kv_allocation=Range(0.8, 0.995, log=False),
    kv_bytes_per_token=Range(16 * 1024.0, 512 * 1024.0),
    numa_remote=Range(0.003, 0.3),
    misplaced_rank_chance=0.3,
    send_latency_s=Range(1.5e-6, 15e-6),
    comm_share=Range(0.03, 0.45),
    queue_ordinary_s=Range(0.002, 0.6),
    urgent_wait_ratio=Range(0.05, 0.9),
    urgent_share=Range(0.05, 0.4, log=False),
    input_tokens=Range(100.0, 4000.0),
    output_tokens=Range(30.0, 900.0),
    decode_token_s=Range(0.004, 0.05),
    host_share=Range(0.03, 0.4, log=False),
    token_keys="prompt_tokens",
    priority_encoding="header",
)

PROFILES: dict[str, Profile] = {p.name: p for p in (DEFAULT, SHIFTED)}


def profile_named(name: str) -> Profile:
    """The profile called `name`; ValueError naming the known ones."""
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; known: {', '.join(PROFILES)}")
    return PROFILES[name]
