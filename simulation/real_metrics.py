"""GPU and engine metrics of the real-deployment style: the DCGM exporter per GPU and vLLM per
engine replica, following the per-rank truth (`engine_view`). Every level is drawn per case
(`GpuDraws`); none comes from rca's metric table or evidence gates.

- A rank is busy while any request is in the model (1 - e^-L, L requests there on average). Of
  that time it computes its `device` share with its DRAM at its `dram` use
  (DCGM_FI_PROF_DRAM_ACTIVE; NVML's DCGM_FI_DEV_MEM_COPY_UTIL reads the same, in whole percent at
  a drawn ratio) and waits in the collective for its `wait` share, during which a kernel is
  resident only part of the time (`kappa`; DCGM_FI_DEV_GPU_UTIL counts that part). A straggler
  (its GPU's bandwidth, KV cache or host side slowed) lengthens every rank's step: its own DRAM
  stays busy while its peers' DRAM_ACTIVE and GPU_UTIL fall as they wait.
- Only some exporters have the profiling fields (`Deployment.profiling`); the others report DRAM
  use through MEM_COPY_UTIL alone and NVLink traffic as NVML's running total of both directions.
- NVLink bytes/s (per GPU, TX and RX) carry the all-reduce payload of the tokens processed per
  second, 2(tp-1)/tp of it in a ring, so load moves them with the tokens. The engine holds at most
  `capacity` requests in the model (mean load at a drawn share of it): past that, throughput is
  capped, so a slowdown that saturates the engine lowers tokens and NVLink traffic on every GPU
  and the excess requests wait.
- A slow NCCL link in the collective mode is one whose traffic NCCL moved off NVLink (a link
  trained down, or failed over to PCIe): that rank's NVLink bytes fall to 1/magnitude, its ring
  neighbours' half as much. The point-to-point mode's small sends hardly move NVLink bytes: not shown.
- vLLM's KV-cache usage is its fullest rank's, growing with the requests held; preemptions start
  when it, scaled by how fragmented the blocks are, passes a drawn knee, and preempted requests wait
  again. Running and waiting requests are counted at each scrape; token counters and the TTFT,
  e2e and queue-time histograms (vLLM's bucket bounds) follow the requests.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rca.telemetry.faults import Fault
from simulation.engine_view import EngineView
from simulation.exporters import Deployment
from simulation.faults import FaultPlan, Mode
from simulation.profiles import Range
from simulation.scrape import Scraped, by_scrape, covering, edges, overlap_s
from simulation.topology import LlmCluster

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
TTFT_BOUNDS: tuple[float, ...] = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0)
TTFT_BOUNDS += (7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)  # vLLM V1's
LATENCY_BOUNDS: tuple[float, ...] = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0)
LATENCY_BOUNDS += (60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)  # vLLM V1's request latency buckets
_SECOND = 1_000_000_000


@dataclass(frozen=True, slots=True)
class GpuDraws:
    """The case's levels of the GPU and engine physics."""

    kappa: float  # share of a collective wait a kernel is resident
    noise: float  # spread of one reading
    load_share: float  # mean requests in the model against the engine's capacity
    memory_share: float  # vLLM's gpu_memory_utilization: the framebuffer it takes
    knee: float  # KV pressure where preemptions start
    preempt_floor: float  # preemptions per request below the knee
    preempt_scale: float
    recompute_s: float  # how long a preempted request waits again
    uptime_s: float  # the engine processes' age at the case start
    copy_share: float  # NVML's memory-busy time against DCGM's DRAM-active cycles

    @staticmethod
    def draw(rng: np.random.Generator) -> GpuDraws:
        return GpuDraws(
            kappa=Range(0.1, 0.7, log=False).one(rng),
            noise=Range(0.01, 0.08).one(rng),
            load_share=Range(0.25, 0.85, log=False).one(rng),
            memory_share=Range(0.85, 0.95, log=False).one(rng),
            knee=Range(0.7, 0.95, log=False).one(rng),
            preempt_floor=Range(1e-4, 5e-3).one(rng),
            preempt_scale=Range(0.05, 0.6).one(rng),
            recompute_s=Range(0.2, 3.0).one(rng),
            uptime_s=Range(1_800.0, 7 * 86_400.0).one(rng),
            copy_share=Range(0.8, 1.25).one(rng),
        )


def engine_metrics(
    out: Scraped,
    d: Deployment,
    view: EngineView,
    cluster: LlmCluster,
    plan: FaultPlan | None,
    healthy_until_ns: int,
    g: GpuDraws,
    rng: np.random.Generator,
) -> None:
    """One replica's DCGM and vLLM series; `plan` is the LLM fault on this replica (None: none)."""
    before = view.model < healthy_until_ns
    mean_load = float(view.model_s[before].sum()) / max((healthy_until_ns - d.start_ns) / 1e9, 1.0)
    capacity = max(mean_load / g.load_share, 1.0)
    _dcgm(out, d, view, cluster, plan, capacity, g, rng)
    _vllm(out, d, view, cluster.engine, mean_load, capacity, healthy_until_ns, g, rng)


def _nvlink_path(plan: FaultPlan | None, tp: int, bounds: I64) -> F64:
    """Per interval and rank, the share of its collective traffic still on NVLink."""
    path = np.ones((bounds.shape[0] - 1, tp))
    if plan is None or plan.fault is not Fault.NCCL_COMMUNICATION or plan.mode is not Mode.COLLECTIVE:
        return path
    window = np.array([plan.inject_ns]), np.array([plan.end_ns])
    active = overlap_s(*window, bounds)[0] / (np.diff(bounds) / 1e9)
    lost = active * (1.0 - 1.0 / plan.magnitude)
    r = plan.rank
    for k in {(r - 1) % tp, (r + 1) % tp} - {r}:
        path[:, k] = 1.0 - (lost if tp == 2 else lost / 2)
    path[:, r] = 1.0 - lost
    return path


def _dcgm(
    out: Scraped,
    d: Deployment,
    view: EngineView,
    cluster: LlmCluster,
    plan: FaultPlan | None,
    capacity: float,
    g: GpuDraws,
    rng: np.random.Generator,
) -> None:
    target = d.dcgm(cluster.host)
    bounds = edges(target.times_ns, d.interval_s)
    weights, seconds = view.weights(bounds)
    load = weights.sum(axis=0) / seconds
    busy = 1.0 - np.exp(-load)
    device = np.nan_to_num(EngineView.mean(weights, view.device))
    wait = np.nan_to_num(EngineView.mean(weights, view.wait))
    dram = np.nan_to_num(EngineView.mean(weights, view.dram))
    served = np.minimum(1.0, capacity / np.maximum(load, 1e-9))
    ring = 2.0 * (view.tp - 1) / view.tp
    payload = weights.T @ (np.nan_to_num(view.collective_bytes) / view.model_s) / seconds * ring * served
    path = _nvlink_path(plan, view.tp, bounds)
    m = bounds.shape[0] - 1
    for k in range(view.tp):
        jitter = rng.lognormal(0.0, g.noise, (5, m)) * rng.lognormal(0.0, 0.03, (5, 1))
        labels = d.dcgm_labels(cluster.host, k, cluster.engine)
        memory = busy * device[:, k] * dram[:, k]
        copy = 100.0 * g.copy_share * memory * jitter[4]
        out.gauge("DCGM_FI_DEV_MEM_COPY_UTIL", target, labels, np.clip(np.round(copy), 0, 100))
        utilisation = 100.0 * busy * (device[:, k] + g.kappa * wait[:, k]) * jitter[1]
        out.gauge("DCGM_FI_DEV_GPU_UTIL", target, labels, np.clip(np.round(utilisation), 0, 100))
        used = g.memory_share * d.gpu_mib * (1.0 + 0.002 * rng.standard_normal(m))
        out.gauge("DCGM_FI_DEV_FB_USED", target, labels, np.round(used))
        tx, rx = payload * path[:, k] * jitter[2], payload * path[:, k] * jitter[3]
        if d.profiling:
            out.gauge("DCGM_FI_PROF_DRAM_ACTIVE", target, labels, np.clip(memory * jitter[0], 0, 1))
            out.gauge("DCGM_FI_PROF_NVLINK_TX_BYTES", target, labels, np.round(tx))
            out.gauge("DCGM_FI_PROF_NVLINK_RX_BYTES", target, labels, np.round(rx))
        else:  # NVML's NVLink counter, KiB both ways since the exporter started
            moved = (tx + rx) * seconds
            before = float(np.mean(tx + rx)) * (d.start_ns - d.agent_start_ns) / 1e9
            kib = (before + np.cumsum(moved)) / 1024.0
            out.counter("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", target, labels, kib, d.agent_start_ns, whole=True)


def _histogram(times: I64, at_ns: I64, values: F64, bounds: tuple[float, ...], before: float) -> tuple[F64, F64]:
    """Cumulative per-bucket counts (scrapes, buckets) and sums of observations `values` made at
    `at_ns`, on top of `before` observations like them made before the case."""
    bucket = np.searchsorted(np.asarray(bounds), values, side="left")
    scrape = np.searchsorted(times, at_ns, side="left")
    seen = scrape < times.shape[0]
    counts = np.zeros((times.shape[0], len(bounds) + 1))
    np.add.at(counts, (scrape[seen], bucket[seen]), 1.0)
    pmf = np.bincount(bucket, minlength=len(bounds) + 1) / max(values.shape[0], 1)
    initial = np.round(before * pmf)
    mean = float(values.mean()) if values.shape[0] else 0.0
    sums = float(initial.sum()) * mean + by_scrape(times, at_ns, values)
    return initial + np.cumsum(counts, axis=0), sums


def _vllm(
    out: Scraped,
    d: Deployment,
    view: EngineView,
    engine: str,
    mean_load: float,
    capacity: float,
    healthy_until_ns: int,
    g: GpuDraws,
    rng: np.random.Generator,
) -> None:
    target = d.vllm(engine)
    times = target.times_ns
    bounds = edges(times, d.interval_s)
    weights, seconds = view.weights(bounds)
    load = weights.sum(axis=0) / seconds
    fullest = np.nan_to_num(EngineView.mean(weights, view.kv_usage)).max(axis=1)
    usage = np.clip(fullest * np.sqrt(load / max(mean_load, 1e-9)), 0.0, 0.999)
    allocation = np.nanmin(EngineView.mean(weights, view.kv_allocation), axis=1, initial=np.inf)
    allocation[~np.isfinite(allocation)] = np.nan
    healthy = allocation[(times <= healthy_until_ns) & np.isfinite(allocation)]
    usual = float(np.median(healthy)) if healthy.shape[0] else float(np.nanmedian(np.r_[allocation, 1.0]))
    pressure = usage * usual / np.nan_to_num(allocation, nan=usual)
    arrivals = np.histogram(view.arrive, bins=bounds)[0]
    per_request = g.preempt_floor + g.preempt_scale * np.clip((pressure - g.knee) / (1.0 - g.knee), 0.0, None) ** 2
    preempted = rng.poisson(arrivals * per_request).astype(np.float64)
    running = np.minimum(covering(times, view.model, view.done), round(capacity))
    waiting = covering(times, view.arrive, view.queued) + rng.poisson(preempted / seconds * g.recompute_s)
    waiting = waiting + np.round(np.maximum(load - capacity, 0.0))
    labels = d.vllm_labels(engine)
    for name, value in (
        ("vllm:kv_cache_usage_perc", usage),
        ("vllm:num_requests_running", running.astype(np.float64)),
        ("vllm:num_requests_waiting", waiting.astype(np.float64)),
    ):
        out.gauge(name, target, labels, value)
    start = max(d.agent_start_ns, d.start_ns - int(g.uptime_s * _SECOND))
    age = (d.start_ns - start) / 1e9
    rate = len(view) / max((d.stop_ns - d.start_ns) / 1e9, 1.0)  # requests per second
    prompt = rate * age * float(np.mean(view.tokens_in)) + by_scrape(times, view.first_token, view.tokens_in)
    spread = (times[None, :] - view.first_token[:, None]) / np.maximum(view.done - view.first_token, 1)[:, None]
    generated = rate * age * float(np.mean(view.tokens_out)) + view.tokens_out @ np.clip(spread, 0.0, 1.0)
    preemptions = rate * age * g.preempt_floor + np.cumsum(preempted)
    for name, total in (
        ("vllm:num_preemptions_total", preemptions),
        ("vllm:prompt_tokens_total", prompt),
        ("vllm:generation_tokens_total", generated),
    ):
        out.counter(name, target, labels, total, start, whole=True)
    before = rate * age
    e2e = (view.end - view.arrive) / 1e9
    queue = (view.queued - view.arrive) / 1e9
    ttft = (view.first_token - view.arrive) / 1e9
    for name, at_ns, values, bucket_bounds in (
        ("vllm:time_to_first_token_seconds", view.first_token, ttft, TTFT_BOUNDS),
        ("vllm:e2e_request_latency_seconds", view.end, e2e, LATENCY_BOUNDS),
        ("vllm:request_queue_time_seconds", view.end, queue, LATENCY_BOUNDS),
    ):
        counts, sums = _histogram(times, at_ns, values, bucket_bounds, before)
        out.histogram(name, target, labels, bucket_bounds, counts, sums, start)
