"""`NodeEvidence` to JSON and back: exact (dtypes, shapes, NaN), and malformed text refused."""

from __future__ import annotations

import base64
import dataclasses
import io
import json

import numpy as np
import pytest

from rca.evidence.nodes import N_COLUMNS, NodeEvidence, extract_evidence
from storage.evidence_codec import evidence_from_json, evidence_to_json
from tests.spanfactory import T0
from tests.test_incidents_service import shop_graph


def _assert_same(a: NodeEvidence, b: NodeEvidence) -> None:
    for field in dataclasses.fields(NodeEvidence):
        x, y = getattr(a, field.name), getattr(b, field.name)
        if isinstance(x, np.ndarray):
            assert (x.dtype, x.shape) == (y.dtype, y.shape), field.name
            assert x.tobytes() == y.tobytes(), field.name  # bit for bit: NaN payloads and -0.0 too
        else:
            assert x == y and type(x) is type(y), field.name


def _extracted() -> NodeEvidence:
    graph = shop_graph()
    return extract_evidence(graph, start_ns=T0 - 300 * 10**9, end_ns=graph.newest_ns + 1)


def _made(nodes: int) -> NodeEvidence:
    """Evidence of `nodes` made-up nodes: every field of an extracted one, resized and refilled
    (NaN, -0.0 and infinities among the floats), so that a field added later is covered too."""
    rng = np.random.default_rng(7)
    score = rng.gamma(1.0, 2.0, (nodes, N_COLUMNS))
    score[rng.random(score.shape) < 0.4] = np.nan
    score[0, 0] = -0.0
    values: dict[str, object] = {}
    for field in dataclasses.fields(NodeEvidence):
        value = getattr(_extracted(), field.name)
        if isinstance(value, np.ndarray) and value.dtype == np.float64:
            derived = np.where(np.isnan(score), np.inf, score * 1e-3 + np.pi)
            values[field.name] = derived if value.ndim == 2 else rng.random(nodes)
        elif isinstance(value, np.ndarray):
            shape = (nodes, *value.shape[1:])
            values[field.name] = rng.integers(-1, nodes, shape).astype(value.dtype)
        elif value and isinstance(value[0], tuple):
            values[field.name] = tuple(tuple(f"s{i}.{j} \N{SNOWMAN}" for j in range(N_COLUMNS)) for i in range(nodes))
        else:
            values[field.name] = tuple(f"{field.name}-{i}" for i in range(nodes))
    values["score"] = score
    return NodeEvidence(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize("nodes", [1, 2, 40])
def test_round_trip_is_exact(nodes: int) -> None:
    evidence = _made(nodes)
    assert np.isnan(evidence.score).any()
    _assert_same(evidence, evidence_from_json(evidence_to_json(evidence)))


def test_round_trip_of_extracted_and_of_empty_evidence() -> None:
    graph = shop_graph()
    extracted = _extracted()
    assert extracted.nodes and np.isnan(extracted.score).any()
    _assert_same(extracted, evidence_from_json(evidence_to_json(extracted)))
    empty = extract_evidence(graph, start_ns=T0 + 10**12, end_ns=T0 + 2 * 10**12)
    assert empty.nodes == ()
    _assert_same(empty, evidence_from_json(evidence_to_json(empty)))


def _document() -> dict[str, object]:
    loaded: dict[str, object] = json.loads(evidence_to_json(_made(3)))
    return loaded


def _object_array() -> str:
    buffer = io.BytesIO()
    np.save(buffer, np.array([{"x": 1}], dtype=object), allow_pickle=True)
    return base64.b64encode(buffer.getvalue()).decode()


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda d: d.pop("score"), "missing ['score']"),
        (lambda d: d.update(extra=[]), "unknown ['extra']"),
        (lambda d: d.update(format=99), "format-1"),
        (lambda d: d.update(score={"npy": "not base64!"}), "unreadable array"),
        (lambda d: d.update(score={"npy": base64.b64encode(b"not npy").decode()}), "unreadable array"),
        (lambda d: d.update(score={"npy": _object_array()}), "unreadable array"),  # never unpickled
        (lambda d: d.update(score={"data": "x"}), "an array must be"),
    ],
)
def test_malformed_documents_are_refused(change: object, says: str) -> None:
    document = _document()
    change(document)  # type: ignore[operator]
    with pytest.raises(ValueError, match=r".*" + says.replace("[", r"\[").replace("]", r"\]")):
        evidence_from_json(json.dumps(document))


def test_text_that_is_not_json_is_refused() -> None:
    with pytest.raises(ValueError, match="not JSON"):
        evidence_from_json("{")
    with pytest.raises(ValueError, match="format-1"):
        evidence_from_json("[1, 2]")


def test_snapshots_stored_before_gpu_groups_and_engines_read_with_none() -> None:
    document = _document()
    nodes = len(document["nodes"])
    del document["lockstep"], document["engine"]
    evidence = evidence_from_json(json.dumps(document))
    assert evidence.lockstep.tolist() == [-1] * nodes
    assert evidence.engine.dtype == np.bool_ and not evidence.engine.any() and evidence.engine.shape == (nodes,)
