"""Metric rows as evidence: direction, gates, lockstep GPUs of one engine, and the ranking."""

from __future__ import annotations

import numpy as np
import pytest

from models.ranker import BayesianRanker
from rca.evidence.nodes import F, NodeEvidence, extract_evidence
from rca.graph.service_graph import ServiceGraph
from rca.telemetry.faults import Fault
from rca.telemetry.metric_rows import MetricRows
from rca.telemetry.metric_table import MetricRule, MetricTable
from rca.telemetry.metrics import MetricKind

S = 1_000_000_000
T0 = 1_767_571_200 * S
SCRAPE_S = 5
POINTS = 120  # ten minutes
ONSET = 90  # the fault starts at the 90th scrape
POD = "vllm-engine-7d9f8b6c5d-x2x4z"
OTHER_POD = "vllm-engine-7d9f8b6c5d-k6p2w"  # a second replica of the same engine, on the same host


def _gpus(
    before: float,
    straggler: float,
    peers: float,
    nvlink_drop: float = 1.0,
    slow_link: int | None = None,
    seed: int = 0,
    dram_metric: str = "DCGM_FI_PROF_DRAM_ACTIVE",
    mem_clock: tuple[float, float] | None = None,
    replicas: int = 1,
) -> ServiceGraph:
    """Four GPUs of one engine scraped from DCGM: DRAM activity `before` the onset, then the
    straggler (GPU 2) at `straggler` and its peers at `peers` (as `dram_metric`: a fraction, or
    NVML's whole percent for DCGM_FI_DEV_MEM_COPY_UTIL); NVLink traffic times `nvlink_drop` after
    the onset on GPU `slow_link`, or on every GPU where it is None; with `mem_clock`, memory clocks
    of 1593 MHz before the onset and then (the straggler's, its peers') MHz. With two `replicas`,
    GPUs 4 to 7 are a second pod of the engine, healthy throughout."""
    percent = dram_metric == "DCGM_FI_DEV_MEM_COPY_UTIL"
    rng = np.random.default_rng(seed)
    rows = MetricRows()
    for k in range(1, POINTS + 1):
        for gpu in range(4 * replicas):
            after = k > ONSET and gpu < 4
            level = (straggler if gpu == 2 else peers) if after else before
            pod = POD if gpu < 4 else OTHER_POD
            labels = {"gpu": str(gpu), "Hostname": "node-a", "exported_pod": pod, "pod": "dcgm-exporter-x7k2p"}
            t = T0 + k * SCRAPE_S * S
            dram = level + 0.01 * rng.standard_normal()
            dropped = after and slow_link in (None, gpu)
            nvlink = 4e10 * (nvlink_drop if dropped else 1.0) * (1 + 0.02 * rng.standard_normal())
            reading = round(100 * dram) if percent else dram
            rows.add(dram_metric, MetricKind.GAUGE, {"service.name": "dcgm-exporter"}, labels, t, 0, reading)
            if mem_clock is not None:
                clock = (mem_clock[0] if gpu == 2 else mem_clock[1]) if after else 1593.0
                rows.add("DCGM_FI_DEV_MEM_CLOCK", MetricKind.GAUGE, {}, labels, t, 0, clock)
            rows.add(
                "DCGM_FI_PROF_NVLINK_TX_BYTES",
                MetricKind.GAUGE,
                {"service.name": "dcgm-exporter"},
                labels,
                t,
                0,
                nvlink,
            )
    graph = ServiceGraph()
    graph.add_metrics(rows.build().batch)
    return graph


def _evidence(graph: ServiceGraph) -> NodeEvidence:
    start = T0 + 300 * S
    return extract_evidence(graph, start_ns=start, end_ns=graph.newest_ns + 1, history_ns=300 * S)


def _score(evidence: NodeEvidence, node: str, fault: Fault) -> float:
    return float(evidence.score[evidence.index(node), F[fault]])


def test_the_straggler_gpu_scores_bandwidth_and_its_waiting_peers_do_not() -> None:
    evidence = _evidence(_gpus(before=0.6, straggler=0.95, peers=0.4))
    assert _score(evidence, "gpu:node-a/2", Fault.GPU_MEMORY_BANDWIDTH) > 10
    for peer in ("gpu:node-a/0", "gpu:node-a/1", "gpu:node-a/3"):
        assert _score(evidence, peer, Fault.GPU_MEMORY_BANDWIDTH) == 0.0
    row = evidence.index("gpu:node-a/2")
    # Beside its peers, its share of the two levels rose from a half to 0.95 / (0.95 + 0.4).
    signal = evidence.signal[row][F[Fault.GPU_MEMORY_BANDWIDTH]]
    assert signal == "metric.gpu_dram_active_among_peers:DCGM_FI_PROF_DRAM_ACTIVE"
    assert evidence.baseline[row, F[Fault.GPU_MEMORY_BANDWIDTH]] == pytest.approx(0.5, abs=0.01)
    assert evidence.observed[row, F[Fault.GPU_MEMORY_BANDWIDTH]] == pytest.approx(0.95 / 1.35, abs=0.01)
    # One engine's GPUs, seen only in metrics, run in lockstep: one group, and no NCCL communicator.
    gpus = [evidence.index(f"gpu:node-a/{g}") for g in range(4)]
    assert len({int(evidence.lockstep[g]) for g in gpus}) == 1 and evidence.lockstep[gpus[0]] >= 0
    assert (evidence.communicator == -1).all()


def test_nvmls_memory_busy_percent_reads_as_dcgms_dram_activity() -> None:
    """The exporter's default field, where the profiling ones are missing: same shares, same gate."""
    evidence = _evidence(_gpus(before=0.6, straggler=0.95, peers=0.4, dram_metric="DCGM_FI_DEV_MEM_COPY_UTIL"))
    row = evidence.index("gpu:node-a/2")
    signal = "metric.gpu_memory_copy_utilization_among_peers:DCGM_FI_DEV_MEM_COPY_UTIL"
    assert evidence.signal[row][F[Fault.GPU_MEMORY_BANDWIDTH]] == signal
    assert _score(evidence, "gpu:node-a/2", Fault.GPU_MEMORY_BANDWIDTH) > 10
    assert _score(evidence, "gpu:node-a/0", Fault.GPU_MEMORY_BANDWIDTH) == 0.0
    assert evidence.observed[row, F[Fault.GPU_MEMORY_BANDWIDTH]] == pytest.approx(0.95 / 1.35, abs=0.01)
    below = _evidence(_gpus(before=0.3, straggler=0.5, peers=0.5, dram_metric="DCGM_FI_DEV_MEM_COPY_UTIL"))
    assert all(_score(below, f"gpu:node-a/{g}", Fault.GPU_MEMORY_BANDWIDTH) < 3.0 for g in range(4))
    saturated = _evidence(_gpus(before=0.6, straggler=0.97, peers=0.97, dram_metric="DCGM_FI_DEV_MEM_COPY_UTIL"))
    assert _score(saturated, "gpu:node-a/1", Fault.GPU_MEMORY_BANDWIDTH) > 10  # 97 % is past the gate's 90 %


def test_every_gpu_rising_alike_below_the_tables_healthy_level_is_no_bandwidth_evidence() -> None:
    # Load: each GPU's share beside its peers stays a half, and 0.5 is below the gate's 0.75.
    evidence = _evidence(_gpus(before=0.3, straggler=0.5, peers=0.5))
    for gpu in range(4):
        assert _score(evidence, f"gpu:node-a/{gpu}", Fault.GPU_MEMORY_BANDWIDTH) < 3.0  # noise
    # Past the gate the level alone counts, whatever the peers do.
    saturated = _evidence(_gpus(before=0.6, straggler=0.97, peers=0.97))
    assert _score(saturated, "gpu:node-a/1", Fault.GPU_MEMORY_BANDWIDTH) > 10


def test_one_gpus_nvlink_traffic_falling_points_to_nccl_and_every_gpus_alike_does_not() -> None:
    slow = _evidence(_gpus(before=0.6, straggler=0.6, peers=0.6, nvlink_drop=0.3, slow_link=1))
    assert _score(slow, "gpu:node-a/1", Fault.NCCL_COMMUNICATION) > 10
    row = slow.index("gpu:node-a/1")
    signal = "metric.nvlink_tx_bytes_per_s_among_peers:DCGM_FI_PROF_NVLINK_TX_BYTES"
    assert slow.signal[row][F[Fault.NCCL_COMMUNICATION]] == signal
    assert _score(slow, "gpu:node-a/0", Fault.NCCL_COMMUNICATION) < 1.0  # its peers' mean fell: its share rose
    # Every GPU's traffic falling alike is throughput (load, or a straggler anywhere): no link of
    # one GPU is slow. Only GPUs without peers read their level alone.
    everywhere = _evidence(_gpus(before=0.6, straggler=0.6, peers=0.6, nvlink_drop=0.3))
    for gpu in range(4):
        assert _score(everywhere, f"gpu:node-a/{gpu}", Fault.NCCL_COMMUNICATION) < 3.0  # noise
    rising = _evidence(_gpus(before=0.6, straggler=0.6, peers=0.6, nvlink_drop=2.0, slow_link=1))
    assert _score(rising, "gpu:node-a/1", Fault.NCCL_COMMUNICATION) == 0.0


def test_the_replicas_of_an_engine_are_apart_and_a_straggler_slowing_its_own_links_is_no_nccl_fault() -> None:
    """Two pods of one engine on one host: a straggler slows every collective of its own pod, whose
    NVLink traffic falls alike; beside the other pod's GPUs that would read as four slow links."""
    evidence = _evidence(_gpus(before=0.6, straggler=0.95, peers=0.4, nvlink_drop=0.4, replicas=2))
    group = [int(evidence.lockstep[evidence.index(f"gpu:node-a/{g}")]) for g in range(8)]
    assert len(set(group[:4])) == len(set(group[4:])) == 1 and group[0] != group[4] and min(group) >= 0
    assert {evidence.services[evidence.index(f"gpu:node-a/{g}")] for g in range(8)} == {"vllm-engine"}
    for gpu in range(4):
        assert _score(evidence, f"gpu:node-a/{gpu}", Fault.NCCL_COMMUNICATION) < 3.0  # noise
    assert _score(evidence, "gpu:node-a/2", Fault.GPU_MEMORY_BANDWIDTH) > 10
    top = BayesianRanker().causes(evidence, ["vllm-engine"])[0]
    assert (top.node, top.fault) == ("gpu:node-a/2", "gpu_memory_bandwidth")


def _engine_kv(graph: ServiceGraph, after: float) -> ServiceGraph:
    """vLLM's KV-cache usage of the engine the GPUs belong to: 0.4, then `after` from the onset."""
    rows = MetricRows()
    rng = np.random.default_rng(9)
    for k in range(1, POINTS + 1):
        usage = (after if k > ONSET else 0.4) + 0.01 * rng.standard_normal()
        labels = {"pod": POD, "model_name": "llama", "engine": "0"}
        rows.add("vllm:kv_cache_usage_perc", MetricKind.GAUGE, {}, labels, T0 + k * SCRAPE_S * S, 0, usage)
    graph.add_metrics(rows.build().batch)
    return graph


@pytest.mark.parametrize("straggler", [True, False])
def test_the_engines_kv_cache_stays_its_own(straggler: bool) -> None:
    """vLLM keeps one KV cache per engine, its blocks on every rank: its GPUs never read it as
    theirs, a straggler among them or none (they do not split the cause between them). A
    straggler beside a fuller cache shares the posterior with it; none, and the engine's KV leads."""
    level = 0.95 if straggler else 0.6
    evidence = _evidence(_engine_kv(_gpus(before=0.6, straggler=level, peers=0.6 if straggler else level), 0.95))
    kv = [_score(evidence, f"gpu:node-a/{g}", Fault.KV_CACHE_FRAGMENTATION) for g in range(4)]
    assert _score(evidence, "vllm-engine", Fault.KV_CACHE_FRAGMENTATION) > 10
    assert np.isnan(kv).all()
    causes = BayesianRanker().causes(evidence, ["vllm-engine"])
    leading = {(c.node, c.fault) for c in causes[:2]}
    engine_kv = ("vllm-engine", Fault.KV_CACHE_FRAGMENTATION)
    if straggler:
        assert leading == {engine_kv, ("gpu:node-a/2", Fault.GPU_MEMORY_BANDWIDTH)}
        assert causes[0].probability + causes[1].probability > 0.95
    else:
        assert (causes[0].node, causes[0].fault) == engine_kv and causes[0].probability > 0.5


def test_one_gpus_memory_clocked_down_points_to_its_bandwidth_and_every_gpus_alike_does_not() -> None:
    throttled = _evidence(_gpus(before=0.6, straggler=0.6, peers=0.6, mem_clock=(1100.0, 1593.0)))
    assert _score(throttled, "gpu:node-a/2", Fault.GPU_MEMORY_BANDWIDTH) > 10
    row = throttled.index("gpu:node-a/2")
    signal = "metric.gpu_memory_clock_mhz_among_peers:DCGM_FI_DEV_MEM_CLOCK"
    assert throttled.signal[row][F[Fault.GPU_MEMORY_BANDWIDTH]] == signal
    assert _score(throttled, "gpu:node-a/0", Fault.GPU_MEMORY_BANDWIDTH) < 3.0  # its share rose
    capped = _evidence(_gpus(before=0.6, straggler=0.6, peers=0.6, mem_clock=(1100.0, 1100.0)))
    for gpu in range(4):
        assert _score(capped, f"gpu:node-a/{gpu}", Fault.GPU_MEMORY_BANDWIDTH) < 3.0


def test_the_ranker_blames_the_straggler_from_metrics_alone() -> None:
    graph = _gpus(before=0.6, straggler=0.95, peers=0.4, seed=3)
    ranking = BayesianRanker().rank(
        graph, alert_nodes=["vllm-engine"], start_ns=T0 + 300 * S, end_ns=graph.newest_ns + 1
    )
    top = ranking.causes[0]
    assert (top.node, top.service, top.fault) == ("gpu:node-a/2", "vllm-engine", Fault.GPU_MEMORY_BANDWIDTH)
    assert top.evidence[0].signal.startswith("metric.")


def _numa_host(local_after: float, seed: int = 0) -> ServiceGraph:
    """node_exporter's NUMA counters of one host whose load swings fourfold every minute: remote
    (`other_node`) and local pages move with it; after the onset the local pages are `local_after`
    of what they were at the same load, the remote ones unchanged."""
    rng = np.random.default_rng(seed)
    rows = MetricRows()
    totals = {"node_memory_numa_other_node_total": 0.0, "node_memory_numa_local_node_total": 0.0}
    resource = {"service.name": "node-exporter", "host.name": "gpu-node-1"}
    for k in range(1, POINTS + 1):
        load = 1.0 + 3.0 * ((k // 12) % 2)
        rates = {
            "node_memory_numa_other_node_total": 50.0 * load,
            "node_memory_numa_local_node_total": 450.0 * load * (local_after if k > ONSET else 1.0),
        }
        t = T0 + k * SCRAPE_S * S
        for name, rate in rates.items():
            totals[name] += rate * SCRAPE_S * (1 + 0.02 * rng.standard_normal())
            rows.add(name, MetricKind.CUMULATIVE, resource, {"node": "0"}, t, T0, totals[name])
    graph = ServiceGraph()
    graph.add_metrics(rows.build().batch)
    return graph


def test_a_falling_local_share_points_to_numa_where_load_moves_both_counters() -> None:
    falling = _evidence(_numa_host(local_after=0.3))
    row = falling.index("host:gpu-node-1")
    assert falling.signal[row][F[Fault.NUMA_MISMATCH]] == "metric.numa_local_share:node_memory_numa_local_node_total"
    assert falling.observed[row, F[Fault.NUMA_MISMATCH]] == pytest.approx(135 / 185, abs=0.02)  # 0.9 before
    assert _score(falling, "host:gpu-node-1", Fault.NUMA_MISMATCH) > 10
    # The load swings alone move the page rates fourfold, the share not at all; the rates are no
    # evidence of their own (they would read as a fault at every swing).
    steady = _evidence(_numa_host(local_after=1.0))
    row = steady.index("host:gpu-node-1")
    assert _score(steady, "host:gpu-node-1", Fault.NUMA_MISMATCH) < 3
    assert all("pages_per_s" not in signal for signal in steady.signal[row])


@pytest.mark.parametrize("gpu_owners", [(POD,), (POD, "embedding-batch-5c7d8f9b4-j2n6q")])
def test_a_host_whose_gpus_one_service_holds_is_that_services(gpu_owners: tuple[str, ...]) -> None:
    """The misplaced processes a host's NUMA counters show are those of the service whose GPUs it
    holds: the cause names that service; a host shared by services stays its own."""
    graph = _numa_host(local_after=0.3)
    rows = MetricRows()
    for k in range(1, POINTS + 1):
        for gpu, pod in enumerate(gpu_owners):
            labels = {"gpu": str(gpu), "Hostname": "gpu-node-1", "exported_pod": pod}
            rows.add("DCGM_FI_PROF_DRAM_ACTIVE", MetricKind.GAUGE, {}, labels, T0 + k * SCRAPE_S * S, 0, 0.5)
    graph.add_metrics(rows.build().batch)
    evidence = _evidence(graph)
    service = evidence.services[evidence.index("host:gpu-node-1")]
    assert service == ("vllm-engine" if len(gpu_owners) == 1 else "host:gpu-node-1")
    top = BayesianRanker().causes(evidence, ["vllm-engine"])[0]
    assert (top.node, top.service, top.fault) == ("host:gpu-node-1", service, "numa_mismatch")


def test_one_numa_nodes_rise_shows_beside_a_busier_one() -> None:
    """A host's NUMA nodes at very different rates (node_exporter labels each by `node`): the
    quiet one's allocation misses rise 40 % while its local pages and the busy node hold. Each
    scrape is one reading of the host (each metric's mean over its two series), so the misses'
    share of misses and local pages rises against the scrape-to-scrape noise, not against the gap
    between the two series."""
    rng = np.random.default_rng(3)
    rows = MetricRows()
    rates = {"0": (5000.0, 50_000.0), "1": (2000.0, 20_000.0)}  # misses, local pages per second
    totals = {(numa, name): 0.0 for numa in rates for name in ("miss", "local")}
    names = {"miss": "node_memory_numa_numa_miss_total", "local": "node_memory_numa_local_node_total"}
    resource = {"service.name": "node-exporter", "host.name": "gpu-node-1"}
    for k in range(1, POINTS + 1):
        t = T0 + k * SCRAPE_S * S
        for numa, (miss, local) in rates.items():
            now = {"miss": miss * (1.4 if numa == "1" and k > ONSET else 1.0), "local": local}
            for name, rate in now.items():
                totals[numa, name] += rate * SCRAPE_S * (1 + 0.03 * rng.standard_normal())
                rows.add(names[name], MetricKind.CUMULATIVE, resource, {"node": numa}, t, T0, totals[numa, name])
    graph = ServiceGraph()
    graph.add_metrics(rows.build().batch)
    evidence = _evidence(graph)
    row = evidence.index("host:gpu-node-1")
    c = F[Fault.NUMA_MISMATCH]
    assert evidence.signal[row][c] == "metric.numa_miss_share:node_memory_numa_numa_miss_total"
    assert evidence.baseline[row, c] == pytest.approx(3500 / 38_500, rel=0.03)  # the two series' means
    assert evidence.observed[row, c] == pytest.approx(3900 / 38_900, rel=0.03)
    assert _score(evidence, "host:gpu-node-1", Fault.NUMA_MISMATCH) > 8


def test_a_share_partner_no_entry_maps_is_measured_without_a_row_of_its_own() -> None:
    rule = MetricRule("jobs_done_total", "done_share", Fault.ERRORS, direction=-1, share_of="jobs_failed_total")
    table = MetricTable.default([rule])
    partner = table.rule("jobs_failed")
    assert partner is not None and partner.measured_only and "jobs_failed_total" in table.names()
    assert not table.rule("jobs_done_total").measured_only  # type: ignore[union-attr]


def _link_errors(metric: str, erring: int | None, seed: int = 0) -> ServiceGraph:
    """Four GPUs' cumulative NVLink (or PCIe) error counters: none counted before the onset, then
    GPU `erring`'s climbing about three a second (None: none anywhere)."""
    rng = np.random.default_rng(seed)
    rows = MetricRows()
    totals = [0.0] * 4
    for k in range(1, POINTS + 1):
        t = T0 + k * SCRAPE_S * S
        for gpu in range(4):
            if k > ONSET and gpu == erring:
                totals[gpu] += float(rng.poisson(3.0 * SCRAPE_S))
            labels = {"gpu": str(gpu), "Hostname": "node-a", "exported_pod": POD}
            rows.add(metric, MetricKind.CUMULATIVE, {"service.name": "dcgm-exporter"}, labels, t, T0, totals[gpu])
    graph = ServiceGraph()
    graph.add_metrics(rows.build().batch)
    return graph


@pytest.mark.parametrize(
    "metric",
    [
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    ],
)
def test_a_gpu_whose_link_starts_retrying_points_to_nccl(metric: str) -> None:
    erring = _evidence(_link_errors(metric, erring=1))
    assert _score(erring, "gpu:node-a/1", Fault.NCCL_COMMUNICATION) > 10
    row = erring.index("gpu:node-a/1")
    assert erring.signal[row][F[Fault.NCCL_COMMUNICATION]].endswith(f":{metric}")
    assert erring.observed[row, F[Fault.NCCL_COMMUNICATION]] == pytest.approx(3.0, rel=0.3)  # errors a second
    assert _score(erring, "gpu:node-a/0", Fault.NCCL_COMMUNICATION) == 0.0
    clean = _evidence(_link_errors(metric, erring=None))
    assert all(_score(clean, f"gpu:node-a/{g}", Fault.NCCL_COMMUNICATION) == 0.0 for g in range(4))


def test_vllm_v0s_swapped_requests_point_to_the_kv_cache_and_its_inference_time_to_latency() -> None:
    rng = np.random.default_rng(4)
    rows = MetricRows()
    resource = {"service.name": "vllm-engine"}
    for k in range(1, POINTS + 1):
        t = T0 + k * SCRAPE_S * S
        after = k > ONSET
        swapped = float(rng.poisson(6.0)) if after else 0.0
        rows.add("vllm:num_requests_swapped", MetricKind.GAUGE, resource, {}, t, 0, swapped)
        inference = (2.5 if after else 1.0) * (1 + 0.05 * rng.standard_normal())
        rows.add("vllm:request_inference_time_seconds", MetricKind.GAUGE, resource, {}, t, 0, inference)
    graph = ServiceGraph()
    graph.add_metrics(rows.build().batch)
    evidence = _evidence(graph)
    row = evidence.index("vllm-engine")
    kv, latency = F[Fault.KV_CACHE_FRAGMENTATION], F[Fault.LATENCY]
    assert evidence.signal[row][kv] == "metric.requests_swapped:vllm:num_requests_swapped"
    assert evidence.signal[row][latency] == "metric.inference_time_s:vllm:request_inference_time_seconds"
    assert evidence.score[row, kv] > 10 and evidence.score[row, latency] > 10


def _two_pods_kv(after: float, pods: tuple[str, ...]) -> ServiceGraph:
    """vLLM's KV-cache usage of two pods of one engine Deployment: 0.4 on both, then `after` on
    the first from the onset; `pods` names each point's pod (one name: a scraper that lost them)."""
    rows = MetricRows()
    rng = np.random.default_rng(4)
    for k in range(1, POINTS + 1):
        for replica in range(2):
            usage = (after if k > ONSET and replica == 0 else 0.4) + 0.01 * rng.standard_normal()
            labels = {"pod": pods[replica % len(pods)], "model_name": "llama", "engine": "0"}
            rows.add("vllm:kv_cache_usage_perc", MetricKind.GAUGE, {}, labels, T0 + k * SCRAPE_S * S, 0, usage)
    graph = ServiceGraph()
    graph.add_metrics(rows.build().batch)
    return graph


def test_one_pods_kv_cache_reads_on_its_engine_as_strongly_as_alone() -> None:
    """A Deployment's pods are one service: a fuller KV cache on one of them scores the engine as
    that pod alone would, not averaged with its healthy twin's, and no pod becomes a node."""
    kv = Fault.KV_CACHE_FRAGMENTATION
    apart = _evidence(_two_pods_kv(0.9, (POD, OTHER_POD)))
    assert not [n for n in apart.nodes if "@" in n] and "vllm-engine" in apart.nodes
    alone = _score(_evidence(_engine_kv(ServiceGraph(), 0.9)), "vllm-engine", kv)
    assert _score(apart, "vllm-engine", kv) >= 0.8 * alone
    blended = _evidence(_two_pods_kv(0.9, (POD,)))  # one pod name for both: their readings averaged
    observed = [e.observed[e.index("vllm-engine"), F[kv]] for e in (apart, blended)]
    assert observed[0] > 0.85 and observed[1] < 0.7  # the pod's level, not the twins' mean
