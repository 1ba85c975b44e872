"""Node metrics of the real-deployment style: node_exporter on every node, its NUMA counters per
NUMA node (`node_memory_numa_other_node_total`, `node_memory_numa_numa_miss_total`,
`node_memory_numa_local_node_total`, pages) and
its CPU seconds per CPU and mode (`node_cpu_seconds_total`).

Every node has two NUMA nodes. Its other processes allocate some pages remotely at a drawn rate
that follows the load. On a GPU host each rank's process allocates pages with the tokens it
serves, a remote share of them at its remote-access ratio (the truth, `EngineView.remote`), on
the NUMA node away from where it runs: the other socket normally, its GPU's own when the process
runs misplaced on the other. Those pages count as `other_node` on the node that holds them, and
a drawn share as `numa_miss` (allocations that fell back from the preferred node), all of them
where memory spilled over (the NUMA fault's SPILLED mode); a misplaced process (MISPLACED) reads
remote memory far more often, so both rise on that host. The rest of a rank's pages count as
`local_node` where its process runs, as other processes' local pages do (a drawn multiple of
their remote ones). CPU seconds follow the node's pods' use
(`PodUsage`) plus a little system time. Counters run since the node booted.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from rca.telemetry.faults import Fault
from simulation.engine_view import EngineView
from simulation.exporters import Deployment, Target
from simulation.faults import FaultPlan, Mode
from simulation.pod_metrics import PodUsage
from simulation.profiles import Range
from simulation.scrape import Scraped, edges, overlap_s
from simulation.topology import LlmCluster

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
MODES = (("user", 0.72), ("system", 0.22), ("iowait", 0.06))  # a busy CPU's split
_SECOND = 1_000_000_000


def _engine_pages(
    view: EngineView, cluster: LlmCluster, plan: FaultPlan | None, bounds: I64, per_token: float, miss: float
) -> tuple[F64, F64, F64]:
    """Per NUMA node (2, intervals), the engine's remote pages per second, the misses among them
    and its local pages (allocated on the node its process runs on)."""
    weights, seconds = view.weights(bounds)
    pages = per_token * (weights.T @ ((view.tokens_in + view.tokens_out) / view.model_s)) / seconds / view.tp
    remote = np.nan_to_num(EngineView.mean(weights, view.remote)) * pages[:, None]
    misplaced = np.nan_to_num(EngineView.mean(weights, view.misplaced))
    missed = np.full(remote.shape, miss)
    if plan is not None and plan.fault is Fault.NUMA_MISMATCH and plan.mode is Mode.SPILLED:
        active = overlap_s(np.array([plan.inject_ns]), np.array([plan.end_ns]), bounds)[0] / seconds
        missed[:, plan.rank] = miss + (1.0 - miss) * active
    other, misses, local = (np.zeros((2, remote.shape[0])) for _ in range(3))
    for k, socket in enumerate(cluster.gpu_numa):
        here = remote[:, k] * misplaced[:, k]  # held on the GPU's own node, the process running away
        away = remote[:, k] - here
        for node, held in ((socket, here), (1 - socket, away)):
            other[node] += held
            misses[node] += held * missed[:, k]
        own = np.maximum(pages - remote[:, k], 0.0)  # where the process runs: its GPU's node unless misplaced
        local[socket] += own * (1.0 - misplaced[:, k])
        local[1 - socket] += own * misplaced[:, k]
    return other, misses, local


def node_metrics(
    out: Scraped,
    d: Deployment,
    engines: dict[str, tuple[EngineView, LlmCluster, FaultPlan | None]],
    pods: PodUsage,
    load: Callable[[I64], F64],
    rng: np.random.Generator,
) -> None:
    """Every node's node_exporter series; `engines` by GPU host: its replica's requests, cluster
    and LLM fault (None: none)."""
    per_token = Range(0.5, 20.0).one(rng)  # a rank's page allocations per token
    miss = Range(0.05, 0.5).one(rng)
    noise = Range(0.02, 0.15).one(rng)
    cpus = (8, 16)[int(rng.integers(2))]
    for node in d.nodes:
        target = d.node_exporter(node)
        times = target.times_ns
        bounds = edges(times, d.interval_s)
        seconds = np.diff(bounds) / 1e9
        swing = 0.7 + 0.3 * load(times)
        other = Range(5.0, 5_000.0).many(rng, 2)[:, None] * swing * rng.lognormal(0.0, noise, (2, times.shape[0]))
        misses = other * miss * rng.lognormal(0.0, noise, other.shape)
        local = other / Range(0.02, 0.4).many(rng, 2)[:, None] * rng.lognormal(0.0, noise, other.shape)
        if node in engines:
            view, cluster, plan = engines[node]
            more, missed, own = _engine_pages(view, cluster, plan, bounds, per_token, miss)
            other, misses, local = other + more, misses + missed, local + own
        booted = d.start_ns - int(Range(86_400.0, 90 * 86_400.0).one(rng)) * _SECOND
        start = max(d.agent_start_ns, booted)
        age = (d.start_ns - booted) / 1e9
        for numa in range(2):
            labels = {"node": str(numa)}
            for name, rate in (
                ("node_memory_numa_other_node_total", other[numa]),
                ("node_memory_numa_numa_miss_total", misses[numa]),
                ("node_memory_numa_local_node_total", local[numa]),
            ):
                total = float(rate.mean()) * age + np.cumsum(rate * seconds)
                out.counter(name, target, labels, total, start, whole=True)
        cores = np.interp(times, pods.times_ns[node], pods.cores[node]) + Range(0.05, 0.5).one(rng)
        _cpu_seconds(out, target, cores, cpus, seconds, age, start, rng)


def _cpu_seconds(
    out: Scraped, target: Target, cores: F64, cpus: int, seconds: F64, age: float, start: int, rng: np.random.Generator
) -> None:
    """Per CPU and mode, the seconds spent since boot: the cores in use spread unevenly over the CPUs."""
    spread = rng.dirichlet(np.full(cpus, 4.0)) * cpus
    busy = np.clip(cores[None, :] / cpus * spread[:, None], 0.0, 1.0)
    for cpu in range(cpus):
        for mode, share in (*MODES, ("idle", 0.0)):
            fraction = 1.0 - busy[cpu] if mode == "idle" else busy[cpu] * share
            total = float(fraction.mean()) * age + np.cumsum(fraction * seconds)
            out.counter("node_cpu_seconds_total", target, {"cpu": str(cpu), "mode": mode}, total, start)
