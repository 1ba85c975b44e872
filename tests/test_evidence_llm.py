"""LLM-serving evidence (contract section 6) on hand-built traces: a straggler's compute against
its peers' collective wait, comm/compute overlap, every per-token signal scored on a built shift
and not on noise, priority inversion on the engine against a busy microservice, and no change for
traces without these attributes."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pytest

from models.structure import Relation, evidence_structure
from models.training import replayed, simulated_case
from rca.evidence.llm import LLM_CLASSES, llm_rows
from rca.evidence.nodes import WAIT, F, NodeEvidence, extract_evidence
from rca.evidence.spanrows import MIN_BASELINE_WINDOWS, SpanExtractor
from rca.graph.accumulators import OpSum
from rca.graph.series import window_series
from rca.graph.service_graph import ServiceGraph
from rca.telemetry.builder import SpanBatchBuilder
from rca.telemetry.conventions import AttrValue
from rca.telemetry.faults import Fault
from rca.telemetry.spans import KIND_CLIENT, KIND_INTERNAL, KIND_SERVER, SpanBatch
from simulation import simulate
from tests.spanfactory import T0, tid

HOST = "gpu-host"
RANKS = 4
STRAGGLER, LATE = 3, 2  # the rank whose compute slows; the rank whose collective stops overlapping
WINDOW_S, WINDOWS, ONSET = 10, 24, 16  # the change holds from window ONSET on
PER_WINDOW = 30  # requests
END_NS = T0 + WINDOWS * WINDOW_S * 1_000_000_000
NOISE = 3.0  # scores of unchanged rows stay below three standard errors
Array = npt.NDArray[np.float64]
Index = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Change:
    """What changes from window ONSET on (nothing, by default)."""

    straggler: float = 1.0  # factor on rank STRAGGLER's compute
    late_collective: bool = False  # rank LATE's AllReduce runs after its forward, not inside it
    nccl_on_gpu: bool = False  # the NCCL spans name their rank's GPU (`gpu.id`) too
    scaled: tuple[tuple[str, float], ...] = ()  # span attributes and the factor each is scaled by
    urgent_queue: float = 1.0  # factor on urgent requests' queue wait
    priority_on: str = "engine"  # the span that carries the x-priority header: engine, caller (its parent), none
    retriever: float = 1.0  # factor on the rag-retriever's latency


def _ln(rng: np.random.Generator, median: float, sigma: float, n: int) -> Array:
    values: Array = median * rng.lognormal(0.0, sigma, n)
    return values


def _ns(seconds: Array) -> Index:
    return np.round(seconds * 1e9).astype(np.int64)


class Writer:
    """Spans of `n` traces, one span per trace at each call, written column by column."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.builder = SpanBatchBuilder()
        self.traces = [tid(i + 1) for i in range(n)]
        self.ids = itertools.count(1)

    def spans(
        self,
        service: str,
        name: str,
        parents: list[bytes],
        start: Index,
        end: Index,
        *,
        attributes: Sequence[Mapping[str, AttrValue]] | None = None,
        resource: Mapping[str, AttrValue] | None = None,
        errors: Sequence[bool] | None = None,
        kind: int = KIND_SERVER,
    ) -> list[bytes]:
        """One span per trace; returns their ids (the parents of the next level)."""
        n = self.n
        span_ids = [next(self.ids).to_bytes(8, "big") for _ in range(n)]
        self.builder.extend(
            service,
            resource or {},
            self.traces,
            span_ids,
            parents,
            [name] * n,
            [kind] * n,
            start.tolist(),
            end.tolist(),
            errors or [False] * n,
            attributes or [{}] * n,
        )
        return span_ids

    def batch(self) -> SpanBatch:
        result = self.builder.build()
        assert result.rejected == 0, result.message
        return result.batch


def _starts(rng: np.random.Generator) -> tuple[Index, npt.NDArray[np.bool_]]:
    """Request start times over the windows, and whether each is from window ONSET on."""
    start = T0 + np.sort(rng.integers(0, WINDOWS * WINDOW_S * 10**9, WINDOWS * PER_WINDOW))
    return start, start >= T0 + ONSET * WINDOW_S * 10**9


@functools.cache
def serving(change: Change, seed: int = 0) -> SpanBatch:
    """api-gateway → rag-retriever, and → vllm-engine `llm_request` → per rank `vllm-worker-k`:
    `model_forward` on `gpu:{HOST}/k` and `nccl:AllReduce` beside it (same parent), in lockstep:
    each rank computes, then waits in the collective until the slowest rank is done."""
    rng = np.random.default_rng(seed)
    start, after = _starts(rng)
    n = start.shape[0]
    urgent = np.less(rng.random(n), 0.25)
    tokens_in, tokens_out = np.round(_ln(rng, 600, 0.5, n)), np.round(_ln(rng, 150, 0.5, n))
    queue = np.where(urgent, 0.012, 0.05) * rng.lognormal(0.0, 0.5, n)
    queue *= np.where(urgent & after, change.urgent_queue, 1.0)
    scheduler = _ln(rng, 0.0015, 0.2, n)
    prefill = tokens_in * 6e-5 * rng.lognormal(0.0, 0.05, n)
    compute = tokens_out[:, None] * 0.01 * rng.lognormal(0.0, 0.03, (n, RANKS))
    compute[:, STRAGGLER] *= np.where(after, change.straggler, 1.0)
    decode = compute.max(axis=1) + _ln(rng, 0.002, 0.2, n)  # the slowest rank, then the reduction
    retrieve = _ln(rng, 0.2, 0.3, n) * np.where(after, change.retriever, 1.0)
    e2e = queue + scheduler + prefill + decode + 0.001
    engine_start = start + _ns(retrieve + 0.001)
    forward_start = engine_start + _ns(queue + scheduler)
    forward_end = forward_start + _ns(decode)

    def scaled(key: str, values: Array | float) -> list[float]:
        factor = dict(change.scaled).get(key, 1.0)
        scaled_values: list[float] = (values * np.where(after, factor, 1.0)).tolist()
        return scaled_values

    timings = {
        "gen_ai.latency.time_in_queue": queue,
        "gen_ai.latency.time_in_scheduler": scheduler,
        "gen_ai.latency.time_to_first_token": queue + scheduler + prefill,
        "gen_ai.latency.time_in_model_prefill": prefill,
        "gen_ai.latency.time_in_model_decode": decode,
        "gen_ai.latency.e2e": e2e,
        "gen_ai.usage.input_tokens": tokens_in,
        "gen_ai.usage.output_tokens": tokens_out,
    }
    columns = {key: scaled(key, values) for key, values in timings.items()}
    header: list[dict[str, AttrValue]] = [
        {"http.request.header.x-priority": ["high"] if u else ["low"]} for u in urgent.tolist()
    ]
    engine_attributes: list[dict[str, AttrValue]] = [
        {key: column[i] for key, column in columns.items()} | (header[i] if change.priority_on == "engine" else {})
        for i in range(n)
    ]
    w = Writer(n)
    caller = header if change.priority_on == "caller" else None
    gateway = w.spans(
        "api-gateway", "POST /v1/chat", [b""] * n, start, engine_start + _ns(e2e + 0.001), attributes=caller
    )
    w.spans("rag-retriever", "retrieve", gateway, start, start + _ns(retrieve))
    resource = {"host.name": HOST}
    engine_end = engine_start + _ns(e2e)
    engine = w.spans(
        "vllm-engine", "llm_request", gateway, engine_start, engine_end, attributes=engine_attributes, resource=resource
    )
    arrive = forward_start[:, None] + _ns(compute)  # each rank waits in the collective for the slowest
    if change.late_collective:  # rank LATE's runs after its forward instead of inside it
        arrive[:, LATE] = np.where(after, forward_end, arrive[:, LATE])
    transfer = (forward_end - forward_start)[:, None] - _ns(compute)  # what the late rank still moves
    collective_end = np.max(arrive + np.where(np.arange(RANKS) == LATE, transfer, 0), axis=1)  # per request
    collective_end = np.maximum(collective_end, forward_end)  # the others wait for it
    for k in range(RANKS):
        gpu = {
            "gpu.dram.bytes": scaled("gpu.dram.bytes", tokens_out * 4e9 * rng.lognormal(0.0, 0.1, n)),
            "gpu.l2.sectors": scaled("gpu.l2.sectors", tokens_out * 4e8 * rng.lognormal(0.0, 0.1, n)),
            "gpu.dram.utilization": scaled("gpu.dram.utilization", 0.6 + rng.normal(0.0, 0.03, n)),
            "kv_cache.block_allocation_rate": scaled("kv_cache.block_allocation_rate", 0.98 - rng.beta(1.5, 100.0, n)),
            "kv_cache.avg_block_size": scaled("kv_cache.avg_block_size", _ln(rng, 262144.0, 0.2, n)),
            "kv_cache.usage": scaled("kv_cache.usage", 0.4 + rng.normal(0.0, 0.05, n)),
        }
        forward: list[dict[str, AttrValue]] = [
            {"gpu.id": str(k)} | {key: c[i] for key, c in gpu.items()} for i in range(n)
        ]
        worker = f"vllm-worker-{k}"
        w.spans(
            worker,
            "model_forward",
            engine,
            forward_start,
            forward_end,
            attributes=forward,
            resource=resource,
            kind=KIND_INTERNAL,
        )
        on_gpu: dict[str, AttrValue] = {"gpu.id": str(k)} if change.nccl_on_gpu else {}
        nccl: list[dict[str, AttrValue]] = [
            {"nccl.bytes": b, "nccl.rank": k} | on_gpu for b in scaled("nccl.bytes", np.full(n, 16.0 * 2**20))
        ]
        w.spans(
            worker,
            "nccl:AllReduce",
            engine,
            arrive[:, k],
            collective_end,
            attributes=nccl,
            resource=resource,
            kind=KIND_INTERNAL,
        )
    return w.batch()


def evidence_of(batch: SpanBatch) -> NodeEvidence:
    graph = ServiceGraph(retention_seconds=3600.0)
    graph.add(batch)
    return extract_evidence(graph, start_ns=T0, end_ns=END_NS)


def row_scores(batch: SpanBatch) -> dict[tuple[str, str], float]:
    """Every LLM row's score by (label, node), before rows are reduced to nodes."""
    graph = ServiceGraph(retention_seconds=3600.0)
    graph.add(batch)
    x = SpanExtractor(graph, window_series(graph, T0, T0, END_NS), MIN_BASELINE_WINDOWS)
    llm = llm_rows(x)
    out = {}
    for rows in (x.rows(llm.latency, 1, 0.05, log_values=True), *llm.classes.values()):
        labels = rows.label_rows(np.arange(rows.node.shape[0]))
        out.update(
            {
                (text, graph.names.nodes[int(n)]): float(s)
                for text, n, s in zip(labels, rows.node, rows.score, strict=True)
            }
        )
    return out


def score(evidence: NodeEvidence, node: str, fault: Fault | int) -> float:
    """A node's score of a fault class, or of an evidence column (`WAIT`)."""
    return float(evidence.score[evidence.index(node), F.get(fault, fault)])  # type: ignore[call-overload]


def label(evidence: NodeEvidence, node: str, fault: Fault | int) -> str:
    return evidence.signal[evidence.index(node)][F.get(fault, fault)]  # type: ignore[call-overload]


def test_a_straggler_shows_compute_up_and_wait_flat_its_peers_the_reverse() -> None:
    evidence = evidence_of(serving(Change(straggler=1.8)))
    straggler, peers = f"gpu:{HOST}/{STRAGGLER}", [k for k in range(RANKS) if k != STRAGGLER]
    assert score(evidence, straggler, Fault.LATENCY) > 10  # its compute, net of waiting
    assert label(evidence, straggler, Fault.LATENCY) in {"gpu_time_per_output_token_s", "self_time_s:model_forward"}
    assert score(evidence, f"vllm-worker-{STRAGGLER}", WAIT) < NOISE  # it waits for nobody
    for k in peers:
        assert score(evidence, f"gpu:{HOST}/{k}", Fault.LATENCY) < NOISE  # their compute is unchanged
        assert score(evidence, f"vllm-worker-{k}", WAIT) > 10  # they wait for it
        assert score(evidence, f"vllm-worker-{k}", Fault.NCCL_COMMUNICATION) < NOISE  # as no fault of their own
        assert np.isnan(score(evidence, f"vllm-worker-{k}", Fault.LATENCY))  # waiting is no latency row
    ranks = [evidence.index(f"vllm-worker-{k}") for k in range(RANKS)]
    assert len({int(evidence.communicator[i]) for i in ranks}) == 1 and evidence.communicator[ranks[0]] >= 0
    others = np.setdiff1d(np.arange(len(evidence.nodes)), ranks)
    assert (evidence.communicator[others] == -1).all()  # GPUs reach theirs through their owner


@pytest.mark.parametrize("nccl_on_gpu", [False, True])
def test_a_collective_that_stops_overlapping_its_compute_outscores_the_peers_that_wait_for_it(
    nccl_on_gpu: bool,
) -> None:
    late = evidence_of(serving(Change(late_collective=True, nccl_on_gpu=nccl_on_gpu)))
    assert score(late, f"vllm-worker-{LATE}", Fault.NCCL_COMMUNICATION) > 10
    assert label(late, f"vllm-worker-{LATE}", Fault.NCCL_COMMUNICATION) == "nccl_overlap"
    i = late.index(f"vllm-worker-{LATE}")
    assert late.baseline[i, F[Fault.NCCL_COMMUNICATION]] > 0.99 and late.observed[i, F[Fault.NCCL_COMMUNICATION]] < 0.05
    # the peers' collectives began inside their forwards and now outlast them, waiting: they keep
    # their overlap, and their wait shows as such, no fault of their own
    peers = [k for k in range(RANKS) if k != LATE]
    assert max(score(late, f"vllm-worker-{k}", Fault.NCCL_COMMUNICATION) for k in peers) < NOISE
    assert min(score(late, f"vllm-worker-{k}", WAIT) for k in peers) > NOISE


SIGNALS = [  # attribute, factor, node, class, label
    ("gen_ai.latency.time_to_first_token", 2.0, "vllm-engine", Fault.LATENCY, "ttft_per_input_token_s"),
    ("gen_ai.latency.time_in_model_prefill", 2.0, "vllm-engine", Fault.LATENCY, "prefill_per_input_token_s"),
    ("gen_ai.latency.time_in_model_decode", 2.0, "vllm-engine", Fault.LATENCY, "decode_per_output_token_s"),
    ("gen_ai.latency.e2e", 2.0, "vllm-engine", Fault.LATENCY, "e2e_per_output_token_s"),
    ("gen_ai.latency.time_in_scheduler", 2.0, "vllm-engine", Fault.LATENCY, "scheduler_time_s"),
    ("gpu.dram.bytes", 1.6, f"gpu:{HOST}/1", Fault.GPU_MEMORY_BANDWIDTH, "dram_bytes_per_output_token"),
    ("nccl.bytes", 0.25, "vllm-worker-1", WAIT, "nccl_bytes_per_s"),  # waits make it noisy
]


@pytest.mark.parametrize(("attribute", "factor", "node", "fault", "name"), SIGNALS)
def test_each_signal_is_scored_on_a_shift_and_not_on_noise(
    attribute: str, factor: float, node: str, fault: Fault | int, name: str
) -> None:
    shifted = evidence_of(serving(Change(scaled=((attribute, factor),))))
    assert score(shifted, node, fault) > 10 and label(shifted, node, fault) == name
    assert score(evidence_of(serving(Change())), node, fault) < NOISE


def test_gpu_time_per_token_rises_on_the_straggler_alone() -> None:
    rows = row_scores(serving(Change(straggler=1.8)))
    assert rows["gpu_time_per_output_token_s", f"gpu:{HOST}/{STRAGGLER}"] > 10
    assert all(rows["gpu_time_per_output_token_s", f"gpu:{HOST}/{k}"] < NOISE for k in range(RANKS) if k != STRAGGLER)


ROW_OF = {"kv_cache.usage": "kv_usage", "gpu.l2.sectors": "l2_sectors_per_output_token"}


def test_usage_and_l2_traffic_count_as_fragmentation_only_with_low_block_allocation() -> None:
    node = f"gpu:{HOST}/1"
    for attribute in ("kv_cache.usage", "gpu.l2.sectors"):
        alone = evidence_of(serving(Change(scaled=((attribute, 2.0),))))
        assert score(alone, node, Fault.KV_CACHE_FRAGMENTATION) < NOISE  # load fills caches too
        fragmented = row_scores(serving(Change(scaled=((attribute, 2.0), ("kv_cache.block_allocation_rate", 0.6)))))
        assert fragmented[ROW_OF[attribute], node] > 10


def test_priority_inversion_on_the_engine_outranks_a_busy_microservice_on_the_path() -> None:
    # urgent requests come to wait about twice as long as ordinary ones (96 ms against 50 ms),
    # while the retriever the gateway also calls slows by half under load
    evidence = evidence_of(serving(Change(urgent_queue=8.0, retriever=1.5)))
    inversion = score(evidence, "vllm-engine", Fault.SCHEDULER_PRIORITY_INVERSION)
    assert label(evidence, "vllm-engine", Fault.SCHEDULER_PRIORITY_INVERSION) == "queue_wait_urgent_minus_ordinary_s"
    assert inversion > 2 * score(evidence, "rag-retriever", Fault.LATENCY) > 10
    i = evidence.index("vllm-engine")
    assert evidence.observed[i, F[Fault.SCHEDULER_PRIORITY_INVERSION]] > 0.02  # seconds longer than ordinary
    # urgent requests that wait longer but still less than ordinary ones are no inversion
    shorter = evidence_of(serving(Change(urgent_queue=2.0)))
    assert score(shorter, "vllm-engine", Fault.SCHEDULER_PRIORITY_INVERSION) == 0.0


def test_a_queue_time_without_priority_takes_its_callers_in_any_arrival_order() -> None:
    """vLLM records no priority on its span; a caller capturing the x-priority header does."""
    batch = serving(Change(urgent_queue=8.0, priority_on="caller"))
    engine = np.asarray(batch.strings)[batch.service] == "vllm-engine"
    graph = ServiceGraph(retention_seconds=3600.0)
    graph.add(batch.select(engine))  # the engine's spans before their callers'
    graph.add(batch.select(~engine))
    evidence = extract_evidence(graph, start_ns=T0, end_ns=END_NS)
    assert label(evidence, "vllm-engine", Fault.SCHEDULER_PRIORITY_INVERSION) == "queue_wait_urgent_minus_ordinary_s"
    assert score(evidence, "vllm-engine", Fault.SCHEDULER_PRIORITY_INVERSION) == pytest.approx(
        score(evidence_of(serving(Change(urgent_queue=8.0))), "vllm-engine", Fault.SCHEDULER_PRIORITY_INVERSION)
    )
    # No span marks the requests: the queue time is there, the inversion not measurable.
    unmarked = evidence_of(serving(Change(urgent_queue=8.0, priority_on="none")))
    assert np.isnan(score(unmarked, "vllm-engine", Fault.SCHEDULER_PRIORITY_INVERSION))


@functools.cache
def shop(seed: int = 0) -> SpanBatch:
    """A microservice trace without section 6 attributes: frontend → cart → redis (virtual),
    frontend → checkout → payment; payment slows and cart fails more from window ONSET on."""
    rng = np.random.default_rng(seed)
    start, after = _starts(rng)
    n = start.shape[0]
    payment = _ns(_ln(rng, 0.02, 0.3, n) * np.where(after, 2.0, 1.0))
    redis = _ns(_ln(rng, 0.002, 0.3, n))
    ms = 1_000_000
    w = Writer(n)
    front = w.spans("frontend", "GET /checkout", [b""] * n, start, start + payment + redis + 10 * ms)
    failed = [bool(f) for f in rng.random(n) < np.where(after, 0.2, 0.01)]
    cart = w.spans("cart", "GetCart", front, start + ms, start + redis + 2 * ms, errors=failed)
    w.spans(
        "cart", "GET", cart, start + ms, start + ms + redis, attributes=[{"db.system": "redis"}] * n, kind=KIND_CLIENT
    )
    paid = start + redis + 3 * ms
    checkout = w.spans("checkout", "PlaceOrder", front, paid, paid + payment + 2 * ms)
    w.spans("payment", "Charge", checkout, paid + ms, paid + ms + payment)
    return w.batch()


# `shop()`'s latency, errors and call-structure scores per node, as the code before the LLM rows
# (commit 8383147) computed them
SHOP_NODES = ("frontend", "cart", "checkout", "payment", "redis")
SHOP_SCORES = np.array(
    [
        [6.2829650302781774e-29, 0.0, 0.0],
        [0.0, 9.5649485771086482e00, 0.0],
        [np.nan, 0.0, 0.0],
        [2.6160647992987570e01, 0.0, np.nan],
        [1.0965294809949828e-02, 0.0, np.nan],
    ]
)
SPAN_CLASSES = [F[Fault.LATENCY], F[Fault.ERRORS], F[Fault.CALL_STRUCTURE]]


def test_traces_without_section_6_attributes_give_the_evidence_they_gave_before() -> None:
    evidence = evidence_of(shop())
    assert evidence.nodes == SHOP_NODES
    np.testing.assert_allclose(evidence.score[:, SPAN_CLASSES], SHOP_SCORES, rtol=1e-12, atol=1e-15)
    llm = [F[fault] for fault in LLM_CLASSES]
    assert np.isnan(evidence.score[:, llm]).all() and (evidence.communicator == -1).all()


def test_a_simulated_microservice_case_adds_no_llm_row_and_no_lockstep_wait() -> None:
    case = simulate("boutique-latency", seed=1)
    graph = ServiceGraph(retention_seconds=3600.0)
    for part in case.batches:
        graph.add(part)
    series = window_series(graph, case.start_ns, case.start_ns, case.end_ns)
    llm = llm_rows(SpanExtractor(graph, series, MIN_BASELINE_WINDOWS))
    assert llm.latency == [] and all(rows.node.shape[0] == 0 for rows in llm.classes.values())
    assert not series.ops.sums[:, :, OpSum.WAIT].any() and not graph.names.nccl_ops  # self times as before
    evidence = extract_evidence(graph, start_ns=case.start_ns, end_ns=case.end_ns)
    assert np.isnan(evidence.score[:, [F[fault] for fault in LLM_CLASSES]]).all()
    assert (evidence.communicator == -1).all()


@pytest.mark.parametrize("style", ["conventions", "real"])
def test_engines_time_whole_requests_and_are_their_gpus_engine_ancestors(style: str) -> None:
    """The nodes whose spans time whole LLM requests (TTFT, decode, e2e) are the engines, in
    both styles; to a root below an engine (a GPU, a worker), the engine is an ENGINE ancestor
    and the gateway in front of it a plain ANCESTOR."""
    (evidence, alerts, root, _), _ = simulated_case("llm-gpu_memory_bandwidth", 101, style=style)
    engines = {evidence.nodes[i] for i in np.flatnonzero(evidence.engine)}
    assert engines and all(name.startswith("vllm-engine") for name in engines)
    structure = evidence_structure(evidence, alerts)
    row = {int(c): k for k, c in enumerate(structure.candidates)}
    r = row[evidence.index(root)]
    engine, gateway = row[evidence.index("vllm-engine-b")], row[evidence.index("api-gateway")]
    assert structure.relation[r, engine] == Relation.ENGINE
    assert structure.relation[r, gateway] == Relation.ANCESTOR


@pytest.mark.parametrize("empty_windows", [0, 2])
def test_requests_still_running_at_the_cut_do_not_raise_a_gpus_time_per_token(empty_windows: int) -> None:
    """A request's tokens arrive with its span when it ends, its GPU work with forward spans that
    end before it: in the newest windows the GPUs' time per token served would rise with the
    requests still in flight. A drawn case (long requests, no GPU fault) replayed up to a minute
    past its first alert, as the benchmark sends it: every GPU per-token row stays quiet
    (up to 14 standard errors before those windows were left out), also where the incident's
    window runs on past the newest span (`empty_windows` more, which hold nothing yet)."""
    case = simulate("llm-nccl_communication", seed=101, profile="shifted", start_ns=1_767_225_600 * 10**9)
    graph, alert_ns = replayed(case)
    start, end = alert_ns - 300 * 10**9, graph.newest_ns + 1 + empty_windows * graph.window_ns
    x = SpanExtractor(graph, window_series(graph, start, start, end), MIN_BASELINE_WINDOWS)
    rows = x.rows(llm_rows(x).latency, 1, 0.05, log_values=True)
    labels = rows.label_rows(np.arange(rows.node.shape[0]))
    per_token = [s for text, s in zip(labels, rows.score, strict=True) if text == "gpu_time_per_output_token_s"]
    assert per_token and max(per_token) < NOISE
