"""Engine replicas under one service name, as one Deployment's pods: their LLM-serving signals are
kept per instance (the resource's `host.name` here), so a fault on one replica reads at the
strength it has alone, not blended with its healthy twin's, and the replicas still report as one
node per service."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from benchmarks.heldout import score_case
from models.ranker import BayesianRanker
from rca.evidence.nodes import WAIT, NodeEvidence
from rca.graph.service_graph import ServiceGraph
from rca.graph.view import Window, graph_between
from rca.graph.writer import concat
from rca.telemetry.faults import Fault
from rca.telemetry.spans import SpanBatch
from tests.test_evidence_llm import (
    END_NS,
    HOST,
    LATE,
    NOISE,
    ONSET,
    RANKS,
    STRAGGLER,
    T0,
    WINDOW_S,
    Change,
    evidence_of,
    label,
    row_scores,
    score,
    serving,
)

HOST_B = "gpu-host-b"
_APART = np.uint64(1 << 40)  # the second replica's trace and span ids


def _second_replica(batch: SpanBatch) -> SpanBatch:
    """`batch` as another pod of the same services: its own host (instance and GPU nodes) and ids."""
    trace = batch.trace_id.copy()
    trace[:, 1] += _APART
    return replace(
        batch,
        strings=tuple(s.replace(HOST, HOST_B) for s in batch.strings),
        trace_id=trace,
        span_id=batch.span_id + _APART,
        parent_id=np.where(batch.parent_id != 0, batch.parent_id + _APART, batch.parent_id),
    )


def two_replicas(faulty: Change) -> SpanBatch:
    """The fault on the first replica; the second, healthy, under the same service names."""
    return concat([serving(faulty, seed=0), _second_replica(serving(Change(), seed=1))])


def out_of_rotation(batch: SpanBatch) -> SpanBatch:
    """`batch` without the requests that begin from window ONSET on: they go to the other replica."""
    traces, trace = np.unique(batch.trace_id, axis=0, return_inverse=True)
    began = np.full(traces.shape[0], np.iinfo(np.int64).max)
    np.minimum.at(began, trace.reshape(-1), batch.start_ns)
    return batch.select(began[trace.reshape(-1)] < T0 + ONSET * WINDOW_S * 10**9)


def blended(batch: SpanBatch) -> SpanBatch:
    """`batch` as a receiver without instances read it: one row per service."""
    return replace(batch, instance=np.full(len(batch), -1, np.int32))


def nccl(evidence: NodeEvidence, rank: int) -> float:
    return score(evidence, f"vllm-worker-{rank}", Fault.NCCL_COMMUNICATION)


@pytest.fixture(scope="module")
def late_collective() -> tuple[SpanBatch, NodeEvidence]:
    batch = two_replicas(Change(late_collective=True))
    return batch, evidence_of(batch)


def test_a_collective_lost_on_one_replica_reads_as_it_does_alone(
    late_collective: tuple[SpanBatch, NodeEvidence],
) -> None:
    batch, shared = late_collective
    alone = evidence_of(serving(Change(late_collective=True), seed=0))
    assert nccl(shared, LATE) > 10 and label(shared, f"vllm-worker-{LATE}", Fault.NCCL_COMMUNICATION) == "nccl_overlap"
    assert nccl(shared, LATE) >= 0.9 * nccl(alone, LATE)
    assert nccl(shared, LATE) > 1.5 * nccl(evidence_of(blended(batch)), LATE)  # the twin's overlap diluted it


def test_replicas_under_one_name_report_as_one_node_per_service_in_one_communicator(
    late_collective: tuple[SpanBatch, NodeEvidence],
) -> None:
    _, shared = late_collective
    assert not [n for n in shared.nodes if "@" in n]  # instances are never candidates
    ranks = [shared.index(f"vllm-worker-{k}") for k in range(RANKS)]
    assert len({int(shared.communicator[i]) for i in ranks}) == 1 and shared.communicator[ranks[0]] >= 0
    gpus = {n for n in shared.nodes if n.startswith("gpu:")}
    assert gpus == {f"gpu:{host}/{k}" for host in (HOST, HOST_B) for k in range(RANKS)}  # GPUs stay the pods'
    assert all(shared.lockstep[shared.index(gpu)] < 0 for gpu in gpus)  # a rank's two pods' GPUs: no engine's group


def test_a_straggler_on_one_replica_makes_its_own_peers_wait_at_full_strength() -> None:
    batch = two_replicas(Change(straggler=1.8))
    shared, alone = evidence_of(batch), evidence_of(serving(Change(straggler=1.8), seed=0))
    waits = [score(shared, f"vllm-worker-{k}", WAIT) for k in range(RANKS) if k != STRAGGLER]
    alone_waits = [score(alone, f"vllm-worker-{k}", WAIT) for k in range(RANKS) if k != STRAGGLER]
    assert min(waits) > 10 and min(waits) >= 0.8 * min(alone_waits)
    assert score(shared, f"vllm-worker-{STRAGGLER}", WAIT) < 3.0  # the straggler itself waits for nobody, on either pod


def test_priority_inversion_on_one_replicas_engine_is_not_blended_away() -> None:
    batch = two_replicas(Change(urgent_queue=6.0))
    inversion = Fault.SCHEDULER_PRIORITY_INVERSION
    shared = score(evidence_of(batch), "vllm-engine", inversion)
    assert shared > 10 and shared > score(evidence_of(blended(batch)), "vllm-engine", inversion)


def test_a_gpu_serves_the_tokens_of_its_own_replica() -> None:
    """The second replica leaves the rotation at ONSET, so the service's output tokens halve while
    the first replica's GPUs work as before: per token of their own pod's engine they stay
    quiet; per token of the service they would read twice as slow."""
    batch = concat([serving(Change(), seed=0), _second_replica(out_of_rotation(serving(Change(), seed=1)))])
    graph = ServiceGraph(retention_seconds=3600.0)
    graph.add(batch)
    names = graph.names
    assert {names.nodes[g]: pod for g, pod in names.pods.items()} == {
        f"gpu:{host}/{k}": host for host in (HOST, HOST_B) for k in range(RANKS)
    }  # each GPU's instance is its spans'
    per_token = "gpu_time_per_output_token_s"
    kept, without = row_scores(batch), row_scores(blended(batch))
    assert max(kept[per_token, f"gpu:{HOST}/{k}"] for k in range(RANKS)) < NOISE
    assert min(without[per_token, f"gpu:{HOST}/{k}"] for k in range(RANKS)) > 10


def test_the_graph_view_sums_a_services_instances_into_its_node() -> None:
    batch = two_replicas(Change())
    graph = ServiceGraph(retention_seconds=3600.0)
    graph.add(batch)
    view = graph_between(graph, Window(T0, END_NS))
    assert not [n for n in view.nodes if "@" in n]
    text = np.asarray(batch.strings)
    rank_0 = (text[batch.service] == "vllm-worker-0") & (text[batch.operation] == "nccl:AllReduce")
    both = rank_0 & (batch.start_ns < END_NS)
    assert (text[batch.instance[both]] == HOST_B).any()  # both pods' collectives are among them
    assert view.nodes["vllm-worker-0"]["signals"]["nccl_latency"]["count"] == both.sum()


@pytest.mark.parametrize(("scenario", "seed"), [("llm-nccl_communication-peers", 101), ("llm-nccl_communication", 107)])
def test_a_simulated_ranks_nccl_fault_under_shared_replica_names_is_named(scenario: str, seed: int) -> None:
    """Two replicas under one set of names (`simulate(replica_names="shared")`): their blend had put
    another rank first in both cases; kept apart the faulty rank comes first, with its class."""
    scored = score_case(BayesianRanker(), scenario, seed, replica_names="shared")
    assert scored.replicas == 2 and scored.case.endswith("+shared")
    assert scored.place == 1 and scored.top_fault == Fault.NCCL_COMMUNICATION
