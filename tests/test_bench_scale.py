"""`rca bench scale` at its smallest size, end to end through a live `rca serve` (shape only, no timings)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.scale import mesh_case, run_scale_benchmark
from rca.app.cli import main


def test_the_mesh_case_has_the_size_asked_for() -> None:
    batch, alert_ns = mesh_case(50, seed=1, rate=1.0, start_ns=0)
    services = {batch.strings[i] for i in set(batch.service.tolist())}
    assert len(services) == 50 and "frontend" in services
    assert 0 < alert_ns < int(batch.start_ns.max())


def test_scale_report_at_50_services(tmp_path: Path, capsys: object) -> None:
    out = tmp_path / "scale.json"
    argv = ["bench", "scale", "--sizes", "50", "--rate", "1", "--spans-per-second", "0", "--webhooks", "3"]
    assert main([*argv, "--report", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["suite"] == "scale" and report["webhooks_per_size"] == 3
    (row,) = report["rows"]
    assert row["services"] == 50 and row["spans"] > 1000 and row["candidates"] >= 10
    for kind in ("ranking", "webhook", "live_ranking"):
        assert 0 < row[f"{kind}_p50_ms"] <= row[f"{kind}_p95_ms"]


def test_bad_sizes_are_a_clear_error() -> None:
    assert run_scale_benchmark([3], 0, 1.0, 0.0, 1, None) == 2
