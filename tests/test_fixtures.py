"""The hand-written fixtures: one LLM request following every section 6 convention, and a webhook."""

from __future__ import annotations

import io
import itertools
import json
import math
from pathlib import Path

import numpy as np

from ingest.files import decode_file
from rca.alerts import service_of
from rca.compose import analyze
from rca.graph import NodeKind, ServiceGraph
from rca.graphview import Window, graph_between
from rca.spans import Signal, SpanBatch

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
TRACE = FIXTURES / "llm-request.otlp.json"
WEBHOOK = FIXTURES / "alertmanager-llm-firing.json"


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
