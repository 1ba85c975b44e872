"""The accuracy benchmark's smoke suite, end to end through a live `rca serve` (as CI runs it)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import matplotlib
import numpy as np
import pytest
from PIL import Image

from benchmarks.accuracy import (
    REPLAY_PAST_ALERT_NS,
    START_NS,
    _position,
    _replay,
    run_accuracy_benchmark,
    several_roots_line,
)
from benchmarks.cases import SMOKE_SCENARIOS, nezha_cases, simulated_cases
from benchmarks.nezha import default_root
from ingest.otlp_logs import decode_logs_protobuf
from ingest.otlp_proto import decode_protobuf
from rca.telemetry.logs import LogBatch


def test_smoke_suite_report_has_the_contract_shape_and_rca_leads(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    assert run_accuracy_benchmark("smoke", ["rca", "threshold", "pagerank"], str(path), None) == 0
    written = json.loads(path.read_text())  # the `--report` file, as docs/interface.md describes it
    assert set(written) == {"suite", "signals", "cases", "methods", "by_fault_type", "per_case"}
    report, breakdown, per_case = written, written["by_fault_type"], written["per_case"]
    assert report["suite"] == "smoke" and report["cases"] == len(SMOKE_SCENARIOS)
    assert report["signals"] == "traces+logs+metrics"  # the default: whatever the cases have
    assert set(report["methods"]) == {"rca", "threshold", "pagerank"}
    for method, scores in report["methods"].items():  # the contract's keys; rca's calibration beside them
        extra = {"mean_top1_probability"} if method == "rca" else set()
        assert set(scores) == {"AC@1", "AC@3", "Avg@5", "fault@1", "seconds_per_case"} | extra
        assert 0.0 <= scores["AC@1"] <= scores["AC@3"] <= 1.0
    rca = report["methods"]["rca"]
    assert rca["AC@1"] >= 0.7 and rca["fault@1"] >= 0.7  # deterministic cases: held-out seeds
    assert rca["AC@1"] > max(report["methods"][m]["AC@1"] for m in ("threshold", "pagerank"))
    assert "rca/gpu_memory_bandwidth" in breakdown
    assert len(per_case) == report["cases"]
    for method, scores in report["methods"].items():  # the per-case places add up to the table
        assert sum(row["rank"][method] == 1 for row in per_case) / len(per_case) == scores["AC@1"]
    assert all(row["top"]["rca"] in row["truth"] for row in per_case if row["rank"]["rca"] == 1)
    assert all(isinstance(row["simultaneous"], list) for row in per_case)  # its several roots' services
    probabilities = [row["probability"] for row in per_case]  # rca's top cause's
    assert all(0.0 < p <= 1.0 for p in probabilities)
    assert sum(probabilities) / len(per_case) == pytest.approx(rca["mean_top1_probability"])


def test_unknown_suite_or_method_is_a_clear_error(capsys: object) -> None:
    assert run_accuracy_benchmark("nope", ["rca"], None, None) == 2
    assert run_accuracy_benchmark("smoke", ["magic"], None, None) == 2
    assert run_accuracy_benchmark("smoke", ["rca"], None, None, signals="metrics") == 2


def test_plot_draws_a_panel_per_fault_type_and_the_reliability_diagram(tmp_path: Path) -> None:
    from benchmarks.plot import plot_report

    scores = {"AC@1": 1.0, "AC@3": 1.0, "Avg@5": 1.0}
    report = {"suite": "x", "cases": 2, "methods": {"rca": scores, "threshold": scores}}
    breakdown = {f"{m}/{t}": scores for m in ("rca", "threshold") for t in ("latency", "errors")}
    per_case = [{"rank": {"rca": 1, "threshold": 2}, "probability": p} for p in (0.3, 0.9)]
    dpi = float(matplotlib.rcParams["figure.dpi"])
    for name, rows, panels in (("bars.png", None, 3), ("all.png", per_case, 4)):  # all cases, each type, reliability
        plot_report(report, breakdown, tmp_path / name, rows)
        with Image.open(tmp_path / name) as image:
            assert image.format == "PNG" and image.size == (round(4 * panels * dpi), round(3 * dpi))  # 4 × 3 in each
            colours = {tuple(c) for c in np.asarray(image.convert("RGB")).reshape(-1, 3).tolist()}
        assert {(0x1F, 0x77, 0xB4), (0xFF, 0x7F, 0x0E)} <= colours  # one method's bars, then the other's
    plot_report(report, breakdown, tmp_path / "plot.svg", per_case)
    assert (tmp_path / "plot.svg").read_text().count("<svg") == 1


def test_every_case_ends_its_alerts_after_it_is_scored() -> None:
    from benchmarks.cases import nezha_webhook

    case = next(simulated_cases(("boutique-latency",), (101,), START_NS))
    fired = {a["fingerprint"] for w in case.webhooks for a in w["alerts"]}  # type: ignore[attr-defined]
    ended = {a["fingerprint"] for w in case.resolved for a in w["alerts"] if a["status"] == "resolved"}  # type: ignore[attr-defined]
    assert fired and fired <= ended
    firing, resolved = nezha_webhook("c", "frontend", START_NS), nezha_webhook("c", "frontend", START_NS, START_NS)
    assert (firing["status"], resolved["status"]) == ("firing", "resolved")
    (before,), (after,) = firing["alerts"], resolved["alerts"]  # type: ignore[misc]
    assert after["fingerprint"] == before["fingerprint"] and after["startsAt"] == before["startsAt"]
    assert (after["status"], after["endsAt"]) == ("resolved", before["startsAt"])


def test_replay_sends_the_spans_then_the_log_records_before_the_cut() -> None:
    case = next(simulated_cases(("boutique-latency",), (101,), START_NS))
    assert case.logs and next(simulated_cases(("boutique-latency",), (101,), START_NS, logs=False)).logs == ()
    cut = case.alert_ns + REPLAY_PAST_ALERT_NS
    n = 6
    logs = LogBatch(
        time_ns=np.array([cut - 3, cut - 2, cut - 1, cut, cut + 1, cut + 2], np.int64),
        service=np.zeros(n, np.int32),
        trace_id=np.zeros((n, 2), np.uint64),
        span_id=np.zeros(n, np.uint64),
        severity=np.full(n, 9, np.int8),
        body=tuple(f"record {i}" for i in range(n)),
        strings=("frontend",),
    )
    sent: list[tuple[str, bytes]] = []

    def recorder(signal: str) -> Callable[[bytes, float], bytes]:
        def export(message: bytes, timeout: float) -> bytes:
            sent.append((signal, message))
            return b""

        return export

    both_sides = replace(case, logs=(logs, logs.select(logs.time_ns > cut)))
    _replay(recorder("traces"), recorder("logs"), recorder("metrics"), both_sides)
    signals = [signal for signal, _ in sent]
    assert signals == sorted(signals, reverse=True) and signals[-1] == "logs"  # all spans first
    bodies = [b for signal, m in sent if signal == "logs" for b in decode_logs_protobuf(m).batch.body]
    assert bodies == ["record 0", "record 1", "record 2"]  # the second batch lies past the cut: nothing
    spans = [decode_protobuf(m).batch for signal, m in sent if signal == "traces"]
    assert max(int(b.end_ns.max()) for b in spans) < cut  # spans that ended by then: exported
    assert sum(map(len, spans)) == sum(len(b.ended_before(cut)) for b in case.batches)


def test_nezha_case_logs_move_with_their_spans_and_still_join() -> None:
    root = default_root()
    if not (root / "nezha-dev" / "cases.json").exists():
        pytest.skip(f"Nezha dataset absent: expected {root / 'nezha-dev'} (see shared/datasets/README.md)")
    case = next(nezha_cases(root, START_NS, limit=1))
    assert case.logs and sum(map(len, case.logs)) > 0
    spans = {
        int(s): tuple(t) for b in case.batches for s, t in zip(b.span_id.tolist(), b.trace_id.tolist(), strict=True)
    }
    joined = [(int(s), tuple(t)) for b in case.logs for s, t in zip(b.span_id, b.trace_id.tolist(), strict=True) if s]
    assert joined and all(spans.get(span) == trace for span, trace in joined)  # same span, same trace
    first = min(int(b.start_ns.min()) for b in case.batches)
    assert first <= min(int(b.time_ns.min()) for b in case.logs) and first == START_NS
    assert next(nezha_cases(root, START_NS, limit=1, logs=False)).logs == ()


def test_an_overlapping_fault_case_counts_either_root_as_held_out_scoring_does() -> None:
    case = next(simulated_cases(("llm-kv_cache_fragmentation-double",), (101,), START_NS))
    assert len(case.truth_services) == 2 and case.truth_faults[0] == case.fault_type
    primary, other = case.truth_services
    assert _position(["gateway", other, primary], case.truth_services) == 2
    assert _position([primary, other], case.truth_services) == 1
    assert _position(["gateway"], case.truth_services) is None
    single = next(simulated_cases(("llm-errors",), (101,), START_NS))
    assert single.truth_services == (single.truth_services[0],) and single.truth_faults == ("errors",)


def test_the_several_roots_line_counts_both_roots_named_and_single_faults_flagged() -> None:
    rows = [
        {"truth": ["a", "b"], "simultaneous": ["b", "a", "c"]},  # both named
        {"truth": ["a", "b"], "simultaneous": ["a"]},  # one only
        {"truth": ["a"], "simultaneous": []},
        {"truth": ["a"], "simultaneous": ["a", "d"]},  # a single fault read as two
        {"truth": ["a"]},  # a peer's row: not rca's
    ]
    assert several_roots_line(rows) == (
        "`simultaneous` named both roots in 1 of 2 two-root cases and appeared in 1 of 2 one-root cases"
    )
    assert several_roots_line([{"truth": ["a"]}]) is None
