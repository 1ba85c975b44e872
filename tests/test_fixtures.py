"""The hand-written fixtures: one LLM request following every section 6 convention, its log
records, and a webhook."""

from __future__ import annotations

import io
import itertools
import json
import math
from pathlib import Path

import numpy as np

from ingest.files import decode_file
from ingest.otlp_logs_json import decode_logs_json
from rca.app.compose import analyze
from rca.evidence.nodes import F, extract_evidence
from rca.graph.accumulators import LogSum
from rca.graph.names import NodeKind
from rca.graph.series import Table, window_series
from rca.graph.service_graph import ServiceGraph
from rca.graph.view import Window, graph_between
from rca.telemetry.alerts import service_of
from rca.telemetry.faults import Fault
from rca.telemetry.spans import Signal, SpanBatch

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
TRACE = FIXTURES / "llm-request.otlp.json"
WEBHOOK = FIXTURES / "alertmanager-llm-firing.json"
LOGS = FIXTURES / "llm-logs.otlp.json"
TRACE_ID = (0x4BF92F3577B34DA6, 0xA3CE929D0E0E4736)


def _signal(batch: SpanBatch, name: str, signal: Signal) -> list[float]:
    """`signal` of each span called `name`, in file order."""
    rows = [i for i, op in enumerate(batch.operation.tolist()) if batch.strings[op] == name]
    return [float(batch.signals[i, signal]) for i in rows]


def test_the_llm_request_decodes_with_every_convention() -> None:
    result = decode_file(TRACE)
    batch = result.batch
    assert result.rejected == 0 and len(batch) == 17
    assert _signal(batch, "llm_request", Signal.QUEUE_TIME_URGENT) == [0.012]  # x-priority: high
    assert _signal(batch, "llm_request", Signal.INPUT_TOKENS) == [812.0]
    assert _signal(batch, "model_forward", Signal.KV_AVG_BLOCK_SIZE) == [262144.0, 262144.0]
    assert _signal(batch, "sampling", Signal.NUMA_MISMATCH) == [0.0, 1.0]  # worker 1's GPU sits on node 1
    assert np.allclose(_signal(batch, "nccl:Send", Signal.NCCL_P2P_LATENCY), [6e-6, 6e-6])
    assert all(math.isnan(v) for v in _signal(batch, "nccl:Send", Signal.NCCL_LATENCY))  # not a collective
    assert np.allclose(_signal(batch, "nccl:AllReduce", Signal.NCCL_LATENCY), [3.5e-4, 3.5e-4])


def test_the_llm_request_builds_the_section_3_graph() -> None:
    graph = ServiceGraph(retention_seconds=3600.0)
    graph.add(decode_file(TRACE).batch)
    kinds = dict(zip(graph.names.nodes, graph.names.kinds, strict=True))
    assert kinds["redis"] is kinds["qdrant/documents"] is NodeKind.VIRTUAL
    assert {"gpu:gpu-node-1/0", "gpu:gpu-node-1/1"} <= set(kinds)
    edges = set(graph_between(graph, Window(0, 2**62)).edges)
    chain = ["api-gateway", "router", "vllm-engine", "vllm-worker-0"]
    assert set(itertools.pairwise(chain)) <= edges
    assert {("router", "redis"), ("rag-retriever", "qdrant/documents"), ("vllm-engine", "vllm-worker-1")} <= edges


def test_the_webhook_maps_its_alerts_by_label_precedence() -> None:
    alerts = json.loads(WEBHOOK.read_text())["alerts"]
    assert sorted(str(service_of(a["labels"])) for a in alerts) == ["api-gateway", "vllm-engine"]  # job; pod name


def test_analyze_ranks_the_fixture_request_against_the_fixture_alerts() -> None:
    out = io.StringIO()
    assert analyze([str(TRACE)], str(WEBHOOK), out=out) == 0
    report = json.loads(out.getvalue())
    assert sorted(report["alerting"]) == ["api-gateway", "vllm-engine"]
    assert report["causes"] and all(c["path"][-1] in report["alerting"] for c in report["causes"])


def test_the_llm_logs_decode_with_their_nodes_ids_and_severity() -> None:
    result = decode_logs_json(LOGS.read_bytes())
    batch = result.batch
    assert result.rejected == 0 and len(batch) == 5
    services = [batch.strings[i] for i in batch.service.tolist()]
    assert services == ["vllm-engine"] * 3 + ["vllm-worker-1", "router"]  # the pod name, suffix stripped
    severity = dict(zip((body.split()[0] for body in batch.body), batch.severity.tolist(), strict=True))
    # sent as numbers; WARNING read from the body; the router's from its severity text alone
    assert severity == {"Engine": 9, "Received": 9, "WARNING": 13, "model_forward": 17, "route": 9}
    assert batch.is_error.tolist() == [False, False, False, True, False]
    joined = batch.span_id != 0
    assert joined.tolist() == [False, True, False, True, True]
    assert (batch.trace_id[joined] == TRACE_ID).all() and not batch.trace_id[~joined].any()
    assert int(batch.time_ns[4]) == 1_767_225_600_003_500_000  # only an observed time: it stands in


def _totals(table: Table, names: list[str]) -> dict[str, tuple[int, int]]:
    """(records, errors) per name (one per key, templates summed), over all windows."""
    out: dict[str, tuple[int, int]] = {}
    for name, row in zip(names, table.sums.sum(axis=1), strict=True):
        records, errors = out.get(name, (0, 0))
        out[name] = (records + int(row[LogSum.RECORDS]), errors + int(row[LogSum.ERRORS]))
    return out


def test_the_llm_logs_join_the_operations_of_their_spans() -> None:
    graph = ServiceGraph(retention_seconds=3600.0)
    graph.add(decode_file(TRACE).batch)
    graph.add_logs(decode_logs_json(LOGS.read_bytes()).batch)
    series = window_series(graph, 1_767_225_599_000_000_000, 1_767_225_599_000_000_000, 1_767_225_602_000_000_000)
    names = graph.names
    nodeop = series.log_ops.keys >> 32
    ops = [f"{names.nodes[names.nodeop_node[i]]}/{names.ops[names.nodeop_op[i]]}" for i in nodeop.tolist()]
    assert _totals(series.log_ops, ops) == {
        "vllm-engine/llm_request": (1, 0),
        "vllm-worker-1/model_forward": (1, 1),
        "router/route": (1, 0),  # a pod's record: its node from k8s.pod.name, its operation from the span
    }
    templates = [graph.templates.text(int(t)) for t in (series.log_ops.keys & 0xFFFFFFFF).tolist()]
    assert any(t.startswith("Received request") for t in templates)
    nodes = [names.nodes[i] for i in (series.logs.keys >> 32).tolist()]
    assert _totals(series.logs, nodes) == {"vllm-engine": (3, 0), "vllm-worker-1": (1, 1), "router": (1, 0)}


def test_the_llm_request_evidence_sits_on_the_section_6_nodes() -> None:
    graph = ServiceGraph(retention_seconds=3600.0)
    graph.add(decode_file(TRACE).batch)
    evidence = extract_evidence(graph, start_ns=1_767_225_599_000_000_000, end_ns=1_767_225_602_000_000_000)

    def measured(node: str) -> set[Fault]:
        row = evidence.score[evidence.index(node)]
        return {fault for fault in Fault if not math.isnan(row[F[fault]])}

    gpu = {Fault.GPU_MEMORY_BANDWIDTH, Fault.KV_CACHE_FRAGMENTATION}
    for k in (0, 1):
        assert gpu <= measured(f"gpu:gpu-node-1/{k}") and Fault.NCCL_COMMUNICATION not in measured(
            f"gpu:gpu-node-1/{k}"
        )
        assert Fault.NCCL_COMMUNICATION in measured(f"vllm-worker-{k}") and not gpu & measured(f"vllm-worker-{k}")
    assert Fault.LATENCY in measured("vllm-engine") and not (gpu | {Fault.NCCL_COMMUNICATION}) & measured("vllm-engine")
    communicator = dict(zip(evidence.nodes, evidence.communicator.tolist(), strict=True))
    assert communicator.pop("vllm-worker-0") == communicator.pop("vllm-worker-1") >= 0  # ranks under one engine
    assert set(communicator.values()) == {-1}
