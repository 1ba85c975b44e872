"""The accuracy benchmark's smoke suite, end to end through a live `rca serve` (as CI runs it)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.accuracy import run_accuracy_benchmark, run_suite
from benchmarks.cases import SMOKE_SCENARIOS


def test_smoke_suite_report_has_the_contract_shape_and_rca_leads(tmp_path: Path) -> None:
    report, breakdown, per_case = run_suite("smoke", ["rca", "threshold", "pagerank"], progress=False)
    assert report["suite"] == "smoke" and report["cases"] == len(SMOKE_SCENARIOS)
    assert set(report["methods"]) == {"rca", "threshold", "pagerank"}
    for scores in report["methods"].values():
        assert set(scores) == {"AC@1", "AC@3", "Avg@5", "fault@1", "seconds_per_case"}
        assert 0.0 <= scores["AC@1"] <= scores["AC@3"] <= 1.0
    rca = report["methods"]["rca"]
    assert rca["AC@1"] >= 0.7 and rca["fault@1"] >= 0.7  # deterministic cases: held-out seeds
    assert rca["AC@1"] > max(report["methods"][m]["AC@1"] for m in ("threshold", "pagerank"))
    assert "rca/gpu_memory_bandwidth" in breakdown
    assert len(per_case) == report["cases"]
    for method, scores in report["methods"].items():  # the per-case places add up to the table
        assert sum(row["rank"][method] == 1 for row in per_case) / len(per_case) == scores["AC@1"]
    assert all(row["top"]["rca"] == row["truth"] for row in per_case if row["rank"]["rca"] == 1)


def test_unknown_suite_or_method_is_a_clear_error(capsys: object) -> None:
    assert run_accuracy_benchmark("nope", ["rca"], None, None) == 2
    assert run_accuracy_benchmark("smoke", ["magic"], None, None) == 2


def test_plot_draws_a_png(tmp_path: Path) -> None:
    from benchmarks.plot import plot_report

    report = {"suite": "x", "cases": 1, "methods": {"rca": {"AC@1": 1.0, "AC@3": 1.0, "Avg@5": 1.0}}}
    breakdown = {"rca/latency": {"AC@1": 1.0, "AC@3": 1.0, "Avg@5": 1.0}}
    out = tmp_path / "plot.png"
    plot_report(report, breakdown, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    json.dumps(report)


def test_every_case_ends_its_alerts_after_it_is_scored() -> None:
    from benchmarks.accuracy import START_NS
    from benchmarks.cases import nezha_webhook, simulated_cases

    case = next(simulated_cases(("boutique-latency",), (101,), START_NS))
    fired = {a["fingerprint"] for w in case.webhooks for a in w["alerts"]}  # type: ignore[attr-defined]
    ended = {a["fingerprint"] for w in case.resolved for a in w["alerts"] if a["status"] == "resolved"}  # type: ignore[attr-defined]
    assert fired and fired <= ended
    firing, resolved = nezha_webhook("c", "frontend", START_NS), nezha_webhook("c", "frontend", START_NS, START_NS)
    assert (firing["status"], resolved["status"]) == ("firing", "resolved")
    (before,), (after,) = firing["alerts"], resolved["alerts"]  # type: ignore[misc]
    assert after["fingerprint"] == before["fingerprint"] and after["startsAt"] == before["startsAt"]
    assert (after["status"], after["endsAt"]) == ("resolved", before["startsAt"])
