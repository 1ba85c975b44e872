"""The simulator's real-deployment style: vLLM V1's spans only, and the DCGM, vLLM, kubelet and
node_exporter metrics a Collector scrapes, placed where the truth says the fault lives and moving
the way the per-rank truth says."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from benchmarks.cases import HELD_OUT_SEEDS, REAL_SCENARIOS, suite_cases
from models.training import training_case
from rca.app.cli import main
from rca.graph.metric_measures import MetricMeasures
from rca.graph.service_graph import ServiceGraph
from rca.telemetry.alerts import strip_pod_suffix
from rca.telemetry.faults import Fault
from rca.telemetry.metric_table import MetricTable
from rca.telemetry.metrics import MetricBatch, Placement, concat_metrics, place
from rca.telemetry.spans import KIND_SERVER, Signal
from simulation import Root, SimulatedCase, simulate
from simulation.exporters import Deployment
from simulation.real_spans import VLLM_SIGNALS
from simulation.scenarios import compiled
from simulation.topologies import LlmLayout

SECOND = 1_000_000_000
VLLM_ATTRIBUTES = {
    "gen_ai.latency.time_to_first_token",
    "gen_ai.latency.e2e",
    "gen_ai.latency.time_in_queue",
    "gen_ai.latency.time_in_model_prefill",
    "gen_ai.latency.time_in_model_decode",
    "gen_ai.latency.time_in_model_inference",
    "gen_ai.usage.prompt_tokens",
    "gen_ai.usage.completion_tokens",
    "gen_ai.request.id",
    "gen_ai.request.n",
}
VLLM_OPTIONAL = {"gen_ai.request.max_tokens", "gen_ai.request.temperature", "gen_ai.request.top_p"}


def _seeds(scenario: str, wanted: Callable[[Root], bool]) -> Iterator[int]:
    """The seeds whose primary root is `wanted` (the conventions style draws the same plan, faster)."""
    return (s for s in range(1, 200) if wanted(simulate(scenario, seed=s, rate=0.2).truth.roots[0]))


def _seed(scenario: str, wanted: Callable[[Root], bool]) -> int:
    return next(_seeds(scenario, wanted))


def _before_during(case: SimulatedCase, metric: str) -> dict[str, tuple[float, float]]:
    """Per node, the mean reading of `metric` (rates for counters, through rca's measures) before
    the fault and during its settled part."""
    batch = concat_metrics(list(case.metrics))
    measures = MetricMeasures(MetricTable.default(), window_seconds=10.0)
    seen = measures.observe(batch)
    mine = seen.measure == measures.measures.index(metric)
    rows, values = seen.row[mine], seen.value[mine]
    nodes = np.array([batch.strings[n] for n in batch.node[rows]])
    t = batch.time_ns[rows]
    before = t < case.truth.inject_ns
    during = (t >= case.truth.inject_ns + 60 * SECOND) & (t < case.truth.end_ns)
    return {
        n: (float(values[before & (nodes == n)].mean()), float(values[during & (nodes == n)].mean()))
        for n in set(nodes)
    }


def _names(case: SimulatedCase) -> set[str]:
    return {b.strings[n] for b in case.metrics for n in np.unique(b.name)}


def _real(scenario: str, wanted: Callable[[Root], bool], profiling: bool = True) -> SimulatedCase:
    """The first real-style case of `scenario` whose primary root is `wanted` and whose DCGM
    exporter has (or lacks) the profiling fields."""
    for seed in _seeds(scenario, wanted):
        case = simulate(scenario, seed=seed, style="real")
        if ("DCGM_FI_PROF_DRAM_ACTIVE" in _names(case)) == profiling:
            return case
    raise AssertionError(f"no seed of {scenario} fits")


@pytest.fixture(scope="module")
def gpu_case() -> SimulatedCase:
    return _real("llm-gpu_memory_bandwidth", lambda r: r.magnitude > 3)


def test_the_real_style_emits_only_vllm_request_spans(gpu_case: SimulatedCase) -> None:
    conventions = simulate("llm-gpu_memory_bandwidth", seed=gpu_case.truth.seed)
    spans = [b for b in gpu_case.batches]
    services = {b.strings[i] for b in spans for i in np.unique(b.service)}
    names = {b.strings[i] for b in spans for i in np.unique(b.operation)}
    assert not any(s.startswith("vllm-worker") for s in services) and "vllm-engine" in services
    assert not {n for n in names if n.startswith("nccl:")} | ({"model_forward", "sampling"} & names)
    assert all((b.resource < 0).all() for b in spans)  # no span names a GPU
    signals = np.concatenate([b.signals for b in spans])
    others = [s for s in range(signals.shape[1]) if s not in (*VLLM_SIGNALS, Signal.URGENT)]
    assert np.isnan(signals[:, others]).all()  # no scheduler time, GPU, KV, NCCL or NUMA signal
    requests = np.concatenate(
        [(b.operation == b.strings.index("llm_request")) & (b.kind == KIND_SERVER) for b in spans]
    )
    assert np.isfinite(signals[requests][:, list(VLLM_SIGNALS)]).all()
    assert np.isnan(signals[requests, Signal.URGENT]).all()  # no priority (a caller's span may mark one)
    # the same requests as the conventions style: only what is emitted differs
    assert gpu_case.spans == sum(
        int(np.sum(~np.isin(b.service, [i for i, s in enumerate(b.strings) if s.startswith("vllm-worker")])))
        for b in conventions.batches
    )
    assert conventions.metrics == () and gpu_case.truth.inject_ns == conventions.truth.inject_ns
    assert gpu_case.truth.roots[0].magnitude == conventions.truth.roots[0].magnitude


def test_exporter_labels_place_on_the_nodes_the_spans_and_truth_name() -> None:
    ct = compiled("llm", LlmLayout(4, 2))
    d = Deployment.draw(ct, 10**18, 10**18 + 600 * SECOND, np.random.default_rng(5))
    for e in ct.topology.engines:
        for k in range(4):
            got = place("DCGM_FI_PROF_DRAM_ACTIVE", d.dcgm(e.host).resource, d.dcgm_labels(e.host, k, e.engine))
            assert got == Placement(e.gpu_node(k), e.engine, gpu=True, pod=d.pods[e.engine][0])
        assert place("vllm:kv_cache_usage_perc", d.vllm(e.engine).resource, d.vllm_labels(e.engine)).node == e.engine
    for workload, pods in d.pods.items():
        for pod in pods:
            assert strip_pod_suffix(pod) == workload
            kubelet = d.kubelet(d.node_of[pod]).resource
            assert place("container_cpu_usage_seconds_total", kubelet, d.cadvisor_labels(pod, "c")).node == workload
    for node in d.nodes:
        got = place("node_memory_numa_numa_miss_total", d.node_exporter(node).resource, {"node": "1"})
        assert got == Placement(f"host:{node}", host=True)


def test_metrics_reach_the_graph_on_the_truths_nodes(gpu_case: SimulatedCase) -> None:
    graph = ServiceGraph(retention_seconds=3600.0)
    for b in gpu_case.batches:
        graph.add(b)
    for m in gpu_case.metrics:
        graph.add_metrics(m)
    names = graph.names
    truth = gpu_case.truth
    gpu = names.node_ids[truth.node]
    assert names.nodes[names.owners[gpu]] == truth.service == truth.roots[0].service
    assert truth.service.startswith("vllm-engine")
    services = {b.strings[i] for b in gpu_case.batches for i in np.unique(b.service)}
    assert services <= set(names.node_ids) and any(n.startswith("host:gpu-node-") for n in names.node_ids)
    assert graph.counts().metric_points > 0


def test_a_straggler_keeps_its_dram_busy_while_its_peers_wait(gpu_case: SimulatedCase) -> None:
    dram = _before_during(gpu_case, "DCGM_FI_PROF_DRAM_ACTIVE")
    truth = gpu_case.truth.node
    before, during = dram[truth]
    assert during > 1.2 * before
    peers = [n for n in dram if n != truth and n.rsplit("/", 1)[0] == truth.rsplit("/", 1)[0]]
    assert peers and all(dram[p][1] < 0.9 * dram[p][0] for p in peers)


def test_a_slow_nccl_link_lowers_nvlink_traffic_on_its_rank() -> None:
    case = _real("llm-nccl_communication", lambda r: r.magnitude > 3 and r.mode == "collective")
    for metric in ("DCGM_FI_PROF_NVLINK_TX_BYTES", "DCGM_FI_PROF_NVLINK_RX_BYTES"):
        before, during = _before_during(case, metric)[case.truth.node]
        assert during < 0.7 * before, metric


def test_an_exporter_without_profiling_fields_shows_the_straggler_and_the_slow_link_all_the_same() -> None:
    """The DCGM exporter's default fields: NVML's memory-busy share and NVLink running total."""
    gpu = _real("llm-gpu_memory_bandwidth", lambda r: r.magnitude > 3, profiling=False)
    assert not any(name.startswith("DCGM_FI_PROF_") for name in _names(gpu))
    copy = _before_during(gpu, "DCGM_FI_DEV_MEM_COPY_UTIL")
    truth = gpu.truth.node
    assert copy[truth][1] > 1.2 * copy[truth][0] and 0 < copy[truth][1] <= 100
    peers = [n for n in copy if n != truth and n.rsplit("/", 1)[0] == truth.rsplit("/", 1)[0]]
    assert peers and all(copy[p][1] < 0.9 * copy[p][0] for p in peers)
    link = _real("llm-nccl_communication", lambda r: r.magnitude > 3 and r.mode == "collective", profiling=False)
    traffic = _before_during(link, "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL")  # KiB/s, from the counter
    before, during = traffic[link.truth.node]
    assert during < 0.7 * before
    evidence, _, node, _ = training_case("llm-nccl_communication", link.truth.seed, style="real")
    signal = evidence.signal[evidence.index(node)][list(Fault).index(Fault.NCCL_COMMUNICATION)]
    assert signal == "metric.nvlink_bandwidth_among_peers:DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"


def _marked_and_served(case: SimulatedCase) -> tuple[set[int], set[int], int]:
    """The ids of the spans that mark their request's urgency, the parents of vLLM's request
    spans, and how many of those request spans carry a mark themselves."""
    marked, parents, served_marked = set(), set(), 0
    for b in case.batches:
        mark = ~np.isnan(b.signals[:, Signal.URGENT])
        served = (np.asarray(b.strings)[b.operation] == "llm_request") & (b.kind == KIND_SERVER)
        marked |= set(b.span_id[mark].tolist())
        parents |= set(b.parent_id[served].tolist())
        served_marked += int((mark & served).sum())
    return marked, parents, served_marked


def test_callers_that_capture_the_priority_header_mark_the_engines_requests() -> None:
    """vLLM's spans record no priority; in the deployments whose services capture `x-priority`,
    the caller's span marks its request, and the engine's urgent queue times read from it."""
    scenario = "llm-scheduler_priority_inversion"
    seen: dict[bool, tuple[int, SimulatedCase]] = {}
    for seed in _seeds(scenario, lambda r: r.magnitude > 3):
        case = simulate(scenario, seed=seed, style="real")
        seen.setdefault(bool(_marked_and_served(case)[0]), (seed, case))
        if len(seen) == 2:
            break
    seed, case = seen[True]
    marked, parents, served_marked = _marked_and_served(case)
    assert marked <= parents and served_marked == 0  # callers of the engine mark; vLLM does not
    evidence, _, node, _ = training_case(scenario, seed, style="real")
    column = list(Fault).index(Fault.SCHEDULER_PRIORITY_INVERSION)
    assert evidence.signal[evidence.index(node)][column] == "queue_wait_urgent_minus_ordinary_s"
    assert evidence.score[evidence.index(node), column] > 3
    assert not _marked_and_served(seen[False][1])[0]  # deployments that capture no header exist too


def test_kv_cache_pressure_brings_preemptions() -> None:
    scenario = "llm-kv_cache_fragmentation"
    case = simulate(scenario, seed=_seed(scenario, lambda r: r.magnitude > 4), style="real")
    before, during = _before_during(case, "vllm:num_preemptions_total")[case.truth.service]
    assert during > 2 * before and during > 0
    usage = _before_during(case, "vllm:kv_cache_usage_perc")[case.truth.service]
    assert usage[1] > usage[0]


def test_numa_misplacement_shows_in_its_hosts_numa_counters() -> None:
    scenario = "llm-numa_mismatch"
    case = simulate(scenario, seed=_seed(scenario, lambda r: r.magnitude > 3), style="real")
    assert case.truth.node.startswith("host:gpu-node-") and case.truth.service.startswith("vllm-engine")
    for metric in ("node_memory_numa_numa_miss_total", "node_memory_numa_other_node_total"):
        before, during = _before_during(case, metric)[case.truth.node]
        assert during > 1.1 * before, metric


def test_a_cpu_starved_service_is_throttled() -> None:
    scenario = "llm-latency"
    case = simulate(scenario, seed=_seed(scenario, lambda r: r.mode == "starved" and r.magnitude > 2), style="real")
    throttled = _before_during(case, "container_cpu_cfs_throttled_seconds_total")
    before, during = throttled[case.truth.node]
    assert during > 5 * before and during > 0
    others = [n for n in throttled if n != case.truth.node]
    assert all(throttled[n][1] < 3 * throttled[n][0] + 1e-3 for n in others)


def _columns(batches: tuple[MetricBatch, ...]) -> list[np.ndarray]:
    b = concat_metrics(list(batches))
    names = np.array(b.strings)
    return [b.time_ns, b.start_ns, b.value, b.count, b.kind, names[b.name], names[b.node]]


def test_the_real_style_is_deterministic_per_seed() -> None:
    one = simulate("llm-errors", seed=7, rate=0.3, style="real")
    two = simulate("llm-errors", seed=7, rate=0.3, style="real")
    assert all(np.array_equal(a, b) for a, b in zip(_columns(one.metrics), _columns(two.metrics), strict=True))
    assert one.truth == two.truth and one.spans == two.spans and one.data_points > 0
    other = simulate("llm-errors", seed=8, rate=0.3, style="real")
    assert not np.array_equal(_columns(one.metrics)[2], _columns(other.metrics)[2])
    times = concat_metrics(list(one.metrics)).time_ns
    assert times.min() >= one.start_ns and times.max() < one.end_ns


def test_counters_are_cumulative_with_a_start_time() -> None:
    case = simulate("llm-errors", seed=7, rate=0.3, style="real")
    b = concat_metrics(list(case.metrics))
    counters = b.kind != 0
    assert counters.any() and (b.start_ns[counters] > 0).all() and (b.start_ns[counters] < b.time_ns[counters]).all()


def test_unknown_style_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown style"):
        simulate("llm-errors", seed=1, style="nope")


def test_rca_simulate_style_real_writes_metrics_that_read_back(tmp_path: Path) -> None:
    try:
        from ingest.files import decode_metric_file
    except ImportError:
        pytest.skip("ingest.files.decode_metric_file is not there yet")
    args = ["simulate", "llm-kv_cache_fragmentation", "--out", str(tmp_path), "--seed", "2", "--rate", "0.3"]
    assert main([*args, "--style", "real"]) == 0
    case = simulate("llm-kv_cache_fragmentation", seed=2, rate=0.3, style="real")
    for name in ("metrics.pb", "metrics.json"):
        result = decode_metric_file(tmp_path / name)
        assert result.rejected == 0 and len(result.batch) == case.data_points
    truth = json.loads((tmp_path / "truth.json").read_text())
    assert truth["style"] == "real" and truth["node"] == truth["service"]  # the engine's KV cache
    document = json.loads((tmp_path / "traces.json").read_text())
    spans = [s for r in document["resourceSpans"] for scope in r["scopeSpans"] for s in scope["spans"]]
    served = [s for s in spans if s["name"] == "llm_request" and s["kind"] == KIND_SERVER]
    requests = [{a["key"]: a["value"] for a in s["attributes"]} for s in served]
    assert requests and all(VLLM_ATTRIBUTES <= set(a) <= VLLM_ATTRIBUTES | VLLM_OPTIONAL for a in requests)
    assert all("intValue" in a["gen_ai.usage.prompt_tokens"] for a in requests)
    assert not any(s["name"].startswith("nccl:") or s["name"] == "model_forward" for s in spans)
    assert main(["simulate", "llm-errors", "--out", str(tmp_path / "c"), "--seed", "2", "--rate", "0.3"]) == 0
    assert not (tmp_path / "c" / "metrics.pb").exists()  # rca's own conventions: traces and logs only


def test_the_evaluation_and_the_bench_take_the_real_style_with_its_metrics(gpu_case: SimulatedCase) -> None:
    evidence, _, node, fault = training_case("llm-gpu_memory_bandwidth", gpu_case.truth.seed, style="real")
    row = evidence.index(node)
    assert fault == "gpu_memory_bandwidth" and evidence.services[row] == gpu_case.truth.service
    assert evidence.signal[row][list(Fault).index(Fault.GPU_MEMORY_BANDWIDTH)].startswith("metric.")
    case = next(suite_cases("real", 1_800_000_000 * SECOND, logs=False))
    assert case.case_id == f"{REAL_SCENARIOS[0]}#{HELD_OUT_SEEDS[0]}+real" and case.metrics
    assert all(s.startswith("llm-") for s in REAL_SCENARIOS) and "llm-numa_mismatch-double" in REAL_SCENARIOS


def test_a_kv_fault_is_its_engines_and_slows_every_rank_alike() -> None:
    """vLLM V1 keeps one block table per engine, its blocks on every rank: fragmentation is the
    engine's, no rank straggles, and the engine's own KV series read it (its GPUs have none)."""
    case = _real("llm-kv_cache_fragmentation", lambda r: r.magnitude > 3)
    assert case.truth.node == case.truth.service and case.truth.service.startswith("vllm-engine")
    assert case.truth.roots[0].mode == "engine"
    dram = _before_during(case, "DCGM_FI_PROF_DRAM_ACTIVE")
    rises = [during / before for before, during in dram.values()]
    assert min(rises) > 1.1 and max(rises) < 1.1 * min(rises)  # alike: none waits for another
    kv = list(Fault).index(Fault.KV_CACHE_FRAGMENTATION)
    evidence, _, node, _ = training_case("llm-kv_cache_fragmentation", case.truth.seed, style="real")
    assert node == case.truth.node and evidence.score[evidence.index(node), kv] > 3
    assert evidence.signal[evidence.index(node)][kv].startswith("metric.")
    assert np.isnan(evidence.score[evidence.lockstep >= 0, kv]).all()
    conventions = training_case("llm-kv_cache_fragmentation", 2)[0]  # GPUs with KV span attributes read their own
    own = [i for i, n in enumerate(conventions.nodes) if n.startswith("gpu:")]
    assert own and all(conventions.signal[i][kv].startswith("kv_") for i in own)
