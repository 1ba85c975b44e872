"""`MetricRows.add_numbers` keeps a metric's series per resource between requests: the same
columns as point-by-point `add`, whatever order or set of series a request brings, and bounded."""

from __future__ import annotations

import numpy as np
import pytest

from rca.telemetry import metric_rows
from rca.telemetry.metric_rows import MetricRows
from rca.telemetry.metrics import MetricBatch, MetricKind

T = 1_767_571_200_000_000_000
RESOURCE = {"service.name": "dcgm-exporter"}
NAME = "DCGM_FI_PROF_DRAM_ACTIVE"


def _gpu(k: int) -> dict[str, str]:
    return {"gpu": str(k % 8), "Hostname": f"node-{k // 8}", "exported_pod": f"vllm-engine-{k // 8}-5f6585d649-fnmft"}


def _columns(batch: MetricBatch) -> list[tuple[object, ...]]:
    s = batch.strings
    owner = [s[o] if o >= 0 else None for o in batch.owner.tolist()]
    return list(
        zip(
            batch.series.tolist(),
            [s[n] for n in batch.node.tolist()],
            owner,
            batch.placement.tolist(),
            batch.value.tolist(),
            strict=True,
        )
    )


def _by_point(attributes: list[dict[str, str]]) -> MetricBatch:
    rows = MetricRows()
    for k, attrs in enumerate(attributes):
        rows.add(NAME, MetricKind.GAUGE, RESOURCE, attrs, T, 0, float(k))
    return rows.build().batch


def _by_metric(attributes: list[dict[str, str]]) -> MetricBatch:
    rows = MetricRows()
    n = len(attributes)
    rows.add_numbers(NAME, MetricKind.GAUGE, RESOURCE, attributes, [T] * n, [0] * n, [float(k) for k in range(n)])
    return rows.build().batch


def test_repeated_reordered_and_changed_series_read_as_point_by_point() -> None:
    gpus = [_gpu(k) for k in range(16)]
    requests = [gpus, gpus, gpus[::-1], gpus[:5], [*gpus[:3], _gpu(99), *gpus[3:]]]
    for attributes in requests:
        assert _columns(_by_metric(attributes)) == _columns(_by_point(attributes))
    batch = _by_metric(requests[3])
    assert [batch.strings[n] for n in batch.node.tolist()][:2] == ["gpu:node-0/0", "gpu:node-0/1"]
    assert np.unique(batch.series).shape[0] == 5


def test_the_kept_series_stay_bounded_under_a_flood_of_new_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    cap = 1_000
    monkeypatch.setattr(metric_rows, "MAX_GROUPED_SERIES", cap)
    for round_ in range(30):  # a new resource every request: every group is new
        resource = {"service.name": f"exporter-{round_}"}
        attributes = [_gpu(k) for k in range(100)]
        rows = MetricRows()
        rows.add_numbers(NAME, MetricKind.GAUGE, resource, attributes, [T] * 100, [0] * 100, [1.0] * 100)
        assert len(rows.build().batch) == 100
        assert metric_rows._GROUPS.held <= cap
